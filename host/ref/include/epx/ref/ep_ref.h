// CPU reference of epx EP dispatch/combine routing and arithmetic (no CUDA).
//
// It defines what the GPU kernels must produce: which source (rank, token) lands in which output
// row, per-expert counts and aligned offsets, received top-k ids/weights, and the combine sum with
// the same FP32 accumulation order as the device (per destination rank: local experts in slot
// order, rounded to BF16 for the wire; then destination ranks in ascending order, then bias0, bias1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace epx::ref {

struct EpShape {
  int nRanks = 0;
  int hidden = 0;
  int topk = 0;
  int numExperts = 0;
  int expertAlignment = 1;  // expanded layout only
  bool expanded = true;     // false: deduplicated layout
  bool fp32Partials = false;  // combine: per-rank partial sums stay FP32 (ncclEpCombineFp32)
  int localExperts() const { return numExperts / nRanks; }
};

// Router decision of one rank: topk ids [T, K], -1 = unused slot; weights [T, K].
struct RankRouting {
  int numTokens = 0;
  std::vector<int64_t> topkIdx;
  std::vector<float> topkWeights;
};

// Dispatch result on one rank (the receiving, expert-owning side).
struct RankDispatch {
  int numRows = 0;                     // expanded: incl. alignment gaps
  int numTokens = 0;                   // deduplicated (token, rank) pairs received
  std::vector<int32_t> srcRank;        // [numRows]; -1 for gap rows
  std::vector<int32_t> srcToken;       // [numRows]; -1 for gap rows
  std::vector<int32_t> srcSlot;        // [numRows] expanded: top-k slot of the row's expert; dedup: -1
  std::vector<int32_t> expertCounts;   // [Le]
  std::vector<int32_t> expertOffsets;  // [Le + 1]
  std::vector<int32_t> recvTopkIdx;    // dedup: [numRows, K] local expert or -1
  std::vector<float> recvWeights;      // expanded: [numRows] (0 for gaps); dedup: [numRows, K]
};

// Validates ids of one rank: range [-1, E) and no repeat within a token. Empty string = valid.
std::string validateRouting(const EpShape& s, const RankRouting& r);

// Deduplicated receive rows of `rank` from `src`, in source token order.
std::vector<int32_t> tokensSentTo(const EpShape& s, const RankRouting& src, int rank);

// Dispatch routing for every rank (index = receiving rank).
std::vector<RankDispatch> dispatch(const EpShape& s, const std::vector<RankRouting>& routing);

// How the destination ranks' partial sums of a token come back to its source. Direct mode (the
// default, reduceRanksPerNode = 0): each rank's partial travels on its own. Hybrid mode with
// reduction at the forwarder: ranks are grouped into nodes of reduceRanksPerNode consecutive ranks,
// and for every node but the source's, the rank on the source's rail there sums that node's
// partials in FP32, in ascending rank order, and sends one node partial (rounded like a rank
// partial: BF16, or FP32 with fp32Partials in the expanded layout); the source's own node's
// partials come one by one. reduceRanksPerNode = 1 or = nRanks gives direct mode's bits.
struct CombinePath {
  int reduceRanksPerNode = 0;
};

// Combine: expertOut[d] is rank d's BF16 expert output [numRows, H] in the dispatch layout
// (bits). bias0/bias1 per source rank [T, H] BF16 bits, or empty. Returns per source rank the
// BF16 [T, H] result: the partials (rank partials, or node partials, see CombinePath) accumulated
// in FP32 in ascending rank (node) order, then bias0, bias1, rounded to BF16 once.
std::vector<std::vector<uint16_t>> combine(const EpShape& s, const std::vector<RankRouting>& routing,
                                           const std::vector<RankDispatch>& disp,
                                           const std::vector<std::vector<uint16_t>>& expertOut,
                                           const std::vector<std::vector<uint16_t>>& bias0,
                                           const std::vector<std::vector<uint16_t>>& bias1,
                                           const CombinePath& path = {});

// Combined top-k weights per source rank [T, K]: weight of slot k taken from the row of its
// expert's rank in `recvWeights[d]` (layout as RankDispatch::recvWeights); 0 for masked slots.
std::vector<std::vector<float>> combineWeights(const EpShape& s,
                                               const std::vector<RankRouting>& routing,
                                               const std::vector<RankDispatch>& disp,
                                               const std::vector<std::vector<float>>& recvWeights);

}  // namespace epx::ref
