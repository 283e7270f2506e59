// ncclNetPlugin_v9 (NCCL 2.22-2.23): no traffic class, no profiler handles.
#include "nccl_net.h"
#include "net/select.h"

namespace {

namespace sock = epx::plugin::net;

ncclResult_t init(ncclDebugLogger_t logFunction) { return sock::init(logFunction); }

ncclResult_t getProperties(int dev, ncclNetProperties_v9_t* props) {
  ncclNetProperties_v11_t p;
  ncclResult_t res = sock::getProperties(dev, &p);
  if (res != ncclSuccess) return res;
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = p.vProps.ndevs;
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) props->vProps.devs[i] = p.vProps.devs[i];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  return ncclSuccess;
}

ncclResult_t connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** sendDevComm) {
  if (sendDevComm != nullptr) *sendDevComm = nullptr;
  return sock::connect(NCCL_NET_TRAFFIC_CLASS_UNDEF, dev, handle, sendComm);
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm) {
  if (recvDevComm != nullptr) *recvDevComm = nullptr;
  return sock::accept(listenComm, recvComm);
}

ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  return sock::regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return sock::isend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** request) {
  return sock::irecv(recvComm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t listen(int dev, void* handle, void** listenComm) {
  return sock::listen(NCCL_NET_TRAFFIC_CLASS_UNDEF, dev, handle, listenComm);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "EPX",
    .init = init,
    .devices = sock::devices,
    .getProperties = getProperties,
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
};
