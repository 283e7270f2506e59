#define BOOST_TEST_MODULE epx core
#include <boost/test/unit_test.hpp>

#include "core/config.h"

using namespace epx;

namespace {
ncclEpConfig_t deepseek() {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.maxTokensPerRank = 4096;
  c.hidden = 7168;
  c.topk = 8;
  c.numExperts = 256;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_CASE(defaults_fill_undefined_fields) {
  ncclEpConfig_t in = deepseek();
  GroupConfig g;
  BOOST_TEST(normalizeConfig(&in, 8, &g) == "");
  BOOST_TEST(g.smBudget == 0);
  BOOST_TEST(g.timeoutMs == 10000);
  BOOST_TEST(g.slIndex == -1);
  BOOST_TEST(!g.fp8Dispatch);
  BOOST_TEST(g.localExperts(8) == 32);
}

BOOST_AUTO_TEST_CASE(rejects_invalid_configs_with_reasons) {
  GroupConfig g;
  BOOST_TEST(normalizeConfig(nullptr, 2, &g).find("NULL") != std::string::npos);
  ncclEpConfig_t raw{};  // not initialized with the macro
  BOOST_TEST(normalizeConfig(&raw, 2, &g).find("INITIALIZER") != std::string::npos);
  struct Case {
    void (*mutate)(ncclEpConfig_t&);
    int nRanks;
    const char* needle;
  } cases[] = {
      {[](ncclEpConfig_t& c) { c.maxTokensPerRank = NCCL_EP_UNDEF_INT; }, 2, "maxTokensPerRank"},
      {[](ncclEpConfig_t& c) { c.maxTokensPerRank = 70000; }, 2, "maxTokensPerRank"},
      {[](ncclEpConfig_t& c) { c.hidden = 7170; }, 2, "hidden"},
      {[](ncclEpConfig_t& c) { c.fp8Dispatch = 1; c.hidden = 7176; }, 2, "multiple of 128"},
      {[](ncclEpConfig_t& c) { c.topk = 0; }, 2, "topk"},
      {[](ncclEpConfig_t& c) { c.topk = 33; }, 2, "topk"},
      {[](ncclEpConfig_t& c) { c.numExperts = 255; }, 2, "multiple of the EP size"},
      {[](ncclEpConfig_t& c) { c.numExperts = 2048; }, 2, "numExperts"},
      {[](ncclEpConfig_t& c) { c.algorithm = ncclEpAlgoLowLatency; c.hidden = 2880; }, 2, "multiple of 128"},
      {[](ncclEpConfig_t& c) { c.algorithm = ncclEpAlgoLowLatency; c.maxTokensPerRank = 4097; }, 2, "maxTokensPerRank"},
      {[](ncclEpConfig_t& c) { c.smBudget = 1000; }, 2, "smBudget"},
      {[](ncclEpConfig_t& c) { c.slIndex = 16; }, 2, "slIndex"},
      {[](ncclEpConfig_t& c) { c.timeoutMs = 0; }, 2, "timeoutMs"},
      {[](ncclEpConfig_t&) {}, 1025, "EP size"},
  };
  for (const auto& cs : cases) {
    ncclEpConfig_t c = deepseek();
    cs.mutate(c);
    std::string err = normalizeConfig(&c, cs.nRanks, &g);
    BOOST_TEST_INFO("expected an error mentioning " << cs.needle << ", got '" << err << "'");
    BOOST_TEST(err.find(cs.needle) != std::string::npos);
  }
}

namespace {
// Every region of the layout with its size; regions must be 4 KiB aligned and disjoint, in order.
void expectDisjointRegions(const dev::WindowLayout& wl, uint64_t rows, uint64_t stageRows, uint64_t H, uint64_t K,
                           uint64_t R, bool fp8, bool gin) {
  const uint64_t starts[] = {wl.flags, wl.counts, wl.countStage, wl.recvX, wl.recvScales, wl.recvIdx, wl.recvWeights,
                             wl.recvInfo, wl.recvPos, wl.combineX, wl.combineRecv, wl.combineRecvW, wl.combineStageW,
                             wl.stageX, wl.stageScales, wl.stageIdx, wl.stageWeights, wl.stageInfo, wl.stagePos,
                             wl.totalBytes};
  const uint64_t sizes[] = {dev::kNumFlagKinds * R * 4, 2 * R * wl.countStride * 4, gin ? R * wl.countStride * 4 : 0,
                            rows * H * 2, fp8 ? rows * H / 128 * 4 : 0, rows * K * 4, rows * K * 4, rows * 8,
                            rows * K * 4, rows * H * 2, rows * H * 2, rows * K * 4, gin ? rows * K * 4 : 0,
                            stageRows * H * 2, fp8 ? stageRows * H / 128 * 4 : 0, stageRows * K * 4, stageRows * K * 4,
                            stageRows * 8, stageRows * K * 4};
  constexpr int n = sizeof(sizes) / sizeof(sizes[0]);
  for (int i = 0; i < n; ++i) {
    BOOST_TEST_INFO("region " << i);
    BOOST_TEST(starts[i] % 4096 == 0);
    BOOST_TEST(starts[i + 1] >= starts[i] + sizes[i]);
    BOOST_TEST(starts[i + 1] - (starts[i] + sizes[i]) < 4096 + (i == n - 1 ? (2u << 20) : 0));
  }
  BOOST_TEST(wl.totalBytes % (2u << 20) == 0);
  BOOST_TEST(dev::windowZeroedPrefix(wl) >= wl.counts + 2 * R * wl.countStride * 4);
}
}  // namespace

BOOST_AUTO_TEST_CASE(default_put_rounds_by_network_peers) {
  // Default: GIN ops of a dispatch (peers x (rounds + meta puts)) within the budget, 1..8 rounds.
  BOOST_TEST(epx::dev::defaultPutRounds(0) == 1);
  BOOST_TEST(epx::dev::defaultPutRounds(1) == 8);   // 2 nodes: 12 ops
  BOOST_TEST(epx::dev::defaultPutRounds(3) == 8);   // 4 nodes: 36 ops
  BOOST_TEST(epx::dev::defaultPutRounds(4) == 8);   // 48 ops
  BOOST_TEST(epx::dev::defaultPutRounds(7) == 4);   // 8 nodes: 56 ops
  BOOST_TEST(epx::dev::defaultPutRounds(13) == 1);  // 14 nodes: 4 rounds would be 104 ops
  BOOST_TEST(epx::dev::defaultPutRounds(1023) == 1);
  for (int peers = 1; peers < 64; ++peers) {
    const int r = epx::dev::defaultPutRounds(peers);
    BOOST_TEST((r == 1 || peers * (r + epx::dev::kMetaPutsPerPeer) <= epx::dev::kPutOpsBudget));
  }
}

BOOST_AUTO_TEST_CASE(window_layout_regions_do_not_overlap) {
  ncclEpConfig_t in = deepseek();
  in.fp8Dispatch = 1;
  GroupConfig g;
  BOOST_REQUIRE(normalizeConfig(&in, 8, &g) == "");
  const uint64_t rows = 8ull * 4096, H = 7168, K = 8;
  // One NVLink domain: no staging.
  dev::WindowLayout wl = computeWindowLayout(g, 8, 8);
  BOOST_TEST(wl.rows == rows);
  BOOST_TEST(wl.countStride == 40u);  // 8 ranks + 32 local experts
  BOOST_TEST(wl.stageRows == 0u);
  expectDisjointRegions(wl, rows, 0, H, K, 8, true, false);
  // Two domains of 4: a token reaches at most min(K, 4 network peers) = 4 network ranks.
  wl = computeWindowLayout(g, 8, 4);
  BOOST_TEST(wl.stageRows == 4096u * 4);
  expectDisjointRegions(wl, rows, 4096ull * 4, H, K, 8, true, true);
  // Every rank its own node: min(K, 7) = 7.
  wl = computeWindowLayout(g, 8, 1);
  BOOST_TEST(wl.stageRows == 4096u * 7);
  expectDisjointRegions(wl, rows, 4096ull * 7, H, K, 8, true, true);
}

BOOST_AUTO_TEST_CASE(window_layout_at_1024_ranks) {
  // 1024 ranks, one expert each, 128 tokens per rank: every per-rank structure is sized by nRanks.
  ncclEpConfig_t in = deepseek();
  in.numExperts = 1024;
  in.maxTokensPerRank = 128;
  in.topk = 8;
  in.hidden = 2048;
  GroupConfig g;
  BOOST_REQUIRE(normalizeConfig(&in, 1024, &g) == "");
  const dev::WindowLayout wl = computeWindowLayout(g, 1024, 8);
  BOOST_TEST(wl.countStride == 1028u);  // 1024 row counts + 1 local expert, rounded up to 4
  BOOST_TEST(wl.rows == 1024u * 128);
  BOOST_TEST(wl.stageRows == 128u * 8);
  expectDisjointRegions(wl, 1024ull * 128, 128ull * 8, 2048, 8, 1024, false, true);
  BOOST_TEST(dev::ginSignalCount(1024) == dev::kNumFlagKinds * 1024);
  BOOST_TEST(dev::layoutSmemBytes(1024, 1024, 1) <= dev::kMaxSmemPerCta);
}

BOOST_AUTO_TEST_CASE(fp8_rows_fit_in_the_bf16_row) {
  for (int h : {128, 2048, 7168, 8192}) {
    ncclEpConfig_t in = deepseek();
    in.hidden = h;
    in.fp8Dispatch = 1;
    GroupConfig g;
    BOOST_REQUIRE(normalizeConfig(&in, 2, &g) == "");
    dev::WindowLayout wl = computeWindowLayout(g, 2, 2);
    // FP8 rows are packed at stride hidden inside the BF16-sized region; scales have their own.
    BOOST_TEST(wl.recvScales - wl.recvX >= 2ull * 2 * 4096 * h);
    BOOST_TEST(wl.recvIdx - wl.recvScales >= 2ull * 4096 * (h / 128) * 4);
  }
}

BOOST_AUTO_TEST_CASE(capacity_rows) {
  ncclEpConfig_t in = deepseek();
  GroupConfig g;
  BOOST_REQUIRE(normalizeConfig(&in, 2, &g) == "");
  HandleConfig dedup;
  dedup.expanded = false;
  BOOST_TEST(capacityRows(g, 2, dedup) == 2 * 4096);
  HandleConfig exp;
  exp.alignment = 128;
  // Each token lands on at most min(K, Le) = 8 local experts; plus up to 127 gap rows per expert.
  BOOST_TEST(capacityRows(g, 2, exp) == 2LL * 4096 * 8 + 128LL * 127);
  in.numExperts = 8;  // Le = 4 < K
  BOOST_REQUIRE(normalizeConfig(&in, 2, &g) == "");
  exp.alignment = 1;
  BOOST_TEST(capacityRows(g, 2, exp) == 2LL * 4096 * 4);
}

BOOST_AUTO_TEST_CASE(handle_config) {
  HandleConfig h;
  ncclEpHandleConfig_t in = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
  BOOST_TEST(normalizeHandleConfig(&in, &h) == "");
  BOOST_TEST(h.expanded);
  BOOST_TEST(!h.capacity);
  BOOST_TEST(h.alignment == 1);
  in.layout = ncclEpLayoutDeduplicated;
  in.expertAlignment = 128;
  BOOST_TEST(normalizeHandleConfig(&in, &h).find("expanded layout only") != std::string::npos);
  in.layout = 7;
  BOOST_TEST(normalizeHandleConfig(&in, &h).find("layout") != std::string::npos);
  in = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
  in.expertAlignment = 0;
  BOOST_TEST(normalizeHandleConfig(&in, &h).find("expertAlignment") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cta_count) {
  ncclEpConfig_t in = deepseek();
  GroupConfig g;
  BOOST_REQUIRE(normalizeConfig(&in, 2, &g) == "");
  const LinkRates h200 = parseLinkRates(nullptr, nullptr, nullptr);  // 18 NVLink4 links, no RDMA
  // topology/'s model (docs/topology.md): EP2 on 2xH200, 256 experts top-8 -> 28 SMs.
  g.numExperts = 256;
  g.topk = 8;
  const int analytic = analyticSmCount(g, 132, 2, 2, h200);
  BOOST_TEST(analytic == 28);
  BOOST_TEST(resolveCtaCount(g, 132, 2, 2, h200) == analytic);
  // EP8 in one NVLink domain: 16 SMs; two nodes of 2 with 400 Gb/s RDMA, direct forwarding: the
  // 4-SM floor (RDMA-bound, each row written once: 50 / 0.5 / 45 x 1.3 = 2.9).
  BOOST_TEST(resolveCtaCount(g, 132, 8, 8, h200) == 16);
  LinkRates rdma = h200;
  rdma.rdmaGBps = 50;
  BOOST_TEST(resolveCtaCount(g, 132, 4, 2, rdma) == 4);
  // The same group forwarding in hybrid mode: the hybrid model (docs/topology.md: 12 SMs at 2 x 2);
  // over virtual nodes of forwardNodeSize ranks the model takes those nodes.
  g.forwarding = ncclEpForwardHybrid;
  BOOST_TEST(resolveCtaCount(g, 132, 4, 2, rdma) == 12);
  g.forwardNodeSize = 2;
  BOOST_TEST(resolveCtaCount(g, 132, 4, 1, rdma) == 12);
  g.forwarding = ncclEpForwardDirect;
  g.forwardNodeSize = 0;
  BOOST_TEST(resolveCtaCount(g, 20, 2, 2, h200) == 20);  // capped by the GPU's SMs
  g.smBudget = 24;
  BOOST_TEST(resolveCtaCount(g, 132, 2, 2, h200) == 24);
  g.smBudget = 150;
  BOOST_TEST(resolveCtaCount(g, 132, 2, 2, h200) == 132);  // never more than the SMs
}
