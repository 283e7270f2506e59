// GIN ipc backend logic that needs no GPU: handle translation, ordering, signal application.
#define BOOST_TEST_MODULE plugin_gin_logic
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include <cstring>

#include <sys/socket.h>
#include <unistd.h>

#include "rig/stream_plan.h"
#include "rig/gin_kernels.h"
#include "rig/ipc_backend.h"
#include "rig/readable.h"
#include "gin/registry.h"
#include "gin/signals.h"
#include "nccl_net.h"
#include "net_harness.h"

using namespace epx::plugin::gin;

BOOST_AUTO_TEST_CASE(destination_handles_translate_to_the_peer_registration) {
  // Rank 1 of 3. Registration 0: a window mapped from every peer; 1: the signal buffer (owner-applied).
  Registry reg(3, 1);
  Registration* window = reg.add(0x10000, 4096, Placement::Device);
  window->peerBase = {0x900000, 0x10000, 0xa00000};
  window->peerSize = {4096, 4096, 4096};
  Registration* signals = reg.add(0x20000, 512, Placement::Device);
  signals->ownerApplied = true;
  BOOST_TEST(window->index == 0u);
  BOOST_TEST(signals->index == 1u);
  BOOST_TEST(reg.find(window) == window);

  uintptr_t a = 0;
  BOOST_TEST(translateDestination(reg, window, 128, 64, 0, &a).empty());
  BOOST_TEST(a == 0x900000u + 128);
  BOOST_TEST(translateDestination(reg, window, 0, 4096, 2, &a).empty());
  BOOST_TEST(a == 0xa00000u);
  BOOST_TEST(translateDestination(reg, window, 8, 8, 1, &a).empty());  // self: own address
  BOOST_TEST(a == 0x10000u + 8);
  BOOST_TEST(translateSource(reg, window, 100, 10, &a).empty());
  BOOST_TEST(a == 0x10000u + 100);
}

BOOST_AUTO_TEST_CASE(unregistered_or_out_of_range_accesses_are_errors) {
  Registry reg(2, 0);
  Registration* window = reg.add(0x10000, 4096, Placement::Device);
  window->peerBase[1] = 0x900000;
  window->peerSize[1] = 4096;
  Registration* signals = reg.add(0x20000, 512, Placement::Device);
  signals->ownerApplied = true;
  int stranger = 0;
  uintptr_t a = 0;
  BOOST_TEST(translateSource(reg, &stranger, 0, 8, &a).find("not a registered") != std::string::npos);
  BOOST_TEST(translateDestination(reg, &stranger, 0, 8, 1, &a).find("not a registered") != std::string::npos);
  BOOST_TEST(!translateSource(reg, window, 4090, 8, &a).empty());
  BOOST_TEST(!translateSource(reg, window, ~0ull, 8, &a).empty());  // no wrap-around
  BOOST_TEST(!translateDestination(reg, window, 4000, 97, 1, &a).empty());
  BOOST_TEST(translateDestination(reg, window, 4000, 96, 1, &a).empty());
  BOOST_TEST(!translateDestination(reg, window, 0, 8, 2, &a).empty());  // no such rank
  BOOST_TEST(translateDestination(reg, signals, 0, 8, 1, &a).find("owner-applied") != std::string::npos);
  BOOST_TEST(reg.remove(window));
  BOOST_TEST(!translateSource(reg, window, 0, 8, &a).empty());  // deregistered
  BOOST_TEST(reg.byIndex(0) == nullptr);
  BOOST_TEST(reg.byIndex(1) == signals);  // indices stay aligned with peers after a deregistration
  Registration* next = reg.add(0x30000, 64, Placement::Device);
  BOOST_TEST(next->index == 2u);
}

BOOST_AUTO_TEST_CASE(signal_updates_validate_and_coalesce) {
  SignalUpdate inc{1, 16, 999, NCCL_NET_SIGNAL_OP_INC};
  SignalUpdate add{1, 16, 5, NCCL_NET_SIGNAL_OP_ADD};
  SignalUpdate other{1, 24, 7, NCCL_NET_SIGNAL_OP_ADD};
  BOOST_TEST(signalDelta(inc) == 1u);  // INC adds one whatever value says
  BOOST_TEST(signalDelta(add) == 5u);
  BOOST_TEST(validateSignal(inc, 512).empty());
  BOOST_TEST(!validateSignal(SignalUpdate{1, 12, 1, NCCL_NET_SIGNAL_OP_ADD}, 512).empty());  // misaligned
  BOOST_TEST(!validateSignal(SignalUpdate{1, 512, 1, NCCL_NET_SIGNAL_OP_ADD}, 512).empty()); // outside
  BOOST_TEST(!validateSignal(SignalUpdate{1, 0, 1, 7}, 512).empty());                        // bad op
  auto sums = coalesce({inc, add, other, inc});
  BOOST_TEST(sums.size() == 2u);
  BOOST_TEST((sums[{1, 16}]) == 7u);
  BOOST_TEST((sums[{1, 24}]) == 7u);
  // Applied to a signal array, coalesced sums equal one-by-one application (64-bit wrap included).
  std::mt19937_64 rng(3);
  std::vector<uint64_t> one(8, ~0ull - 3), many(8, ~0ull - 3);
  std::vector<SignalUpdate> ups;
  for (int i = 0; i < 200; ++i) {
    SignalUpdate u{0, (rng() % 8) * 8, rng() % 1000, static_cast<uint32_t>((rng() & 1) ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD)};
    ups.push_back(u);
    one[u.offset / 8] += signalDelta(u);
  }
  for (const auto& [key, delta] : coalesce(ups)) many[key.second / 8] += delta;
  BOOST_TEST(one == many);
}

BOOST_AUTO_TEST_CASE(signals_are_released_only_after_all_earlier_puts_to_the_peer) {
  PeerOrder order;
  uint64_t a = order.post(), b = order.post(), c = order.post(), d = order.post();
  BOOST_TEST(order.release() == 0u);
  order.complete(c);  // out of order: nothing may be released yet
  order.complete(b);
  BOOST_TEST(order.release() == 0u);
  BOOST_TEST(!order.isReleased(b));
  order.complete(a);
  BOOST_TEST(order.release() == 3u);
  BOOST_TEST(order.isReleased(c));
  BOOST_TEST(!order.isReleased(d));
  order.complete(d);
  order.complete(d);  // duplicate completion is harmless
  BOOST_TEST(order.release() == 1u);
  BOOST_TEST(order.released() == 4u);
  // Random completion orders: release is always a prefix.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    PeerOrder o;
    std::vector<uint64_t> seqs;
    for (int i = 0; i < 40; ++i) seqs.push_back(o.post());
    std::shuffle(seqs.begin(), seqs.end(), rng);
    std::vector<bool> completed(41, false);
    for (uint64_t s : seqs) {
      o.complete(s);
      completed[s] = true;
      o.release();
      uint64_t prefix = 0;
      while (prefix + 1 <= 40 && completed[prefix + 1]) ++prefix;
      BOOST_TEST_REQUIRE(o.released() == prefix);
    }
  }
}

BOOST_AUTO_TEST_CASE(gin_symbol_is_exported_for_proxy_mode) {
  const auto* gin = epx::test::pluginSymbol<ncclGin_v11_t>("ncclGinPlugin_v11");
  BOOST_TEST_REQUIRE(gin != nullptr);
  BOOST_TEST(std::string(gin->name) == "EPX");
  BOOST_TEST(gin->iput != nullptr);
  BOOST_TEST(gin->iputSignal != nullptr);
  BOOST_TEST(gin->test != nullptr);
  BOOST_TEST(gin->ginProgress != nullptr);
  BOOST_TEST(gin->createContext == nullptr);  // PROXY mode
  BOOST_TEST(gin->finalize(nullptr) == ncclSuccess);
  void* ctx = nullptr;
  ncclResult_t r = gin->init(&ctx, 1, epx::test::captureLog);
  if (r == ncclSuccess) {
    ncclNetProperties_v11_t p;
    BOOST_TEST_REQUIRE(gin->getProperties(0, &p) == ncclSuccess);
    BOOST_TEST(p.netDeviceType == NCCL_NET_DEVICE_GIN_PROXY);
    BOOST_TEST((p.maxRecvs & (p.maxRecvs - 1)) == 0);
    BOOST_TEST((p.ptrSupport & NCCL_PTR_DMABUF) == 0);
  } else {
    BOOST_TEST_MESSAGE("no CUDA driver here: GIN init declined (" << r << "), as it must without a GPU");
    BOOST_TEST(ctx == nullptr);
  }
}

BOOST_AUTO_TEST_SUITE(hardware_queues)

BOOST_AUTO_TEST_CASE(warns_when_streams_outnumber_the_queues) {
  using epx::plugin::gin::hardwareQueueWarning;
  // CUDA's default is 8 queues.
  BOOST_TEST(hardwareQueueWarning(8, nullptr).empty());
  const std::string w = hardwareQueueWarning(14, nullptr);
  BOOST_TEST(w.find("14 streams") != std::string::npos);
  BOOST_TEST(w.find("8 hardware queues") != std::string::npos);
  BOOST_TEST(w.find("default 8") != std::string::npos);
  BOOST_TEST(w.find("CUDA_DEVICE_MAX_CONNECTIONS=32") != std::string::npos);
  // 2 fake nodes: 4 GIN contexts x (2 peer streams + 1 signal stream) + 2 = 14 fit in 32.
  BOOST_TEST(hardwareQueueWarning(14, "32").empty());
  BOOST_TEST(hardwareQueueWarning(33, "32").find("=32") != std::string::npos);
  // Invalid or out-of-range values: CUDA's default applies.
  BOOST_TEST(!hardwareQueueWarning(9, "abc").empty());
  BOOST_TEST(!hardwareQueueWarning(9, "64").empty());
  BOOST_TEST(hardwareQueueWarning(9, "16").empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(gin_kernels)

BOOST_AUTO_TEST_CASE(signal_batches_fit_one_launch) {
  using namespace epx::plugin::gin;
  BOOST_TEST(SignalAddBatch::kMax <= kSignalThreads);
  BOOST_TEST(sizeof(SignalAddBatch) <= 4096u);  // a kernel parameter
}

BOOST_AUTO_TEST_CASE(the_fatbin_is_embedded) {
#ifdef EPX_PLUGIN_HAS_GIN_KERNELS
  using namespace epx::plugin::gin;
  BOOST_TEST_REQUIRE(kGinKernelsFatbinSize > 16u);
  // A fatbin starts with its magic 0xBA55ED50 (little endian) and names its entry point.
  BOOST_TEST((kGinKernelsFatbin[0] == 0x50 && kGinKernelsFatbin[1] == 0xed && kGinKernelsFatbin[2] == 0x55 &&
              kGinKernelsFatbin[3] == 0xba));
  const std::string bytes(reinterpret_cast<const char*>(kGinKernelsFatbin), kGinKernelsFatbinSize);
  BOOST_TEST(bytes.find(kSignalAddKernelName) != std::string::npos);
#else
  BOOST_TEST(epx::plugin::gin::kGinKernelsFatbinSize == 0u);
#endif
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(stream_plan)

BOOST_AUTO_TEST_CASE(parse_and_count) {
  using namespace epx::plugin::gin;
  std::string err;
  BOOST_TEST((parseStreamPlan("", &err) == StreamPlan::PerPeer));
  BOOST_TEST(err.empty());
  BOOST_TEST((parseStreamPlan("peer", &err) == StreamPlan::PerPeer));
  BOOST_TEST((parseStreamPlan("process", &err) == StreamPlan::PerProcess));
  BOOST_TEST(err.empty());
  BOOST_TEST((parseStreamPlan("shared", &err) == StreamPlan::PerPeer));
  BOOST_TEST(err == "unknown EPX_GIN_STREAMS value 'shared' (peer, process)");
  err.clear();
  BOOST_TEST((parseStreamPlan("process:4", &err) == StreamPlan::PerPeer));  // no count of shared streams
  BOOST_TEST(!err.empty());
  BOOST_TEST(std::string(streamPlanName(StreamPlan::PerProcess)) == "process");
  BOOST_TEST(std::string(streamPlanName(StreamPlan::PerPeer)) == "peer");
  BOOST_TEST(streamsAdded(StreamPlan::PerProcess, 8, true) == 2);
  BOOST_TEST(streamsAdded(StreamPlan::PerProcess, 8, false) == 0);
  // 8 ranks, 4 GIN contexts: per peer 4 x (8 + 1) = 36 streams, per process 2.
  int perPeer = 0, perProcess = 0;
  for (int c = 0; c < 4; ++c) {
    perPeer += streamsAdded(StreamPlan::PerPeer, 8, c == 0);
    perProcess += streamsAdded(StreamPlan::PerProcess, 8, c == 0);
  }
  BOOST_TEST(perPeer == 36);
  BOOST_TEST(perProcess == 2);
  BOOST_TEST(hardwareQueueWarning(perProcess + 2, nullptr).empty());  // fits CUDA's default 8
  BOOST_TEST(!hardwareQueueWarning(perPeer + 2, "12").empty());      // 8 fake nodes: did not fit
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(ipc_handles_survive_the_combined_gin_handle) {
  // gin/backend.cc carries the ipc listener as a 16-byte digest and rebuilds the handle at connect.
  unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  BOOST_TEST_REQUIRE(ipcListen(nullptr, 0, handle, &listen) == ncclSuccess);
  IpcHandleDigest digest{};
  BOOST_TEST_REQUIRE(ipcDigestHandle(handle, &digest));
  unsigned char rebuilt[NCCL_NET_HANDLE_MAXSIZE];
  ipcExpandHandle(digest, rebuilt);
  BOOST_TEST(std::memcmp(handle, rebuilt, sizeof handle) == 0);
  handle[0] ^= 1;  // not an ipc handle any more
  BOOST_TEST(!ipcDigestHandle(handle, &digest));
  BOOST_TEST(ipcCloseListen(listen) == ncclSuccess);
  BOOST_TEST(ipcHostHash() == ipcHostHash());
  BOOST_TEST(ipcHostHash() != 0u);
}

// Progress drains only the sockets with something to read: one poll() reports them (data or a
// hang-up, so a lost peer is still noticed), in order, skipping absent ones (-1).
BOOST_AUTO_TEST_CASE(readable_sockets_are_the_ones_with_data_or_a_hang_up) {
  int a[2], b[2], c[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a) == 0);
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, b) == 0);
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, c) == 0);
  const std::vector<int> fds = {a[0], -1, b[0], c[0]};
  std::vector<int> ready = {7};
  BOOST_TEST(readableSockets(fds, &ready));
  BOOST_TEST(ready.empty());  // nothing sent yet
  const char byte = 1;
  BOOST_REQUIRE(::send(c[1], &byte, 1, 0) == 1);
  BOOST_TEST(readableSockets(fds, &ready));
  BOOST_TEST(ready == std::vector<int>({3}));
  ::close(a[1]);  // the peer behind fds[0] went away
  BOOST_TEST(readableSockets(fds, &ready));
  BOOST_TEST(ready == std::vector<int>({0, 3}));
  BOOST_TEST(readableSockets({-1, -1}, &ready));
  BOOST_TEST(ready.empty());
  for (int fd : {a[0], b[0], b[1], c[0], c[1]}) ::close(fd);
}
