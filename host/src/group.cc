// ncclEpGroup lifecycle: config checks, NCCL version check, window allocation/registration,
// device communicator, per-group device state and the async error record.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agree.h"
#include "core/config.h"
#include "core/errors.h"
#include "internal.h"

using epx::fail;

namespace {

std::string cudaMsg(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }

double nvlinkGBps() {
  // Per-direction NVLink bandwidth used by the analytic SM count: EPX_NVLINK_GBPS, else an
  // NVLink4 SXM part (18 links x 26.5625 GB/s x 0.9 achievable, as in DeepEP V2's sizing).
  if (const char* v = std::getenv("EPX_NVLINK_GBPS")) {
    char* end = nullptr;
    const double g = std::strtod(v, &end);
    if (end != v && *end == '\0' && g > 0) return g;
    std::fprintf(stderr, "epx: ignoring EPX_NVLINK_GBPS=\"%s\" (not a positive number of GB/s)\n", v);
  }
  return 18 * 26.5625 * 0.9;
}

void releaseGroup(ncclEpGroup* g) {
  if (g->devComm) epx::devCommDestroy(g->comm, g->devComm);
  if (g->window) ncclCommWindowDeregister(g->comm, g->window);
  if (g->buffer) ncclMemFree(g->buffer);
  if (g->state) cudaFree(g->state);
  if (g->error) cudaFreeHost(g->error);
  delete g;
}

}  // namespace

epx::dev::Common ncclEpGroup::common() const {
  epx::dev::Common c{};
  c.window = window;
  c.wl = wl;
  c.rank = rank;
  c.nRanks = nRanks;
  c.maxTokens = cfg.maxTokensPerRank;
  c.hidden = cfg.hidden;
  c.topk = cfg.topk;
  c.numExperts = cfg.numExperts;
  c.localExperts = cfg.localExperts(nRanks);
  c.state = state;
  c.error = errorDev;
  c.timeoutNs = 1000000LL * cfg.timeoutMs;
  return c;
}

extern "C" ncclResult_t ncclEpGetBufferSizeHint(const ncclEpConfig_t* config, int nRanks, size_t* bytes) {
  if (!bytes) return fail(ncclInvalidArgument, "ncclEpGetBufferSizeHint: bytes is NULL");
  epx::GroupConfig cfg;
  std::string err = epx::normalizeConfig(config, nRanks, &cfg);
  if (!err.empty()) return fail(ncclInvalidArgument, "ncclEpGetBufferSizeHint: " + err);
  *bytes = epx::computeWindowLayout(cfg, nRanks).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupCreate(ncclComm_t comm, const ncclEpConfig_t* config, ncclEpGroup_t* out) {
  if (!out) return fail(ncclInvalidArgument, "ncclEpGroupCreate: group is NULL");
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, "ncclEpGroupCreate: comm is NULL");
  int runtime = 0;
  if (ncclGetVersion(&runtime) != ncclSuccess) return fail(ncclSystemError, "ncclEpGroupCreate: ncclGetVersion failed");
  if (std::string v = epx::checkNcclVersion(runtime, NCCL_VERSION_CODE); !v.empty())
    return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + v);
  auto* g = new ncclEpGroup;
  g->comm = comm;
  ncclResult_t r;
  if ((r = ncclCommCount(comm, &g->nRanks)) != ncclSuccess || (r = ncclCommUserRank(comm, &g->rank)) != ncclSuccess ||
      (r = ncclCommCuDevice(comm, &g->cudaDev)) != ncclSuccess) {
    delete g;
    return fail(r, "ncclEpGroupCreate: cannot query the communicator");
  }
  if (config && config->magic == NCCL_EP_CONFIG_MAGIC && config->algorithm == ncclEpAlgoLowLatency) {
    delete g;
    return fail(ncclInvalidUsage, "ncclEpGroupCreate: algorithm ncclEpAlgoLowLatency is not implemented in this "
                                  "release (use ncclEpAlgoAuto or ncclEpAlgoHighThroughput)");
  }
  std::string err = epx::normalizeConfig(config, g->nRanks, &g->cfg);
  if (!err.empty()) {
    delete g;
    return fail(ncclInvalidArgument, "ncclEpGroupCreate: " + err);
  }
  const int lsa = epx::lsaTeamSize(comm);
  if (lsa != g->nRanks) {
    int n = g->nRanks;
    delete g;
    return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + std::to_string(n) + " ranks but only " + std::to_string(lsa) +
                                      " share an NVLink (LSA) domain; this release needs every rank of the "
                                      "communicator in one NVLink domain (scale-out over GIN is not implemented yet)");
  }
  cudaError_t ce = cudaSetDevice(g->cudaDev);
  if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&g->numSMs, cudaDevAttrMultiProcessorCount, g->cudaDev);
  if (ce != cudaSuccess) {
    delete g;
    return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupCreate: device query", ce));
  }
  g->nCtas = epx::resolveCtaCount(g->cfg, g->numSMs, g->nRanks, nvlinkGBps());
  if ((r = epx::agreeOnConfig(*g)) != ncclSuccess) {  // collective: all ranks fail alike (host/src/agree.cc)
    releaseGroup(g);
    return r;
  }
  g->wl = epx::computeWindowLayout(g->cfg, g->nRanks);

  if ((r = ncclMemAlloc(&g->buffer, g->wl.totalBytes)) != ncclSuccess) {
    releaseGroup(g);
    return fail(r, "ncclEpGroupCreate: ncclMemAlloc of " + std::to_string(g->wl.totalBytes) + " bytes failed");
  }
  // Flags and counts must be zero before any peer can write: the collective registration below
  // ends with a barrier, so clear them first.
  if ((ce = cudaMemset(g->buffer, 0, g->wl.recvX)) != cudaSuccess ||
      (ce = cudaDeviceSynchronize()) != cudaSuccess) {
    releaseGroup(g);
    return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupCreate: clearing the window", ce));
  }
  if ((r = ncclCommWindowRegister(comm, g->buffer, g->wl.totalBytes, &g->window, NCCL_WIN_DEFAULT)) != ncclSuccess ||
      g->window == nullptr) {
    releaseGroup(g);
    return fail(r != ncclSuccess ? r : ncclInvalidUsage,
                "ncclEpGroupCreate: ncclCommWindowRegister failed or gave no window: the communicator has "
                "no symmetric-memory support (needs CUDA P2P between all ranks, cuMem, NCCL_WIN_ENABLE=1)");
  }
  if ((r = epx::devCommCreate(comm, &g->devComm)) != ncclSuccess) {
    g->devComm = nullptr;
    releaseGroup(g);
    return fail(r, "ncclEpGroupCreate: ncclDevCommCreate failed");
  }
  if ((ce = cudaMalloc(&g->state, sizeof(epx::dev::GroupState))) != cudaSuccess ||
      (ce = cudaMemset(g->state, 0, sizeof(epx::dev::GroupState))) != cudaSuccess ||
      (ce = cudaHostAlloc(&g->error, sizeof(epx::dev::AsyncError), cudaHostAllocMapped)) != cudaSuccess ||
      (ce = cudaHostGetDevicePointer(reinterpret_cast<void**>(&g->errorDev), g->error, 0)) != cudaSuccess ||
      (ce = cudaDeviceSynchronize()) != cudaSuccess) {
    releaseGroup(g);
    return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupCreate: device state", ce));
  }
  std::memset(g->error, 0, sizeof(*g->error));
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr, "epx: rank %d/%d group: T<=%d H=%d K=%d E=%d fp8=%d CTAs=%d window=%zu B\n", g->rank,
                 g->nRanks, g->cfg.maxTokensPerRank, g->cfg.hidden, g->cfg.topk, g->cfg.numExperts,
                 int(g->cfg.fp8Dispatch), g->nCtas, size_t(g->wl.totalBytes));
  *out = g;
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupDestroy(ncclEpGroup_t g) {
  if (!g) return ncclSuccess;
  cudaSetDevice(g->cudaDev);
  cudaError_t ce = cudaDeviceSynchronize();
  releaseGroup(g);
  if (ce != cudaSuccess) return fail(ncclUnhandledCudaError, cudaMsg("ncclEpGroupDestroy: pending work failed", ce));
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupGetSmCount(ncclEpGroup_t g, int* sms) {
  if (!g || !sms) return fail(ncclInvalidArgument, "ncclEpGroupGetSmCount: NULL argument");
  *sms = g->nCtas;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupGetAsyncError(ncclEpGroup_t g, ncclResult_t* asyncError, char* msg, size_t msgLen) {
  if (!g || !asyncError) return fail(ncclInvalidArgument, "ncclEpGroupGetAsyncError: NULL argument");
  const volatile epx::dev::AsyncError* e = g->error;
  const int code = e->code;
  *asyncError = ncclResult_t(code);
  if (msg && msgLen) {
    static const char* phases[] = {"", "count exchange (ncclEpDispatchLayout)", "dispatch start",
                                   "dispatch data", "combine start", "combine data", "expert id check"};
    const int phase = e->phase >= 0 && e->phase <= 6 ? e->phase : 0;
    if (code == 0)
      std::snprintf(msg, msgLen, "no error");
    else if (phase == epx::dev::kPhaseBadExpertId)
      std::snprintf(msg, msgLen, "rank %d: token %lld has expert id %lld, out of range or repeated (slot dropped)",
                    e->rank, e->detail0, e->detail1);
    else
      std::snprintf(msg, msgLen,
                    "rank %d: timed out after %d ms in %s waiting for peer rank %d (peer never arrived); the "
                    "group must be destroyed",
                    e->rank, g->cfg.timeoutMs, phases[phase], e->peer);
  }
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpGroupGetBuffers(ncclEpGroup_t g, ncclEpBuffers_t* b) {
  if (!g || !b) return fail(ncclInvalidArgument, "ncclEpGroupGetBuffers: NULL argument");
  char* base = static_cast<char*>(g->buffer);
  b->recvX = base + g->wl.recvX;
  b->recvScales = g->cfg.fp8Dispatch ? reinterpret_cast<float*>(base + g->wl.recvScales) : nullptr;
  b->recvTopkIdx = reinterpret_cast<int32_t*>(base + g->wl.recvIdx);
  b->recvTopkWeights = reinterpret_cast<float*>(base + g->wl.recvWeights);
  b->recvSrcInfo = reinterpret_cast<int32_t*>(base + g->wl.recvInfo);
  b->combineX = base + g->wl.combineX;
  b->rows = int(g->wl.rows);
  return ncclSuccess;
}
