// NEVER RUN ON A NIC (see verbs_device.h).
#include "net/verbs_device.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "common/log.h"
#include "epx/topology/busid.h"
#include "epx/topology/load.h"
#include "net/verbs_api.h"
#include "net/verbs_hca_filter.h"

namespace epx::plugin::verbs {

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool fileExists(const char* path) { return access(path, F_OK) == 0; }

// /sys/class/infiniband, or EPX_IB_SYSFS_ROOT (a captured or fake tree, for tests and replays).
std::string sysfsRoot() {
  const char* r = std::getenv("EPX_IB_SYSFS_ROOT");
  return r && *r ? r : "/sys/class/infiniband";
}

// DMA-BUF registration works when the entry point exists and the kernel driver does not reject it
// outright: a call with fd -1 fails with EBADF (supported) rather than EOPNOTSUPP/EPROTONOSUPPORT.
bool probeDmabuf(const VerbsApi& api, ibv_pd* pd) {
  if (!api.regDmabufMr || !pd) return false;
  errno = 0;
  ibv_mr* mr = api.regDmabufMr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  if (mr) {
    api.deregMr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

std::vector<GidEntry> gidTable(const VerbsApi& api, ibv_context* ctx, const std::string& dev, int port, int tableLen,
                               bool ethernet) {
  std::vector<GidEntry> table;
  for (int i = 0; i < tableLen && i < 256; ++i) {
    ibv_gid g;
    if (api.queryGid(ctx, static_cast<uint8_t>(port), i, &g) != 0) continue;
    GidEntry e;
    e.index = i;
    std::memcpy(e.raw, g.raw, 16);
    e.type = gidTypeFromSysfs(readFile(sysfsRoot() + "/" + dev + "/ports/" + std::to_string(port) +
                                       "/gid_attrs/types/" + std::to_string(i)),
                              ethernet);
    if (!ethernet && e.type == GidType::Unknown) e.type = GidType::InfiniBand;
    table.push_back(e);
  }
  return table;
}

std::vector<Port> enumerate(const Settings& s, std::string* why) {
  std::vector<Port> ports;
  const VerbsApi* api = verbsApi(why);
  if (!api) return ports;
  HcaFilter filter;
  if (std::string e = parseHcaFilter(s.hcaFilter, &filter); !e.empty()) {
    *why = "EPX_IB_HCA/NCCL_IB_HCA: " + e;
    return ports;
  }
  int n = 0;
  ibv_device** list = api->getDeviceList(&n);
  if (!list || n == 0) {
    *why = "no RDMA device (ibv_get_device_list found none)";
    if (list) api->freeDeviceList(list);
    return ports;
  }
  // Properties come from topology/ where it knows the port (one live discovery).
  auto topo = topo::loadLive();
  if (!topo.ok()) EPX_INFO(NCCL_NET, "epx verbs: topology discovery failed (%s); properties from verbs", topo.error.c_str());
  const bool peermem = fileExists("/sys/kernel/mm/memory_peers/nv_mem/version") || fileExists("/sys/module/nvidia_peermem");
  for (int d = 0; d < n; ++d) {
    const std::string name = api->getDeviceName(list[d]);
    ibv_context* ctx = api->openDevice(list[d]);
    if (!ctx) continue;
    ibv_device_attr attr;
    if (api->queryDevice(ctx, &attr) != 0) {
      api->closeDevice(ctx);
      continue;
    }
    ibv_pd* pd = nullptr;
    bool used = false;
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa;
      if (api->queryPort(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE) continue;
      const bool ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && !ethernet) continue;
      if (!hcaFilterAccepts(filter, name, p)) continue;
      if (!pd && !(pd = api->allocPd(ctx))) break;
      Port port;
      port.context = ctx;
      port.pd = pd;
      port.lid = pa.lid;
      port.activeMtu = pa.active_mtu;
      port.facts.device = name;
      port.facts.port = p;
      port.facts.ethernet = ethernet;
      port.facts.active = true;
      port.facts.speedMbps = portSpeedMbps(pa.active_speed, pa.active_width);
      port.facts.guid = be64toh(attr.node_guid);
      port.facts.pciPath = realPath(sysfsRoot() + "/" + name + "/device");
      port.facts.peermem = peermem;
      port.facts.dmabuf = s.useDmabuf && probeDmabuf(*api, pd);
      const GidChoice gc = selectGid(gidTable(*api, ctx, name, p, pa.gid_tbl_len, ethernet), ethernet, s.gidIndex, s.family);
      if (gc.index < 0) {
        EPX_WARN(NCCL_NET, "epx verbs: %s:%d skipped: %s", name.c_str(), p, gc.reason.c_str());
        continue;
      }
      ibv_gid g;
      api->queryGid(ctx, static_cast<uint8_t>(p), gc.index, &g);
      std::memcpy(port.gid, g.raw, 16);
      port.gidIndex = gc.index;
      const topo::Nic* nic = nullptr;
      std::string busPath;
      if (topo.ok()) {
        const int i = findTopologyNic(topo.value.nics, name, p);
        if (i >= 0) {
          nic = &topo.value.nics[i];
          if (nic->hasAddress) busPath = realPath("/sys/bus/pci/devices/" + topo::formatBusId(nic->address));
        }
      }
      port.props = makeDeviceProps(port.facts, nic, busPath);
      EPX_INFO(NCCL_NET, "epx verbs: device %zu = %s:%d %s, %d Mb/s, GID index %d (%s), props from %s, ptrSupport 0x%x",
               ports.size(), name.c_str(), p, ethernet ? "RoCE" : "InfiniBand", port.props.speedMbps, gc.index,
               gc.reason.c_str(), port.props.source.c_str(), port.props.ptrSupport);
      ports.push_back(std::move(port));
      used = true;
    }
    if (!used) {
      if (pd) api->deallocPd(pd);
      api->closeDevice(ctx);
    }
  }
  api->freeDeviceList(list);
  if (ports.empty()) *why = "no active InfiniBand/RoCE port passes the HCA filter";
  return ports;
}

}  // namespace

const std::vector<Port>& verbsPorts(const Settings& s, std::string* why) {
  static std::once_flag once;
  static std::vector<Port> ports;
  static std::string reason;
  std::call_once(once, [&] { ports = enumerate(s, &reason); });
  if (why) *why = reason;
  return ports;
}

}  // namespace epx::plugin::verbs
