// The tuner's per-communicator state and decisions, independent of the NCCL tuner API version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tuner/rules.h"

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
};

// Reads EPX_TUNER_RULES (if set) and logs what was loaded. Never fails: bad lines are skipped
// with a warning.
Context* createContext(const Communicator& comm);
// Never fails: leaves NCCL's choice when no rule applies.
void decide(Context* ctx, int collective, size_t bytes, float* table, int numAlgo, int numProto,
            int* nChannels);

}  // namespace epx::plugin::tuner
