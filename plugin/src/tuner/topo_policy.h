// The tuner's topology policy: changes to NCCL's cost table that follow from facts of the host's
// topology (topo_facts.h), each with a documented reason. It runs only when no EPX_TUNER_RULES
// rule applied to the call, and only reorders entries NCCL already allows.
//
// Rules (docs/plugins.md, "Topology policy"):
//   pcie-ring  one node, >= 3 ranks, every GPU pair PCIe only, all-reduce, NCCL's cheapest entry
//              tree/simple and ring/simple allowed -> ring/simple.
// Everything else is a note at init and no change (NCCL's own model stands).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tuner/cost_table.h"
#include "tuner/topo_facts.h"

namespace epx::plugin::tuner {

enum class TopoRule { None = 0, PcieRing = 1 };
const char* topoRuleName(TopoRule r);

struct TopoDecision {
  TopoRule rule = TopoRule::None;  // None: the table is unchanged
  Entry from;                      // NCCL's choice before (set when the rule was considered)
  Entry to;                        // the entry made cheapest
};

// Init-time lines for the log: what the policy will and will not do for this communicator.
std::vector<std::string> topoPolicyNotes(const TopoFacts& f, size_t nRanks, size_t nNodes);

// Pure: applies the policy to one call's table (no allocation: it runs on NCCL's enqueue path).
TopoDecision applyTopoPolicy(const TopoFacts& f, size_t nRanks, size_t nNodes, int collective,
                             float* table, int numAlgo, int numProto);
// Which fact and which rule made a decision, and why (for the INFO line); "" for TopoRule::None.
std::string explainTopoDecision(const TopoDecision& d, const TopoFacts& f, size_t nRanks);

}  // namespace epx::plugin::tuner
