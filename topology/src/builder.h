// Internal: helpers the loaders share to grow and finish a Topology.
#pragma once
#include <string>
#include <vector>

#include "epx/topology/model.h"

namespace epx::topo::detail {

/// Appends a node under `parent` and returns its index.
int addNode(Topology& t, NodeKind kind, int parent, int numa);

/// Returns the Numa node for `osIndex`, creating it (and its NumaNode entry) on first use.
int numaNode(Topology& t, int osIndex, const std::string& cpus);

/// GPU by PCI identity: NVIDIA vendor, class 0x0302 (3D) or 0x0300 (VGA). BMC VGA has another vendor.
bool isNvidiaGpu(uint16_t vendor, uint32_t classCode16);

/// Infers transport and link layer from what is known (sysfs link layer, PCI class, vendor).
void inferTransport(Nic& nic);

/// "" when `t` is within kMaxTopologyDevices, else the message a loader fails with (overLimit).
std::string deviceLimitError(const Topology& t, const std::string& name);

/// Bus ids held by more than one PCI node (each once, ascending). One bus id is one PCI function, so
/// a file listing it twice is corrupt or hand-edited: GPUs and NVLink targets are told apart by it.
std::vector<PciAddress> duplicateBusIds(const Topology& t);
/// What a loader says of them: "bus id 0000:19:00.0" and, past the first, " (and N more bus ids)".
std::string duplicateBusIdsText(const std::vector<PciAddress>& dups);

/// Sorts GPUs/NICs/NUMA, assigns indices and cards, and checks tree invariants.
void finish(Topology& t);

/// NCCL files: records in `assumptions` and `warnings` the NIC rates assumed from PCI ids, the
/// PCI-only NIC ports `unknownRate` whose rate stays unknown, and GPUs known from PCI ids alone (no
/// `<gpu>`: NVLink not recorded). Call after finish() (device order).
void noteAssumptions(Topology& t, const std::vector<std::string>& unknownRate);

/// PCIe bandwidth in GB/s from an NCCL link speed string and width, as NCCL computes it:
/// width × per-lane rate / 80 (2.5 GT/s→15 … 64 GT/s→480, unknown→60); width 0 means 16.
double ncclPciGBps(const std::string& speed, int width);

}  // namespace epx::topo::detail
