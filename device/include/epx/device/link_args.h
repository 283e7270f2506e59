// What the transport layer (transport.cuh) needs to reach the peers of one registered window:
// the window, the device communicator, this rank's place in the world and its NVLink (LSA) team,
// the GIN contexts, counters and signals, and the async error record. Every kernel argument struct
// embeds one (EP, low-latency, bucket and PP kernels; the GIN lifecycle kernels take it alone).
// Plain struct, no CUDA types beyond pointers, so host C++ (including CPU-only unit tests) can
// include it.
#pragma once
#include <nccl.h>

#include <cstdint>

namespace epx::dev {

// ncclDevComm travels to the kernels inside LinkArgs as opaque bytes, so that host C++ without
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

// Bytes of a network link's drain pad, after the user's bytes of its window: the drain's puts
// (launchDrainGin) copy it to the same place at each peer; its contents are never read.
constexpr uint64_t kLinkPadBytes = 16;

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
  kPhaseCombineFree = 12,    // network peer has not finished its previous combine (protocol.h readyReached)
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
  kPhaseBucketStage = 23,     // reduce-scatter, BF16 wire: a CTA of this rank did not convert its share of a chunk
  kPhaseGinGet = 24,          // this rank's own one-sided GIN reads did not complete (NCCL's flush timed out)
  kPhaseLbReady = 25,         // load balancing: peer has not entered the call
  kPhaseLbData = 26,          // load balancing: peer's prefetched rows did not arrive, or it did not finish
                              // reading this rank's slot gradients
  kPhaseLbBadMapping = 27,    // not a wait: a mapping entry outside [-1, numExperts) (slot skipped); the
                              // record names the slot's rank (peer), the slot (detail0) and the value (detail1)
  kPhaseEngramReady = 28,     // Engram fetch: peer has not entered the layer's fetch
  kPhaseEngramRequests = 29,  // Engram fetch: peer's request list did not arrive
  kPhaseEngramRows = 30,      // Engram fetch: the rows this rank asked the peer for did not arrive
  kPhaseEngramBadIndex = 31   // not a wait: an index outside [-1, numRows) (row zeroed); the record names
                              // the layer (peer), the entry (transport), the token (detail0), the value (detail1)
};

// How the stalled peer is reached (ErrorRecord::transport).
enum PeerTransport : int { kTransportLsa = 0, kTransportGin = 1 };

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

struct LinkArgs {
  alignas(16) unsigned char devComm[kDevCommBytes];  // ncclDevComm (opaque here)
  ncclWindow_t window;  // the communicator's one epx window, shared by all its objects
  uint64_t region;      // this object's region: its window offset (every offset below, and every
                        // offset a kernel passes to the transport, is relative to it)
  uint32_t firstSignal;   // this object's GIN signals: ids [firstSignal, firstSignal + ginSignals)
  uint32_t firstCounter;  // this object's GIN counters: ids [firstCounter, firstCounter + ginCounters)
  uint64_t flags;       // region offset of the synchronization words (u32 flags, one per id; GIN
                        // peers signal the same ids instead)
  int rank, nRanks, lsaRank, lsaSize;
  int ginContexts;      // GIN contexts of the device communicator (0: every peer is an LSA peer)
  int ginCounters;      // this object's GIN counters per context: one per CTA of any kernel that puts
  int ginSignals;       // this object's GIN signals per context (its protocol's and its drain signals)
  uint64_t* ginPosted;  // [ginContexts][ginCounters] GIN puts posted so far by CTA b on context ctx (cumulative)
  AsyncError* error;
  long long timeoutNs;
  unsigned long long timeoutCycles;  // the same timeout in SM clock cycles at the device's peak clock: the
                                     // bound of NCCL's own timed waits (2.32+), which count clock64()
  uint32_t* beacons;    // [kBeaconCtas + 1] mapped host words, or null (off)
};

}  // namespace epx::dev
