// The built libnccl-net-epx.so's ncclNetPlugin_v11, driven between two processes over loopback.
#define BOOST_TEST_MODULE plugin_net_socket
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <random>

#include "net_harness.h"

using namespace epx::test;

namespace {

struct PluginSetup {
  PluginSetup() {
    setenv("EPX_SOCKET_IFNAME", "lo", 1);
    setenv("EPX_SOCKET_NSTREAMS", "4", 1);
    setenv("EPX_SOCKET_MAX_RECVS", "8", 1);
    setenv("EPX_SOCKET_CONNECT_RETRIES", "3", 1);
    setenv("EPX_SOCKET_HANDSHAKE_TIMEOUT_MS", "1500", 1);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(PluginSetup);

struct Net {
  const ncclNet_v11_t* net = pluginSymbol<ncclNet_v11_t>("ncclNetPlugin_v11");
  void* ctx = nullptr;
  Net() {
    BOOST_TEST_REQUIRE(net != nullptr);
    ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    BOOST_TEST_REQUIRE(net->init(&ctx, 1, &config, captureLog, nullptr) == ncclSuccess);
  }
  ~Net() { net->finalize(ctx); }
};

// Listens on device 0, runs `sender(net, ctx, handle)` in a child, accepts, returns recvComm.
struct Pair {
  Net n;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  void* recvComm = nullptr;
  pid_t child = -1;

  template <typename F>
  explicit Pair(F sender) {
    BOOST_TEST_REQUIRE(n.net->listen(n.ctx, 0, handle, &listenComm) == ncclSuccess);
    const ncclNet_v11_t* net = n.net;
    void* ctx = n.ctx;
    char* h = handle;
    child = spawn([=]() -> int {
      void* sendComm = nullptr;
      if (connectBlocking(net, ctx, 0, h, &sendComm) != ncclSuccess) return 10;
      int rc = sender(net, sendComm);
      if (rc == 0 && net->closeSend(sendComm) != ncclSuccess) rc = 11;
      return rc;
    });
    BOOST_TEST_REQUIRE(acceptBlocking(n.net, listenComm, &recvComm) == ncclSuccess);
  }
  int finish() {
    if (recvComm != nullptr) BOOST_TEST(n.net->closeRecv(recvComm) == ncclSuccess);
    recvComm = nullptr;
    BOOST_TEST(n.net->closeListen(listenComm) == ncclSuccess);
    listenComm = nullptr;
    return child < 0 ? 0 : reap(child);
  }
};

const std::vector<size_t> kSizes = {0,     1,     7,      4095,          4096,         65535,
                                    65536, 131075, 262144, (1 << 20) + 17, 16u << 20, 64u << 20};

}  // namespace

BOOST_AUTO_TEST_CASE(exports_all_versions_and_properties) {
  Net n;
  BOOST_TEST(std::string(n.net->name) == "EPX");
  BOOST_TEST(pluginSymbol<ncclNet_v10_t>("ncclNetPlugin_v10") != nullptr);
  BOOST_TEST(pluginSymbol<ncclNet_v9_t>("ncclNetPlugin_v9") != nullptr);
  int ndev = 0;
  BOOST_TEST_REQUIRE(n.net->devices(&ndev) == ncclSuccess);
  BOOST_TEST_REQUIRE(ndev == 1);  // EPX_SOCKET_IFNAME=lo
  ncclNetProperties_v11_t p;
  BOOST_TEST_REQUIRE(n.net->getProperties(0, &p) == ncclSuccess);
  BOOST_TEST(std::string(p.name) == "lo");
  BOOST_TEST(p.pciPath == nullptr);  // loopback is not a PCI device
  BOOST_TEST(p.ptrSupport == NCCL_PTR_HOST);
  BOOST_TEST(p.speed > 0);
  BOOST_TEST(p.maxComms > 0);
  BOOST_TEST(p.maxRecvs == 8);
  BOOST_TEST((p.maxRecvs & (p.maxRecvs - 1)) == 0);
  BOOST_TEST(p.netDeviceType == NCCL_NET_DEVICE_HOST);
  BOOST_TEST(p.vProps.ndevs == 1);
  BOOST_TEST(p.vProps.devs[0] == 0);
  BOOST_TEST(p.maxP2pBytes > 0u);
  BOOST_TEST(p.maxP2pBytes <= static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  BOOST_TEST(p.maxCollBytes <= static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
  BOOST_TEST(n.net->getProperties(5, &p) != ncclSuccess);
  BOOST_TEST(n.net->finalize(nullptr) == ncclSuccess);
  BOOST_TEST(n.net->closeListen(nullptr) == ncclSuccess);

  const auto* v9 = pluginSymbol<ncclNet_v9_t>("ncclNetPlugin_v9");
  ncclNetProperties_v9_t p9;
  BOOST_TEST(v9->init(captureLog) == ncclSuccess);
  BOOST_TEST_REQUIRE(v9->getProperties(0, &p9) == ncclSuccess);
  BOOST_TEST(std::string(p9.name) == "lo");
  BOOST_TEST(p9.maxRecvs == 8);
}

BOOST_AUTO_TEST_CASE(sizes_zero_to_64MiB) {
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    for (size_t i = 0; i < kSizes.size(); ++i) {
      std::vector<unsigned char> buf(kSizes[i]);
      fill(buf, i);
      void* mh = nullptr;
      if (net->regMr(sendComm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) != ncclSuccess) return 20;
      void* req = nullptr;
      while (req == nullptr)
        if (net->isend(sendComm, buf.data(), buf.size(), static_cast<int>(i), mh, nullptr, &req) != ncclSuccess)
          return 21;
      int size = -1;
      if (wait(net, req, &size) != ncclSuccess) return 22;
      if (size != static_cast<int>(kSizes[i])) return 23;
      net->deregMr(sendComm, mh);
    }
    return 0;
  });
  for (size_t i = 0; i < kSizes.size(); ++i) {
    // Odd-indexed receives post a larger buffer: the reported size must be the message's.
    size_t capacity = kSizes[i] + (i % 2 ? 1000 : 0);
    std::vector<unsigned char> buf(capacity + 1, 0xEE);
    void* data = buf.data();
    size_t size = capacity;
    int tag = static_cast<int>(i);
    void* mh = nullptr;
    BOOST_TEST_REQUIRE(pair.n.net->regMr(pair.recvComm, data, capacity, NCCL_PTR_HOST, &mh) == ncclSuccess);
    void* req = nullptr;
    BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, &mh, nullptr, &req) == ncclSuccess);
    BOOST_TEST_REQUIRE(req != nullptr);
    int got = -1;
    BOOST_TEST_REQUIRE(wait(pair.n.net, req, &got) == ncclSuccess);
    BOOST_TEST(got == static_cast<int>(kSizes[i]), "size " << kSizes[i]);
    BOOST_TEST(firstMismatch(buf.data(), kSizes[i], i) == kSizes[i], "content of size " << kSizes[i]);
    BOOST_TEST(buf[capacity] == 0xEE);  // nothing written past the buffer
    pair.n.net->deregMr(pair.recvComm, mh);
  }
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(many_requests_in_flight_with_tags) {
  constexpr int kCount = 32;
  constexpr size_t kBytes = 300000;
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    std::vector<std::vector<unsigned char>> bufs(kCount, std::vector<unsigned char>(kBytes));
    std::vector<void*> reqs(kCount, nullptr);
    for (int i = 0; i < kCount; ++i) {
      fill(bufs[i], 100 + i);
      size_t size = kBytes - static_cast<size_t>(i) * 1000;
      if (net->isend(sendComm, bufs[i].data(), size, 1000 + i, nullptr, nullptr, &reqs[i]) != ncclSuccess)
        return 30;
      if (reqs[i] == nullptr) return 31;  // 32 in flight must be accepted
    }
    for (int i = kCount - 1; i >= 0; --i)  // test in reverse order
      if (wait(net, reqs[i], nullptr) != ncclSuccess) return 32;
    return 0;
  });
  std::vector<std::vector<unsigned char>> bufs(kCount, std::vector<unsigned char>(kBytes));
  std::vector<void*> reqs(kCount, nullptr);
  for (int i = 0; i < kCount; ++i) {
    void* data = bufs[i].data();
    size_t size = kBytes;
    int tag = 1000 + i;
    BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &reqs[i]) == ncclSuccess);
    BOOST_TEST_REQUIRE(reqs[i] != nullptr);
  }
  for (int i = 0; i < kCount; ++i) {
    int got = -1;
    BOOST_TEST_REQUIRE(wait(pair.n.net, reqs[i], &got) == ncclSuccess);
    size_t expect = kBytes - static_cast<size_t>(i) * 1000;
    BOOST_TEST(got == static_cast<int>(expect));
    BOOST_TEST(firstMismatch(bufs[i].data(), expect, 100 + i) == expect);
  }
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(grouped_receive_matches_by_tag) {
  // The sender's order (12, 10, 13, 11) differs from the receive group's slot order.
  const int order[4] = {12, 10, 13, 11};
  Pair pair([&](const ncclNet_v11_t* net, void* sendComm) -> int {
    for (int k = 0; k < 4; ++k) {
      int tag = order[k];
      std::vector<unsigned char> buf(static_cast<size_t>(tag) * 10000);
      fill(buf, static_cast<size_t>(tag));
      void* req = nullptr;
      if (net->isend(sendComm, buf.data(), buf.size(), tag, nullptr, nullptr, &req) != ncclSuccess || !req)
        return 40;
      if (wait(net, req, nullptr) != ncclSuccess) return 41;
    }
    return 0;
  });
  std::vector<std::vector<unsigned char>> bufs(4, std::vector<unsigned char>(200000));
  void* data[4];
  size_t sizes[4];
  int tags[4] = {10, 11, 12, 13};
  for (int i = 0; i < 4; ++i) {
    data[i] = bufs[i].data();
    sizes[i] = bufs[i].size();
  }
  void* req = nullptr;
  BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 4, data, sizes, tags, nullptr, nullptr, &req) == ncclSuccess);
  int got[4] = {-1, -1, -1, -1};
  BOOST_TEST_REQUIRE(wait(pair.n.net, req, got) == ncclSuccess);
  for (int i = 0; i < 4; ++i) {
    size_t expect = static_cast<size_t>(tags[i]) * 10000;
    BOOST_TEST(got[i] == static_cast<int>(expect));
    BOOST_TEST(firstMismatch(bufs[i].data(), expect, static_cast<size_t>(tags[i])) == expect);
  }
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(unmatched_tag_is_an_error) {
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    char byte = 1;
    void* req = nullptr;
    net->isend(sendComm, &byte, 1, 99, nullptr, nullptr, &req);
    if (req) wait(net, req, nullptr, 5);
    usleep(200000);
    return 0;
  });
  char byte = 0;
  void* data = &byte;
  size_t size = 1;
  int tag = 5;
  void* req = nullptr;
  BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req) == ncclSuccess);
  BOOST_TEST(wait(pair.n.net, req, nullptr, 10) == ncclSystemError);
  BOOST_TEST(warned("tag 99"));
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(message_larger_than_receive_buffer_is_an_error) {
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    std::vector<unsigned char> buf(1000);
    void* req = nullptr;
    net->isend(sendComm, buf.data(), buf.size(), 0, nullptr, nullptr, &req);
    if (req) wait(net, req, nullptr, 5);
    usleep(200000);
    return 0;
  });
  std::vector<unsigned char> buf(100);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  void* req = nullptr;
  BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req) == ncclSuccess);
  BOOST_TEST(wait(pair.n.net, req, nullptr, 10) == ncclSystemError);
  BOOST_TEST(warned("does not fit"));
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(peer_closing_mid_transfer_is_an_error_not_a_hang) {
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    std::vector<unsigned char> buf(64u << 20);
    void* req = nullptr;
    net->isend(sendComm, buf.data(), buf.size(), 0, nullptr, nullptr, &req);
    int done = 0;
    for (int i = 0; i < 3 && req; ++i) net->test(req, &done, nullptr);
    net->closeSend(sendComm);  // closes mid-message
    _exit(0);
  });
  // Read only after the sender has gone: what it managed to write is buffered, then EOF.
  BOOST_TEST(reap(pair.child) == 0);
  pair.child = -1;
  std::vector<unsigned char> buf(64u << 20);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  void* req = nullptr;
  BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req) == ncclSuccess);
  auto start = Clock::now();
  BOOST_TEST(wait(pair.n.net, req, nullptr, 20) == ncclSystemError);
  BOOST_TEST(std::chrono::duration<double>(Clock::now() - start).count() < 10.0);
  BOOST_TEST(warned("peer closed the connection"));
  // The comm stays failed; further posts say so instead of crashing.
  void* req2 = nullptr;
  BOOST_TEST(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req2) == ncclSystemError);
  BOOST_TEST(pair.finish() == 0);
}

BOOST_AUTO_TEST_CASE(refused_connection_is_an_error_with_message) {
  Net n;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  BOOST_TEST_REQUIRE(n.net->listen(n.ctx, 0, handle, &listenComm) == ncclSuccess);
  BOOST_TEST_REQUIRE(n.net->closeListen(listenComm) == ncclSuccess);  // nobody listens any more
  void* sendComm = nullptr;
  auto start = Clock::now();
  BOOST_TEST(connectBlocking(n.net, n.ctx, 0, handle, &sendComm) == ncclSystemError);
  BOOST_TEST(sendComm == nullptr);
  BOOST_TEST(std::chrono::duration<double>(Clock::now() - start).count() < 5.0);
  BOOST_TEST(warned("refused"));
}

BOOST_AUTO_TEST_CASE(malformed_and_truncated_handles_are_rejected) {
  Net n;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    char garbage[NCCL_NET_HANDLE_MAXSIZE];
    for (char& c : garbage) c = static_cast<char>(rng());
    void* sendComm = nullptr;
    BOOST_TEST(n.net->connect(n.ctx, 0, garbage, &sendComm, nullptr) == ncclInternalError);
    BOOST_TEST(sendComm == nullptr);
  }
  BOOST_TEST(warned("malformed handle"));
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  BOOST_TEST_REQUIRE(n.net->listen(n.ctx, 0, handle, &listenComm) == ncclSuccess);
  // 24 bytes already hold a whole IPv4 handle, so truncate before that.
  for (size_t keep : {0, 4, 8, 12, 16, 18, 20}) {
    char truncated[NCCL_NET_HANDLE_MAXSIZE] = {};
    memcpy(truncated, handle, keep);
    void* sendComm = nullptr;
    BOOST_TEST(n.net->connect(n.ctx, 0, truncated, &sendComm, nullptr) == ncclInternalError, "keep " << keep);
  }
  char flipped[NCCL_NET_HANDLE_MAXSIZE];
  memcpy(flipped, handle, sizeof(flipped));
  flipped[20] ^= 0x40;  // inside the address
  void* sendComm = nullptr;
  BOOST_TEST(n.net->connect(n.ctx, 0, flipped, &sendComm, nullptr) == ncclInternalError);
  BOOST_TEST(warned("checksum"));
  BOOST_TEST(n.net->closeListen(listenComm) == ncclSuccess);
}

BOOST_AUTO_TEST_CASE(stray_connection_is_dropped_and_listener_keeps_working) {
  Net n;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  BOOST_TEST_REQUIRE(n.net->listen(n.ctx, 0, handle, &listenComm) == ncclSuccess);
  // A raw TCP client that sends garbage instead of a hello.
  sockaddr_in addr{};
  memcpy(&addr, handle + 16, sizeof(addr));  // Handle::address follows 16 bytes of fields
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  BOOST_TEST_REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  char junk[64];
  memset(junk, 0x5a, sizeof(junk));
  BOOST_TEST(write(fd, junk, sizeof(junk)) == static_cast<ssize_t>(sizeof(junk)));
  void* recvComm = nullptr;
  for (int i = 0; i < 100 && !warned("dropping incoming connection"); ++i) {
    BOOST_TEST_REQUIRE(n.net->accept(listenComm, &recvComm, nullptr) == ncclSuccess);
    BOOST_TEST(recvComm == nullptr);
    usleep(1000);
  }
  BOOST_TEST(warned("dropping incoming connection"));
  close(fd);
  // A real connection still works afterwards.
  const ncclNet_v11_t* net = n.net;
  void* ctx = n.ctx;
  char* h = handle;
  pid_t child = spawn([=]() -> int {
    void* sendComm = nullptr;
    if (connectBlocking(net, ctx, 0, h, &sendComm) != ncclSuccess) return 50;
    int v = 42;
    void* req = nullptr;
    net->isend(sendComm, &v, sizeof(v), 3, nullptr, nullptr, &req);
    if (!req || wait(net, req, nullptr) != ncclSuccess) return 51;
    return net->closeSend(sendComm) == ncclSuccess ? 0 : 52;
  });
  BOOST_TEST_REQUIRE(acceptBlocking(n.net, listenComm, &recvComm) == ncclSuccess);
  int v = 0;
  void* data = &v;
  size_t size = sizeof(v);
  int tag = 3;
  void* req = nullptr;
  BOOST_TEST_REQUIRE(n.net->irecv(recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req) == ncclSuccess);
  BOOST_TEST(wait(n.net, req, nullptr) == ncclSuccess);
  BOOST_TEST(v == 42);
  BOOST_TEST(n.net->closeRecv(recvComm) == ncclSuccess);
  BOOST_TEST(n.net->closeListen(listenComm) == ncclSuccess);
  BOOST_TEST(reap(child) == 0);
}

BOOST_AUTO_TEST_CASE(close_with_requests_in_flight) {
  Pair pair([](const ncclNet_v11_t* net, void* sendComm) -> int {
    std::vector<unsigned char> buf(8u << 20);
    void* req = nullptr;
    net->isend(sendComm, buf.data(), buf.size(), 0, nullptr, nullptr, &req);
    return req ? 0 : 60;  // closeSend follows with the request still in flight
  });
  std::vector<unsigned char> buf(8u << 20);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  void* req = nullptr;
  BOOST_TEST_REQUIRE(pair.n.net->irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &req) == ncclSuccess);
  BOOST_TEST(pair.finish() == 0);  // closeRecv with the receive still posted
}
