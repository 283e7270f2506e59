// The `# gin` lines of epx-bench: where the GIN operations' time went during a timed window, from
// the ipc backend's latency counters (gin_traffic.h), the worst rank's means. Used by every mode
// that runs across fake nodes (low-latency, bucket, pp). On only when every process holds one rank
// and NCCL loaded epx's plugin in each (decided collectively); otherwise every call is a no-op.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "epx/testing/multigpu.h"
#include "gin_traffic.h"

namespace epxbench {

class GinLatencyReport {
 public:
  // Collective over mg's ranks. `printer` prints the legend when on.
  GinLatencyReport(epx::testing::MultiGpu& mg, bool printer);
  bool on() const { return on_; }
  // On a rank (inside mg.run): start the window (reset this process's counters).
  void start(const epx::testing::RankContext& c);
  // On a rank, after the window's GPU work completed: its latency means.
  void stop(const epx::testing::RankContext& c);
  // Collective: one line "# gin <label>: ..." (the worst rank per field; gaps over 1 ms summed).
  void print(const std::string& label);

 private:
  epx::testing::MultiGpu& mg_;
  bool printer_;
  bool on_ = false;
  std::unique_ptr<GinStatsReader> reader_;
  std::chrono::steady_clock::time_point start_;
  std::vector<GinLatency> perRank_;
};

}  // namespace epxbench
