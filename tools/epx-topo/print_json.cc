// JSON printer. Schema: tools/epx-topo/epx-topo.schema.json, described in docs/topology.md.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <type_traits>

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

nlohmann::ordered_json slValue(const SlValue& v) {
  return {{"value", v.value}, {"source", toString(v.source)}, {"origin", v.origin}};
}


/// A JSON array of strings written directly: the cells are epx's own path names (X, NV18, PIX...),
/// which need no escaping; a million of them as JSON values cost more than the whole rest.
template <class Cell>
std::string namesRow(size_t n, Cell cell) {
  std::string row = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i) row += ',';
    row += '"';
    row += cell(i);
    row += '"';
  }
  return row + "]";
}

/// The document as text: each top-level member on its own lines, and each element of the long
/// arrays (GPUs, NICs, NUMA nodes, matrix rows) compact on one line. At the device limit (1,024
/// GPUs on NVSwitch: a million peers and matrix cells) a whole-document DOM took 2.6 s CPU and
/// 470 MB; one element at a time it is built, written and freed, and the million-entry parts
/// (peers, matrix rows) are written as text.
class DocumentWriter {
 public:
  DocumentWriter() { out_ += "{"; }

  void member(const char* key, const nlohmann::ordered_json& value) {
    open(key);
    out_ += value.dump();
  }

  /// An array written element by element: `each(i)` returns element i, as a JSON value or as
  /// JSON text already written.
  template <class Each>
  void array(const char* key, size_t n, Each each) {
    open(key);
    if (n == 0) {
      out_ += "[]";
      return;
    }
    out_ += "[";
    for (size_t i = 0; i < n; ++i) {
      out_ += i ? "," : "";
      newline(depth_ + 1);
      if constexpr (std::is_same_v<decltype(each(i)), std::string>)
        out_ += each(i);
      else
        out_ += each(i).dump();
    }
    newline(depth_);
    out_ += "]";
  }

  /// Members written after this, up to endObject(), go into an object named `key`.
  void beginObject(const char* key) {
    open(key);
    out_ += "{";
    ++depth_;
    first_ = true;
  }
  void endObject() {
    --depth_;
    newline(depth_);
    out_ += "}";
    first_ = false;
  }

  std::string finish() {
    out_ += "\n}\n";
    return std::move(out_);
  }

 private:
  void newline(int depth) {
    out_ += "\n";
    out_.append(2 * depth, ' ');
  }
  void open(const char* key) {
    if (!first_) out_ += ",";
    first_ = false;
    newline(depth_);
    out_ += "\"";
    out_ += key;
    out_ += "\": ";
  }
  std::string out_;
  int depth_ = 1;
  bool first_ = true;
};

}  // namespace

std::string toJson(const Report& r) {
  using json = nlohmann::ordered_json;
  const Topology& t = r.topo;
  DocumentWriter doc;
  doc.member("schema_version", 1);
  doc.member("source", {{"kind", sourceKind(t.source)}, {"name", t.sourceName}});
  doc.member("counts", {{"gpus", t.gpus.size()}, {"nics", t.nics.size()}, {"nic_cards", t.numCards},
                        {"numa", t.numa.size()}, {"other_pci_devices", t.otherPciDevices}});

  doc.array("numa", t.numa.size(), [&](size_t i) {
    const NumaNode& n = t.numa[i];
    json numa = {{"os_index", n.osIndex}, {"cpus", n.cpus}};
    if (!n.affinity.empty()) numa["affinity"] = n.affinity;  // NCCL files: the mask as written
    return numa;
  });

  doc.array("gpus", t.gpus.size(), [&](size_t i) {
    const Gpu& g = t.gpus[i];
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
    gpu["rail_nics"] = std::move(nics);
    // The peer list last, as text: with NVSwitches every GPU lists every other.
    std::string text = gpu.dump();
    text.pop_back();  // the object's closing brace
    text += ",\"nvlink_peers\":[";
    bool first = true;
    for (const Gpu& o : t.gpus)
      if (int nv = r.nvlinks.between(g.index, o.index); nv > 0) {
        text += first ? "" : ",";
        first = false;
        text += "{\"gpu\":" + std::to_string(o.index) + ",\"links\":" + std::to_string(nv) + "}";
      }
    return text + "]}";
  });

  std::vector<int> railOfNic(t.nics.size(), -1);
  for (const Rail& rl : r.rails.rails)
    for (int n : rl.nics) railOfNic[n] = rl.index;
  doc.array("nics", t.nics.size(), [&](size_t i) {
    const Nic& n = t.nics[i];
    return json{{"index", n.index},
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
                {"rail", railOfNic[n.index]}};
  });

  doc.beginObject("matrix");
  doc.array("gpu_gpu", t.gpus.size(), [&](size_t i) {
    return namesRow(t.gpus.size(), [&](size_t o) { return gpuGpuCell(r, t.gpus[i].index, t.gpus[o].index); });
  });
  doc.array("gpu_nic", t.gpus.size(), [&](size_t i) {
    return namesRow(t.nics.size(), [&](size_t n) { return toString(gpuNicPath(t, t.gpus[i].index, t.nics[n].index)); });
  });
  doc.endObject();

  json rails = json::array();
  for (const Rail& rl : r.rails.rails) {
    json nics = json::array();
    for (int n : rl.nics) nics.push_back(t.nics[n].name);
    rails.push_back({{"index", rl.index}, {"card", rl.card}, {"nics", nics}, {"gpus", rl.gpus}});
  }
  doc.member("rails", {{"policy", r.rails.policy}, {"count", r.rails.rails.size()}, {"rails", rails},
                       {"excluded", r.rails.excluded}});

  json slNics = json::array(), tcNics = json::array();
  for (const Nic& n : t.nics) {
    std::string f = slFieldFor(n);
    if (f == "sl") slNics.push_back(n.name);
    if (f == "tc") tcNics.push_back(n.name);
  }
  doc.member("sl", {{"precedence", {"EPX_OVERRIDE_SL", "group", "EPX_DEFAULT_SL", "NCCL_IB_SL", "built-in default"}},
                    {"sl", slValue(r.sl.sl)},
                    {"tc", slValue(r.sl.tc)},
                    {"sl_nics", slNics},
                    {"tc_nics", tcNics}});

  const auto& e = r.estimate;
  // null without a GPU: there is no EP to size.
  json estimate = nullptr;
  if (r.estimated)
    estimate = {{"sms", e.sms},
                {"qps", e.qps},
                {"nvlink_gbytes_per_s", e.nvlinkGBps},
                {"nic_gbytes_per_s", e.nicGBps},
                {"nvlink_links", r.nvlinkLinks},
                {"scaleup_ranks", r.shape.numScaleupRanks},
                {"scaleout_ranks", r.shape.numScaleoutRanks},
                {"experts", r.shape.numExperts},
                {"topk", r.shape.numTopk},
                {"forwarding", "direct"},
                {"network_rows_per_token", e.networkRowsPerToken},
                {"hybrid", r.hasHybrid() ? json{{"sms", r.hybridEstimate.sms},
                                                {"qps", r.hybridEstimate.qps},
                                                {"network_rows_per_token", r.hybridEstimate.networkRowsPerToken}}
                                         : json(nullptr)},
                {"model", "DeepEP V2 get_theoretical_num_sms/qps; docs/topology.md"}};
  doc.member("estimate", estimate);
  // What the input did not say and epx assumed (PCI-only NCCL files); also among the warnings.
  doc.array("assumptions", t.assumptions.size(), [&](size_t i) {
    const Assumption& a = t.assumptions[i];
    json x = {{"what", a.what}, {"devices", a.devices}};
    if (a.what == "nic_speed") {
      x["gbps"] = a.gbps;
      x["basis"] = a.basis;
    }
    return x;
  });
  doc.array("warnings", t.warnings.size(), [&](size_t i) { return json(t.warnings[i]); });
  return doc.finish();
}

}  // namespace epx::topo::cli
