#include "link.h"

#include <cstring>
#include <string>

#include "core/async_error.h"
#include "core/errors.h"
#include "devcomm.h"
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
  return {};
}

void linkClose(WindowLink* l) {
  if (l->devComm) devCommDestroy(l->comm, l->devComm);
  if (l->window) ncclCommWindowDeregister(l->comm, l->window);
  if (l->buffer) ncclMemFree(l->buffer);
  if (l->ginPosted) cudaFree(l->ginPosted);
  if (l->error) cudaFreeHost(l->error);
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

ncclResult_t linkOpen(const LinkRequest& req, WindowLink* l) {
  const std::string who = req.who;
  const bool network = l->network();
  // Network links carry their drain signals on puts to a pad after the user's bytes (linkDrain).
  l->drainPad = network ? dev::alignUp(req.bytes, dev::kLinkPadBytes) : 0;
  l->bytes = network ? dev::alignUp(l->drainPad + dev::kLinkPadBytes, dev::kWindowTotalAlign) : req.bytes;
  l->timeoutMs = req.timeoutMs;
  auto cleanup = [&](ncclResult_t r, const std::string& msg) {
    linkClose(l);
    return fail(r, who + ": " + msg);
  };
  ncclResult_t r = ncclMemAlloc(&l->buffer, l->bytes);
  if (r != ncclSuccess) return cleanup(r, "ncclMemAlloc of " + std::to_string(l->bytes) + " bytes failed");
  cudaError_t ce;
  // Flags must be zero before any peer can write: the collective registration comes after.
  if ((ce = cudaMemset(l->buffer, 0, req.zeroedPrefix)) != cudaSuccess || (ce = cudaDeviceSynchronize()) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "clearing the window", ce));
  if ((r = ncclCommWindowRegister(l->comm, l->buffer, l->bytes, &l->window, NCCL_WIN_DEFAULT)) != ncclSuccess ||
      l->window == nullptr)
    return cleanup(r != ncclSuccess ? r : ncclInvalidUsage,
                   "ncclCommWindowRegister failed or gave no window: the communicator has no symmetric-memory support "
                   "(needs CUDA P2P between all ranks, cuMem, NCCL_WIN_ENABLE=1)");
  // The drain counts its puts on counter 0 (its one CTA).
  l->ginCounters = network ? (req.ginCounters > 1 ? req.ginCounters : 1) : 0;
  l->drainSignal = uint32_t(req.ginSignals);
  l->ginSignals = network ? req.ginSignals + l->nRanks : 0;
  if ((r = devCommCreate(l->comm, l->ginSignals, l->ginCounters, &l->devComm, &l->ginContexts)) !=
      ncclSuccess) {
    l->devComm = nullptr;
    return cleanup(r, network ? "ncclDevCommCreate with GIN failed: the ranks span " +
                                    std::to_string(l->nRanks / l->lsaSize) +
                                    " NVLink domains and peers outside this rank's domain need GIN (NCCL's InfiniBand "
                                    "GIN, or NCCL_NET_PLUGIN=epx on one host); see NCCL_DEBUG=INFO"
                              : "ncclDevCommCreate failed");
  }
  if (std::string e = devCommAbiCheck(l->devComm); !e.empty()) return cleanup(ncclInvalidUsage, e);
  if (network && l->ginContexts < 1) return cleanup(ncclInvalidUsage, "the device communicator has no GIN context");
  const size_t posted = sizeof(uint64_t) * size_t(l->ginContexts * l->ginCounters > 0 ? l->ginContexts * l->ginCounters : 1);
  if ((ce = cudaMalloc(&l->ginPosted, posted)) != cudaSuccess || (ce = cudaMemset(l->ginPosted, 0, posted)) != cudaSuccess ||
      (ce = cudaHostAlloc(&l->error, sizeof(dev::AsyncError), cudaHostAllocMapped)) != cudaSuccess ||
      (ce = cudaHostGetDevicePointer(reinterpret_cast<void**>(&l->errorDev), l->error, 0)) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "device state", ce));
  std::memset(l->error, 0, sizeof(*l->error));
  // GIN signal and counter ids come from NCCL's pools and may hold a destroyed object's values.
  if ((ce = dev::launchResetGinSignals(linkArgs(*l, 0), nullptr)) != cudaSuccess ||
      (ce = cudaDeviceSynchronize()) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, cudaMsg(req.who, "resetting GIN signals", ce));
  if ((r = linkBarrier(l->comm)) != ncclSuccess) return cleanup(r, "closing barrier (ncclAllReduce) failed");
  return ncclSuccess;
}

dev::LinkArgs linkArgs(const WindowLink& l, uint64_t flagsOffset) {
  dev::LinkArgs c{};
  c.window = l.window;
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

}  // namespace epx
