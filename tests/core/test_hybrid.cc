// CPU tests of hybrid forwarding's host-side pieces (issue 34): the forwarding option and its
// validation, the window regions it adds, and the protocol arithmetic the kernels use (rail peers,
// deliverers, record numbering, combine order) against the CPU routing plan (ref hybrid_ref.h).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/agree.h"
#include "core/config.h"
#include "epx/device/protocol.h"
#include "epx/device/window_layout.h"
#include "epx/ref/hybrid_ref.h"

using namespace epx;

namespace {
ncclEpConfig_t base() {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.maxTokensPerRank = 128;
  c.hidden = 256;
  c.topk = 4;
  c.numExperts = 16;
  return c;
}
bool mentions(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Random valid routing of every rank (distinct experts per token, some unused slots).
std::vector<ref::RankRouting> randomRouting(const ref::EpShape& s, int T, std::mt19937& rng) {
  std::vector<ref::RankRouting> all(s.nRanks);
  std::vector<int> experts(s.numExperts);
  for (int i = 0; i < s.numExperts; ++i) experts[i] = i;
  for (auto& r : all) {
    r.numTokens = T;
    r.topkIdx.assign(size_t(T) * s.topk, -1);
    r.topkWeights.assign(size_t(T) * s.topk, 0.f);
    for (int t = 0; t < T; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int k = 0; k < s.topk; ++k)
        if (rng() % 5 != 0) r.topkIdx[size_t(t) * s.topk + k] = experts[k];
    }
  }
  return all;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(hybrid_logic)

BOOST_AUTO_TEST_CASE(forwarding_option_defaults_and_values) {
  GroupConfig c;
  ncclEpConfig_t in = base();
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.forwarding == ncclEpForwardDirect);  // auto is direct for now (ep.h)
  BOOST_TEST(c.forwardNodeSize == 0);
  in.forwarding = ncclEpForwardAuto;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(!c.hybrid());
  in.forwarding = ncclEpForwardHybrid;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.hybrid());
  in.forwardNodeSize = 2;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.forwardNodeSize == 2);
}

BOOST_AUTO_TEST_CASE(forwarding_option_refusals_name_the_field) {
  struct Case {
    const char* what;
    void (*edit)(ncclEpConfig_t&);
    const char* needle;
  };
  const Case cases[] = {
      {"unknown value", [](ncclEpConfig_t& c) { c.forwarding = 3; }, "forwarding must be"},
      {"negative node size", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardHybrid, c.forwardNodeSize = -1; },
       "forwardNodeSize must be >= 0"},
      {"node size with direct", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardDirect, c.forwardNodeSize = 2; },
       "applies to forwarding = ncclEpForwardHybrid only"},
      {"node size with auto", [](ncclEpConfig_t& c) { c.forwardNodeSize = 2; }, "with direct forwarding"},
      {"low latency", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardHybrid, c.algorithm = ncclEpAlgoLowLatency; },
       "high-throughput"},
  };
  for (const Case& k : cases) {
    ncclEpConfig_t in = base();
    k.edit(in);
    GroupConfig c;
    const std::string msg = normalizeConfig(&in, 4, &c);
    BOOST_TEST_INFO(k.what << ": " << msg);
    BOOST_TEST(mentions(msg, k.needle));
  }
}

BOOST_AUTO_TEST_CASE(check_forwarding_nodes) {
  GroupConfig c;
  c.forwarding = ncclEpForwardHybrid;
  int n = -1;
  // Direct: no nodes.
  GroupConfig d;
  BOOST_TEST(checkForwarding(d, 8, 1, &n) == "");
  BOOST_TEST(n == 0);
  // Node = the NVLink team.
  BOOST_TEST(checkForwarding(c, 64, 8, &n) == "");
  BOOST_TEST(n == 8);
  // Virtual nodes of fake nodes: 4 as 2 x 2, 8 as 2 x 4 and 4 x 2.
  for (auto [ranks, size] : {std::pair{4, 2}, {8, 4}, {8, 2}}) {
    c.forwardNodeSize = size;
    BOOST_TEST(checkForwarding(c, ranks, 1, &n) == "");
    BOOST_TEST(n == size);
  }
  struct Bad {
    int ranks, lsa, size;
    const char* needle;
  };
  const Bad bad[] = {
      {6, 1, 4, "must divide the EP size 6"},
      {8, 8, 0, "all 8 ranks are one node"},
      {4, 1, 4, "all 4 ranks are one node"},
      {16, 4, 2, "whole NVLink teams (of 4 ranks)"},
      {256, 1, 128, "at most 64 ranks per node"},
  };
  for (const Bad& b : bad) {
    c.forwardNodeSize = b.size;
    const std::string msg = checkForwarding(c, b.ranks, b.lsa, &n);
    BOOST_TEST_INFO(b.ranks << " ranks, LSA " << b.lsa << ", node " << b.size << ": " << msg);
    BOOST_TEST(mentions(msg, b.needle));
    BOOST_TEST(mentions(msg, "ncclEpForwardHybrid"));
    BOOST_TEST(n == 0);
  }
}

BOOST_AUTO_TEST_CASE(agreement_compares_forwarding) {
  GroupConfig c;
  c.maxTokensPerRank = 128, c.hidden = 256, c.topk = 4, c.numExperts = 16;
  std::vector<AgreedConfig> all(4, makeAgreedConfig(c, 8));
  BOOST_TEST(checkAgreement(all) == "");
  c.forwarding = ncclEpForwardHybrid;
  c.forwardNodeSize = 2;
  all[2] = makeAgreedConfig(c, 8);
  const std::string msg = checkAgreement(all);
  BOOST_TEST(mentions(msg, "rank 2 has forwarding 2 but rank 0 has 1"));
}

BOOST_AUTO_TEST_CASE(window_regions_of_hybrid) {
  GroupConfig c;
  c.maxTokensPerRank = 100, c.hidden = 256, c.topk = 4, c.numExperts = 16, c.fp8Dispatch = true;
  const dev::WindowLayout direct = computeWindowLayout(c, 8, 1);
  BOOST_TEST(direct.fwdRows == 0u);
  BOOST_TEST(direct.nodeSize == 0u);
  // Direct mode adds no bytes: every hybrid region starts where the last direct one ended.
  BOOST_TEST(direct.fwdNodeW == direct.fwdSendX);
  c.forwarding = ncclEpForwardHybrid;
  c.forwardNodeSize = 2;
  const dev::WindowLayout h = computeWindowLayout(c, 8, 1);
  BOOST_TEST(h.nodeSize == 2u);
  BOOST_TEST(h.fwdRows == 4u * 100u);  // 4 nodes x maxTokens
  BOOST_TEST(h.totalBytes > direct.totalBytes);
  BOOST_TEST(h.totalBytes % dev::kWindowTotalAlign == 0u);
  // The direct regions are where they were; the hybrid ones follow, in order, without overlap.
  BOOST_TEST(h.stagePos == direct.stagePos);
  const uint64_t K = 4, H = 256, fwd = h.fwdRows, N = 2, RI = dev::fwdRecordInts(4), WI = dev::fwdRowInts(4);
  const std::vector<std::pair<uint64_t, uint64_t>> regions = {
      {h.fwdSendX, fwd * H * 2},           {h.fwdSendScales, fwd * (H / 128) * 4}, {h.fwdSendMeta, fwd * RI * 4},
      {h.fwdRecvX, fwd * H * 2},           {h.fwdRecvScales, fwd * (H / 128) * 4}, {h.fwdRecvMeta, fwd * RI * 4},
      {h.fwdMetaStage, fwd * N * WI * 4},  {h.recvFwdMeta, uint64_t(h.rows) * WI * 4},
      {h.fwdPartX, fwd * N * h.combineRowBytes}, {h.fwdPartW, fwd * N * K * 4},
      {h.fwdNodeX, fwd * h.combineRowBytes}, {h.fwdNodeW, fwd * K * 4}};
  uint64_t end = h.stagePos;
  for (const auto& [at, bytes] : regions) {
    BOOST_TEST(at >= end);
    BOOST_TEST(at % dev::kWindowRegionAlign == 0u);
    end = at + bytes;
  }
  BOOST_TEST(end <= h.totalBytes);
  // Packed metadata: whole 16-byte vectors holding what window_layout.h lists.
  for (int k : {1, 4, 8, 32}) {
    BOOST_TEST(dev::fwdRecordInts(k) % 4 == 0u);
    BOOST_TEST(dev::fwdRecordInts(k) >= uint32_t(4 * k + 1));
    BOOST_TEST(dev::fwdRowInts(k) % 4 == 0u);
    BOOST_TEST(dev::fwdRowInts(k) >= uint32_t(3 * k + 3));
  }
  // An invalid hybrid config (refused at creation) lays out like direct mode.
  c.forwardNodeSize = 3;
  BOOST_TEST(computeWindowLayout(c, 8, 1).fwdRows == 0u);
}

BOOST_AUTO_TEST_CASE(rail_peers_and_deliverers) {
  const int N = 4, R = 16;
  for (int s = 0; s < R; ++s)
    for (int d = 0; d < R; ++d) {
      const int f = dev::delivererOf(s, d, N);
      if (dev::nodeOfRank(s, N) == dev::nodeOfRank(d, N)) {
        BOOST_TEST(!dev::isForwarded(s, d, N));
        BOOST_TEST(f == s);
      } else {
        BOOST_TEST(dev::isForwarded(s, d, N));
        BOOST_TEST(dev::nodeOfRank(f, N) == dev::nodeOfRank(d, N));  // the forwarder is in d's node
        BOOST_TEST(f % N == s % N);                                   // on s's rail
      }
      BOOST_TEST(dev::delivererOf(s, d, 0) == s);  // direct mode
      BOOST_TEST(!dev::isForwarded(s, d, 0));
    }
  // Records: one area of maxTokens rows per node.
  BOOST_TEST(dev::fwdRecordRow(0, 5, 100) == 5);
  BOOST_TEST(dev::fwdRecordRow(3, 0, 100) == 300);
}

BOOST_AUTO_TEST_CASE(kernel_arithmetic_matches_the_routing_plan) {
  std::mt19937 rng(34);
  for (auto [R, N] : {std::pair{4, 2}, {8, 4}, {8, 2}, {16, 4}}) {
    ref::EpShape s;
    s.nRanks = R, s.hidden = 8, s.topk = 4, s.numExperts = 4 * R;
    const int T = 40, K = s.topk, Le = s.localExperts();
    const auto routing = randomRouting(s, T, rng);
    const ref::HybridPlan plan = ref::hybridPlan(s, ref::NodeGeometry{R, N}, routing);
    for (int src = 0; src < R; ++src) {
      const auto& idx = routing[src].topkIdx;
      std::vector<int32_t> e(idx.begin(), idx.end());
      // Records (first slot per other node) = the plan's network copies of hybrid mode.
      int64_t records = 0;
      for (int t = 0; t < T; ++t)
        for (int node = 0; node < R / N; ++node) {
          if (node == dev::nodeOfRank(src, N)) continue;
          int firsts = 0;
          for (int k = 0; k < K; ++k) firsts += dev::firstSlotOfNode(e.data() + size_t(t) * K, k, Le, N, node) ? 1 : 0;
          BOOST_TEST(firsts <= 1);
          records += firsts;
        }
      BOOST_TEST(records == plan.hybridNetworkTokens[src]);
    }
    // Every delivery's forwarder is the kernels' deliverer.
    for (int d = 0; d < R; ++d)
      for (const ref::HybridDelivery& del : plan.deliveries[d]) BOOST_TEST(del.forwarder == dev::delivererOf(del.srcRank, d, N));
    // Combine order: one key per own-node rank and per other node, ordered like the reference's
    // ascending nodes (CombinePath), and equal to the rank itself in direct mode.
    for (int src = 0; src < R; ++src) {
      std::set<int> keys;
      for (int d = 0; d < R; ++d) {
        const int key = dev::combineOrderKey(src, d, N);
        BOOST_TEST(dev::combineOrderKey(src, d, 0) == d);
        if (dev::isForwarded(src, d, N)) BOOST_TEST(key == dev::nodeOfRank(d, N) * N);
        else BOOST_TEST(key == d);
        keys.insert(key);
        for (int d2 = 0; d2 < R; ++d2)
          if (dev::nodeOfRank(d, N) < dev::nodeOfRank(d2, N)) BOOST_TEST(key < dev::combineOrderKey(src, d2, N));
      }
      BOOST_TEST(int(keys.size()) == (R / N - 1) + N);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
