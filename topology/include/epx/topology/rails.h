// epx topology: rails — which RDMA NIC(s) each GPU uses.
//
// Algorithm (docs/topology.md, "Rails"):
//  1. Candidates are RDMA ports grouped into cards (same PCI device, or same non-zero GUID), so the
//     functions/planes of one card always go to the same GPU.
//  2. Cards slower than half the fastest card are dropped (front-end NICs).
//  3. A card stays only if it is among the closest cards (best path type) of at least one GPU, so a
//     far front-end NIC is never chosen over closer ones.
//  4. A min-cost assignment spreads cards evenly: C ≥ G gives every GPU ⌊C/G⌋ or ⌈C/G⌉ cards of its
//     own; C < G gives every card ⌊G/C⌋ or ⌈G/C⌉ GPUs. Cost = path type, then GPU/NIC order.
//  5. Rails are numbered by the lowest GPU index that uses the card, so the same local GPU gets the
//     same rail index on every node of a homogeneous cluster.
#pragma once
#include <string>
#include <vector>

#include "epx/topology/model.h"

namespace epx::topo {

struct GpuRail {
  int gpu = 0;
  int rail = -1;                 ///< primary rail (lowest of `rails`), -1 without RDMA NIC
  std::vector<int> rails;        ///< all rails of this GPU
  std::vector<int> nics;         ///< NIC port indices (Topology::nics) of those rails
  PathType path = PathType::UNKNOWN;  ///< worst path type to its NICs
};

struct Rail {
  int index = 0;
  int card = -1;                 ///< Nic::card
  std::vector<int> nics;         ///< ports of the card
  std::vector<int> gpus;         ///< GPUs using this rail
};

struct RailPlan {
  std::string policy;            ///< "none", "one-per-gpu", "shared", "multi-per-gpu"
  std::vector<GpuRail> gpus;     ///< one per GPU, by GPU index
  std::vector<Rail> rails;       ///< by rail index
  std::vector<std::string> excluded;  ///< NICs left out and why ("mlx5_8: slower than …")
};

/// At most kMaxTopologyDevices GPUs + NIC ports (load.h), as the loaders guarantee; a larger
/// hand-built topology gets policy "none" and an `excluded` line saying why.
RailPlan assignRails(const Topology& t);

}  // namespace epx::topo
