#include "epx/topology/model.h"

#include <algorithm>

namespace epx::topo {

const char* toString(NodeKind k) {
  switch (k) {
    case NodeKind::Machine: return "Machine";
    case NodeKind::Numa: return "NUMA";
    case NodeKind::HostBridge: return "HostBridge";
    case NodeKind::Switch: return "PCIeSwitch";
    case NodeKind::Device: return "PCI";
  }
  return "?";
}

const char* toString(PathType p) {
  switch (p) {
    case PathType::PIX: return "PIX";
    case PathType::PXB: return "PXB";
    case PathType::PHB: return "PHB";
    case PathType::NODE: return "NODE";
    case PathType::SYS: return "SYS";
    case PathType::UNKNOWN: return "UNKNOWN";
  }
  return "?";
}

const char* toString(LinkLayer l) {
  switch (l) {
    case LinkLayer::InfiniBand: return "InfiniBand";
    case LinkLayer::Ethernet: return "Ethernet";
    case LinkLayer::Unknown: return "unknown";
  }
  return "?";
}

const char* toString(Transport t) {
  switch (t) {
    case Transport::InfiniBand: return "InfiniBand";
    case Transport::RoCE: return "RoCE";
    case Transport::EFA: return "EFA";
    case Transport::Unknown: return "unknown";
  }
  return "?";
}

namespace {

/// True when a direct (non-switch) NVLink edge ends at `addr`. Compares parsed addresses: no
/// formatting per call (epx-topo asks for every GPU pair).
bool endsAt(const NvLinkEdge& e, const PciAddress& addr) {
  const std::optional<PciAddress> target = parseBusId(e.target);
  return target && *target == addr;
}

}  // namespace

int Topology::nvlinkCount(int gpu) const {
  const Gpu& g = gpus.at(gpu);
  int n = 0;
  for (const auto& e : g.nvlinks)
    if (!endsAt(e, g.address)) n += e.count;
  return n;
}

int Topology::nvlinkBetween(int a, int b) const {
  if (a == b) return 0;
  const Gpu& ga = gpus.at(a);
  const Gpu& gb = gpus.at(b);
  auto countTo = [](const Gpu& g, const PciAddress& target, int* toSwitch) {
    int direct = 0;
    for (const auto& e : g.nvlinks) {
      if (e.toSwitch) *toSwitch += e.count;
      else if (endsAt(e, target)) direct += e.count;
    }
    return direct;
  };
  int swA = 0, swB = 0;
  int ab = countTo(ga, gb.address, &swA), ba = countTo(gb, ga.address, &swB);
  // Direct links are listed from both ends in NVML and NCCL dumps; take either side once.
  return std::max(ab, ba) + std::min(swA, swB);
}

std::string someOf(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 3; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 3) s += " and " + std::to_string(names.size() - 3) + " more";
  return s;
}

}  // namespace epx::topo
