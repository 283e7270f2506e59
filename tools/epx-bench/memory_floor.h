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

#include "epx/testing/multigpu.h"
#include "memory_floor_work.h"

namespace epxbench {

// Times the floor on this rank's device (ctx.stream) with `ctas` CTAs, median of `iters` after a
// warm-up. Not collective.
MemFloorTimes runMemFloor(const epx::testing::RankContext& ctx, const MemFloorWork& work, int ctas, int iters);

}  // namespace epxbench
