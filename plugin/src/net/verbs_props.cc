#include "net/verbs_props.h"

#include "nccl_net.h"

namespace epx::plugin::verbs {

int portSpeedMbps(int activeSpeed, int activeWidth) {
  int lane = 0;  // Mb/s per lane (InfiniBand signalling classes)
  switch (activeSpeed) {
    case 1: lane = 2500; break;     // SDR
    case 2: lane = 5000; break;     // DDR
    case 4: lane = 10000; break;    // QDR
    case 8: lane = 10000; break;    // FDR10
    case 16: lane = 14000; break;   // FDR
    case 32: lane = 25000; break;   // EDR
    case 64: lane = 50000; break;   // HDR
    case 128: lane = 100000; break; // NDR
    case 256: lane = 200000; break; // XDR
    default: return 0;
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return lane * lanes;
}

int findTopologyNic(const std::vector<topo::Nic>& nics, const std::string& device, int port) {
  for (const topo::Nic& n : nics)
    if (n.name == device && n.port == port) return n.index;
  return -1;
}

DeviceProps makeDeviceProps(const PortFacts& f, const topo::Nic* nic, const std::string& pciPathOfBusId) {
  DeviceProps p;
  p.name = f.device;
  p.port = f.port;
  p.pciPath = f.pciPath;
  p.guid = f.guid;
  p.speedMbps = f.speedMbps;
  p.source = "verbs";
  if (nic) {
    p.source = "topology";
    if (!pciPathOfBusId.empty()) p.pciPath = pciPathOfBusId;
    if (nic->guid) p.guid = nic->guid;
    if (nic->speedGbps > 0) p.speedMbps = static_cast<int>(nic->speedGbps * 1000.0 + 0.5);
  }
  p.ptrSupport = NCCL_PTR_HOST;
  if (f.dmabuf || f.peermem) p.ptrSupport |= NCCL_PTR_CUDA;
  if (f.dmabuf) p.ptrSupport |= NCCL_PTR_DMABUF;
  return p;
}

}  // namespace epx::plugin::verbs
