// ncclGinPlugin_v14 (NCCL 2.30, 2.32): the GIN backend behind the v14 table. v14 has no host data
// path (no iput/test): it is for plugins whose device code drives the NIC. NCCL 2.30+ loads it
// first and then skips it, since the backend is of the proxy type; the backend is used through
// ncclGinPlugin_v13 instead (gin_v13.cc). Exported so that NCCL's choice is made on the plugin's
// properties rather than on a missing symbol, and logged as such (NCCL_DEBUG=INFO).
#include "gin_abi.h"

namespace {

namespace gin = epx::plugin::gin;

ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  *ctx = nullptr;
  return gin::ginInit(commId, logFunction, ctx);
}

// Signals are applied after the puts before them (strong), and at any registered address (VA).
ncclResult_t getGinProperties(ncclGinProperties_v14_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  props->supportsStrongSignals = true;
  props->supportsVASignals = true;
  return ncclSuccess;
}

ncclResult_t connect(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  (void)ctx;
  return gin::ginConnect(handles, nranks, rank, listenComm, collComm);
}

ncclResult_t createContext(void* collComm, ncclGinConfig_v14_t* config, void** ginCtx,
                           ncclNetDeviceHandle_v11_t** devHandle) {
  (void)config;
  return gin::ginCreateContextOnCollComm(collComm, ginCtx, devHandle);
}

ncclResult_t destroyContext(void* ginCtx) {
  (void)ginCtx;
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

ncclResult_t finalize(void* ctx) {
  (void)ctx;
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclGin_v14_t ncclGinPlugin_v14 = {
    .name = "EPX",
    .init = init,
    .devices = gin::ginDevices,
    .getGinProperties = getGinProperties,
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
    .ginProgress = gin::ginProgress,
    .queryLastError = nullptr,
    .finalize = finalize,
};
