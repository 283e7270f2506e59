// ncclEpDispatchLayout / ncclEpDispatch / ncclEpCombine: host checks, then kernel launches.
#include <cstring>
#include <sstream>

#include "core/checks.h"
#include "core/errors.h"
#include "epx/device/launch.h"
#include "internal.h"

using epx::fail;

namespace {

epx::HandleView view(const ncclEpHandle* h) {
  return epx::HandleView{&h->group->cfg, &h->cfg, h->group->link.nRanks, h->laidOut, h->numTokens, h->rowsNeeded(),
                         h->dispatched};
}

ncclResult_t launchFailed(const char* what, cudaError_t e) {
  return fail(ncclUnhandledCudaError, std::string(what) + ": kernel launch failed: " + cudaGetErrorString(e));
}

// Refuses new work once a device-side timeout was recorded: peers are out of step after one.
ncclResult_t checkHealthy(const ncclEpGroup* g, const char* what) {
  return epx::linkCheckUsable(g->link, what, "group", "ncclEpGroupGetAsyncError");
}

// High-throughput calls on a handle of a low-latency group.
ncclResult_t refuseLowLatency(const ncclEpHandle* h, const char* what) {
  return fail(ncclInvalidUsage, std::string(what) + ": the handle belongs to a low-latency group (ncclEpAlgoLowLatency); "
                                                    "use ncclEpLowLatencyDispatch / ncclEpLowLatencyCombine (ep_ll.h)");
}

}  // namespace

extern "C" ncclResult_t ncclEpDispatchLayout(ncclEpHandle_t h, const ncclEpRouting_t* routing, cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "ncclEpDispatchLayout: handle is NULL");
  if (h->ll) return refuseLowLatency(h, "ncclEpDispatchLayout");
  ncclEpGroup* g = h->group;
  std::string err = epx::checkRouting(g->cfg, routing);
  if (!err.empty()) return fail(ncclInvalidArgument, "ncclEpDispatchLayout: " + err);
  if (ncclResult_t r = checkHealthy(g, "ncclEpDispatchLayout"); r != ncclSuccess) return r;
  epx::dev::LayoutArgs a{};
  a.c = g->common();
  a.r = h->route;
  a.topkIdx = routing->topkIdx;
  a.idxIs64 = routing->topkIdxType == ncclInt64;
  a.numTokens = routing->numTokens;
  a.summary = h->cfg.capacity ? nullptr : h->summaryDev;
  if (!h->cfg.capacity) h->summary->numRows = -2;  // overwritten by the kernel
  cudaError_t ce = epx::dev::launchLayout(a, stream);
  // Hybrid forwarding: each token's slot among this rank's tokens to each other node.
  if (ce == cudaSuccess && g->nodeSize > 0) ce = epx::dev::launchHybridRoute(a, stream);
  if (ce != cudaSuccess) return launchFailed("ncclEpDispatchLayout", ce);
  h->numTokens = routing->numTokens;
  h->laidOut = true;
  h->dispatched = false;  // a new route: combine needs a dispatch of it first
  if (h->cfg.capacity) return ncclSuccess;

  // Exact mode: the documented host synchronization.
  if ((ce = cudaStreamSynchronize(stream)) != cudaSuccess) {
    h->laidOut = false;
    return fail(ncclUnhandledCudaError, std::string("ncclEpDispatchLayout: ") + cudaGetErrorString(ce));
  }
  const epx::dev::LayoutSummary& s = *h->summary;
  if (s.numRows < 0) {
    h->laidOut = false;
    char msg[512];
    ncclResult_t code;
    ncclEpGroupGetAsyncError(g, &code, msg, sizeof(msg));
    return fail(ncclRemoteError, std::string("ncclEpDispatchLayout: count exchange failed: ") + msg);
  }
  h->numRows = s.numRows;
  h->numRecvTokens = s.numTokens;
  h->expertCounts.assign(s.expertCounts, s.expertCounts + g->cfg.localExperts(g->link.nRanks));
  if (s.badKind) {
    std::ostringstream os;
    os << "ncclEpDispatchLayout: token " << s.badToken << " slot " << s.badSlot << ": expert id " << s.badValue;
    if (s.badKind == 1)
      os << " is out of range [-1, " << g->cfg.numExperts << ")";
    else
      os << " repeats an earlier slot of the same token";
    os << " (the slot was dropped from the route; fix the router output)";
    return fail(ncclInvalidArgument, os.str());
  }
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpDispatch(ncclEpHandle_t h, const ncclEpDispatchInputs_t* in,
                                       const ncclEpDispatchOutputs_t* out, cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "ncclEpDispatch: handle is NULL");
  if (h->ll) return refuseLowLatency(h, "ncclEpDispatch");
  ncclEpGroup* g = h->group;
  std::string err = epx::checkDispatch(view(h), in, out);
  if (!err.empty()) return fail(ncclInvalidArgument, "ncclEpDispatch: " + err);
  if (ncclResult_t r = checkHealthy(g, "ncclEpDispatch"); r != ncclSuccess) return r;
  const bool fp8 = in->xType == ncclFloat8e4m3;
  epx::dev::DispatchArgs a{};
  a.c = g->common();
  a.r = h->route;
  a.x = static_cast<const char*>(in->x);
  a.xScales = in->xScales;
  a.topkWeights = in->topkWeights;
  a.xRowBytes = g->cfg.hidden * (fp8 ? 1 : 2);
  a.scaleRowBytes = fp8 ? g->cfg.hidden / 128 * 4 : 0;
  a.zeroGaps = h->cfg.zeroGaps;
  a.zeroCopy = !h->cfg.expanded && out->recvX == g->buffer() + g->wl.recvX;
  a.recvX = static_cast<char*>(out->recvX);
  a.recvScales = out->recvScales;
  a.recvTopkWeights = out->recvTopkWeights;
  a.recvTopkIdx = out->recvTopkIdx;
  a.recvSrcInfo = out->recvSrcInfo;
  a.expertCounts = out->expertCounts;
  a.expertOffsets = out->expertOffsets;
  a.numRecvRows = out->numRecvRows;
  cudaError_t ce = epx::dev::launchDispatch(a, g->nCtas, stream);
  if (ce != cudaSuccess) return launchFailed("ncclEpDispatch", ce);
  h->dispatched = true;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpCombine(ncclEpHandle_t h, const ncclEpCombineInputs_t* in,
                                      const ncclEpCombineOutputs_t* out, cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "ncclEpCombine: handle is NULL");
  if (h->ll) return refuseLowLatency(h, "ncclEpCombine");
  ncclEpGroup* g = h->group;
  std::string err = epx::checkCombine(view(h), in, out);
  if (!err.empty()) return fail(ncclInvalidArgument, "ncclEpCombine: " + err);
  if (err = epx::checkCombineAfterDispatch(view(h)); !err.empty()) return fail(ncclInvalidUsage, "ncclEpCombine: " + err);
  if (ncclResult_t r = checkHealthy(g, "ncclEpCombine"); r != ncclSuccess) return r;
  epx::dev::CombineArgs a{};
  a.c = g->common();
  a.r = h->route;
  a.x = static_cast<const uint16_t*>(in->x);
  a.bias0 = static_cast<const uint16_t*>(in->bias0);
  a.bias1 = static_cast<const uint16_t*>(in->bias1);
  a.topkWeights = in->topkWeights;
  a.out = static_cast<uint16_t*>(out->out);
  a.combinedTopkWeights = out->combinedTopkWeights;
  a.fp32 = h->cfg.fp32Combine && h->cfg.expanded;  // dedup rows are the caller's BF16 rows
  // Pull when the expert output already sits in the window (and any weights are the window's).
  char* base = g->buffer();
  if (h->cfg.expanded && g->link.ginContexts > 0 && in->x == base + g->wl.combineX)
    return fail(ncclInvalidArgument, "ncclEpCombine: the expanded layout's input x must not be the window's combineX "
                                     "(it stages rows for network peers); use your own buffer");
  a.pull = !h->cfg.expanded && in->x == base + g->wl.combineX &&
           (in->topkWeights == nullptr || in->topkWeights == reinterpret_cast<float*>(base + g->wl.recvWeights));
  cudaError_t ce = epx::dev::launchCombine(a, g->nCtas, stream);
  return ce == cudaSuccess ? ncclSuccess : launchFailed("ncclEpCombine", ce);
}
