// Expert load balancing's and Engram's config, plan and agreement checks (core/coll_config.h):
// defaults, every bound, and the reasons in words; Engram's window layout (engram_layout.h).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "core/coll_config.h"
#include "epx/device/engram_layout.h"

using namespace epx;

BOOST_AUTO_TEST_SUITE(lb_logic)

BOOST_AUTO_TEST_CASE(config_defaults_and_bounds) {
  LbConfig c;
  BOOST_TEST(normalizeLbConfig(LbConfigRequest{}, &c) == "");
  BOOST_TEST(c.numCtas == kLbDefaultCtas);
  BOOST_TEST(c.timeoutMs == kCollDefaultTimeoutMs);
  BOOST_TEST(c.chunkBytes == kLbDefaultChunkBytes);
  LbConfigRequest r;
  r.numCtas = 33;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.numCtas = 32;
  r.timeoutMs = 0;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.timeoutMs = 5;
  r.chunkBytes = 1000;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.chunkBytes = uint64_t(1) << 20;
  BOOST_TEST(normalizeLbConfig(r, &c) == "");
  BOOST_TEST(c.numCtas == 32);
  BOOST_TEST(c.chunkBytes == (uint64_t(1) << 20));
}

BOOST_AUTO_TEST_CASE(plan_checks_name_the_field) {
  LbPlan p;
  p.numExperts = 256;
  p.numSlots = 2;
  p.weightRowBytes = {44040192, 10752};  // one DeepSeek-V3 expert in FP8, and its scales
  p.gradRowElems = {44040192};
  BOOST_TEST(checkLbPlan(p, 8) == "");
  BOOST_TEST(checkLbPlan(p, 3) ==
             "numExperts 256 is not a positive multiple of the 3 ranks (every rank owns an equal share of the "
             "original experts)");
  LbPlan q = p;
  q.numSlots = 0;
  BOOST_TEST(checkLbPlan(q, 8) == "numSlots 0 is not in 1 .. 256");
  q = p;
  q.weightRowBytes[1] = 10753;
  BOOST_TEST(checkLbPlan(q, 8) == "weight tensor 1 has 10753 bytes per expert, not a positive multiple of 16");
  q = p;
  q.gradRowElems[0] = 6;
  BOOST_TEST(checkLbPlan(q, 8) == "gradient tensor 0 has 6 FP32 elements per expert, not a positive multiple of 4");
  q = p;
  q.weightRowBytes.assign(9, 16);
  BOOST_TEST(checkLbPlan(q, 8) == "numWeightTensors 9 is more than 8");
  q = p;
  q.weightRowBytes.clear();
  q.gradRowElems.clear();
  BOOST_TEST(checkLbPlan(q, 8) == "the plan has neither weight nor gradient tensors");
  q.gradRowElems = {4};
  BOOST_TEST(checkLbPlan(q, 8) == "");  // gradients only
}

BOOST_AUTO_TEST_CASE(agreement_names_the_first_difference) {
  LbPlan p;
  p.numExperts = 16;
  p.numSlots = 1;
  p.weightRowBytes = {64};
  const LbConfig c;
  std::vector<LbAgreed> all(3, makeLbAgreed(p, c, 1));
  BOOST_TEST(checkLbAgreement(all) == "");
  LbPlan other = p;
  other.weightRowBytes = {128};
  all[2] = makeLbAgreed(other, c, 1);
  BOOST_TEST(checkLbAgreement(all) ==
             "rank 2 has weightRowBytes[0] 128 but rank 0 has 64; every rank must create the load-balancing "
             "object with the same plan and config");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(engram_logic)

BOOST_AUTO_TEST_CASE(plan_checks_name_the_field) {
  EngramPlan p;
  p.numLayers = 4;
  p.numRows = 1 << 20;
  p.rowBytes = 1024;
  p.maxTokens = 4096;
  p.entriesPerToken = 16;
  BOOST_TEST(checkEngramPlan(p, 8) == "");
  EngramPlan q = p;
  q.numLayers = 65;
  BOOST_TEST(checkEngramPlan(q, 8) == "numLayers 65 is not in 1 .. 64");
  q = p;
  q.numRows = 1001;
  BOOST_TEST(checkEngramPlan(q, 8) ==
             "numRows 1001 is not a positive multiple of the 8 ranks (every rank holds an equal shard of each table)");
  q = p;
  q.rowBytes = 1000;
  BOOST_TEST(checkEngramPlan(q, 8) == "rowBytes 1000 is not a positive multiple of 16 up to 1073741824");
  q = p;
  q.maxTokens = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "maxTokens 0 must be at least 1");
  q = p;
  q.entriesPerToken = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "entriesPerToken 0 must be at least 1");
}

BOOST_AUTO_TEST_CASE(plan_bounds) {
  EngramPlan p;
  p.numLayers = 1;
  p.numRows = 3;
  p.rowBytes = 16;
  p.maxTokens = 1;
  p.entriesPerToken = 1;
  BOOST_TEST(checkEngramPlan(p, 3) == "");  // the smallest plan: one row per rank
  BOOST_TEST(checkEngramPlan(p, 1025) == "the communicator has 1025 ranks; Engram serves at most 1024");
  p.numRows = 1024;
  BOOST_TEST(checkEngramPlan(p, 1024) == "");
  EngramPlan q = p;
  q.numLayers = 64;
  BOOST_TEST(checkEngramPlan(q, 8) == "");
  q.numLayers = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "numLayers 0 is not in 1 .. 64");
  q = p;
  q.numRows = 0;
  BOOST_TEST(checkEngramPlan(q, 1) ==
             "numRows 0 is not a positive multiple of the 1 ranks (every rank holds an equal shard of each table)");
  q.numRows = -8;
  BOOST_TEST(checkEngramPlan(q, 8) ==
             "numRows -8 is not a positive multiple of the 8 ranks (every rank holds an equal shard of each table)");
  q.numRows = int64_t(1) << 31;  // a multiple of 8, one past the largest int32 row
  BOOST_TEST(checkEngramPlan(q, 8) == "numRows 2147483648 is more than 2147483647 (indices are int32)");
  q.numRows = (int64_t(1) << 31) - 1;  // the largest, at 1 rank
  BOOST_TEST(checkEngramPlan(q, 1) == "");
  q = p;
  q.rowBytes = uint64_t(1) << 30;
  BOOST_TEST(checkEngramPlan(q, 8) == "");
  q.rowBytes = (uint64_t(1) << 30) + 16;
  BOOST_TEST(checkEngramPlan(q, 8) == "rowBytes 1073741840 is not a positive multiple of 16 up to 1073741824");
  q.rowBytes = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "rowBytes 0 is not a positive multiple of 16 up to 1073741824");
  q = p;
  q.maxTokens = 1 << 20;
  q.entriesPerToken = 16;  // exactly 2^24 rows per layer
  BOOST_TEST(checkEngramPlan(q, 8) == "");
  q.entriesPerToken = 17;
  BOOST_TEST(checkEngramPlan(q, 8) == "maxTokens x entriesPerToken is 17825792, more than 16777216 rows per layer");
  q.maxTokens = -1;
  BOOST_TEST(checkEngramPlan(q, 8) == "maxTokens -1 must be at least 1");
}

BOOST_AUTO_TEST_CASE(config_defaults_and_bounds) {
  EngramConfig c;
  BOOST_TEST(normalizeEngramConfig(EngramConfigRequest{}, &c) == "");
  BOOST_TEST(c.numCtas == 8);
  BOOST_TEST(c.timeoutMs == 10000);
  BOOST_TEST(c.chunkBytes == (uint64_t(8) << 20));
  BOOST_TEST(kEngramDefaultCtas == 8);
  BOOST_TEST(kEngramDefaultChunkBytes == (uint64_t(8) << 20));
  EngramConfigRequest r;
  r.numCtas = 1;
  r.timeoutMs = 1;
  r.chunkBytes = uint64_t(64) << 10;
  BOOST_TEST(normalizeEngramConfig(r, &c) == "");
  BOOST_TEST(c.numCtas == 1);
  BOOST_TEST(c.timeoutMs == 1);
  BOOST_TEST(c.chunkBytes == (uint64_t(64) << 10));
  r.numCtas = 32;
  r.chunkBytes = uint64_t(1) << 30;
  BOOST_TEST(normalizeEngramConfig(r, &c) == "");
  BOOST_TEST(c.numCtas == 32);
  BOOST_TEST(c.chunkBytes == (uint64_t(1) << 30));
  r.chunkBytes = (uint64_t(64) << 10) + 16;  // any multiple of 16 in range
  BOOST_TEST(normalizeEngramConfig(r, &c) == "");
  BOOST_TEST(c.chunkBytes == (uint64_t(64) << 10) + 16);
  // Refusals name the field and leave *out as it was.
  const EngramConfig before = c;
  auto refused = [&](const EngramConfigRequest& in) {
    EngramConfig out = before;
    const std::string e = normalizeEngramConfig(in, &out);
    BOOST_TEST((out.numCtas == before.numCtas && out.timeoutMs == before.timeoutMs && out.chunkBytes == before.chunkBytes));
    return e;
  };
  EngramConfigRequest b;
  b.numCtas = 33;
  BOOST_TEST(refused(b) == "numCtas 33 is not in 1 .. 32");
  b.numCtas = 0;
  BOOST_TEST(refused(b) == "numCtas 0 is not in 1 .. 32");
  b.numCtas = -5;
  BOOST_TEST(refused(b) == "numCtas -5 is not in 1 .. 32");
  b = EngramConfigRequest{};
  b.timeoutMs = 0;
  BOOST_TEST(refused(b) == "timeoutMs 0 must be >= 1");
  b = EngramConfigRequest{};
  const std::string chunk = " is not a multiple of 16 in 65536 .. 1073741824 (0 = default 8388608)";
  b.chunkBytes = (uint64_t(64) << 10) - 16;
  BOOST_TEST(refused(b) == "chunkBytes 65520" + chunk);
  b.chunkBytes = (uint64_t(64) << 10) + 8;
  BOOST_TEST(refused(b) == "chunkBytes 65544" + chunk);
  b.chunkBytes = (uint64_t(1) << 30) + 16;
  BOOST_TEST(refused(b) == "chunkBytes 1073741840" + chunk);
  // The first bad field is named (numCtas before chunkBytes).
  b.numCtas = 40;
  BOOST_TEST(refused(b) == "numCtas 40 is not in 1 .. 32");
}

BOOST_AUTO_TEST_CASE(agreement_names_the_first_difference) {
  EngramPlan p;
  p.numLayers = 2;
  p.numRows = 1 << 16;
  p.rowBytes = 512;
  p.maxTokens = 128;
  p.entriesPerToken = 8;
  const EngramConfig c;
  const EngramAgreed a = makeEngramAgreed(p, c, 100);
  BOOST_TEST(a.epxVersion == 100u);
  BOOST_TEST(a.numLayers == 2);
  BOOST_TEST(a.numRows == (1 << 16));
  BOOST_TEST(a.rowBytes == 512u);
  BOOST_TEST(a.maxTokens == 128);
  BOOST_TEST(a.entriesPerToken == 8);
  BOOST_TEST(a.numCtas == 8);
  BOOST_TEST(a.timeoutMs == 10000);
  BOOST_TEST(a.chunkBytes == (uint64_t(8) << 20));
  // Exchanged byte for byte: equal inputs give equal bytes.
  const EngramAgreed b = makeEngramAgreed(p, c, 100);
  BOOST_TEST(std::memcmp(&a, &b, sizeof(a)) == 0);
  std::vector<EngramAgreed> all(3, a);
  BOOST_TEST(checkEngramAgreement(all) == "");
  BOOST_TEST(checkEngramAgreement(std::vector<EngramAgreed>(1, a)) == "");
  const std::string tail = "; every rank must create the Engram object with the same plan and config";
  // Rank 1's difference is named before rank 2's, whatever the fields.
  EngramConfig c2 = c;
  c2.chunkBytes = uint64_t(64) << 10;
  all[1] = makeEngramAgreed(p, c2, 100);
  EngramPlan p2 = p;
  p2.numLayers = 3;
  all[2] = makeEngramAgreed(p2, c, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 1 has chunkBytes 65536 but rank 0 has 8388608" + tail);
  // One rank's first field in order: version, numLayers, numRows, rowBytes, maxTokens, entries, CTAs, timeout, chunk.
  all.assign(3, a);
  EngramPlan q = p;
  q.numRows = 1 << 15;
  EngramConfig qc = c;
  qc.timeoutMs = 5;
  all[2] = makeEngramAgreed(q, qc, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has numRows 32768 but rank 0 has 65536" + tail);
  all[2] = makeEngramAgreed(p, qc, 101);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has epx version 101 but rank 0 has 100" + tail);
  all[2] = makeEngramAgreed(p, qc, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has timeoutMs 5 but rank 0 has 10000" + tail);
  q = p;
  q.rowBytes = 1024;
  all[2] = makeEngramAgreed(q, c, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has rowBytes 1024 but rank 0 has 512" + tail);
  q = p;
  q.maxTokens = 64;
  all[2] = makeEngramAgreed(q, c, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has maxTokens 64 but rank 0 has 128" + tail);
  q = p;
  q.entriesPerToken = 4;
  all[2] = makeEngramAgreed(q, c, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has entriesPerToken 4 but rank 0 has 8" + tail);
  qc = c;
  qc.numCtas = 16;
  all[2] = makeEngramAgreed(p, qc, 100);
  BOOST_TEST(checkEngramAgreement(all) == "rank 2 has numCtas 16 but rank 0 has 8" + tail);
}

// layoutEngram: every region where the header says, aligned, disjoint, in order; the inbox and the
// stage only with network peers.
BOOST_AUTO_TEST_CASE(layout_regions_and_alignment) {
  using namespace epx::dev;
  // 8 ranks, 2^20 rows of 1 KiB, 4096 tokens x 16 entries, 8 CTAs, 2 MiB chunks, network peers.
  const EngramLayout g = layoutEngram(int64_t(1) << 20, 1024, 4096, 16, 8, 8, uint64_t(2) << 20, true);
  BOOST_TEST(g.rowBytes == 1024u);
  BOOST_TEST(g.rowsPerRank == 131072);
  BOOST_TEST(g.maxRequests == 65536);
  BOOST_TEST(g.entries == 16);
  BOOST_TEST(g.requestStride == 65540);  // 4 header ints + 65536, a multiple of 4
  BOOST_TEST(g.chunkRows == 2048);
  BOOST_TEST(g.chunkBytes() == (uint64_t(2) << 20));
  BOOST_TEST(g.flags == 0u);
  BOOST_TEST(g.requests == 256u);  // after 5 x 8 flag words, 256-aligned
  BOOST_TEST(g.inbox == 2097664u);  // 256 + 8 x 65540 x 4, 256-aligned
  BOOST_TEST(g.positions == 4195072u);
  BOOST_TEST(g.recv == 4457216u);  // + 65536 x 4
  BOOST_TEST(g.stage == 71566080u);  // + 65536 x 1 KiB
  BOOST_TEST(g.totalBytes == 106954752u);  // + 8 CTAs x 2 buffers x 2 MiB, 2 MiB-aligned
  BOOST_TEST(g.requestOffset(3) == g.requests + 3u * 65540u * 4u);
  BOOST_TEST(g.inboxOffset(7) == g.inbox + 7u * 65540u * 4u);
  BOOST_TEST(g.recvOffset(65535) == g.recv + 65535u * 1024u);
  BOOST_TEST(g.stageOffset(0, 0) == g.stage);
  BOOST_TEST(g.stageOffset(0, 1) == g.stage + (uint64_t(2) << 20));
  BOOST_TEST(g.stageOffset(7, 1) + g.chunkBytes() == g.stage + 8u * 2u * (uint64_t(2) << 20));
  BOOST_TEST(engramZeroedPrefix(g) == g.requests);

  // The same without network peers: no inbox, no stage.
  const EngramLayout n = layoutEngram(int64_t(1) << 20, 1024, 4096, 16, 8, 8, uint64_t(2) << 20, false);
  BOOST_TEST(n.requests == g.requests);
  BOOST_TEST(n.inbox == n.positions);  // empty
  BOOST_TEST(n.positions == 2097664u);
  BOOST_TEST(n.recv == 2359808u);
  BOOST_TEST(n.stage == 69468672u);  // the end of recv: empty
  BOOST_TEST(n.totalBytes == 71303168u);
  BOOST_TEST(n.totalBytes < g.totalBytes);

  // Disjoint, in order, aligned, for a spread of shapes (both transports).
  struct Shape {
    int64_t numRows;
    uint64_t rowBytes;
    int maxTokens, entries, nRanks, ctas;
    uint64_t chunk;
  };
  const Shape shapes[] = {{1, 16, 1, 1, 1, 1, uint64_t(64) << 10},
                          {6, 16, 3, 1, 3, 1, uint64_t(64) << 10},
                          {1024, 3088, 256, 8, 2, 3, uint64_t(64) << 10},
                          {4096, (uint64_t(64) << 10) + 16, 16, 2, 8, 32, uint64_t(64) << 10},
                          {int64_t(1) << 20, 4096, 1 << 20, 16, 1024, 32, uint64_t(1) << 30},
                          {999, 48, 7, 32, 9, 5, (uint64_t(64) << 10) + 48}};
  for (const Shape& s : shapes)
    for (const bool gin : {false, true}) {
      const EngramLayout l = layoutEngram(s.numRows, s.rowBytes, s.maxTokens, s.entries, s.nRanks, s.ctas, s.chunk, gin);
      const uint64_t lists = uint64_t(s.nRanks) * uint64_t(l.requestStride) * 4;
      const uint64_t stageBytes = gin ? uint64_t(s.ctas) * kEngramStageBuffers * l.chunkBytes() : 0;
      BOOST_TEST_CONTEXT("rows " << s.numRows << " x " << s.rowBytes << " B, " << s.maxTokens << " x " << s.entries
                                 << ", " << s.nRanks << " ranks, gin " << gin) {
        BOOST_TEST(l.rowsPerRank == s.numRows / s.nRanks);
        BOOST_TEST(l.maxRequests == s.maxTokens * s.entries);
        BOOST_TEST(l.requestStride % 4 == 0);
        BOOST_TEST(l.requestStride >= kEngramHeaderInts + l.maxRequests);
        BOOST_TEST(l.requestStride < kEngramHeaderInts + l.maxRequests + 4);
        BOOST_TEST(l.flags % kWindowRegionAlign == 0u);
        for (const uint64_t off : {l.requests, l.inbox, l.positions, l.recv, l.stage}) BOOST_TEST(off % kEngramAlign == 0u);
        BOOST_TEST(l.totalBytes % kWindowTotalAlign == 0u);
        BOOST_TEST(l.flags + uint64_t(kNumFlagKinds) * s.nRanks * 4 <= l.requests);
        BOOST_TEST(l.requests + lists <= l.inbox);
        BOOST_TEST(l.inbox + (gin ? lists : 0) <= l.positions);
        BOOST_TEST(l.positions + uint64_t(l.maxRequests) * 4 <= l.recv);
        BOOST_TEST(l.recv + uint64_t(l.maxRequests) * s.rowBytes <= l.stage);
        BOOST_TEST(l.stage + stageBytes <= l.totalBytes);
        BOOST_TEST(l.totalBytes - (l.stage + stageBytes) < kWindowTotalAlign);
        if (!gin) BOOST_TEST(l.inbox == l.positions);
        // Every request list starts 16-byte aligned (its header is 4 ints).
        BOOST_TEST((l.requestOffset(s.nRanks - 1) - l.requests) % 16 == 0u);
        BOOST_TEST(l.chunkRows == engramChunkRows(s.chunk, s.rowBytes, l.maxRequests));
        BOOST_TEST(l.chunkRows <= l.maxRequests);
        BOOST_TEST(engramZeroedPrefix(l) == l.requests);
      }
    }
}

BOOST_AUTO_TEST_CASE(chunk_rows_and_chunk_counts) {
  using namespace epx::dev;
  constexpr int kMany = 1 << 24;  // a plan that can ask for more rows than any chunk holds
  BOOST_TEST(engramChunkRows(uint64_t(2) << 20, 1024, kMany) == 2048);
  BOOST_TEST(engramChunkRows(uint64_t(64) << 10, 3088, kMany) == 21);  // whole rows: 21 x 3088 = 64848 <= 65536
  BOOST_TEST(engramChunkRows(uint64_t(64) << 10, 16384, kMany) == 4);
  BOOST_TEST(engramChunkRows(uint64_t(64) << 10, (uint64_t(64) << 10) + 16, kMany) == 1);  // a row larger than a chunk
  BOOST_TEST(engramChunkRows(uint64_t(64) << 10, 16, kMany) == 4096);
  BOOST_TEST(engramChunkRows(uint64_t(1) << 30, 16, kMany) == kMany);  // 2^26 rows fit: capped at the plan's 2^24
  // A small plan stages no more rows than one layer can ask for.
  BOOST_TEST(engramChunkRows(uint64_t(2) << 20, 16, 7) == 7);
  BOOST_TEST(engramChunkRows(uint64_t(2) << 20, 1024, 1) == 1);
  BOOST_TEST(engramChunksOf(0, 21) == 0u);
  BOOST_TEST(engramChunksOf(1, 21) == 1u);
  BOOST_TEST(engramChunksOf(21, 21) == 1u);
  BOOST_TEST(engramChunksOf(22, 21) == 2u);
  BOOST_TEST(engramChunksOf(65536, 21) == 3121u);
  BOOST_TEST(engramChunksOf(65536, 2048) == 32u);
  BOOST_TEST(engramChunksOf(7, 1) == 7u);
  BOOST_TEST(engramChunksOf(1 << 24, 1 << 30) == 1u);
  // GIN counters: two stage buffers per CTA, then CTA 0's request puts.
  BOOST_TEST(engramStageCounterBase(0, 8) == 0);
  BOOST_TEST(engramStageCounterBase(1, 8) == 8);
  BOOST_TEST(engramRequestCounterBase(8) == 16);
  BOOST_TEST(engramGinCounters(8) == 17);
  BOOST_TEST(engramGinCounters(1) == 3);
  BOOST_TEST(epx::dev::kEngramMaxCtas == epx::kEngramMaxCtas);
  BOOST_TEST(epx::dev::kEngramMaxRanks == epx::kEngramMaxRanks);
}

BOOST_AUTO_TEST_SUITE_END()
