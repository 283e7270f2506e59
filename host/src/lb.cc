// ncclEpLb: a window link (link.h) holding the redundant slots, their gradients and the network
// staging (lb_layout.h), the protocol session's state, and the two calls' launches
// (device/src/lb.cu).
#include "epx/lb.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/async_error.h"
#include "core/coll_config.h"
#include "core/errors.h"
#include "core/nccl_version.h"
#include "epx/device/coll_launch.h"
#include "epx/window.h"
#include "link.h"
#include "window.h"

using epx::fail;

struct ncclEpLb {
  epx::WindowLink link;
  epx::LbConfig cfg;
  epx::LbPlan plan;
  epx::dev::LbLayout l{};
  epx::SessionState ses;  // the protocol session's device state
  epx::dev::SessionArgs session() const { return ses.args(cfg.numCtas); }
};

namespace {

static_assert(epx::kLbMaxTensors == NCCL_EP_LB_MAX_TENSORS && epx::dev::kLbMaxTensors == NCCL_EP_LB_MAX_TENSORS,
              "lb.h and core/coll_config.h / lb_layout.h disagree on the tensor count");
static_assert(epx::kLbMaxSlots == epx::dev::kLbMaxSlots && epx::kLbMaxCtas == epx::dev::kLbMaxCtas,
              "core/coll_config.h and lb_layout.h disagree on the bounds");

void release(ncclEpLb* b) {
  epx::linkClose(&b->link);
  b->ses.release();
  delete b;
}

// The public plan in core's terms ("" or why it cannot be read).
std::string planOf(const ncclEpLbPlan_t* in, epx::LbPlan* out) {
  if (!in) return "plan is NULL";
  if (in->numWeightTensors < 0 || in->numWeightTensors > NCCL_EP_LB_MAX_TENSORS)
    return "numWeightTensors " + std::to_string(in->numWeightTensors) + " is not in 0 .. " +
           std::to_string(NCCL_EP_LB_MAX_TENSORS);
  if (in->numGradTensors < 0 || in->numGradTensors > NCCL_EP_LB_MAX_TENSORS)
    return "numGradTensors " + std::to_string(in->numGradTensors) + " is not in 0 .. " +
           std::to_string(NCCL_EP_LB_MAX_TENSORS);
  out->numExperts = in->numExperts;
  out->numSlots = in->numSlots;
  out->weightRowBytes.assign(in->weightRowBytes, in->weightRowBytes + in->numWeightTensors);
  out->gradRowElems.assign(in->gradRowElems, in->gradRowElems + in->numGradTensors);
  return {};
}

std::string configOf(const ncclEpLbConfig_t* in, epx::LbConfig* out) {
  epx::LbConfigRequest req;  // no config: the defaults
  if (in) {
    if (std::string e = epx::checkConfigHeader("config", true, in->size, sizeof(ncclEpLbConfig_t), in->magic,
                                               NCCL_EP_LB_CONFIG_MAGIC);
        !e.empty())
      return e;
    req.numCtas = in->numCtas;
    req.timeoutMs = in->timeoutMs;
    req.chunkBytes = in->chunkBytes;
  }
  return epx::normalizeLbConfig(req, out);
}

// Plan, config and the transports this rank has, read into *p and *c: ncclSuccess, else the
// failure "<who>: <reason>" — ncclInvalidArgument, or ncclInvalidUsage for a valid request this
// build or NCCL cannot serve (gradients from network peers without GIN get).
ncclResult_t checkAll(const ncclEpLbPlan_t* plan, const ncclEpLbConfig_t* config, const epx::WindowLink& l,
                      epx::LbPlan* p, epx::LbConfig* c, const char* who) {
  std::string e = planOf(plan, p);
  if (e.empty()) e = configOf(config, c);
  if (e.empty()) e = epx::checkLbPlan(*p, l.nRanks);
  if (!e.empty()) return fail(ncclInvalidArgument, std::string(who) + ": " + e);
  if (l.network() && !p->gradRowElems.empty())
    if (std::string u = epx::ginGetUnsupported(NCCL_VERSION_CODE, std::string(who) + " (gradient reduction)"); !u.empty())
      return fail(ncclInvalidUsage, std::string(who) + ": " + u);
  return ncclSuccess;
}

epx::dev::LbLayout layoutOf(const epx::LbPlan& p, const epx::LbConfig& c, const epx::WindowLink& l) {
  return epx::dev::layoutLb(p.weightRowBytes.data(), int(p.weightRowBytes.size()), p.gradRowElems.data(),
                            int(p.gradRowElems.size()), p.numSlots, l.nRanks, c.numCtas, c.chunkBytes, l.network());
}

// What an LB object takes of its communicator's window (linkOpen).
epx::LinkRequest lbRequest(const epx::dev::LbLayout& bl, const epx::LbConfig& cfg, int nRanks) {
  epx::LinkRequest req;
  req.bytes = bl.totalBytes;
  req.zeroedPrefix = bl.totalBytes;  // flags, and the slots start zeroed
  req.ginSignals = epx::dev::ginSignalCount(nRanks);
  req.ginCounters = epx::dev::lbGinCounters(cfg.numCtas);
  req.timeoutMs = cfg.timeoutMs;
  req.who = "ncclEpLbCreate";
  return req;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % epx::kCollPtrAlign == 0; }

// Checks one call's arguments and launches it. ptrs: the weight (prefetch) or gradient tensors.
ncclResult_t call(ncclEpLb_t b, int op, const int32_t* mapping, const void* const* ptrs, cudaStream_t stream,
                  const char* who) {
  auto bad = [&](const std::string& e) { return fail(ncclInvalidArgument, std::string(who) + ": " + e); };
  if (!b) return bad("lb is NULL");
  if (!mapping) return bad("mapping is NULL");
  const bool prefetch = op == epx::dev::kLbPrefetch;
  const int n = prefetch ? int(b->plan.weightRowBytes.size()) : int(b->plan.gradRowElems.size());
  const char* what = prefetch ? "weights" : "grads";
  if (n == 0)
    return bad(std::string("the plan has no ") + (prefetch ? "weight" : "gradient") + " tensors");
  if (!ptrs) return bad(std::string(what) + " is NULL");
  for (int t = 0; t < n; ++t) {
    if (!ptrs[t]) return bad(std::string(what) + "[" + std::to_string(t) + "] is NULL");
    if (!aligned(ptrs[t])) return bad(std::string(what) + "[" + std::to_string(t) + "] is not 16-byte aligned");
  }
  if (ncclResult_t r = epx::linkCheckUsable(b->link, who, "load-balancing object", "ncclEpLbGetAsyncError");
      r != ncclSuccess)
    return r;
  epx::dev::LbArgs a{};
  a.link = epx::linkArgs(b->link, b->l.flags);
  a.session = b->session();
  a.l = b->l;
  a.op = op;
  a.mapping = mapping;
  a.numExperts = b->plan.numExperts;
  a.localExperts = b->plan.numExperts / b->link.nRanks;
  for (int t = 0; t < n; ++t) {
    if (prefetch)
      a.weights[t] = static_cast<const char*>(ptrs[t]);
    else
      a.grads[t] = static_cast<float*>(const_cast<void*>(ptrs[t]));
  }
  if (cudaError_t ce = epx::dev::launchLb(a, b->cfg.numCtas, stream); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(who) + ": launch: " + cudaGetErrorString(ce));
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t ncclEpWindowPlanAddLb(ncclComm_t comm, const ncclEpLbPlan_t* plan,
                                              const ncclEpLbConfig_t* config, ncclEpWindowPlan_t* wplan) {
  constexpr const char* kWho = "ncclEpWindowPlanAddLb";
  epx::WindowLink l;
  if (ncclResult_t r = epx::planQuery(comm, wplan, kWho, &l); r != ncclSuccess) return r;
  epx::LbPlan p;
  epx::LbConfig c;
  if (ncclResult_t r = checkAll(plan, config, l, &p, &c, kWho); r != ncclSuccess) return r;
  epx::addToPlan(epx::linkNeed(lbRequest(layoutOf(p, c, l), c, l.nRanks), l), wplan);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLbGetBufferSizeHint(ncclComm_t comm, const ncclEpLbPlan_t* plan,
                                                  const ncclEpLbConfig_t* config, size_t* bytes) {
  constexpr const char* kWho = "ncclEpLbGetBufferSizeHint";
  if (!bytes) return fail(ncclInvalidArgument, std::string(kWho) + ": bytes is NULL");
  if (!comm) return fail(ncclInvalidArgument, std::string(kWho) + ": comm is NULL");
  epx::WindowLink l;
  if (std::string e = epx::linkQuery(comm, &l); !e.empty()) return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  epx::LbPlan p;
  epx::LbConfig c;
  if (ncclResult_t r = checkAll(plan, config, l, &p, &c, kWho); r != ncclSuccess) return r;
  *bytes = layoutOf(p, c, l).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLbCreate(ncclComm_t comm, const ncclEpLbPlan_t* plan, const ncclEpLbConfig_t* config,
                                       ncclEpLb_t* out) {
  constexpr const char* kWho = "ncclEpLbCreate";
  auto who = [](const std::string& e) { return std::string(kWho) + ": " + e; };
  if (!out) return fail(ncclInvalidArgument, who("lb is NULL"));
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, who("comm is NULL"));
  auto* b = new ncclEpLb;
  if (ncclResult_t r = epx::linkStart(comm, kWho, &b->link); r != ncclSuccess) {
    delete b;
    return r;
  }
  if (ncclResult_t r = checkAll(plan, config, b->link, &b->plan, &b->cfg, kWho); r != ncclSuccess) {
    delete b;
    return r;
  }
  if (ncclResult_t r = epx::linkAgree(b->link, epx::makeLbAgreed(b->plan, b->cfg, EPX_VERSION_CODE),
                                      epx::checkLbAgreement, kWho);
      r != ncclSuccess) {
    delete b;
    return r;
  }
  b->l = layoutOf(b->plan, b->cfg, b->link);
  cudaError_t ce;
  if ((ce = epx::dev::preloadLbKernels()) != cudaSuccess || (ce = b->ses.alloc(b->link.nRanks)) != cudaSuccess) {
    release(b);
    return fail(ncclUnhandledCudaError, who(std::string("device state: ") + cudaGetErrorString(ce)));
  }
  if (ncclResult_t r = epx::linkOpen(lbRequest(b->l, b->cfg, b->link.nRanks), &b->link); r != ncclSuccess) {
    release(b);
    return r;
  }
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr, "epx: rank %d/%d lb: %d experts, %d slots, %zu weight / %zu gradient tensors, %d CTAs, window %zu B\n",
                 b->link.rank, b->link.nRanks, b->plan.numExperts, b->plan.numSlots, b->plan.weightRowBytes.size(),
                 b->plan.gradRowElems.size(), b->cfg.numCtas, size_t(b->l.totalBytes));
  *out = b;
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLbDestroy(ncclEpLb_t b) {
  if (!b) return ncclSuccess;
  cudaSetDevice(b->link.cudaDev);
  const ncclResult_t r = epx::linkQuiesce(&b->link, "ncclEpLbDestroy");
  release(b);
  return r;
}

extern "C" ncclResult_t ncclEpLbGetSlots(ncclEpLb_t b, int t, void** ptr) {
  if (!b || !ptr) return fail(ncclInvalidArgument, "ncclEpLbGetSlots: NULL argument");
  if (t < 0 || t >= int(b->plan.weightRowBytes.size()))
    return fail(ncclInvalidArgument, "ncclEpLbGetSlots: weight tensor " + std::to_string(t) + " is not in the plan (it has " +
                                         std::to_string(b->plan.weightRowBytes.size()) + ")");
  *ptr = static_cast<char*>(b->link.buffer) + b->l.slots[t];
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLbGetSlotGrads(ncclEpLb_t b, int t, float** ptr) {
  if (!b || !ptr) return fail(ncclInvalidArgument, "ncclEpLbGetSlotGrads: NULL argument");
  if (t < 0 || t >= int(b->plan.gradRowElems.size()))
    return fail(ncclInvalidArgument, "ncclEpLbGetSlotGrads: gradient tensor " + std::to_string(t) +
                                         " is not in the plan (it has " + std::to_string(b->plan.gradRowElems.size()) + ")");
  *ptr = reinterpret_cast<float*>(static_cast<char*>(b->link.buffer) + b->l.slotGrads[t]);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpLbPrefetchWeights(ncclEpLb_t b, const int32_t* mapping, const void* const* weights,
                                                cudaStream_t stream) {
  return call(b, epx::dev::kLbPrefetch, mapping, weights, stream, "ncclEpLbPrefetchWeights");
}

extern "C" ncclResult_t ncclEpLbReduceGrads(ncclEpLb_t b, const int32_t* mapping, float* const* grads,
                                            cudaStream_t stream) {
  return call(b, epx::dev::kLbReduceGrads, mapping, reinterpret_cast<const void* const*>(grads), stream,
              "ncclEpLbReduceGrads");
}

extern "C" ncclResult_t ncclEpLbGetAsyncError(ncclEpLb_t b, ncclResult_t* asyncError, char* msg, size_t msgLen) {
  return epx::linkGetAsyncError(b ? &b->link : nullptr, asyncError, msg, msgLen, "ncclEpLbGetAsyncError");
}
