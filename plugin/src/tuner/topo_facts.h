// What the tuner's topology policy knows about this host, derived from an epx::topo snapshot.
//
// The snapshot is this process's host only: live hwloc discovery (plus NVML for NVLink) at tuner
// init, or the file named by EPX_TUNER_TOPO (hwloc XML or NCCL topology XML, through topology/'s
// loaders). A communicator may use any subset of these GPUs, so each fact holds for every pair of
// GPUs or every GPU of the snapshot, never for "some".
#pragma once

#include <string>

#include "epx/topology/model.h"

namespace epx::plugin::tuner {

enum class GpuLinks {
  Unknown,  // fewer than 2 GPUs, or NVLink status not known for every GPU
  NvLink,   // every pair of GPUs has NVLink (direct or through NVSwitches)
  PcieOnly, // NVLink status known for every GPU, and no pair has NVLink
  Mixed     // some pairs NVLink, some not
};
const char* gpuLinksName(GpuLinks l);

struct TopoFacts {
  bool valid = false;     // a snapshot was loaded
  std::string source;     // file path or "live"; on failure, why there is no snapshot
  int gpus = 0;
  GpuLinks links = GpuLinks::Unknown;
  std::string worstPcie;  // worst PCIe path type between two GPUs (PIX..SYS), "" with < 2 GPUs
  int nicCards = 0;       // RDMA NIC cards used by rails (topology/'s assignRails)
  std::string railPolicy; // "none", "one-per-gpu", "shared", "multi-per-gpu"
  int minNicsPerGpu = 0;  // NIC cards per GPU (rails of the GPU), over all GPUs
  int maxGpusPerNic = 0;  // GPUs sharing one NIC card, worst case
  double minGbpsPerGpu = 0;  // slowest GPU's network rate: its cards' speed / GPUs sharing each, Gb/s
  bool gbpsAssumed = false;  // a rail's rate was assumed from PCI ids (PCI-only NCCL file), not read
};

// Pure: facts of a loaded topology.
TopoFacts deriveFacts(const topo::Topology& t);
// Loads the snapshot: `spec` empty = live discovery, "off" = none, else a file (NCCL XML when it
// holds "<system", else hwloc XML). Never fails: on error `valid` is false and `source` says why.
TopoFacts loadFacts(const std::string& spec);
// One line for the log.
// ">= N Gb/s per GPU", or "NIC speed unknown".
std::string nicSpeedText(const TopoFacts& f);
std::string describeFacts(const TopoFacts& f);

}  // namespace epx::plugin::tuner
