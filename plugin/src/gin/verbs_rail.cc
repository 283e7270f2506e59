#include "gin/verbs_rail.h"

#include "epx/topology/busid.h"

namespace epx::plugin::gin {

int gpuIndexByBusId(const topo::Topology& t, const std::string& busId) {
  auto a = topo::parseBusId(busId);
  if (!a) return -1;
  for (const topo::Gpu& g : t.gpus)
    if (g.address == *a) return g.index;
  return -1;
}

RailChoice choosePortByRail(const topo::Topology& t, const topo::RailPlan& plan, int gpuIndex,
                            const std::vector<PortName>& ports, int ncclDev) {
  RailChoice c{ncclDev, {}};
  if (gpuIndex < 0 || gpuIndex >= static_cast<int>(plan.gpus.size())) {
    c.why = "GPU not in the topology: NCCL's device " + std::to_string(ncclDev);
    return c;
  }
  const topo::GpuRail& g = plan.gpus[static_cast<size_t>(gpuIndex)];
  auto onRail = [&](int dev) {
    if (dev < 0 || dev >= static_cast<int>(ports.size())) return false;
    for (int nic : g.nics)
      if (nic >= 0 && nic < static_cast<int>(t.nics.size()) && t.nics[static_cast<size_t>(nic)].name == ports[static_cast<size_t>(dev)].device &&
          t.nics[static_cast<size_t>(nic)].port == ports[static_cast<size_t>(dev)].port)
        return true;
    return false;
  };
  const std::string rail = "rail " + std::to_string(g.rail) + " of GPU " + std::to_string(gpuIndex);
  if (g.nics.empty()) {
    c.why = "GPU " + std::to_string(gpuIndex) + " has no rail: NCCL's device " + std::to_string(ncclDev);
    return c;
  }
  if (onRail(ncclDev)) {
    c.why = "NCCL's device " + std::to_string(ncclDev) + " is on " + rail;
    return c;
  }
  for (int dev = 0; dev < static_cast<int>(ports.size()); ++dev)
    if (onRail(dev)) {
      c.dev = dev;
      c.why = rail + " (NCCL proposed device " + std::to_string(ncclDev) + ")";
      return c;
    }
  c.why = "no usable port of " + rail + ": NCCL's device " + std::to_string(ncclDev);
  return c;
}

}  // namespace epx::plugin::gin
