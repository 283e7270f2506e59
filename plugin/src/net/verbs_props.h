// ncclNet device properties of a verbs port: from topology/ (PCI path, speed, GUID) where the
// model knows the port, else from what the verbs queries said. Pure logic, unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epx/topology/model.h"

namespace epx::plugin::verbs {

// What the verbs queries and sysfs said about one port (verbs_device.cc fills it).
struct PortFacts {
  std::string device;       // ibv device name, e.g. mlx5_0
  int port = 1;
  bool ethernet = false;    // link layer Ethernet (RoCE)
  bool active = false;      // IBV_PORT_ACTIVE
  int speedMbps = 0;        // from active_speed × active_width
  uint64_t guid = 0;        // node GUID (host order)
  std::string pciPath;      // realpath of /sys/class/infiniband/<dev>/device, "" if unknown
  bool dmabuf = false;      // ibv_reg_dmabuf_mr exists and the CUDA driver exports DMA-BUFs
  bool peermem = false;     // nvidia-peermem (legacy GPUDirect RDMA) is loaded
};

struct DeviceProps {
  std::string name;
  std::string pciPath;
  uint64_t guid = 0;
  int speedMbps = 0;
  int port = 1;
  int ptrSupport = 0;  // NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF
  std::string source;  // "topology" or "verbs" (for NCCL_DEBUG=INFO)
};

// Port rate in Mb/s from ibv_port_attr.active_speed and active_width codes; 0 if unknown.
int portSpeedMbps(int activeSpeed, int activeWidth);

// The topology NIC for a verbs port (same name and port), or -1.
int findTopologyNic(const std::vector<topo::Nic>& nics, const std::string& device, int port);

// `nic` may be null (no topology, or the port is not in it). `pciPathOfBusId` turns the model's
// bus id into a sysfs path (realpath of /sys/bus/pci/devices/<busid>); empty when unknown.
DeviceProps makeDeviceProps(const PortFacts& facts, const topo::Nic* nic, const std::string& pciPathOfBusId);

}  // namespace epx::plugin::verbs
