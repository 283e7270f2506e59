// ncclGinPlugin_v13 (NCCL 2.30, 2.32): the GIN backend (gin/backend.h) behind the v13 table, in
// PROXY mode like v11. NCCL 2.30+ skips an external GIN plugin of the proxy type and runs its own
// GIN proxy over an RMA plugin instead; its RMA loader takes this very table (symbol
// ncclGinPlugin_v13, the RMA v13 signature) from the net plugin's library, so the backend serves
// NCCL's GIN proxy as its RMA transport (docs/plugins.md, "GIN on NCCL 2.30 and newer").
#include "gin_abi.h"

namespace {

namespace gin = epx::plugin::gin;

ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  *ctx = nullptr;
  return gin::ginInit(commId, logFunction, ctx);
}

ncclResult_t connect(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  (void)ctx;  // as in v11: listen got the instance
  return gin::ginConnect(handles, nranks, rank, listenComm, collComm);
}

// The config's counts are NCCL's business in proxy mode (its proxy keeps signals and counters).
ncclResult_t createContext(void* collComm, ncclGinConfig_v13_t* config, void** ginCtx,
                           ncclNetDeviceHandle_v11_t** devHandle) {
  (void)config;
  return gin::ginCreateContextOnCollComm(collComm, ginCtx, devHandle);
}

ncclResult_t destroyContext(void* ginCtx) {
  (void)ginCtx;  // the collComm; closeColl frees it
  return ncclSuccess;
}

ncclResult_t regMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                      void** ginHandle) {
  return gin::ginRegMrSym(collComm, data, size, type, 0, -1, mrFlags, mhandle, ginHandle);
}

ncclResult_t regMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t mrFlags, void** mhandle, void** ginHandle) {
  return gin::ginRegMrSym(collComm, data, size, type, offset, fd, mrFlags, mhandle, ginHandle);
}

// ginCtx is the collComm (createContext); the context index is not needed: the backend keeps the
// order of all puts of a connection.
ncclResult_t iput(void* ginCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                  void* dstMhandle, uint32_t rank, void** request) {
  (void)context;
  return gin::ginPut(ginCtx, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, false, 0, nullptr, 0, 0, request);
}

// All v13 signals are strong; a signal without data (size 0, no source) is a VA signal.
ncclResult_t iputSignal(void* ginCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                        void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle, uint64_t signalValue,
                        uint32_t signalOp, void** request) {
  (void)context;
  return gin::ginPut(ginCtx, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, true, signalOff, signalMhandle,
                     signalValue, signalOp, request);
}

// One-sided get (device ncclGin::get through NCCL's proxy): remote is the peer's region matching
// this rank's handle, as for a put's destination.
ncclResult_t iget(void* ginCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                  void* localMhandle, uint32_t rank, void** request) {
  (void)context;
  return gin::ginGet(ginCtx, remoteOff, remoteMhandle, size, localOff, localMhandle, rank, request);
}

// After gets (NCCL's device wait posts one on this rank's own queue): a null request is done.
ncclResult_t iflush(void* ginCtx, int context, void* mhandle, uint32_t rank, void** request) {
  (void)context, (void)mhandle;
  return gin::ginFlush(ginCtx, rank, request);
}

ncclResult_t finalize(void* ctx) {
  (void)ctx;
  return ncclSuccess;
}

}  // namespace

// queryLastError: none, as in v11 (errors come back from the calls).
extern "C" __attribute__((visibility("default"))) const ncclGin_v13_t ncclGinPlugin_v13 = {
    .name = "EPX",
    .init = init,
    .devices = gin::ginDevices,
    .getProperties = gin::ginGetPropertiesV12,
    .listen = gin::ginListen,
    .connect = connect,
    .createContext = createContext,
    .regMrSym = regMrSym,
    .regMrSymDmaBuf = regMrSymDmaBuf,
    .deregMrSym = gin::ginDeregMrSym,
    .destroyContext = destroyContext,
    .closeColl = gin::ginCloseColl,
    .closeListen = gin::ginCloseListen,
    .iput = iput,
    .iputSignal = iputSignal,
    .iget = iget,
    .iflush = iflush,
    .test = gin::ginTest,
    .ginProgress = gin::ginProgress,
    .queryLastError = nullptr,
    .finalize = finalize,
};
