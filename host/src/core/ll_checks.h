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
  unsigned pendingSeq[2] = {0, 0};   // [dispatch, combine]: group order number of the pending send half
};

// A group's low-latency calls so far, per op kind (0 dispatch, 1 combine), as issued on the host
// (the device keeps its own sequence numbers; these mirror them for the order checks). Receive
// halves must come in the order of their send halves (the "free" words count them), and at most
// two sends of a kind may be pending (a third would wait on the device for a receive queued after
// it: every rank would stall).
struct LlGroupCalls {
  unsigned sent[2] = {0, 0};
  unsigned received[2] = {0, 0};
};
constexpr unsigned kLlMaxPending = 2;

struct LlHandleView {
  const GroupConfig* group;
  int nRanks;
  const LlCallState* state;
  const LlGroupCalls* calls;
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
void advanceLlDispatch(LlCallState* s, LlGroupCalls* g, const ncclEpLowLatencyDispatchInputs_t& in, int flags);
void advanceLlCombine(LlCallState* s, LlGroupCalls* g, int flags);

}  // namespace epx
