#include "link.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/async_error.h"
#include "core/errors.h"
#include "core/nccl_version.h"
#include "devcomm.h"
#include "window.h"
#include "epx/device/launch.h"
#include "epx/device/window_layout.h"

namespace epx {

namespace {

std::string cudaMsg(const char* who, const char* what, cudaError_t e) {
  return std::string(who) + ": " + what + ": " + cudaGetErrorString(e);
}

// Nonblocking communicators may answer ncclInProgress: wait until the call is enqueued.
ncclResult_t settle(ncclComm_t comm, ncclResult_t r) {
  while (r == ncclInProgress) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t q = ncclCommGetAsyncError(comm, &state); q != ncclSuccess) return q;
    r = state;
  }
  return r;
}

}  // namespace

ncclResult_t linkBarrier(ncclComm_t comm) {
  int* word = nullptr;
  cudaStream_t s = nullptr;
  cudaError_t ce = cudaMalloc(&word, sizeof(int));
  if (ce == cudaSuccess) ce = cudaMemset(word, 0, sizeof(int));
  if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  ncclResult_t r =
      ce == cudaSuccess ? settle(comm, ncclAllReduce(word, word, 1, ncclInt32, ncclSum, comm, s)) : ncclUnhandledCudaError;
  if (r == ncclSuccess && cudaStreamSynchronize(s) != cudaSuccess) r = ncclUnhandledCudaError;
  if (s) cudaStreamDestroy(s);
  if (word) cudaFree(word);
  return r;
}

ncclResult_t linkGather(ncclComm_t comm, int rank, int nRanks, const void* mine, size_t bytes, void* all,
                        const char* who) {
  if (nRanks == 1) {
    std::memcpy(all, mine, bytes);
    return ncclSuccess;
  }
  auto cudaFailed = [&](const char* what, cudaError_t e) {
    return fail(ncclUnhandledCudaError, std::string(who) + ": exchanging setup records between ranks: " + what +
                                            ": " + cudaGetErrorString(e));
  };
  cudaStream_t stream = nullptr;
  char* dev = nullptr;
  cudaError_t ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (ce != cudaSuccess) return cudaFailed("cudaStreamCreateWithFlags", ce);
  ncclResult_t result = ncclSuccess;
  const char* what = nullptr;
  if ((ce = cudaMalloc(&dev, bytes * nRanks)) != cudaSuccess) {
    what = "cudaMalloc";
  } else if ((ce = cudaMemcpyAsync(dev + bytes * rank, mine, bytes, cudaMemcpyHostToDevice, stream)) != cudaSuccess) {
    what = "cudaMemcpyAsync";
  } else if ((result = settle(comm, ncclAllGather(dev + bytes * rank, dev, bytes, ncclUint8, comm, stream))) !=
             ncclSuccess) {
    fail(result, std::string(who) + ": ncclAllGather of the setup records failed: " + ncclGetErrorString(result));
  } else if ((ce = cudaMemcpyAsync(all, dev, bytes * nRanks, cudaMemcpyDeviceToHost, stream)) != cudaSuccess ||
             (ce = cudaStreamSynchronize(stream)) != cudaSuccess) {
    what = "copying the records back";
  }
  if (what) result = cudaFailed(what, ce);
  if (dev) cudaFree(dev);
  cudaStreamDestroy(stream);
  return result;
}

ncclResult_t linkStart(ncclComm_t comm, const char* who, WindowLink* l) {
  int runtime = 0;
  if (ncclGetVersion(&runtime) != ncclSuccess) return fail(ncclSystemError, std::string(who) + ": ncclGetVersion failed");
  if (std::string v = checkNcclVersion(runtime, NCCL_VERSION_CODE); !v.empty())
    return fail(ncclInvalidUsage, std::string(who) + ": " + v);
  if (std::string e = linkQuery(comm, l); !e.empty()) return fail(ncclInternalError, std::string(who) + ": " + e);
  return ncclSuccess;
}

std::string linkQuery(ncclComm_t comm, WindowLink* l) {
  l->comm = comm;
  if (ncclCommCount(comm, &l->nRanks) != ncclSuccess || ncclCommUserRank(comm, &l->rank) != ncclSuccess ||
      ncclCommCuDevice(comm, &l->cudaDev) != ncclSuccess)
    return "cannot query the communicator";
  const LsaTeam lsa = lsaTeam(comm);
  l->lsaSize = lsa.size;
  l->lsaRank = lsa.rank;
  if (l->lsaSize < 1 || l->nRanks % l->lsaSize != 0 || l->lsaRank < 0 || l->lsaRank >= l->lsaSize)
    return "NCCL reports an LSA team of " + std::to_string(l->lsaSize) + " for " + std::to_string(l->nRanks) + " ranks";
  if (cudaError_t ce = cudaSetDevice(l->cudaDev); ce != cudaSuccess)
    return std::string("cudaSetDevice: ") + cudaGetErrorString(ce);
  if (cudaError_t ce = cudaDeviceGetAttribute(&l->clockKhz, cudaDevAttrClockRate, l->cudaDev); ce != cudaSuccess)
    return std::string("cudaDeviceGetAttribute(cudaDevAttrClockRate): ") + cudaGetErrorString(ce);
  return {};
}

void linkClose(WindowLink* l) {
  if (CommWindow* w = l->home) {
    w->regions.give(l->region, l->bytes);
    w->signals.give(l->firstSignal, uint64_t(l->ginSignals));
    w->counters.give(l->firstCounter, uint64_t(l->ginCounters));
    if (--w->objects == 0 && !w->planned) windowClose(w);
  }
  if (l->ginPosted) cudaFree(l->ginPosted);
  if (l->error) cudaFreeHost(l->error);
  l->home = nullptr;
  l->devComm = nullptr;
  l->window = nullptr;
  l->buffer = nullptr;
  l->ginPosted = nullptr;
  l->error = l->errorDev = nullptr;
}

namespace {

// The drain of linkQuiesce (see link.h).
ncclResult_t linkDrain(WindowLink* l, const char* who) {
  if (!l->network() || l->ginContexts == 0 || l->error == nullptr) return ncclSuccess;
  const bool quiet = groupBroken(linkErrorSnapshot(*l));
  cudaError_t ce = dev::launchDrainGin(linkArgs(*l, 0), l->drainSignal, l->drainPad, quiet, nullptr);
  if (ce == cudaSuccess) ce = cudaDeviceSynchronize();
  if (ce != cudaSuccess) return fail(ncclUnhandledCudaError, cudaMsg(who, "draining GIN signals", ce));
  if (quiet || !groupBroken(linkErrorSnapshot(*l))) return ncclSuccess;
  std::string text;
  const ncclResult_t r = linkAsyncError(*l, &text);  // the drain's timeout, naming the peer
  return fail(r, std::string(who) + ": " + text);
}

}  // namespace

ncclResult_t linkQuiesce(WindowLink* l, const char* who, cudaError_t pending) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (pending == cudaSuccess) pending = synced;
  if (pending != cudaSuccess) return fail(ncclUnhandledCudaError, cudaMsg(who, "pending work failed", pending));
  return linkDrain(l, who);
}

WindowNeed linkNeed(const LinkRequest& req, const WindowLink& l) {
  return regionNeed(req.bytes, req.ginSignals, req.ginCounters, l.nRanks, l.network());
}

namespace {

// What every rank took of the window: compared at the end of linkOpen (the regions are symmetric).
struct RegionRecord {
  uint64_t region, bytes;
  uint32_t firstSignal, firstCounter;
  int window;  // index among the communicator's windows
  int pad;
};

}  // namespace

ncclResult_t linkOpen(const LinkRequest& req, WindowLink* l) {
  const std::string who = req.who;
  const bool network = l->network();
  const WindowNeed need = linkNeed(req, *l);
  l->timeoutMs = req.timeoutMs;
  auto cleanup = [&](ncclResult_t r, const std::string& msg) {
    linkClose(l);
    return fail(r, who + ": " + msg);
  };
  // The communicator's first window with room, else (no plan) one of its own.
  const std::vector<CommWindow*> windows = windowsOf(l->comm);
  CommWindow* w = nullptr;
  int index = 0;
  for (; index < int(windows.size()) && !w; ++index)
    if (windows[size_t(index)]->fits(need)) w = windows[size_t(index)];
  if (w) {
    --index;
  } else if (!windows.empty() && windows.front()->planned) {
    return fail(ncclInvalidUsage, who + ": the communicator's planned epx window (ncclEpWindowCreate) has no room for "
                                        "this object: it needs " + describeNeed(need) + "; the window has " +
                                        windows.front()->freeText() +
                                        ". Add every object of the communicator to the plan (ncclEpWindowPlanAdd*, "
                                        "epx/window.h)");
  } else if (ncclResult_t r = windowOpen(l->comm, network, l->nRanks, l->lsaSize, need, false, req.who, &w);
             r != ncclSuccess) {
    return r;  // the reason is recorded
  }
  const std::optional<uint64_t> region = w->regions.take(need.bytes, kRegionAlign);
  const std::optional<uint64_t> firstSignal = w->signals.take(uint64_t(need.ginSignals));
  const std::optional<uint64_t> firstCounter = w->counters.take(uint64_t(need.ginCounters));
  // fits() said so; a failure here is a bug of the allocator.
  if (!region || !firstSignal || !firstCounter) {
    if (region) w->regions.give(*region, need.bytes);
    if (firstSignal) w->signals.give(*firstSignal, uint64_t(need.ginSignals));
    if (firstCounter) w->counters.give(*firstCounter, uint64_t(need.ginCounters));
    if (w->objects == 0 && !w->planned) windowClose(w);
    return fail(ncclInternalError, who + ": the epx window said it had room and had none");
  }
  ++w->objects;
  l->home = w;
  l->region = *region;
  l->bytes = need.bytes;
  l->firstSignal = uint32_t(*firstSignal);
  l->firstCounter = uint32_t(*firstCounter);
  l->ginSignals = need.ginSignals;
  l->ginCounters = need.ginCounters;
  l->ginContexts = network ? w->ginContexts : 0;
  // Network links carry their drain signals on puts to a pad after the user's bytes (linkDrain).
  l->drainPad = network ? drainPadOffset(req.bytes) : 0;
  l->drainSignal = uint32_t(req.ginSignals);
  l->buffer = static_cast<char*>(w->buffer) + l->region;
  l->window = w->window;
  l->devComm = w->devComm;
  // Flags must be zero before any peer can write: the closing gather comes after. (A region given
  // back by an earlier object: that object's destroy waited for its peers' work and drain.)
  cudaError_t ce;
  if ((ce = cudaMemset(l->buffer, 0, req.zeroedPrefix)) != cudaSuccess || (ce = cudaDeviceSynchronize()) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "clearing the window region", ce));
  const size_t posted = sizeof(uint64_t) * size_t(l->ginContexts * l->ginCounters > 0 ? l->ginContexts * l->ginCounters : 1);
  if ((ce = cudaMalloc(&l->ginPosted, posted)) != cudaSuccess || (ce = cudaMemset(l->ginPosted, 0, posted)) != cudaSuccess ||
      (ce = cudaHostAlloc(&l->error, sizeof(dev::AsyncError), cudaHostAllocMapped)) != cudaSuccess ||
      (ce = cudaHostGetDevicePointer(reinterpret_cast<void**>(&l->errorDev), l->error, 0)) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "device state", ce));
  std::memset(l->error, 0, sizeof(*l->error));
  // GIN signals and counters may hold an earlier object's (or device communicator's) values.
  if ((ce = dev::launchResetGinSignals(linkArgs(*l, 0), nullptr)) != cudaSuccess ||
      (ce = cudaDeviceSynchronize()) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "resetting GIN signals", ce));
  // Every rank took the same region (collective; also the closing barrier: no rank returns before
  // every rank has zeroed its region, signals and counters).
  const RegionRecord mine{l->region, l->bytes, l->firstSignal, l->firstCounter, index, 0};
  std::vector<RegionRecord> all(size_t(l->nRanks), mine);
  if (ncclResult_t r = linkGather(l->comm, l->rank, l->nRanks, &mine, sizeof(mine), all.data(), req.who);
      r != ncclSuccess) {
    const std::string why = lastError();
    return cleanup(r, why);
  }
  for (int q = 0; q < l->nRanks; ++q) {
    const RegionRecord& o = all[size_t(q)];
    if (o.region != mine.region || o.bytes != mine.bytes || o.firstSignal != mine.firstSignal ||
        o.firstCounter != mine.firstCounter || o.window != mine.window)
      return cleanup(ncclInvalidUsage,
                     "rank " + std::to_string(q) + " took another region of the communicator's epx window (window " +
                         std::to_string(o.window) + ", offset " + std::to_string(o.region) + ", signals from " +
                         std::to_string(o.firstSignal) + ") than rank " + std::to_string(l->rank) + " (window " +
                         std::to_string(mine.window) + ", offset " + std::to_string(mine.region) + ", signals from " +
                         std::to_string(mine.firstSignal) +
                         "): every rank must create and destroy the communicator's epx objects in the same order");
  }
  return ncclSuccess;
}

dev::LinkArgs linkArgs(const WindowLink& l, uint64_t flagsOffset) {
  dev::LinkArgs c{};
  c.window = l.window;
  c.region = l.region;
  c.firstSignal = l.firstSignal;
  c.firstCounter = l.firstCounter;
  c.flags = flagsOffset;
  c.rank = l.rank;
  c.nRanks = l.nRanks;
  c.lsaRank = l.lsaRank;
  c.lsaSize = l.lsaSize;
  c.ginContexts = l.ginContexts;
  if (l.devComm) devCommCopy(l.devComm, c.devComm);
  c.ginPosted = l.ginPosted;
  c.ginCounters = l.ginCounters;
  c.ginSignals = l.ginSignals;
  c.error = l.errorDev;
  c.timeoutNs = 1000000LL * l.timeoutMs;
  c.timeoutCycles = uint64_t(l.timeoutMs) * uint64_t(l.clockKhz > 0 ? l.clockKhz : 0);  // ms x kHz
  return c;
}

dev::AsyncError linkErrorSnapshot(const WindowLink& l) {
  dev::AsyncError snap;
  std::memcpy(&snap, const_cast<const dev::AsyncError*>(l.error), sizeof(snap));  // mapped memory
  return snap;
}

ncclResult_t linkAsyncError(const WindowLink& l, std::string* text) {
  return describeAsyncError(linkErrorSnapshot(l), l.timeoutMs, text);
}

ncclResult_t linkGetAsyncError(const WindowLink* l, ncclResult_t* asyncError, char* msg, size_t msgLen, const char* who) {
  if (!l || !asyncError) return fail(ncclInvalidArgument, std::string(who) + ": NULL argument");
  std::string text;
  *asyncError = linkAsyncError(*l, &text);
  if (msg && msgLen) std::snprintf(msg, msgLen, "%s", text.c_str());
  return ncclSuccess;
}

ncclResult_t linkCheckUsable(const WindowLink& l, const char* who, const char* what, const char* getter) {
  if (groupBroken(linkErrorSnapshot(l)))
    return fail(ncclRemoteError,
                std::string(who) + ": the " + what + " had a device-side timeout (" + getter + "); destroy it");
  return ncclSuccess;
}

cudaError_t SessionState::alloc(int nRanks) {
  const size_t arrivedBytes = sizeof(uint32_t) * dev::kNumArrivedKinds * size_t(nRanks);
  cudaError_t ce;
  if ((ce = cudaMalloc(&state, sizeof(dev::GroupState))) != cudaSuccess ||
      (ce = cudaMemset(state, 0, sizeof(dev::GroupState))) != cudaSuccess ||
      (ce = cudaMalloc(&arrived, arrivedBytes)) != cudaSuccess || (ce = cudaMemset(arrived, 0, arrivedBytes)) != cudaSuccess)
    return ce;
  return cudaSuccess;
}

void SessionState::release() {
  if (state) cudaFree(state);
  if (arrived) cudaFree(arrived);
  state = nullptr;
  arrived = nullptr;
}

}  // namespace epx
