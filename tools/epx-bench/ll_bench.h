// epx-bench --algo low-latency: ncclEpAlgoLowLatency (ep_ll.h) dispatch (BF16 and FP8) and combine
// at a few token counts per rank: microseconds per whole call and per send / receive half, the
// per-selection GB/s (tokens x top-k x row bytes / time, the figure NCCL EP reports), and with an
// emulated NIC (fake nodes) the network floor: the most LL message bytes any rank sends to or
// receives from other nodes / rate + one-way latency. Counts are checked against the CPU reference.
#pragma once
#include "args.h"
#include "epx/testing/multigpu.h"

namespace epxbench {

// Collective over mg's ranks; rank 0 (printer) prints. Returns the process exit code.
int runLowLatency(const Options& opt, epx::testing::MultiGpu& mg, int nRanks, int ranksPerNode, bool printer);

}  // namespace epxbench
