// epx topology: what a PCI function is when a topology file says no more than its PCI ids, and
// the NIC port rate epx assumes when the file has none (docs/topology.md, "PCI-only files").
//
// Cloud images ship NCCL topology files with `<pci>` nodes only: no `<gpu>` or `<net>` children
// and no NIC speeds, which NCCL fills in at run time. epx-topo then recognises GPUs and NICs by
// class, vendor and device id, and assumes a port rate from the table below, saying so.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace epx::topo {

/// A NIC port rate epx assumes for a PCI function whose topology entry has none.
struct AssumedNicRate {
  double gbps = 0;    ///< the part's fastest port rate (the real port may run slower)
  std::string basis;  ///< what it was assumed from ("PCI id 15b3:1021 (ConnectX-7)")
};

/// Rate for (vendor, device), else for the 16-bit class alone (0x0207 InfiniBand: 400 Gb/s NDR);
/// nothing for Ethernet-class functions of unknown parts (front-end NICs run at any rate).
std::optional<AssumedNicRate> assumedNicRate(uint16_t vendor, uint16_t device, uint32_t classCode16);

/// An NVIDIA data-centre GPU by device id (a file may give vendor and device but no class).
bool isKnownNvidiaGpuDevice(uint16_t device);

/// An RDMA NIC by vendor and device id (Mellanox/NVIDIA ConnectX and BlueField, Amazon EFA).
bool isKnownRdmaNicDevice(uint16_t vendor, uint16_t device);

}  // namespace epx::topo
