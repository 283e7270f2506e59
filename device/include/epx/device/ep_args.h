// Plain structs shared by the host library and the EP kernels: per-group device state, async error
// record, route and kernel arguments. No CUDA types beyond pointers, so host C++ (including
// CPU-only unit tests) can include it.
#pragma once
#include <nccl.h>

#include <cstdint>

#include "epx/device/protocol.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

// Limits checked at group creation (host/src/core/config.cc) with a message.
constexpr int kMaxRanks = 1024;    // EP size; all per-rank state is sized by the group's nRanks
constexpr int kMaxCtas = 160;      // >= SMs of any Hopper part
constexpr int kMaxTopk = 32;       // a warp holds one token's top-k slots, one lane each
constexpr int kMaxExperts = 1024;  // layout kernel keeps per-warp expert masks in shared memory
constexpr int kMaxTokens = 65536;
// ncclDevComm travels to the kernels inside Common as opaque bytes, so that host C++ without
// nccl_device.h can build the arguments. Its size differs between NCCL versions (200 bytes in
// 2.28.9, more from 2.30 on): CMake measures sizeof(ncclDevComm) of the headers it chose and
// defines EPX_NCCL_DEVCOMM_BYTES (rounded up to 16; cmake/FindNccl.cmake, target epx::nccl);
// devcomm.cu checks it against the headers with a static_assert.
#ifndef EPX_NCCL_DEVCOMM_BYTES
#error "EPX_NCCL_DEVCOMM_BYTES is not defined: link the target epx::nccl (cmake/FindNccl.cmake)"
#endif
constexpr int kDevCommBytes = EPX_NCCL_DEVCOMM_BYTES;
static_assert(kDevCommBytes > 0 && kDevCommBytes % 16 == 0, "EPX_NCCL_DEVCOMM_BYTES: a multiple of 16");
#ifdef EPX_NCCL_BUILD_VERSION_CODE
static_assert(NCCL_VERSION_CODE == EPX_NCCL_BUILD_VERSION_CODE,
              "nccl.h is not the one CMake chose: another NCCL's include folder comes first");
#endif

enum OpKind : int { kOpDispatch = 0, kOpCombine = 1, kNumOpKinds = 2 };

// Where a device wait stalled (ErrorRecord::phase).
enum WaitPhase : int {
  kPhaseNone = 0,
  kPhaseCounts = 1,         // count exchange of ncclEpDispatchLayout
  kPhaseDispatchReady = 2,  // peer has not started its dispatch
  kPhaseDispatchData = 3,   // peer's dispatched rows did not arrive
  kPhaseCombineReady = 4,
  kPhaseCombineData = 5,
  kPhaseBadExpertId = 6,    // not a wait: invalid top-k id seen on the device
  kPhaseGinCompletion = 7,  // this rank's own GIN puts were not completed locally (network/proxy stalled)
  kPhaseLlDispatchFree = 8,  // low-latency: peer has not received the previous dispatch of this bank
  kPhaseLlDispatchData = 9,  // low-latency: peer's dispatch rows/counts did not arrive
  kPhaseLlCombineFree = 10,
  kPhaseLlCombineData = 11,
  kPhaseCombineFree = 12,    // network peer has not finished its previous combine (session.cuh ginReadyTarget)
  kNumPhases = 13
};

// Waits of the bucket collectives and PP channels (values apart from the EP phases above).
enum CollPhase : int {
  kPhaseBucketReady = 16,    // peer has not started the bucket collective
  kPhaseBucketData = 17,     // peer's contribution to the bucket collective did not arrive
  kPhasePpSlot = 18,         // PP send: the receiving peer has not freed a slot
  kPhasePpData = 19,         // PP recv: the sending peer's message did not arrive
  kPhasePpRecvTooSmall = 20,  // not a wait: a PP message larger than the receive buffer (dropped)
  kPhaseLinkDrain = 21,       // destroy: the peer's drain signal did not arrive (it has not destroyed)
  kPhaseBucketFree = 22,      // reduce-scatter: peer has not finished its previous bucket collective
  kPhaseBucketStage = 23      // reduce-scatter, BF16 wire: a CTA of this rank did not convert its share of a chunk
};

// How the stalled peer is reached (ErrorRecord::transport).
enum PeerTransport : int { kTransportLsa = 0, kTransportGin = 1 };

// Per-group device state (device memory). Sequence numbers: every op reads seq+1 and its last CTA
// stores it, so CUDA graph replays keep counting without host involvement.
// CTAs whose staging progress a kernel can follow chunk by chunk (GroupState::stageProgress).
constexpr int kStageProgressCtas = 32;

struct GroupState {
  uint32_t layoutSeq;
  uint32_t opSeq[kNumOpKinds];
  uint32_t doneCtas[kNumOpKinds];
  uint32_t stagedCtas[kNumOpKinds][kMaxPutRounds];  // CTAs done staging a put round (OpSession::lastToStage)
  // CTA b's staged chunks of the running op, tagged with its sequence number: (seq << 32) | chunks
  // (the bucket reduce-scatter's BF16 conversion; monotonic, so never reset).
  uint64_t stageProgress[kStageProgressCtas];
};

// One device-side error. `code` is published last (release), after the fields it describes.
struct ErrorRecord {
  int code;        // ncclResult_t; 0 = none
  int phase;       // WaitPhase
  int peer;        // stalled peer rank, or -1
  int rank;        // rank that saw it
  int transport;   // PeerTransport of the peer
  int pad;
  long long detail0, detail1;  // bad id: token and value; timeout: expected and seen values
};

// Device-side errors of a group (mapped pinned host memory, readable while kernels hang). The
// first timeout and the first bad expert id are kept separately: a bad id (capacity mode: the slot
// is dropped and work goes on) never hides a later timeout, and the timeout is reported first.
struct AsyncError {
  int timeoutClaim;  // 0 until a thread claims `timeout`
  int badIdClaim;
  ErrorRecord timeout;
  ErrorRecord badId;
};

// Progress beacons (debugging hangs; EPX_DEBUG_BEACONS, see host/src/beacons.cc): CTA b (< kBeaconCtas)
// of a layout/dispatch/combine kernel stores (kernel << 24) | (step << 16) | (sequence & 0xffff)
// into word b of a host file that anyone can read while the kernel runs; word kBeaconCtas counts
// the dispatch and combine kernels started. Steps are BeaconStep.
constexpr int kBeaconCtas = 256;
enum BeaconKernel : uint32_t { kBeaconLayout = 1, kBeaconDispatch = 2, kBeaconCombine = 3 };
enum BeaconStep : uint32_t {
  kStepStart = 1,        // kernel entered
  kStepReady = 2,        // peers ready (begin() done)
  kStepSent = 3,         // this CTA's stores/puts posted
  kStepArrived = 4,      // every source's data arrived (waitArrivals done)
  kStepCompleting = 5,   // waiting for this CTA's GIN puts to complete locally
  kStepCompleted = 6,
  kStepEnd = 7
};

struct Common {
  alignas(16) unsigned char devComm[kDevCommBytes];  // ncclDevComm (opaque here)
  ncclWindow_t window;
  char* userBase;  // the window at the caller's address (ncclMemAlloc): ncclGetLocalPointer returns
                   // another alias, so caller pointers are compared against this one
  WindowLayout wl;
  int rank, nRanks, lsaRank, lsaSize;
  int ginContexts;   // GIN contexts of the device communicator (0: every peer is an LSA peer)
  int nCtas;         // CTAs of dispatch/combine, equal on every rank
  int maxTokens, hidden, topk, numExperts, localExperts;
  GroupState* state;
  uint32_t* arrived;  // [kNumOpKinds][nRanks] GIN rows expected so far from each source (cumulative)
  uint64_t* ginPosted;  // [ginContexts][ginCounters] GIN puts posted so far by CTA b on context ctx (cumulative)
  int ginCounters;      // GIN counters per context: one per CTA of any kernel that puts (ginCounterCount)
  int ginSignals;       // GIN signals per context (ginSignalCount; low-latency groups: llTotalWords)
  AsyncError* error;
  long long timeoutNs;
  uint32_t* beacons;  // [kBeaconCtas + 1] mapped host words, or null (off)
};

// Named totals of a route (device memory, one per handle).
struct RouteTotals {
  int recvRows;     // rows received (deduplicated)
  int outRows;      // rows of the dispatch output (expanded: with alignment gaps)
  int numTokens;    // this rank's T of the layout
  int firstBadKey;  // first invalid (token * kMaxTopk + slot) seen by the layout, INT32_MAX if none
  int chunksDone;   // layout CTAs finished (the last one finalizes and re-arms it)
};

// Route of one handle (device arrays owned by the handle). Token-side values are local to the
// token's layout chunk (kLayoutChunk tokens); add the chunk's base to get the global value.
struct Route {
  int32_t* tokExpert;       // [maxTokens, K] validated global expert id or -1
  int32_t* tokExpertPos;    // [maxTokens, K] chunk-local position among this rank's tokens of that expert
  int32_t* tokSlot;         // [maxTokens, K] slot k is the first with its destination rank: chunk-local
                            //   slot among this rank's tokens to that rank; else -1
  int32_t* chunkExpertBase; // [chunks, E] tokens of expert e in earlier chunks
  int32_t* chunkRankBase;   // [chunks, nRanks] tokens to rank d in earlier chunks
  int32_t* sendCount;       // [nRanks] rows this rank sends to rank d
  int32_t* sendBase;        // [nRanks] first row of this rank's tokens in rank d's receive arrays
  int32_t* stageBase;       // [nRanks] first staging row of rows to network rank d (GIN), else -1
  int32_t* recvBase;        // [nRanks + 1] exclusive prefix of rows received from each source
  int32_t* recvGinBase;     // [nRanks + 1] the same over network (GIN) sources only: NVLink sources
                            //   add no rows (combine's put rounds cut these rows, protocol.h)
  int32_t* expertCount;     // [Le] rows per local expert
  int32_t* expertStart;     // [Le + 1] segment starts in the output (expanded: aligned)
  int32_t* srcExpertOff;    // [nRanks, Le] rows of expert e from sources before s
  RouteTotals* totals;
  int32_t* recvExpRows;     // [rows, K] expanded output row of each received row's top-k slot, or -1
  int expanded;
  int alignment;
};

// Host-visible result of an exact-mode layout (mapped pinned memory).
struct LayoutSummary {
  int numRows;
  int numTokens;
  int badToken;       // first invalid token, -1 if none
  int badSlot;
  long long badValue;
  int badKind;        // 1 = out of range, 2 = repeated within the token
  int expertCounts[kMaxExperts];
};

struct LayoutArgs {
  Common c;
  Route r;
  const void* topkIdx;
  int idxIs64;
  int numTokens;
  LayoutSummary* summary;  // exact mode; nullptr in capacity mode
};

struct DispatchArgs {
  Common c;
  Route r;
  int zeroCopy;       // deduplicated outputs are the window's receive arrays: no receive copy
  const char* x;
  const float* xScales;
  const float* topkWeights;
  int xRowBytes;      // hidden * dtype size
  int scaleRowBytes;  // hidden / 128 * 4 for FP8, else 0
  int zeroGaps;
  char* recvX;
  float* recvScales;
  float* recvTopkWeights;
  int32_t* recvTopkIdx;
  int32_t* recvSrcInfo;
  int32_t* expertCounts;
  int32_t* expertOffsets;
  int32_t* numRecvRows;
};

struct CombineArgs {
  Common c;
  Route r;
  int pull;           // x is the window's combineX: NVLink peers' rows are read in place
  int fp32;           // partial sums travel as FP32 (exact combine precision)
  const uint16_t* x;  // BF16 bits
  const uint16_t* bias0;
  const uint16_t* bias1;
  const float* topkWeights;
  uint16_t* out;
  float* combinedTopkWeights;
};

}  // namespace epx::dev
