#include "epx/topology/nccl_export.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace epx::topo {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
  }
  return o;
}

std::string hex(unsigned long long v, int width) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*llx", width, v);
  return b;
}

struct Writer {
  const Topology& t;
  std::vector<int> netDev;       // NIC index → NCCL dev number (rail order first)
  std::vector<char> useful;      // node holds a GPU or NIC below it
  std::vector<int> gpuAt;        // node → the GPU on it, -1 if none
  std::vector<std::vector<int>> nicsAt;  // node → NIC ports attached to it
  std::ostringstream out;

  /// Indexes the nodes once, so that writing stays linear in the topology's size.
  void indexNodes() {
    useful.assign(t.nodes.size(), 0);
    gpuAt.assign(t.nodes.size(), -1);
    nicsAt.assign(t.nodes.size(), {});
    auto mark = [&](int n) {
      for (size_t steps = 0; n >= 0 && steps <= t.nodes.size(); ++steps) { useful[n] = 1; n = t.nodes[n].parent; }
    };
    for (const Gpu& g : t.gpus) {
      mark(g.node);
      if (g.node >= 0) gpuAt[g.node] = g.index;  // the last, as a scan of all GPUs finds it
    }
    for (const Nic& n : t.nics) {
      mark(n.node);
      if (n.node >= 0) nicsAt[n.node].push_back(n.index);
    }
  }

  void pciAttrs(const Node& n, const char* defaultClass) {
    out << " busid=\"" << formatBusId(n.address) << "\"";
    out << " class=\"" << (n.classCode ? hex(static_cast<unsigned long long>(n.classCode) << 8, 6) : defaultClass) << "\"";
    if (n.vendor) out << " vendor=\"" << hex(n.vendor, 4) << "\"";
    if (n.device) out << " device=\"" << hex(n.device, 4) << "\"";
    if (!n.linkSpeed.empty()) out << " link_speed=\"" << esc(n.linkSpeed) << "\"";
    if (n.linkWidth >= 0) out << " link_width=\"" << n.linkWidth << "\"";
  }

  void nets(int node, const std::string& indent) {
    bool any = false;
    for (int ni : nicsAt[node]) {
      const Nic& n = t.nics[ni];
      if (!any) out << indent << "<nic>\n";
      any = true;
      out << indent << "  <net name=\"" << esc(n.name) << "\" dev=\"" << netDev[n.index] << "\"";
      if (n.speedGbps > 0 && !n.speedAssumed) out << " speed=\"" << static_cast<long long>(n.speedGbps * 1000) << "\"";
      out << " port=\"" << n.port << "\"";
      if (n.guid) out << " guid=\"" << hex(n.guid, 1) << "\"";
      out << "/>\n";
    }
    if (any) out << indent << "</nic>\n";
  }

  void node(int idx, const std::string& indent) {
    if (!useful[idx]) return;
    const Node& n = t.nodes[idx];
    if (n.kind == NodeKind::HostBridge) {  // NCCL has no host bridge element
      nets(idx, indent);                    // NICs without a PCI function
      for (int c : n.children) node(c, indent);
      return;
    }
    if (n.kind == NodeKind::Switch) {
      out << indent << "<pci";
      pciAttrs(n, "0x060400");
      out << ">\n";
      for (int c : n.children) node(c, indent + "  ");
      out << indent << "</pci>\n";
      return;
    }
    if (n.kind != NodeKind::Device) return;
    const Gpu* gpu = gpuAt[idx] >= 0 ? &t.gpus[gpuAt[idx]] : nullptr;
    out << indent << "<pci";
    pciAttrs(n, gpu ? "0x030200" : "0x020000");
    out << ">\n";
    // A <gpu> element says the GPU's NVLinks are all listed; without NVLink data (PCI-only input,
    // hwloc without NVML) the PCI class alone marks the GPU, so reading the file back keeps
    // "NVLink unknown" instead of "no NVLink".
    if (gpu && gpu->nvlinkKnown) {
      out << indent << "  <gpu dev=\"" << gpu->index << "\">\n";
      for (const NvLinkEdge& e : gpu->nvlinks)
        out << indent << "    <nvlink target=\"" << esc(e.target) << "\" count=\"" << e.count << "\" tclass=\""
            << (e.toSwitch ? "0x068000" : "0x030200") << "\"/>\n";
      out << indent << "  </gpu>\n";
    }
    nets(idx, indent + "  ");
    out << indent << "</pci>\n";
  }
};

}  // namespace

std::string renderNcclTopo(const Topology& t, const RailPlan& rails) {
  Writer w{t, {}, {}, {}, {}, {}};
  w.netDev.assign(t.nics.size(), -1);
  int dev = 0;
  for (const Rail& r : rails.rails)
    for (int n : r.nics)
      if (w.netDev[n] < 0) w.netDev[n] = dev++;
  for (const Nic& n : t.nics)
    if (w.netDev[n.index] < 0) w.netDev[n.index] = dev++;
  w.indexNodes();
  w.out << "<!-- Written by epx-topo from " << esc(t.sourceName) << ". NIC dev numbers follow epx rails:";
  for (const Rail& r : rails.rails) {
    w.out << " rail " << r.index << " = GPU";
    for (int g : r.gpus) w.out << " " << g;
    w.out << ";";
  }
  w.out << " -->\n<system version=\"1\">\n";
  int cpus = 0;
  for (const NumaNode& nn : t.numa) {
    ++cpus;  // every NUMA node gets a <cpu>, even without GPUs or NICs
    w.out << "  <cpu numaid=\"" << nn.osIndex << "\"";
    if (t.source == SourceKind::NcclXml && !nn.affinity.empty()) w.out << " affinity=\"" << esc(nn.affinity) << "\"";
    w.out << ">\n";
    for (int c : t.nodes[nn.node].children) w.node(c, "    ");
    w.out << "  </cpu>\n";
  }
  // Devices without NUMA placement hang off the machine: NCCL wants a <cpu>, use numaid 0's slot.
  bool orphan = false;
  for (int c : t.nodes.empty() ? std::vector<int>{} : t.nodes[0].children)
    if (t.nodes[c].kind == NodeKind::HostBridge && w.useful[c]) orphan = true;
  if (orphan || cpus == 0) {
    w.out << "  <cpu numaid=\"" << (t.numa.empty() ? 0 : t.numa.front().osIndex) << "\">\n";
    for (int c : t.nodes[0].children)
      if (t.nodes[c].kind == NodeKind::HostBridge) w.node(c, "    ");
    w.out << "  </cpu>\n";
  }
  w.out << "</system>\n";
  return w.out.str();
}

std::string writeNcclTopo(const Topology& t, const RailPlan& rails, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return path + ": cannot open for writing";
  f << renderNcclTopo(t, rails);
  f.close();
  if (!f) return path + ": write failed";
  return "";
}

}  // namespace epx::topo
