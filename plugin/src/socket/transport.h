// The socket transport: one internal implementation behind every ncclNet version adapter.
// Several TCP streams per connection, non-blocking I/O progressed from isend/irecv/test.
#pragma once

#include <cstddef>

#include "nccl_net.h"

namespace epx::plugin::socket {

struct Settings {
  int nStreams;            // EPX_SOCKET_NSTREAMS (1..16, default 2)
  size_t minPartBytes;     // EPX_SOCKET_MIN_PART (default 64 KiB)
  int connectTimeoutMs;    // EPX_SOCKET_CONNECT_TIMEOUT_MS (default 20000)
  int connectRetries;      // EPX_SOCKET_CONNECT_RETRIES on ECONNREFUSED (default 20)
  int handshakeTimeoutMs;  // EPX_SOCKET_HANDSHAKE_TIMEOUT_MS (default 10000)
  int maxRecvs;            // EPX_SOCKET_MAX_RECVS (power of 2, 1..8, default 1)
};
const Settings& settings();

constexpr int kMaxGroupedRecvs = 8;

// Per-communicator context returned by init (v11); holds the traffic class, applied as IP TOS.
struct NetContext {
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
};

ncclResult_t init(ncclDebugLogger_t logger);
ncclResult_t devices(int* count);
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t listen(int dev, void* handle, void** listenComm);
ncclResult_t connect(const NetContext* ctx, int dev, void* handle, void** sendComm);
ncclResult_t accept(void* listenComm, void** recvComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** request);
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);
ncclResult_t closeListen(void* listenComm);

}  // namespace epx::plugin::socket
