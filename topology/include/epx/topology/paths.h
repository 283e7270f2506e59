// epx topology: path types between devices, computed by walking parent pointers.
//
// hwloc_get_common_ancestor_obj() crashes on I/O objects, so the model stores its own parents and
// the lowest common ancestor is found by climbing them.
#pragma once
#include "epx/topology/model.h"

namespace epx::topo {

/// Path type between two nodes of `t` (Device nodes, or a NIC's attachment node).
/// LCA Switch with one switch on the path → PIX, more → PXB; LCA HostBridge → PHB;
/// LCA Numa → NODE; LCA Machine → SYS.
PathType pathBetweenNodes(const Topology& t, int a, int b);

/// Path type from GPU `gpu` to NIC port `nic` (UNKNOWN if either has no placement).
PathType gpuNicPath(const Topology& t, int gpu, int nic);

/// Path type between two GPUs over PCIe (NVLink is reported separately).
PathType gpuGpuPath(const Topology& t, int a, int b);

/// Parses "PIX", "PXB", "PHB", "NODE", "SYS" (returns UNKNOWN otherwise).
PathType parsePathType(const char* s);

}  // namespace epx::topo
