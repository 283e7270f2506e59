// Plain structs shared by the host library and the EP kernels: the group's shape, route and kernel
// arguments (their transport and session parts: link_args.h, session_args.h). No CUDA types beyond
// pointers, so host C++ (including CPU-only unit tests) can include it.
#pragma once
#include <cstdint>

#include "epx/device/link_args.h"
#include "epx/device/protocol.h"
#include "epx/device/session_args.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

// Limits checked at group creation (host/src/core/config.cc) with a message.
constexpr int kMaxRanks = 1024;    // EP size; all per-rank state is sized by the group's nRanks
constexpr int kMaxCtas = 160;      // >= SMs of any Hopper part
constexpr int kMaxTopk = 32;       // a warp holds one token's top-k slots, one lane each
constexpr int kMaxExperts = 1024;  // layout kernel keeps per-warp expert masks in shared memory
constexpr int kMaxTokens = 65536;

// The shape of an EP group (equal on every rank).
struct EpShape {
  int maxTokens, hidden, topk, numExperts, localExperts;
};

// Arguments every EP kernel (layout, dispatch, combine) of a group takes.
struct EpCommon {
  LinkArgs link;
  SessionArgs session;
  char* userBase;  // the window at the caller's address (ncclMemAlloc): ncclGetLocalPointer returns
                   // another alias, so caller pointers are compared against this one
  WindowLayout wl;
  EpShape shape;
  int nodeSize;  // hybrid forwarding: ranks per node (protocol.h); 0: direct mode
};

// Named totals of a route (device memory, one per handle).
struct RouteTotals {
  int recvRows;     // rows received (deduplicated)
  int outRows;      // rows of the dispatch output (expanded: with alignment gaps)
  int numTokens;    // this rank's T of the layout
  int firstBadKey;  // first invalid (token * kMaxTopk + slot) seen by the layout, INT32_MAX if none
  uint32_t chunksDone;  // layout CTAs finished (the last one finalizes; lastCtaOf re-arms it)
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
  // Hybrid forwarding only (null in direct mode; protocol.h):
  int32_t* tokNodeSlot;     // [maxTokens, K] slot k is the first with its node, another node: the
                            //   token's slot among this rank's tokens to that node (global); else -1
  int32_t* nodeCount;       // [nodes] this rank's tokens to each other node (own node: 0)
  int32_t* chunkNodeBase;   // [chunks, nodes] of those, the tokens in earlier layout chunks (the
                            //   node sums' prefix combine waits for: rowsBeforeToken)
  int32_t* fwdCount;        // [nodes] records this rank forwarded from each source node (dispatch)
  uint64_t* fwdMask;        // [nodes * maxTokens] ranks of this node (bit = index in node) a record went to
  int32_t* fwdRowsTo;       // [nodes, nodeSize] rows this rank forwards from its rail peer on each source
                            //   node to each rank of its node (layout: protocol.h forwardedRun)
  int32_t* fwdRowsBase;     // [nodes, nodeSize] the first of those rows in that rank's receive arrays
  int32_t* fwdSlot;         // [nodes * maxTokens, nodeSize] a record's index j in the run to each rank
                            //   of this node it went to (fwdMask): its row there is fwdRowsBase + j
  int32_t* fwdExperts;      // [nodes * maxTokens, K] a forwarded record's expert ids in this node, else -1
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
  EpCommon c;
  Route r;
  const void* topkIdx;
  int idxIs64;
  int numTokens;
  LayoutSummary* summary;  // exact mode; nullptr in capacity mode
};

struct DispatchArgs {
  EpCommon c;
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
  EpCommon c;
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
