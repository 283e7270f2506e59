// The GIN verbs backend. NEVER RUN ON A NIC (see verbs_backend.h): every ibv_* call below ran only
// against the fake device of the CPU tests.
#include "gin/verbs_backend.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "epx/topology/load.h"
#include "gin/cuda_driver.h"
#include "gin/registry.h"
#include "gin/verbs_gin_wire.h"
#include "gin/verbs_plan.h"
#include "gin/verbs_rail.h"
#include "net/select.h"
#include "net/verbs_api.h"
#include "net/verbs_device.h"
#include "net/verbs_oob.h"
#include "net/verbs_params.h"
#include "net/verbs_qp_attr.h"

namespace epx::plugin::gin {

namespace {

using Clock = std::chrono::steady_clock;

// maxRecvs reported to NCCL (a power of 2): its proxy queue holds NCCL_NET_MAX_REQUESTS x maxRecvs
// ops per peer, so at most that many ops to one peer are in flight.
constexpr int kGinMaxRecvs = 8;
constexpr int kMaxOpsPerPeer = NCCL_NET_MAX_REQUESTS * kGinMaxRecvs;
constexpr int kWrsPerOp = 2;       // a write and an atomic (puts above kVerbsMaxWriteBytes need more)
constexpr int kMaxFlushesPerPeer = 16;
constexpr int kSendDepth = kWrsPerOp * kMaxOpsPerPeer + kMaxFlushesPerPeer;
constexpr int kPollBatch = 32;
constexpr int kConnectTimeoutMsDefault = 60000;
constexpr int kPollIntervalMs = 1;
constexpr int kRegAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
constexpr size_t kHostWordsAlign = 64;
// RDMA reads and atomics a QP keeps in flight as requester and accepts as responder (signals are
// atomics: with 1, each waits for the previous one's round trip). Capped by the device; both ends
// compute it alike (homogeneous NICs assumed, as NCCL's IB transport does).
constexpr int kGinMaxRdAtomic = 16;

const verbs::VerbsApi* gApi = nullptr;
verbs::Settings gSettings;
const std::vector<verbs::Port>* gPorts = nullptr;

struct Context;

struct Request {
  enum Kind { Put, PutSignal, Signal, Get, Flush } kind = Put;
  int peer = 0;
  int wrs = 0;  // send work requests of the op (their SQ slots free at its completion)
  size_t bytes = 0;
  bool done = false;
  bool failed = false;
};

const char* kindName(Request::Kind k) {
  switch (k) {
    case Request::Put: return "RDMA write (put)";
    case Request::PutSignal: return "RDMA write + atomic fetch-add (put with signal)";
    case Request::Signal: return "atomic fetch-add (signal)";
    case Request::Get: return "RDMA read (get)";
    case Request::Flush: return "RDMA read (flush)";
  }
  return "?";
}

// Names of the work completion statuses an RC QP reports (no ibv_wc_status_str: not loaded).
std::string wcStatusName(int s) {
  switch (s) {
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "flushed (QP in error)";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded (peer gone?)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "receiver-not-ready retry exceeded";
    default: return "status " + std::to_string(s);
  }
}

struct Peer {
  ibv_qp* qp = nullptr;  // for this rank: the loopback QP
  int fd = -1;           // out-of-band socket (-1 for this rank)
  int outstanding = 0;   // send work requests posted and not yet completed
  verbs::ConnInfo remote{};
};

struct Context {
  int rank = 0;
  int nRanks = 0;
  int context = 0;
  int dev = 0;
  const verbs::Port* port = nullptr;
  verbs::ServiceLevel service;
  int maxRdAtomic = 1;
  ibv_cq* cq = nullptr;
  std::vector<Peer> peers;
  Registry registry{1, 0};
  std::vector<ibv_mr*> mrs;  // by registration index (null after deregMrSym)
  uint64_t* words = nullptr;  // [0] flush word (peers read it), [1] atomic sink, [2] read sink
  ibv_mr* wordsMr = nullptr;
  verbs::ConnInfo local{};
  std::set<Request*> requests;
  std::mutex mutex;
  std::string error;
};

struct ListenComm {
  int fd = -1;
  int dev = 0;
  int context = 0;
};

int connectTimeoutMs() { return static_cast<int>(envInt("EPX_GIN_CONNECT_TIMEOUT_MS", kConnectTimeoutMsDefault)); }

std::string where(const Context* c) {
  return c->port ? c->port->facts.device + ":" + std::to_string(c->port->facts.port) : std::string("?");
}

// Records the context's first error (later calls fail at once) and WARNs once.
ncclResult_t fail(Context* c, const std::string& what, ncclResult_t r = ncclSystemError) {
  std::string text = "GIN/EPX-verbs rank " + std::to_string(c->rank) + ": " + what;
  if (c->error.empty()) {
    c->error = what;
    EPX_WARN(NCCL_NET, "%s", text.c_str());
  }
  return r;
}

// --- topology: the GPU's rail ---------------------------------------------------------------

struct RailFacts {
  bool ok = false;
  topo::Topology topology;
  topo::RailPlan plan;
};

const RailFacts& railFacts() {
  static std::once_flag once;
  static RailFacts f;
  std::call_once(once, [] {
    auto t = topo::loadLive();
    if (!t.ok()) {
      EPX_INFO(NCCL_NET, "GIN/EPX-verbs: topology discovery failed (%s); NCCL's device choice is kept", t.error.c_str());
      return;
    }
    f.topology = t.value;
    f.plan = topo::assignRails(f.topology);
    f.ok = true;
  });
  return f;
}

// The GPU of the calling thread's CUDA context (NCCL calls listen with the comm's device
// current), as a bus id; "" without CUDA (the CPU tests).
std::string currentGpuBusId() {
  const CudaDriver* cu = cudaDriver(nullptr);
  if (cu == nullptr) return {};
  CUdevice dev = 0;
  if (cu->cuCtxGetDevice(&dev) != CUDA_SUCCESS) return {};
  char busId[32] = {};
  if (cu->cuDeviceGetPCIBusId(busId, sizeof busId, dev) != CUDA_SUCCESS) return {};
  return busId;
}

RailChoice choosePort(int ncclDev) {
  const std::string busId = currentGpuBusId();
  if (busId.empty()) return RailChoice{ncclDev, "no CUDA device current: NCCL's device " + std::to_string(ncclDev)};
  const RailFacts& f = railFacts();
  if (!f.ok) return RailChoice{ncclDev, "no topology: NCCL's device " + std::to_string(ncclDev)};
  std::vector<PortName> names;
  for (const verbs::Port& p : *gPorts) names.push_back(PortName{p.facts.device, p.facts.port});
  return choosePortByRail(f.topology, f.plan, gpuIndexByBusId(f.topology, busId), names, ncclDev);
}

// --- QPs -------------------------------------------------------------------------------------

bool toInit(ibv_qp* qp, int port) {
  ibv_qp_attr a;
  int mask = 0;
  verbs::initAttr(port, &a, &mask, verbs::kGinQpAccess);
  return gApi->modifyQp(qp, &a, mask) == 0;
}

// RTR then RTS towards `remote` (this QP's peer), with the context's SL/TC.
std::string bringUp(Context* c, ibv_qp* qp, const verbs::ConnInfo& remote) {
  if (std::string e = verbs::validateConnInfo(remote, c->local); !e.empty()) return e;
  verbs::QpPath path = verbs::makeQpPath(gSettings, c->local, remote, c->service);
  path.maxRdAtomic = c->maxRdAtomic;
  ibv_qp_attr a;
  int mask = 0;
  verbs::rtrAttr(path, c->port->facts.port, remote.qpn[0], &a, &mask);
  if (gApi->modifyQp(qp, &a, mask) != 0) return "ibv_modify_qp to RTR failed";
  verbs::rtsAttr(path, c->local.psn, &a, &mask);
  if (gApi->modifyQp(qp, &a, mask) != 0) return "ibv_modify_qp to RTS failed";
  return {};
}

void destroy(Context* c) {
  if (c == nullptr) return;
  for (Peer& p : c->peers) {
    if (p.qp) gApi->destroyQp(p.qp);
    if (p.fd >= 0) ::close(p.fd);
  }
  for (ibv_mr* mr : c->mrs)
    if (mr) gApi->deregMr(mr);
  if (c->wordsMr) gApi->deregMr(c->wordsMr);
  if (c->cq) gApi->destroyCq(c->cq);
  std::free(c->words);
  for (Request* r : c->requests) delete r;
  delete c;
}

// CQ, one QP per rank (INIT), the flush/sink words; fills c->local.
std::string createResources(Context* c) {
  ibv_device_attr attr{};
  if (gApi->queryDevice(c->port->context, &attr) != 0) return "ibv_query_device failed on " + where(c);
  // Signals are RDMA atomics. The kernel driver switches the NIC to host-endian atomics where it
  // can; a NIC without atomics cannot carry GIN signals.
  if (attr.atomic_cap == IBV_ATOMIC_NONE)
    return where(c) + " does not support RDMA atomics (atomic_cap NONE); GIN signals are atomic fetch-adds";
  c->maxRdAtomic = std::max(1, std::min({kGinMaxRdAtomic, attr.max_qp_rd_atom, attr.max_qp_init_rd_atom}));
  int cqe = c->nRanks * kSendDepth;
  if (attr.max_cqe > 0 && cqe > attr.max_cqe) cqe = attr.max_cqe;
  c->cq = gApi->createCq(c->port->context, cqe, nullptr, nullptr, 0);
  if (!c->cq) return "ibv_create_cq (" + std::to_string(cqe) + " entries) failed on " + where(c);
  c->words = static_cast<uint64_t*>(std::aligned_alloc(kHostWordsAlign, kHostWordsAlign));
  if (!c->words) return "out of host memory";
  std::memset(c->words, 0, kHostWordsAlign);
  c->wordsMr = gApi->regMr(c->port->pd, c->words, kHostWordsAlign, kRegAccess);
  if (!c->wordsMr) return "ibv_reg_mr of the flush word failed on " + where(c);
  static std::mt19937 rng{std::random_device{}()};
  verbs::ConnInfo& l = c->local;
  std::memset(&l, 0, sizeof l);
  l.nQps = 1;
  l.ethernet = c->port->facts.ethernet;
  l.lid = c->port->lid;
  l.mtu = static_cast<uint8_t>(c->port->activeMtu);
  l.gidIndex = static_cast<uint8_t>(c->port->gidIndex);
  std::memcpy(l.gid, c->port->gid, sizeof l.gid);
  l.psn = rng() & 0xffffff;
  l.fifoDepth = kGinConnInfoDepth;
  l.ctrlAddr = reinterpret_cast<uint64_t>(c->words);
  l.ctrlRkey = c->wordsMr->rkey;
  for (int j = 0; j < c->nRanks; ++j) {
    ibv_qp_init_attr ia;
    verbs::rcQpInitAttr(c->cq, kSendDepth, 0, 0, &ia);
    ibv_qp* qp = gApi->createQp(c->port->pd, &ia);
    if (!qp) return "ibv_create_qp for rank " + std::to_string(j) + " failed on " + where(c);
    c->peers[static_cast<size_t>(j)].qp = qp;
    if (!toInit(qp, c->port->facts.port))
      return "ibv_modify_qp to INIT (QP for rank " + std::to_string(j) + ") failed on " + where(c);
  }
  return {};
}

verbs::ConnInfo infoFor(const Context* c, int peer) {
  verbs::ConnInfo i = c->local;
  i.qpn[0] = c->peers[static_cast<size_t>(peer)].qp->qp_num;
  verbs::sealConnInfo(i);
  return i;
}

// --- completions -----------------------------------------------------------------------------

ncclResult_t poll(Context* c) {
  ibv_wc wcs[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(c->cq, kPollBatch, wcs);
    if (n < 0) return fail(c, "ibv_poll_cq failed on " + where(c));
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      auto* r = reinterpret_cast<Request*>(wc.wr_id);
      if (r == nullptr || c->requests.count(r) == 0) continue;
      if (wc.status != IBV_WC_SUCCESS) {
        if (!r->failed) {
          r->failed = true;
          char vendor[16];
          snprintf(vendor, sizeof vendor, "0x%x", wc.vendor_err);
          fail(c, std::string(kindName(r->kind)) + " of " + std::to_string(r->bytes) + " bytes to rank " +
                      std::to_string(r->peer) + " failed: " + wcStatusName(wc.status) + " (vendor error " + vendor +
                      ") on " + where(c),
               ncclRemoteError);
        }
        continue;
      }
      if (r->done) continue;
      r->done = true;  // only the op's last request is signalled: the whole op is complete
      c->peers[static_cast<size_t>(r->peer)].outstanding -= r->wrs;
    }
    if (n < kPollBatch) return ncclSuccess;
  }
}

ncclResult_t postOp(Context* c, int peer, const std::vector<VerbsWr>& plan, std::unique_ptr<Request> req,
                    void** request) {
  Peer& p = c->peers[static_cast<size_t>(peer)];
  const int n = static_cast<int>(plan.size());
  if (p.outstanding + n > kSendDepth) {
    if (ncclResult_t r = poll(c); r != ncclSuccess) return r;
    if (p.outstanding + n > kSendDepth)
      return fail(c, "send queue to rank " + std::to_string(peer) + " is full (" + std::to_string(p.outstanding) +
                         " work requests in flight, depth " + std::to_string(kSendDepth) + ")",
                  ncclInternalError);
  }
  std::vector<ibv_sge> sges(plan.size());
  std::vector<ibv_send_wr> wrs(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const VerbsWr& w = plan[i];
    ibv_send_wr& wr = wrs[i];
    std::memset(&wr, 0, sizeof wr);
    wr.wr_id = reinterpret_cast<uint64_t>(req.get());  // errors of any request name the op
    sges[i] = ibv_sge{w.localAddr, w.length, w.lkey};
    wr.sg_list = &sges[i];
    wr.num_sge = w.length > 0 ? 1 : 0;
    wr.send_flags = w.signaled ? IBV_SEND_SIGNALED : 0;
    wr.next = i + 1 < plan.size() ? &wrs[i + 1] : nullptr;
    switch (w.kind) {
      case VerbsWr::Write:
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = w.remoteAddr;
        wr.wr.rdma.rkey = w.rkey;
        break;
      case VerbsWr::FetchAdd:
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = w.remoteAddr;
        wr.wr.atomic.rkey = w.rkey;
        wr.wr.atomic.compare_add = w.add;
        break;
      case VerbsWr::Read:
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = w.remoteAddr;
        wr.wr.rdma.rkey = w.rkey;
        break;
    }
  }
  req->peer = peer;
  req->wrs = n;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(p.qp, wrs.data(), &bad) != 0)
    return fail(c, std::string("ibv_post_send (") + kindName(req->kind) + " to rank " + std::to_string(peer) +
                       ") failed on " + where(c));
  p.outstanding += n;
  c->requests.insert(req.get());
  *request = req.release();
  return ncclSuccess;
}

// --- connect: the out-of-band full mesh --------------------------------------------------------

struct Link {
  enum Stage { Connecting, SendHello, RecvHello, Done } stage = Connecting;
  int fd = -1;
  size_t done = 0;
  GinHello out{}, in{};
};

// Accepted sockets whose hello has not fully arrived yet.
struct Pending {
  int fd = -1;
  size_t done = 0;
  GinHello in{};
};

void closeAll(std::vector<Link>& links, std::vector<Pending>& pending) {
  for (Link& l : links)
    if (l.fd >= 0) ::close(l.fd), l.fd = -1;
  for (Pending& p : pending)
    if (p.fd >= 0) ::close(p.fd), p.fd = -1;
}

GinHello helloFor(const Context* c, int peer) {
  GinHello h{};
  h.magic = kGinHelloMagic;
  h.rank = static_cast<uint32_t>(c->rank);
  h.nRanks = static_cast<uint32_t>(c->nRanks);
  h.context = static_cast<uint32_t>(c->context);
  h.info = infoFor(c, peer);
  return h;
}

// Swaps hellos with every peer; on success the sockets move into c->peers[].fd and their
// ConnInfo into c->peers[].remote.
ncclResult_t meshHandshake(Context* c, void* handles[], int listenFd) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(connectTimeoutMs());
  std::vector<Link> links(static_cast<size_t>(c->nRanks));
  std::vector<Pending> pending;
  std::string why;
  for (int j = c->rank + 1; j < c->nRanks; ++j) {
    auto* h = static_cast<const verbs::Handle*>(handles[j]);
    if (std::string e = verbs::validateHandle(*h); !e.empty()) {
      closeAll(links, pending);
      return fail(c, "rank " + std::to_string(j) + "'s handle: " + e, ncclInvalidArgument);
    }
    Link& l = links[static_cast<size_t>(j)];
    if ((l.fd = verbs::oobConnect(*h, &why)) < 0) {
      closeAll(links, pending);
      return fail(c, "connecting to rank " + std::to_string(j) + ": " + why, ncclRemoteError);
    }
    l.out = helloFor(c, j);
  }
  for (int j = 0; j < c->rank; ++j) links[static_cast<size_t>(j)].stage = Link::Connecting;  // filled by accept
  auto linkFailed = [&](int j, const std::string& e) {
    closeAll(links, pending);
    return fail(c, "handshake with rank " + std::to_string(j) + ": " + e, ncclRemoteError);
  };
  for (;;) {
    bool all = true, moved = false;
    for (int j = 0; j < c->nRanks; ++j) {
      if (j == c->rank) continue;
      Link& l = links[static_cast<size_t>(j)];
      int r = 0;
      switch (l.stage) {
        case Link::Connecting:
          if (j < c->rank) break;  // waits for rank j to connect
          r = verbs::oobConnected(l.fd, &why);
          if (r < 0) return linkFailed(j, why);
          if (r == 1) l.stage = Link::SendHello, l.done = 0, moved = true;
          break;
        case Link::SendHello:
          r = verbs::oobSend(l.fd, &l.out, sizeof l.out, &l.done, &why);
          if (r < 0) return linkFailed(j, why);
          if (r == 1) {
            l.done = 0, moved = true;
            l.stage = j > c->rank ? Link::RecvHello : Link::Done;
          }
          break;
        case Link::RecvHello:
          r = verbs::oobRecv(l.fd, &l.in, sizeof l.in, &l.done, &why);
          if (r < 0) return linkFailed(j, why);
          if (r == 1) {
            if (std::string e = validateHello(l.in, j, c->rank, c->nRanks, c->context); !e.empty())
              return linkFailed(j, e);
            l.stage = Link::Done, moved = true;
          }
          break;
        case Link::Done:
          break;
      }
      all = all && l.stage == Link::Done;
    }
    // Ranks below this one connect to it; their hello says which one each is.
    for (int fd; (fd = verbs::oobAccept(listenFd, &why)) >= 0;) pending.push_back(Pending{fd, 0, {}}), moved = true;
    if (!why.empty()) {
      closeAll(links, pending);
      return fail(c, "accepting peers: " + why);
    }
    for (auto it = pending.begin(); it != pending.end();) {
      const int r = verbs::oobRecv(it->fd, &it->in, sizeof it->in, &it->done, &why);
      if (r == 0) {
        ++it;
        continue;
      }
      if (r < 0) {
        closeAll(links, pending);
        return fail(c, "a peer's hello: " + why, ncclRemoteError);
      }
      const int j = static_cast<int>(it->in.rank);
      std::string e = validateHello(it->in, -1, c->rank, c->nRanks, c->context);
      if (e.empty() && j > c->rank) e = "rank " + std::to_string(j) + " connected, but ranks above this one are connected to";
      if (e.empty() && links[static_cast<size_t>(j)].fd >= 0) e = "rank " + std::to_string(j) + " connected twice";
      if (!e.empty()) {
        closeAll(links, pending);
        return fail(c, "a peer's hello: " + e, ncclRemoteError);
      }
      Link& l = links[static_cast<size_t>(j)];
      l.fd = it->fd;
      l.in = it->in;
      l.out = helloFor(c, j);
      l.stage = Link::SendHello;
      l.done = 0;
      it = pending.erase(it);
      moved = true;
      all = false;
    }
    if (all && pending.empty()) break;
    if (Clock::now() > deadline) {
      std::string missing;
      for (int j = 0; j < c->nRanks; ++j)
        if (j != c->rank && links[static_cast<size_t>(j)].stage != Link::Done)
          missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      closeAll(links, pending);
      return fail(c, "no handshake with rank(s) " + missing + " within " + std::to_string(connectTimeoutMs()) +
                         " ms (EPX_GIN_CONNECT_TIMEOUT_MS)",
                  ncclRemoteError);
    }
    if (!moved) usleep(kPollIntervalMs * 1000);
  }
  for (int j = 0; j < c->nRanks; ++j) {
    if (j == c->rank) continue;
    Peer& p = c->peers[static_cast<size_t>(j)];
    p.fd = links[static_cast<size_t>(j)].fd;
    links[static_cast<size_t>(j)].fd = -1;
    p.remote = links[static_cast<size_t>(j)].in.info;
  }
  return ncclSuccess;
}

// Sends `out` (size bytes) to every peer and receives `size` bytes from each into in[j], bounded.
// "" on success, else why not (the caller records it: regMrSym runs beside the progress thread).
std::string exchange(const Context* c, const void* out, void* in, size_t size, const char* what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(connectTimeoutMs());
  std::vector<size_t> sent(static_cast<size_t>(c->nRanks), 0), got(static_cast<size_t>(c->nRanks), 0);
  std::vector<bool> sendDone(static_cast<size_t>(c->nRanks), false), recvDone(static_cast<size_t>(c->nRanks), false);
  std::string why;
  for (;;) {
    bool all = true, moved = false;
    for (int j = 0; j < c->nRanks; ++j) {
      if (j == c->rank) continue;
      const size_t k = static_cast<size_t>(j);
      const int fd = c->peers[k].fd;
      if (!sendDone[k]) {
        const int r = verbs::oobSend(fd, out, size, &sent[k], &why);
        if (r < 0) return std::string("sending ") + what + " to rank " + std::to_string(j) + ": " + why;
        if (r == 1) sendDone[k] = true, moved = true;
      }
      if (!recvDone[k]) {
        const int r = verbs::oobRecv(fd, static_cast<char*>(in) + k * size, size, &got[k], &why);
        if (r < 0) return std::string("receiving ") + what + " from rank " + std::to_string(j) + ": " + why;
        if (r == 1) recvDone[k] = true, moved = true;
      }
      all = all && sendDone[k] && recvDone[k];
    }
    if (all) return {};
    if (Clock::now() > deadline) {
      std::string missing;
      for (int j = 0; j < c->nRanks; ++j)
        if (j != c->rank && !(sendDone[static_cast<size_t>(j)] && recvDone[static_cast<size_t>(j)]))
          missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      return std::string(what) + " with rank(s) " + missing + " not swapped within " +
             std::to_string(connectTimeoutMs()) + " ms (EPX_GIN_CONNECT_TIMEOUT_MS)";
    }
    if (!moved) usleep(kPollIntervalMs * 1000);
  }
}

}  // namespace

bool verbsGinAvailable(std::string* why) {
  if (net::active() != net::Transport::Verbs) {
    *why = "the net transport is not verbs (no usable RDMA port, or EPX_NET_TRANSPORT=socket)";
    return false;
  }
  gApi = verbs::verbsApi(why);
  if (!gApi) return false;
  if (std::string e = verbs::readSettings(::getenv, &gSettings); !e.empty()) {
    *why = e;
    return false;
  }
  gPorts = &verbs::verbsPorts(gSettings, why);
  return !gPorts->empty();
}

ncclResult_t verbsGinDevices(int* count) { return net::devices(count); }

ncclResult_t verbsGinGetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (ncclResult_t r = net::getProperties(dev, props); r != ncclSuccess) return r;
  props->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->maxRecvs = kGinMaxRecvs;  // power of 2: NCCL's proxy queue is 32 * maxRecvs per peer
  return ncclSuccess;
}

ncclResult_t verbsGinListen(int context, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  if (!gPorts || dev < 0 || dev >= static_cast<int>(gPorts->size())) {
    EPX_WARN(NCCL_NET, "GIN/EPX-verbs: listen on device %d, but %zu verbs port(s) exist", dev, gPorts ? gPorts->size() : 0);
    return ncclInvalidUsage;
  }
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::string why;
  const int fd = verbs::oobListen(static_cast<verbs::Handle*>(handle), &why);
  if (fd < 0) {
    EPX_WARN(NCCL_NET, "GIN/EPX-verbs: cannot listen for GIN context %d: %s", context, why.c_str());
    return ncclSystemError;
  }
  const RailChoice rail = choosePort(dev);
  EPX_INFO(NCCL_NET, "GIN/EPX-verbs: context %d uses %s:%d (%s)", context,
           (*gPorts)[static_cast<size_t>(rail.dev)].facts.device.c_str(), (*gPorts)[static_cast<size_t>(rail.dev)].facts.port,
           rail.why.c_str());
  auto* l = new ListenComm();
  l->fd = fd;
  l->dev = rail.dev;
  l->context = context;
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t verbsGinConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm) {
  *collComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || gPorts == nullptr || nRanks < 1 || rank < 0 || rank >= nRanks) return ncclInternalError;
  auto* c = new Context();
  c->rank = rank;
  c->nRanks = nRanks;
  c->context = l->context;
  c->dev = l->dev;
  c->port = &(*gPorts)[static_cast<size_t>(l->dev)];
  c->registry = Registry(nRanks, rank);
  c->peers.resize(static_cast<size_t>(nRanks));
  auto cleanup = [&](ncclResult_t r) {
    destroy(c);
    return r;
  };
  topo::SlPolicy policy;
  if (std::string e = verbs::resolveConnectionPolicy(NCCL_NET_TRAFFIC_CLASS_UNDEF, ::getenv, &policy); !e.empty())
    return cleanup(fail(c, e, ncclInvalidUsage));
  c->service = verbs::chooseServiceLevel(c->port->facts.ethernet, policy);
  if (std::string e = createResources(c); !e.empty()) return cleanup(fail(c, e));
  if (ncclResult_t r = meshHandshake(c, handles, l->fd); r != ncclSuccess) return cleanup(r);
  Peer& self = c->peers[static_cast<size_t>(rank)];
  self.remote = infoFor(c, rank);  // the loopback QP is its own peer
  for (int j = 0; j < nRanks; ++j) {
    Peer& p = c->peers[static_cast<size_t>(j)];
    if (std::string e = bringUp(c, p.qp, p.remote); !e.empty())
      return cleanup(fail(c, "QP to rank " + std::to_string(j) + " on " + where(c) + ": " + e, ncclRemoteError));
  }
  // Every QP is in RTS on both ends before anyone posts: one byte each way.
  uint8_t ready = 1;
  std::vector<uint8_t> readies(static_cast<size_t>(nRanks), 0);
  if (std::string e = exchange(c, &ready, readies.data(), 1, "the ready byte"); !e.empty())
    return cleanup(fail(c, e, ncclRemoteError));
  EPX_INFO(NCCL_INIT | NCCL_NET, "GIN/EPX-verbs: rank %d context %d connected to %d rank(s) on %s (%s), %s", rank,
           c->context, nRanks, where(c).c_str(), c->port->facts.ethernet ? "RoCE" : "InfiniBand", c->service.why.c_str());
  *collComm = c;
  return ncclSuccess;
}

ncclResult_t verbsGinRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                              uint64_t mrFlags, void** mhandle, void** ginHandle) {
  (void)mrFlags;  // FORCE_SO: no region is registered with relaxed ordering (see docs/plugins.md)
  *mhandle = *ginHandle = nullptr;
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  Registration* reg = nullptr;
  GinRegInfo mine{};
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (!c->error.empty()) return ncclSystemError;
    ibv_mr* mr = nullptr;
    if (fd >= 0 && gApi->regDmabufMr)
      mr = gApi->regDmabufMr(c->port->pd, offset, size, reinterpret_cast<uint64_t>(data), fd, kRegAccess);
    else
      mr = gApi->regMr(c->port->pd, data, size, kRegAccess);
    if (!mr)
      return fail(c, std::string(fd >= 0 && gApi->regDmabufMr ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr") + " of " +
                         std::to_string(size) + " bytes (" + (type == NCCL_PTR_CUDA ? "CUDA" : "host") + ") failed on " +
                         where(c));
    reg = c->registry.add(reinterpret_cast<uintptr_t>(data), size, type == NCCL_PTR_CUDA ? Placement::Device : Placement::Host);
    reg->localKey = mr->lkey;
    reg->peerKey[static_cast<size_t>(c->rank)] = mr->rkey;
    c->mrs.push_back(mr);
    mine.index = reg->index;
    mine.addr = reinterpret_cast<uint64_t>(data);
    mine.size = size;
    mine.rkey = mr->rkey;
    sealRegInfo(mine);
  }
  // The sockets are used by regMrSym only (NCCL calls it on one thread): no lock while waiting.
  std::vector<GinRegInfo> theirs(static_cast<size_t>(c->nRanks));
  const std::string swapped = exchange(c, &mine, theirs.data(), sizeof(GinRegInfo), "registration");
  std::lock_guard<std::mutex> lock(c->mutex);
  if (!swapped.empty()) return fail(c, "registration " + std::to_string(reg->index) + ": " + swapped, ncclRemoteError);
  for (int j = 0; j < c->nRanks; ++j) {
    if (j == c->rank) continue;
    const GinRegInfo& t = theirs[static_cast<size_t>(j)];
    if (std::string e = validateRegInfo(t, reg->index); !e.empty())
      return fail(c, "registration " + std::to_string(reg->index) + " from rank " + std::to_string(j) + ": " + e,
                  ncclRemoteError);
    reg->peerBase[static_cast<size_t>(j)] = static_cast<uintptr_t>(t.addr);
    reg->peerSize[static_cast<size_t>(j)] = static_cast<size_t>(t.size);
    reg->peerKey[static_cast<size_t>(j)] = t.rkey;
  }
  EPX_INFO(NCCL_NET, "GIN/EPX-verbs rank %d: registered region %u (%s, %zu bytes%s)", c->rank, reg->index,
           type == NCCL_PTR_CUDA ? "CUDA" : "host", size, fd >= 0 && gApi->regDmabufMr ? ", DMA-BUF" : "");
  *mhandle = *ginHandle = reg;  // the same pointer: NCCL passes either back
  return ncclSuccess;
}

ncclResult_t verbsGinDeregMrSym(void* collComm, void* mhandle) {
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  std::lock_guard<std::mutex> lock(c->mutex);
  Registration* reg = c->registry.find(mhandle);
  if (reg == nullptr) {
    EPX_WARN(NCCL_NET, "GIN/EPX-verbs rank %d: deregMrSym of an unknown handle", c->rank);
    return ncclInternalError;
  }
  ibv_mr*& mr = c->mrs[reg->index];
  const int rc = mr ? gApi->deregMr(mr) : 0;
  mr = nullptr;
  c->registry.remove(mhandle);
  if (rc != 0) {
    EPX_WARN(NCCL_NET, "GIN/EPX-verbs rank %d: ibv_dereg_mr of region %u failed (%d)", c->rank, reg->index, rc);
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t verbsGinCloseColl(void* collComm) {
  destroy(static_cast<Context*>(collComm));
  return ncclSuccess;
}

ncclResult_t verbsGinCloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr) return ncclSuccess;
  if (l->fd >= 0) ::close(l->fd);
  delete l;
  return ncclSuccess;
}

ncclResult_t verbsGinPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                         void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff, void* signalMhandle,
                         uint64_t signalValue, uint32_t signalOp, void** request) {
  *request = nullptr;
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  std::lock_guard<std::mutex> lock(c->mutex);
  if (!c->error.empty()) return ncclSystemError;
  GinOp op;
  op.srcOff = srcOff;
  op.src = srcMhandle;
  op.size = size;
  op.dstOff = dstOff;
  op.dst = dstMhandle;
  op.peer = static_cast<int>(std::min<uint32_t>(rank, static_cast<uint32_t>(INT32_MAX)));
  op.withSignal = withSignal;
  op.signalOff = signalOff;
  op.signal = signalMhandle;
  op.signalValue = signalValue;
  op.signalOp = signalOp;
  std::vector<VerbsWr> plan;
  const AtomicSink sink{reinterpret_cast<uint64_t>(&c->words[1]), c->wordsMr->lkey};
  if (std::string bad = planGinOp(c->registry, op, sink, &plan); !bad.empty())
    return fail(c, std::string(withSignal ? "GIN put with signal" : "GIN put") + " of " + std::to_string(size) +
                       " bytes to rank " + std::to_string(rank) + ": " + bad,
                ncclInternalError);
  auto req = std::make_unique<Request>();
  req->kind = !withSignal ? Request::Put : size > 0 ? Request::PutSignal : Request::Signal;
  req->bytes = size;
  return postOp(c, op.peer, plan, std::move(req), request);
}

ncclResult_t verbsGinGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                         void* localMhandle, uint32_t rank, void** request) {
  *request = nullptr;
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  std::lock_guard<std::mutex> lock(c->mutex);
  if (!c->error.empty()) return ncclSystemError;
  GinGet get;
  get.remoteOff = remoteOff;
  get.remote = remoteMhandle;
  get.size = size;
  get.localOff = localOff;
  get.local = localMhandle;
  get.peer = static_cast<int>(std::min<uint32_t>(rank, static_cast<uint32_t>(INT32_MAX)));
  std::vector<VerbsWr> plan;
  if (std::string bad = planGinGet(c->registry, get, &plan); !bad.empty())
    return fail(c, "GIN get of " + std::to_string(size) + " bytes from rank " + std::to_string(rank) + ": " + bad,
                ncclInternalError);
  auto req = std::make_unique<Request>();
  req->kind = Request::Get;
  req->bytes = size;
  return postOp(c, get.peer, plan, std::move(req), request);
}

ncclResult_t verbsGinFlush(void* collComm, uint32_t rank, void** request) {
  *request = nullptr;
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  std::lock_guard<std::mutex> lock(c->mutex);
  if (!c->error.empty()) return ncclSystemError;
  if (rank >= static_cast<uint32_t>(c->nRanks))
    return fail(c, "flush of rank " + std::to_string(rank) + " out of range", ncclInternalError);
  const Peer& p = c->peers[rank];
  VerbsWr read;
  read.kind = VerbsWr::Read;
  read.localAddr = reinterpret_cast<uint64_t>(&c->words[2]);
  read.length = sizeof(uint64_t);
  read.lkey = c->wordsMr->lkey;
  read.remoteAddr = p.remote.ctrlAddr;
  read.rkey = p.remote.ctrlRkey;
  read.signaled = true;
  auto req = std::make_unique<Request>();
  req->kind = Request::Flush;
  return postOp(c, static_cast<int>(rank), {read}, std::move(req), request);
}

ncclResult_t verbsGinTest(void* collComm, void* request, int* done) {
  *done = 0;
  auto* c = static_cast<Context*>(collComm);
  auto* r = static_cast<Request*>(request);
  if (c == nullptr) return ncclInternalError;
  std::lock_guard<std::mutex> lock(c->mutex);
  if (r == nullptr || c->requests.count(r) == 0) return fail(c, "test of a request this context does not hold", ncclInternalError);
  if (ncclResult_t res = poll(c); res != ncclSuccess) return res;
  if (r->failed) return ncclRemoteError;  // kept until closeColl (later completions may still name it)
  if (!r->done) return c->error.empty() ? ncclSuccess : ncclRemoteError;
  c->requests.erase(r);
  delete r;
  *done = 1;
  return ncclSuccess;
}

ncclResult_t verbsGinProgress(void* collComm) {
  auto* c = static_cast<Context*>(collComm);
  if (c == nullptr) return ncclInternalError;
  std::unique_lock<std::mutex> lock(c->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return ncclSuccess;
  if (!c->error.empty()) return ncclRemoteError;
  return poll(c);
}

ibv_qp* verbsGinQpForTesting(void* collComm, int rank) {
  auto* c = static_cast<Context*>(collComm);
  return c->peers[static_cast<size_t>(rank)].qp;
}

size_t verbsGinRequestsForTesting(void* collComm) {
  auto* c = static_cast<Context*>(collComm);
  std::lock_guard<std::mutex> lock(c->mutex);
  return c->requests.size();
}

}  // namespace epx::plugin::gin
