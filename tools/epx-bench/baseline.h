// Baseline: the EP dispatcher a plain NCCL user writes.
//  dispatch: a route kernel (per destination rank: which tokens go there, at which row), a permute
//            kernel (gather one row per (token, destination rank) into a send buffer grouped by
//            destination), the count exchange (grouped ncclSend/ncclRecv of one int per peer) and a
//            stream sync to learn the sizes, then grouped ncclSend/ncclRecv of the rows.
//  combine:  grouped ncclSend/ncclRecv of the rows back, then a weighted unpermute kernel (per
//            source token, sum over destination ranks of weight x row, FP32 accumulation, BF16 out;
//            the weight of a row is the sum of the token's gate weights on that rank).
// The expert is the identity (combine sends back the rows dispatch received).
#pragma once
#include <string>

#include "args.h"
#include "epx/testing/multigpu.h"
#include "routing.h"

namespace epxbench {

struct BaselineRankResult {
  double dispatchUs = 0;     // BF16, median over iterations on this rank
  double fp8DispatchUs = 0;  // FP8 x + FP32 scales; 0 when hidden % 128 != 0
  double combineUs = 0;
  bool checked = false;
  bool ok = true;            // combine output == sum_d weight(t, d) * x[t] (identity expert)
  std::string checkMsg;
};

// Collective over ctx's communicator; every rank calls it with its own routing.
BaselineRankResult runBaseline(const epx::testing::RankContext& ctx, const BenchShape& s,
                               const epx::ref::RankRouting& routing, const Options& opt,
                               uint64_t dataSeed);

}  // namespace epxbench
