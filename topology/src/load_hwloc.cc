// hwloc-backed loaders: live discovery (HWLOC_FSROOT replays a sysfs snapshot) and hwloc 2.x XML.
//
// The I/O filter is set before every load, XML included: hwloc drops all PCI and OS devices
// otherwise. Debian's hwloc has no CUDA/NVML backend, so GPUs are found by PCI identity and RDMA
// NICs by their OpenFabrics OS device, whatever the PCI class (EFA and RoCE are class 0x0200).
#include <hwloc.h>
#include <pugixml.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <memory>
#include <vector>

#include "builder.h"
#include "epx/topology/busid.h"
#include "epx/topology/load.h"
#include "file_io.h"
#include "nvml_links.h"

namespace epx::topo {

namespace {

enum class Role { Host, Transparent, Switch };

struct TopoDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopoPtr = std::unique_ptr<hwloc_topology, TopoDeleter>;

PciAddress addressOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  PciAddress a;
  a.domain = p.domain;
  a.bus = p.bus;
  a.device = p.dev;
  a.function = p.func;
  return a;
}

uint64_t parseGuid(const char* s) {
  // hwloc writes GUIDs as "0002:c903:00f9:bfa3".
  if (!s) return 0;
  uint64_t v = 0;
  for (; *s; ++s) {
    char c = *s;
    if (c == ':') continue;
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return 0;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

struct Converter {
  hwloc_topology_t h;
  Topology& t;
  std::string sysRoot;  // "<fsroot>/sys" for live discovery, "" for XML

  int numaOf(hwloc_obj_t nonIo) {
    if (!nonIo || !nonIo->nodeset) return -1;
    int first = hwloc_bitmap_first(nonIo->nodeset);
    return first;
  }

  int attachPoint(int numa) {
    if (numa < 0) return 0;
    for (const auto& n : t.numa)
      if (n.osIndex == numa) return n.node;
    return detail::numaNode(t, numa, "");
  }

  void readPorts(Nic base, const char* ibName, hwloc_obj_t osdev) {
    // Ports: sysfs (live) knows rate/link layer/state; hwloc XML only has Port<N>State infos.
    std::vector<int> ports;
    if (!sysRoot.empty()) {
      std::string dir = sysRoot + "/class/infiniband/" + ibName + "/ports";
      if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
          int p = std::atoi(e->d_name);
          if (p > 0 && p < 256) ports.push_back(p);
        }
        closedir(d);
      }
    }
    if (ports.empty()) {
      for (int p = 1; p < 16; ++p) {
        std::string key = "Port" + std::to_string(p) + "State";
        if (hwloc_obj_get_info_by_name(osdev, key.c_str())) ports.push_back(p);
      }
    }
    if (ports.empty()) ports.push_back(1);
    std::sort(ports.begin(), ports.end());
    for (int p : ports) {
      Nic n = base;
      n.port = p;
      if (!sysRoot.empty()) {
        std::string pd = sysRoot + "/class/infiniband/" + ibName + "/ports/" + std::to_string(p) + "/";
        std::string rate = detail::readSysfsLine(pd + "rate");  // "200 Gb/sec (4X HDR)"
        if (!rate.empty()) n.speedGbps = std::atof(rate.c_str());
        std::string ll = detail::readSysfsLine(pd + "link_layer");
        if (ll == "InfiniBand") n.linkLayer = LinkLayer::InfiniBand;
        else if (ll == "Ethernet") n.linkLayer = LinkLayer::Ethernet;
        std::string st = detail::readSysfsLine(pd + "state");  // "4: ACTIVE"
        if (auto colon = st.find(": "); colon != std::string::npos) st = st.substr(colon + 2);
        n.state = st;
      }
      if (n.state.empty()) {
        std::string key = "Port" + std::to_string(p) + "State";
        if (const char* s = hwloc_obj_get_info_by_name(osdev, key.c_str())) {
          int v = std::atoi(s);  // ibv_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
          n.state = v == 4 ? "ACTIVE" : v == 1 ? "DOWN" : v == 2 ? "INIT" : v == 3 ? "ARMED" : s;
        }
      }
      detail::inferTransport(n);
      t.nics.push_back(n);
    }
  }

  void device(hwloc_obj_t o, int parent, int numa) {
    int node = detail::addNode(t, NodeKind::Device, parent, numa);
    Node& n = t.nodes[node];
    const auto& p = o->attr->pcidev;
    n.hasAddress = true;
    n.address = addressOf(p);
    n.classCode = p.class_id;
    n.vendor = p.vendor_id;
    n.device = p.device_id;
    n.linkGBps = p.linkspeed;
    const Node d = n;

    std::string netdev, gpuModel;
    std::vector<hwloc_obj_t> fabrics;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      switch (c->attr->osdev.type) {
        case HWLOC_OBJ_OSDEV_OPENFABRICS: fabrics.push_back(c); break;
        case HWLOC_OBJ_OSDEV_NETWORK: if (netdev.empty() && c->name) netdev = c->name; break;
        case HWLOC_OBJ_OSDEV_GPU:
        case HWLOC_OBJ_OSDEV_COPROC:
          if (const char* m = hwloc_obj_get_info_by_name(c, "GPUModel")) gpuModel = m;
          break;
        default: break;
      }
    }
    if (detail::isNvidiaGpu(d.vendor, d.classCode)) {
      Gpu g;
      g.node = node;
      g.address = d.address;
      g.numa = numa;
      g.deviceId = d.device;
      char buf[32];
      std::snprintf(buf, sizeof buf, "10de:%04x", d.device);
      g.name = gpuModel.empty() ? buf : gpuModel;
      t.gpus.push_back(g);
    } else if (!fabrics.empty()) {
      for (hwloc_obj_t f : fabrics) {
        Nic nic;
        nic.name = f->name ? f->name : "pci:" + formatBusId(d.address);
        nic.netdev = netdev;
        nic.node = node;
        nic.hasAddress = true;
        nic.address = d.address;
        nic.numa = numa;
        nic.vendor = d.vendor;
        nic.deviceId = d.device;
        nic.classCode = d.classCode;
        nic.guid = parseGuid(hwloc_obj_get_info_by_name(f, "SysImageGUID"));
        readPorts(nic, nic.name.c_str(), f);
      }
    } else {
      t.otherPciDevices++;
    }
  }

  void io(hwloc_obj_t o, int parent, int numa, Role parentRole, int depth) {
    if (depth > 64) return;  // hwloc trees are shallow; guard against corrupt input
    int here = parent;
    Role role = parentRole;
    if (o->type == HWLOC_OBJ_BRIDGE) {
      if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        here = detail::addNode(t, NodeKind::HostBridge, attachPoint(numa), numa);
        role = Role::Host;
      } else if (parentRole == Role::Transparent) {
        // Upstream port of a PCIe switch (its parent is a root port or a downstream port).
        here = detail::addNode(t, NodeKind::Switch, parent, numa);
        Node& n = t.nodes[here];
        n.hasAddress = true;
        n.address = addressOf(o->attr->bridge.upstream.pci);
        n.classCode = o->attr->bridge.upstream.pci.class_id;
        n.vendor = o->attr->bridge.upstream.pci.vendor_id;
        n.device = o->attr->bridge.upstream.pci.device_id;
        n.linkGBps = o->attr->bridge.upstream.pci.linkspeed;
        role = Role::Switch;
      } else {
        role = Role::Transparent;  // root port or switch downstream port: not a node
      }
    } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
      device(o, parent, numa);
      return;
    } else {
      return;  // OS devices are read through their PCI parent
    }
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) io(c, here, numa, role, depth + 1);
  }

  void walk(hwloc_obj_t o, int depth) {
    if (depth > 256) return;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      int numa = numaOf(o);
      if (c->type == HWLOC_OBJ_BRIDGE && c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        io(c, 0, numa, Role::Host, 0);
      } else if (c->type == HWLOC_OBJ_BRIDGE || c->type == HWLOC_OBJ_PCI_DEVICE) {
        // PCI without a host bridge object: give it a synthetic one.
        int hb = detail::addNode(t, NodeKind::HostBridge, attachPoint(numa), numa);
        io(c, hb, numa, c->type == HWLOC_OBJ_BRIDGE ? Role::Host : Role::Host, 1);
      }
    }
    for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) walk(c, depth + 1);
  }

  void run() {
    detail::addNode(t, NodeKind::Machine, -1, -1);
    hwloc_obj_t numa = nullptr;
    while ((numa = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, numa))) {
      char* list = nullptr;
      hwloc_bitmap_list_asprintf(&list, numa->cpuset);
      detail::numaNode(t, static_cast<int>(numa->os_index), list ? list : "");
      std::free(list);
    }
    walk(hwloc_get_root_obj(h), 0);
  }
};

Result<Topology> loadWith(TopoPtr& h, SourceKind kind, const std::string& name, const std::string& sysRoot) {
  if (hwloc_topology_load(h.get()) != 0)
    return Result<Topology>::fail(name + ": hwloc could not load the topology (" + std::strerror(errno) + ")");
  Topology t;
  t.source = kind;
  t.sourceName = name;
  Converter c{h.get(), t, sysRoot};
  c.run();
  if (std::string tooMany = detail::deviceLimitError(t, name); !tooMany.empty())
    return Result<Topology>::failOverLimit(tooMany);
  const std::vector<PciAddress> dups = detail::duplicateBusIds(t);
  // An hwloc XML file is input like an NCCL one: two devices at one PCI address make it malformed,
  // and the NCCL export of such a topology could not be read back (found by fuzzing). Live
  // discovery must not fail over what hwloc reports: a warning there.
  if (kind == SourceKind::HwlocXml && !dups.empty())
    return Result<Topology>::fail(name + ": two PCI devices with " + detail::duplicateBusIdsText(dups));
  for (const PciAddress& a : dups)
    t.warnings.push_back("two PCI devices with bus id " + formatBusId(a) + ": paths and rails may be wrong");
  detail::finish(t);
  return Result<Topology>::of(std::move(t));
}

TopoPtr newTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return nullptr;
  TopoPtr h(raw);
  // Without this, hwloc keeps no PCI or OS devices (also when importing XML).
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  return h;
}

/// Structural checks hwloc 2.9's importer relies on without checking (found by fuzzing): no
/// duplicate attributes, and every non-I/O object carries its cpusets/nodesets as hex masks.
std::string checkHwlocShape(const pugi::xml_node& root) {
  struct Item { pugi::xml_node n; int depth; };
  std::vector<Item> stack{{root, 0}};
  while (!stack.empty()) {
    auto [n, depth] = stack.back();
    stack.pop_back();
    if (depth > 128) return "XML nesting deeper than 128";
    std::vector<std::string> seen;
    for (pugi::xml_attribute a : n.attributes()) {
      std::string name = a.name();
      if (std::find(seen.begin(), seen.end(), name) != seen.end())
        return "duplicate attribute \"" + name + "\" on <" + n.name() + ">";
      seen.push_back(name);
    }
    if (std::string(n.name()) == "object") {
      std::string type = n.attribute("type").as_string();
      if (type.empty()) return "<object> without a type";
      bool io = type == "Bridge" || type == "PCIDev" || type == "OSDev" || type == "Misc";
      // hwloc accepts any hex digit as the PCI function (and device), which no PCI address has
      // and the NCCL topology export could not be read back with (found by fuzzing).
      if (pugi::xml_attribute b = n.attribute("pci_busid"); b && !parseBusId(b.as_string()))
        return type + " object with a bad pci_busid \"" + b.as_string() + "\" (domain:bus:device.function, device <= 1f, function <= 7)";
      if (!io) {
        for (const char* set : {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"}) {
          std::string v = n.attribute(set).as_string();
          if (v.empty()) return type + " object without " + set;
          if (v.find_first_not_of("0123456789abcdefABCDEFx,") != std::string::npos)
            return type + " object with a bad " + set + " \"" + v + "\"";
        }
      }
    }
    for (pugi::xml_node c : n.children())
      if (c.type() == pugi::node_element) stack.push_back({c, depth + 1});
  }
  return "";
}

/// Imports the XML once in a child process first: hwloc's importer can crash or loop on hostile
/// input, and a topology reader must fail with a message instead. Returns "" when the import is safe.
std::string probeHwlocImport(const std::string& xml) {
  pid_t pid = fork();
  if (pid < 0) return "";  // cannot probe: fall through to the real import
  if (pid == 0) {
    // A crash here is the answer, not an event for the parent's handlers (a fuzzer's would write a
    // crash report for the child's signal): the default action, seen by the parent's waitpid.
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM}) ::signal(sig, SIG_DFL);
    alarm(20);
    // hwloc reports import problems on stderr; the parent reports one line instead.
    if (FILE* devnull = std::freopen("/dev/null", "w", stderr)) (void)devnull;
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) _exit(3);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_set_xmlbuffer(raw, xml.c_str(), static_cast<int>(xml.size() + 1)) != 0) _exit(3);
    int rc = hwloc_topology_load(raw);
    hwloc_topology_destroy(raw);
    _exit(rc == 0 ? 0 : 3);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return "hwloc could not import the XML (inconsistent topology)";
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) return "hwloc did not finish importing the XML in 20 s";
  return "hwloc crashed importing the XML (malformed hwloc topology)";
}

}  // namespace

Result<Topology> loadLive() {
  TopoPtr h = newTopology();
  if (!h) return Result<Topology>::fail("live: hwloc_topology_init failed");
  const char* fsroot = std::getenv("HWLOC_FSROOT");
  std::string root = fsroot && *fsroot ? fsroot : "";
  std::string name = root.empty() ? "live" : "live (HWLOC_FSROOT=" + root + ")";
  // hwloc falls back to an empty machine when the root is unusable; say so instead.
  if (!root.empty()) {
    struct stat st;
    if (::stat(root.c_str(), &st) != 0)
      return Result<Topology>::fail("HWLOC_FSROOT=" + root + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return Result<Topology>::fail("HWLOC_FSROOT=" + root + ": not a directory");
    if (::stat((root + "/sys").c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Result<Topology>::fail("HWLOC_FSROOT=" + root + ": no sys/ directory (not a captured sysfs tree)");
  }
  auto r = loadWith(h, SourceKind::Live, name, root + "/sys");
  if (r.ok() && root.empty()) {
    for (std::string& note : detail::addNvmlLinks(r.value)) r.value.warnings.push_back(std::move(note));
  }
  return r;
}

Result<Topology> loadHwlocXmlBuffer(const std::string& xml, const std::string& name) {
  using R = Result<Topology>;
  if (xml.empty()) return R::fail(name + ": file is empty");
  if (xml.size() > kMaxTopologyFileBytes) return R::fail(name + ": file too large");
  // Check the shape first, so bad input gets one clear line instead of hwloc's diagnostics.
  pugi::xml_document doc;
  pugi::xml_parse_result pr = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!pr) return R::fail(name + ": malformed XML at byte " + std::to_string(pr.offset) + ": " + pr.description());
  pugi::xml_node root = doc.document_element();
  std::string tag = root.name();
  if (tag == "system") return R::fail(name + ": an NCCL topology file; use --nccl-xml");
  if (tag != "topology") return R::fail(name + ": not an hwloc XML file (root element <" + tag + ">)");
  std::string version = root.attribute("version").as_string();
  if (!version.empty() && version != "2.0" && version.rfind("2.", 0) != 0)
    return R::fail(name + ": unsupported hwloc XML version \"" + version + "\" (expected \"2.x\", as hwloc 2 writes, or none, as hwloc 1 writes)");
  if (!root.child("object")) return R::fail(name + ": hwloc XML without a root <object>");
  if (std::string shape = checkHwlocShape(root); !shape.empty()) return R::fail(name + ": malformed hwloc XML: " + shape);
  if (std::string probe = probeHwlocImport(xml); !probe.empty()) return R::fail(name + ": " + probe);

  TopoPtr h = newTopology();
  if (!h) return R::fail(name + ": hwloc_topology_init failed");
  if (hwloc_topology_set_xmlbuffer(h.get(), xml.c_str(), static_cast<int>(xml.size() + 1)) != 0)
    return R::fail(name + ": hwloc rejected the XML (" + std::strerror(errno) + ")");
  return loadWith(h, SourceKind::HwlocXml, name, "");
}

Result<Topology> loadHwlocXml(const std::string& path) {
  std::string buf;
  std::string err = detail::readSmallFile(path, &buf);
  if (!err.empty()) return Result<Topology>::fail(err);
  return loadHwlocXmlBuffer(buf, path);
}

}  // namespace epx::topo
