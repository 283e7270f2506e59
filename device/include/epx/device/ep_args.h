// Plain structs shared by the host library and the EP kernels: window layout, per-group device
// state, async error record and kernel arguments. No CUDA types beyond pointers, so host C++
// (including CPU-only unit tests) can include it.
#pragma once
#include <nccl.h>

#include <cstdint>

namespace epx::dev {

constexpr int kMaxRanks = 8;       // one NVLink (LSA) domain per group in this release
constexpr int kMaxCtas = 160;      // >= SMs of any Hopper part
constexpr int kMaxTopk = 32;       // a warp holds one token's top-k slots
constexpr int kMaxExperts = 1024;  // layout kernel keeps per-warp expert masks in shared memory
constexpr int kMaxTokens = 65536;

enum OpKind : int { kOpDispatch = 0, kOpCombine = 1, kNumOpKinds = 2 };

// Where a device wait stalled (AsyncError::phase).
enum WaitPhase : int {
  kPhaseNone = 0,
  kPhaseCounts = 1,         // count exchange of ncclEpDispatchLayout
  kPhaseDispatchReady = 2,  // peer has not started its dispatch
  kPhaseDispatchData = 3,   // peer's dispatched rows did not arrive
  kPhaseCombineReady = 4,
  kPhaseCombineData = 5,
  kPhaseBadExpertId = 6     // not a wait: invalid top-k id seen on the device
};

constexpr int kLayoutChunk = 512;  // tokens per layout CTA

// Byte offsets inside every rank's window; identical on all ranks of a group. Receive arrays are
// indexed by deduplicated row: rows from source s start at recvBase[s] (Σ of earlier sources).
struct WindowLayout {
  uint64_t countFlags;   // u32 [kMaxRanks]: source s wrote its counts for layout #seq
  uint64_t readyFlags;   // u32 [kNumOpKinds][kMaxRanks]: rank s may receive op #seq of that kind
  uint64_t arrivals;     // u32 [kNumOpKinds][kMaxRanks]: CTAs of rank s done with op (cumulative)
  uint64_t counts;       // i32 [2 (parity)][kMaxRanks (source)][countStride]: rows to every rank,
                         //     then the source's counts for the receiver's local experts
  uint64_t recvX;        // [rows][hidden * 2 bytes]: BF16 rows, or FP8 rows packed at stride hidden
  uint64_t recvScales;   // f32 [rows][hidden / 128] (FP8 groups)
  uint64_t recvIdx;      // i32 [rows][K]: local expert index or -1
  uint64_t recvWeights;  // f32 [rows][K]
  uint64_t recvInfo;     // i32 [rows][2]: source rank, source token
  uint64_t recvPos;      // i32 [rows][K]: position among the source's tokens of that expert
  uint64_t combineX;     // BF16 [rows][hidden]: combine input in place (pull combine)
  uint64_t combineRecv;  // BF16 [nRanks (expert rank)][maxTokens (slot)][hidden] (push combine)
  uint64_t combineRecvW; // f32 [nRanks][maxTokens][K]
  uint64_t totalBytes;
  uint32_t countStride;  // ints per (parity, source) entry: kMaxRanks + Le, rounded up
  uint32_t rows;         // nRanks * maxTokens
};

// Per-group sequence numbers in device memory: every op reads seq+1 and its last CTA stores it,
// so CUDA graph replays keep counting without host involvement.
struct GroupState {
  uint32_t layoutSeq;
  uint32_t opSeq[kNumOpKinds];
  uint32_t doneCtas[kNumOpKinds];
};

// First device-side error of a group (mapped pinned host memory, readable while kernels hang).
struct AsyncError {
  int code;   // ncclResult_t; 0 = none
  int phase;  // WaitPhase
  int peer;   // stalled peer rank, or -1
  int rank;   // rank that saw it
  long long detail0, detail1;  // bad id: token and value
};

struct Common {
  ncclWindow_t window;
  WindowLayout wl;
  int rank, nRanks;
  int maxTokens, hidden, topk, numExperts, localExperts;
  GroupState* state;
  AsyncError* error;
  long long timeoutNs;
};

// Route of one handle (device arrays owned by the handle). Token-side values are local to the
// token's layout chunk (kLayoutChunk tokens); add the chunk's base to get the global value.
struct Route {
  int32_t* tokExpert;       // [maxTokens, K] validated global expert id or -1
  int32_t* tokExpertPos;    // [maxTokens, K] chunk-local position among this rank's tokens of that expert
  int32_t* tokSlot;         // [maxTokens, nRanks] chunk-local slot among this rank's tokens to rank d, or -1
  int32_t* chunkExpertBase; // [chunks, E] tokens of expert e in earlier chunks
  int32_t* chunkRankBase;   // [chunks, nRanks] tokens to rank d in earlier chunks
  int32_t* sendBase;        // [nRanks] first row of this rank's tokens in rank d's receive arrays
  int32_t* recvBase;        // [nRanks + 1] exclusive prefix of rows received from each source
  int32_t* expertCount;     // [Le] rows per local expert
  int32_t* expertStart;     // [Le + 1] segment starts in the output (expanded: aligned)
  int32_t* srcExpertOff;    // [nRanks, Le] rows of expert e from sources before s
  int32_t* totals;          // [8]: received rows, output rows, this rank's T, layout chunks done,
                            //      first invalid (token * kMaxTopk + slot), must start at INT_MAX
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
  int pull;           // x is the window's combineX: read peers' rows directly (deduplicated)
  const uint16_t* x;  // BF16 bits
  const uint16_t* bias0;
  const uint16_t* bias1;
  const float* topkWeights;
  uint16_t* out;
  float* combinedTopkWeights;
};

}  // namespace epx::dev
