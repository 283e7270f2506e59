// The transport behind every ncclNet adapter (v11, v10, v9): verbs when an RDMA port is usable,
// else the socket transport. Chosen once in init(); EPX_NET_TRANSPORT=auto|socket|verbs forces it
// (verbs: init fails when no port is usable).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_net.h"

namespace epx::plugin::net {

enum class Transport { Socket, Verbs };
Transport active();

ncclResult_t init(ncclDebugLogger_t logger);
ncclResult_t devices(int* count);
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props);
// trafficClass: NCCL's per-communicator value (v11 listen context), NCCL_NET_TRAFFIC_CLASS_UNDEF when unknown.
ncclResult_t listen(int trafficClass, int dev, void* handle, void** listenComm);
// trafficClass: NCCL's per-communicator value, NCCL_NET_TRAFFIC_CLASS_UNDEF when unknown.
ncclResult_t connect(int trafficClass, int dev, void* handle, void** sendComm);
ncclResult_t accept(void* listenComm, void** recvComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);
ncclResult_t closeListen(void* listenComm);

}  // namespace epx::plugin::net
