// The verbs transport end to end on a fake fabric (fake_verbs.h), in one process: enumeration and
// properties, the TCP handshake and QP bring-up (state machine, SL on InfiniBand, GRH + GID +
// traffic class on RoCE), messages through the FIFO / size word / write-with-immediate path,
// requests in flight, flush, and the failure cases (truncation, tag mismatch, closed peer,
// remote access error, bad handle, refused connection), and teardown that leaves nothing behind.
// This is a test double, not a NIC: the real ibv_* calls still never ran on hardware.
#define BOOST_TEST_MODULE plugin_verbs_fake
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "fake_devices.h"
#include "fake_verbs.h"
#include "net/select.h"
#include "net/verbs_api.h"
#include "net/verbs_wire.h"

namespace net = epx::plugin::net;
using epx::test::fakeFabric;
using epx::test::FakeQp;

namespace {

struct Setup {
  Setup() {
    auto& f = fakeFabric();
    epx::test::FakeDeviceSpec roce = epx::test::fakeRoceDevice();
    roce.ports[0].activeSpeed = 64;  // HDR-class lane rate, 4x
    epx::test::FakePortSpec down = roce.ports[0];
    down.active = false;
    roce.ports.push_back(down);
    f.devices = {epx::test::fakeIbDevice(), roce};
    root = std::filesystem::temp_directory_path() / ("epx-fake-ib-" + std::to_string(getpid()));
    epx::test::writeFakeSysfs(root);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("EPX_IB_QPS_PER_CONNECTION", "3", 1);
    setenv("EPX_IB_MIN_CHUNK", "4096", 1);
    setenv("EPX_IB_FIFO_DEPTH", "8", 1);
    setenv("EPX_OVERRIDE_SL", "4", 1);
    setenv("EPX_DEFAULT_TC", "40", 1);
    setenv("EPX_TOPO_NO_NVML", "1", 1);
    epx::plugin::verbs::setVerbsApiForTesting(epx::test::fakeVerbsApi());
    initResult = net::init(nullptr);
  }
  ~Setup() { std::filesystem::remove_all(root); }
  std::filesystem::path root;
  ncclResult_t initResult = ncclInternalError;
};

BOOST_TEST_GLOBAL_FIXTURE(Setup);

struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
};

Pair connectPair(int dev, int tcConnect, int tcListen) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  BOOST_TEST_REQUIRE(net::listen(tcListen, dev, handle, &listen) == ncclSuccess);
  Pair p;
  for (int i = 0; i < 10000 && (!p.send || !p.recv); ++i) {
    if (!p.send) BOOST_TEST_REQUIRE(net::connect(tcConnect, dev, handle, &p.send) == ncclSuccess);
    if (!p.recv) BOOST_TEST_REQUIRE(net::accept(listen, &p.recv) == ncclSuccess);
    if (!p.send || !p.recv) usleep(100);
  }
  BOOST_TEST_REQUIRE(p.send != nullptr);
  BOOST_TEST_REQUIRE(p.recv != nullptr);
  BOOST_TEST(net::closeListen(listen) == ncclSuccess);
  return p;
}

void closePair(Pair& p) {
  BOOST_TEST(net::closeSend(p.send) == ncclSuccess);
  BOOST_TEST(net::closeRecv(p.recv) == ncclSuccess);
}

// Waits for a request; returns the test() result and the reported size.
ncclResult_t wait(void* req, int* size) {
  int done = 0;
  for (int i = 0; i < 100000; ++i) {
    ncclResult_t r = net::test(req, &done, size);
    if (r != ncclSuccess || done) return r;
  }
  return ncclInternalError;  // never finished
}

// The sender QPs of the newest connection (the fake numbers QPs in creation order).
std::vector<FakeQp*> qpsWithPeer(uint32_t firstQpn, int n) {
  std::vector<FakeQp*> v;
  for (int i = 0; i < n; ++i) v.push_back(fakeFabric().qps.at(firstQpn + i));
  return v;
}

uint32_t nextQpn() {
  auto& qps = fakeFabric().qps;
  return qps.empty() ? 0x100 : qps.rbegin()->first + 1;
}

}  // namespace

BOOST_AUTO_TEST_CASE(enumeration_and_properties) {
  BOOST_TEST_REQUIRE((net::active() == net::Transport::Verbs));
  int n = 0;
  BOOST_TEST(net::devices(&n) == ncclSuccess);
  BOOST_TEST(n == 2);  // fakeib0:1 and fakeroce0:1; fakeroce0:2 is down
  ncclNetProperties_v11_t p;
  BOOST_TEST_REQUIRE(net::getProperties(0, &p) == ncclSuccess);
  BOOST_TEST(std::string(p.name) == "fakeib0");
  BOOST_TEST(p.port == 1);
  BOOST_TEST(p.speed == 400000);
  BOOST_TEST(p.guid == 0x1111u);
  BOOST_TEST(p.ptrSupport == NCCL_PTR_HOST);  // no DMA-BUF entry point, no peermem
  BOOST_TEST(p.maxRecvs == 1);
  BOOST_TEST_REQUIRE(net::getProperties(1, &p) == ncclSuccess);
  BOOST_TEST(std::string(p.name) == "fakeroce0");
  BOOST_TEST(p.speed == 200000);
  BOOST_TEST(p.guid == 0x2222u);
  BOOST_TEST(net::getProperties(2, &p) == ncclInvalidUsage);
}

BOOST_AUTO_TEST_CASE(infiniband_connection_brings_qps_up_with_the_policy_sl) {
  const uint32_t first = nextQpn();
  Pair p = connectPair(0, 106, NCCL_NET_TRAFFIC_CLASS_UNDEF);
  // Creation order: connector's 3 QPs (its comm is made when TCP connects), then the acceptor's
  // 3 QPs and its flush QP.
  auto send = qpsWithPeer(first, 3);
  auto recv = qpsWithPeer(first + 3, 4);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(send[i]->qp.state == IBV_QPS_RTS);
    BOOST_TEST(recv[i]->qp.state == IBV_QPS_RTS);
    BOOST_TEST(send[i]->destQpn == recv[i]->qp.qp_num);
    BOOST_TEST(recv[i]->destQpn == send[i]->qp.qp_num);
    BOOST_TEST(send[i]->rtr.ah_attr.sl == 4);  // EPX_OVERRIDE_SL
    BOOST_TEST(send[i]->rtr.ah_attr.is_global == 0);
    BOOST_TEST(send[i]->rtr.ah_attr.dlid == 5);
    BOOST_TEST(send[i]->rtr.path_mtu == IBV_MTU_4096);
    BOOST_TEST(send[i]->rts.timeout == 20);
    BOOST_TEST(send[i]->rts.retry_cnt == 7);
    BOOST_TEST(recv[i]->recvs.size() == 8u);  // one receive per FIFO slot
  }
  BOOST_TEST(recv[3]->destQpn == recv[3]->qp.qp_num);  // the flush QP talks to itself
  BOOST_TEST(fakeFabric().errors.empty());
  closePair(p);
}

BOOST_AUTO_TEST_CASE(roce_connection_uses_the_v2_ipv4_gid_and_the_traffic_class) {
  const uint32_t first = nextQpn();
  Pair p = connectPair(1, 106, NCCL_NET_TRAFFIC_CLASS_UNDEF);
  auto send = qpsWithPeer(first, 3);
  auto recv = qpsWithPeer(first + 3, 3);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(send[i]->rtr.ah_attr.is_global == 1);
    BOOST_TEST(send[i]->rtr.ah_attr.grh.sgid_index == 3);  // RoCE v2, IPv4-mapped
    BOOST_TEST(send[i]->rtr.ah_attr.grh.hop_limit == 255);
    BOOST_TEST(send[i]->rtr.ah_attr.grh.traffic_class == 106);  // the communicator's value
    BOOST_TEST(recv[i]->rtr.ah_attr.grh.traffic_class == 40);   // EPX_DEFAULT_TC (no value at listen)
    BOOST_TEST(send[i]->rtr.ah_attr.grh.dgid.raw[15] == 5);
    BOOST_TEST(send[i]->rtr.ah_attr.sl == 0);
    BOOST_TEST(send[i]->rtr.path_mtu == IBV_MTU_1024);
  }
  BOOST_TEST(fakeFabric().errors.empty());
  closePair(p);
  // The v11 listen context carries the communicator's class to the accepting side too.
  const uint32_t again = nextQpn();
  p = connectPair(1, 106, 106);
  BOOST_TEST(qpsWithPeer(again + 3, 1)[0]->rtr.ah_attr.grh.traffic_class == 106);
  closePair(p);
}

BOOST_AUTO_TEST_CASE(messages_of_every_size_arrive_whole) {
  for (int dev : {0, 1}) {
    Pair p = connectPair(dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, NCCL_NET_TRAFFIC_CLASS_UNDEF);
    const size_t cap = (1 << 20) + 7;
    std::vector<uint8_t> src(cap), dst(cap);
    void *smr = nullptr, *rmr = nullptr;
    BOOST_TEST_REQUIRE(net::regMr(p.send, src.data(), cap, NCCL_PTR_HOST, &smr) == ncclSuccess);
    BOOST_TEST_REQUIRE(net::regMr(p.recv, dst.data(), cap, NCCL_PTR_HOST, &rmr) == ncclSuccess);
    int seed = 1;
    for (size_t size : {size_t(0), size_t(1), size_t(4095), size_t(8192), size_t(1 << 20), cap}) {
      for (size_t i = 0; i < size; ++i) src[i] = static_cast<uint8_t>(i * 7 + seed);
      std::fill(dst.begin(), dst.end(), 0xee);
      const int withImm = fakeFabric().writesWithImm;
      void* data[1] = {dst.data()};
      size_t sizes[1] = {cap};
      int tags[1] = {seed};
      void* mh[1] = {rmr};
      void *rreq = nullptr, *sreq = nullptr;
      BOOST_TEST_REQUIRE(net::irecv(p.recv, 1, data, sizes, tags, mh, &rreq) == ncclSuccess);
      BOOST_TEST_REQUIRE(rreq != nullptr);
      BOOST_TEST_REQUIRE(net::isend(p.send, src.data(), size, seed, smr, &sreq) == ncclSuccess);
      BOOST_TEST_REQUIRE(sreq != nullptr);
      int ssize = -1, rsize = -1;
      BOOST_TEST(wait(sreq, &ssize) == ncclSuccess);
      BOOST_TEST(wait(rreq, &rsize) == ncclSuccess);
      BOOST_TEST(static_cast<size_t>(ssize) == size);
      BOOST_TEST(static_cast<size_t>(rsize) == size);
      BOOST_TEST(std::memcmp(src.data(), dst.data(), size) == 0);
      if (size < cap) BOOST_TEST(dst[size] == 0xee);  // nothing written past the message
      const int chunks = fakeFabric().writesWithImm - withImm;
      // One chunk below 2 x EPX_IB_MIN_CHUNK, else at most one per QP and none under 4 KiB.
      const int expected = size < 2 * 4096 ? 1 : size == 8192 ? 2 : 3;
      BOOST_TEST(chunks == expected, "size " << size);
      ++seed;
    }
    BOOST_TEST(net::deregMr(p.send, smr) == ncclSuccess);
    BOOST_TEST(net::deregMr(p.recv, rmr) == ncclSuccess);
    closePair(p);
  }
  BOOST_TEST(fakeFabric().errors.empty());
}

BOOST_AUTO_TEST_CASE(fifo_depth_bounds_requests_in_flight) {
  Pair p = connectPair(0, -1, -1);
  const int depth = 8;
  std::vector<std::vector<uint8_t>> bufs(depth + 1, std::vector<uint8_t>(64));
  std::vector<uint8_t> src(64 * (depth + 1));
  std::iota(src.begin(), src.end(), 0);
  void *smr = nullptr, *rmr[9] = {};
  BOOST_TEST_REQUIRE(net::regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr) == ncclSuccess);
  std::vector<void*> rreqs, sreqs;
  for (int i = 0; i <= depth; ++i) {
    BOOST_TEST_REQUIRE(net::regMr(p.recv, bufs[i].data(), 64, NCCL_PTR_HOST, &rmr[i]) == ncclSuccess);
    void* data[1] = {bufs[i].data()};
    size_t sizes[1] = {64};
    int tags[1] = {7};
    void* req = nullptr;
    BOOST_TEST_REQUIRE(net::irecv(p.recv, 1, data, sizes, tags, &rmr[i], &req) == ncclSuccess);
    if (i < depth) {
      BOOST_TEST(req != nullptr);
      rreqs.push_back(req);
    } else {
      BOOST_TEST(req == nullptr);  // every FIFO slot is busy: NCCL retries later
    }
  }
  for (int i = 0; i < depth; ++i) {
    void* req = nullptr;
    BOOST_TEST_REQUIRE(net::isend(p.send, src.data() + 64 * i, 64, 7, smr, &req) == ncclSuccess);
    BOOST_TEST_REQUIRE(req != nullptr);
    sreqs.push_back(req);
  }
  void* extra = nullptr;
  BOOST_TEST(net::isend(p.send, src.data(), 64, 7, smr, &extra) == ncclSuccess);
  BOOST_TEST(extra == nullptr);  // no receive posted for it yet
  for (int i = depth - 1; i >= 0; --i) {  // tested in reverse order
    int s = -1;
    BOOST_TEST(wait(rreqs[i], &s) == ncclSuccess);
    BOOST_TEST(s == 64);
    BOOST_TEST(wait(sreqs[i], &s) == ncclSuccess);
    BOOST_TEST(std::memcmp(bufs[i].data(), src.data() + 64 * i, 64) == 0);
  }
  BOOST_TEST(net::deregMr(p.send, smr) == ncclSuccess);
  for (void* m : rmr) BOOST_TEST(net::deregMr(p.recv, m) == ncclSuccess);
  closePair(p);
}

BOOST_AUTO_TEST_CASE(flush_reads_back_cuda_buffers_only) {
  Pair p = connectPair(0, -1, -1);
  std::vector<uint8_t> buf(4096, 1);
  void *cudaMr = nullptr, *hostMr = nullptr;
  // The fake registers any address; the type is what iflush looks at.
  BOOST_TEST_REQUIRE(net::regMr(p.recv, buf.data(), buf.size(), NCCL_PTR_CUDA, &cudaMr) == ncclSuccess);
  BOOST_TEST_REQUIRE(net::regMr(p.recv, buf.data(), buf.size(), NCCL_PTR_HOST, &hostMr) == ncclSuccess);
  void* data[1] = {buf.data()};
  int sizes[1] = {4096};
  void* req = nullptr;
  BOOST_TEST(net::iflush(p.recv, 1, data, sizes, &hostMr, &req) == ncclSuccess);
  BOOST_TEST(req == nullptr);
  const int reads = fakeFabric().reads;
  BOOST_TEST(net::iflush(p.recv, 1, data, sizes, &cudaMr, &req) == ncclSuccess);
  BOOST_TEST_REQUIRE(req != nullptr);
  BOOST_TEST(wait(req, nullptr) == ncclSuccess);
  BOOST_TEST(fakeFabric().reads == reads + 1);
  BOOST_TEST(net::deregMr(p.recv, cudaMr) == ncclSuccess);
  BOOST_TEST(net::deregMr(p.recv, hostMr) == ncclSuccess);
  closePair(p);
}

BOOST_AUTO_TEST_CASE(truncation_and_tag_mismatch_are_errors) {
  for (int tagSent : {3, 4}) {
    Pair p = connectPair(0, -1, -1);
    std::vector<uint8_t> src(200), dst(100);
    void *smr = nullptr, *rmr = nullptr;
    BOOST_TEST_REQUIRE(net::regMr(p.send, src.data(), src.size(), NCCL_PTR_HOST, &smr) == ncclSuccess);
    BOOST_TEST_REQUIRE(net::regMr(p.recv, dst.data(), dst.size(), NCCL_PTR_HOST, &rmr) == ncclSuccess);
    void* data[1] = {dst.data()};
    size_t sizes[1] = {100};
    int tags[1] = {3};
    void *rreq = nullptr, *sreq = nullptr;
    BOOST_TEST_REQUIRE(net::irecv(p.recv, 1, data, sizes, tags, &rmr, &rreq) == ncclSuccess);
    // tag 3: 200 bytes into 100 (truncation); tag 4: 50 bytes with the wrong tag.
    const size_t size = tagSent == 3 ? 200 : 50;
    BOOST_TEST(net::isend(p.send, src.data(), size, tagSent, smr, &sreq) == ncclInvalidUsage);
    BOOST_TEST(sreq == nullptr);
    BOOST_TEST(net::isend(p.send, src.data(), 10, 3, smr, &sreq) == ncclRemoteError);  // the comm stays failed
    BOOST_TEST(net::deregMr(p.send, smr) == ncclSuccess);
    BOOST_TEST(net::deregMr(p.recv, rmr) == ncclSuccess);
    closePair(p);
  }
}

BOOST_AUTO_TEST_CASE(closed_peer_and_remote_access_error_fail_the_request) {
  for (bool closePeer : {true, false}) {
    Pair p = connectPair(1, -1, -1);
    std::vector<uint8_t> src(64, 9), dst(64);
    void *smr = nullptr, *rmr = nullptr;
    BOOST_TEST_REQUIRE(net::regMr(p.send, src.data(), 64, NCCL_PTR_HOST, &smr) == ncclSuccess);
    BOOST_TEST_REQUIRE(net::regMr(p.recv, dst.data(), 64, NCCL_PTR_HOST, &rmr) == ncclSuccess);
    void* data[1] = {dst.data()};
    size_t sizes[1] = {64};
    int tags[1] = {1};
    void *rreq = nullptr, *sreq = nullptr;
    BOOST_TEST_REQUIRE(net::irecv(p.recv, 1, data, sizes, tags, &rmr, &rreq) == ncclSuccess);
    if (closePeer) {
      BOOST_TEST(net::deregMr(p.recv, rmr) == ncclSuccess);
      BOOST_TEST(net::closeRecv(p.recv) == ncclSuccess);  // its QPs are gone
    } else {
      fakeFabric().failNextWrite = true;
    }
    BOOST_TEST_REQUIRE(net::isend(p.send, src.data(), 64, 1, smr, &sreq) == ncclSuccess);
    BOOST_TEST_REQUIRE(sreq != nullptr);
    BOOST_TEST(wait(sreq, nullptr) == ncclRemoteError);
    BOOST_TEST(net::deregMr(p.send, smr) == ncclSuccess);
    BOOST_TEST(net::closeSend(p.send) == ncclSuccess);
    if (!closePeer) {
      BOOST_TEST(net::deregMr(p.recv, rmr) == ncclSuccess);
      BOOST_TEST(net::closeRecv(p.recv) == ncclSuccess);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_handle_and_refused_connection) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  BOOST_TEST_REQUIRE(net::listen(-1, 0, handle, &listen) == ncclSuccess);
  char bad[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(bad, handle, sizeof bad);
  bad[20] ^= 0x40;  // inside the address: the checksum no longer matches
  void* send = nullptr;
  BOOST_TEST(net::connect(-1, 0, bad, &send) == ncclInvalidArgument);
  BOOST_TEST(send == nullptr);
  // A well-formed handle whose connect-state word points at something the plugin never made.
  std::memcpy(bad, handle, sizeof bad);
  reinterpret_cast<epx::plugin::verbs::Handle*>(bad)->connectState = 0xdeadbeef;
  BOOST_TEST(net::connect(-1, 0, bad, &send) == ncclInvalidArgument);
  BOOST_TEST(send == nullptr);
  BOOST_TEST(net::closeListen(listen) == ncclSuccess);
  // Nobody listens any more: connect fails (refused) instead of hanging.
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 10000 && r == ncclSuccess && !send; ++i) {
    r = net::connect(-1, 0, handle, &send);
    usleep(100);
  }
  BOOST_TEST(r == ncclRemoteError);
  BOOST_TEST(send == nullptr);
}

BOOST_AUTO_TEST_CASE(a_bad_hca_filter_fails_init) {
  setenv("EPX_IB_HCA", "fakeib0:x", 1);
  BOOST_TEST(net::init(nullptr) == ncclInvalidUsage);
  unsetenv("EPX_IB_HCA");
  BOOST_TEST(net::init(nullptr) == ncclSuccess);
  BOOST_TEST((net::active() == net::Transport::Verbs));
}

BOOST_AUTO_TEST_CASE(teardown_leaves_no_qp_cq_or_mr) {
  const auto& f = fakeFabric();
  BOOST_TEST(f.liveQps == 0);
  BOOST_TEST(f.liveCqs == 0);
  BOOST_TEST(f.liveMrs == 0);
  BOOST_TEST(f.livePds == 2);  // one per device with a usable port, kept for the process
  BOOST_TEST(f.errors.empty());
  for (const std::string& e : f.errors) BOOST_TEST_MESSAGE("fake fabric: " << e);
}
