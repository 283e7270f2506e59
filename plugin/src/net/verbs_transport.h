// The verbs (InfiniBand / RoCE v2) transport behind the ncclNet adapters: RC QPs, several per
// connection, RDMA write-with-immediate data path, receiver-driven FIFO (verbs_wire.h).
// NEVER RUN ON A NIC: no machine of the project has an RDMA device (this VM cannot load
// soft-RoCE). What runs in CI: the pure pieces (verbs_{hca_filter,gid,params,props,wire,ops,
// qp_attr}.cc), the out-of-band handshake helpers, and init() finding no device.
#pragma once

#include <cstddef>
#include <string>

#include "nccl_net.h"

namespace epx::plugin::verbs {

// Loads libibverbs and enumerates ports; ncclSuccess with *count = 0 (and *why) when there is
// none, so that the caller can fall back to the socket transport.
ncclResult_t init(int* count, std::string* why);
ncclResult_t devices(int* count);
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props);
// trafficClass: as for connect; applied to the accepted connection.
ncclResult_t listen(int trafficClass, int dev, void* handle, void** listenComm);
// trafficClass: NCCL's per-communicator value (NCCL_NET_TRAFFIC_CLASS_UNDEF when unset).
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

}  // namespace epx::plugin::verbs
