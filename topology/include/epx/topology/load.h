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

}  // namespace epx::topo
