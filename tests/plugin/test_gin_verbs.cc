// The GIN verbs backend on the fake verbs device (fake_verbs.h), with two or three "nodes" in one
// process: connection setup and teardown, QP attributes (SL on InfiniBand; GRH, GID index and
// traffic class on RoCE), put byte-exactness, put-with-signal ordering (the fake runs each QP's
// work in order but interleaves QPs at random), signal add semantics, completion of ops (what NCCL
// bumps counters on), flush, the error cases, backend selection and the rail choice.
// A test double, not a NIC: the backend's ibv_* calls never ran on hardware.
#define BOOST_TEST_MODULE plugin_gin_verbs
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "fake_devices.h"
#include "fake_verbs.h"
#include "gin/backend.h"
#include "gin/backend_choice.h"
#include "gin/verbs_backend.h"
#include "gin/verbs_gin_wire.h"
#include "gin/verbs_plan.h"
#include "gin/verbs_rail.h"
#include "net/select.h"
#include "net/verbs_api.h"
#include "net/verbs_wire.h"

namespace gin = epx::plugin::gin;
namespace net = epx::plugin::net;
using epx::test::fakeFabric;
using epx::test::FakeQp;

namespace {

constexpr int kIbDev = 0;
constexpr int kRoceDev = 1;
constexpr int kNoAtomicsDev = 2;
constexpr int kSpinLimit = 100000;  // test() calls before a test gives up (never a hang)

struct Setup {
  Setup() {
    auto& f = fakeFabric();
    const epx::test::FakeDeviceSpec ib = epx::test::fakeIbDevice();
    epx::test::FakeDeviceSpec plain{"fakeplain0", 0x3333, {}};  // InfiniBand without atomics
    epx::test::FakePortSpec plainPort = ib.ports[0];
    plainPort.lid = 6;
    plain.ports = {plainPort};
    plain.atomics = false;
    f.devices = {ib, epx::test::fakeRoceDevice(), plain};
    root = std::filesystem::temp_directory_path() / ("epx-fake-gin-" + std::to_string(getpid()));
    epx::test::writeFakeSysfs(root);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("EPX_OVERRIDE_SL", "4", 1);
    setenv("EPX_DEFAULT_TC", "40", 1);
    setenv("EPX_TOPO_NO_NVML", "1", 1);
    setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "3000", 1);
    epx::plugin::verbs::setVerbsApiForTesting(epx::test::fakeVerbsApi());
    netInit = net::init(nullptr);
    available = gin::verbsGinAvailable(&why);
  }
  ~Setup() { std::filesystem::remove_all(root); }
  std::filesystem::path root;
  ncclResult_t netInit = ncclInternalError;
  bool available = false;
  std::string why;
};

Setup* gSetup = nullptr;
struct Global : Setup {
  Global() { gSetup = this; }
};
BOOST_TEST_GLOBAL_FIXTURE(Global);

using Handle = std::vector<unsigned char>;

// Listens and connects `n` ranks of GIN context 0 on `dev`, one thread per rank (connect is
// collective and blocking). Returns the collComms (null where connect failed) and the results.
std::vector<void*> connectRanks(int n, int dev, std::vector<ncclResult_t>* results = nullptr) {
  std::vector<Handle> handles(static_cast<size_t>(n), Handle(NCCL_NET_HANDLE_MAXSIZE, 0));
  std::vector<void*> listens(static_cast<size_t>(n)), ptrs(static_cast<size_t>(n)), comms(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    BOOST_TEST_REQUIRE(gin::verbsGinListen(0, dev, handles[static_cast<size_t>(r)].data(), &listens[static_cast<size_t>(r)]) == ncclSuccess);
    ptrs[static_cast<size_t>(r)] = handles[static_cast<size_t>(r)].data();
  }
  std::vector<ncclResult_t> res(static_cast<size_t>(n), ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      res[static_cast<size_t>(r)] = gin::verbsGinConnect(ptrs.data(), n, r, listens[static_cast<size_t>(r)], &comms[static_cast<size_t>(r)]);
    });
  for (auto& t : threads) t.join();
  for (void* l : listens) BOOST_TEST(gin::verbsGinCloseListen(l) == ncclSuccess);
  if (results) *results = res;
  else
    for (ncclResult_t r : res) BOOST_TEST_REQUIRE(r == ncclSuccess);
  return comms;
}

// Registers bufs[r] (size bytes) on every rank: collective, one thread per rank.
std::vector<void*> registerAll(const std::vector<void*>& comms, const std::vector<void*>& bufs, size_t size,
                               int type = NCCL_PTR_HOST) {
  std::vector<void*> handles(comms.size());
  std::vector<ncclResult_t> res(comms.size(), ncclInternalError);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      void* gh = nullptr;
      res[r] = gin::verbsGinRegMrSym(comms[r], bufs[r], size, type, 0, -1, 0, &handles[r], &gh);
      if (res[r] == ncclSuccess && gh != handles[r]) res[r] = ncclInternalError;
    });
  for (auto& t : threads) t.join();
  for (ncclResult_t r : res) BOOST_TEST_REQUIRE(r == ncclSuccess);
  return handles;
}

void closeAll(std::vector<void*>& comms) {
  for (void*& c : comms)
    if (c) {
      BOOST_TEST(gin::verbsGinCloseColl(c) == ncclSuccess);
      c = nullptr;
    }
}

// test() until done or an error; ncclInternalError if it never finishes within kSpinLimit calls.
ncclResult_t wait(void* comm, void* req) {
  int done = 0;
  for (int i = 0; i < kSpinLimit; ++i) {
    ncclResult_t r = gin::verbsGinTest(comm, req, &done);
    if (r != ncclSuccess || done) return r;
  }
  return ncclInternalError;
}

FakeQp* fakeQp(void* comm, int peer) { return reinterpret_cast<FakeQp*>(gin::verbsGinQpForTesting(comm, peer)); }

// A put of `size` bytes from src[srcOff] of the caller to dst[dstOff] of `peer`, waited for.
ncclResult_t put(void* comm, void* src, uint64_t srcOff, size_t size, void* dst, uint64_t dstOff, int peer) {
  void* req = nullptr;
  ncclResult_t r = gin::verbsGinPut(comm, srcOff, src, size, dstOff, dst, static_cast<uint32_t>(peer), false, 0,
                                    nullptr, 0, 0, &req);
  if (r != ncclSuccess) return r;
  return wait(comm, req);
}

ncclResult_t signal(void* comm, void* sig, uint64_t off, uint64_t value, uint32_t op, int peer) {
  void* req = nullptr;
  ncclResult_t r = gin::verbsGinPut(comm, 0, nullptr, 0, 0, nullptr, static_cast<uint32_t>(peer), true, off, sig,
                                    value, op, &req);
  if (r != ncclSuccess) return r;
  return wait(comm, req);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_backend_is_available_on_the_fake_device) {
  BOOST_TEST_REQUIRE(gSetup->netInit == ncclSuccess);
  BOOST_TEST_REQUIRE(gSetup->available, gSetup->why);
  int n = 0;
  BOOST_TEST(gin::verbsGinDevices(&n) == ncclSuccess);
  BOOST_TEST(n == 3);
  ncclNetProperties_v11_t p;
  BOOST_TEST_REQUIRE(gin::verbsGinGetProperties(kIbDev, &p) == ncclSuccess);
  BOOST_TEST(p.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY);
  BOOST_TEST(p.maxRecvs > 0);
  BOOST_TEST((p.maxRecvs & (p.maxRecvs - 1)) == 0);  // NCCL's proxy queue mask needs a power of 2
  BOOST_TEST(std::string(p.name) == "fakeib0");
}

BOOST_AUTO_TEST_CASE(infiniband_qps_come_up_with_the_policy_sl_and_atomic_rights) {
  const int qpsBefore = fakeFabric().liveQps;
  auto comms = connectRanks(2, kIbDev);
  BOOST_TEST(fakeFabric().liveQps == qpsBefore + 4);  // per rank: one to the peer, one loopback
  for (int r = 0; r < 2; ++r) {
    FakeQp* toPeer = fakeQp(comms[static_cast<size_t>(r)], 1 - r);
    FakeQp* back = fakeQp(comms[static_cast<size_t>(1 - r)], r);
    FakeQp* self = fakeQp(comms[static_cast<size_t>(r)], r);
    BOOST_TEST(toPeer->qp.state == IBV_QPS_RTS);
    BOOST_TEST(toPeer->destQpn == back->qp.qp_num);
    BOOST_TEST(self->destQpn == self->qp.qp_num);  // the loopback QP is its own peer
    BOOST_TEST(self->qp.state == IBV_QPS_RTS);
    BOOST_TEST(toPeer->rtr.ah_attr.sl == 4);  // EPX_OVERRIDE_SL
    BOOST_TEST(toPeer->rtr.ah_attr.is_global == 0);
    BOOST_TEST(toPeer->rtr.ah_attr.dlid == 5);
    BOOST_TEST(toPeer->rtr.max_dest_rd_atomic == 16);  // the device's limit (fake: 16)
    BOOST_TEST(toPeer->rts.max_rd_atomic == 16);
    BOOST_TEST((toPeer->access & IBV_ACCESS_REMOTE_ATOMIC) != 0);
    BOOST_TEST((toPeer->access & IBV_ACCESS_REMOTE_WRITE) != 0);
    BOOST_TEST((toPeer->access & IBV_ACCESS_REMOTE_READ) != 0);
  }
  closeAll(comms);
  BOOST_TEST(fakeFabric().liveQps == qpsBefore);
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(roce_qps_use_the_v2_gid_and_the_policy_traffic_class) {
  auto comms = connectRanks(3, kRoceDev);
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 3; ++j) {
      FakeQp* q = fakeQp(comms[static_cast<size_t>(r)], j);
      BOOST_TEST(q->qp.state == IBV_QPS_RTS);
      BOOST_TEST(q->rtr.ah_attr.is_global == 1);
      BOOST_TEST(q->rtr.ah_attr.grh.sgid_index == 3);  // RoCE v2, IPv4-mapped
      BOOST_TEST(q->rtr.ah_attr.grh.hop_limit == 255);
      BOOST_TEST(q->rtr.ah_attr.grh.traffic_class == 40);  // EPX_DEFAULT_TC (GIN v11 carries no class)
      BOOST_TEST(q->rtr.ah_attr.grh.dgid.raw[15] == 5);
      BOOST_TEST(q->rtr.ah_attr.sl == 0);
      BOOST_TEST(q->rtr.path_mtu == IBV_MTU_1024);
      if (j != r) BOOST_TEST(q->destQpn == fakeQp(comms[static_cast<size_t>(j)], r)->qp.qp_num);
    }
  closeAll(comms);
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(puts_of_every_size_arrive_byte_exact) {
  constexpr size_t kRegion = (1 << 20) + 64;
  constexpr uint8_t kGuard = 0xee;
  auto comms = connectRanks(2, kIbDev);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(kRegion));
  auto handles = registerAll(comms, {mem[0].data(), mem[1].data()}, kRegion);
  std::mt19937 rng(5);
  int seed = 1;
  for (int target : {1, 0}) {  // to the peer, then to itself (loopback QP)
    for (size_t size : {size_t(0), size_t(1), size_t(7), size_t(4095), size_t(4096), size_t(65537), size_t(1) << 20}) {
      const uint64_t srcOff = size == (size_t(1) << 20) ? 0 : 3;
      const uint64_t dstOff = size == (size_t(1) << 20) ? 64 : 33;
      std::vector<uint8_t>& dst = mem[static_cast<size_t>(target)];
      std::fill(dst.begin(), dst.end(), kGuard);
      for (size_t i = 0; i < size; ++i) mem[0][srcOff + i] = static_cast<uint8_t>(rng() + seed);
      const std::vector<uint8_t> expect(mem[0].begin() + static_cast<long>(srcOff),
                                        mem[0].begin() + static_cast<long>(srcOff + size));
      if (target == 0) std::fill(dst.begin(), dst.end(), kGuard);  // self: src re-filled below
      if (target == 0)
        std::copy(expect.begin(), expect.end(), mem[0].begin() + static_cast<long>(srcOff));
      BOOST_TEST_REQUIRE(put(comms[0], handles[0], srcOff, size, handles[0], dstOff, target) == ncclSuccess);
      BOOST_TEST(std::equal(expect.begin(), expect.end(), dst.begin() + static_cast<long>(dstOff)), "size " << size);
      if (target == 1) {
        for (size_t i = 0; i < dstOff; ++i) BOOST_TEST_REQUIRE(dst[i] == kGuard);
        for (size_t i = dstOff + size; i < kRegion; ++i) BOOST_TEST_REQUIRE(dst[i] == kGuard);
      }
      ++seed;
    }
  }
  BOOST_TEST(gin::verbsGinRequestsForTesting(comms[0]) == 0u);
  for (size_t r = 0; r < 2; ++r) BOOST_TEST(gin::verbsGinDeregMrSym(comms[r], handles[r]) == ncclSuccess);
  closeAll(comms);
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(gets_of_every_size_read_the_peers_bytes_exactly) {
  constexpr size_t kRegion = (1 << 20) + 64;
  constexpr uint8_t kGuard = 0xee;
  auto comms = connectRanks(2, kIbDev);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(kRegion));
  auto handles = registerAll(comms, {mem[0].data(), mem[1].data()}, kRegion);
  std::mt19937 rng(11);
  for (int source : {1, 0}) {  // from the peer, then from itself (loopback QP)
    for (size_t size : {size_t(0), size_t(1), size_t(7), size_t(4095), size_t(65537), size_t(1) << 20}) {
      const uint64_t remoteOff = size == (size_t(1) << 20) ? 64 : 5;
      const uint64_t localOff = size == (size_t(1) << 20) ? 0 : 3 + (source == 0 ? 40000 : 0);
      std::vector<uint8_t>& src = mem[static_cast<size_t>(source)];
      if (source == 1) std::fill(mem[0].begin(), mem[0].end(), kGuard);
      for (size_t i = 0; i < size; ++i) src[remoteOff + i] = static_cast<uint8_t>(rng());
      const std::vector<uint8_t> expect(src.begin() + static_cast<long>(remoteOff),
                                        src.begin() + static_cast<long>(remoteOff + size));
      void* req = nullptr;
      BOOST_TEST_REQUIRE(gin::verbsGinGet(comms[0], remoteOff, handles[0], size, localOff, handles[0],
                                          static_cast<uint32_t>(source), &req) == ncclSuccess);
      BOOST_TEST_REQUIRE(wait(comms[0], req) == ncclSuccess);
      BOOST_TEST(std::equal(expect.begin(), expect.end(), mem[0].begin() + static_cast<long>(localOff)),
                 "size " << size << " from rank " << source);
      if (source == 1) {  // nothing else of this rank's region was written
        for (size_t i = 0; i < localOff; ++i) BOOST_TEST_REQUIRE(mem[0][i] == kGuard);
        for (size_t i = localOff + size; i < kRegion; ++i) BOOST_TEST_REQUIRE(mem[0][i] == kGuard);
      }
    }
  }
  // A flush after gets completes (an RDMA READ on the loopback QP).
  void* req = nullptr;
  BOOST_TEST_REQUIRE(gin::verbsGinFlush(comms[0], 0, &req) == ncclSuccess);
  BOOST_TEST(wait(comms[0], req) == ncclSuccess);
  BOOST_TEST(gin::verbsGinRequestsForTesting(comms[0]) == 0u);
  for (size_t r = 0; r < 2; ++r) BOOST_TEST(gin::verbsGinDeregMrSym(comms[r], handles[r]) == ncclSuccess);
  closeAll(comms);
  BOOST_TEST(fakeFabric().errors.empty());
  // A get past the peer's registration is refused before anything is posted, and the error sticks.
  comms = connectRanks(2, kIbDev);
  handles = registerAll(comms, {mem[0].data(), mem[1].data()}, kRegion);
  req = nullptr;
  BOOST_TEST(gin::verbsGinGet(comms[0], kRegion - 4, handles[0], 8, 0, handles[0], 1, &req) == ncclInternalError);
  BOOST_TEST(req == nullptr);
  BOOST_TEST(gin::verbsGinGet(comms[0], 0, handles[0], 8, 0, handles[0], 1, &req) == ncclSystemError);
  closeAll(comms);
}

BOOST_AUTO_TEST_CASE(a_signal_never_becomes_visible_before_its_data) {
  // Rank 0 sends 64 puts with signal (+1 each on one signal word) to rank 1 and 64 to rank 2; the
  // fake runs each QP's work requests in order but picks the QP at random at every step. After
  // every step: signal value k at a target means puts 0..k-1 to it are all in place.
  constexpr int kOps = 64;
  constexpr size_t kChunk = 100;  // odd-ish sizes at distinct offsets
  constexpr uint8_t kEmpty = 0;
  auto comms = connectRanks(3, kIbDev);
  std::vector<std::vector<uint8_t>> data(3, std::vector<uint8_t>(kOps * kChunk, kEmpty));
  std::vector<std::vector<uint64_t>> sig(3, std::vector<uint64_t>(8, 0));
  auto win = registerAll(comms, {data[0].data(), data[1].data(), data[2].data()}, data[0].size());
  auto sigs = registerAll(comms, {sig[0].data(), sig[1].data(), sig[2].data()}, sig[0].size() * sizeof(uint64_t));
  for (int k = 0; k < kOps; ++k)
    for (size_t i = 0; i < kChunk; ++i) data[0][static_cast<size_t>(k) * kChunk + i] = static_cast<uint8_t>(k + 1);
  fakeFabric().deferred = true;
  std::vector<void*> reqs;
  for (int k = 0; k < kOps; ++k)
    for (int target : {1, 2}) {
      void* req = nullptr;
      const uint64_t off = static_cast<uint64_t>(k) * kChunk;
      BOOST_TEST_REQUIRE(gin::verbsGinPut(comms[0], off, win[0], kChunk, off, win[0], static_cast<uint32_t>(target), true,
                                          8 * static_cast<uint64_t>(target), sigs[0], 1, NCCL_NET_SIGNAL_OP_ADD,
                                          &req) == ncclSuccess);
      reqs.push_back(req);
    }
  int done = 0;
  BOOST_TEST(gin::verbsGinTest(comms[0], reqs[0], &done) == ncclSuccess);
  BOOST_TEST(done == 0);  // nothing ran yet: no completion, so NCCL bumps no counter
  std::mt19937_64 rng(17);
  int steps = 0;
  while (epx::test::fakeStep(rng())) {
    ++steps;
    for (int target : {1, 2}) {
      const uint64_t seen = __atomic_load_n(&sig[static_cast<size_t>(target)][static_cast<size_t>(target)], __ATOMIC_ACQUIRE);
      BOOST_TEST_REQUIRE(seen <= static_cast<uint64_t>(kOps));
      for (uint64_t k = 0; k < seen; ++k)
        for (size_t i = 0; i < kChunk; ++i)
          BOOST_TEST_REQUIRE(data[static_cast<size_t>(target)][k * kChunk + i] == static_cast<uint8_t>(k + 1),
                             "signal " << seen << " visible before put " << k << " to rank " << target);
    }
  }
  fakeFabric().deferred = false;
  BOOST_TEST(steps == 2 * 2 * kOps);  // a write and an atomic per op
  BOOST_TEST(sig[1][1] == static_cast<uint64_t>(kOps));
  BOOST_TEST(sig[2][2] == static_cast<uint64_t>(kOps));
  for (void* req : reqs) BOOST_TEST(wait(comms[0], req) == ncclSuccess);
  BOOST_TEST(gin::verbsGinRequestsForTesting(comms[0]) == 0u);
  closeAll(comms);
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(signals_add_inc_as_one_and_add_as_the_value) {
  auto comms = connectRanks(2, kIbDev);
  std::vector<std::vector<uint64_t>> sig(2, std::vector<uint64_t>(4, 0));
  auto sigs = registerAll(comms, {sig[0].data(), sig[1].data()}, 4 * sizeof(uint64_t));
  BOOST_TEST(signal(comms[0], sigs[0], 0, 999, NCCL_NET_SIGNAL_OP_INC, 1) == ncclSuccess);
  BOOST_TEST(sig[1][0] == 1u);  // INC adds one whatever the value says
  BOOST_TEST(signal(comms[0], sigs[0], 8, 5, NCCL_NET_SIGNAL_OP_ADD, 1) == ncclSuccess);
  BOOST_TEST(signal(comms[0], sigs[0], 8, 7, NCCL_NET_SIGNAL_OP_ADD, 1) == ncclSuccess);
  BOOST_TEST(sig[1][1] == 12u);
  sig[1][2] = ~0ull - 1;
  BOOST_TEST(signal(comms[0], sigs[0], 16, 3, NCCL_NET_SIGNAL_OP_ADD, 1) == ncclSuccess);
  BOOST_TEST(sig[1][2] == 1u);  // 64-bit wrap-around, like the NIC's fetch-and-add
  BOOST_TEST(signal(comms[1], sigs[1], 24, 4, NCCL_NET_SIGNAL_OP_ADD, 1) == ncclSuccess);  // to itself
  BOOST_TEST(sig[1][3] == 4u);
  BOOST_TEST(sig[0][0] == 0u);  // nothing landed on the sender
  BOOST_TEST(sig[0][1] == 0u);
  closeAll(comms);
}

BOOST_AUTO_TEST_CASE(ops_complete_on_their_cqe_and_flush_reads_after_them) {
  // NCCL bumps an op's counter and the peer's flush index when test() reports it done: that must
  // be when its last work request completed, not before, and every op must complete exactly once.
  auto comms = connectRanks(2, kIbDev);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(4096, 1));
  auto win = registerAll(comms, {mem[0].data(), mem[1].data()}, 4096);
  fakeFabric().deferred = true;
  constexpr int kOps = 10;
  std::vector<void*> reqs;
  for (int k = 0; k < kOps; ++k) {
    void* req = nullptr;
    BOOST_TEST_REQUIRE(gin::verbsGinPut(comms[0], 0, win[0], 256, 256 * static_cast<uint64_t>(k % 8), win[0], 1, false, 0,
                                        nullptr, 0, 0, &req) == ncclSuccess);
    reqs.push_back(req);
  }
  void* flush = nullptr;
  const int readsBefore = fakeFabric().reads;
  BOOST_TEST_REQUIRE(gin::verbsGinFlush(comms[0], 1, &flush) == ncclSuccess);
  BOOST_TEST_REQUIRE(flush != nullptr);
  int counter = 0;  // what NCCL would count
  for (int k = 0; k < kOps; ++k) {
    int done = 1;
    BOOST_TEST(gin::verbsGinTest(comms[0], reqs[static_cast<size_t>(k)], &done) == ncclSuccess);
    BOOST_TEST(done == 0);
    BOOST_TEST_REQUIRE(epx::test::fakeStep(0));  // runs put k (one QP has work)
    BOOST_TEST(gin::verbsGinTest(comms[0], reqs[static_cast<size_t>(k)], &done) == ncclSuccess);
    BOOST_TEST(done == 1);
    counter += done;
    int flushDone = 1;
    BOOST_TEST(gin::verbsGinTest(comms[0], flush, &flushDone) == ncclSuccess);
    BOOST_TEST(flushDone == 0);  // the read is queued behind the remaining puts
  }
  BOOST_TEST(counter == kOps);
  BOOST_TEST_REQUIRE(epx::test::fakeStep(0));  // the read
  BOOST_TEST(fakeFabric().reads == readsBefore + 1);
  BOOST_TEST(wait(comms[0], flush) == ncclSuccess);
  fakeFabric().deferred = false;
  void* selfFlush = nullptr;  // this rank: the loopback QP
  BOOST_TEST_REQUIRE(gin::verbsGinFlush(comms[0], 0, &selfFlush) == ncclSuccess);
  BOOST_TEST(wait(comms[0], selfFlush) == ncclSuccess);
  BOOST_TEST(gin::verbsGinRequestsForTesting(comms[0]) == 0u);
  closeAll(comms);
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(closing_with_ops_in_flight_frees_everything) {
  const int qps = fakeFabric().liveQps, mrs = fakeFabric().liveMrs, cqs = fakeFabric().liveCqs;
  auto comms = connectRanks(2, kRoceDev);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(4096, 1));
  auto win = registerAll(comms, {mem[0].data(), mem[1].data()}, 4096);
  fakeFabric().deferred = true;
  for (int k = 0; k < 20; ++k) {
    void* req = nullptr;
    BOOST_TEST_REQUIRE(gin::verbsGinPut(comms[k % 2], 0, win[static_cast<size_t>(k % 2)], 64, 64, win[static_cast<size_t>(k % 2)],
                                        static_cast<uint32_t>(1 - k % 2), true, 0, win[static_cast<size_t>(k % 2)], 1,
                                        NCCL_NET_SIGNAL_OP_INC, &req) == ncclSuccess);
  }
  BOOST_TEST(gin::verbsGinRequestsForTesting(comms[0]) == 10u);
  BOOST_TEST(epx::test::fakeQueued() == 40);
  closeAll(comms);  // registrations not deregistered, requests never tested: closeColl frees both
  fakeFabric().deferred = false;
  BOOST_TEST(epx::test::fakeQueued() == 0);
  BOOST_TEST(fakeFabric().liveQps == qps);
  BOOST_TEST(fakeFabric().liveMrs == mrs);
  BOOST_TEST(fakeFabric().liveCqs == cqs);
}

BOOST_AUTO_TEST_CASE(bad_handles_ranges_and_signals_are_errors_that_stick) {
  int stranger = 0;
  for (int variant = 0; variant < 4; ++variant) {
    auto comms = connectRanks(2, kIbDev);
    std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(1024));
    auto win = registerAll(comms, {mem[0].data(), mem[1].data()}, 1024);
    void* req = nullptr;
    ncclResult_t r = ncclSuccess;
    switch (variant) {
      case 0: r = gin::verbsGinPut(comms[0], 0, &stranger, 8, 0, win[0], 1, false, 0, nullptr, 0, 0, &req); break;
      case 1: r = gin::verbsGinPut(comms[0], 1000, win[0], 32, 0, win[0], 1, false, 0, nullptr, 0, 0, &req); break;
      case 2: r = gin::verbsGinPut(comms[0], 0, win[0], 8, 0, win[0], 1, true, 4, win[0], 1, NCCL_NET_SIGNAL_OP_ADD, &req); break;
      case 3: r = gin::verbsGinPut(comms[0], 0, win[0], 8, 0, win[0], 7, false, 0, nullptr, 0, 0, &req); break;
    }
    BOOST_TEST(r == ncclInternalError, "variant " << variant);
    BOOST_TEST(req == nullptr);
    BOOST_TEST(gin::verbsGinPut(comms[0], 0, win[0], 8, 0, win[0], 1, false, 0, nullptr, 0, 0, &req) == ncclSystemError);
    BOOST_TEST(gin::verbsGinDeregMrSym(comms[0], &stranger) == ncclInternalError);
    int done = 0;
    BOOST_TEST(gin::verbsGinTest(comms[1], &stranger, &done) == ncclInternalError);
    closeAll(comms);
  }
}

BOOST_AUTO_TEST_CASE(access_errors_and_a_closed_peer_fail_the_op) {
  for (int variant = 0; variant < 3; ++variant) {
    auto comms = connectRanks(2, kIbDev);
    std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(1024, 3));
    auto win = registerAll(comms, {mem[0].data(), mem[1].data()}, 1024);
    if (variant == 0) fakeFabric().failNextWrite = true;  // remote access error
    if (variant == 1) BOOST_TEST(gin::verbsGinDeregMrSym(comms[1], win[1]) == ncclSuccess);  // its rkey is gone
    if (variant == 2) {  // the peer closed its context: its QPs are gone
      BOOST_TEST(gin::verbsGinDeregMrSym(comms[1], win[1]) == ncclSuccess);
      BOOST_TEST(gin::verbsGinCloseColl(comms[1]) == ncclSuccess);
      comms[1] = nullptr;
    }
    void* req = nullptr;
    BOOST_TEST_REQUIRE(gin::verbsGinPut(comms[0], 0, win[0], 64, 0, win[0], 1, false, 0, nullptr, 0, 0, &req) == ncclSuccess);
    BOOST_TEST(wait(comms[0], req) == ncclRemoteError, "variant " << variant);
    BOOST_TEST(gin::verbsGinProgress(comms[0]) == ncclRemoteError);
    BOOST_TEST(gin::verbsGinPut(comms[0], 0, win[0], 64, 0, win[0], 1, false, 0, nullptr, 0, 0, &req) == ncclSystemError);
    closeAll(comms);  // frees the failed request too
  }
  fakeFabric().failNextWrite = false;
}

BOOST_AUTO_TEST_CASE(a_registration_without_the_peer_fails_in_bounded_time) {
  setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "300", 1);
  for (bool closed : {false, true}) {
    auto comms = connectRanks(2, kIbDev);
    if (closed) {
      BOOST_TEST(gin::verbsGinCloseColl(comms[1]) == ncclSuccess);
      comms[1] = nullptr;
    }
    std::vector<uint8_t> mem(256);
    void *mh = nullptr, *gh = nullptr;
    const auto start = std::chrono::steady_clock::now();
    // Rank 1 never registers (silent) or is gone (closed socket).
    BOOST_TEST(gin::verbsGinRegMrSym(comms[0], mem.data(), mem.size(), NCCL_PTR_HOST, 0, -1, 0, &mh, &gh) ==
               ncclRemoteError);
    BOOST_TEST(mh == nullptr);
    BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(3)));
    closeAll(comms);
  }
  setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "3000", 1);
}

BOOST_AUTO_TEST_CASE(bad_handles_refused_and_missing_peers_fail_connect_in_bounded_time) {
  // A corrupted handle of the higher rank (the one rank 0 connects to).
  {
    Handle h0(NCCL_NET_HANDLE_MAXSIZE, 0), h1(NCCL_NET_HANDLE_MAXSIZE, 0);
    void *l0 = nullptr, *l1 = nullptr, *c = nullptr;
    BOOST_TEST_REQUIRE(gin::verbsGinListen(0, kIbDev, h0.data(), &l0) == ncclSuccess);
    BOOST_TEST_REQUIRE(gin::verbsGinListen(0, kIbDev, h1.data(), &l1) == ncclSuccess);
    h1[20] ^= 0x40;
    void* ptrs[2] = {h0.data(), h1.data()};
    BOOST_TEST(gin::verbsGinConnect(ptrs, 2, 0, l0, &c) == ncclInvalidArgument);
    BOOST_TEST(c == nullptr);
    // Refused: rank 1's listener is closed before rank 0 connects.
    h1[20] ^= 0x40;
    BOOST_TEST(gin::verbsGinCloseListen(l1) == ncclSuccess);
    const auto start = std::chrono::steady_clock::now();
    BOOST_TEST(gin::verbsGinConnect(ptrs, 2, 0, l0, &c) == ncclRemoteError);
    BOOST_TEST(c == nullptr);
    BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(3)));
    BOOST_TEST(gin::verbsGinCloseListen(l0) == ncclSuccess);
  }
  // A port without RDMA atomics cannot carry signals: connect says so instead of failing later.
  {
    setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "300", 1);  // the peer of the failing rank waits for it
    std::vector<ncclResult_t> res;
    auto comms = connectRanks(2, kNoAtomicsDev, &res);
    BOOST_TEST(res[0] == ncclSystemError);
    BOOST_TEST(res[1] != ncclSuccess);
    closeAll(comms);
    setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "3000", 1);
  }
  // A peer that never connects: rank 1 waits for rank 0, up to EPX_GIN_CONNECT_TIMEOUT_MS.
  {
    setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "300", 1);
    Handle h0(NCCL_NET_HANDLE_MAXSIZE, 0), h1(NCCL_NET_HANDLE_MAXSIZE, 0);
    void *l0 = nullptr, *l1 = nullptr, *c = nullptr;
    BOOST_TEST_REQUIRE(gin::verbsGinListen(0, kIbDev, h0.data(), &l0) == ncclSuccess);
    BOOST_TEST_REQUIRE(gin::verbsGinListen(0, kIbDev, h1.data(), &l1) == ncclSuccess);
    void* ptrs[2] = {h0.data(), h1.data()};
    BOOST_TEST(gin::verbsGinConnect(ptrs, 2, 1, l1, &c) == ncclRemoteError);
    BOOST_TEST(c == nullptr);
    BOOST_TEST(gin::verbsGinCloseListen(l0) == ncclSuccess);
    BOOST_TEST(gin::verbsGinCloseListen(l1) == ncclSuccess);
    setenv("EPX_GIN_CONNECT_TIMEOUT_MS", "3000", 1);
  }
  BOOST_TEST(fakeFabric().liveQps == 0);
  BOOST_TEST(fakeFabric().liveCqs == 0);
}

BOOST_AUTO_TEST_CASE(ops_are_planned_in_order_and_large_puts_are_cut) {
  gin::Registry reg(2, 0);
  gin::Registration* win = reg.add(0x10000000, size_t(3) << 30, gin::Placement::Device);
  win->localKey = 0x11;
  win->peerBase[1] = 0x70000000;
  win->peerSize[1] = size_t(3) << 30;
  win->peerKey[1] = 0x22;
  gin::Registration* sig = reg.add(0x20000, 512, gin::Placement::Device);
  sig->peerBase[1] = 0x90000;
  sig->peerSize[1] = 512;
  sig->peerKey[1] = 0x33;
  const gin::AtomicSink sink{0x5000, 0x44};
  std::vector<gin::VerbsWr> wrs;
  gin::GinOp op;
  op.src = op.dst = win;
  op.size = (size_t(5) << 29) + 3;  // 2.5 GiB + 3: three writes
  op.srcOff = 8;
  op.dstOff = 16;
  op.peer = 1;
  op.withSignal = true;
  op.signal = sig;
  op.signalOff = 24;
  op.signalValue = 9;
  op.signalOp = NCCL_NET_SIGNAL_OP_ADD;
  BOOST_TEST_REQUIRE(gin::planGinOp(reg, op, sink, &wrs).empty());
  BOOST_TEST_REQUIRE(wrs.size() == 4u);
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST((wrs[i].kind == gin::VerbsWr::Write));
    BOOST_TEST(wrs[i].localAddr == 0x10000000u + 8 + total);
    BOOST_TEST(wrs[i].remoteAddr == 0x70000000u + 16 + total);
    BOOST_TEST(wrs[i].rkey == 0x22u);
    BOOST_TEST(wrs[i].lkey == 0x11u);
    BOOST_TEST(!wrs[i].signaled);
    total += wrs[i].length;
  }
  BOOST_TEST(total == op.size);
  BOOST_TEST((wrs[3].kind == gin::VerbsWr::FetchAdd));
  BOOST_TEST(wrs[3].remoteAddr == 0x90000u + 24);
  BOOST_TEST(wrs[3].rkey == 0x33u);
  BOOST_TEST(wrs[3].add == 9u);
  BOOST_TEST(wrs[3].localAddr == 0x5000u);
  BOOST_TEST(wrs[3].signaled);
  // Signal only (NCCL: size 0, no handles), INC counts one.
  gin::GinOp s;
  s.peer = 1;
  s.withSignal = true;
  s.signal = sig;
  s.signalValue = 1234;
  s.signalOp = NCCL_NET_SIGNAL_OP_INC;
  BOOST_TEST_REQUIRE(gin::planGinOp(reg, s, sink, &wrs).empty());
  BOOST_TEST_REQUIRE(wrs.size() == 1u);
  BOOST_TEST(wrs[0].add == 1u);
  // A put of 0 bytes without a signal: one empty signalled write.
  gin::GinOp z;
  z.peer = 1;
  BOOST_TEST_REQUIRE(gin::planGinOp(reg, z, sink, &wrs).empty());
  BOOST_TEST_REQUIRE(wrs.size() == 1u);
  BOOST_TEST((wrs[0].kind == gin::VerbsWr::Write && wrs[0].length == 0 && wrs[0].signaled));
  // Errors: the peer's signal region unknown, a range outside the peer's registration.
  sig->peerBase[1] = 0;
  BOOST_TEST(!gin::planGinOp(reg, s, sink, &wrs).empty());
  op.withSignal = false;
  op.dstOff = (size_t(3) << 30) - 4;
  op.size = 8;
  BOOST_TEST(!gin::planGinOp(reg, op, sink, &wrs).empty());
}

BOOST_AUTO_TEST_CASE(gets_are_planned_as_reads_and_large_ones_are_cut) {
  gin::Registry reg(2, 0);
  gin::Registration* win = reg.add(0x10000000, size_t(3) << 30, gin::Placement::Device);
  win->localKey = 0x11;
  win->peerBase[1] = 0x70000000;
  win->peerSize[1] = size_t(3) << 30;
  win->peerKey[1] = 0x22;
  std::vector<gin::VerbsWr> wrs;
  gin::GinGet g;
  g.remote = g.local = win;
  g.size = (size_t(5) << 29) + 3;  // 2.5 GiB + 3: three reads
  g.remoteOff = 40;
  g.localOff = 8;
  g.peer = 1;
  BOOST_TEST_REQUIRE(gin::planGinGet(reg, g, &wrs).empty());
  BOOST_TEST_REQUIRE(wrs.size() == 3u);
  size_t total = 0;
  for (size_t i = 0; i < wrs.size(); ++i) {
    BOOST_TEST((wrs[i].kind == gin::VerbsWr::Read));
    BOOST_TEST(wrs[i].localAddr == 0x10000000u + 8 + total);  // lands here
    BOOST_TEST(wrs[i].remoteAddr == 0x70000000u + 40 + total);  // read from the peer's region
    BOOST_TEST(wrs[i].rkey == 0x22u);
    BOOST_TEST(wrs[i].lkey == 0x11u);
    BOOST_TEST(wrs[i].signaled == (i + 1 == wrs.size()));
    total += wrs[i].length;
  }
  BOOST_TEST(total == g.size);
  // A get of 0 bytes: one empty signalled read.
  gin::GinGet z;
  z.remote = z.local = win;
  z.peer = 1;
  BOOST_TEST_REQUIRE(gin::planGinGet(reg, z, &wrs).empty());
  BOOST_TEST_REQUIRE(wrs.size() == 1u);
  BOOST_TEST((wrs[0].kind == gin::VerbsWr::Read && wrs[0].length == 0 && wrs[0].signaled));
  // Errors, each naming which side is wrong: the peer out of range, the remote range past the
  // peer's registration, the local range past this rank's.
  gin::GinGet bad = g;
  bad.peer = 2;
  BOOST_TEST(gin::planGinGet(reg, bad, &wrs).find("out of range") != std::string::npos);
  bad = g;
  bad.size = 8;
  bad.remoteOff = (size_t(3) << 30) - 4;
  BOOST_TEST(gin::planGinGet(reg, bad, &wrs).find("source") == 0u);
  bad = g;
  bad.size = 8;
  bad.localOff = (size_t(3) << 30) - 4;
  BOOST_TEST(gin::planGinGet(reg, bad, &wrs).find("destination") == 0u);
}

BOOST_AUTO_TEST_CASE(hellos_and_registrations_are_checked) {
  gin::GinRegInfo r{};
  r.index = 3;
  r.addr = 0x1000;
  r.size = 64;
  r.rkey = 7;
  gin::sealRegInfo(r);
  BOOST_TEST(gin::validateRegInfo(r, 3).empty());
  BOOST_TEST(gin::validateRegInfo(r, 4).find("order differs") != std::string::npos);
  r.size = 65;
  BOOST_TEST(gin::validateRegInfo(r, 3).find("checksum") != std::string::npos);
  gin::GinHello h{};
  h.magic = gin::kGinHelloMagic;
  h.rank = 2;
  h.nRanks = 4;
  h.context = 1;
  BOOST_TEST(gin::validateHello(h, 2, 0, 4, 1).empty());
  BOOST_TEST(gin::validateHello(h, -1, 0, 4, 1).empty());
  BOOST_TEST(!gin::validateHello(h, 3, 0, 4, 1).empty());  // not the expected rank
  BOOST_TEST(!gin::validateHello(h, -1, 2, 4, 1).empty());  // claims to be me
  BOOST_TEST(!gin::validateHello(h, 2, 0, 8, 1).empty());  // other communicator size
  BOOST_TEST(!gin::validateHello(h, 2, 0, 4, 0).empty());  // other GIN context
}

BOOST_AUTO_TEST_CASE(the_backend_is_ipc_on_one_host_and_verbs_across_hosts) {
  gin::BackendWish w;
  BOOST_TEST((gin::parseBackendWish("", &w) && w == gin::BackendWish::Auto));
  BOOST_TEST((gin::parseBackendWish("ipc", &w) && w == gin::BackendWish::Ipc));
  BOOST_TEST((gin::parseBackendWish("verbs", &w) && w == gin::BackendWish::Verbs));
  BOOST_TEST(!gin::parseBackendWish("rdma", &w));
  gin::GinBackend b = gin::GinBackend::Verbs;
  BOOST_TEST(gin::chooseBackend({{true, true, 7}, {true, true, 7}}, &b).empty());
  BOOST_TEST((b == gin::GinBackend::Ipc));  // one host: ipc even with a NIC
  BOOST_TEST(gin::chooseBackend({{true, true, 7}, {true, true, 8}}, &b).empty());
  BOOST_TEST((b == gin::GinBackend::Verbs));  // two hosts
  BOOST_TEST(gin::chooseBackend({{false, true, 7}, {true, true, 7}}, &b).empty());
  BOOST_TEST((b == gin::GinBackend::Verbs));  // one rank forced verbs (or has no CUDA driver)
  std::string why = gin::chooseBackend({{true, false, 7}, {true, true, 8}}, &b);
  BOOST_TEST(why.find("rank 1 runs on another host") != std::string::npos, why);
  BOOST_TEST(why.find("verbs: rank 0") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(the_plugin_entry_points_pick_verbs_without_a_gpu) {
  // No CUDA driver here: auto offers verbs only, so two ranks connect through the verbs backend.
  unsetenv("EPX_GIN_BACKEND");
  void* inst = nullptr;
  ncclResult_t r = gin::ginInit(1, nullptr, &inst);
  BOOST_TEST_REQUIRE(r == ncclSuccess);
  ncclNetProperties_v11_t p;
  BOOST_TEST_REQUIRE(gin::ginGetProperties(kIbDev, &p) == ncclSuccess);
  BOOST_TEST(p.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY);
  Handle h0(NCCL_NET_HANDLE_MAXSIZE, 0), h1(NCCL_NET_HANDLE_MAXSIZE, 0);
  void *l0 = nullptr, *l1 = nullptr, *c0 = nullptr, *c1 = nullptr;
  BOOST_TEST_REQUIRE(gin::ginListen(inst, kIbDev, h0.data(), &l0) == ncclSuccess);
  void* inst2 = nullptr;
  BOOST_TEST_REQUIRE(gin::ginInit(1, nullptr, &inst2) == ncclSuccess);  // the other "node"
  BOOST_TEST_REQUIRE(gin::ginListen(inst2, kIbDev, h1.data(), &l1) == ncclSuccess);
  void* ptrs[2] = {h0.data(), h1.data()};
  ncclResult_t r0 = ncclInternalError, r1 = ncclInternalError;
  std::thread t([&] { r1 = gin::ginConnect(ptrs, 2, 1, l1, &c1); });
  r0 = gin::ginConnect(ptrs, 2, 0, l0, &c0);
  t.join();
  BOOST_TEST_REQUIRE(r0 == ncclSuccess);
  BOOST_TEST_REQUIRE(r1 == ncclSuccess);
  BOOST_TEST(gin::ginUsesVerbsForTesting(c0));
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(256, 0));
  for (int i = 0; i < 128; ++i) mem[0][static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  void *m0 = nullptr, *m1 = nullptr, *g = nullptr;
  ncclResult_t rr1 = ncclInternalError;
  std::thread reg([&] { rr1 = gin::ginRegMrSym(c1, mem[1].data(), 256, NCCL_PTR_HOST, 0, -1, 0, &m1, &g); });
  BOOST_TEST(gin::ginRegMrSym(c0, mem[0].data(), 256, NCCL_PTR_HOST, 0, -1, 0, &m0, &g) == ncclSuccess);
  reg.join();
  BOOST_TEST_REQUIRE(rr1 == ncclSuccess);
  void* req = nullptr;
  BOOST_TEST_REQUIRE(gin::ginPut(c0, 0, m0, 128, 128, m0, 1, true, 0, m0, 1, NCCL_NET_SIGNAL_OP_INC, &req) == ncclSuccess);
  int done = 0;
  for (int i = 0; i < kSpinLimit && !done; ++i) {
    BOOST_TEST_REQUIRE(gin::ginProgress(c0) == ncclSuccess);
    BOOST_TEST_REQUIRE(gin::ginTest(c0, req, &done) == ncclSuccess);
  }
  BOOST_TEST(done == 1);
  BOOST_TEST(std::memcmp(mem[1].data() + 128, mem[0].data(), 128) == 0);
  uint64_t first = 0;
  std::memcpy(&first, mem[1].data(), sizeof first);
  BOOST_TEST(first == 1u);  // the INC landed on word 0 of rank 1's region
  BOOST_TEST(gin::ginDeregMrSym(c0, m0) == ncclSuccess);
  BOOST_TEST(gin::ginDeregMrSym(c1, m1) == ncclSuccess);
  BOOST_TEST(gin::ginCloseColl(c0) == ncclSuccess);
  BOOST_TEST(gin::ginCloseColl(c1) == ncclSuccess);
  BOOST_TEST(gin::ginCloseListen(l0) == ncclSuccess);
  BOOST_TEST(gin::ginCloseListen(l1) == ncclSuccess);
  // Forcing a backend that cannot run here fails init; a malformed value is refused.
  setenv("EPX_GIN_BACKEND", "ipc", 1);
  BOOST_TEST(gin::ginInit(1, nullptr, &inst) != ncclSuccess);
  setenv("EPX_GIN_BACKEND", "rdma", 1);
  BOOST_TEST(gin::ginInit(1, nullptr, &inst) == ncclInvalidUsage);
  setenv("EPX_GIN_BACKEND", "verbs", 1);
  BOOST_TEST(gin::ginInit(1, nullptr, &inst) == ncclSuccess);
  unsetenv("EPX_GIN_BACKEND");
}

BOOST_AUTO_TEST_CASE(the_port_is_one_of_the_gpus_rail) {
  epx::topo::Topology t;
  t.gpus.resize(2);
  t.gpus[0].index = 0;
  t.gpus[0].address = *epx::topo::parseBusId("0000:19:00.0");
  t.gpus[1].index = 1;
  t.gpus[1].address = *epx::topo::parseBusId("0000:3b:00.0");
  t.nics.resize(3);
  const char* names[] = {"mlx5_0", "mlx5_1", "mlx5_2"};
  for (int i = 0; i < 3; ++i) t.nics[static_cast<size_t>(i)].index = i, t.nics[static_cast<size_t>(i)].name = names[i];
  epx::topo::RailPlan plan;
  plan.gpus.resize(2);
  plan.gpus[0].gpu = 0, plan.gpus[0].rail = 0, plan.gpus[0].nics = {0};
  plan.gpus[1].gpu = 1, plan.gpus[1].rail = 1, plan.gpus[1].nics = {1, 2};
  // The verbs ports, in the ncclNet's order (not the topology's).
  std::vector<gin::PortName> ports = {{"mlx5_2", 1}, {"mlx5_1", 1}, {"mlx5_0", 1}};
  BOOST_TEST(gin::gpuIndexByBusId(t, "0000:3b:00.0") == 1);
  BOOST_TEST(gin::gpuIndexByBusId(t, "0000:99:00.0") == -1);
  BOOST_TEST(gin::choosePortByRail(t, plan, 0, ports, 0).dev == 2);  // NCCL said mlx5_2: GPU 0's rail is mlx5_0
  BOOST_TEST(gin::choosePortByRail(t, plan, 1, ports, 1).dev == 1);  // NCCL's choice is on the rail: kept
  BOOST_TEST(gin::choosePortByRail(t, plan, 1, ports, 0).dev == 0);  // mlx5_2 is on rail 1 too
  BOOST_TEST(gin::choosePortByRail(t, plan, 1, ports, 2).dev == 0);  // first port of rail 1 in port order
  BOOST_TEST(gin::choosePortByRail(t, plan, -1, ports, 2).dev == 2);  // GPU unknown: NCCL's device
  plan.gpus[0].nics.clear();
  BOOST_TEST(gin::choosePortByRail(t, plan, 0, ports, 1).dev == 1);  // no rail: NCCL's device
}

BOOST_AUTO_TEST_CASE(teardown_leaves_no_qp_cq_or_mr) {
  const auto& f = fakeFabric();
  BOOST_TEST(f.liveQps == 0);
  BOOST_TEST(f.liveCqs == 0);
  BOOST_TEST(f.liveMrs == 0);
  BOOST_TEST(epx::test::fakeQueued() == 0);
  BOOST_TEST(f.errors.empty());
  for (const std::string& e : f.errors) BOOST_TEST_MESSAGE("fake fabric: " << e);
}
