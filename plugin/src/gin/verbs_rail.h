// GIN verbs backend: which verbs port a GPU's GIN contexts use — a port of the GPU's rail
// (topology/ rails.h). Pure logic, unit-tested.
#pragma once

#include <string>
#include <vector>

#include "epx/topology/model.h"
#include "epx/topology/rails.h"

namespace epx::plugin::gin {

struct PortName {
  std::string device;  // verbs device, e.g. mlx5_0
  int port = 1;
};

struct RailChoice {
  int dev = -1;     // index into the ports (the ncclNet / GIN device index)
  std::string why;  // for NCCL_DEBUG=INFO
};

// The topology index of the GPU at `busId` ("0000:19:00.0"), or -1.
int gpuIndexByBusId(const topo::Topology& t, const std::string& busId);

// NCCL's device `ncclDev` when it is a port of the GPU's rail (NCCL spreads contexts over its
// local NICs); else the first usable port of that rail; else `ncclDev` (GPU or rail unknown).
RailChoice choosePortByRail(const topo::Topology& t, const topo::RailPlan& plan, int gpuIndex,
                            const std::vector<PortName>& ports, int ncclDev);

}  // namespace epx::plugin::gin
