// PCI ids epx knows (names as in the pci.ids database) and the port rates it assumes for them:
// the fastest rate the part supports. Keep in step with docs/topology.md ("PCI-only files").
#include "epx/topology/pci_ids.h"

#include <cstdio>

namespace epx::topo {

namespace {

struct NicPart {
  uint16_t vendor, device;
  const char* name;
  double gbps;  // 0: recognised as an RDMA NIC, but the part says nothing about its rate
};

constexpr NicPart kNicParts[] = {
    {0x15b3, 0x1003, "ConnectX-3", 56},          {0x15b3, 0x1007, "ConnectX-3 Pro", 56},
    {0x15b3, 0x1011, "Connect-IB", 56},          {0x15b3, 0x1013, "ConnectX-4", 100},
    {0x15b3, 0x1014, "ConnectX-4 VF", 100},      {0x15b3, 0x1015, "ConnectX-4 Lx", 50},
    {0x15b3, 0x1016, "ConnectX-4 Lx VF", 50},    {0x15b3, 0x1017, "ConnectX-5", 100},
    {0x15b3, 0x1018, "ConnectX-5 VF", 100},      {0x15b3, 0x1019, "ConnectX-5 Ex", 100},
    {0x15b3, 0x101a, "ConnectX-5 Ex VF", 100},   {0x15b3, 0x101b, "ConnectX-6", 200},
    {0x15b3, 0x101c, "ConnectX-6 VF", 200},      {0x15b3, 0x101d, "ConnectX-6 Dx", 200},
    {0x15b3, 0x101e, "ConnectX mlx5Gen VF", 0},  // any generation from ConnectX-6 Dx on
    {0x15b3, 0x101f, "ConnectX-6 Lx", 50},       {0x15b3, 0x1021, "ConnectX-7", 400},
    {0x15b3, 0x1023, "ConnectX-8", 800},         {0x15b3, 0xa2d6, "BlueField-2", 200},
    {0x15b3, 0xa2dc, "BlueField-3", 400},        {0x1d0f, 0xefa0, "EFA", 100},
    {0x1d0f, 0xefa1, "EFA", 100},                {0x1d0f, 0xefa2, "EFA", 0},
};

// A100 SXM4 / PCIe, A10G, L4, T4, V100 SXM2, P100 PCIe, H100 SXM5 / PCIe / H800, H200.
constexpr uint16_t kNvidiaGpus[] = {0x15f8, 0x1db1, 0x1db5, 0x1eb8, 0x20b0, 0x20b2, 0x20b5, 0x20f1,
                                    0x2237, 0x27b8, 0x2321, 0x2324, 0x2330, 0x2331, 0x2335, 0x2339};

const NicPart* findNic(uint16_t vendor, uint16_t device) {
  for (const NicPart& p : kNicParts)
    if (p.vendor == vendor && p.device == device) return &p;
  return nullptr;
}

}  // namespace

std::optional<AssumedNicRate> assumedNicRate(uint16_t vendor, uint16_t device, uint32_t classCode16) {
  char buf[96];
  if (const NicPart* p = findNic(vendor, device); p && p->gbps > 0) {
    std::snprintf(buf, sizeof buf, "PCI id %04x:%04x (%s)", vendor, device, p->name);
    return AssumedNicRate{p->gbps, buf};
  }
  if (classCode16 == 0x0207) return AssumedNicRate{400, "PCI class 0x0207 (InfiniBand; NDR, as ConnectX-7)"};
  return std::nullopt;
}

bool isKnownNvidiaGpuDevice(uint16_t device) {
  for (uint16_t d : kNvidiaGpus)
    if (d == device) return true;
  return false;
}

bool isKnownRdmaNicDevice(uint16_t vendor, uint16_t device) { return findNic(vendor, device) != nullptr; }

}  // namespace epx::topo
