// ncclEpEngram: a window link (link.h) holding the request lists, the receive rows of one layer
// and the network staging (engram_layout.h), the protocol session's state, the tables' pointers,
// and one launch of the fetch kernel per layer (device/src/engram.cu) with an event after each.
#include "epx/engram.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/coll_config.h"
#include "core/errors.h"
#include "epx/device/coll_launch.h"
#include "epx/window.h"
#include "link.h"
#include "window.h"

using epx::fail;

struct ncclEpEngram {
  epx::WindowLink link;
  epx::EngramConfig cfg;
  epx::EngramPlan plan;
  epx::dev::EngramLayout l{};
  epx::SessionState ses;                 // the protocol session's device state
  uint32_t* builtSeq = nullptr;          // device word (engram_layout.h EngramArgs)
  std::vector<const char*> tables;       // [numLayers] device-accessible shard pointers, or null
  std::vector<cudaEvent_t> layerDone;    // [numLayers] recorded after each layer's kernel
};

namespace {

static_assert(epx::kEngramMaxLayers == NCCL_EP_ENGRAM_MAX_LAYERS, "engram.h and core/coll_config.h disagree");
static_assert(epx::kEngramMaxCtas == epx::dev::kEngramMaxCtas && epx::kEngramMaxRanks == epx::dev::kEngramMaxRanks,
              "core/coll_config.h and engram_layout.h disagree on the bounds");

void release(ncclEpEngram* e) {
  epx::linkClose(&e->link);
  e->ses.release();
  if (e->builtSeq) cudaFree(e->builtSeq);
  for (cudaEvent_t ev : e->layerDone)
    if (ev) cudaEventDestroy(ev);
  delete e;
}

std::string planOf(const ncclEpEngramPlan_t* in, epx::EngramPlan* out) {
  if (!in) return "plan is NULL";
  out->numLayers = in->numLayers;
  out->numRows = in->numRows;
  out->rowBytes = in->rowBytes;
  out->maxTokens = in->maxTokens;
  out->entriesPerToken = in->entriesPerToken;
  return {};
}

std::string configOf(const ncclEpEngramConfig_t* in, epx::EngramConfig* out) {
  epx::EngramConfigRequest req;  // no config: the defaults
  if (in) {
    if (std::string e = epx::checkConfigHeader("config", true, in->size, sizeof(ncclEpEngramConfig_t), in->magic,
                                               NCCL_EP_ENGRAM_CONFIG_MAGIC);
        !e.empty())
      return e;
    req.numCtas = in->numCtas;
    req.timeoutMs = in->timeoutMs;
    req.chunkBytes = in->chunkBytes;
  }
  return epx::normalizeEngramConfig(req, out);
}

ncclResult_t checkAll(const ncclEpEngramPlan_t* plan, const ncclEpEngramConfig_t* config, const epx::WindowLink& l,
                      epx::EngramPlan* p, epx::EngramConfig* c, const char* who) {
  std::string e = planOf(plan, p);
  if (e.empty()) e = configOf(config, c);
  if (e.empty()) e = epx::checkEngramPlan(*p, l.nRanks);
  if (!e.empty()) return fail(ncclInvalidArgument, std::string(who) + ": " + e);
  return ncclSuccess;
}

epx::dev::EngramLayout layoutOf(const epx::EngramPlan& p, const epx::EngramConfig& c, const epx::WindowLink& l) {
  return epx::dev::layoutEngram(p.numRows, p.rowBytes, p.maxTokens, p.entriesPerToken, l.nRanks, c.numCtas,
                                c.chunkBytes, l.network());
}

epx::LinkRequest engramRequest(const epx::dev::EngramLayout& el, const epx::EngramConfig& cfg, int nRanks) {
  epx::LinkRequest req;
  req.bytes = el.totalBytes;
  req.zeroedPrefix = epx::dev::engramZeroedPrefix(el);
  req.ginSignals = epx::dev::ginSignalCount(nRanks);
  req.ginCounters = epx::dev::engramGinCounters(cfg.numCtas);
  req.timeoutMs = cfg.timeoutMs;
  req.who = "ncclEpEngramCreate";
  return req;
}

bool alignedTo(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

extern "C" ncclResult_t ncclEpWindowPlanAddEngram(ncclComm_t comm, const ncclEpEngramPlan_t* plan,
                                                  const ncclEpEngramConfig_t* config, ncclEpWindowPlan_t* wplan) {
  constexpr const char* kWho = "ncclEpWindowPlanAddEngram";
  epx::WindowLink l;
  if (ncclResult_t r = epx::planQuery(comm, wplan, kWho, &l); r != ncclSuccess) return r;
  epx::EngramPlan p;
  epx::EngramConfig c;
  if (ncclResult_t r = checkAll(plan, config, l, &p, &c, kWho); r != ncclSuccess) return r;
  epx::addToPlan(epx::linkNeed(engramRequest(layoutOf(p, c, l), c, l.nRanks), l), wplan);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramGetBufferSizeHint(ncclComm_t comm, const ncclEpEngramPlan_t* plan,
                                                      const ncclEpEngramConfig_t* config, size_t* bytes) {
  constexpr const char* kWho = "ncclEpEngramGetBufferSizeHint";
  if (!bytes) return fail(ncclInvalidArgument, std::string(kWho) + ": bytes is NULL");
  if (!comm) return fail(ncclInvalidArgument, std::string(kWho) + ": comm is NULL");
  epx::WindowLink l;
  if (std::string e = epx::linkQuery(comm, &l); !e.empty()) return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  epx::EngramPlan p;
  epx::EngramConfig c;
  if (ncclResult_t r = checkAll(plan, config, l, &p, &c, kWho); r != ncclSuccess) return r;
  *bytes = layoutOf(p, c, l).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramCreate(ncclComm_t comm, const ncclEpEngramPlan_t* plan,
                                           const ncclEpEngramConfig_t* config, ncclEpEngram_t* out) {
  constexpr const char* kWho = "ncclEpEngramCreate";
  auto who = [](const std::string& e) { return std::string(kWho) + ": " + e; };
  if (!out) return fail(ncclInvalidArgument, who("engram is NULL"));
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, who("comm is NULL"));
  auto* e = new ncclEpEngram;
  if (ncclResult_t r = epx::linkStart(comm, kWho, &e->link); r != ncclSuccess) {
    delete e;
    return r;
  }
  if (ncclResult_t r = checkAll(plan, config, e->link, &e->plan, &e->cfg, kWho); r != ncclSuccess) {
    delete e;
    return r;
  }
  if (ncclResult_t r = epx::linkAgree(e->link, epx::makeEngramAgreed(e->plan, e->cfg, EPX_VERSION_CODE),
                                      epx::checkEngramAgreement, kWho);
      r != ncclSuccess) {
    delete e;
    return r;
  }
  e->l = layoutOf(e->plan, e->cfg, e->link);
  e->tables.assign(size_t(e->plan.numLayers), nullptr);
  e->layerDone.assign(size_t(e->plan.numLayers), nullptr);
  cudaError_t ce = epx::dev::preloadEngramKernels();
  if (ce == cudaSuccess) ce = e->ses.alloc(e->link.nRanks);
  if (ce == cudaSuccess) ce = cudaMalloc(&e->builtSeq, sizeof(uint32_t));
  if (ce == cudaSuccess) ce = cudaMemset(e->builtSeq, 0, sizeof(uint32_t));
  for (size_t i = 0; i < e->layerDone.size() && ce == cudaSuccess; ++i)
    ce = cudaEventCreateWithFlags(&e->layerDone[i], cudaEventDisableTiming);
  if (ce != cudaSuccess) {
    release(e);
    return fail(ncclUnhandledCudaError, who(std::string("device state: ") + cudaGetErrorString(ce)));
  }
  if (ncclResult_t r = epx::linkOpen(engramRequest(e->l, e->cfg, e->link.nRanks), &e->link); r != ncclSuccess) {
    release(e);
    return r;
  }
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr, "epx: rank %d/%d engram: %d layers x %lld rows x %zu B, %d x %d requests, %d CTAs, window %zu B\n",
                 e->link.rank, e->link.nRanks, e->plan.numLayers, (long long)e->plan.numRows, size_t(e->plan.rowBytes),
                 e->plan.maxTokens, e->plan.entriesPerToken, e->cfg.numCtas, size_t(e->l.totalBytes));
  *out = e;
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramDestroy(ncclEpEngram_t e) {
  if (!e) return ncclSuccess;
  cudaSetDevice(e->link.cudaDev);
  const ncclResult_t r = epx::linkQuiesce(&e->link, "ncclEpEngramDestroy");
  release(e);
  return r;
}

extern "C" ncclResult_t ncclEpEngramSetTable(ncclEpEngram_t e, int layer, const void* shard) {
  constexpr const char* kWho = "ncclEpEngramSetTable";
  auto bad = [&](const std::string& m) { return fail(ncclInvalidArgument, std::string(kWho) + ": " + m); };
  if (!e) return bad("engram is NULL");
  if (layer < 0 || layer >= e->plan.numLayers)
    return bad("layer " + std::to_string(layer) + " is not in 0 .. " + std::to_string(e->plan.numLayers - 1));
  if (!shard) return bad("shard is NULL");
  if (!alignedTo(shard, epx::kCollPtrAlign)) return bad("shard is not 16-byte aligned");
  cudaPointerAttributes attr{};
  if (cudaError_t ce = cudaPointerGetAttributes(&attr, shard); ce != cudaSuccess) {
    cudaGetLastError();
    return bad(std::string("shard: cudaPointerGetAttributes failed: ") + cudaGetErrorString(ce));
  }
  const void* dev = nullptr;
  if (attr.type == cudaMemoryTypeDevice) {
    if (attr.device != e->link.cudaDev)
      return bad("shard is device memory of GPU " + std::to_string(attr.device) + ", not of this rank's GPU " +
                 std::to_string(e->link.cudaDev));
    dev = shard;
  } else if (attr.type == cudaMemoryTypeManaged) {
    dev = shard;
  } else if (attr.type == cudaMemoryTypeHost && attr.devicePointer) {
    dev = attr.devicePointer;  // pinned host memory mapped into the device's address space
  } else {
    return bad("shard is neither device memory nor mapped pinned host memory (cudaHostAlloc with "
               "cudaHostAllocMapped, or cudaHostRegister)");
  }
  e->tables[size_t(layer)] = static_cast<const char*>(dev);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramFetch(ncclEpEngram_t e, const int32_t* indices, int numTokens, void* output,
                                          cudaStream_t stream) {
  constexpr const char* kWho = "ncclEpEngramFetch";
  auto bad = [&](const std::string& m) { return fail(ncclInvalidArgument, std::string(kWho) + ": " + m); };
  if (!e) return bad("engram is NULL");
  if (numTokens < 0 || numTokens > e->plan.maxTokens)
    return bad("numTokens " + std::to_string(numTokens) + " is not in 0 .. maxTokens " + std::to_string(e->plan.maxTokens));
  if (numTokens > 0) {
    if (!indices) return bad("indices is NULL");
    if (!output) return bad("output is NULL");
    if (!alignedTo(indices, 4)) return bad("indices is not 4-byte aligned");
    if (!alignedTo(output, epx::kCollPtrAlign)) return bad("output is not 16-byte aligned");
  }
  for (int l = 0; l < e->plan.numLayers; ++l)
    if (!e->tables[size_t(l)])
      return fail(ncclInvalidUsage, std::string(kWho) + ": layer " + std::to_string(l) +
                                        " has no table on this rank (ncclEpEngramSetTable)");
  if (ncclResult_t r = epx::linkCheckUsable(e->link, kWho, "Engram object", "ncclEpEngramGetAsyncError"); r != ncclSuccess)
    return r;
  epx::dev::EngramArgs a{};
  a.link = epx::linkArgs(e->link, e->l.flags);
  a.session = e->ses.args(e->cfg.numCtas);
  a.l = e->l;
  a.numTokens = numTokens;
  a.builtSeq = e->builtSeq;
  const uint64_t perLayer = uint64_t(numTokens) * uint64_t(e->plan.entriesPerToken);
  for (int l = 0; l < e->plan.numLayers; ++l) {
    a.layer = l;
    a.indices = numTokens > 0 ? indices + perLayer * uint64_t(l) : nullptr;
    a.output = numTokens > 0 ? static_cast<char*>(output) + perLayer * e->plan.rowBytes * uint64_t(l) : nullptr;
    a.table = e->tables[size_t(l)];
    if (cudaError_t ce = epx::dev::launchEngram(a, e->cfg.numCtas, stream); ce != cudaSuccess)
      return fail(ncclUnhandledCudaError, std::string(kWho) + ": launch of layer " + std::to_string(l) + ": " +
                                              cudaGetErrorString(ce));
    if (cudaError_t ce = cudaEventRecord(e->layerDone[size_t(l)], stream); ce != cudaSuccess)
      return fail(ncclUnhandledCudaError, std::string(kWho) + ": event of layer " + std::to_string(l) + ": " +
                                              cudaGetErrorString(ce));
  }
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramWaitLayer(ncclEpEngram_t e, int layer, cudaStream_t stream) {
  constexpr const char* kWho = "ncclEpEngramWaitLayer";
  if (!e) return fail(ncclInvalidArgument, std::string(kWho) + ": engram is NULL");
  if (layer < 0 || layer >= e->plan.numLayers)
    return fail(ncclInvalidArgument, std::string(kWho) + ": layer " + std::to_string(layer) + " is not in 0 .. " +
                                         std::to_string(e->plan.numLayers - 1));
  if (cudaError_t ce = cudaStreamWaitEvent(stream, e->layerDone[size_t(layer)], 0); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(kWho) + ": " + cudaGetErrorString(ce));
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpEngramGetAsyncError(ncclEpEngram_t e, ncclResult_t* asyncError, char* msg,
                                                  size_t msgLen) {
  return epx::linkGetAsyncError(e ? &e->link : nullptr, asyncError, msg, msgLen, "ncclEpEngramGetAsyncError");
}
