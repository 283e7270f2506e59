#include "net/select.h"

#include <cstring>
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "socket/transport.h"
#ifdef EPX_HAVE_VERBS
#include "net/verbs_transport.h"
#endif

namespace epx::plugin::net {

namespace sock = epx::plugin::socket;

namespace {
Transport gActive = Transport::Socket;
}  // namespace

Transport active() { return gActive; }

ncclResult_t init(ncclDebugLogger_t logger) {
  ncclResult_t r = sock::init(logger);  // installs the logger; cheap when the socket path is unused
  if (r != ncclSuccess) return r;
  const std::string want = envString("EPX_NET_TRANSPORT", "auto");
  if (want != "auto" && want != "socket" && want != "verbs") {
    EPX_WARN(NCCL_NET, "NET/EPX: EPX_NET_TRANSPORT=\"%s\" is not auto, socket or verbs", want.c_str());
    return ncclInvalidUsage;
  }
  gActive = Transport::Socket;
  if (want == "socket") return ncclSuccess;
#ifdef EPX_HAVE_VERBS
  int count = 0;
  std::string why;
  r = verbs::init(&count, &why);
  if (r != ncclSuccess) return r;
  if (count > 0) {
    gActive = Transport::Verbs;
    EPX_INFO(NCCL_INIT | NCCL_NET, "NET/EPX: verbs transport, %d port(s)", count);
    return ncclSuccess;
  }
  if (want == "verbs") {
    EPX_WARN(NCCL_NET, "NET/EPX: EPX_NET_TRANSPORT=verbs but %s", why.c_str());
    return ncclSystemError;
  }
  EPX_INFO(NCCL_INIT | NCCL_NET, "NET/EPX: socket transport (verbs: %s)", why.c_str());
#else
  if (want == "verbs") {
    EPX_WARN(NCCL_NET, "NET/EPX: EPX_NET_TRANSPORT=verbs but this plugin was built without libibverbs");
    return ncclSystemError;
  }
#endif
  return ncclSuccess;
}

#ifdef EPX_HAVE_VERBS
#define EPX_NET_CALL(verbsCall, socketCall) return gActive == Transport::Verbs ? verbs::verbsCall : sock::socketCall
#else
#define EPX_NET_CALL(verbsCall, socketCall) return sock::socketCall
#endif

ncclResult_t devices(int* count) { EPX_NET_CALL(devices(count), devices(count)); }
ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  EPX_NET_CALL(getProperties(dev, props), getProperties(dev, props));
}
ncclResult_t listen(int trafficClass, int dev, void* handle, void** listenComm) {
  (void)trafficClass;
  EPX_NET_CALL(listen(trafficClass, dev, handle, listenComm), listen(dev, handle, listenComm));
}
ncclResult_t connect(int trafficClass, int dev, void* handle, void** sendComm) {
  sock::NetContext ctx;
  ctx.trafficClass = trafficClass;
  EPX_NET_CALL(connect(trafficClass, dev, handle, sendComm), connect(&ctx, dev, handle, sendComm));
}
ncclResult_t accept(void* listenComm, void** recvComm) {
  EPX_NET_CALL(accept(listenComm, recvComm), accept(listenComm, recvComm));
}
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  EPX_NET_CALL(regMr(comm, data, size, type, mhandle), regMr(comm, data, size, type, mhandle));
}
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  (void)offset, (void)fd;
  EPX_NET_CALL(regMrDmaBuf(comm, data, size, type, offset, fd, mhandle), regMr(comm, data, size, type, mhandle));
}
ncclResult_t deregMr(void* comm, void* mhandle) { EPX_NET_CALL(deregMr(comm, mhandle), deregMr(comm, mhandle)); }
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  (void)mhandle;
  EPX_NET_CALL(isend(sendComm, data, size, tag, mhandle, request), isend(sendComm, data, size, tag, request));
}
ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  (void)mhandles;
  EPX_NET_CALL(irecv(recvComm, n, data, sizes, tags, mhandles, request), irecv(recvComm, n, data, sizes, tags, request));
}
ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  EPX_NET_CALL(iflush(recvComm, n, data, sizes, mhandles, request), iflush(recvComm, n, data, sizes, mhandles, request));
}
ncclResult_t test(void* request, int* done, int* sizes) { EPX_NET_CALL(test(request, done, sizes), test(request, done, sizes)); }
ncclResult_t closeSend(void* sendComm) { EPX_NET_CALL(closeSend(sendComm), closeSend(sendComm)); }
ncclResult_t closeRecv(void* recvComm) { EPX_NET_CALL(closeRecv(recvComm), closeRecv(recvComm)); }
ncclResult_t closeListen(void* listenComm) { EPX_NET_CALL(closeListen(listenComm), closeListen(listenComm)); }

#undef EPX_NET_CALL

}  // namespace epx::plugin::net
