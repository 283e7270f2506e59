// epx topology: the machine model (CPU/NUMA, PCIe tree, GPUs, RDMA NICs, NVLink).
//
// The model is plain data, filled by a loader (load.h) from hwloc (live, hwloc XML, or a sysfs
// snapshot through HWLOC_FSROOT) or from an NCCL topology XML file. Queries live in paths.h,
// rails.h; printing lives in the epx-topo tool. Nothing here depends on CUDA or NCCL.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "epx/topology/busid.h"

namespace epx::topo {

/// Kinds of nodes in the normalized PCIe tree.
/// Machine > Numa > HostBridge > {Switch, Device}*. A PCIe switch (upstream port plus its
/// downstream ports) is one Switch node, as NCCL models it; root ports are not nodes.
enum class NodeKind { Machine, Numa, HostBridge, Switch, Device };

/// GPU↔NIC / GPU↔GPU path types, best first (the nvidia-smi `topo -m` legend; NCCL has no NODE).
/// PIX: through at most one PCIe switch. PXB: several switches, no host bridge. PHB: through a
/// host bridge (root complex). NODE: between host bridges of one NUMA node. SYS: across the
/// inter-socket link (different NUMA nodes). UNKNOWN: no placement known.
enum class PathType { PIX = 0, PXB = 1, PHB = 2, NODE = 3, SYS = 4, UNKNOWN = 5 };

/// Network link layer of an RDMA port.
enum class LinkLayer { Unknown, InfiniBand, Ethernet };

/// RDMA transport: decides whether an SL (InfiniBand) or a traffic class (RoCE) applies.
enum class Transport { Unknown, InfiniBand, RoCE, EFA };

const char* toString(NodeKind k);
const char* toString(PathType p);
const char* toString(LinkLayer l);
const char* toString(Transport t);

/// One node of the normalized tree.
struct Node {
  NodeKind kind = NodeKind::Machine;
  int parent = -1;            ///< index into Topology::nodes, -1 for the root
  std::vector<int> children;  ///< indices into Topology::nodes
  int numa = -1;              ///< OS index of the NUMA node it hangs off, -1 if unknown
  bool hasAddress = false;    ///< PCI address known (Switch/Device)
  PciAddress address;
  uint32_t classCode = 0;     ///< 16-bit PCI class<<8|subclass (0x0302 3D controller), 0 unknown
  uint16_t vendor = 0, device = 0;  ///< PCI ids, 0 if unknown
  double linkGBps = 0;        ///< PCIe link bandwidth in GB/s (hwloc linkspeed, or NCCL width×rate), 0 unknown
  std::string linkSpeed;      ///< NCCL `link_speed` as read ("32.0 GT/s PCIe"), kept for export
  int linkWidth = -1;         ///< NCCL `link_width` as read, -1 if absent
};

/// NVLink edge from a GPU, as counted by NVML (live) or an NCCL `<nvlink>` element.
struct NvLinkEdge {
  std::string target;     ///< bus id of the far end (GPU or NVSwitch)
  int count = 0;          ///< number of links
  bool toSwitch = false;  ///< far end is an NVSwitch (NCCL tclass 0x068000 or NVML remote type)
};

struct Gpu {
  int index = 0;          ///< local index in PCI bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
  int node = -1;          ///< Device node in Topology::nodes
  PciAddress address;
  int numa = -1;
  uint16_t deviceId = 0;  ///< PCI device id (0x2335 = H200 SXM), 0 unknown
  std::string name;       ///< model name when known (NVML, hwloc GPUModel), else "10de:xxxx"
  std::vector<NvLinkEdge> nvlinks;
  /// NVLink status was read (NVML answered for this GPU, or an NCCL `<gpu>` element described it):
  /// an empty `nvlinks` then means "no NVLink", not "not known". hwloc XML carries no NVLink data.
  bool nvlinkKnown = false;
};

/// One RDMA port (one verbs device / one NCCL `<net>`). Ports of one card share `card`.
struct Nic {
  int index = 0;          ///< local index in (bus id, name) order
  std::string name;       ///< verbs device (mlx5_0, rdmap…), NCCL net name, or "pci:<busid>"
  std::string netdev;     ///< IP interface (ib0, ens…) when known
  int node = -1;          ///< its PCI Device node, or the HostBridge it hangs off when it has no PCI function
  bool hasAddress = false;
  PciAddress address;
  int numa = -1;
  int card = -1;          ///< physical card: same PCI device or same non-zero GUID
  int port = 1;           ///< port number on the card
  uint64_t guid = 0;      ///< SysImageGUID / NCCL guid, 0 unknown
  uint16_t vendor = 0, deviceId = 0;
  uint32_t classCode = 0; ///< 16-bit PCI class (0x0207 IB, 0x0200 Ethernet/RoCE/EFA)
  double speedGbps = 0;   ///< port rate in Gb/s (sysfs `rate`, NCCL `speed`/1000, or assumed), 0 unknown
  bool speedAssumed = false;  ///< speedGbps is epx's assumption from PCI ids (pci_ids.h), not read
  std::string speedBasis;     ///< speedAssumed: the PCI id or class the rate came from
  LinkLayer linkLayer = LinkLayer::Unknown;
  Transport transport = Transport::Unknown;
  std::string state;      ///< port state (ACTIVE, DOWN…) when known
};

struct NumaNode {
  int osIndex = 0;
  std::string cpus;       ///< CPU list ("0-19,40-59"); an NCCL affinity hwloc cannot parse, as written
  std::string affinity;   ///< NCCL files: the `affinity` mask as written ("0000ffff,ffffffff")
  int node = -1;          ///< Numa node in Topology::nodes
};

/// Something a loader assumed because the input did not say it (PCI-only NCCL files).
struct Assumption {
  std::string what;                  ///< "nic_speed" (a rate was assumed), "nic_speed_unknown", "gpu_nvlink"
  double gbps = 0;                   ///< nic_speed: the assumed port rate, Gb/s
  std::string basis;                 ///< nic_speed: the PCI id or class it came from
  std::vector<std::string> devices;  ///< NIC names or GPU bus ids it applies to
};

/// Where the model came from.
enum class SourceKind { Live, HwlocXml, NcclXml };

struct Topology {
  SourceKind source = SourceKind::Live;
  std::string sourceName;             ///< file path, or "live" (+ HWLOC_FSROOT when set)
  std::vector<Node> nodes;            ///< nodes[0] is the Machine
  std::vector<NumaNode> numa;         ///< ascending osIndex
  std::vector<Gpu> gpus;              ///< ascending bus id
  std::vector<Nic> nics;              ///< RDMA ports, ascending (bus id, port, name)
  int numCards = 0;                   ///< distinct physical NIC cards
  int otherPciDevices = 0;            ///< PCI endpoints that are neither GPU nor RDMA NIC
  std::vector<std::string> warnings;  ///< non-fatal findings (self NVLink, unknown classes, assumptions…)
  std::vector<Assumption> assumptions;  ///< what was assumed, each also said in `warnings`

  /// Total NVLinks of a GPU (self-targets excluded).
  int nvlinkCount(int gpu) const;
  /// Links between two GPUs: direct links, plus min(switch links) when both reach NVSwitches.
  int nvlinkBetween(int a, int b) const;
};

/// "a, b, c and N more": the first three names and how many others (warnings about many devices).
std::string someOf(const std::vector<std::string>& names);

}  // namespace epx::topo
