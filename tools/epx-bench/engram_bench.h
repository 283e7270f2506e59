// epx-bench --algo engram: the Engram fetch (engram.h). Every rank holds its shard of `layers`
// tables (engram_work.h's pattern) and fetches tokens x entries uniform random rows per layer (its
// own seeded stream). Once, before timing (unless --no-check), the first fetch's rows are copied
// back layer by layer on a second stream that waits for each layer with ncclEpEngramWaitLayer,
// and compared with the pattern on every rank. Then opt.warmup untimed and opt.iters timed
// fetches back to back on the rank's stream; per fetch, an event on the stream before it and, on
// a second stream, an event after ncclEpEngramWaitLayer of each layer: the time from the fetch's
// start to each layer's completion (done) and between consecutive layers (layer), mean over the
// fetches, slowest rank. Printed against the floor per layer of engram_work.h (network floor with
// ranks on other nodes and a NIC rate, else the memory floor), with the ratio per layer and for
// the whole fetch, and a `# gin` line on fake nodes (gin_report.h).
#pragma once
#include "args.h"
#include "epx/testing/multigpu.h"

namespace epxbench {

// Collective over mg's nRanks ranks (ranksPerNode: for the floor); rank 0 (printer) prints.
// Returns the process exit code (1: a check failed or an async error).
int runEngram(const Options& opt, epx::testing::MultiGpu& mg, int nRanks, int ranksPerNode, bool printer);

}  // namespace epxbench
