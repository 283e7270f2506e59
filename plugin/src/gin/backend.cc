#include "gin/backend.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "gin/backend_choice.h"
#include "rig/ipc_backend.h"
#include "net/verbs_wire.h"
#ifdef EPX_HAVE_VERBS
#include "gin/verbs_backend.h"
#endif

namespace epx::plugin::gin {

namespace {

constexpr uint32_t kCombinedMagic = 0x45504743;  // "EPGC"
constexpr uint32_t kOfferIpc = 1u << 0;
constexpr uint32_t kOfferVerbs = 1u << 1;
constexpr size_t kVerbsHandleBytes = sizeof(verbs::Handle);

// What listen writes into NCCL's 128-byte handle.
struct CombinedHandle {
  uint32_t magic;
  uint32_t offers;
  uint64_t hostHash;
  IpcHandleDigest ipc;
  alignas(8) unsigned char verbs[kVerbsHandleBytes];
};
static_assert(sizeof(CombinedHandle) <= NCCL_NET_HANDLE_MAXSIZE);

// What init hands NCCL: which backends this process offers. Kept for the life of the process
// (NCCL may finalize one twice, or never).
struct Instance {
  void* ipc = nullptr;  // ipcInit's instance
  bool ipcOk = false;
  bool verbsOk = false;
  std::atomic<int> nextContext{0};  // GIN contexts of the communicator, in listen order
};
std::mutex gInstancesMutex;
std::deque<std::unique_ptr<Instance>> gInstances;
std::atomic<bool> gVerbsOk{false};  // the latest init's: devices/getProperties are the verbs ports

struct ListenComm {
  void* ipc = nullptr;
  void* verbs = nullptr;
};

struct CollComm {
  GinBackend backend = GinBackend::Ipc;
  void* inner = nullptr;
};

}  // namespace

ncclResult_t ginInit(uint64_t commHash, ncclDebugLogger_t logger, void** instance) {
  *instance = nullptr;
  setLogger(logger);
  BackendWish wish = BackendWish::Auto;
  const std::string text = envString("EPX_GIN_BACKEND", "");
  if (!parseBackendWish(text, &wish)) {
    EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX: EPX_GIN_BACKEND=\"%s\" is not auto, ipc or verbs; GIN init refused",
             text.c_str());
    return ncclInvalidUsage;
  }
  auto made = std::make_unique<Instance>();
  ncclResult_t ipcResult = ncclSystemError;
  if (wish != BackendWish::Verbs) {
    ipcResult = ipcInit(commHash, logger, &made->ipc);
    if (ipcResult == ncclInvalidUsage) return ipcResult;  // a malformed EPX_GIN_EMU_* (WARNed)
    made->ipcOk = ipcResult == ncclSuccess;
  }
  std::string verbsWhy = "EPX_GIN_BACKEND=ipc";
#ifdef EPX_HAVE_VERBS
  if (wish != BackendWish::Ipc) made->verbsOk = verbsGinAvailable(&verbsWhy);
#else
  if (wish != BackendWish::Ipc) verbsWhy = "this plugin was built without libibverbs";
#endif
  if (wish == BackendWish::Ipc && !made->ipcOk) return ipcResult;
  if (wish == BackendWish::Verbs && !made->verbsOk) {
    EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX: EPX_GIN_BACKEND=verbs but %s", verbsWhy.c_str());
    return ncclSystemError;
  }
  if (!made->ipcOk && !made->verbsOk) {
    EPX_INFO(NCCL_INIT | NCCL_NET, "GIN/EPX disabled: no backend (ipc: no CUDA driver; verbs: %s)", verbsWhy.c_str());
    return ncclSystemError;
  }
  EPX_INFO(NCCL_INIT | NCCL_NET, "GIN/EPX: backends offered: %s%s%s", made->ipcOk ? "ipc" : "",
           made->ipcOk && made->verbsOk ? ", " : "", made->verbsOk ? "verbs" : "");
  gVerbsOk.store(made->verbsOk);
  std::lock_guard<std::mutex> lock(gInstancesMutex);
  *instance = made.get();
  gInstances.push_back(std::move(made));
  return ncclSuccess;
}

ncclResult_t ginDevices(int* count) {
#ifdef EPX_HAVE_VERBS
  if (gVerbsOk.load()) return verbsGinDevices(count);
#endif
  return ipcDevices(count);
}

ncclResult_t ginGetProperties(int dev, ncclNetProperties_v11_t* props) {
#ifdef EPX_HAVE_VERBS
  if (gVerbsOk.load()) {
    if (ncclResult_t r = verbsGinGetProperties(dev, props); r != ncclSuccess) return r;
    props->ptrSupport |= NCCL_PTR_HOST | NCCL_PTR_CUDA;  // ipc takes virtual addresses; verbs WARNs if it cannot
    return ncclSuccess;
  }
#endif
  return ipcGetProperties(dev, props);
}

ncclResult_t ginListen(void* instance, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  Instance* in = nullptr;
  {
    std::lock_guard<std::mutex> lock(gInstancesMutex);
    for (const auto& i : gInstances)
      if (i.get() == instance) in = i.get();
  }
  if (in == nullptr) {
    EPX_WARN(NCCL_NET, "GIN/EPX: listen with a context GIN init did not make");
    return ncclInternalError;
  }
  CombinedHandle h{};
  h.magic = kCombinedMagic;
  h.hostHash = ipcHostHash();
  auto* l = new ListenComm();
  const int context = in->nextContext++;
  unsigned char part[NCCL_NET_HANDLE_MAXSIZE];
  // A backend whose listen fails is not offered for this context (WARN); listen fails only when
  // no backend is left.
  ncclResult_t failed = ncclSuccess;
  if (in->ipcOk) {
    if (ncclResult_t r = ipcListen(in->ipc, dev, part, &l->ipc); r != ncclSuccess) {
      failed = r;
    } else if (!ipcDigestHandle(part, &h.ipc)) {
      EPX_WARN(NCCL_NET, "GIN/EPX: the ipc listener's handle has an unexpected form");
      ipcCloseListen(l->ipc);
      l->ipc = nullptr;
      failed = ncclInternalError;
    } else {
      h.offers |= kOfferIpc;
    }
  }
#ifdef EPX_HAVE_VERBS
  if (in->verbsOk) {
    if (ncclResult_t r = verbsGinListen(context, dev, part, &l->verbs); r != ncclSuccess) {
      failed = r;
    } else {
      std::memcpy(h.verbs, part, sizeof h.verbs);
      h.offers |= kOfferVerbs;
    }
  }
#else
  (void)context;
#endif
  if (h.offers == 0) {
    ginCloseListen(l);
    return failed != ncclSuccess ? failed : ncclInternalError;
  }
  if (failed != ncclSuccess)
    EPX_WARN(NCCL_NET, "GIN/EPX: context %d offers only the %s backend (the other one's listen failed)", context,
             (h.offers & kOfferIpc) ? "ipc" : "verbs");
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t ginConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm) {
  *collComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || nRanks < 1 || rank < 0 || rank >= nRanks) return ncclInternalError;
  std::vector<CombinedHandle> hs(static_cast<size_t>(nRanks));
  std::vector<BackendOffer> offers(static_cast<size_t>(nRanks));
  for (int j = 0; j < nRanks; ++j) {
    std::memcpy(&hs[static_cast<size_t>(j)], handles[j], sizeof(CombinedHandle));
    const CombinedHandle& h = hs[static_cast<size_t>(j)];
    if (h.magic != kCombinedMagic) {
      EPX_WARN(NCCL_NET, "GIN/EPX: rank %d's handle is not an epx GIN handle", j);
      return ncclInternalError;
    }
    offers[static_cast<size_t>(j)] = BackendOffer{(h.offers & kOfferIpc) != 0, (h.offers & kOfferVerbs) != 0, h.hostHash};
  }
  GinBackend backend = GinBackend::Ipc;
  if (std::string why = chooseBackend(offers, &backend); !why.empty()) {
    EPX_WARN(NCCL_NET, "GIN/EPX rank %d: %s", rank, why.c_str());
    return ncclInvalidUsage;
  }
  auto* c = new CollComm();
  c->backend = backend;
  ncclResult_t r = ncclInternalError;
  std::vector<std::vector<unsigned char>> parts(static_cast<size_t>(nRanks),
                                                std::vector<unsigned char>(NCCL_NET_HANDLE_MAXSIZE, 0));
  std::vector<void*> ptrs(static_cast<size_t>(nRanks));
  for (int j = 0; j < nRanks; ++j) {
    auto& part = parts[static_cast<size_t>(j)];
    if (backend == GinBackend::Ipc) ipcExpandHandle(hs[static_cast<size_t>(j)].ipc, part.data());
    else std::memcpy(part.data(), hs[static_cast<size_t>(j)].verbs, kVerbsHandleBytes);
    ptrs[static_cast<size_t>(j)] = part.data();
  }
  if (backend == GinBackend::Ipc) {
    r = ipcConnect(ptrs.data(), nRanks, rank, l->ipc, &c->inner);
  } else {
#ifdef EPX_HAVE_VERBS
    r = verbsGinConnect(ptrs.data(), nRanks, rank, l->verbs, &c->inner);
#endif
  }
  if (r != ncclSuccess) {
    delete c;
    return r;
  }
  EPX_INFO(NCCL_INIT | NCCL_NET, "GIN/EPX rank %d: %s backend for %d rank(s)", rank, backendName(backend), nRanks);
  *collComm = c;
  return ncclSuccess;
}

#ifdef EPX_HAVE_VERBS
#define EPX_GIN_CALL(c, ipcCall, verbsCall) return (c)->backend == GinBackend::Verbs ? verbsCall : ipcCall
#else
#define EPX_GIN_CALL(c, ipcCall, verbsCall) return ipcCall
#endif

ncclResult_t ginRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                         uint64_t mrFlags, void** mhandle, void** ginHandle) {
  auto* c = static_cast<CollComm*>(collComm);
  (void)offset, (void)fd;  // ipc maps by virtual address
  EPX_GIN_CALL(c, ipcRegMrSym(c->inner, data, size, type, mrFlags, mhandle, ginHandle),
               verbsGinRegMrSym(c->inner, data, size, type, offset, fd, mrFlags, mhandle, ginHandle));
}

ncclResult_t ginDeregMrSym(void* collComm, void* mhandle) {
  auto* c = static_cast<CollComm*>(collComm);
  EPX_GIN_CALL(c, ipcDeregMrSym(c->inner, mhandle), verbsGinDeregMrSym(c->inner, mhandle));
}

ncclResult_t ginCloseColl(void* collComm) {
  auto* c = static_cast<CollComm*>(collComm);
  if (c == nullptr) return ncclSuccess;
  ncclResult_t r = ncclSuccess;
#ifdef EPX_HAVE_VERBS
  if (c->backend == GinBackend::Verbs) r = verbsGinCloseColl(c->inner);
  else r = ipcCloseColl(c->inner);
#else
  r = ipcCloseColl(c->inner);
#endif
  delete c;
  return r;
}

ncclResult_t ginCloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr) return ncclSuccess;
  ncclResult_t r = ncclSuccess;
  if (l->ipc) r = ipcCloseListen(l->ipc);
#ifdef EPX_HAVE_VERBS
  if (l->verbs) {
    ncclResult_t v = verbsGinCloseListen(l->verbs);
    if (r == ncclSuccess) r = v;
  }
#endif
  delete l;
  return r;
}

ncclResult_t ginPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                    void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff, void* signalMhandle,
                    uint64_t signalValue, uint32_t signalOp, void** request) {
  auto* c = static_cast<CollComm*>(collComm);
  EPX_GIN_CALL(c,
               ipcPut(c->inner, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, withSignal, signalOff,
                      signalMhandle, signalValue, signalOp, request),
               verbsGinPut(c->inner, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, withSignal, signalOff,
                           signalMhandle, signalValue, signalOp, request));
}

ncclResult_t ginGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                    void* localMhandle, uint32_t rank, void** request) {
  auto* c = static_cast<CollComm*>(collComm);
  EPX_GIN_CALL(c, ipcGet(c->inner, remoteOff, remoteMhandle, size, localOff, localMhandle, rank, request),
               verbsGinGet(c->inner, remoteOff, remoteMhandle, size, localOff, localMhandle, rank, request));
}

ncclResult_t ginFlush(void* collComm, uint32_t rank, void** request) {
  auto* c = static_cast<CollComm*>(collComm);
  *request = nullptr;  // ipc: a get is complete once test() says so; its bytes are in place
#ifdef EPX_HAVE_VERBS
  if (c->backend == GinBackend::Verbs) return verbsGinFlush(c->inner, rank, request);
#endif
  (void)c, (void)rank;
  return ncclSuccess;
}

ncclResult_t ginTest(void* collComm, void* request, int* done) {
  auto* c = static_cast<CollComm*>(collComm);
  EPX_GIN_CALL(c, ipcTest(c->inner, request, done), verbsGinTest(c->inner, request, done));
}

ncclResult_t ginProgress(void* collComm) {
  auto* c = static_cast<CollComm*>(collComm);
  EPX_GIN_CALL(c, ipcProgress(c->inner), verbsGinProgress(c->inner));
}

#undef EPX_GIN_CALL

bool ginUsesVerbsForTesting(void* collComm) { return static_cast<CollComm*>(collComm)->backend == GinBackend::Verbs; }
void* ginInnerForTesting(void* collComm) { return static_cast<CollComm*>(collComm)->inner; }

}  // namespace epx::plugin::gin
