// ncclNetPlugin_v11: the epx transport (verbs or socket, net/select.h) as NCCL 2.28's net plugin API.
#include "nccl_net.h"
#include "net/select.h"

namespace {

namespace sock = epx::plugin::net;

// Per-communicator context returned by init: NCCL's traffic class for this communicator.
struct NetContext {
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
};

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  (void)commId;
  (void)profFunction;
  *ctx = nullptr;
  ncclResult_t res = sock::init(logFunction);
  if (res != ncclSuccess) return res;
  auto* context = new NetContext();
  if (config != nullptr) context->trafficClass = config->trafficClass;
  *ctx = context;
  return ncclSuccess;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  const auto* c = static_cast<const NetContext*>(ctx);
  return sock::listen(c ? c->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, dev, handle, listenComm);
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v11_t** sendDevComm) {
  if (sendDevComm != nullptr) *sendDevComm = nullptr;
  const auto* c = static_cast<const NetContext*>(ctx);
  return sock::connect(c ? c->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, dev, handle, sendComm);
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm) {
  if (recvDevComm != nullptr) *recvDevComm = nullptr;
  return sock::accept(listenComm, recvComm);
}

ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  return sock::regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
  (void)phandle;
  return sock::isend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
  (void)phandles;
  return sock::irecv(recvComm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t finalize(void* ctx) {
  delete static_cast<NetContext*>(ctx);  // NCCL may pass NULL after a failed init
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "EPX",
    .init = init,
    .devices = sock::devices,
    .getProperties = sock::getProperties,
    .listen = listen,
    .connect = connect,
    .accept = accept,
    .regMr = sock::regMr,
    .regMrDmaBuf = regMrDmaBuf,
    .deregMr = sock::deregMr,
    .isend = isend,
    .irecv = irecv,
    .iflush = sock::iflush,
    .test = sock::test,
    .closeSend = sock::closeSend,
    .closeRecv = sock::closeRecv,
    .closeListen = sock::closeListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = nullptr,
    .finalize = finalize,
    .setNetAttr = nullptr,
};
