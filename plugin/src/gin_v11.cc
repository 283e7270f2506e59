// ncclGinPlugin_v11 in PROXY mode, backed by the ipc backend (ranks on one host).
#include "nccl_net.h"

#include "gin/ipc_backend.h"

namespace {

namespace gin = epx::plugin::gin;

// init's context is a small per-call record of the communicator (commHash); NCCL passes the
// communicator's one to listen, which numbers its GIN contexts for the counters (epx/gin_stats.h).
ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  *ctx = nullptr;
  return gin::ipcInit(commId, logFunction, ctx);
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  return gin::ipcListen(ctx, dev, handle, listenComm);
}

// ctx is the first init's context and NULL for later communicators: not used.
ncclResult_t connect(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  (void)ctx;
  return gin::ipcConnect(handles, nranks, rank, listenComm, collComm);
}

ncclResult_t regMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t mrFlags, void** mhandle, void** ginHandle) {
  (void)offset;
  (void)fd;  // not advertised (no NCCL_PTR_DMABUF); NCCL falls back to regMrSym if this fails
  return gin::ipcRegMrSym(collComm, data, size, type, mrFlags, mhandle, ginHandle);
}

ncclResult_t iput(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                  void* dstMhandle, uint32_t rank, void** request) {
  return gin::ipcPut(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, false, 0, nullptr, 0, 0,
                     request);
}

ncclResult_t iputSignal(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                        void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                        uint64_t signalValue, uint32_t signalOp, void** request) {
  return gin::ipcPut(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, true, signalOff,
                     signalMhandle, signalValue, signalOp, request);
}

ncclResult_t finalize(void* ctx) {
  (void)ctx;  // may be NULL; init's records are kept for the process (NCCL may finalize one twice)
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclGin_v11_t ncclGinPlugin_v11 = {
    .name = "EPX-ipc",
    .init = init,
    .devices = gin::ipcDevices,
    .getProperties = gin::ipcGetProperties,
    .listen = listen,
    .connect = connect,
    .createContext = nullptr,
    .regMrSym = gin::ipcRegMrSym,
    .regMrSymDmaBuf = regMrSymDmaBuf,
    .deregMrSym = gin::ipcDeregMrSym,
    .destroyContext = nullptr,
    .closeColl = gin::ipcCloseColl,
    .closeListen = gin::ipcCloseListen,
    .iput = iput,
    .iputSignal = iputSignal,
    .test = gin::ipcTest,
    .ginProgress = gin::ipcProgress,
    .queryLastError = nullptr,
    .finalize = finalize,
};
