// NCCL topology XML reader (pugixml). Grammar as NCCL 2.28.9 accepts it (src/graph/xml.cc):
// system > cpu > {pci, nic}, pci > {pci, gpu, nic}, gpu > nvlink, nic > net. `<system version>` must be 1.
#include <hwloc.h>
#include <pugixml.hpp>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "builder.h"
#include "epx/topology/load.h"
#include "epx/topology/pci_ids.h"
#include "file_io.h"

namespace epx::topo {

namespace {

constexpr int kMaxDepth = 32;        // NCCL files are ~6 deep; deeper is malformed input
constexpr int kMaxElements = 65536;  // NCCL itself stops at 256 nodes per rank

struct Reader {
  Topology& t;
  std::string name;
  std::string error;
  bool overLimit = false;  // error is kMaxElements
  std::vector<std::string> unknownRate;  // PCI-only NIC ports whose rate stays unknown
  std::vector<std::string> unclassified;  // PCI functions without a class (and no known GPU/NIC id)
  int elements = 0;

  bool fail(const std::string& msg) {
    if (error.empty()) error = name + ": " + msg;
    return false;
  }

  static bool hex(const char* s, unsigned long long* out) {
    if (!s || !*s) return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 16);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
  }

  static bool integer(const char* s, long long* out) {
    if (!s || !*s) return false;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s, &end, 10);
    if (errno || end == s) return false;
    *out = v;
    return true;
  }

  /// NCCL writes 24-bit classes ("0x030200"); it also uses the base class alone ("0x02").
  static uint32_t class16(const char* s) {
    unsigned long long v = 0;
    if (!hex(s, &v)) return 0;
    size_t digits = std::strlen(s);
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) digits -= 2;
    if (digits <= 2) return static_cast<uint32_t>((v & 0xff) << 8);
    if (digits <= 4) return static_cast<uint32_t>(v & 0xffff);
    return static_cast<uint32_t>((v >> 8) & 0xffff);
  }

  /// NCCL's mask syntax: 32-bit words of 1 to 8 hex digits, separated by single commas.
  static bool isNcclMask(const std::string& mask) {
    size_t digits = 0;
    for (char ch : mask) {
      if (ch == ',') {
        if (digits == 0) return false;
        digits = 0;
      } else if (!std::isxdigit(static_cast<unsigned char>(ch)) || ++digits > 8) {
        return false;
      }
    }
    return digits > 0;
  }

  /// NCCL's affinity ("0000ffff,ffffffff": 32-bit hex words, most significant first, hwloc's bitmap
  /// syntax) as a CPU list ("0-47"); anything else stays as written. Only NCCL's syntax reaches
  /// hwloc_bitmap_sscanf: hwloc asserts on some malformed strings (",ff": an empty word).
  static std::string cpuList(const std::string& mask) {
    if (!isNcclMask(mask)) return mask;
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    std::string out = mask;
    char* list = nullptr;
    if (b && hwloc_bitmap_sscanf(b, mask.c_str()) == 0 && !hwloc_bitmap_iszero(b) &&
        hwloc_bitmap_list_asprintf(&list, b) >= 0 && list)
      out = list;
    std::free(list);
    if (b) hwloc_bitmap_free(b);
    return out;
  }

  bool count() {
    if (++elements > kMaxElements) {
      overLimit = error.empty();
      return fail("more than " + std::to_string(kMaxElements) + " XML elements (epx's limit; NCCL reads at most 256)");
    }
    return true;
  }

  /// A port of a PCI function without a <net> element (PCI-only file): the rate of its part or class, if known.
  static void assumeRate(Nic& n) {
    if (n.speedGbps > 0 || !n.hasAddress) return;
    if (auto a = assumedNicRate(n.vendor, n.deviceId, n.classCode)) {
      n.speedGbps = a->gbps;
      n.speedAssumed = true;
      n.speedBasis = a->basis;
    }
  }

  bool readNets(pugi::xml_node nic, int attach, const Node* pci, int numa) {
    bool any = false;
    for (pugi::xml_node net : nic.children("net")) {
      if (!count()) return false;
      any = true;
      Nic n;
      n.node = attach;
      n.numa = numa;
      n.name = net.attribute("name").as_string();
      if (pci) {
        n.hasAddress = true;
        n.address = pci->address;
        n.vendor = pci->vendor;
        n.deviceId = pci->device;
        n.classCode = pci->classCode;
      }
      if (n.name.empty()) n.name = pci ? "pci:" + formatBusId(pci->address) : "net" + std::to_string(t.nics.size());
      long long v;
      if (pugi::xml_attribute speed = net.attribute("speed")) {  // Mb/s; 0 = unknown
        if (integer(speed.as_string(), &v) && v >= 0) n.speedGbps = v / 1000.0;
        else t.warnings.push_back("NIC " + n.name + ": ignored speed \"" + speed.as_string() +
                                  "\" (not a non-negative number of Mb/s); rate unknown");
      }
      if (integer(net.attribute("port").as_string(), &v)) n.port = static_cast<int>(v);
      unsigned long long g;
      if (hex(net.attribute("guid").as_string(), &g)) n.guid = g;
      detail::inferTransport(n);
      t.nics.push_back(n);
    }
    if (!any && pci) {  // <nic> without <net>: one port named after the PCI function
      Nic n;
      n.node = attach;
      n.numa = numa;
      n.hasAddress = true;
      n.address = pci->address;
      n.vendor = pci->vendor;
      n.deviceId = pci->device;
      n.classCode = pci->classCode;
      n.name = "pci:" + formatBusId(pci->address);
      detail::inferTransport(n);
      assumeRate(n);
      if (!n.speedAssumed) unknownRate.push_back(n.name);
      t.nics.push_back(n);
    }
    return true;
  }

  bool readGpu(pugi::xml_node gpuEl, int node, int numa) {
    const Node& d = t.nodes[node];
    Gpu g;
    g.node = node;
    g.address = d.address;
    g.numa = numa;
    g.deviceId = d.device;
    char buf[32];
    std::snprintf(buf, sizeof buf, "10de:%04x", d.device);
    g.name = d.device ? buf : "NVIDIA GPU";
    const std::string self = formatBusId(d.address);
    if (gpuEl) {
      g.nvlinkKnown = true;  // NCCL writes every NVLink of a GPU it describes as <nvlink> children
      for (pugi::xml_node l : gpuEl.children("nvlink")) {
        if (!count()) return false;
        const std::string targetText = l.attribute("target").as_string();
        const bool hidden = isHiddenNvlinkPeer(targetText);  // VM: NVSwitch not visible (NCCL: "fffffff:ffff:ff")
        auto target = hidden ? std::optional<PciAddress>() : parseBusId(targetText);
        long long c = 0;
        if ((!target && !hidden) || !integer(l.attribute("count").as_string(), &c) || c <= 0 || c > 1024) {
          t.warnings.push_back("GPU " + self + ": ignored an <nvlink> with a bad target or count");
          continue;
        }
        NvLinkEdge e;
        e.target = hidden ? kHiddenNvlinkPeer : formatBusId(*target);
        e.count = static_cast<int>(c);
        e.toSwitch = hidden || class16(l.attribute("tclass").as_string()) == 0x0680;
        if (e.target == self) {
          t.warnings.push_back("GPU " + self + ": ignored an <nvlink> to itself (VM artifact)");
          continue;
        }
        g.nvlinks.push_back(e);
      }
    }
    t.gpus.push_back(g);
    return true;
  }

  bool readPci(pugi::xml_node el, int parent, int numa, int depth) {
    if (depth > kMaxDepth) return fail("XML nesting deeper than " + std::to_string(kMaxDepth));
    if (!count()) return false;
    const char* busid = el.attribute("busid").as_string();
    auto addr = parseBusId(busid);
    if (!addr) return fail(std::string("<pci> with a missing or bad busid \"") + busid + "\"");
    bool hasPciChild = static_cast<bool>(el.child("pci"));
    uint32_t cls = class16(el.attribute("class").as_string());
    bool isSwitch = hasPciChild || cls == 0x0604;
    int node = detail::addNode(t, isSwitch ? NodeKind::Switch : NodeKind::Device, parent, numa);
    {
      Node& n = t.nodes[node];
      n.hasAddress = true;
      n.address = *addr;
      n.classCode = cls;
      unsigned long long v;
      if (hex(el.attribute("vendor").as_string(), &v)) n.vendor = static_cast<uint16_t>(v);
      if (hex(el.attribute("device").as_string(), &v)) n.device = static_cast<uint16_t>(v);
      long long w = 0;
      integer(el.attribute("link_width").as_string(), &w);
      std::string speed = el.attribute("link_speed").as_string();
      if (!speed.empty() || w > 0) n.linkGBps = detail::ncclPciGBps(speed, static_cast<int>(w));
      n.linkSpeed = speed;
      if (el.attribute("link_width")) n.linkWidth = static_cast<int>(w);
    }
    const Node snapshot = t.nodes[node];  // t.nodes may grow below
    pugi::xml_node gpuEl = el.child("gpu");
    pugi::xml_node nicEl = el.child("nic");
    // Without <gpu>/<nic> children (PCI-only files) the class decides, or, with no class, a known
    // GPU / RDMA NIC device id (pci_ids.h).
    bool gpuClass = ((cls == 0x0302 || cls == 0x0300) && (snapshot.vendor == 0 || snapshot.vendor == 0x10de)) ||
                    (cls == 0 && snapshot.vendor == 0x10de && isKnownNvidiaGpuDevice(snapshot.device));
    bool nicClass = (cls >> 8) == 0x02 || (cls == 0 && isKnownRdmaNicDevice(snapshot.vendor, snapshot.device));
    if (!isSwitch) {
      if (gpuEl || gpuClass) {
        if (!readGpu(gpuEl, node, numa)) return false;
      } else if (nicEl || nicClass) {
        if (nicEl) {
          for (pugi::xml_node nic : el.children("nic"))
            if (!count() || !readNets(nic, node, &snapshot, numa)) return false;
        } else if (!readNets(pugi::xml_node(), node, &snapshot, numa)) {
          return false;
        }
      } else {
        t.otherPciDevices++;
        if (cls == 0) unclassified.push_back(formatBusId(*addr));
      }
    }
    for (pugi::xml_node c : el.children("pci"))
      if (!readPci(c, node, numa, depth + 1)) return false;
    return true;
  }

  bool readCpu(pugi::xml_node cpu, int ordinal) {
    if (!count()) return false;
    long long numa = ordinal;
    const char* id = cpu.attribute("numaid").as_string();
    if (*id && !integer(id, &numa)) return fail(std::string("<cpu> with a bad numaid \"") + id + "\"");
    if (numa < 0 || numa > 4096) numa = ordinal;
    const std::string affinity = cpu.attribute("affinity").as_string();
    int numaNode = detail::numaNode(t, static_cast<int>(numa), cpuList(affinity));
    for (NumaNode& nn : t.numa)
      if (nn.node == numaNode && nn.affinity.empty()) nn.affinity = affinity;
    // NCCL has no host bridges: everything under one <cpu> is one root complex (NCCL's PHB).
    int hb = -1;
    for (auto& c : t.nodes[numaNode].children)
      if (t.nodes[c].kind == NodeKind::HostBridge) hb = c;
    if (hb < 0) hb = detail::addNode(t, NodeKind::HostBridge, numaNode, static_cast<int>(numa));
    for (pugi::xml_node c : cpu.children()) {
      if (c.type() != pugi::node_element) continue;
      std::string tag = c.name();
      if (tag == "pci") {
        if (!readPci(c, hb, static_cast<int>(numa), 1)) return false;
      } else if (tag == "nic") {
        if (!count() || !readNets(c, hb, nullptr, static_cast<int>(numa))) return false;
      }
    }
    return true;
  }
};

}  // namespace

Result<Topology> loadNcclXmlBuffer(const std::string& xml, const std::string& name) {
  using R = Result<Topology>;
  if (xml.empty()) return R::fail(name + ": file is empty");
  if (xml.size() > kMaxTopologyFileBytes) return R::fail(name + ": file too large");
  pugi::xml_document doc;
  pugi::xml_parse_result pr = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!pr)
    return R::fail(name + ": malformed XML at byte " + std::to_string(pr.offset) + ": " + pr.description());
  pugi::xml_node root = doc.document_element();
  std::string tag = root.name();
  if (tag == "graphs") return R::fail(name + ": an NCCL graph file (NCCL_GRAPH_FILE), not a topology file");
  if (tag == "topology") return R::fail(name + ": an hwloc XML file; use --hwloc-xml");
  if (tag != "system") return R::fail(name + ": not an NCCL topology file (root element <" + tag + ">)");
  std::string version = root.attribute("version").as_string();
  if (version != "1")
    return R::fail(name + ": unsupported NCCL topology version \"" + version + "\" (NCCL reads only 1)");

  Topology t;
  t.source = SourceKind::NcclXml;
  t.sourceName = name;
  detail::addNode(t, NodeKind::Machine, -1, -1);
  Reader r{t, name, "", false, {}, {}, 0};
  int ordinal = 0;
  for (pugi::xml_node cpu : root.children("cpu"))
    if (!r.readCpu(cpu, ordinal++)) return r.overLimit ? R::failOverLimit(r.error) : R::fail(r.error);
  if (ordinal == 0) return R::fail(name + ": no <cpu> element");
  if (std::string tooMany = detail::deviceLimitError(t, name); !tooMany.empty()) return R::failOverLimit(tooMany);
  if (auto dups = detail::duplicateBusIds(t); !dups.empty())
    return R::fail(name + ": two <pci> elements with " + detail::duplicateBusIdsText(dups));
  detail::finish(t);
  if (!r.unclassified.empty())
    t.warnings.push_back(std::to_string(r.unclassified.size()) + " PCI function(s) (" + someOf(r.unclassified) +
                         ") have no class and no known GPU or NIC id: not classified" +
                         (t.gpus.empty() && t.nics.empty() ? "; the file names no GPU and no NIC (NCCL_TOPO_DUMP_FILE "
                                                             "from a run on the machine records them)"
                                                           : ""));
  detail::noteAssumptions(t, r.unknownRate);
  return R::of(std::move(t));
}

Result<Topology> loadNcclXml(const std::string& path) {
  std::string buf;
  std::string err = detail::readSmallFile(path, &buf);
  if (!err.empty()) return Result<Topology>::fail(err);
  return loadNcclXmlBuffer(buf, path);
}

}  // namespace epx::topo
