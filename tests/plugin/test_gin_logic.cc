// GIN ipc backend logic that needs no GPU: handle translation, ordering, signal application.
#define BOOST_TEST_MODULE plugin_gin_logic
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <deque>
#include <random>

#include <cstring>

#include <sys/socket.h>
#include <unistd.h>

#include "rig/copy_plan.h"
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

BOOST_AUTO_TEST_CASE(copy_mode_parsing_and_staging_choice) {
  std::string err;
  BOOST_TEST((parseCopyMode("", &err) == CopyMode::Ce));
  BOOST_TEST((parseCopyMode("ce", &err) == CopyMode::Ce));
  BOOST_TEST((parseCopyMode("staged", &err) == CopyMode::Staged));
  BOOST_TEST((parseCopyMode("memcpy", &err) == CopyMode::Memcpy));
  BOOST_TEST(err.empty());
  BOOST_TEST((parseCopyMode("sm", &err) == CopyMode::Ce));
  BOOST_TEST(err.find("'sm'") != std::string::npos);
  BOOST_TEST(std::string(copyModeName(CopyMode::Staged)) == "staged");
  BOOST_TEST(usesStaging(CopyMode::Staged, 8, 65536));
  BOOST_TEST(usesStaging(CopyMode::Staged, 65536, 65536));
  BOOST_TEST(!usesStaging(CopyMode::Staged, 65537, 65536));
  BOOST_TEST(!usesStaging(CopyMode::Staged, 0, 65536));  // signal-only ops copy nothing
  BOOST_TEST(!usesStaging(CopyMode::Ce, 8, 65536));
  BOOST_TEST(!usesStaging(CopyMode::Memcpy, 8, 65536));
}

BOOST_AUTO_TEST_CASE(staging_ring_hands_out_disjoint_blocks_and_frees_in_order) {
  StagingRing ring(100);
  BOOST_TEST(ring.acquire(0) == StagingRing::kNone);
  BOOST_TEST(ring.acquire(101) == StagingRing::kNone);
  BOOST_TEST(ring.acquire(40) == 0u);
  BOOST_TEST(ring.acquire(40) == 40u);
  BOOST_TEST(ring.acquire(24) == StagingRing::kNone);  // only 20 left at the end, nothing at the start
  ring.releaseOldest();                               // [0, 40) free again
  BOOST_TEST(ring.acquire(24) == 0u);                 // wraps; [80, 100) is skipped
  BOOST_TEST(ring.bytesHeld() == 100u - 16u);         // [40,100) held or skipped, [0,24) held
  BOOST_TEST(ring.acquire(17) == StagingRing::kNone); // [24, 40) is 16 bytes
  BOOST_TEST(ring.acquire(16) == 24u);
  BOOST_TEST(ring.acquire(1) == StagingRing::kNone);  // full
  ring.releaseOldest();
  ring.releaseOldest();
  ring.releaseOldest();
  BOOST_TEST(ring.blocksHeld() == 0u);
  BOOST_TEST(ring.bytesHeld() == 0u);
  BOOST_TEST(ring.acquire(100) == 0u);  // empty ring restarts at 0
  ring.releaseOldest();
  ring.releaseOldest();  // harmless when empty
  BOOST_TEST(ring.acquire(5) == 0u);
  BOOST_TEST(ring.acquire(5) == 8u);  // blocks are 8-byte aligned

  // Random acquire/release sequences against a byte map: live blocks never overlap or leave the
  // ring, and an acquire fails only when no contiguous span is free in ring order.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    size_t cap = 64 + rng() % 512;
    StagingRing r(cap);
    std::deque<std::pair<size_t, size_t>> live;  // (offset, bytes)
    std::vector<int> owner(cap, 0);
    for (int step = 0; step < 400; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        auto [off, n] = live.front();
        live.pop_front();
        for (size_t i = off; i < off + n; ++i) owner[i] = 0;
        r.releaseOldest();
        continue;
      }
      size_t n = 1 + rng() % (cap / 3);
      size_t off = r.acquire(n);
      if (off == StagingRing::kNone) {
        BOOST_TEST_REQUIRE(!live.empty());  // an empty ring fits anything up to its capacity
        continue;
      }
      BOOST_TEST_REQUIRE(off % 8 == 0u);
      BOOST_TEST_REQUIRE(off + n <= cap);
      for (size_t i = off; i < off + n; ++i) {
        BOOST_TEST_REQUIRE(owner[i] == 0);
        owner[i] = 1;
      }
      live.emplace_back(off, n);
      BOOST_TEST_REQUIRE(r.blocksHeld() == live.size());
    }
    while (!live.empty()) {
      live.pop_front();
      r.releaseOldest();
    }
    BOOST_TEST_REQUIRE(r.bytesHeld() == 0u);
    BOOST_TEST_REQUIRE(r.acquire(cap) == 0u);
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

BOOST_AUTO_TEST_CASE(copy_and_signal_modes_parse) {
  using namespace epx::plugin::gin;
  std::string err;
  BOOST_TEST((parseCopyMode("kernel", &err) == CopyMode::Kernel));
  BOOST_TEST(err.empty());
  BOOST_TEST(std::string(copyModeName(CopyMode::Kernel)) == "kernel");
  BOOST_TEST((parseCopyMode("kernels", &err) == CopyMode::Ce));
  BOOST_TEST(err == "unknown EPX_GIN_COPY value 'kernels' (ce, staged, memcpy, kernel, kernel-all)");
  err.clear();
  BOOST_TEST((parseCopyMode("kernel-all", &err) == CopyMode::KernelAll));
  BOOST_TEST(err.empty());
  BOOST_TEST(std::string(copyModeName(CopyMode::KernelAll)) == "kernel-all");
  err.clear();
  BOOST_TEST((parseSignalApply("", &err) == SignalApply::Kernel));  // the default
  BOOST_TEST((parseSignalApply("readback", &err) == SignalApply::Readback));
  BOOST_TEST((parseSignalApply("kernel", &err) == SignalApply::Kernel));
  BOOST_TEST(err.empty());
  BOOST_TEST((parseSignalApply("atomic", &err) == SignalApply::Kernel));
  BOOST_TEST(err == "unknown EPX_GIN_SIGNAL value 'atomic' (readback, kernel)");
  BOOST_TEST(std::string(signalApplyName(SignalApply::Kernel)) == "kernel");
  // Only non-empty puts up to the small-put limit go to the kernel; larger ones stay on the engines.
  BOOST_TEST(usesCopyKernel(CopyMode::Kernel, 1, 65536));
  BOOST_TEST(usesCopyKernel(CopyMode::Kernel, 65536, 65536));
  BOOST_TEST(!usesCopyKernel(CopyMode::Kernel, 65537, 65536));
  BOOST_TEST(!usesCopyKernel(CopyMode::Kernel, 0, 65536));
  BOOST_TEST(!usesCopyKernel(CopyMode::Ce, 64, 65536));
  BOOST_TEST(!usesStaging(CopyMode::Kernel, 64, 65536));
  // kernel-all: every non-empty put.
  BOOST_TEST(usesCopyKernel(CopyMode::KernelAll, 1, 65536));
  BOOST_TEST(usesCopyKernel(CopyMode::KernelAll, size_t(64) << 20, 65536));
  BOOST_TEST(!usesCopyKernel(CopyMode::KernelAll, 0, 65536));
  BOOST_TEST(!usesStaging(CopyMode::KernelAll, 64, 65536));
}

BOOST_AUTO_TEST_CASE(copy_shares_cover_the_put_exactly) {
  using namespace epx::plugin::gin;
  BOOST_TEST(copyCtas(1) == 1);
  BOOST_TEST(copyCtas(kCopyBytesPerCta) == 1);
  BOOST_TEST(copyCtas(kCopyBytesPerCta + 1) == 2);
  BOOST_TEST(copyCtas(65536) == kCopyMaxCtas);
  BOOST_TEST(copyCtas(uint64_t(1) << 30) == kCopyMaxCtas);
  for (uint64_t bytes : {uint64_t(1), uint64_t(15), uint64_t(16), uint64_t(17), uint64_t(4095), uint64_t(16385),
                         uint64_t(49153), uint64_t(65535), uint64_t(65536)}) {
    const int ctas = copyCtas(bytes);
    const uint64_t share = copyShare(bytes, ctas);
    BOOST_TEST(share % 16 == 0u);
    uint64_t covered = 0;  // the kernel's split: CTA b takes [b*share, min((b+1)*share, bytes))
    for (int b = 0; b < ctas; ++b) {
      const uint64_t begin = share * uint64_t(b);
      if (begin >= bytes) continue;
      BOOST_TEST(begin == covered, bytes);
      covered = std::min(begin + share, bytes);
    }
    BOOST_TEST(covered == bytes);
  }
  BOOST_TEST(SignalAddBatch::kMax <= kSignalThreads);
  BOOST_TEST(sizeof(SignalAddBatch) <= 4096u);  // a kernel parameter
}

BOOST_AUTO_TEST_CASE(the_fatbin_is_embedded) {
#ifdef EPX_PLUGIN_HAS_GIN_KERNELS
  using namespace epx::plugin::gin;
  BOOST_TEST_REQUIRE(kGinKernelsFatbinSize > 16u);
  // A fatbin starts with its magic 0xBA55ED50 (little endian) and names both entry points.
  BOOST_TEST((kGinKernelsFatbin[0] == 0x50 && kGinKernelsFatbin[1] == 0xed && kGinKernelsFatbin[2] == 0x55 &&
              kGinKernelsFatbin[3] == 0xba));
  const std::string bytes(reinterpret_cast<const char*>(kGinKernelsFatbin), kGinKernelsFatbinSize);
  BOOST_TEST(bytes.find(kCopyKernelName) != std::string::npos);
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
  BOOST_TEST(err.find("unknown EPX_GIN_STREAMS value 'shared'") != std::string::npos);
  BOOST_TEST(std::string(streamPlanName(StreamPlan::PerProcess)) == "process");
  int k = 0;
  err.clear();
  BOOST_TEST((parseStreamPlan("process", &err, &k) == StreamPlan::PerProcess));
  BOOST_TEST(k == 1);
  BOOST_TEST((parseStreamPlan("process:4", &err, &k) == StreamPlan::PerProcess));
  BOOST_TEST(k == 4);
  BOOST_TEST(err.empty());
  for (const char* bad : {"process:0", "process:17", "process:", "process:x", "process:4x", "process:007"}) {
    err.clear();
    BOOST_TEST((parseStreamPlan(bad, &err, &k) == StreamPlan::PerPeer), bad);
    BOOST_TEST(k == 1);
    BOOST_TEST(err.find("process:K") != std::string::npos, bad);
  }
  BOOST_TEST(streamsAdded(StreamPlan::PerProcess, 8, true, 4) == 5);
  BOOST_TEST(streamsAdded(StreamPlan::PerProcess, 8, false, 4) == 0);
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

BOOST_AUTO_TEST_CASE(stream_priority_parses) {
  std::string err;
  BOOST_TEST((parseStreamPriority("", &err) == StreamPriority::Default && err.empty()));
  BOOST_TEST((parseStreamPriority("default", &err) == StreamPriority::Default && err.empty()));
  BOOST_TEST((parseStreamPriority("high", &err) == StreamPriority::High && err.empty()));
  BOOST_TEST((parseStreamPriority("urgent", &err) == StreamPriority::Default));
  BOOST_TEST(err == "unknown EPX_GIN_STREAM_PRIORITY value 'urgent' (default, high)");
}

BOOST_AUTO_TEST_CASE(pump_mode_parses) {
  std::string err;
  BOOST_TEST((parsePumpMode("", &err) == PumpMode::Poll && err.empty()));
  BOOST_TEST((parsePumpMode("poll", &err) == PumpMode::Poll && err.empty()));
  BOOST_TEST((parsePumpMode("each", &err) == PumpMode::Each && err.empty()));
  BOOST_TEST((parsePumpMode("sometimes", &err) == PumpMode::Poll));
  BOOST_TEST(err == "EPX_GIN_PUMP=\"sometimes\" is not poll or each");
}
