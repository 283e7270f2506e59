// epx topology: loaders. Every loader returns a model or a one-line error; none aborts or hangs.
#pragma once
#include <string>

#include "epx/topology/model.h"
#include "epx/topology/result.h"

namespace epx::topo {

/// Live discovery through hwloc (HWLOC_FSROOT replays a captured sysfs tree), with the I/O filter
/// set to KEEP_ALL, RDMA port speed/link layer read from <fsroot>/sys/class/infiniband, and NVLink
/// from NVML when libnvidia-ml.so.1 can be dlopen()ed (never linked).
Result<Topology> loadLive();

/// hwloc 2.x XML file (`lstopo file.xml`). hwloc 2.9 refuses version 3.0 files.
Result<Topology> loadHwlocXml(const std::string& path);
/// Same, from memory (used by the fuzz target).
Result<Topology> loadHwlocXmlBuffer(const std::string& xml, const std::string& name = "<buffer>");

/// NCCL topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format, `<system version="1">`).
Result<Topology> loadNcclXml(const std::string& path);
/// Same, from memory (used by the fuzz target).
Result<Topology> loadNcclXmlBuffer(const std::string& xml, const std::string& name = "<buffer>");

/// Largest file either XML loader accepts (bytes); larger inputs are rejected, not truncated.
inline constexpr size_t kMaxTopologyFileBytes = 64u << 20;

/// Most GPUs plus RDMA NIC ports a loaded topology may have; larger ones fail with `overLimit` set.
/// Real machines are far below it: NCCL reads at most 256 XML nodes per topology file
/// (NCCL_TOPO_XML_MAX_NODES). At this size epx-topo prints everything, --json included, in under
/// 2 s (docs/topology.md, "Limits"; tests/topology/test_scale.cc); its output grows with GPUs × devices.
inline constexpr size_t kMaxTopologyDevices = 1024;

}  // namespace epx::topo
