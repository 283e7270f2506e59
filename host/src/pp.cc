// ncclEpPpChannel: a window link (link.h) with the PP slot layout, per-pair message counts in
// device memory, and the send / recv launches (device/src/pp.cu).
#include "epx/pp.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/async_error.h"
#include "core/coll_config.h"
#include "core/config.h"
#include "core/errors.h"
#include "epx/device/coll_launch.h"
#include "epx/window.h"
#include "link.h"
#include "window.h"

using epx::fail;

struct ncclEpPpChannel {
  epx::WindowLink link;
  epx::PpConfig cfg;
  epx::dev::PpLayout pl{};
  uint32_t* stateWords = nullptr;  // device [kPpStateWordsPerRank][nRanks]
  epx::dev::PpArgs args(int peer) const {
    epx::dev::PpArgs a{};
    a.link = epx::linkArgs(link, pl.flags);
    a.pl = pl;
    const int n = link.nRanks;
    a.st = epx::dev::PpState{stateWords, stateWords + n, stateWords + 2 * n, stateWords + 3 * n, stateWords + 4 * n,
                             stateWords + 5 * n};
    a.peer = peer;
    a.chunkBytes = cfg.chunkBytes;
    return a;
  }
};

namespace {

static_assert(epx::kUnsetInt == NCCL_EP_UNDEF_INT, "core/coll_config.h: kUnsetInt is the public NCCL_EP_UNDEF_INT");

// The public config, checked (header) and translated into core's request, then normalized.
std::string normalizeConfig(const ncclEpPpConfig_t* in, epx::PpConfig* out) {
  if (std::string e = epx::checkConfigHeader("config", in != nullptr, in ? in->size : 0, sizeof(ncclEpPpConfig_t),
                                             in ? in->magic : 0, NCCL_EP_PP_CONFIG_MAGIC);
      !e.empty())
    return e;
  epx::PpConfigRequest req;
  req.maxMessageBytes = in->maxMessageBytes;
  req.slots = in->slots;
  req.numCtas = in->numCtas;
  req.timeoutMs = in->timeoutMs;
  req.chunkBytes = in->chunkBytes;
  return epx::normalizePpConfig(req, out);
}

void release(ncclEpPpChannel* ch) {
  epx::linkClose(&ch->link);
  if (ch->stateWords) cudaFree(ch->stateWords);
  delete ch;
}

// A channel whose device wait timed out refuses new work.
ncclResult_t checkUsable(const ncclEpPpChannel* ch, const char* who) {
  return epx::linkCheckUsable(ch->link, who, "channel", "ncclEpPpGetAsyncError");
}

// What a channel takes of its communicator's window (linkOpen).
epx::LinkRequest ppRequest(const epx::dev::PpLayout& pl, const epx::PpConfig& cfg, int nRanks) {
  epx::LinkRequest req;
  req.bytes = pl.totalBytes;
  req.zeroedPrefix = pl.slots;  // the flags
  req.ginSignals = epx::dev::kPpFlagKinds * nRanks;
  req.ginCounters = epx::dev::ppGinCounterCount(cfg.numCtas);
  req.timeoutMs = cfg.timeoutMs;
  req.who = "ncclEpPpChannelCreate";
  return req;
}

}  // namespace

extern "C" ncclResult_t ncclEpWindowPlanAddPpChannel(ncclComm_t comm, const ncclEpPpConfig_t* config,
                                                     ncclEpWindowPlan_t* plan) {
  constexpr const char* kWho = "ncclEpWindowPlanAddPpChannel";
  epx::WindowLink l;
  if (ncclResult_t r = epx::planQuery(comm, plan, kWho, &l); r != ncclSuccess) return r;
  epx::PpConfig cfg;
  if (std::string e = normalizeConfig(config, &cfg); !e.empty()) return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  epx::addToPlan(epx::linkNeed(ppRequest(epx::ppLayout(cfg, l.nRanks, l.lsaSize), cfg, l.nRanks), l), plan);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpPpGetBufferSizeHint(const ncclEpPpConfig_t* config, int nRanks, size_t* bytes) {
  if (!bytes) return fail(ncclInvalidArgument, "ncclEpPpGetBufferSizeHint: bytes is NULL");
  if (nRanks < 1) return fail(ncclInvalidArgument, "ncclEpPpGetBufferSizeHint: nRanks must be >= 1");
  epx::PpConfig cfg;
  if (std::string e = normalizeConfig(config, &cfg); !e.empty())
    return fail(ncclInvalidArgument, "ncclEpPpGetBufferSizeHint: " + e);
  *bytes = epx::ppLayout(cfg, nRanks, nRanks > 1 ? 1 : nRanks).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpPpChannelCreate(ncclComm_t comm, const ncclEpPpConfig_t* config, ncclEpPpChannel_t* out) {
  constexpr const char* kWho = "ncclEpPpChannelCreate";
  if (!out) return fail(ncclInvalidArgument, std::string(kWho) + ": channel is NULL");
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, std::string(kWho) + ": comm is NULL");
  auto* ch = new ncclEpPpChannel;
  if (ncclResult_t r = epx::linkStart(comm, kWho, &ch->link); r != ncclSuccess) {
    delete ch;
    return r;
  }
  if (std::string e = normalizeConfig(config, &ch->cfg); !e.empty()) {
    delete ch;
    return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  }
  const epx::PpAgreed mine{EPX_VERSION_CODE, ch->cfg.slots, ch->cfg.numCtas, ch->cfg.timeoutMs, ch->cfg.maxBytes,
                           ch->cfg.chunkBytes};
  if (ncclResult_t r = epx::linkAgree(ch->link, mine, epx::checkPpAgreement, kWho); r != ncclSuccess) {
    delete ch;
    return r;
  }
  ch->pl = epx::ppLayout(ch->cfg, ch->link.nRanks, ch->link.lsaSize);
  const epx::LinkRequest req = ppRequest(ch->pl, ch->cfg, ch->link.nRanks);
  const size_t stateBytes = sizeof(uint32_t) * epx::dev::kPpStateWordsPerRank * ch->link.nRanks;
  cudaError_t ce = epx::dev::preloadPpKernels();
  if (ce == cudaSuccess) ce = cudaMalloc(&ch->stateWords, stateBytes);
  if (ce == cudaSuccess) ce = cudaMemset(ch->stateWords, 0, stateBytes);
  if (ce != cudaSuccess) {
    release(ch);
    return fail(ncclUnhandledCudaError, std::string(kWho) + ": device state: " + cudaGetErrorString(ce));
  }
  if (ncclResult_t r = epx::linkOpen(req, &ch->link); r != ncclSuccess) {  // collective; releases the link on failure
    release(ch);
    return r;
  }
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr, "epx: rank %d/%d PP channel: max %zu B, %d slots, %d CTAs, chunk %zu B, window %zu B, GIN contexts %d\n",
                 ch->link.rank, ch->link.nRanks, size_t(ch->cfg.maxBytes), ch->cfg.slots, ch->cfg.numCtas,
                 size_t(ch->cfg.chunkBytes),
                 size_t(ch->pl.totalBytes), ch->link.ginContexts);
  *out = ch;
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpPpChannelDestroy(ncclEpPpChannel_t ch) {
  if (!ch) return ncclSuccess;
  cudaSetDevice(ch->link.cudaDev);
  // Sends return once their GIN puts are posted: wait until the last ones left the stage.
  const cudaError_t flush = ch->link.network() ? epx::dev::launchPpFlush(ch->args(0), nullptr) : cudaSuccess;
  const ncclResult_t r = epx::linkQuiesce(&ch->link, "ncclEpPpChannelDestroy", flush);
  release(ch);
  return r;
}

extern "C" ncclResult_t ncclEpPpSend(ncclEpPpChannel_t ch, const void* buf, size_t bytes, int peer, cudaStream_t stream) {
  if (!ch) return fail(ncclInvalidArgument, "ncclEpPpSend: channel is NULL");
  if (std::string e = epx::checkPpSend(ch->cfg, ch->link.nRanks, buf, bytes, peer); !e.empty())
    return fail(ncclInvalidArgument, "ncclEpPpSend: " + e);
  if (ncclResult_t r = checkUsable(ch, "ncclEpPpSend"); r != ncclSuccess) return r;
  epx::dev::PpArgs a = ch->args(peer);
  a.src = static_cast<const char*>(buf);
  a.bytes = bytes;
  if (cudaError_t ce = epx::dev::launchPpSend(a, ch->cfg.numCtas, stream); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string("ncclEpPpSend: launch: ") + cudaGetErrorString(ce));
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpPpRecv(ncclEpPpChannel_t ch, void* buf, size_t capacity, int peer, size_t* recvBytes,
                                     cudaStream_t stream) {
  if (!ch) return fail(ncclInvalidArgument, "ncclEpPpRecv: channel is NULL");
  if (std::string e = epx::checkPpRecv(ch->cfg, ch->link.nRanks, buf, capacity, peer, recvBytes); !e.empty())
    return fail(ncclInvalidArgument, "ncclEpPpRecv: " + e);
  if (ncclResult_t r = checkUsable(ch, "ncclEpPpRecv"); r != ncclSuccess) return r;
  epx::dev::PpArgs a = ch->args(peer);
  a.dst = static_cast<char*>(buf);
  a.bytes = capacity;
  static_assert(sizeof(size_t) == sizeof(uint64_t));
  a.recvBytes = reinterpret_cast<uint64_t*>(recvBytes);
  if (cudaError_t ce = epx::dev::launchPpRecv(a, ch->cfg.numCtas, stream); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string("ncclEpPpRecv: launch: ") + cudaGetErrorString(ce));
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpPpGetAsyncError(ncclEpPpChannel_t ch, ncclResult_t* asyncError, char* msg, size_t msgLen) {
  return epx::linkGetAsyncError(ch ? &ch->link : nullptr, asyncError, msg, msgLen, "ncclEpPpGetAsyncError");
}
