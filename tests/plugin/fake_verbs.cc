#include "fake_verbs.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <endian.h>

#include <mutex>

namespace epx::test {

namespace {

FakeFabric gFabric;
std::recursive_mutex gMutex;
uint32_t gNextQpn = 0x100;
uint32_t gNextKey = 0x1000;

struct FakeContext {
  ibv_context ctx;  // first member
  int device = 0;
};

void misuse(const std::string& what) { gFabric.errors.push_back(what); }

const FakeDeviceSpec& specOf(ibv_context* c) { return gFabric.devices[reinterpret_cast<FakeContext*>(c)->device]; }

void complete(ibv_cq* cq, const ibv_wc& wc) {
  auto* f = reinterpret_cast<FakeCq*>(cq);
  if (static_cast<int>(f->wcs.size()) >= f->capacity) {
    f->overflowed = true;
    misuse("CQ overflow");
    return;
  }
  f->wcs.push_back(wc);
}

ibv_wc wcOf(FakeQp* q, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode op) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = q->qp.qp_num;
  return wc;
}

// The registered range [addr, addr+len) under `key` with `access`, or null.
ibv_mr* checkKey(uint32_t key, uint64_t addr, size_t len, int access) {
  auto it = gFabric.mrs.find(key);
  if (it == gFabric.mrs.end()) return nullptr;
  ibv_mr* mr = it->second;
  const auto base = reinterpret_cast<uint64_t>(mr->addr);
  if (addr < base || addr + len > base + mr->length) return nullptr;
  if ((static_cast<int>(mr->handle) & access) != access) return nullptr;  // the fake keeps access flags in `handle`
  return mr;
}

// Runs one work request of QP `q` (already checked at post time: state, SGE count, inline size).
void execute(FakeQp* q, const ibv_send_wr* wr) {
  const size_t len = wr->num_sge ? wr->sg_list[0].length : 0;
  const uint64_t local = wr->num_sge ? wr->sg_list[0].addr : 0;
  const bool inl = wr->send_flags & IBV_SEND_INLINE;
  const bool atomic = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  ibv_wc_opcode op = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                     : atomic                        ? IBV_WC_FETCH_ADD
                                                     : IBV_WC_RDMA_WRITE;
  // Reads and atomics write into the local buffer: it needs local write access.
  const int localAccess = (wr->opcode == IBV_WR_RDMA_READ || atomic) ? IBV_ACCESS_LOCAL_WRITE : 0;
  if (q->destroyed) return;  // destroyed with work queued: nothing completes
  if (!inl && len && !checkKey(wr->sg_list[0].lkey, local, len, localAccess)) {
    complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_LOC_PROT_ERR, op));
    return;
  }
  auto dest = gFabric.qps.find(q->destQpn);
  FakeQp* d = dest == gFabric.qps.end() ? nullptr : dest->second;
  const bool signaled = wr->send_flags & IBV_SEND_SIGNALED;
  if (!d || d->destroyed || d->qp.state < IBV_QPS_RTR || d->destQpn != q->qp.qp_num) {
    complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_RETRY_EXC_ERR, op));
    return;
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (gFabric.failNextWrite) {
      gFabric.failNextWrite = false;
      complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_REM_ACCESS_ERR, op));
      return;
    }
    if (len && (!(d->access & IBV_ACCESS_REMOTE_WRITE) ||
                !checkKey(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_WRITE))) {
      complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_REM_ACCESS_ERR, op));
      return;
    }
    if (len) std::memmove(reinterpret_cast<void*>(wr->wr.rdma.remote_addr), reinterpret_cast<void*>(local), len);
    ++gFabric.writes;
    if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      ++gFabric.writesWithImm;
      if (d->recvs.empty()) {
        complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_RNR_RETRY_EXC_ERR, op));
        return;
      }
      ibv_wc r = wcOf(d, d->recvs.front(), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
      d->recvs.pop_front();
      r.imm_data = wr->imm_data;
      r.wc_flags = IBV_WC_WITH_IMM;
      r.byte_len = static_cast<uint32_t>(len);
      complete(d->qp.recv_cq, r);
    }
  } else if (wr->opcode == IBV_WR_RDMA_READ) {
    if (!(d->access & IBV_ACCESS_REMOTE_READ) ||
        !checkKey(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_READ)) {
      complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_REM_ACCESS_ERR, op));
      return;
    }
    if (len) std::memmove(reinterpret_cast<void*>(local), reinterpret_cast<void*>(wr->wr.rdma.remote_addr), len);
    ++gFabric.reads;
  } else {  // IBV_WR_ATOMIC_FETCH_AND_ADD (checked at post time)
    const uint64_t addr = wr->wr.atomic.remote_addr;
    if (!(d->access & IBV_ACCESS_REMOTE_ATOMIC) || addr % sizeof(uint64_t) != 0 ||
        !checkKey(wr->wr.atomic.rkey, addr, sizeof(uint64_t), IBV_ACCESS_REMOTE_ATOMIC)) {
      complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_REM_ACCESS_ERR, op));
      return;
    }
    auto* word = reinterpret_cast<uint64_t*>(addr);
    const uint64_t old = __atomic_fetch_add(word, wr->wr.atomic.compare_add, __ATOMIC_SEQ_CST);
    std::memcpy(reinterpret_cast<void*>(local), &old, sizeof old);
    ++gFabric.atomics;
  }
  if (signaled) complete(q->qp.send_cq, wcOf(q, wr->wr_id, IBV_WC_SUCCESS, op));
}

// A queued work request (deferred mode), with its one SGE and inline data copied.
struct Queued {
  ibv_send_wr wr;
  ibv_sge sge;
  std::vector<uint8_t> inlineData;
};
std::map<FakeQp*, std::deque<Queued>> gQueued;

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->qp.state != IBV_QPS_RTS) {
      misuse("post_send on a QP not in RTS");
      *bad = wr;
      return EINVAL;
    }
    if (wr->num_sge > 1) {
      misuse("more than one SGE");
      *bad = wr;
      return EINVAL;
    }
    const size_t len = wr->num_sge ? wr->sg_list[0].length : 0;
    if (wr->send_flags & IBV_SEND_INLINE) {
      ++gFabric.inlineWrites;
      if (static_cast<int>(len) > q->maxInline) {
        misuse("inline data larger than max_inline_data");
        *bad = wr;
        return EINVAL;
      }
    }
    const bool known = wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                       wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    if (!known) {
      misuse("opcode " + std::to_string(wr->opcode) + " not modelled");
      *bad = wr;
      return EINVAL;
    }
    if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD &&
        (len != sizeof(uint64_t) || (wr->send_flags & IBV_SEND_INLINE) || q->rts.max_rd_atomic < 1)) {
      misuse("atomic fetch-and-add needs one 8-byte SGE (not inline) and max_rd_atomic >= 1");
      *bad = wr;
      return EINVAL;
    }
    if (!gFabric.deferred) {
      execute(q, wr);
      continue;
    }
    Queued e;
    e.wr = *wr;
    e.wr.next = nullptr;
    if (wr->num_sge) {
      e.sge = wr->sg_list[0];
      if (wr->send_flags & IBV_SEND_INLINE) {  // inline data is copied at post time
        const auto* from = reinterpret_cast<const uint8_t*>(e.sge.addr);
        e.inlineData.assign(from, from + len);
      }
    }
    gQueued[q].push_back(std::move(e));
  }
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr; wr = wr->next) {
    if (q->qp.state == IBV_QPS_RESET || static_cast<int>(q->recvs.size()) >= q->maxRecv) {
      misuse("post_recv beyond max_recv_wr or in RESET");
      *bad = wr;
      return ENOMEM;
    }
    q->recvs.push_back(wr->wr_id);
  }
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* f = reinterpret_cast<FakeCq*>(cq);
  int i = 0;
  for (; i < n && !f->wcs.empty(); ++i) {
    wc[i] = f->wcs.front();
    f->wcs.pop_front();
  }
  return i;
}

ibv_device** getDeviceList(int* n) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  *n = static_cast<int>(gFabric.devices.size());
  auto** list = static_cast<ibv_device**>(std::calloc(*n + 1, sizeof(ibv_device*)));
  for (int i = 0; i < *n; ++i) {
    auto* d = static_cast<ibv_device*>(std::calloc(1, sizeof(ibv_device)));
    std::snprintf(d->name, sizeof d->name, "%s", gFabric.devices[i].name.c_str());
    d->node_type = IBV_NODE_CA;
    list[i] = d;
  }
  return list;
}

void freeDeviceList(ibv_device** list) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  for (int i = 0; list[i]; ++i) std::free(list[i]);
  std::free(list);
}

const char* getDeviceName(ibv_device* d) { return d->name; }

ibv_context* openDevice(ibv_device* d) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  for (size_t i = 0; i < gFabric.devices.size(); ++i)
    if (gFabric.devices[i].name == d->name) {
      auto* c = new FakeContext();
      c->device = static_cast<int>(i);
      c->ctx.device = nullptr;
      c->ctx.ops.post_send = postSend;
      c->ctx.ops.post_recv = postRecv;
      c->ctx.ops.poll_cq = pollCq;
      ++gFabric.openContexts;
      return &c->ctx;
    }
  return nullptr;
}

int closeDevice(ibv_context* c) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  --gFabric.openContexts;
  delete reinterpret_cast<FakeContext*>(c);
  return 0;
}

int queryDevice(ibv_context* c, ibv_device_attr* a) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  std::memset(a, 0, sizeof *a);
  a->phys_port_cnt = static_cast<uint8_t>(specOf(c).ports.size());
  a->node_guid = htobe64(specOf(c).nodeGuid);
  a->atomic_cap = specOf(c).atomics ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
  a->max_qp_rd_atom = a->max_qp_init_rd_atom = specOf(c).maxRdAtomic;
  return 0;
}

int queryPort(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  const auto& ports = specOf(c).ports;
  if (port < 1 || port > ports.size()) return EINVAL;
  const FakePortSpec& p = ports[port - 1];
  std::memset(a, 0, sizeof *a);
  a->state = p.active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->link_layer = p.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->lid = p.lid;
  a->active_mtu = static_cast<ibv_mtu>(p.activeMtu);
  a->gid_tbl_len = static_cast<int>(p.gids.size());
  a->active_speed = static_cast<uint8_t>(p.activeSpeed);
  a->active_width = static_cast<uint8_t>(p.activeWidth);
  return 0;
}

int queryGid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  const auto& ports = specOf(c).ports;
  if (port < 1 || port > ports.size() || index < 0 || index >= static_cast<int>(ports[port - 1].gids.size())) return EINVAL;
  std::memcpy(gid->raw, ports[port - 1].gids[index].data(), 16);
  return 0;
}

ibv_pd* allocPd(ibv_context* c) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* pd = new ibv_pd();
  pd->context = c;
  ++gFabric.livePds;
  return pd;
}

int deallocPd(ibv_pd* pd) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  --gFabric.livePds;
  delete pd;
  return 0;
}

ibv_cq* createCq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* f = new FakeCq();
  f->cq.context = c;
  f->cq.cqe = cqe;
  f->capacity = cqe;
  ++gFabric.liveCqs;
  return &f->cq;
}

int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  --gFabric.liveCqs;
  delete reinterpret_cast<FakeCq*>(cq);
  return 0;
}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* a) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq) {
    misuse("create_qp: not RC or no CQ");
    return nullptr;
  }
  auto* q = new FakeQp();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_num = gNextQpn++;
  q->maxRecv = static_cast<int>(a->cap.max_recv_wr);
  q->maxInline = static_cast<int>(a->cap.max_inline_data);
  gFabric.qps[q->qp.qp_num] = q;
  ++gFabric.liveQps;
  return &q->qp;
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  auto need = [&](int bits, const char* step) {
    if ((mask & bits) == bits) return true;
    misuse(std::string("modify_qp to ") + step + ": missing attribute mask bits");
    return false;
  };
  if (!(mask & IBV_QP_STATE)) return misuse("modify_qp without IBV_QP_STATE"), EINVAL;
  const FakeDeviceSpec& dev = specOf(qp->context);
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      if (q->qp.state != IBV_QPS_RESET || !need(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT")) return EINVAL;
      if (a->port_num < 1 || a->port_num > dev.ports.size()) return misuse("INIT: bad port"), EINVAL;
      q->port = a->port_num;
      q->access = a->qp_access_flags;
      break;
    case IBV_QPS_RTR: {
      if (q->qp.state != IBV_QPS_INIT ||
          !need(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR"))
        return EINVAL;
      const FakePortSpec& p = dev.ports[q->port - 1];
      if (p.ethernet) {
        if (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index >= p.gids.size() || a->ah_attr.grh.hop_limit == 0)
          return misuse("RTR on RoCE: no GRH, bad source GID index or zero hop limit"), EINVAL;
      } else if (a->ah_attr.dlid == 0) {
        return misuse("RTR on InfiniBand: no destination LID"), EINVAL;
      }
      if (a->path_mtu > p.activeMtu) return misuse("RTR: path MTU above the port's active MTU"), EINVAL;
      q->destQpn = a->dest_qp_num;
      q->rtr = *a;
      break;
    }
    case IBV_QPS_RTS:
      if (q->qp.state != IBV_QPS_RTR ||
          !need(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS"))
        return EINVAL;
      q->rts = *a;
      break;
    default:
      return misuse("modify_qp to an unmodelled state"), EINVAL;
  }
  q->qp.state = a->qp_state;
  return 0;
}

int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* q = reinterpret_cast<FakeQp*>(qp);
  q->destroyed = true;  // kept in the map: a peer's later write sees a dead QP
  gQueued.erase(q);     // its queued work never runs
  q->qp.state = IBV_QPS_ERR;
  --gFabric.liveQps;
  return 0;
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, int access) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  auto* mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = gNextKey++;
  mr->handle = static_cast<uint32_t>(access);  // the fake keeps the access flags here
  gFabric.mrs[mr->rkey] = mr;
  ++gFabric.liveMrs;
  return mr;
}

int deregMr(ibv_mr* mr) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  gFabric.mrs.erase(mr->rkey);
  --gFabric.liveMrs;
  delete mr;
  return 0;
}

plugin::verbs::VerbsApi makeApi() {
  plugin::verbs::VerbsApi a;
  a.getDeviceList = getDeviceList;
  a.freeDeviceList = freeDeviceList;
  a.getDeviceName = getDeviceName;
  a.openDevice = openDevice;
  a.closeDevice = closeDevice;
  a.queryDevice = queryDevice;
  a.queryPort = queryPort;
  a.queryGid = queryGid;
  a.allocPd = allocPd;
  a.deallocPd = deallocPd;
  a.createCq = createCq;
  a.destroyCq = destroyCq;
  a.createQp = createQp;
  a.modifyQp = modifyQp;
  a.destroyQp = destroyQp;
  a.regMr = regMr;
  a.regDmabufMr = nullptr;
  a.deregMr = deregMr;
  return a;
}

}  // namespace

FakeFabric& fakeFabric() { return gFabric; }

bool fakeStep(uint64_t pick) {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  std::vector<FakeQp*> busy;
  for (auto& [q, work] : gQueued)
    if (!work.empty()) busy.push_back(q);
  if (busy.empty()) return false;
  FakeQp* q = busy[pick % busy.size()];
  Queued e = std::move(gQueued[q].front());
  gQueued[q].pop_front();
  if (!e.inlineData.empty()) e.sge.addr = reinterpret_cast<uint64_t>(e.inlineData.data());
  e.wr.sg_list = e.wr.num_sge ? &e.sge : nullptr;
  execute(q, &e.wr);
  return true;
}

void fakeDrain() {
  while (fakeStep(0)) {
  }
}

int fakeQueued() {
  std::lock_guard<std::recursive_mutex> lock(gMutex);
  int n = 0;
  for (auto& [q, work] : gQueued) n += static_cast<int>(work.size());
  return n;
}

const plugin::verbs::VerbsApi* fakeVerbsApi() {
  static const plugin::verbs::VerbsApi api = makeApi();
  return &api;
}

}  // namespace epx::test
