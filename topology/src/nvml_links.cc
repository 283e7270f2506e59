// NVML is never linked: epx must load on machines without the NVIDIA driver. The few entry points
// used are declared here with NVML's documented C ABI (nvml.h, NVML API version 11+).
#include "nvml_links.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

namespace epx::topo::detail {

// ---- Pure part -----------------------------------------------------------------------------------

int findAddress(const std::vector<PciAddress>& list, const PciAddress& a) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == a) return static_cast<int>(i);
  return -1;
}

bool sameBusId(const std::string& a, const std::string& b) {
  auto pa = parseBusId(a), pb = parseBusId(b);
  return pa && pb && *pa == *pb;
}

NvlinkResolution resolveNvlinks(const std::vector<PciAddress>& gpus, const std::vector<NvmlDevice>& devs) {
  NvlinkResolution r;
  r.edges.resize(gpus.size());
  r.nvmlOf.assign(gpus.size(), -1);
  std::vector<int> gpuOf(devs.size(), -1);  // NVML device -> hwloc GPU

  std::vector<PciAddress> devAddr(devs.size());
  for (size_t d = 0; d < devs.size(); ++d) devAddr[d] = devs[d].address;
  int matched = 0;
  for (size_t g = 0; g < gpus.size(); ++g)
    for (size_t d = 0; d < devs.size(); ++d)
      if (devs[d].addressKnown && devs[d].address == gpus[g] && gpuOf[d] < 0) {
        r.nvmlOf[g] = static_cast<int>(d);
        gpuOf[d] = static_cast<int>(g);
        ++matched;
        break;
      }
  if (matched == 0 && !gpus.empty() && devs.size() == gpus.size()) {
    // Same GPUs, other bus ids (a VM's guest view against the host's): pair them in bus-id order.
    std::vector<int> order(devs.size());
    for (size_t d = 0; d < devs.size(); ++d) order[d] = static_cast<int>(d);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return devAddr[x] < devAddr[y]; });
    std::vector<int> gorder(gpus.size());
    for (size_t g = 0; g < gpus.size(); ++g) gorder[g] = static_cast<int>(g);
    std::stable_sort(gorder.begin(), gorder.end(), [&](int x, int y) { return gpus[x] < gpus[y]; });
    for (size_t i = 0; i < gorder.size(); ++i) {
      r.nvmlOf[gorder[i]] = order[i];
      gpuOf[order[i]] = gorder[i];
    }
    r.notes.push_back("NVML bus ids match no hwloc GPU; NVML devices paired with GPUs in bus-id order");
  } else if (matched < static_cast<int>(gpus.size())) {
    r.notes.push_back("NVML knows " + std::to_string(matched) + " of " + std::to_string(gpus.size()) +
                      " GPUs by bus id: NVLink of the others unknown");
  }

  // The hwloc GPU a far end names: NVML's own bus ids first, then hwloc's.
  auto gpuAt = [&](const PciAddress& a) {
    int d = -1;
    for (size_t i = 0; i < devs.size(); ++i)
      if (devs[i].addressKnown && devs[i].address == a) { d = static_cast<int>(i); break; }
    if (d >= 0 && gpuOf[d] >= 0) return gpuOf[d];
    return findAddress(gpus, a);
  };

  int guessed = 0;
  for (size_t g = 0; g < gpus.size(); ++g) {
    int d = r.nvmlOf[g];
    if (d < 0) continue;
    const std::string self = formatBusId(gpus[g]);
    std::map<std::pair<std::string, bool>, int> counts;
    int unknown = 0;
    for (const NvmlLink& l : devs[d].links) {
      if (!l.remoteKnown && (l.remoteType == 2 || (l.hidden && l.remoteType < 0))) {
        counts[{kHiddenNvlinkPeer, true}]++;  // the host's NVSwitch, invisible to the guest
        continue;
      }
      if (!l.remoteKnown) { ++unknown; continue; }
      int peer = gpuAt(l.remote);
      if (peer >= 0 && l.remoteType != 2) counts[{formatBusId(gpus[peer]), false}]++;
      else counts[{formatBusId(l.remote), true}]++;  // NVSwitch, or a far end that is no GPU here
    }
    if (unknown > 0) {
      // Far end not reported: the one NVLink P2P peer if there is exactly one, else a switch.
      std::vector<int> peers;
      for (int p : devs[d].nvlinkP2pPeers)
        if (p >= 0 && p < static_cast<int>(devs.size()) && p != d && gpuOf[p] >= 0) peers.push_back(gpuOf[p]);
      if (peers.size() == 1) counts[{formatBusId(gpus[peers[0]]), false}] += unknown;
      else counts[{kHiddenNvlinkPeer, true}] += unknown;
      guessed += unknown;
    }
    for (const auto& [key, c] : counts)
      if (key.first != self) r.edges[g].push_back({key.first, c, key.second});
  }
  if (guessed > 0)
    r.notes.push_back("NVML did not report the far end of " + std::to_string(guessed) +
                      " NVLink(s); attributed from NVLink P2P status");
  return r;
}

// ---- NVML loader ---------------------------------------------------------------------------------

namespace {

using nvmlDevice = void*;
using nvmlReturn = int;              // NVML_SUCCESS = 0
constexpr unsigned kMaxLinks = 18;   // NVML_NVLINK_MAX_LINKS (Hopper/Blackwell: 18)
constexpr int kP2pCapsNvlink = 2;    // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2pStatusOk = 0;      // NVML_P2P_STATUS_OK

struct NvmlPciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

bool debugOn() {
  const char* v = std::getenv("EPX_TOPO_DEBUG");
  return v && *v && std::strcmp(v, "0") != 0;
}

void trace(const char* fmt, ...) {
  static const bool on = debugOn();
  if (!on) return;
  va_list ap;
  va_start(ap, fmt);
  std::fputs("epx-topo nvml: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

struct Nvml {
  void* lib = nullptr;
  std::string path;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  const char* (*errorString)(nvmlReturn) = nullptr;
  nvmlReturn (*count)(unsigned*) = nullptr;
  nvmlReturn (*byIndex)(unsigned, nvmlDevice*) = nullptr;
  nvmlReturn (*pciInfo)(nvmlDevice, NvmlPciInfo*) = nullptr;
  nvmlReturn (*name)(nvmlDevice, char*, unsigned) = nullptr;
  nvmlReturn (*linkState)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlReturn (*remotePci)(nvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn (*remoteType)(nvmlDevice, unsigned, int*) = nullptr;  // optional; 2 = NVSwitch
  nvmlReturn (*p2p)(nvmlDevice, nvmlDevice, int, int*) = nullptr;  // optional

  template <class F>
  bool sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(lib, n));
    return f != nullptr;
  }
  std::string err(nvmlReturn rc) const {
    std::string s = "error " + std::to_string(rc);
    if (errorString)
      if (const char* e = errorString(rc)) s += " (" + std::string(e) + ")";
    return s;
  }
  ~Nvml() {
    if (lib) dlclose(lib);
  }
};

/// Candidate library names/paths: EPX_NVML_LIBRARY, the soname (ld.so search: LD_LIBRARY_PATH,
/// ld.so.cache), the unversioned name, then LD_LIBRARY_PATH entries and the usual driver
/// directories spelled out (containers mount the driver under /usr/local/nvidia/lib64 and the like).
std::vector<std::string> nvmlCandidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("EPX_NVML_LIBRARY"); p && *p) c.push_back(p);
  c.push_back("libnvidia-ml.so.1");
  c.push_back("libnvidia-ml.so");
  std::vector<std::string> dirs;
  if (const char* lp = std::getenv("LD_LIBRARY_PATH")) {
    std::string s = lp;
    size_t b = 0;
    while (b <= s.size()) {
      size_t e = s.find(':', b);
      if (e == std::string::npos) e = s.size();
      if (e > b) dirs.push_back(s.substr(b, e - b));
      b = e + 1;
    }
  }
  for (const char* d : {"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current",
                        "/run/nvidia/driver/usr/lib/x86_64-linux-gnu", "/run/nvidia/driver/usr/lib64", "/usr/lib/wsl/lib"})
    dirs.push_back(d);
  for (const std::string& d : dirs)
    for (const char* n : {"libnvidia-ml.so.1", "libnvidia-ml.so"}) c.push_back(d + "/" + n);
  return c;
}

}  // namespace

std::vector<std::string> addNvmlLinks(Topology& t) {
  if (t.gpus.empty()) return {};
  if (const char* off = std::getenv("EPX_TOPO_NO_NVML"); off && std::strcmp(off, "1") == 0)
    return {"NVML skipped (EPX_TOPO_NO_NVML=1): NVLink unknown"};
  Nvml n;
  std::string lastErr;
  for (const std::string& cand : nvmlCandidates()) {
    n.lib = dlopen(cand.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (n.lib) {
      n.path = cand;
      break;
    }
    const char* e = dlerror();
    lastErr = e ? e : cand;
    trace("dlopen %s failed: %s", cand.c_str(), lastErr.c_str());
  }
  if (!n.lib) return {"NVML not found (libnvidia-ml.so.1: " + lastErr + "): NVLink unknown"};
  trace("loaded %s", n.path.c_str());
  n.sym(n.errorString, "nvmlErrorString");
  if (!n.sym(n.init, "nvmlInit_v2") || !n.sym(n.shutdown, "nvmlShutdown") || !n.sym(n.count, "nvmlDeviceGetCount_v2") ||
      !n.sym(n.byIndex, "nvmlDeviceGetHandleByIndex_v2") || !n.sym(n.linkState, "nvmlDeviceGetNvLinkState") ||
      !n.sym(n.remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2"))
    return {"NVML (" + n.path + ") lacks NVLink entry points: NVLink unknown"};
  if (!n.sym(n.pciInfo, "nvmlDeviceGetPciInfo_v3")) n.sym(n.pciInfo, "nvmlDeviceGetPciInfo_v2");
  n.sym(n.name, "nvmlDeviceGetName");
  n.sym(n.remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
  n.sym(n.p2p, "nvmlDeviceGetP2PStatus");
  if (nvmlReturn rc = n.init(); rc != 0) return {"nvmlInit failed (" + n.path + ", " + n.err(rc) + "): NVLink unknown"};

  std::vector<std::string> notes;
  unsigned count = 0;
  if (nvmlReturn rc = n.count(&count); rc != 0) {
    n.shutdown();
    return {"nvmlDeviceGetCount failed (" + n.err(rc) + "): NVLink unknown"};
  }
  trace("%u device(s)", count);
  std::vector<nvmlDevice> handles(count, nullptr);
  std::vector<NvmlDevice> devs(count);
  for (unsigned i = 0; i < count; ++i) {
    if (nvmlReturn rc = n.byIndex(i, &handles[i]); rc != 0) {
      trace("device %u: handle %s", i, n.err(rc).c_str());
      handles[i] = nullptr;
      continue;
    }
    NvmlDevice& d = devs[i];
    NvmlPciInfo pci;
    std::memset(&pci, 0, sizeof pci);
    if (n.pciInfo && n.pciInfo(handles[i], &pci) == 0) {
      pci.busId[sizeof pci.busId - 1] = 0;
      pci.busIdLegacy[sizeof pci.busIdLegacy - 1] = 0;
      auto a = parseBusId(pci.busId);
      if (!a) a = parseBusId(pci.busIdLegacy);
      if (a) {
        d.addressKnown = true;
        d.address = *a;
      }
      trace("device %u: bus id \"%s\" (legacy \"%s\") -> %s", i, pci.busId, pci.busIdLegacy,
            a ? formatBusId(*a).c_str() : "unparsed");
    }
    if (n.name) {
      char buf[96] = {0};
      if (n.name(handles[i], buf, sizeof buf) == 0 && buf[0]) d.name = buf;
    }
    for (unsigned l = 0; l < kMaxLinks; ++l) {
      int active = 0;
      nvmlReturn rc = n.linkState(handles[i], l, &active);
      if (rc != 0 || !active) {
        if (rc != 0 && l == 0) trace("device %u link 0: state %s", i, n.err(rc).c_str());
        continue;
      }
      NvmlLink link;
      link.link = l;
      NvmlPciInfo rp;
      std::memset(&rp, 0, sizeof rp);
      nvmlReturn prc = n.remotePci(handles[i], l, &rp);
      if (prc == 0) {
        rp.busId[sizeof rp.busId - 1] = 0;
        rp.busIdLegacy[sizeof rp.busIdLegacy - 1] = 0;
        // A VM guest gets "FFFFFFFF:FF:FF.0" for a far end it cannot see (the host's NVSwitch):
        // no valid bus id (device 0xff > 0x1f), so it is flagged rather than parsed.
        link.hidden = isHiddenNvlinkPeer(rp.busId) || (!rp.busId[0] && isHiddenNvlinkPeer(rp.busIdLegacy));
        std::optional<PciAddress> a;
        if (!link.hidden) a = parseBusId(rp.busId);
        if (!a && !link.hidden) a = parseBusId(rp.busIdLegacy);
        if (!a && !link.hidden && rp.bus <= 0xff && rp.device <= 0x1f && (rp.domain || rp.bus || rp.device)) {
          PciAddress f;  // busId empty: the numeric fields (device is the devfn-less slot)
          f.domain = rp.domain;
          f.bus = static_cast<uint8_t>(rp.bus);
          f.device = static_cast<uint8_t>(rp.device);
          a = f;
        }
        if (a) {
          link.remoteKnown = true;
          link.remote = *a;
        }
      }
      if (n.remoteType) n.remoteType(handles[i], l, &link.remoteType);
      trace("device %u link %u: active, remote %s \"%s\", type %d", i, l, prc == 0 ? "ok" : n.err(prc).c_str(),
            prc == 0 ? rp.busId : "", link.remoteType);
      d.links.push_back(link);
    }
  }
  if (n.p2p)
    for (unsigned i = 0; i < count; ++i)
      for (unsigned j = 0; j < count; ++j) {
        if (i == j || !handles[i] || !handles[j]) continue;
        int st = -1;
        nvmlReturn rc = n.p2p(handles[i], handles[j], kP2pCapsNvlink, &st);
        trace("p2p nvlink %u -> %u: rc %d status %d", i, j, rc, st);
        if (rc == 0 && st == kP2pStatusOk) devs[i].nvlinkP2pPeers.push_back(static_cast<int>(j));
      }
  n.shutdown();

  std::vector<PciAddress> addrs;
  for (const Gpu& g : t.gpus) addrs.push_back(g.address);
  NvlinkResolution r = resolveNvlinks(addrs, devs);
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    if (r.nvmlOf[g] < 0) continue;
    const NvmlDevice& d = devs[r.nvmlOf[g]];
    if (!d.name.empty()) t.gpus[g].name = d.name;
    t.gpus[g].nvlinks = r.edges[g];
    t.gpus[g].nvlinkKnown = true;
    trace("gpu %zu (%s) = nvml %d: %zu active link(s)", g, formatBusId(t.gpus[g].address).c_str(), r.nvmlOf[g],
          d.links.size());
  }
  notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  return notes;
}

}  // namespace epx::topo::detail
