// Text printers: tree, nvidia-smi-style matrix, details.
#include <cstdio>
#include <string>
#include <vector>

#include "epx/topology/paths.h"
#include "report.h"

namespace epx::topo::cli {

namespace {

template <class... A>
void put(std::string& out, const char* fmt, A... a) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, fmt, a...);
  out += buf;
}

std::string gbps(double v) {
  if (v <= 0) return "speed unknown";
  char b[32];
  std::snprintf(b, sizeof b, "%g Gb/s", v);
  return b;
}

/// A port's rate, marked when epx assumed it (PCI-only NCCL files).
std::string rate(const Nic& n) { return gbps(n.speedGbps) + (n.speedAssumed ? " (assumed)" : ""); }

std::string gbytes(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB/s", v);
  return b;
}

/// What the tree shows at each node, indexed once (a topology may have thousands of nodes).
struct TreeIndex {
  std::vector<char> useful;             ///< node has a GPU, NIC or NUMA node at or below it
  std::vector<int> gpuAt;               ///< GPU whose Device node this is, -1 if none
  std::vector<std::vector<int>> nicsAt; ///< NIC ports attached to the node
};

TreeIndex indexTree(const Topology& t) {
  TreeIndex x;
  x.useful.assign(t.nodes.size(), 0);
  x.gpuAt.assign(t.nodes.size(), -1);
  x.nicsAt.resize(t.nodes.size());
  auto mark = [&](int n) {
    for (size_t steps = 0; n >= 0 && steps <= t.nodes.size() && !x.useful[n]; ++steps) {
      x.useful[n] = 1;
      n = t.nodes[n].parent;
    }
  };
  for (const Gpu& g : t.gpus) {
    mark(g.node);
    if (g.node >= 0) x.gpuAt[g.node] = g.index;  // the last one, as a scan of all GPUs finds it
  }
  for (const Nic& n : t.nics) {
    mark(n.node);
    if (n.node >= 0) x.nicsAt[n.node].push_back(n.index);
  }
  for (const NumaNode& n : t.numa) mark(n.node);
  return x;
}

void treeNode(const Report& r, const TreeIndex& x, int idx, int depth, std::string& out) {
  const Topology& t = r.topo;
  const Node& n = t.nodes[idx];
  std::string pad(2 * depth, ' ');
  switch (n.kind) {
    case NodeKind::Machine: put(out, "%sMachine\n", pad.c_str()); break;
    case NodeKind::Numa: {
      std::string cpus;
      for (const NumaNode& nn : t.numa)
        if (nn.node == idx) cpus = nn.cpus;
      put(out, "%sNUMA %d  cpus %s\n", pad.c_str(), n.numa, cpus.empty() ? "?" : cpus.c_str());
      break;
    }
    case NodeKind::HostBridge: put(out, "%sHostBridge\n", pad.c_str()); break;
    case NodeKind::Switch:
      put(out, "%sPCIe switch %s (%04x:%04x)%s\n", pad.c_str(), formatBusId(n.address).c_str(), n.vendor, n.device,
          n.linkGBps > 0 ? (" " + gbytes(n.linkGBps)).c_str() : "");
      break;
    case NodeKind::Device: {
      std::string what = "PCI";
      if (int gi = x.gpuAt[idx]; gi >= 0) {
        const Gpu& g = t.gpus[gi];
        what = "GPU" + std::to_string(g.index) + " " + g.name;
        int links = t.nvlinkCount(g.index);
        if (links) what += "  NVLink x" + std::to_string(links);
        if (g.index < (int)r.rails.gpus.size() && r.rails.gpus[g.index].rail >= 0)
          what += "  rail " + std::to_string(r.rails.gpus[g.index].rail);
      }
      put(out, "%s%s %s (%04x:%04x class %04x)\n", pad.c_str(), what.c_str(), formatBusId(n.address).c_str(), n.vendor,
          n.device, n.classCode);
      break;
    }
  }
  for (int ni : x.nicsAt[idx]) {
    const Nic& nic = t.nics[ni];
    put(out, "%s  NIC %s port %d  %s %s %s%s%s\n", pad.c_str(), nic.name.c_str(), nic.port, toString(nic.transport),
        rate(nic).c_str(), nic.state.c_str(), nic.netdev.empty() ? "" : "  netdev ", nic.netdev.c_str());
  }
  int hidden = 0;
  for (int c : n.children) {
    if (x.useful[c]) treeNode(r, x, c, depth + 1, out);
    else ++hidden;
  }
  if (hidden) put(out, "%s  (+%d without GPU or RDMA NIC)\n", pad.c_str(), hidden);
}

}  // namespace

void printTree(const Report& r, std::string& out) {
  put(out, "Topology from %s: %zu GPU, %zu RDMA NIC port(s) on %d card(s), %zu NUMA node(s)\n",
      r.topo.sourceName.c_str(), r.topo.gpus.size(), r.topo.nics.size(), r.topo.numCards, r.topo.numa.size());
  if (!r.topo.nodes.empty()) treeNode(r, indexTree(r.topo), 0, 0, out);
}

void printMatrix(const Report& r, std::string& out) {
  const Topology& t = r.topo;
  if (t.gpus.empty()) {  // rows are GPUs: nothing to draw (the NICs are in the tree and the NIC table)
    put(out, "\nGPU matrix: no GPU (%zu RDMA NIC port(s))\n", t.nics.size());
    return;
  }
  out += "\n       ";
  for (const Gpu& g : t.gpus) put(out, "%-7s", ("GPU" + std::to_string(g.index)).c_str());
  for (const Nic& n : t.nics) put(out, "%-7s", ("NIC" + std::to_string(n.index)).c_str());
  out += "NUMA\n";
  for (const Gpu& g : t.gpus) {
    put(out, "%-7s", ("GPU" + std::to_string(g.index)).c_str());
    for (const Gpu& o : t.gpus) put(out, "%-7s", gpuGpuCell(r, g.index, o.index).c_str());
    for (const Nic& n : t.nics) put(out, "%-7s", toString(gpuNicPath(t, g.index, n.index)));
    put(out, "%d\n", g.numa);
  }
  if (!t.nics.empty()) out += "\nNIC legend:\n";
  for (const Nic& n : t.nics) put(out, "  NIC%d: %s\n", n.index, n.name.c_str());
  out += "\nLegend: X self, NV# NVLinks, PIX one PCIe switch, PXB several switches, PHB host bridge,\n"
         "        NODE between host bridges of one NUMA node, SYS across NUMA nodes\n";
}

void printDetails(const Report& r, std::string& out) {
  const Topology& t = r.topo;
  out += "\nRDMA NICs:\n";
  if (t.nics.empty()) out += t.gpus.empty() ? "  none\n" : "  none: EP runs over NVLink only (no RDMA rail)\n";
  const char* nicRow = "  %-6s %-18s %-4s %-4s %-10s %-8s %-10s %-24s %-4s %s\n";
  if (!t.nics.empty())
    put(out, nicRow, "NIC", "name", "port", "card", "transport", "state", "link", "rate", "NUMA", "bus id");
  for (const Nic& n : t.nics)
    put(out, nicRow, ("NIC" + std::to_string(n.index)).c_str(), n.name.c_str(), std::to_string(n.port).c_str(),
        std::to_string(n.card).c_str(), toString(n.transport), n.state.empty() ? "-" : n.state.c_str(),
        toString(n.linkLayer), rate(n).c_str(), std::to_string(n.numa).c_str(),
        n.hasAddress ? formatBusId(n.address).c_str() : "(no PCI)");
  put(out, "\nRails (%s):\n", r.rails.policy.c_str());
  for (const GpuRail& g : r.rails.gpus) {
    std::string nics;
    for (int n : g.nics) nics += (nics.empty() ? "" : ",") + t.nics[n].name;
    std::string rails;
    for (int x : g.rails) rails += (rails.empty() ? "" : ",") + std::to_string(x);
    put(out, "  GPU%d -> rail %s  NIC %s  (%s)\n", g.gpu, rails.empty() ? "-" : rails.c_str(),
        nics.empty() ? "-" : nics.c_str(), toString(g.path));
  }
  for (const std::string& e : r.rails.excluded) put(out, "  excluded: %s\n", e.c_str());
  out += "\nSL policy (EPX_OVERRIDE > group > EPX_DEFAULT > NCCL_IB > 0):\n";
  put(out, "  InfiniBand SL %d  from %s\n", r.sl.sl.value, r.sl.sl.origin.c_str());
  put(out, "  RoCE TC       %d  from %s\n", r.sl.tc.value, r.sl.tc.origin.c_str());
  for (const Nic& n : t.nics) {
    std::string f = slFieldFor(n);
    put(out, "  %s: %s\n", n.name.c_str(),
        f == "sl" ? ("SL " + std::to_string(r.sl.sl.value)).c_str()
        : f == "tc" ? ("TC " + std::to_string(r.sl.tc.value)).c_str() : "neither (not InfiniBand or RoCE)");
  }
  const auto& e = r.estimate;
  put(out, "\nEP resource estimate (DeepEP V2 model, docs/topology.md):\n");
  if (!r.estimated) {
    out += "  none: no GPU, so no EP to size\n";
    for (const std::string& w : t.warnings) put(out, "warning: %s\n", w.c_str());
    return;
  }
  bool rateAssumed = false;
  for (const GpuRail& g : r.rails.gpus)
    for (int n : g.nics) rateAssumed |= t.nics[n].speedAssumed;
  put(out, "  NVLink %d links -> %.1f GB/s, RDMA %.1f Gb/s per GPU%s -> %.1f GB/s\n", r.nvlinkLinks, e.nvlinkGBps,
      r.nicGbpsPerGpu, rateAssumed ? " (ASSUMED)" : "", e.nicGBps);
  put(out, "  shape: %d NVLink ranks x %d node(s), %d experts, top-%d\n", r.shape.numScaleupRanks,
      r.shape.numScaleoutRanks, r.shape.numExperts, r.shape.numTopk);
  if (const int ranks = r.shape.numScaleupRanks * r.shape.numScaleoutRanks; r.shape.numExperts % ranks != 0)
    put(out, "  note: libepx needs the experts a multiple of the EP size (%d ranks); choose --experts\n", ranks);
  const bool noScaleup = r.nvlinkLinks == 0 && t.gpus.size() > 1;
  bool nicsOfUnknownRate = false;  // RDMA NICs on the GPUs' rails, none with a known rate
  for (const GpuRail& g : r.rails.gpus) nicsOfUnknownRate |= !g.nics.empty();
  nicsOfUnknownRate &= r.nicGbpsPerGpu <= 0;
  put(out, "  SMs %d, QPs %d%s\n", e.sms, e.qps,
      r.hasHybrid()          ? " (direct)"
      : e.qps != 0           ? ""
      : nicsOfUnknownRate    ? " (RDMA NICs of unknown rate: see the warnings)"
      : r.nvlinkLinks == 0   ? " (no RDMA)"
                             : " (no RDMA: NVLink-only EP)");
  if (r.hasHybrid()) {
    const auto& h = r.hybridEstimate;
    put(out, "  SMs %d, QPs %d (hybrid: through rail peers, then NVLink)\n", h.sms, h.qps);
    put(out, "  network rows per token (uniform routing): direct %.2f, hybrid %.2f (%.0f %% fewer)\n",
        e.networkRowsPerToken, h.networkRowsPerToken, 100.0 * (1.0 - h.networkRowsPerToken / e.networkRowsPerToken));
  }
  if (noScaleup && e.nicGBps <= 0)
    put(out, "  no NVLink between the GPUs (or NVLink unknown, see warnings): no link bandwidth to size for,\n"
             "  so the SM count is the floor (%d); with NVLink known it follows the link count\n", kMinSms);
  else if (noScaleup)
    out += "  no NVLink between the GPUs (or NVLink unknown, see warnings): sized by the RDMA rate alone\n";
  if (!t.assumptions.empty())
    out += "  NOTE: built on assumptions, not on what the file says (the warnings below)\n";
  for (const std::string& w : t.warnings) put(out, "warning: %s\n", w.c_str());
}

}  // namespace epx::topo::cli
