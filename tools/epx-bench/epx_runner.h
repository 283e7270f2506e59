// epx under test: group and handle creation, the timed loop (layout, BF16 dispatch, combine, FP8
// dispatch per iteration, each timed with CUDA events) and the correctness run whose outputs are
// downloaded for the CPU-reference check (check.h).
//
// Buffers: "window" (deduplicated layout only) passes the group's window arrays from
// ncclEpGroupGetBuffers as dispatch outputs (zero-copy: senders store rows straight into them) and
// the window's combineX as combine input (peers pull it); "user" passes buffers of the benchmark's
// own (cudaMalloc, sized at ncclEpHandleGetCapacity), so epx copies out of / into its window.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "common.h"
#include "gin_traffic.h"
#include "epx/testing/multigpu.h"
#include "routing.h"

namespace epxbench {

struct EpxRunSpec {
  int layout = ncclEpLayoutDeduplicated;
  int mode = ncclEpModeCapacity;
  int align = 1;
  bool window = true;  // zero-copy window buffers (deduplicated layout only)
  bool fp8 = true;     // group created with fp8Dispatch = 1
  int forwardNodeSize = 0;  // hybrid (--hybrid R): combine sums each node's partials first
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

struct EpxTimes {
  double layoutUs = 0, bf16Us = 0, fp8Us = 0, combineUs = 0;  // medians on this rank
};

// hybridNodeSize > 0: hybrid forwarding over nodes of that many ranks (ncclEpConfig_t.forwardNodeSize).
ncclEpGroup_t createGroup(const epx::testing::RankContext& ctx, const BenchShape& s, int sms, bool fp8,
                          int hybridNodeSize = 0);
ncclEpHandle_t createHandle(ncclEpGroup_t group, const EpxRunSpec& spec);

// One rank's buffers for one (group, handle, spec). timed() and check() are collective: every rank
// calls them inside the same MultiGpu::run.
// GIN traffic of one call of each operation on this rank (gin_traffic.h).
struct EpxGinCalls {
  bool measured = false;
  GinTraffic layout, bf16, combine, fp8;
};

class EpxRank {
 public:
  EpxRank(ncclEpGroup_t group, ncclEpHandle_t handle, const BenchShape& s, const EpxRunSpec& spec,
          const Options& opt);
  ~EpxRank();
  EpxRank(const EpxRank&) = delete;
  EpxRank& operator=(const EpxRank&) = delete;

  EpxTimes timed(const epx::testing::RankContext& ctx, const epx::ref::RankRouting& routing, uint64_t dataSeed);
  // After timed(): one more layout, BF16 dispatch, combine and FP8 dispatch on the same routing,
  // each alone between a counter reset and a stream sync. Collective. Needs one rank per process.
  EpxGinCalls ginPerCall(const epx::testing::RankContext& ctx, const GinStatsReader& gin);
  // Fresh routing and data, outputs poisoned first; downloads what check.h compares.
  EpxCapture check(const epx::testing::RankContext& ctx, const epx::ref::RankRouting& routing, uint64_t dataSeed);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace epxbench
