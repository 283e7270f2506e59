#include "core/checks.h"

#include <cstdint>
#include <sstream>

namespace epx {

namespace {
bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

// "" when p is acceptable: non-NULL when required and aligned to `a` bytes.
std::string ptr(const char* name, const void* p, uintptr_t a, bool required) {
  if (!p) return required ? std::string(name) + " is NULL" : std::string();
  if (!aligned(p, a)) return std::string(name) + " must be " + std::to_string(a) + "-byte aligned";
  return {};
}
}  // namespace

#define EPX_RETURN_IF(expr)          \
  do {                               \
    std::string e_ = (expr);         \
    if (!e_.empty()) return e_;      \
  } while (0)

std::string checkRouting(const GroupConfig& g, const ncclEpRouting_t* routing) {
  if (!routing) return "routing is NULL";
  if (routing->numTokens < 0 || routing->numTokens > g.maxTokensPerRank)
    return "numTokens " + std::to_string(routing->numTokens) + " is outside [0, maxTokensPerRank = " +
           std::to_string(g.maxTokensPerRank) + "]";
  if (routing->topkIdxType != ncclInt32 && routing->topkIdxType != ncclInt64)
    return "topkIdxType must be ncclInt32 or ncclInt64, got " + std::to_string(int(routing->topkIdxType));
  const uintptr_t sz = routing->topkIdxType == ncclInt64 ? 8 : 4;
  return ptr("topkIdx", routing->topkIdx, sz, routing->numTokens > 0);
}

std::string checkDispatch(const HandleView& h, const ncclEpDispatchInputs_t* in, const ncclEpDispatchOutputs_t* out) {
  const GroupConfig& g = *h.group;
  if (!in || !out) return "inputs or outputs struct is NULL";
  if (!h.laidOut) return "handle has no route: call ncclEpDispatchLayout first";
  const bool fp8 = in->xType == ncclFloat8e4m3;
  if (in->xType != ncclBfloat16 && !fp8)
    return "xType must be ncclBfloat16 or ncclFloat8e4m3, got " + std::to_string(int(in->xType));
  if (fp8 && !g.fp8Dispatch) return "FP8 dispatch needs a group created with fp8Dispatch = 1";
  if (in->hidden != 0 && in->hidden != g.hidden)
    return "x has hidden " + std::to_string(in->hidden) + " but the group was created with hidden " +
           std::to_string(g.hidden);
  EPX_RETURN_IF(ptr("x", in->x, 16, h.numTokens > 0));
  if (fp8) {
    EPX_RETURN_IF(ptr("xScales (FP8 needs FP32 scales [T, hidden/128])", in->xScales, 4, h.numTokens > 0));
  } else if (in->xScales) {
    return "xScales given for BF16 input (scales are for FP8 e4m3 only)";
  }
  EPX_RETURN_IF(ptr("topkWeights", in->topkWeights, 4, false));
  EPX_RETURN_IF(ptr("recvX", out->recvX, 16, true));
  if (fp8) {
    EPX_RETURN_IF(ptr("recvScales (FP8 dispatch)", out->recvScales, 4, true));
  } else if (out->recvScales) {
    return "recvScales given for BF16 dispatch";
  }
  if (out->recvTopkWeights && !in->topkWeights) return "recvTopkWeights requested but topkWeights input is NULL";
  EPX_RETURN_IF(ptr("recvTopkWeights", out->recvTopkWeights, 4, false));
  if (out->recvTopkIdx && h.cfg->expanded)
    return "recvTopkIdx is produced by the deduplicated layout only (expanded rows are grouped by expert)";
  EPX_RETURN_IF(ptr("recvTopkIdx", out->recvTopkIdx, 4, false));
  EPX_RETURN_IF(ptr("recvSrcInfo", out->recvSrcInfo, 4, false));
  EPX_RETURN_IF(ptr("expertCounts", out->expertCounts, 4, false));
  EPX_RETURN_IF(ptr("expertOffsets", out->expertOffsets, 4, false));
  EPX_RETURN_IF(ptr("numRecvRows", out->numRecvRows, 4, false));
  if (out->numRows != 0 && out->numRows < h.rowsNeeded)
    return "outputs have " + std::to_string(out->numRows) + " rows but this dispatch needs " +
           std::to_string(h.rowsNeeded) + (h.cfg->capacity ? " (capacity mode)" : " (exact mode)");
  return {};
}

std::string checkCombine(const HandleView& h, const ncclEpCombineInputs_t* in, const ncclEpCombineOutputs_t* out) {
  const GroupConfig& g = *h.group;
  if (!in || !out) return "inputs or outputs struct is NULL";
  if (!h.laidOut) return "handle has no route: call ncclEpDispatchLayout (and ncclEpDispatch) first";
  if (in->xType != ncclBfloat16) return "combine input must be ncclBfloat16, got " + std::to_string(int(in->xType));
  if (in->hidden != 0 && in->hidden != g.hidden)
    return "combine input has hidden " + std::to_string(in->hidden) + " but the handle's group has hidden " +
           std::to_string(g.hidden);
  if (in->numRows != 0 && in->numRows < h.rowsNeeded)
    return "combine input has " + std::to_string(in->numRows) + " rows but the handle's dispatch layout has " +
           std::to_string(h.rowsNeeded);
  EPX_RETURN_IF(ptr("x", in->x, 16, true));
  EPX_RETURN_IF(ptr("bias0", in->bias0, 16, false));
  EPX_RETURN_IF(ptr("bias1", in->bias1, 16, false));
  EPX_RETURN_IF(ptr("topkWeights", in->topkWeights, 4, false));
  EPX_RETURN_IF(ptr("out", out->out, 16, h.numTokens > 0));
  if (out->combinedTopkWeights && !in->topkWeights)
    return "combinedTopkWeights requested but the combine input topkWeights is NULL";
  EPX_RETURN_IF(ptr("combinedTopkWeights", out->combinedTopkWeights, 4, false));
  if (out->numTokens != 0 && out->numTokens != h.numTokens)
    return "out has " + std::to_string(out->numTokens) + " rows but the handle's route has " +
           std::to_string(h.numTokens) + " tokens";
  return {};
}

std::string checkCombineAfterDispatch(const HandleView& h) {
  if (!h.laidOut || h.dispatched) return {};
  return "no ncclEpDispatch on this handle since its last ncclEpDispatchLayout: dispatch the new route before "
         "combining it (combine returns the rows that dispatch delivered); dispatching again on the same layout "
         "and combining several times after one dispatch are allowed";
}

}  // namespace epx
