// ncclGinPlugin_v11 in PROXY mode: backend "ipc" (ranks on one host) or "verbs" (RDMA), chosen per
// GIN context at connect (gin/backend.h).
#include "nccl_net.h"

#include "gin/backend.h"

namespace {

namespace gin = epx::plugin::gin;

// init's context records which backends this process offers; NCCL passes the communicator's one to
// listen, which numbers its GIN contexts.
ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  *ctx = nullptr;
  return gin::ginInit(commId, logFunction, ctx);
}

// ctx is the first init's context and NULL for later communicators: not used.
ncclResult_t connect(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  (void)ctx;
  return gin::ginConnect(handles, nranks, rank, listenComm, collComm);
}

ncclResult_t regMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                      void** ginHandle) {
  return gin::ginRegMrSym(collComm, data, size, type, 0, -1, mrFlags, mhandle, ginHandle);
}

// Used by NCCL only when getProperties advertises NCCL_PTR_DMABUF (the verbs backend on a port
// that supports it); NCCL falls back to regMrSym if this fails.
ncclResult_t regMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t mrFlags, void** mhandle, void** ginHandle) {
  return gin::ginRegMrSym(collComm, data, size, type, offset, fd, mrFlags, mhandle, ginHandle);
}

ncclResult_t iput(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                  void* dstMhandle, uint32_t rank, void** request) {
  return gin::ginPut(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, false, 0, nullptr, 0, 0,
                     request);
}

ncclResult_t iputSignal(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                        void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                        uint64_t signalValue, uint32_t signalOp, void** request) {
  return gin::ginPut(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, true, signalOff,
                     signalMhandle, signalValue, signalOp, request);
}

ncclResult_t finalize(void* ctx) {
  (void)ctx;  // may be NULL; init's records are kept for the process (NCCL may finalize one twice)
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclGin_v11_t ncclGinPlugin_v11 = {
    .name = "EPX",
    .init = init,
    .devices = gin::ginDevices,
    .getProperties = gin::ginGetProperties,
    .listen = gin::ginListen,
    .connect = connect,
    .createContext = nullptr,
    .regMrSym = regMrSym,
    .regMrSymDmaBuf = regMrSymDmaBuf,
    .deregMrSym = gin::ginDeregMrSym,
    .destroyContext = nullptr,
    .closeColl = gin::ginCloseColl,
    .closeListen = gin::ginCloseListen,
    .iput = iput,
    .iputSignal = iputSignal,
    .test = gin::ginTest,
    .ginProgress = gin::ginProgress,
    .queryLastError = nullptr,
    .finalize = finalize,
};
