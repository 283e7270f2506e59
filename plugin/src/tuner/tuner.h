// The tuner's per-communicator state and decisions, independent of the NCCL tuner API version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tuner/rules.h"
#include "tuner/topo_facts.h"
#include "tuner/topo_policy.h"

namespace epx::plugin::tuner {

struct Communicator {
  size_t nRanks = 0;
  size_t nNodes = 0;
  int nNvlDomains = 0;
  int minRanksPerNvlDomain = 0;
  int maxRanksPerNvlDomain = 0;
};

struct Context {
  Communicator comm;
  std::string rulesPath;
  std::vector<Rule> rules;
  std::vector<bool> announced;  // rule already logged at INFO
  TopoFacts topo;               // EPX_TUNER_TOPO snapshot (or live discovery)
  bool topoAnnounced[5][7] = {};  // topology rule already logged at INFO, per collective and NCCL choice
};

// Reads EPX_TUNER_RULES (if set) and the topology (EPX_TUNER_TOPO: a file, "off", or unset for
// live discovery, done once per process) and logs what was loaded and what the topology policy
// will do. Never fails: bad lines are skipped with a warning, a missing topology turns the
// topology policy off with a logged reason.
Context* createContext(const Communicator& comm);
// The first matching rules-file rule wins; when none applies, the topology policy runs. Never
// fails: leaves NCCL's choice when neither changes it.
void decide(Context* ctx, int collective, size_t bytes, float* table, int numAlgo, int numProto,
            int* nChannels);

}  // namespace epx::plugin::tuner
