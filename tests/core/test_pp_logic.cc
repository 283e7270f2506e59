// CPU tests of PP channels' pure logic: config, window layout, slot flow control (a simulated
// sender and receiver), chunking, argument checks, agreement, async-error words.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "core/async_error.h"
#include "core/coll_config.h"
#include "epx/device/chunking.h"
#include "epx/device/pp_layout.h"

using namespace epx;

namespace {
PpConfigRequest ppConfig(size_t maxBytes) {
  PpConfigRequest c;
  c.maxMessageBytes = maxBytes;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(pp_logic)

BOOST_AUTO_TEST_CASE(config_defaults_and_limits) {
  PpConfig cfg;
  PpConfigRequest c = ppConfig(1 << 20);
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");
  BOOST_TEST(cfg.maxBytes == uint64_t(1) << 20);
  BOOST_TEST(cfg.slots == 2);
  BOOST_TEST(cfg.numCtas == 4);
  BOOST_TEST(cfg.timeoutMs == 10000);
  BOOST_TEST(cfg.chunkBytes == uint64_t(4) << 20);
  c.slots = 8;
  c.numCtas = 1;
  c.timeoutMs = 50;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");
  BOOST_TEST(cfg.slots == 8);
  BOOST_TEST(cfg.numCtas == 1);
  BOOST_TEST(cfg.timeoutMs == 50);
  c.chunkBytes = size_t(4) << 20;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");
  BOOST_TEST(cfg.chunkBytes == uint64_t(4) << 20);
  c.chunkBytes = size_t(64) << 10;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");
  BOOST_TEST(cfg.chunkBytes == uint64_t(64) << 10);
  c.chunkBytes = size_t(1) << 30;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");

  c = ppConfig(0);
  BOOST_TEST(normalizePpConfig(c, &cfg) == "maxMessageBytes 0 is not in 1 .. 4294967296");
  c = ppConfig((size_t(4) << 30) + 1);
  BOOST_TEST(normalizePpConfig(c, &cfg) == "maxMessageBytes 4294967297 is not in 1 .. 4294967296");
  c = ppConfig(64);
  c.slots = 0;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "slots 0 is not in 1 .. 64");
  c.slots = 65;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "slots 65 is not in 1 .. 64");
  c = ppConfig(64);
  c.numCtas = 33;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "numCtas 33 is not in 1 .. 32");
  c = ppConfig(64);
  c.timeoutMs = 0;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "timeoutMs 0 must be >= 1");
  const std::string chunkRange = " is not a multiple of 16 in 65536 .. 1073741824 (0 = default 4194304)";
  c = ppConfig(64);
  c.chunkBytes = (size_t(64) << 10) - 16;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "chunkBytes 65520" + chunkRange);
  c.chunkBytes = (size_t(1) << 30) + 16;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "chunkBytes 1073741840" + chunkRange);
  c.chunkBytes = (size_t(1) << 20) + 8;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "chunkBytes 1048584" + chunkRange);
}

// The public configs' header (pp.cc and bucket.cc check it before translating the settings).
BOOST_AUTO_TEST_CASE(config_header) {
  BOOST_TEST(checkConfigHeader("config", true, 48, 48, 0x45505850u, 0x45505850u) == "");
  BOOST_TEST(checkConfigHeader("config", false, 0, 48, 0, 0x45505850u) == "config is NULL");
  BOOST_TEST(checkConfigHeader("config", true, 48, 48, 0, 0x45505850u) ==
             "config was not initialized with its _INITIALIZER macro (bad magic)");
  BOOST_TEST(checkConfigHeader("config", true, 8, 48, 0x45505850u, 0x45505850u) ==
             "config has size 8, this library expects 48");
}

BOOST_AUTO_TEST_CASE(window_layout) {
  PpConfig cfg;
  cfg.maxBytes = 1000;  // not a multiple of 16
  cfg.slots = 3;
  const dev::PpLayout nv = ppLayout(cfg, 4, 4);
  BOOST_TEST(nv.slotBytes == 16u + 1008u);
  BOOST_TEST(nv.numSlots == 3);
  BOOST_TEST(nv.flags == 0u);
  BOOST_TEST(nv.slots == dev::kWindowRegionAlign);  // flags: 2 kinds x 4 ranks x 4 bytes, one region
  BOOST_TEST(nv.stage == nv.slots + 4u * 3u * nv.slotBytes);
  BOOST_TEST(nv.totalBytes % dev::kWindowTotalAlign == 0u);
  BOOST_TEST(nv.totalBytes >= nv.stage);
  const dev::PpLayout net = ppLayout(cfg, 4, 2);
  BOOST_TEST(net.stage % dev::kWindowRegionAlign == 0u);
  BOOST_TEST(net.totalBytes >= net.stage + 4u * dev::kPpStageBuffers * net.slotBytes);
  // Every (sender, slot) has its own 16-byte aligned slot, in order, inside the slot region.
  uint64_t expect = nv.slots;
  for (int src = 0; src < 4; ++src)
    for (int s = 0; s < 3; ++s) {
      BOOST_TEST(dev::ppSlotOffset(nv, src, s) == expect);
      BOOST_TEST(dev::ppSlotOffset(nv, src, s) % 16 == 0u);
      expect += nv.slotBytes;
    }
  BOOST_TEST(dev::ppStageOffset(net, 3, 0) == net.stage + 6u * net.slotBytes);
  BOOST_TEST(dev::ppStageOffset(net, 3, 1) == net.stage + 7u * net.slotBytes);
  BOOST_TEST(dev::ppStageOffset(net, 0, 1) == net.stage + net.slotBytes);
  // Alternate messages use alternate buffers and disjoint GIN counter ranges.
  BOOST_TEST(dev::ppStageBufferOf(1) != dev::ppStageBufferOf(2));
  BOOST_TEST(dev::ppStageBufferOf(1) == dev::ppStageBufferOf(3));
  BOOST_TEST(dev::ppGinCounterCount(4) == 8);
  BOOST_TEST(dev::ppGinCounterBase(dev::ppStageBufferOf(2), 4) + 4 <= dev::ppGinCounterBase(dev::ppStageBufferOf(3), 4));
  // The size hint is the layout with network peers.
  size_t hint = 0;
  PpConfigRequest c = ppConfig(1000);
  c.slots = 3;
  BOOST_TEST(normalizePpConfig(c, &cfg) == "");
  BOOST_TEST(ppLayout(cfg, 4, 1).totalBytes >= ppLayout(cfg, 4, 4).totalBytes);
  (void)hint;
}

// The PP sender's gate: protocol.h's free/ready rule with the channel's slots as depth.
bool ppMayWrite(uint32_t n, int slots, uint32_t freed) { return dev::mayWrite(n, uint32_t(slots), freed); }

BOOST_AUTO_TEST_CASE(slot_arithmetic) {
  BOOST_TEST(dev::ppSlotOf(1, 2) == 0);
  BOOST_TEST(dev::ppSlotOf(2, 2) == 1);
  BOOST_TEST(dev::ppSlotOf(3, 2) == 0);
  BOOST_TEST(dev::ppSlotOf(7, 3) == 0);
  // The first `slots` messages never wait; message slots + 1 waits for message 1 to be freed.
  BOOST_TEST(ppMayWrite(1, 2, 0));
  BOOST_TEST(ppMayWrite(2, 2, 0));
  BOOST_TEST(!ppMayWrite(3, 2, 0));
  BOOST_TEST(ppMayWrite(3, 2, 1));
  BOOST_TEST(!ppMayWrite(10, 4, 5));
  BOOST_TEST(ppMayWrite(10, 4, 6));
  // Across the 32-bit wrap of the message counter.
  const uint32_t n = 0xffffffffu;  // message 2^32 - 1
  BOOST_TEST(!ppMayWrite(n + 2u, 2, n - 1u));
  BOOST_TEST(ppMayWrite(n + 2u, 2, n));
  BOOST_TEST(dev::ppSlotOf(n + 1u, 1) == 0);
}

// A sender and a receiver that follow the device's rules with random progress: the receiver gets
// every message in order, and no slot is written while it holds an unread message.
BOOST_AUTO_TEST_CASE(simulated_flow_control_never_overwrites) {
  std::mt19937 rng(7);
  for (int slots : {1, 2, 3, 8}) {
    const uint32_t messages = 500;
    std::vector<int> slotHolds(size_t(slots), 0);  // message number held unread, 0 = free
    uint32_t sent = 0, freed = 0, received = 0, maxInFlight = 0;
    while (received < messages) {
      if (rng() % 2 == 0 && sent < messages) {
        const uint32_t n = sent + 1;
        if (ppMayWrite(n, slots, freed)) {
          const int s = dev::ppSlotOf(n, slots);
          BOOST_TEST_REQUIRE(slotHolds[size_t(s)] == 0);  // never overwrites an unread message
          slotHolds[size_t(s)] = int(n);
          sent = n;
        }
      } else if (received < sent) {
        const uint32_t n = received + 1;
        const int s = dev::ppSlotOf(n, slots);
        BOOST_TEST_REQUIRE(slotHolds[size_t(s)] == int(n));  // in order
        slotHolds[size_t(s)] = 0;
        received = n;
        freed = n;
      }
      maxInFlight = std::max(maxInFlight, sent - freed);
    }
    BOOST_TEST(maxInFlight == uint32_t(slots));  // the bound is reached, never exceeded
  }
}

BOOST_AUTO_TEST_CASE(chunking) {
  BOOST_TEST(dev::chunksOf(0, 16) == 0u);
  BOOST_TEST(dev::chunksOf(1, 16) == 1u);
  BOOST_TEST(dev::chunksOf(32, 16) == 2u);
  BOOST_TEST(dev::chunksOf(33, 16) == 3u);
  const uint64_t bytes = 5 * dev::kBucketDefaultChunkBytes + 12345;
  const uint64_t n = dev::chunksOf(bytes, dev::kBucketDefaultChunkBytes);
  BOOST_TEST(n == 6u);
  uint64_t at = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const dev::ByteRange r = dev::chunkRange(bytes, dev::kBucketDefaultChunkBytes, i);
    BOOST_TEST(r.begin == at);
    at = r.end;
  }
  BOOST_TEST(at == bytes);
  BOOST_TEST(dev::chunkRange(bytes, dev::kBucketDefaultChunkBytes, 5).size() == 12345u);
  // CTA shares: contiguous, cover everything, cut at 16-byte boundaries, tail to the last part.
  for (uint64_t b : {uint64_t(0), uint64_t(4), uint64_t(15), uint64_t(16), uint64_t(1000), uint64_t(1) << 24, uint64_t(12345679)})
    for (int parts : {1, 3, 4, 32}) {
      uint64_t end = 0;
      for (int p = 0; p < parts; ++p) {
        const dev::ByteRange r = dev::vecShare(b, parts, p);
        BOOST_TEST(r.begin == end);
        BOOST_TEST(r.begin % 16 == 0u);
        BOOST_TEST(r.end >= r.begin);
        if (p < parts - 1) BOOST_TEST(r.end % 16 == 0u);
        end = r.end;
      }
      BOOST_TEST(end == b);
    }
  BOOST_TEST(dev::vecShare(1000, 4, 0).size() == 256u);  // 62 vectors: 16,16,15,15
  BOOST_TEST(dev::vecShare(1000, 4, 3).size() == 240u + 8u);
  uint64_t covered = 0;
  for (int p = 0; p < 7; ++p) covered += dev::itemShare(100, 7, p).size();
  BOOST_TEST(covered == 100u);
  BOOST_TEST(dev::itemShare(100, 7, 0).size() == 15u);
  BOOST_TEST(dev::itemShare(100, 7, 6).size() == 14u);
}

// GIN put rounds of a message: 1 up to one chunk (default 4 MiB), one per started chunk up to
// kPpMaxPutRounds (8); the rounds' data ranges cover the message in order at 16-byte boundaries.
BOOST_AUTO_TEST_CASE(put_rounds) {
  const uint64_t m1 = uint64_t(1) << 20;
  BOOST_TEST(dev::kPpDefaultChunkBytes == 4 * m1);
  BOOST_TEST(dev::ppPutRounds(0) == 1);
  BOOST_TEST(dev::ppPutRounds(16) == 1);
  BOOST_TEST(dev::ppPutRounds(4 * m1) == 1);
  BOOST_TEST(dev::ppPutRounds(4 * m1 + 1) == 2);
  BOOST_TEST(dev::ppPutRounds(12 * m1) == 3);
  BOOST_TEST(dev::ppPutRounds(16 * m1) == 4);
  BOOST_TEST(dev::ppPutRounds(32 * m1) == 8);
  BOOST_TEST(dev::ppPutRounds(64 * m1) == 8);
  BOOST_TEST(dev::ppPutRounds(uint64_t(4) << 30) == 8);
  BOOST_TEST(dev::ppPutRounds(m1, m1) == 1);
  BOOST_TEST(dev::ppPutRounds(m1 + 1, m1) == 2);
  BOOST_TEST(dev::ppPutRounds(3 * m1, m1) == 3);
  BOOST_TEST(dev::ppPutRounds(16 * m1, m1) == 8);
  // Other chunk sizes (ncclEpPpConfig_t.chunkBytes).
  const uint64_t k64 = uint64_t(64) << 10, m4 = uint64_t(4) << 20;
  BOOST_TEST(dev::ppPutRounds(k64, k64) == 1);
  BOOST_TEST(dev::ppPutRounds(k64 + 16, k64) == 2);
  BOOST_TEST(dev::ppPutRounds(uint64_t(1) << 20, k64) == 8);
  BOOST_TEST(dev::ppPutRounds(uint64_t(16) << 20, m4) == 4);
  BOOST_TEST(dev::ppPutRounds((uint64_t(16) << 20) + 16, m4) == 5);
  BOOST_TEST(dev::ppPutRounds(uint64_t(8) << 20, uint64_t(8) << 20) == 1);
  BOOST_TEST(dev::ppPutRounds(0, m4) == 1);
  // Over 8 chunks: 8 rounds, each at least one chunk.
  const uint64_t bytes = (uint64_t(64) << 20) + 12;
  const int rounds = dev::ppPutRounds(bytes);
  BOOST_TEST(rounds == dev::kPpMaxPutRounds);
  uint64_t at = 0;
  for (int j = 0; j < rounds; ++j) {
    const dev::ByteRange r = dev::vecShare(bytes, rounds, j);
    BOOST_TEST(r.begin == at);
    BOOST_TEST(r.begin % 16 == 0u);
    BOOST_TEST(r.size() >= dev::kPpDefaultChunkBytes);
    at = r.end;
  }
  BOOST_TEST(at == bytes);
}

BOOST_AUTO_TEST_CASE(argument_checks) {
  PpConfig cfg;
  cfg.maxBytes = 4096;
  alignas(16) static char buf[64];
  BOOST_TEST(checkPpSend(cfg, 4, buf, 64, 3) == "");
  BOOST_TEST(checkPpSend(cfg, 4, buf, 64, 4) == "peer 4 is not a rank of the communicator (0 .. 3)");
  BOOST_TEST(checkPpSend(cfg, 4, buf, 64, -1) == "peer -1 is not a rank of the communicator (0 .. 3)");
  BOOST_TEST(checkPpSend(cfg, 4, buf, 4097, 0) ==
             "message of 4097 bytes is larger than the channel's maxMessageBytes 4096");
  BOOST_TEST(checkPpSend(cfg, 4, nullptr, 16, 0) == "buf is NULL");
  BOOST_TEST(checkPpSend(cfg, 4, nullptr, 0, 0) == "");  // an empty message needs no buffer
  BOOST_TEST(checkPpSend(cfg, 4, buf + 4, 16, 0) == "buf is not 16-byte aligned");
  BOOST_TEST(checkPpRecv(cfg, 4, buf, 64, 1, nullptr) == "");
  BOOST_TEST(checkPpRecv(cfg, 4, buf + 8, 64, 1, nullptr) == "buf is not 16-byte aligned");
  BOOST_TEST(checkPpRecv(cfg, 2, buf, 64, 2, nullptr) == "peer 2 is not a rank of the communicator (0 .. 1)");
  BOOST_TEST(checkPpRecv(cfg, 4, buf, 64, 1, buf + 4) == "recvBytes is not 8-byte aligned");
  // A receive buffer larger than maxMessageBytes is fine (only the message size is bounded).
  BOOST_TEST(checkPpRecv(cfg, 4, buf, 1 << 20, 1, buf) == "");
}

BOOST_AUTO_TEST_CASE(agreement) {
  PpAgreed a{100, 2, 4, 1000, 4096, uint64_t(1) << 20};  // epx 0.1.0
  std::vector<PpAgreed> all(4, a);
  BOOST_TEST(checkPpAgreement(all) == "");
  all[2].slots = 3;
  BOOST_TEST(checkPpAgreement(all) ==
             "rank 2 has slots 3 but rank 0 has 2; every rank must create the channel with the same config");
  all[2] = a;
  all[3].maxBytes = 8192;
  BOOST_TEST(checkPpAgreement(all) ==
             "rank 3 has maxMessageBytes 8192 but rank 0 has 4096; every rank must create the channel with the same config");
  all[3] = a;
  all[1].chunkBytes = uint64_t(4) << 20;
  BOOST_TEST(checkPpAgreement(all) ==
             "rank 1 has chunkBytes 4194304 but rank 0 has 1048576; every rank must create the channel with the same config");
}

BOOST_AUTO_TEST_CASE(async_error_words) {
  dev::AsyncError e;
  std::memset(&e, 0, sizeof(e));
  e.badId = dev::ErrorRecord{4, dev::kPhasePpRecvTooSmall, 3, 1, dev::kTransportGin, 0, 4096, 1024};
  std::string text;
  BOOST_TEST(describeAsyncError(e, 100, &text) == ncclInvalidArgument);
  BOOST_TEST(text ==
             "rank 1: a PP message of 4096 bytes from peer rank 3 is larger than the receive buffer (1024 bytes); it "
             "was dropped, nothing was written");
  e.timeout = dev::ErrorRecord{6, dev::kPhasePpSlot, 2, 1, dev::kTransportLsa, 0, 5, 3};
  BOOST_TEST(describeAsyncError(e, 100, &text) == ncclRemoteError);
  BOOST_TEST(text.find("in PP send (waiting for the receiver to free a slot) waiting for peer rank 2 over NVLink") !=
             std::string::npos);
  BOOST_TEST(text.find("earlier: a PP message of 4096 bytes from rank 3 was dropped") != std::string::npos);
  e.timeout.phase = dev::kPhasePpData;
  describeAsyncError(e, 100, &text);
  BOOST_TEST(text.find("PP recv (waiting for the message)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
