// Host-side checks of the low-latency calls (ep_ll.h), run before anything is launched. Pure C++
// (no CUDA calls): "" when valid, else the reason in words. Argument checks map to
// ncclInvalidArgument, call-order checks to ncclInvalidUsage.
#pragma once
#include <string>

#include "core/config.h"
#include "epx/ep_ll.h"

namespace epx {

// A handle's low-latency call state (host side; the device keeps the sequence numbers).
struct LlCallState {
  bool dispatchSendPending = false;  // a dispatch send half without its receive half yet
  bool dispatchReceived = false;     // a dispatch completed since the last dispatch send: combine may run
  bool combineSendPending = false;
  int pendingFp8 = 0;                // useFp8 of the pending dispatch send
  int numTokens = 0;                 // T of the last dispatch send
};

struct LlHandleView {
  const GroupConfig* group;
  int nRanks;
  const LlCallState* state;
};

// flags must be NCCL_EP_LL_SEND, NCCL_EP_LL_RECV or both.
std::string checkLlFlags(int flags);
std::string checkLlDispatch(const LlHandleView& h, const ncclEpLowLatencyDispatchInputs_t* in,
                            const ncclEpLowLatencyDispatchOutputs_t* out, int flags);
std::string checkLlDispatchOrder(const LlHandleView& h, int flags);
std::string checkLlCombine(const LlHandleView& h, const ncclEpLowLatencyCombineInputs_t* in,
                           const ncclEpLowLatencyCombineOutputs_t* out, int flags);
std::string checkLlCombineOrder(const LlHandleView& h, int flags);

// The state after a successful launch of `flags`.
void advanceLlDispatch(LlCallState* s, const ncclEpLowLatencyDispatchInputs_t& in, int flags);
void advanceLlCombine(LlCallState* s, int flags);

}  // namespace epx
