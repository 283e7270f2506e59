// Host-side argument checks of the EP calls, run before anything is launched. Pure C++ (no CUDA
// calls); each returns "" when the arguments are valid, else the reason in words.
#pragma once
#include <string>

#include "core/config.h"

namespace epx {

// What the checks need to know about a handle.
struct HandleView {
  const GroupConfig* group;
  const HandleConfig* cfg;
  int nRanks;
  bool laidOut;
  int numTokens;   // T of the last layout
  long long rowsNeeded;  // exact: counted rows; capacity: capacity rows
  bool dispatched;       // an ncclEpDispatch ran on this handle since its last layout
};

std::string checkRouting(const GroupConfig& g, const ncclEpRouting_t* routing);
std::string checkDispatch(const HandleView& h, const ncclEpDispatchInputs_t* in, const ncclEpDispatchOutputs_t* out);
std::string checkCombine(const HandleView& h, const ncclEpCombineInputs_t* in, const ncclEpCombineOutputs_t* out);
// Call order, not arguments (ncclInvalidUsage): a laid-out handle must have been dispatched since
// its last layout before it can be combined. "" when laid out and dispatched, and also when not laid
// out at all (checkCombine reports that).
std::string checkCombineAfterDispatch(const HandleView& h);

}  // namespace epx
