// epx-bench --algo bucket | pp: bus bandwidth of the bucket collectives (bucket.h: all-gather,
// reduce-scatter FP32 and with a BF16 wire, all-reduce) and of PP send/recv (pp.h: a ring, send
// and receive on one stream, and with the receives on a second stream), against NCCL's own calls
// (ncclAllGather / ncclReduceScatter / ncclAllReduce, grouped ncclSend/ncclRecv) in the same run.
// Bus bandwidth as nccl-tests defines it: all-gather and reduce-scatter algbw x (R-1)/R,
// all-reduce algbw x 2(R-1)/R, send/recv algbw; algbw = bytes of the whole tensor (PP: of one
// message) / time per call of the slowest rank. With a network rate (--net-gbps or
// EPX_GIN_EMU_GBPS: fake nodes with the emulated NIC), each line also gives the bus bandwidth as a
// share of that rate (the "floor"); NCCL's calls go through its socket transport there, so compare
// epx with the floor, not with them. Results are not checked here (the bucket and pp test suites
// do that); every call must succeed and no async error may be left.
#pragma once
#include "args.h"
#include "epx/testing/multigpu.h"

namespace epxbench {

// Collective over mg's ranks; rank 0 (printer) prints. Returns the process exit code.
int runCollectives(const Options& opt, epx::testing::MultiGpu& mg, int nRanks, bool printer);

}  // namespace epxbench
