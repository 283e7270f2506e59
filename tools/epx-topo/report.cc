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
  // A GPU's RDMA bandwidth: its rails' port rates, divided among the GPUs sharing each rail.
  double minShare = -1;
  for (const GpuRail& gr : r.rails.gpus) {
    double share = 0;
    for (int rail : gr.rails) {
      const Rail& rl = r.rails.rails[rail];
      double gbps = 0;
      for (int n : rl.nics) gbps += t.nics[n].speedGbps;
      share += gbps / std::max<size_t>(1, rl.gpus.size());
    }
    if (!gr.rails.empty()) minShare = minShare < 0 ? share : std::min(minShare, share);
  }
  r.nicGbpsPerGpu = std::max(0.0, minShare);
  r.shape.numScaleupRanks = std::max(2, domain);
  r.shape.numExperts = in.experts;
  r.shape.numTopk = in.topk;
  r.shape.numScaleoutRanks = in.nodes > 0 ? in.nodes : (r.nicGbpsPerGpu > 0 ? 2 : 1);
  r.estimated = !t.gpus.empty();
  r.estimate = epxEstimateEpResources(epxNvlinkGBps(r.nvlinkLinks), epxNicGBps(r.nicGbpsPerGpu), in.numSMs, r.shape);
  return r;
}

std::string gpuGpuCell(const Report& r, int a, int b) {
  if (a == b) return "X";
  int nv = r.nvlinks.between(a, b);
  if (nv > 0) return "NV" + std::to_string(nv);
  return toString(gpuGpuPath(r.topo, a, b));
}

}  // namespace epx::topo::cli
