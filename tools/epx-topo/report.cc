#include "report.h"

#include <algorithm>

#include "epx/topology/paths.h"

namespace epx::topo::cli {

Report buildReport(Topology topo, const SlPolicy& sl, const EstimateInputs& in) {
  Report r(std::move(topo));
  r.rails = assignRails(r.topo);
  r.sl = sl;
  const Topology& t = r.topo;
  int domain = 1;
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    r.nvlinkLinks = std::max(r.nvlinkLinks, t.nvlinkCount(static_cast<int>(g)));
    domain = std::max(domain, 1 + r.nvlinks.peers(static_cast<int>(g)));
  }
  // A GPU's RDMA bandwidth: its rails' port rates, divided among the GPUs sharing each rail; the
  // estimate takes the smallest share. A GPU whose rails' rate is unknown (0: no rate in the input
  // and none assumed) is left out of that minimum when another GPU's is known, and said so.
  double minShare = -1;
  std::vector<std::string> unknownGpus, unknownNics;
  for (const GpuRail& gr : r.rails.gpus) {
    if (gr.rails.empty()) continue;
    double share = 0;
    for (int rail : gr.rails) {
      const Rail& rl = r.rails.rails[rail];
      double gbps = 0;
      for (int n : rl.nics) {
        gbps += t.nics[n].speedGbps;
        if (t.nics[n].speedGbps <= 0 &&
            std::find(unknownNics.begin(), unknownNics.end(), t.nics[n].name) == unknownNics.end())
          unknownNics.push_back(t.nics[n].name);
      }
      share += gbps / std::max<size_t>(1, rl.gpus.size());
    }
    if (share <= 0) {
      unknownGpus.push_back("GPU" + std::to_string(gr.gpu));
      continue;
    }
    minShare = minShare < 0 ? share : std::min(minShare, share);
  }
  if (!unknownGpus.empty()) {
    const std::string which = std::to_string(unknownGpus.size()) + " GPU(s) (" + someOf(unknownGpus) +
                              ") reach only NICs of unknown rate (" + someOf(unknownNics) + ")";
    r.topo.warnings.push_back(minShare > 0 ? which + ": the estimate leaves them out and sizes for the others"
                                           : which + ": the estimate counts no RDMA (NCCL reads the rate at run time)");
  }
  r.nicGbpsPerGpu = std::max(0.0, minShare);
  r.shape.numScaleupRanks = std::max(2, domain);
  r.shape.numExperts = in.experts;
  r.shape.numTopk = in.topk;
  r.shape.numScaleoutRanks = in.nodes > 0 ? in.nodes : (r.nicGbpsPerGpu > 0 ? 2 : 1);
  r.estimated = !t.gpus.empty();
  r.estimate = epxEstimateEpResources(epxNvlinkGBps(r.nvlinkLinks), epxNicGBps(r.nicGbpsPerGpu), in.numSMs, r.shape);
  EpxEpShape hybrid = r.shape;
  hybrid.forwarding = EpxForwarding::kHybrid;
  r.hybridEstimate = epxEstimateEpResources(epxNvlinkGBps(r.nvlinkLinks), epxNicGBps(r.nicGbpsPerGpu), in.numSMs, hybrid);
  return r;
}

std::string gpuGpuCell(const Report& r, int a, int b) {
  if (a == b) return "X";
  int nv = r.nvlinks.between(a, b);
  if (nv > 0) return "NV" + std::to_string(nv);
  return toString(gpuGpuPath(r.topo, a, b));
}

}  // namespace epx::topo::cli
