// Internal: NVLink edges from NVML, loaded with dlopen() at run time only when present.
#pragma once
#include <string>
#include <vector>

#include "epx/topology/model.h"

namespace epx::topo::detail {

/// Fills Gpu::nvlinks (and names) from libnvidia-ml when it loads. Returns notes for the warnings
/// list ("NVML not found: NVLink unknown", fallbacks taken); none on plain success.
/// EPX_TOPO_NO_NVML=1 skips it; EPX_NVML_LIBRARY=<path> names the library; EPX_TOPO_DEBUG=1 traces
/// every NVML call on stderr.
std::vector<std::string> addNvmlLinks(Topology& t);

// ---- Pure part (unit-tested without NVML) --------------------------------------------------------

/// One NVLink of an NVML device, as NVML reported it.
struct NvmlLink {
  unsigned link = 0;
  bool remoteKnown = false;   ///< nvmlDeviceGetNvLinkRemotePciInfo_v2 succeeded and parsed
  PciAddress remote;          ///< far end's bus id as NVML prints it (8-digit domain)
  bool hidden = false;        ///< far end reported as "FFFFFFFF:FF:FF.0": not visible in this VM
  int remoteType = -1;        ///< nvmlIntNvLinkDeviceType_t: 0 GPU, 1 IBM NPU, 2 NVSwitch, -1 unknown
};

/// One NVML device: its own bus id (NVML's namespace) and its active links.
struct NvmlDevice {
  bool addressKnown = false;
  PciAddress address;
  std::string name;
  std::vector<NvmlLink> links;      ///< active links only
  std::vector<int> nvlinkP2pPeers;  ///< NVML device indices with P2P status OK over NVLink
};

/// Index of `a` in `list` comparing PCI addresses numerically (so "0000:00:06.0" from hwloc and
/// "00000000:00:06.0" from NVML match), or -1.
int findAddress(const std::vector<PciAddress>& list, const PciAddress& a);

/// Same PCI function for two bus-id strings in any of the accepted spellings; false if either fails
/// to parse.
bool sameBusId(const std::string& a, const std::string& b);

/// Maps NVML devices to hwloc GPUs and turns their links into edges.
/// Matching: by bus id (numerically). When no NVML device matches any GPU by bus id but the counts
/// agree (a VM whose guest and host bus ids differ), by bus-id order; a note says so.
/// A link's far end: an NVML device matched to a GPU (by NVML's own bus id, then the GPU's hwloc bus
/// id); else an NVSwitch when NVML says so or the far end is no GPU of this machine. A far end NVML
/// hides ("FFFFFFFF:FF:FF.0", a VM's view of the host's NVSwitch) or does not report: an NVSwitch
/// (target kHiddenNvlinkPeer) when the remote type says so or is unknown with the far end hidden,
/// as NCCL assumes; else the single NVLink P2P peer if there is exactly one; else a switch.
struct NvlinkResolution {
  std::vector<std::vector<NvLinkEdge>> edges;  ///< per hwloc GPU
  std::vector<int> nvmlOf;                     ///< per hwloc GPU: NVML device index, -1 unmatched
  std::vector<std::string> notes;
};
NvlinkResolution resolveNvlinks(const std::vector<PciAddress>& gpus, const std::vector<NvmlDevice>& devs);

}  // namespace epx::topo::detail
