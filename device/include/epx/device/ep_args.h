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

// Byte offsets inside every rank's window; identical on all ranks of a group.
struct WindowLayout {
  uint64_t countFlags;   // u32 [kMaxRanks]: source s wrote its counts for layout #seq
  uint64_t readyFlags;   // u32 [kNumOpKinds][kMaxRanks]: rank s may receive op #seq of that kind
  uint64_t dataFlags;    // u32 [kNumOpKinds][kMaxRanks][kMaxCtas]: CTA c of rank s sent op #seq
  uint64_t counts;       // i32 [2 (parity)][kMaxRanks][countStride]: rows, then per-expert counts
  uint64_t dispatchRegion;  // [nRanks (source)][maxTokens (slot)] rows of dispatchRowBytes
  uint64_t combineRegion;   // [nRanks (expert rank)][maxTokens (slot)] rows of combineRowBytes
  uint64_t totalBytes;
  uint32_t countStride;      // ints per (parity, source) entry
  uint32_t dispatchRowBytes; // payload (x bytes, then FP8 scales) + meta
  uint32_t dispatchMetaOffset;
  uint32_t combineRowBytes;  // BF16 row + top-k weights
  uint32_t combineMetaOffset;
};

// Dispatch row meta (at dispatchMetaOffset): int32 srcToken, int32 expert[K], float weight[K],
// int32 expertPos[K] (position of the token among this source's tokens of that expert).
// Combine row meta (at combineMetaOffset): float weight[K].

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

// Route of one handle (device arrays owned by the handle).
struct Route {
  int32_t* tokExpert;     // [maxTokens, K] validated global expert id or -1
  int32_t* tokExpertPos;  // [maxTokens, K] position among this rank's tokens of that expert
  int32_t* tokSlot;       // [maxTokens, nRanks] slot in rank d's receive region, or -1
  int32_t* recvBase;      // [nRanks + 1] exclusive prefix of rows received from each source
  int32_t* expertCount;   // [Le] rows per local expert
  int32_t* expertStart;   // [Le + 1] segment starts in the output (expanded: aligned)
  int32_t* srcExpertOff;  // [nRanks, Le] rows of expert e from sources before s
  int32_t* totals;        // [4]: received tokens, output rows, this rank's T, unused
  int32_t* recvExpRows;   // [nRanks * maxTokens, K] expanded output row per top-k slot, or -1
  uint32_t* recvLocalMask;// [nRanks * maxTokens] top-k slots local to this rank
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
  const uint16_t* x;  // BF16 bits
  const uint16_t* bias0;
  const uint16_t* bias1;
  const float* topkWeights;
  uint16_t* out;
  float* combinedTopkWeights;
};

}  // namespace epx::dev
