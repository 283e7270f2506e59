// epx under test: group and handle creation, the timed loop (layout, BF16 dispatch, combine, FP8
// dispatch per iteration, each timed with CUDA events) and the correctness run whose outputs are
// downloaded for the CPU-reference check (check.h).
#pragma once
#include <string>
#include <vector>

#include "args.h"
#include "common.h"
#include "epx/testing/multigpu.h"
#include "routing.h"

namespace epxbench {

struct EpxRunSpec {
  int layout = ncclEpLayoutDeduplicated;
  int mode = ncclEpModeCapacity;
  int align = 1;
  bool fp8 = true;  // group created with fp8Dispatch = 1
};

// Outputs of the check run on one rank (rows [0, numRows) only).
struct EpxCapture {
  bool valid = false;
  std::string error;               // why the outputs could not be read
  int capacity = 0;                // ncclEpHandleGetCapacity
  int numRows = -1;                // numRecvRows written by the device
  int exactRows = -1, exactTokens = -1;  // exact mode: ncclEpHandleGetCounts
  std::vector<int32_t> exactCounts;
  std::vector<int32_t> counts, offsets, srcInfo, topkIdx;
  std::vector<float> weights;
  std::vector<uint16_t> x;         // BF16 dispatch rows
  std::vector<uint8_t> x8;         // FP8 dispatch rows
  std::vector<float> scales;
  std::vector<uint16_t> out;       // combine of the expert outputs (randgen kTensorExpertOut rows)
};

struct EpxRankResult {
  double layoutUs = 0, bf16Us = 0, fp8Us = 0, combineUs = 0;  // medians on this rank
  EpxCapture cap;
};

ncclEpGroup_t createGroup(const epx::testing::RankContext& ctx, const BenchShape& s, int sms, bool fp8);
ncclEpHandle_t createHandle(ncclEpGroup_t group, const EpxRunSpec& spec);

// Collective over the ranks. `timed`/`check`: this rank's routing for the timed loop and for the
// check run; data seeds pick the token values (randgen.h).
EpxRankResult runEpx(const epx::testing::RankContext& ctx, ncclEpHandle_t handle, const BenchShape& s,
                     const EpxRunSpec& spec, const epx::ref::RankRouting& timed,
                     const epx::ref::RankRouting* check, const Options& opt, uint64_t timedSeed,
                     uint64_t checkSeed);

}  // namespace epxbench
