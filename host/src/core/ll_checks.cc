#include "core/ll_checks.h"

#include <cstdint>

namespace epx {

namespace {
// "" when p is acceptable: non-NULL when required and aligned to `a` bytes.
std::string ptr(const char* name, const void* p, uintptr_t a, bool required) {
  if (!p) return required ? std::string(name) + " is NULL" : std::string();
  if (reinterpret_cast<uintptr_t>(p) % a != 0) return std::string(name) + " must be " + std::to_string(a) + "-byte aligned";
  return {};
}
bool send(int flags) { return (flags & NCCL_EP_LL_SEND) != 0; }
bool recv(int flags) { return (flags & NCCL_EP_LL_RECV) != 0; }

// Group-wide order of `op` (0 dispatch, 1 combine): "" or the reason.
std::string checkGroupOrder(const LlHandleView& h, int op, int flags) {
  const char* name = op == 0 ? "dispatch" : "combine";
  const LlGroupCalls& g = *h.calls;
  const unsigned pending = g.sent[op] - g.received[op];
  if (send(flags) && recv(flags) && pending != 0)
    return std::string("another handle's ") + name + " send half is pending on this group: its receive half must " +
           "come first (receive halves run in the order of the send halves)";
  if (send(flags) && !recv(flags) && pending >= kLlMaxPending)
    return std::string("already ") + std::to_string(pending) + " " + name + " send halves pending on this group (at " +
           "most " + std::to_string(kLlMaxPending) + "; receive one first)";
  if (!send(flags) && h.state->pendingSeq[op] != g.received[op] + 1)
    return std::string("receive halves must run in the order of their send halves: an earlier ") + name +
           " send half of this group (another handle) has not been received yet";
  return {};
}
}  // namespace

#define EPX_LL_RETURN_IF(expr)  \
  do {                          \
    std::string e_ = (expr);    \
    if (!e_.empty()) return e_; \
  } while (0)

std::string checkLlFlags(int flags) {
  if (flags != NCCL_EP_LL_SEND && flags != NCCL_EP_LL_RECV && flags != NCCL_EP_LL_SEND_RECV)
    return "flags must be NCCL_EP_LL_SEND, NCCL_EP_LL_RECV or both, got " + std::to_string(flags);
  return {};
}

std::string checkLlDispatch(const LlHandleView& h, const ncclEpLowLatencyDispatchInputs_t* in,
                            const ncclEpLowLatencyDispatchOutputs_t* out, int flags) {
  const GroupConfig& g = *h.group;
  if (!in || !out) return "inputs or outputs struct is NULL";
  EPX_LL_RETURN_IF(checkLlFlags(flags));
  if (in->useFp8 != 0 && in->useFp8 != 1) return "useFp8 must be 0 or 1, got " + std::to_string(in->useFp8);
  if (in->roundScale != 0 && in->roundScale != 1) return "roundScale must be 0 or 1, got " + std::to_string(in->roundScale);
  if (in->useFp8 && !g.fp8Dispatch) return "useFp8 needs a group created with fp8Dispatch = 1";
  if (in->roundScale && !in->useFp8) return "roundScale applies to FP8 dispatch only (useFp8 = 1)";
  if (send(flags)) {
    if (in->numTokens < 0 || in->numTokens > g.maxTokensPerRank)
      return "numTokens " + std::to_string(in->numTokens) + " is outside [0, maxTokensPerRank = " +
             std::to_string(g.maxTokensPerRank) + "]";
    if (in->topkIdxType != ncclInt32 && in->topkIdxType != ncclInt64)
      return "topkIdxType must be ncclInt32 or ncclInt64, got " + std::to_string(int(in->topkIdxType));
    EPX_LL_RETURN_IF(ptr("x", in->x, 16, in->numTokens > 0));
    EPX_LL_RETURN_IF(ptr("topkIdx", in->topkIdx, in->topkIdxType == ncclInt64 ? 8 : 4, in->numTokens > 0));
  }
  if (recv(flags)) {
    EPX_LL_RETURN_IF(ptr("recvX", out->recvX, 16, true));
    if (in->useFp8) {
      EPX_LL_RETURN_IF(ptr("recvScales (FP8 dispatch)", out->recvScales, 4, true));
    } else if (out->recvScales) {
      return "recvScales given for BF16 dispatch (scales come with useFp8 = 1)";
    }
    EPX_LL_RETURN_IF(ptr("recvCount", out->recvCount, 4, true));
    EPX_LL_RETURN_IF(ptr("recvSrcInfo", out->recvSrcInfo, 4, false));
    if (!send(flags) && h.state->dispatchSendPending && in->useFp8 != h.state->pendingFp8)
      return "useFp8 of the receive half (" + std::to_string(in->useFp8) + ") differs from its send half's (" +
             std::to_string(h.state->pendingFp8) + ")";
  }
  return {};
}

std::string checkLlDispatchOrder(const LlHandleView& h, int flags) {
  const LlCallState& s = *h.state;
  if (send(flags) && s.dispatchSendPending)
    return "the handle's previous dispatch send half has not been received yet (call NCCL_EP_LL_RECV first)";
  if (send(flags) && s.combineSendPending)
    return "the handle's combine send half has not been received yet (a new dispatch would replace its route)";
  if (!send(flags) && !s.dispatchSendPending)
    return "receive half (NCCL_EP_LL_RECV) without a pending send half (NCCL_EP_LL_SEND) on this handle";
  return checkGroupOrder(h, 0, flags);
}

std::string checkLlCombine(const LlHandleView& h, const ncclEpLowLatencyCombineInputs_t* in,
                           const ncclEpLowLatencyCombineOutputs_t* out, int flags) {
  if (!in || !out) return "inputs or outputs struct is NULL";
  EPX_LL_RETURN_IF(checkLlFlags(flags));
  const int T = h.state->numTokens;
  if (send(flags)) EPX_LL_RETURN_IF(ptr("x", in->x, 16, true));
  if (recv(flags)) {
    EPX_LL_RETURN_IF(ptr("topkWeights", in->topkWeights, 4, T > 0));
    EPX_LL_RETURN_IF(ptr("out", out->out, 16, T > 0));
  }
  return {};
}

std::string checkLlCombineOrder(const LlHandleView& h, int flags) {
  const LlCallState& s = *h.state;
  if (send(flags) && !s.dispatchReceived)
    return "combine needs a dispatch of this handle whose receive half has run (NCCL_EP_LL_RECV)";
  if (send(flags) && s.combineSendPending)
    return "the handle's previous combine send half has not been received yet (call NCCL_EP_LL_RECV first)";
  if (!send(flags) && !s.combineSendPending)
    return "receive half (NCCL_EP_LL_RECV) without a pending send half (NCCL_EP_LL_SEND) on this handle";
  return checkGroupOrder(h, 1, flags);
}

void advanceLlDispatch(LlCallState* s, LlGroupCalls* g, const ncclEpLowLatencyDispatchInputs_t& in, int flags) {
  if (send(flags)) {
    s->dispatchSendPending = true;
    s->dispatchReceived = false;
    s->pendingFp8 = in.useFp8;
    s->numTokens = in.numTokens;
    s->pendingSeq[0] = ++g->sent[0];
  }
  if (recv(flags)) {
    s->dispatchSendPending = false;
    s->dispatchReceived = true;
    ++g->received[0];
  }
}

void advanceLlCombine(LlCallState* s, LlGroupCalls* g, int flags) {
  if (send(flags)) {
    s->combineSendPending = true;
    s->pendingSeq[1] = ++g->sent[1];
  }
  if (recv(flags)) {
    s->combineSendPending = false;
    ++g->received[1];
  }
}

}  // namespace epx
