// NVML is never linked: epx must load on machines without the NVIDIA driver. The few entry points
// used are declared here with NVML's documented C ABI (nvml.h, NVML API version 11+).
#include "nvml_links.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>

namespace epx::topo::detail {

namespace {

using nvmlDevice = void*;
using nvmlReturn = int;  // NVML_SUCCESS = 0
constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper/Blackwell: 18)

struct NvmlPciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  nvmlReturn (*byBusId)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*name)(nvmlDevice, char*, unsigned) = nullptr;
  nvmlReturn (*linkState)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlReturn (*remotePci)(nvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn (*remoteType)(nvmlDevice, unsigned, int*) = nullptr;  // optional; 2 = NVSwitch

  template <class F>
  bool sym(F& f, const char* n) {
    f = reinterpret_cast<F>(dlsym(lib, n));
    return f != nullptr;
  }
  ~Nvml() {
    if (lib) dlclose(lib);
  }
};

}  // namespace

std::string addNvmlLinks(Topology& t) {
  if (t.gpus.empty()) return "";
  if (const char* off = std::getenv("EPX_TOPO_NO_NVML"); off && std::strcmp(off, "1") == 0)
    return "NVML skipped (EPX_TOPO_NO_NVML=1): NVLink unknown";
  Nvml n;
  n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) return "NVML not found (libnvidia-ml.so.1): NVLink unknown";
  if (!n.sym(n.init, "nvmlInit_v2") || !n.sym(n.shutdown, "nvmlShutdown") ||
      !n.sym(n.byBusId, "nvmlDeviceGetHandleByPciBusId_v2") || !n.sym(n.linkState, "nvmlDeviceGetNvLinkState") ||
      !n.sym(n.remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2"))
    return "NVML lacks NVLink entry points: NVLink unknown";
  n.sym(n.name, "nvmlDeviceGetName");
  n.sym(n.remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
  if (n.init() != 0) return "nvmlInit failed: NVLink unknown";
  for (Gpu& g : t.gpus) {
    nvmlDevice dev = nullptr;
    std::string bus = formatBusId(g.address);
    if (n.byBusId(bus.c_str(), &dev) != 0) continue;
    if (n.name) {
      char buf[96] = {0};
      if (n.name(dev, buf, sizeof buf) == 0 && buf[0]) g.name = buf;
    }
    std::map<std::pair<std::string, bool>, int> counts;
    for (unsigned l = 0; l < kMaxLinks; ++l) {
      int active = 0;
      if (n.linkState(dev, l, &active) != 0 || !active) continue;
      NvmlPciInfo pci;
      std::memset(&pci, 0, sizeof pci);
      if (n.remotePci(dev, l, &pci) != 0) continue;
      pci.busId[sizeof pci.busId - 1] = 0;
      auto addr = parseBusId(pci.busId);
      if (!addr) continue;
      int type = -1;
      bool toSwitch = false;
      if (n.remoteType && n.remoteType(dev, l, &type) == 0) toSwitch = type == 2;
      counts[{formatBusId(*addr), toSwitch}]++;
    }
    g.nvlinks.clear();
    for (const auto& [key, c] : counts) {
      // A far end that is not a GPU of this machine is a switch even without the type query.
      bool isGpu = false;
      for (const Gpu& o : t.gpus) isGpu |= formatBusId(o.address) == key.first;
      g.nvlinks.push_back({key.first, c, key.second || !isGpu});
    }
  }
  n.shutdown();
  return "";
}

}  // namespace epx::topo::detail
