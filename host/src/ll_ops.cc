// ncclEpLowLatencyDispatch / ncclEpLowLatencyCombine (ep_ll.h): host checks, then the launch of
// the send half, the receive half or both.
#include <string>

#include "core/errors.h"
#include "core/ll_checks.h"
#include "epx/device/launch.h"
#include "epx/ep_ll.h"
#include "internal.h"

using epx::fail;

namespace {

ncclResult_t checkLlHandle(const ncclEpHandle* h, const char* what) {
  if (!h) return fail(ncclInvalidArgument, std::string(what) + ": handle is NULL");
  if (!h->ll)
    return fail(ncclInvalidUsage, std::string(what) + ": the handle belongs to a high-throughput group; create the "
                                                      "group with algorithm = ncclEpAlgoLowLatency");
  return epx::linkCheckUsable(h->group->link, what, "group", "ncclEpGroupGetAsyncError");
}

epx::LlHandleView view(const ncclEpHandle* h) { return {&h->group->cfg, h->group->link.nRanks, &h->llState, &h->group->llCalls}; }

int halves(int flags) {
  return ((flags & NCCL_EP_LL_SEND) ? epx::dev::kLlHalfSend : 0) | ((flags & NCCL_EP_LL_RECV) ? epx::dev::kLlHalfRecv : 0);
}

ncclResult_t launchFailed(const char* what, cudaError_t e) {
  return fail(ncclUnhandledCudaError, std::string(what) + ": kernel launch failed: " + cudaGetErrorString(e));
}

}  // namespace

extern "C" ncclResult_t ncclEpLowLatencyGetShape(ncclEpGroup_t g, ncclEpLowLatencyShape_t* shape) {
  if (!g || !shape) return fail(ncclInvalidArgument, "ncclEpLowLatencyGetShape: NULL argument");
  if (!g->cfg.lowLatency()) return fail(ncclInvalidUsage, "ncclEpLowLatencyGetShape: not a low-latency group");
  shape->numLocalExperts = g->cfg.localExperts(g->link.nRanks);
  shape->rowsPerExpert = g->ll.rowsPerExpert();
  shape->hidden = g->cfg.hidden;
  shape->scaleCols = g->cfg.hidden / epx::dev::kLlScaleBlock;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLowLatencyGetCombineBuffer(ncclEpGroup_t g, void** x) {
  if (!g || !x) return fail(ncclInvalidArgument, "ncclEpLowLatencyGetCombineBuffer: NULL argument");
  if (!g->cfg.lowLatency()) return fail(ncclInvalidUsage, "ncclEpLowLatencyGetCombineBuffer: not a low-latency group");
  *x = g->buffer() + g->ll.combineSend;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLowLatencyDispatch(ncclEpHandle_t h, const ncclEpLowLatencyDispatchInputs_t* in,
                                                 const ncclEpLowLatencyDispatchOutputs_t* out, int flags,
                                                 cudaStream_t stream) {
  const char* what = "ncclEpLowLatencyDispatch";
  if (ncclResult_t r = checkLlHandle(h, what); r != ncclSuccess) return r;
  if (std::string e = epx::checkLlDispatch(view(h), in, out, flags); !e.empty())
    return fail(ncclInvalidArgument, std::string(what) + ": " + e);
  if (std::string e = epx::checkLlDispatchOrder(view(h), flags); !e.empty())
    return fail(ncclInvalidUsage, std::string(what) + ": " + e);
  ncclEpGroup* g = h->group;
  epx::dev::LlDispatchArgs a{};
  a.link = g->linkArgs();
  a.shape = g->shape();
  a.g = g->llDev();
  a.r = h->llRoute;
  a.halves = halves(flags);
  a.x = static_cast<const uint16_t*>(in->x);
  a.topkIdx = in->topkIdx;
  a.idxIs64 = in->topkIdxType == ncclInt64;
  a.numTokens = (flags & NCCL_EP_LL_SEND) ? in->numTokens : h->llState.numTokens;
  a.fp8 = in->useFp8;
  a.roundScale = in->roundScale;
  a.recvX = static_cast<char*>(out->recvX);
  a.recvScales = out->recvScales;
  a.recvCount = out->recvCount;
  a.recvSrcInfo = out->recvSrcInfo;
  if (cudaError_t ce = epx::dev::launchLlDispatch(a, g->nCtas, stream); ce != cudaSuccess) return launchFailed(what, ce);
  epx::advanceLlDispatch(&h->llState, &g->llCalls, *in, flags);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLowLatencyCombine(ncclEpHandle_t h, const ncclEpLowLatencyCombineInputs_t* in,
                                                const ncclEpLowLatencyCombineOutputs_t* out, int flags,
                                                cudaStream_t stream) {
  const char* what = "ncclEpLowLatencyCombine";
  if (ncclResult_t r = checkLlHandle(h, what); r != ncclSuccess) return r;
  if (std::string e = epx::checkLlCombine(view(h), in, out, flags); !e.empty())
    return fail(ncclInvalidArgument, std::string(what) + ": " + e);
  if (std::string e = epx::checkLlCombineOrder(view(h), flags); !e.empty())
    return fail(ncclInvalidUsage, std::string(what) + ": " + e);
  ncclEpGroup* g = h->group;
  epx::dev::LlCombineArgs a{};
  a.link = g->linkArgs();
  a.shape = g->shape();
  a.g = g->llDev();
  a.r = h->llRoute;
  a.halves = halves(flags);
  a.x = static_cast<const uint16_t*>(in->x);
  a.zeroCopy = in->x == g->buffer() + g->ll.combineSend;
  a.topkWeights = in->topkWeights;
  a.numTokens = h->llState.numTokens;
  a.out = static_cast<uint16_t*>(out->out);
  if (cudaError_t ce = epx::dev::launchLlCombine(a, g->nCtas, stream); ce != cudaSuccess) return launchFailed(what, ce);
  epx::advanceLlCombine(&h->llState, &g->llCalls, flags);
  return ncclSuccess;
}
