#include "gin_report.h"

#include <algorithm>
#include <cstdio>

namespace epxbench {

using epx::testing::RankContext;

GinLatencyReport::GinLatencyReport(epx::testing::MultiGpu& mg, bool printer)
    : mg_(mg), printer_(printer), perRank_(size_t(mg.size())) {
  if (mg.localRanks().size() != 1) return;  // counters are per process: only with one rank each
  reader_ = std::make_unique<GinStatsReader>();
  std::vector<double> missing(size_t(mg.size()), 0.0);
  missing[size_t(mg.localRanks()[0])] = reader_->available() ? 0.0 : 1.0;
  missing = mg.gatherPerRank(missing);
  on_ = *std::max_element(missing.begin(), missing.end()) == 0.0;
  if (printer_ && on_)
    std::printf("# gin: per configuration, the worst rank's means from the ipc backend (us): op issued by NCCL's proxy -> its CUDA\n"
                "#      work queued (issue), -> copy done (copy) and -> reported done (done); signal received -> applied (apply);\n"
                "#      one signal apply batch (readback: the signal kernel's launch, or the read-back without it);\n"
                "#      the mean and the longest gap between two progress calls of a context (gapMean, gapMax) and gaps over\n"
                "#      1 ms (gaps1ms, sum over ranks)\n");
}

void GinLatencyReport::start(const RankContext&) {
  if (!on_) return;
  reader_->reset();
  start_ = std::chrono::steady_clock::now();
}

void GinLatencyReport::stop(const RankContext& c) {
  if (!on_) return;
  GinLatency l = reader_->latency();
  l.setWindow(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count());
  perRank_[size_t(c.rank)] = l;
}

void GinLatencyReport::print(const std::string& label) {
  if (!on_) return;
  auto worst = [&](double GinLatency::*f, bool sum) {
    std::vector<double> v(perRank_.size(), 0.0);
    for (int r : mg_.localRanks()) v[size_t(r)] = perRank_[size_t(r)].*f;
    double m = 0;
    for (double x : mg_.gatherPerRank(v)) m = sum ? m + x : std::max(m, x);
    return m;
  };
  const double issue = worst(&GinLatency::issueUs, false), copy = worst(&GinLatency::copyUs, false),
               done = worst(&GinLatency::doneUs, false), apply = worst(&GinLatency::signalInUs, false),
               readback = worst(&GinLatency::applyUs, false), gapMean = worst(&GinLatency::gapMeanUs, false),
               gapMax = worst(&GinLatency::gapMaxUs, false), gaps = worst(&GinLatency::gaps1ms, true);
  if (printer_)
    std::printf("# gin %s: issue %.1f  copy %.1f  done %.1f  apply %.1f  readback %.1f  gapMean %.1f  gapMax %.0f  gaps1ms %.0f\n",
                label.c_str(), issue, copy, done, apply, readback, gapMean, gapMax, gaps);
}

}  // namespace epxbench
