// Memory floor of one rank's local row work (docs/bench.md, "Memory floor"): what this rank's
// dispatch must write into its outputs (deduplicated: one row per received token; expanded: one
// row per received token x local expert, grouped by expert) and what its combine must read back
// (the same rows, summed per received token), timed two ways in the same run as epx:
//   copy engines: one device-to-device cudaMemcpyAsync of the same byte count (no SM);
//   SM: a plain kernel with epx's CTA count: a warp per received row loads each 16-byte vector of
//       it once and stores it to every output row (dispatch), or loads all of a row's output rows
//       and sums them in FP32 into one BF16 row (combine).
// epx's time over these is how close it runs to the memory speed its SMs allow.
#pragma once
#include <cstdint>
#include <vector>

#include "epx/ref/ep_ref.h"
#include "epx/testing/multigpu.h"
#include "routing.h"

namespace epxbench {

// Rows of one rank's local work: received row j (source rank order, then token order) has the
// output rows outRows[first[j] .. first[j + 1]).
struct MemFloorWork {
  int rowBytes = 0;                 // BF16 row
  bool expanded = false;            // else one output row per received row
  std::vector<int32_t> first;       // [received rows + 1]
  std::vector<int32_t> outRows;     // [output rows] (expanded: positions grouped by local expert)
  int64_t receivedRows() const { return first.empty() ? 0 : int64_t(first.size()) - 1; }
  int64_t outputRows() const { return int64_t(outRows.size()); }
};

// Work of rank `rank` for the layout (expanded or deduplicated) under `routing` (every rank's).
MemFloorWork memFloorWork(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing, int rank,
                          bool expanded);

struct MemFloorTimes {
  double dispatchBytes = 0, combineBytes = 0;  // bytes written by dispatch / read by combine
  double dispatchCeUs = 0, dispatchSmUs = 0;   // medians
  double combineCeUs = 0, combineSmUs = 0;
  int ctas = 0;
};

// Times the floor on this rank's device (ctx.stream) with `ctas` CTAs, median of `iters` after a
// warm-up. Not collective.
MemFloorTimes runMemFloor(const epx::testing::RankContext& ctx, const MemFloorWork& work, int ctas, int iters);

}  // namespace epxbench
