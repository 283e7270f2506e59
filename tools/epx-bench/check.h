// Correctness of one epx configuration against the CPU reference (epx::ref::dispatch/combine):
// row identity (srcInfo) and contents of BF16/FP8 dispatch, received weights/ids, per-expert
// counts/offsets, and the combined BF16 output.
#pragma once
#include <string>
#include <vector>

#include "epx_runner.h"
#include "routing.h"

namespace epxbench {

struct CheckResult {
  bool ok = true;
  std::string msg;  // first problems, "" when ok
};

// routing: every rank's check routing; caps: the captured outputs of the ranks with local[r] set
// (this process's ranks: in multi-process mode every process checks its own rank).
CheckResult checkEpx(const BenchShape& s, const EpxRunSpec& spec,
                     const std::vector<epx::ref::RankRouting>& routing,
                     const std::vector<EpxCapture>& caps, uint64_t checkSeed, const std::vector<bool>& local);

}  // namespace epxbench
