// ncclEpGroup lifecycle: config checks, NCCL version check, window allocation/registration,
// device communicator, per-group device state and the async error record.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "agree.h"
#include "core/async_error.h"
#include "core/config.h"
#include "core/errors.h"
#include "epx/device/launch.h"
#include "internal.h"
#include "link.h"
#include "window.h"
#include "epx/window.h"

using epx::fail;

namespace {

std::string cudaMsg(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }

// Link bandwidths for the analytic SM count (smBudget = 0): EPX_NVLINK_GBPS, EPX_RDMA_GBPS.
epx::LinkRates linkRates() {
  std::string warnings;
  epx::LinkRates r = epx::parseLinkRates(std::getenv("EPX_NVLINK_GBPS"), std::getenv("EPX_RDMA_GBPS"), &warnings);
  if (!warnings.empty()) std::fprintf(stderr, "epx: %s", warnings.c_str());
  return r;
}

void releaseGroup(ncclEpGroup* g) {
  epx::linkClose(&g->link);  // window, device communicator, GIN posted totals, error record
  g->ses.release();
  epx::llGroupRelease(g);
  epx::closeBeacons(&g->beacons);
  delete g;
}

// Kernels whose CTAs wait on each other need every CTA resident at once.
std::string checkCoResident(int nCtas, int numSMs, int nRanks) {
  int perSmD = 0, perSmC = 0;
  if (epx::dev::dispatchMaxCtasPerSm(&perSmD) != cudaSuccess || epx::dev::combineMaxCtasPerSm(&perSmC) != cudaSuccess)
    return "cannot query the occupancy of the dispatch/combine kernels";
  const int fit = std::min(perSmD, perSmC) * numSMs;
  if (nCtas > fit)
    return std::to_string(nCtas) + " CTAs cannot all be resident (" + std::to_string(fit) +
           " fit on this GPU); lower smBudget";
  return {};
}

// What a group takes of its communicator's window (linkOpen).
epx::LinkRequest groupRequest(const epx::GroupConfig& cfg, int nCtas, const epx::dev::WindowLayout& wl,
                              const epx::WindowLink& l) {
  const bool network = l.network();
  epx::LinkRequest req;
  req.bytes = wl.totalBytes;
  req.zeroedPrefix = epx::dev::windowZeroedPrefix(wl);
  req.ginSignals = !network ? 0
                   : cfg.lowLatency() ? int(epx::dev::llTotalWords(l.nRanks, cfg.numExperts))
                                      : epx::dev::ginSignalCount(l.nRanks);
  req.ginCounters = !network ? 0
                    : cfg.lowLatency() ? epx::dev::llGinCounterCount(nCtas)
                                       : epx::dev::ginCounterCount(nCtas, cfg.maxTokensPerRank);
  req.timeoutMs = cfg.timeoutMs;
  req.who = "ncclEpGroupCreate";
  return req;
}

}  // namespace

extern "C" ncclResult_t ncclEpWindowPlanAddGroup(ncclComm_t comm, const ncclEpConfig_t* config,
                                                 ncclEpWindowPlan_t* plan) {
  constexpr const char* kWho = "ncclEpWindowPlanAddGroup";
  epx::WindowLink l;
  if (ncclResult_t r = epx::planQuery(comm, plan, kWho, &l); r != ncclSuccess) return r;
  epx::GroupConfig cfg;
  if (std::string e = epx::normalizeConfig(config, l.nRanks, &cfg); !e.empty())
    return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  int nodeSize = 0;
  if (std::string e = epx::checkForwarding(cfg, l.nRanks, l.lsaSize, &nodeSize); !e.empty())
    return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  int numSMs = 0;
  if (cudaError_t ce = cudaDeviceGetAttribute(&numSMs, cudaDevAttrMultiProcessorCount, l.cudaDev); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(kWho) + ": " + cudaMsg("device query", ce));
  const int nCtas = epx::resolveCtaCount(cfg, numSMs, l.nRanks, l.lsaSize, linkRates());
  const epx::WindowNeed n = epx::linkNeed(groupRequest(cfg, nCtas, epx::computeWindowLayout(cfg, l.nRanks, l.lsaSize), l), l);
  epx::addToPlan(n, plan);
  return ncclSuccess;
}

epx::dev::EpShape ncclEpGroup::shape() const {
  return {cfg.maxTokensPerRank, cfg.hidden, cfg.topk, cfg.numExperts, cfg.localExperts(link.nRanks)};
}

epx::dev::LinkArgs ncclEpGroup::linkArgs() const {
  epx::dev::LinkArgs l = epx::linkArgs(link, wl.flags);
  l.beacons = beacons.device;
  return l;
}

epx::dev::EpCommon ncclEpGroup::common() const {
  epx::dev::EpCommon c{};
  c.link = linkArgs();
  c.session = ses.args(nCtas);
  c.userBase = buffer();
  c.wl = wl;
  c.shape = shape();
  c.nodeSize = nodeSize;
  return c;
}

extern "C" ncclResult_t ncclEpGetBufferSizeHint(const ncclEpConfig_t* config, int nRanks, size_t* bytes) {
  if (!bytes) return fail(ncclInvalidArgument, "ncclEpGetBufferSizeHint: bytes is NULL");
  epx::GroupConfig cfg;
  std::string err = epx::normalizeConfig(config, nRanks, &cfg);
  if (!err.empty()) return fail(ncclInvalidArgument, "ncclEpGetBufferSizeHint: " + err);
  // Hybrid: the nodes as they would be with one rank per NVLink team (the most forwarding regions).
  if (int nodeSize = 0; !(err = epx::checkForwarding(cfg, nRanks, 1, &nodeSize)).empty())
    return fail(ncclInvalidArgument, "ncclEpGetBufferSizeHint: " + err);
  // Upper bound: the layout with network peers (staging regions); an NVLink-only group needs less.
  *bytes = epx::computeWindowLayout(cfg, nRanks, nRanks > 1 ? 1 : nRanks).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupCreate(ncclComm_t comm, const ncclEpConfig_t* config, ncclEpGroup_t* out) {
  if (!out) return fail(ncclInvalidArgument, "ncclEpGroupCreate: group is NULL");
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, "ncclEpGroupCreate: comm is NULL");
  // Every early return releases what was set up so far (releaseGroup is safe at every step).
  std::unique_ptr<ncclEpGroup, void (*)(ncclEpGroup*)> owned(new ncclEpGroup, releaseGroup);
  ncclEpGroup* g = owned.get();
  // The runtime NCCL; the communicator's size, this rank, its device (made current) and its LSA
  // team (link.h).
  if (ncclResult_t r = epx::linkStart(comm, "ncclEpGroupCreate", &g->link); r != ncclSuccess) {
    return r;
  }
  epx::WindowLink& l = g->link;
  std::string err = epx::normalizeConfig(config, l.nRanks, &g->cfg);
  if (!err.empty()) {
    return fail(ncclInvalidArgument, "ncclEpGroupCreate: " + err);
  }
  ncclResult_t r;
  cudaError_t ce = cudaDeviceGetAttribute(&g->numSMs, cudaDevAttrMultiProcessorCount, l.cudaDev);
  if (ce != cudaSuccess) {
    return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupCreate: device query", ce));
  }
  g->nCtas = epx::resolveCtaCount(g->cfg, g->numSMs, l.nRanks, l.lsaSize, linkRates());
  if ((r = epx::agreeOnConfig(*g)) != ncclSuccess) {  // collective: all ranks fail alike (host/src/agree.cc)
    return r;
  }
  // Hybrid forwarding's nodes, after the agreement: every rank has the same config and LSA team
  // size, so every rank refuses alike.
  if (std::string why = epx::checkForwarding(g->cfg, l.nRanks, l.lsaSize, &g->nodeSize); !why.empty()) {
    return fail(ncclInvalidArgument, "ncclEpGroupCreate: " + why);
  }
  if (std::string why = checkCoResident(g->nCtas, g->numSMs, l.nRanks); !why.empty()) {
    return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + why);
  }
  g->wl = epx::computeWindowLayout(g->cfg, l.nRanks, l.lsaSize);
  if (g->cfg.lowLatency()) g->ll = epx::computeLlLayout(g->cfg, l.nRanks, l.lsaSize);

  // The region of the communicator's window, the GIN counters' totals and the error record: the
  // setup every epx object shares (link.h); it ends with a gather after the GIN signals are zeroed.
  const epx::LinkRequest req = groupRequest(g->cfg, g->nCtas, g->wl, l);
  if ((r = epx::linkOpen(req, &l)) != ncclSuccess) {  // the reason is recorded (ncclEpGetLastError)
    return r;
  }
  if ((ce = g->ses.alloc(l.nRanks)) != cudaSuccess ||
      (g->cfg.lowLatency() && (ce = epx::llGroupInit(g)) != cudaSuccess) ||
      (ce = cudaDeviceSynchronize()) != cudaSuccess) {
    return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupCreate: device state", ce));
  }
  if (std::string berr; !epx::openBeacons(l.rank, &g->beacons, &berr))
    std::fprintf(stderr, "epx: rank %d: EPX_DEBUG_BEACONS: %s; no beacons for this group\n", l.rank, berr.c_str());
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr,
                 "epx: rank %d/%d group: T<=%d H=%d K=%d E=%d fp8=%d CTAs=%d window=%zu B, NVLink domain %d ranks, "
                 "GIN contexts %d, forwarding %s (nodes of %d ranks)\n",
                 l.rank, l.nRanks, g->cfg.maxTokensPerRank, g->cfg.hidden, g->cfg.topk, g->cfg.numExperts,
                 int(g->cfg.fp8Dispatch), g->nCtas, size_t(g->wl.totalBytes), l.lsaSize, l.ginContexts,
                 g->nodeSize ? "hybrid" : "direct", g->nodeSize ? g->nodeSize : l.lsaSize);
  *out = owned.release();
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupDestroy(ncclEpGroup_t g) {
  if (!g) return ncclSuccess;
  cudaSetDevice(g->link.cudaDev);
  // No GIN signal of this group's kernels may land on the next device communicator's signals.
  const ncclResult_t r = epx::linkQuiesce(&g->link, "ncclEpGroupDestroy");
  releaseGroup(g);
  return r;
}

extern "C" ncclResult_t ncclEpGroupGetSmCount(ncclEpGroup_t g, int* sms) {
  if (!g || !sms) return fail(ncclInvalidArgument, "ncclEpGroupGetSmCount: NULL argument");
  *sms = g->nCtas;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupGetAsyncError(ncclEpGroup_t g, ncclResult_t* asyncError, char* msg, size_t msgLen) {
  // The link's timeoutMs is cfg.timeoutMs.
  return epx::linkGetAsyncError(g ? &g->link : nullptr, asyncError, msg, msgLen, "ncclEpGroupGetAsyncError");
}

extern "C" ncclResult_t ncclEpGroupGetBuffers(ncclEpGroup_t g, ncclEpBuffers_t* b) {
  if (!g || !b) return fail(ncclInvalidArgument, "ncclEpGroupGetBuffers: NULL argument");
  if (g->cfg.lowLatency())
    return fail(ncclInvalidUsage, "ncclEpGroupGetBuffers: a low-latency group has no high-throughput buffers "
                                  "(see ncclEpLowLatencyGetCombineBuffer)");
  char* base = g->buffer();
  b->recvX = base + g->wl.recvX;
  b->recvScales = g->cfg.fp8Dispatch ? reinterpret_cast<float*>(base + g->wl.recvScales) : nullptr;
  b->recvTopkIdx = reinterpret_cast<int32_t*>(base + g->wl.recvIdx);
  b->recvTopkWeights = reinterpret_cast<float*>(base + g->wl.recvWeights);
  b->recvSrcInfo = reinterpret_cast<int32_t*>(base + g->wl.recvInfo);
  b->combineX = base + g->wl.combineX;
  b->rows = int(g->wl.rows);
  return ncclSuccess;
}
