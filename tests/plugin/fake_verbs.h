// A fake RDMA fabric in one process, behind the verbs transport's VerbsApi table and the
// ibv_context ops that libibverbs' inline calls (ibv_post_send/post_recv/poll_cq) go through.
// RC semantics it enforces: QP state machine RESET→INIT→RTR→RTS with the attribute masks each
// step needs, InfiniBand (LID, no GRH) vs RoCE (GRH, valid source GID index), rkey/range/access
// checks, receive WRs consumed by write-with-immediate (none posted → RNR error completion), a
// destroyed or unconnected peer QP → retry-exceeded error completion, RDMA write / read / atomic
// fetch-and-add checked against the responder QP's access flags and the MR's. Work requests
// execute at post time (memcpy within the process), so per-QP order holds trivially — unless
// `deferred` is set: then they queue per QP and run only in fakeStep(), which picks a random QP
// and runs its oldest request (the order within a QP holds, the order across QPs does not).
// Every entry point takes one process-wide lock, so two "nodes" may run on two threads.
// It is a test double written for epx; it models no vendor's NIC.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "net/verbs_api.h"

namespace epx::test {

struct FakePortSpec {
  bool ethernet = false;
  bool active = true;
  uint16_t lid = 0;
  int activeMtu = IBV_MTU_4096;
  int activeSpeed = 128;  // NDR
  int activeWidth = 2;    // 4x
  std::vector<std::vector<uint8_t>> gids;  // GID table, 16 bytes each
};

struct FakeDeviceSpec {
  std::string name;
  uint64_t nodeGuid = 0;
  std::vector<FakePortSpec> ports;
  bool atomics = true;  // ibv_device_attr.atomic_cap: IBV_ATOMIC_HCA, else IBV_ATOMIC_NONE
  int maxRdAtomic = 16;  // max_qp_rd_atom and max_qp_init_rd_atom
};

struct FakeQp {
  ibv_qp qp;  // first member: ibv_qp* casts to FakeQp*
  int maxRecv = 0, maxInline = 0;
  uint32_t destQpn = 0;
  int port = 0;
  int access = 0;  // qp_access_flags set at INIT (what this QP lets peers do as responder)
  ibv_qp_attr rtr{}, rts{};
  std::deque<uint64_t> recvs;
  bool destroyed = false;
};

struct FakeCq {
  ibv_cq cq;
  int capacity = 0;
  std::deque<ibv_wc> wcs;
  bool overflowed = false;
};

struct FakeFabric {
  std::vector<FakeDeviceSpec> devices;
  std::map<uint32_t, FakeQp*> qps;  // by QPN, destroyed ones kept (marked) for error checks
  std::map<uint32_t, ibv_mr*> mrs;  // by rkey (= lkey)
  int liveQps = 0, liveCqs = 0, liveMrs = 0, livePds = 0, openContexts = 0;
  int writes = 0, writesWithImm = 0, reads = 0, inlineWrites = 0, atomics = 0;
  std::vector<std::string> errors;  // misuse the fake detected (bad masks, bad state, bad key…)
  bool failNextWrite = false;       // the next RDMA write completes with a remote access error
  bool deferred = false;            // queue send work requests; run them in fakeStep()
};

// Deferred mode: runs the oldest queued work request of one QP chosen with `pick` (0..n-1 over the
// QPs that have work); returns false when nothing is queued. fakeDrain runs everything.
bool fakeStep(uint64_t pick);
void fakeDrain();
int fakeQueued();

// The fabric the fake API works on (one per process) and the table to hand to
// epx::plugin::verbs::setVerbsApiForTesting.
FakeFabric& fakeFabric();
const plugin::verbs::VerbsApi* fakeVerbsApi();

}  // namespace epx::test
