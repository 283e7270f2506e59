// JSON printer. Schema: tools/epx-topo/epx-topo.schema.json, described in docs/topology.md.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "epx/topology/paths.h"
#include "report.h"

namespace epx::topo::cli {

namespace {

const char* sourceKind(SourceKind k) {
  switch (k) {
    case SourceKind::Live: return "live";
    case SourceKind::HwlocXml: return "hwloc-xml";
    case SourceKind::NcclXml: return "nccl-xml";
  }
  return "?";
}

std::string hex(unsigned long long v, int w) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*llx", w, v);
  return b;
}

nlohmann::json slValue(const SlValue& v) {
  return {{"value", v.value}, {"source", toString(v.source)}, {"origin", v.origin}};
}

}  // namespace

std::string toJson(const Report& r) {
  using nlohmann::json;
  const Topology& t = r.topo;
  json j;
  j["schema_version"] = 1;
  j["source"] = {{"kind", sourceKind(t.source)}, {"name", t.sourceName}};

  j["numa"] = json::array();
  for (const NumaNode& n : t.numa) {
    json numa = {{"os_index", n.osIndex}, {"cpus", n.cpus}};
    if (!n.affinity.empty()) numa["affinity"] = n.affinity;  // NCCL files: the mask as written
    j["numa"].push_back(std::move(numa));
  }

  j["gpus"] = json::array();
  for (const Gpu& g : t.gpus) {
    json peers = json::array();
    for (const Gpu& o : t.gpus)
      if (int nv = r.nvlinks.between(g.index, o.index); nv > 0) peers.push_back({{"gpu", o.index}, {"links", nv}});
    const GpuRail& gr = r.rails.gpus[g.index];
    json nics = json::array();
    for (int n : gr.nics) nics.push_back(t.nics[n].name);
    json gpu = {{"index", g.index},
                {"bus_id", formatBusId(g.address)},
                {"numa", g.numa},
                {"name", g.name},
                {"pci_device_id", hex(g.deviceId, 4)},
                {"nvlinks", t.nvlinkCount(g.index)},
                {"rail", gr.rail},
                {"rails", gr.rails},
                {"rail_path", toString(gr.path)}};
    // Moved in, not listed above: an initializer list would copy them (thousands of peers).
    gpu["nvlink_peers"] = std::move(peers);
    gpu["rail_nics"] = std::move(nics);
    j["gpus"].push_back(std::move(gpu));
  }

  std::vector<int> railOfNic(t.nics.size(), -1);
  for (const Rail& rl : r.rails.rails)
    for (int n : rl.nics) railOfNic[n] = rl.index;
  j["nics"] = json::array();
  for (const Nic& n : t.nics) {
    j["nics"].push_back({{"index", n.index},
                         {"name", n.name},
                         {"netdev", n.netdev},
                         {"bus_id", n.hasAddress ? json(formatBusId(n.address)) : json(nullptr)},
                         {"numa", n.numa},
                         {"card", n.card},
                         {"port", n.port},
                         {"guid", hex(n.guid, 16)},
                         {"speed_gbps", n.speedGbps},
                         {"speed_assumed", n.speedAssumed},
                         {"link_layer", toString(n.linkLayer)},
                         {"transport", toString(n.transport)},
                         {"state", n.state},
                         {"sl_field", slFieldFor(n)},
                         {"rail", railOfNic[n.index]}});
  }

  json gg = json::array(), gn = json::array();
  for (const Gpu& g : t.gpus) {
    json row = json::array(), nrow = json::array();
    for (const Gpu& o : t.gpus) row.push_back(gpuGpuCell(r, g.index, o.index));
    for (const Nic& n : t.nics) nrow.push_back(toString(gpuNicPath(t, g.index, n.index)));
    gg.push_back(std::move(row));
    gn.push_back(std::move(nrow));
  }
  j["matrix"]["gpu_gpu"] = std::move(gg);
  j["matrix"]["gpu_nic"] = std::move(gn);

  json rails = json::array();
  for (const Rail& rl : r.rails.rails) {
    json nics = json::array();
    for (int n : rl.nics) nics.push_back(t.nics[n].name);
    rails.push_back({{"index", rl.index}, {"card", rl.card}, {"nics", nics}, {"gpus", rl.gpus}});
  }
  j["rails"] = {{"policy", r.rails.policy}, {"count", r.rails.rails.size()}, {"rails", rails},
                {"excluded", r.rails.excluded}};

  json slNics = json::array(), tcNics = json::array();
  for (const Nic& n : t.nics) {
    std::string f = slFieldFor(n);
    if (f == "sl") slNics.push_back(n.name);
    if (f == "tc") tcNics.push_back(n.name);
  }
  j["sl"] = {{"precedence", {"EPX_OVERRIDE_SL", "group", "EPX_DEFAULT_SL", "NCCL_IB_SL", "built-in default"}},
             {"sl", slValue(r.sl.sl)},
             {"tc", slValue(r.sl.tc)},
             {"sl_nics", slNics},
             {"tc_nics", tcNics}};

  const auto& e = r.estimate;
  // null without a GPU: there is no EP to size.
  j["estimate"] = nullptr;
  if (r.estimated)
    j["estimate"] = {{"sms", e.sms},
                     {"qps", e.qps},
                     {"nvlink_gbytes_per_s", e.nvlinkGBps},
                     {"nic_gbytes_per_s", e.nicGBps},
                     {"nvlink_links", r.nvlinkLinks},
                     {"scaleup_ranks", r.shape.numScaleupRanks},
                     {"scaleout_ranks", r.shape.numScaleoutRanks},
                     {"experts", r.shape.numExperts},
                     {"topk", r.shape.numTopk},
                     {"model", "DeepEP V2 get_theoretical_num_sms/qps; docs/topology.md"}};
  j["counts"] = {{"gpus", t.gpus.size()}, {"nics", t.nics.size()}, {"nic_cards", t.numCards},
                 {"numa", t.numa.size()}, {"other_pci_devices", t.otherPciDevices}};
  // What the input did not say and epx assumed (PCI-only NCCL files); also among the warnings.
  j["assumptions"] = json::array();
  for (const Assumption& a : t.assumptions) {
    json x = {{"what", a.what}, {"devices", a.devices}};
    if (a.what == "nic_speed") {
      x["gbps"] = a.gbps;
      x["basis"] = a.basis;
    }
    j["assumptions"].push_back(std::move(x));
  }
  j["warnings"] = t.warnings;
  return j.dump(2) + "\n";
}

}  // namespace epx::topo::cli
