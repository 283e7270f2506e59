// epx topology: write an NCCL topology XML (NCCL_TOPO_FILE) that reflects the computed rails.
#pragma once
#include <string>

#include "epx/topology/model.h"
#include "epx/topology/rails.h"

namespace epx::topo {

/// Renders `<system version="1">`: one `<cpu numaid>` per NUMA node, one `<pci>` per PCIe switch,
/// GPUs with `<gpu dev>` and their `<nvlink>`s, NICs with `<nic><net name dev speed port guid>`.
/// NIC `dev` numbers follow rail order (rail 0's ports first), so NCCL's device numbering matches
/// the rails; ports outside the rails come last. Only branches holding a GPU or NIC are written.
std::string renderNcclTopo(const Topology& t, const RailPlan& rails);

/// Writes renderNcclTopo() to `path`; returns an error message or "".
std::string writeNcclTopo(const Topology& t, const RailPlan& rails, const std::string& path);

}  // namespace epx::topo
