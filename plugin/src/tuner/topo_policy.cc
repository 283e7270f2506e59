#include "tuner/topo_policy.h"

#include <cstdio>

#include "nccl.h"
#include "nccl_common.h"
#include "nccl_tuner.h"

namespace epx::plugin::tuner {

namespace {

// Why pcie-ring holds, with its sources (repeated in docs/plugins.md):
//  * A ring all-reduce sends 2(n-1)/n of the buffer per rank, the lower bound for all-reduce
//    (P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
//    workstations", J. Parallel Distrib. Comput. 69(2), 2009).
//  * NCCL's tree spans nodes; inside a node its ranks form a chain (NVIDIA developer blog,
//    "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019). On one node the tree is
//    that chain: reduce up, broadcast down, so a middle rank sends the whole buffer twice (2 > 2(n-1)/n
//    for n >= 3; n = 2 is the same traffic either way, hence the >= 3 ranks condition).
//  * Over PCIe only, that traffic crosses shared switches, root complexes or the inter-socket link
//    (no NVLink), so the extra bytes cost bandwidth there.
//  * NCCL choosing the Simple protocol means its own model sees the call as bandwidth-bound; LL and
//    LL128 (latency-bound sizes) are left to NCCL. No number is invented: the entry is only
//    reordered, among those NCCL allows.
bool pcieRingApplies(const TopoFacts& f, size_t nRanks, size_t nNodes) {
  return f.valid && f.links == GpuLinks::PcieOnly && nNodes == 1 && nRanks >= 3;
}

}  // namespace

const char* topoRuleName(TopoRule r) {
  switch (r) {
    case TopoRule::PcieRing: return "pcie-ring";
    case TopoRule::None: return "none";
  }
  return "?";
}

std::vector<std::string> topoPolicyNotes(const TopoFacts& f, size_t nRanks, size_t nNodes) {
  std::vector<std::string> notes;
  if (!f.valid) {
    notes.push_back("topology policy off: " + f.source + "; NCCL's own choices stand (the rules file still applies)");
    return notes;
  }
  if (pcieRingApplies(f, nRanks, nNodes)) {
    notes.push_back("rule pcie-ring armed (" + std::string(gpuLinksName(f.links)) + ", worst path " +
                    f.worstPcie + ", 1 node, " + std::to_string(nRanks) +
                    " ranks): an all-reduce NCCL models as tree/simple goes to ring/simple");
  } else if (f.links == GpuLinks::PcieOnly) {
    notes.push_back("rule pcie-ring not armed: PCIe-only GPUs but " + std::to_string(nNodes) + " node(s), " +
                    std::to_string(nRanks) + " rank(s) (needs 1 node, >= 3 ranks)");
  } else if (f.links == GpuLinks::NvLink) {
    notes.push_back("no change: NVLink between every GPU pair; NCCL models NVLink, NVLS and CollNet itself "
                    "(entries it disabled stay disabled)");
  } else if (f.gpus < 2) {
    notes.push_back("no change: " + std::to_string(f.gpus) + " GPU(s) in the topology, no GPU pair to judge");
  } else if (f.links == GpuLinks::Mixed) {
    notes.push_back("no change: NVLink between some GPU pairs only; which GPUs a communicator uses is not "
                    "known here, so no rule applies");
  } else {
    notes.push_back("no change: NVLink status not recorded for every GPU (hwloc XML has none, an NCCL file "
                    "without <gpu> elements has none, or NVML did not load); not read as PCIe only");
  }
  if (nNodes > 1 && f.nicCards == 0) {
    notes.push_back("note: no RDMA NIC in the topology; inter-node traffic uses the net plugin's host "
                    "transport and NCCL models it from the plugin's device speed; no change");
  } else if (nNodes > 1 && f.maxGpusPerNic > 1) {
    const std::string speed = nicSpeedText(f);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "note: rail sharing, up to %d GPUs per NIC card (%d card(s), %s); NCCL already spreads "
                  "GPUs over the local NICs and models their speed; no change",
                  f.maxGpusPerNic, f.nicCards, speed.c_str());
    notes.push_back(buf);
  }
  return notes;
}

TopoDecision applyTopoPolicy(const TopoFacts& f, size_t nRanks, size_t nNodes, int collective,
                             float* table, int numAlgo, int numProto) {
  TopoDecision d;
  if (table == nullptr || !pcieRingApplies(f, nRanks, nNodes) || collective != ncclFuncAllReduce) return d;
  d.from = cheapestEntry(table, numAlgo, numProto);
  d.to = d.from;
  if (d.from.algorithm != NCCL_ALGO_TREE || d.from.protocol != NCCL_PROTO_SIMPLE) return d;
  if (!makeCheapest(table, numAlgo, numProto, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE)) return d;
  d.rule = TopoRule::PcieRing;
  d.to = {NCCL_ALGO_RING, NCCL_PROTO_SIMPLE};
  return d;
}

std::string explainTopoDecision(const TopoDecision& d, const TopoFacts& f, size_t nRanks) {
  if (d.rule != TopoRule::PcieRing) return "";
  return "rule pcie-ring: " + std::string(gpuLinksName(f.links)) + " (worst GPU-GPU path " + f.worstPcie +
             ", " + f.source + "), 1 node, " + std::to_string(nRanks) +
             " ranks, NCCL chose tree/simple: ring sends 2(n-1)/n of the buffer per rank (the all-reduce "
             "bound), a one-node tree (a chain) sends it twice";
}

}  // namespace epx::plugin::tuner
