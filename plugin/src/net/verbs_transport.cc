// The verbs transport. NEVER RUN ON A NIC (see verbs_transport.h): every ibv_* call below is
// compiled and reviewed only. Message protocol: verbs_wire.h; work requests: verbs_ops.h.
#include "net/verbs_transport.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "common/log.h"
#include "common/net_props.h"
#include "net/verbs_api.h"
#include "net/verbs_device.h"
#include "net/verbs_hca_filter.h"
#include "net/verbs_oob.h"
#include "net/verbs_ops.h"
#include "net/verbs_qp_attr.h"

namespace epx::plugin::verbs {

namespace {

Settings gSettings;
const std::vector<Port>* gPorts = nullptr;
const VerbsApi* gApi = nullptr;

struct Mr {
  ibv_mr* mr = nullptr;
  bool cuda = false;
};

struct Comm;

struct Req {
  Comm* comm = nullptr;
  enum Kind { Send, Recv, Flush } kind = Send;
  uint64_t seq = 0;
  size_t size = 0;
  int pending = 0;  // signalled work requests not yet completed
  bool inUse = false;
};

struct Comm {
  bool isSend = false;
  const Port* port = nullptr;
  int fd = -1;
  int nQps = 0;
  int depth = 0;
  ibv_cq* cq = nullptr;
  ibv_qp* qps[kMaxQps] = {};
  // Control region, written by the peer: the FIFO (sender) or the size words (receiver).
  void* ctrl = nullptr;
  ibv_mr* ctrlMr = nullptr;
  // Local sources of our own control writes: size words (sender) or FIFO entries (receiver).
  void* staging = nullptr;
  ibv_mr* stagingMr = nullptr;
  uint64_t remoteCtrl = 0;
  uint32_t remoteRkey = 0;
  uint64_t seq = 0;
  std::vector<Req> reqs;
  std::unique_ptr<ImmTracker> tracker;
  // Receiver: a QP connected to itself for iflush (RDMA read of the received buffer).
  ibv_qp* flushQp = nullptr;
  uint64_t sink = 0;
  ibv_mr* sinkMr = nullptr;
  std::vector<Req> flushReqs;
  ServiceLevel service;
  ConnInfo local{};
  bool failed = false;
};

struct ListenComm {
  int fd = -1;
  int dev = 0;
  int trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  // The connection being accepted (one at a time).
  int peerFd = -1;
  int stage = 0;
  size_t done = 0;
  ConnInfo remote{};
  Comm* comm = nullptr;
  uint8_t ready = 0;
};

struct ConnectState {
  int fd = -1;
  int stage = 0;
  size_t done = 0;
  ConnInfo remote{};
  Comm* comm = nullptr;
  uint8_t ready = 1;
};

std::vector<std::string> gNames, gPaths;

// connect() keeps its state in the handle; a pointer found there is trusted only if this
// plugin created it and has not finished with it.
std::mutex gConnectMutex;
std::set<ConnectState*> gConnectStates;

bool knownConnectState(ConnectState* st) {
  std::lock_guard<std::mutex> lock(gConnectMutex);
  return gConnectStates.count(st) != 0;
}

void trackConnectState(ConnectState* st, bool live) {
  std::lock_guard<std::mutex> lock(gConnectMutex);
  if (live) gConnectStates.insert(st);
  else gConnectStates.erase(st);
}

ncclResult_t fail(Comm* c, const std::string& what) {
  if (c) c->failed = true;
  EPX_WARN(NCCL_NET, "NET/EPX-Verbs: %s", what.c_str());
  return ncclSystemError;
}

void destroyComm(Comm* c) {
  if (!c) return;
  for (int q = 0; q < c->nQps; ++q)
    if (c->qps[q]) gApi->destroyQp(c->qps[q]);
  if (c->flushQp) gApi->destroyQp(c->flushQp);
  if (c->cq) gApi->destroyCq(c->cq);
  if (c->ctrlMr) gApi->deregMr(c->ctrlMr);
  if (c->stagingMr) gApi->deregMr(c->stagingMr);
  if (c->sinkMr) gApi->deregMr(c->sinkMr);
  std::free(c->ctrl);
  std::free(c->staging);
  if (c->fd >= 0) ::close(c->fd);
  delete c;
}

bool toInit(ibv_qp* qp, int port) {
  ibv_qp_attr a;
  int mask = 0;
  initAttr(port, &a, &mask);
  return gApi->modifyQp(qp, &a, mask) == 0;
}

bool toRts(ibv_qp* qp, const QpPath& path, int port, uint32_t destQpn, uint32_t sqPsn) {
  ibv_qp_attr a;
  int mask = 0;
  rtrAttr(path, port, destQpn, &a, &mask);
  if (gApi->modifyQp(qp, &a, mask) != 0) return false;
  rtsAttr(path, sqPsn, &a, &mask);
  return gApi->modifyQp(qp, &a, mask) == 0;
}

bool postRecv(Comm* c, int q) {
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = static_cast<uint64_t>(q);
  wr.num_sge = 0;  // write-with-immediate: the data lands by RDMA, the WR only carries the immediate
  return ibv_post_recv(c->qps[q], &wr, &bad) == 0;
}

// QPs (INIT), CQ and control regions of a new connection; fills c->local.
Comm* createComm(const Port& port, bool isSend, std::string* why) {
  auto* c = new Comm();
  c->isSend = isSend;
  c->port = &port;
  c->nQps = gSettings.qpsPerConnection;
  c->depth = gSettings.fifoDepth;
  c->reqs.resize(c->depth);
  c->flushReqs.resize(c->depth);
  const int cqe = c->nQps * 4 * c->depth + 4 * c->depth;
  c->cq = gApi->createCq(port.context, cqe, nullptr, nullptr, 0);
  if (!c->cq) return *why = "ibv_create_cq failed", destroyComm(c), nullptr;
  const size_t ctrlBytes = isSend ? c->depth * sizeof(FifoEntry) : c->depth * sizeof(uint64_t);
  const size_t stagingBytes = isSend ? c->depth * sizeof(uint64_t) : c->depth * sizeof(FifoEntry);
  c->ctrl = std::aligned_alloc(4096, (ctrlBytes + 4095) / 4096 * 4096);
  c->staging = std::aligned_alloc(4096, (stagingBytes + 4095) / 4096 * 4096);
  if (!c->ctrl || !c->staging) return *why = "out of host memory", destroyComm(c), nullptr;
  std::memset(c->ctrl, 0, ctrlBytes);
  std::memset(c->staging, 0, stagingBytes);
  c->ctrlMr = gApi->regMr(port.pd, c->ctrl, ctrlBytes, kQpAccess);
  c->stagingMr = gApi->regMr(port.pd, c->staging, stagingBytes, IBV_ACCESS_LOCAL_WRITE);
  if (!c->ctrlMr || !c->stagingMr) return *why = "ibv_reg_mr of the control region failed", destroyComm(c), nullptr;
  static std::mt19937 rng{std::random_device{}()};
  ConnInfo& l = c->local;
  std::memset(&l, 0, sizeof l);
  l.nQps = static_cast<uint8_t>(c->nQps);
  l.ethernet = port.facts.ethernet;
  l.lid = port.lid;
  l.mtu = static_cast<uint8_t>(port.activeMtu);
  l.gidIndex = static_cast<uint8_t>(port.gidIndex);
  std::memcpy(l.gid, port.gid, 16);
  l.psn = rng() & 0xffffff;
  l.fifoDepth = static_cast<uint32_t>(c->depth);
  l.ctrlAddr = reinterpret_cast<uint64_t>(c->ctrl);
  l.ctrlRkey = c->ctrlMr->rkey;
  for (int q = 0; q < c->nQps; ++q) {
    ibv_qp_init_attr ia;
    qpInitAttr(c->cq, c->depth, &ia);
    c->qps[q] = gApi->createQp(port.pd, &ia);
    if (!c->qps[q] || !toInit(c->qps[q], port.facts.port))
      return *why = "ibv_create_qp/INIT failed", destroyComm(c), nullptr;
    l.qpn[q] = c->qps[q]->qp_num;
    if (!isSend)
      for (int i = 0; i < c->depth; ++i)
        if (!postRecv(c, q)) return *why = "ibv_post_recv failed", destroyComm(c), nullptr;
  }
  sealConnInfo(l);
  return c;
}

// RTR/RTS of every QP towards the peer, with the SL/TC policy of this connection.
bool bringUp(Comm* c, const ConnInfo& remote, int trafficClass, std::string* why) {
  if (std::string e = validateConnInfo(remote, c->local); !e.empty()) return *why = e, false;
  topo::SlPolicy policy;
  if (std::string e = resolveConnectionPolicy(trafficClass, ::getenv, &policy); !e.empty()) return *why = e, false;
  c->service = chooseServiceLevel(c->local.ethernet, policy);
  const QpPath path = makeQpPath(gSettings, c->local, remote, c->service);
  for (int q = 0; q < c->nQps; ++q)
    if (!toRts(c->qps[q], path, c->port->facts.port, remote.qpn[q], c->local.psn))
      return *why = "ibv_modify_qp to RTR/RTS failed (QP " + std::to_string(q) + ")", false;
  c->remoteCtrl = remote.ctrlAddr;
  c->remoteRkey = remote.ctrlRkey;
  if (!c->isSend && gSettings.gdrFlush) {  // loopback QP: itself as the peer
    ibv_qp_init_attr ia;
    qpInitAttr(c->cq, c->depth, &ia);
    c->flushQp = gApi->createQp(c->port->pd, &ia);
    c->sinkMr = gApi->regMr(c->port->pd, &c->sink, sizeof c->sink, IBV_ACCESS_LOCAL_WRITE);
    ConnInfo self = c->local;
    self.qpn[0] = c->flushQp ? c->flushQp->qp_num : 0;
    QpPath loop = makeQpPath(gSettings, c->local, self, c->service);
    loop.remotePsn = c->local.psn;
    if (!c->flushQp || !c->sinkMr || !toInit(c->flushQp, c->port->facts.port) ||
        !toRts(c->flushQp, loop, c->port->facts.port, c->flushQp->qp_num, c->local.psn))
      return *why = "flush QP setup failed", false;
  }
  EPX_INFO(NCCL_NET, "NET/EPX-Verbs: %s connection on %s:%d, %d QPs, %s", c->isSend ? "send" : "recv",
           c->port->facts.device.c_str(), c->port->facts.port, c->nQps, c->service.why.c_str());
  return true;
}

Req* reqOf(uint64_t wrId) { return reinterpret_cast<Req*>(wrId); }

ncclResult_t progress(Comm* c) {
  if (c->failed) return ncclRemoteError;
  ibv_wc wcs[32];
  for (;;) {
    const int n = ibv_poll_cq(c->cq, 32, wcs);
    if (n < 0) return fail(c, "ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        fail(c, "work completion error " + std::to_string(wc.status) + " (vendor 0x" + std::to_string(wc.vendor_err) +
                    ") on " + c->port->facts.device + ":" + std::to_string(c->port->facts.port));
        return ncclRemoteError;
      }
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if (std::string e = c->tracker->onImm(ntohl(wc.imm_data)); !e.empty()) return fail(c, e);
        const int q = static_cast<int>(wc.wr_id);
        if (q < 0 || q >= c->nQps || !postRecv(c, q)) return fail(c, "cannot repost a receive");
        continue;
      }
      if (Req* r = reqOf(wc.wr_id)) --r->pending;
    }
    if (n < 32) return ncclSuccess;
  }
}

bool post(ibv_qp* qp, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, wr, &bad) == 0;
}

}  // namespace

ncclResult_t init(int* count, std::string* why) {
  *count = 0;
  if (std::string e = readSettings(::getenv, &gSettings); !e.empty()) {
    *why = e;
    EPX_WARN(NCCL_NET, "NET/EPX-Verbs: %s", e.c_str());
    return ncclInvalidUsage;
  }
  HcaFilter filter;
  if (std::string e = parseHcaFilter(gSettings.hcaFilter, &filter); !e.empty()) {
    *why = "EPX_IB_HCA/NCCL_IB_HCA: " + e;
    EPX_WARN(NCCL_NET, "NET/EPX-Verbs: %s", why->c_str());
    return ncclInvalidUsage;
  }
  gApi = verbsApi(why);
  if (!gApi) return ncclSuccess;
  gPorts = &verbsPorts(gSettings, why);
  // NCCL calls init once per communicator (v11) and may keep the name/pciPath pointers of
  // earlier getProperties calls: the strings are built once and never move.
  static std::once_flag names;
  std::call_once(names, [] {
    for (const Port& p : *gPorts) {
      gNames.push_back(p.props.name);
      gPaths.push_back(p.props.pciPath);
    }
  });
  *count = static_cast<int>(gPorts->size());
  return ncclSuccess;
}

ncclResult_t devices(int* count) {
  *count = gPorts ? static_cast<int>(gPorts->size()) : 0;
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  if (!gPorts || dev < 0 || dev >= static_cast<int>(gPorts->size())) return ncclInvalidUsage;
  const DeviceProps& d = (*gPorts)[dev].props;
  std::memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(gNames[dev].c_str());
  props->pciPath = gPaths[dev].empty() ? nullptr : const_cast<char*>(gPaths[dev].c_str());
  props->guid = d.guid;
  props->ptrSupport = d.ptrSupport;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speedMbps;
  props->port = d.port;
  fillHostNetDefaults(props, dev, 1);
  return ncclSuccess;
}

ncclResult_t listen(int trafficClass, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  if (!gPorts || dev < 0 || dev >= static_cast<int>(gPorts->size())) return ncclInvalidUsage;
  std::string why;
  const int fd = oobListen(static_cast<Handle*>(handle), &why);
  if (fd < 0) return fail(nullptr, why);
  auto* l = new ListenComm();
  l->fd = fd;
  l->dev = dev;
  l->trafficClass = trafficClass;
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t connect(int trafficClass, int dev, void* opaqueHandle, void** sendComm) {
  *sendComm = nullptr;
  if (!gPorts || dev < 0 || dev >= static_cast<int>(gPorts->size())) return ncclInvalidUsage;
  auto* h = static_cast<Handle*>(opaqueHandle);
  std::string why;
  auto* st = reinterpret_cast<ConnectState*>(h->connectState);
  if (st && !knownConnectState(st)) {
    fail(nullptr, "connect: the handle carries a connection state this plugin did not create");
    return ncclInvalidArgument;
  }
  auto abort = [&](ncclResult_t r) {
    if (st) {
      trackConnectState(st, false);
      if (st->comm) destroyComm(st->comm);
      else if (st->fd >= 0) ::close(st->fd);
      delete st;
    }
    h->connectState = 0;
    fail(nullptr, why);
    return r;
  };
  if (!st) {
    if (std::string e = validateHandle(*h); !e.empty()) return why = e, abort(ncclInvalidArgument);
    st = new ConnectState();
    trackConnectState(st, true);
    h->connectState = reinterpret_cast<uint64_t>(st);
    if ((st->fd = oobConnect(*h, &why)) < 0) return abort(ncclRemoteError);
  }
  for (;;) {
    int r = 1;
    switch (st->stage) {
      case 0:  // TCP connected
        r = oobConnected(st->fd, &why);
        if (r == 1) {
          st->comm = createComm((*gPorts)[dev], true, &why);
          if (!st->comm) return abort(ncclSystemError);
          st->comm->fd = st->fd;
        }
        break;
      case 1: r = oobSend(st->fd, &st->comm->local, sizeof(ConnInfo), &st->done, &why); break;
      case 2: r = oobRecv(st->fd, &st->remote, sizeof(ConnInfo), &st->done, &why); break;
      case 3:
        if (!bringUp(st->comm, st->remote, trafficClass, &why)) return abort(ncclRemoteError);
        break;
      case 4: r = oobSend(st->fd, &st->ready, 1, &st->done, &why); break;
      default: {
        *sendComm = st->comm;
        trackConnectState(st, false);
        delete st;
        h->connectState = 0;
        return ncclSuccess;
      }
    }
    if (r < 0) return abort(ncclRemoteError);
    if (r == 0) return ncclSuccess;  // called again by NCCL
    ++st->stage;
    st->done = 0;
  }
}

ncclResult_t accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  if (!l) return ncclInternalError;
  std::string why;
  auto reset = [&](ncclResult_t r) {
    if (l->comm) destroyComm(l->comm);
    else if (l->peerFd >= 0) ::close(l->peerFd);
    l->comm = nullptr, l->peerFd = -1, l->stage = 0, l->done = 0;
    fail(nullptr, why);
    return r;
  };
  for (;;) {
    int r = 1;
    switch (l->stage) {
      case 0:
        l->peerFd = oobAccept(l->fd, &why);
        if (l->peerFd < 0) {
          if (!why.empty()) return reset(ncclSystemError);
          return ncclSuccess;
        }
        break;
      case 1: r = oobRecv(l->peerFd, &l->remote, sizeof(ConnInfo), &l->done, &why); break;
      case 2:
        l->comm = createComm((*gPorts)[l->dev], false, &why);
        if (!l->comm) return reset(ncclSystemError);
        l->comm->fd = l->peerFd;
        l->comm->tracker = std::make_unique<ImmTracker>(l->comm->depth);
        if (!bringUp(l->comm, l->remote, l->trafficClass, &why)) return reset(ncclRemoteError);
        break;
      case 3: r = oobSend(l->peerFd, &l->comm->local, sizeof(ConnInfo), &l->done, &why); break;
      case 4: r = oobRecv(l->peerFd, &l->ready, 1, &l->done, &why); break;
      default:
        *recvComm = l->comm;
        l->comm = nullptr, l->peerFd = -1, l->stage = 0, l->done = 0;
        return ncclSuccess;
    }
    if (r < 0) return reset(ncclRemoteError);
    if (r == 0) return ncclSuccess;
    ++l->stage;
    l->done = 0;
  }
}

ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  *mhandle = nullptr;
  auto* c = static_cast<Comm*>(comm);
  if (!c) return ncclInternalError;
  auto* m = new Mr();
  m->cuda = type == NCCL_PTR_CUDA;
  if (fd >= 0 && gApi->regDmabufMr)
    m->mr = gApi->regDmabufMr(c->port->pd, offset, size, reinterpret_cast<uint64_t>(data), fd, kQpAccess);
  else
    m->mr = gApi->regMr(c->port->pd, data, size, kQpAccess);
  if (!m->mr) {
    const bool cuda = m->cuda;
    delete m;
    return fail(nullptr, std::string("memory registration failed (") + (cuda ? "CUDA" : "host") + ", " +
                             std::to_string(size) + " bytes" + (fd >= 0 ? ", DMA-BUF" : "") + ")");
  }
  *mhandle = m;
  return ncclSuccess;
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return regMrDmaBuf(comm, data, size, type, 0, -1, mhandle);
}

ncclResult_t deregMr(void* comm, void* mhandle) {
  (void)comm;
  auto* m = static_cast<Mr*>(mhandle);
  if (!m) return ncclInternalError;
  const int rc = gApi->deregMr(m->mr);
  delete m;
  return rc == 0 ? ncclSuccess : ncclSystemError;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(sendComm);
  if (!c || !c->isSend) return ncclInternalError;
  if (ncclResult_t r = progress(c); r != ncclSuccess) return r;
  const int slot = static_cast<int>(c->seq % c->depth);
  Req& req = c->reqs[slot];
  const auto* fifo = static_cast<const FifoEntry*>(c->ctrl);
  if (req.inUse || !fifoSlotReady(fifo[slot], c->seq)) return ncclSuccess;  // receiver not posted yet
  std::vector<WriteOp> ops;
  const uint64_t sizeAddr = c->remoteCtrl + slot * sizeof(uint64_t);
  if (std::string e = planSendOps(c->seq, size, tag, fifo[slot], c->nQps, gSettings.minChunk, sizeAddr, c->remoteRkey, &ops);
      !e.empty()) {
    fail(c, e);
    return ncclInvalidUsage;
  }
  auto* m = static_cast<Mr*>(mhandle);
  auto* sizeWord = static_cast<uint64_t*>(c->staging) + slot;
  *sizeWord = size;
  req = Req{c, Req::Send, c->seq, size, 0, true};
  for (const WriteOp& op : ops) {
    ibv_sge sge{};
    ibv_send_wr wr{};
    wr.wr.rdma.remote_addr = op.remoteAddr;
    wr.wr.rdma.rkey = op.rkey;
    wr.sg_list = &sge;
    if (op.kind == WriteOp::Size) {
      sge = {reinterpret_cast<uint64_t>(sizeWord), sizeof(uint64_t), c->stagingMr->lkey};
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.num_sge = 1;
      wr.send_flags = IBV_SEND_INLINE;
    } else {
      if (op.length > 0 && !m) return fail(c, "isend without a memory handle");
      sge = {reinterpret_cast<uint64_t>(data) + op.localOffset, static_cast<uint32_t>(op.length), m ? m->mr->lkey : 0};
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(op.imm);
      wr.num_sge = op.length > 0 ? 1 : 0;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr_id = reinterpret_cast<uint64_t>(&req);
      ++req.pending;
    }
    if (!post(c->qps[op.qp], &wr)) return fail(c, "ibv_post_send failed");
  }
  ++c->seq;
  *request = &req;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  if (!c || c->isSend) return ncclInternalError;
  if (n != 1) return fail(c, "grouped receives are not supported (maxRecvs is 1)"), ncclInternalError;
  if (ncclResult_t r = progress(c); r != ncclSuccess) return r;
  const int slot = static_cast<int>(c->seq % c->depth);
  Req& req = c->reqs[slot];
  if (req.inUse || !c->tracker->post(c->seq)) return ncclSuccess;
  auto* m = static_cast<Mr*>(mhandles ? mhandles[0] : nullptr);
  static_cast<uint64_t*>(c->ctrl)[slot] = 0;
  auto* e = static_cast<FifoEntry*>(c->staging) + slot;
  e->addr = reinterpret_cast<uint64_t>(data[0]);
  e->capacity = sizes[0];
  e->rkey = m ? m->mr->rkey : 0;
  e->tag = tags[0];
  e->seq = c->seq + 1;
  req = Req{c, Req::Recv, c->seq, 0, 1, true};
  ibv_sge sge{reinterpret_cast<uint64_t>(e), sizeof(FifoEntry), c->stagingMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(&req);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = c->remoteCtrl + slot * sizeof(FifoEntry);
  wr.wr.rdma.rkey = c->remoteRkey;
  if (!post(c->qps[0], &wr)) return fail(c, "ibv_post_send (FIFO entry) failed");
  ++c->seq;
  *request = &req;
  return ncclSuccess;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  if (!c || c->isSend) return ncclInternalError;
  if (!c->flushQp) return ncclSuccess;  // EPX_IB_GDR_FLUSH=0: nothing to do
  int last = -1;
  for (int i = 0; i < n; ++i) {
    auto* m = static_cast<Mr*>(mhandles[i]);
    if (m && m->cuda && sizes[i] > 0) last = i;
  }
  if (last < 0) return ncclSuccess;  // host memory only
  Req* req = nullptr;
  for (Req& r : c->flushReqs)
    if (!r.inUse) {
      req = &r;
      break;
    }
  if (!req) return ncclSuccess;
  *req = Req{c, Req::Flush, 0, 0, 1, true};
  auto* m = static_cast<Mr*>(mhandles[last]);
  ibv_sge sge{reinterpret_cast<uint64_t>(&c->sink), 1, c->sinkMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uint64_t>(req);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;  // completes after the NIC's earlier writes reached the GPU
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data[last]);
  wr.wr.rdma.rkey = m->mr->rkey;
  if (!post(c->flushQp, &wr)) return fail(c, "ibv_post_send (flush read) failed");
  *request = req;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  *done = 0;
  auto* r = static_cast<Req*>(request);
  if (!r || !r->inUse) return ncclInternalError;
  Comm* c = r->comm;
  if (ncclResult_t res = progress(c); res != ncclSuccess) return res;
  if (r->pending > 0) return ncclSuccess;
  if (r->kind == Req::Recv) {
    if (!c->tracker->complete(r->seq)) return ncclSuccess;
    const int slot = static_cast<int>(r->seq % c->depth);
    r->size = __atomic_load_n(static_cast<uint64_t*>(c->ctrl) + slot, __ATOMIC_ACQUIRE);
    c->tracker->release(r->seq);
  }
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(r->size);
  r->inUse = false;
  return ncclSuccess;
}

ncclResult_t closeSend(void* sendComm) {
  destroyComm(static_cast<Comm*>(sendComm));
  return ncclSuccess;
}

ncclResult_t closeRecv(void* recvComm) {
  destroyComm(static_cast<Comm*>(recvComm));
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (!l) return ncclSuccess;
  if (l->comm) destroyComm(l->comm);
  else if (l->peerFd >= 0) ::close(l->peerFd);
  if (l->fd >= 0) ::close(l->fd);
  delete l;
  return ncclSuccess;
}

}  // namespace epx::plugin::verbs
