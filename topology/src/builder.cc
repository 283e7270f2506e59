#include "builder.h"

#include "epx/topology/load.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

namespace epx::topo::detail {

int addNode(Topology& t, NodeKind kind, int parent, int numa) {
  Node n;
  n.kind = kind;
  n.parent = parent;
  n.numa = numa;
  t.nodes.push_back(n);
  int idx = static_cast<int>(t.nodes.size()) - 1;
  if (parent >= 0) t.nodes[parent].children.push_back(idx);
  return idx;
}

int numaNode(Topology& t, int osIndex, const std::string& cpus) {
  for (const auto& n : t.numa)
    if (n.osIndex == osIndex) return n.node;
  if (t.nodes.empty()) addNode(t, NodeKind::Machine, -1, -1);
  NumaNode nn;
  nn.osIndex = osIndex;
  nn.cpus = cpus;
  nn.node = addNode(t, NodeKind::Numa, 0, osIndex);
  t.numa.push_back(nn);
  return nn.node;
}

bool isNvidiaGpu(uint16_t vendor, uint32_t classCode16) {
  return vendor == 0x10de && (classCode16 == 0x0302 || classCode16 == 0x0300);
}

void inferTransport(Nic& nic) {
  if (nic.vendor == 0x1d0f) {  // Amazon: EFA has its own transport, not RoCE
    nic.transport = Transport::EFA;
    return;
  }
  if (nic.linkLayer == LinkLayer::Unknown) {
    if (nic.classCode == 0x0207) nic.linkLayer = LinkLayer::InfiniBand;
    else if (nic.classCode == 0x0200) nic.linkLayer = LinkLayer::Ethernet;
  }
  if (nic.linkLayer == LinkLayer::InfiniBand) nic.transport = Transport::InfiniBand;
  else if (nic.linkLayer == LinkLayer::Ethernet) nic.transport = Transport::RoCE;
}

void noteAssumptions(Topology& t, const std::vector<std::string>& unknownRate) {
  // NIC rates, one entry per (rate, basis), in NIC order.
  const std::set<std::string> noRate(unknownRate.begin(), unknownRate.end());
  std::vector<Assumption> rates;
  Assumption unknown;
  unknown.what = "nic_speed_unknown";
  for (const Nic& n : t.nics) {
    if (n.speedAssumed) {
      auto it = std::find_if(rates.begin(), rates.end(),
                             [&](const Assumption& a) { return a.gbps == n.speedGbps && a.basis == n.speedBasis; });
      if (it == rates.end()) {
        Assumption a;
        a.what = "nic_speed";
        a.gbps = n.speedGbps;
        a.basis = n.speedBasis;
        rates.push_back(a);
        it = rates.end() - 1;
      }
      it->devices.push_back(n.name);
    } else if (noRate.count(n.name)) {
      unknown.devices.push_back(n.name);
    }
  }
  char buf[64];
  for (Assumption& a : rates) {
    std::snprintf(buf, sizeof buf, "%g", a.gbps);
    t.warnings.push_back("ASSUMED NIC rate " + std::string(buf) + " Gb/s for " + std::to_string(a.devices.size()) +
                         " port(s) (" + someOf(a.devices) + ") from " + a.basis +
                         ": the file gives no rate (NCCL reads it at run time); the estimate uses it");
    t.assumptions.push_back(std::move(a));
  }
  if (!unknown.devices.empty()) {
    t.warnings.push_back("NIC rate unknown for " + std::to_string(unknown.devices.size()) + " port(s) (" +
                         someOf(unknown.devices) +
                         "): the file gives none and their PCI ids suggest none; the estimate counts no RDMA for them");
    t.assumptions.push_back(std::move(unknown));
  }
  Assumption gpus;
  gpus.what = "gpu_nvlink";
  for (const Gpu& g : t.gpus)
    if (!g.nvlinkKnown) gpus.devices.push_back(formatBusId(g.address));
  if (!gpus.devices.empty()) {
    t.warnings.push_back("NVLink unknown for " + std::to_string(gpus.devices.size()) + " GPU(s) (" + someOf(gpus.devices) +
                         "): known from PCI ids only (no <gpu> element); counted as no NVLink. NCCL_TOPO_DUMP_FILE "
                         "from a run on the machine records the links");
    t.assumptions.push_back(std::move(gpus));
  }
}

double ncclPciGBps(const std::string& speed, int width) {
  // NCCL's table (src/graph/topo.cc), in units of 100 Mb/s per lane.
  static const std::pair<const char*, int> kRates[] = {
      {"2.5 GT/s", 15}, {"5 GT/s", 30}, {"8 GT/s", 60}, {"16 GT/s", 120}, {"32 GT/s", 240}, {"64 GT/s", 480},
      {"2.5 GT/s PCIe", 15}, {"5.0 GT/s PCIe", 30}, {"8.0 GT/s PCIe", 60}, {"16.0 GT/s PCIe", 120},
      {"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480}};
  int perLane = 60;
  for (const auto& [s, r] : kRates)
    if (speed == s) perLane = r;
  if (width <= 0) width = 16;
  return width * perLane / 80.0;
}

std::string deviceLimitError(const Topology& t, const std::string& name) {
  const size_t devices = t.gpus.size() + t.nics.size();
  if (devices <= kMaxTopologyDevices) return "";
  return name + ": " + std::to_string(t.gpus.size()) + " GPUs and " + std::to_string(t.nics.size()) +
         " RDMA NIC ports, more than epx's limit of " + std::to_string(kMaxTopologyDevices) +
         " devices per topology (NCCL itself reads at most 256 XML nodes per file)";
}

std::vector<PciAddress> duplicateBusIds(const Topology& t) {
  std::vector<PciAddress> all, dups;
  for (const Node& n : t.nodes)
    if (n.hasAddress) all.push_back(n.address);
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i] == all[i - 1] && (dups.empty() || dups.back() != all[i])) dups.push_back(all[i]);
  return dups;
}

std::string duplicateBusIdsText(const std::vector<PciAddress>& dups) {
  if (dups.empty()) return "";
  return "bus id " + formatBusId(dups.front()) +
         (dups.size() > 1 ? " (and " + std::to_string(dups.size() - 1) + " more bus ids)" : "");
}

void finish(Topology& t) {
  std::sort(t.numa.begin(), t.numa.end(), [](auto& a, auto& b) { return a.osIndex < b.osIndex; });
  std::sort(t.gpus.begin(), t.gpus.end(), [](auto& a, auto& b) { return a.address < b.address; });
  for (size_t i = 0; i < t.gpus.size(); ++i) t.gpus[i].index = static_cast<int>(i);
  std::sort(t.nics.begin(), t.nics.end(), [](auto& a, auto& b) {
    return std::tie(a.hasAddress, a.address, a.port, a.name) < std::tie(b.hasAddress, b.address, b.port, b.name);
  });
  // Cards: ports of one PCI device (all functions) or with one non-zero GUID are one card. A port
  // joins the card of the first earlier port it shares either with; maps keep this linear.
  std::map<std::tuple<uint32_t, uint8_t, uint8_t>, int> firstOnDevice;  // domain, bus, device → port
  std::map<uint64_t, int> firstWithGuid;
  std::vector<int> card(t.nics.size(), -1);
  int cards = 0;
  for (size_t i = 0; i < t.nics.size(); ++i) {
    Nic& n = t.nics[i];
    n.index = static_cast<int>(i);
    int first = static_cast<int>(i);
    if (n.hasAddress)
      first = std::min(first, firstOnDevice.emplace(std::make_tuple(n.address.domain, n.address.bus, n.address.device),
                                                    n.index).first->second);
    if (n.guid != 0) first = std::min(first, firstWithGuid.emplace(n.guid, n.index).first->second);
    card[i] = first < n.index ? card[first] : cards++;
    n.card = card[i];
  }
  t.numCards = cards;
}

}  // namespace epx::topo::detail
