// The hybrid-mode routing plan (host/ref hybrid_ref.h): a worked example, and on seeded random
// routing over every node geometry of 1..8 ranks: the same (source rank, token) pairs as direct
// mode, forwarders on the destination's node (or the source on its own), one network copy per
// distinct remote node, and the two edge geometries (one rank per node: hybrid = direct; one node:
// nothing on the network); and the combine with the forwarder's per-node reduction (CombinePath).
// A failing case prints its seed; EPX_TEST_SEED=<seed> repeats it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <string>
#include <random>
#include <set>
#include <vector>

#include "epx/ref/bf16.h"
#include "epx/ref/ep_ref.h"
#include "epx/ref/hybrid_ref.h"
#include "epx/topology/estimate.h"
#include "test_seed.h"

using namespace epx::ref;
using epx::test::testSeed;

namespace epx::ref {
std::ostream& operator<<(std::ostream& os, const HybridDelivery& d) {
  return os << "(source rank " << d.srcRank << ", token " << d.srcToken << ", forwarder " << d.forwarder << ")";
}
}  // namespace epx::ref

namespace {

EpShape shapeOf(int nRanks, int numExperts, int topk) {
  EpShape s;
  s.nRanks = nRanks;
  s.hidden = 8;
  s.topk = topk;
  s.numExperts = numExperts;
  s.expanded = false;
  return s;
}

std::vector<RankRouting> randomRouting(const EpShape& s, int maxTokens, double maskProb, std::mt19937_64& rng) {
  std::vector<RankRouting> rt(size_t(s.nRanks));
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int64_t> perm(size_t(s.numExperts));
  for (auto& r : rt) {
    r.numTokens = std::uniform_int_distribution<int>(0, maxTokens)(rng);
    for (int t = 0; t < r.numTokens; ++t) {
      for (int e = 0; e < s.numExperts; ++e) perm[size_t(e)] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int k = 0; k < s.topk; ++k) r.topkIdx.push_back(u(rng) < maskProb ? -1 : perm[size_t(k)]);
    }
  }
  return rt;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hybrid_plan)

// 2 nodes x 2 ranks, 2 experts per rank. Rank 0's token 0 goes to experts 2 (rank 1), 4 (rank 2)
// and 7 (rank 3): one network copy to node 1 (to rank 2, rank 0's rail peer there), which keeps it
// and forwards it to rank 3; rank 1 gets it from rank 0 over NVLink. Direct mode puts two copies.
// Rank 3's token 0 goes to expert 0 (rank 0): network to rank 1 (its rail peer on node 0), forwarded.
BOOST_AUTO_TEST_CASE(worked_example) {
  const EpShape s = shapeOf(4, 8, 3);
  NodeGeometry g;
  g.nRanks = 4;
  g.ranksPerNode = 2;
  std::vector<RankRouting> rt(4);
  rt[0].numTokens = 1;
  rt[0].topkIdx = {2, 4, 7};
  rt[3].numTokens = 1;
  rt[3].topkIdx = {0, -1, -1};
  const HybridPlan p = hybridPlan(s, g, rt);
  BOOST_TEST(p.deliveries[0] == (std::vector<HybridDelivery>{{3, 0, 1}}), boost::test_tools::per_element());
  BOOST_TEST(p.deliveries[1] == (std::vector<HybridDelivery>{{0, 0, 0}}), boost::test_tools::per_element());
  BOOST_TEST(p.deliveries[2] == (std::vector<HybridDelivery>{{0, 0, 2}}), boost::test_tools::per_element());
  BOOST_TEST(p.deliveries[3] == (std::vector<HybridDelivery>{{0, 0, 2}}), boost::test_tools::per_element());
  BOOST_TEST(p.directNetworkTokens == (std::vector<int64_t>{2, 0, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(p.hybridNetworkTokens == (std::vector<int64_t>{1, 0, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(p.forwardedTokens == (std::vector<int64_t>{0, 1, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(p.routedTokens == 2);
  BOOST_TEST(p.distinctRanks == 4);
  BOOST_TEST(p.distinctNodes == 3);
}

BOOST_AUTO_TEST_CASE(random_routing_every_geometry) {
  const uint64_t seed = testSeed();
  BOOST_TEST_MESSAGE("hybrid_plan/random_routing_every_geometry seed " << seed);
  std::mt19937_64 rng(seed);
  int cases = 0;
  for (int R = 1; R <= 8; ++R) {
    for (int U = 1; U <= R; ++U) {
      if (R % U) continue;
      for (int rep = 0; rep < 4; ++rep, ++cases) {
        const int Le = std::uniform_int_distribution<int>(1, 4)(rng);
        const int E = Le * R, K = std::uniform_int_distribution<int>(1, std::min(E, 8))(rng);
        const EpShape s = shapeOf(R, E, K);
        NodeGeometry g;
        g.nRanks = R;
        g.ranksPerNode = U;
        const auto rt = randomRouting(s, 40, rep == 3 ? 0.5 : 0.1, rng);
        const HybridPlan p = hybridPlan(s, g, rt);
        const auto where = [&] { return "seed " + std::to_string(seed) + ", ranks " + std::to_string(R) + ", per node " +
                                        std::to_string(U) + ", E " + std::to_string(E) + ", K " + std::to_string(K); };
        int64_t remoteNotRail = 0, routed = 0;
        for (int d = 0; d < R; ++d) {
          std::vector<HybridDelivery> want;
          for (int src = 0; src < R; ++src)
            for (int t : tokensSentTo(s, rt[size_t(src)], d)) {
              const bool home = g.nodeOf(src) == g.nodeOf(d);
              want.push_back({src, t, home ? src : g.railPeer(src, g.nodeOf(d))});
              if (!home && g.railPeer(src, g.nodeOf(d)) != d) ++remoteNotRail;
            }
          BOOST_TEST_INFO(where() << ", destination " << d);
          BOOST_TEST(p.deliveries[size_t(d)] == want, boost::test_tools::per_element());
          for (const HybridDelivery& v : p.deliveries[size_t(d)]) {
            BOOST_TEST_INFO(where());
            BOOST_TEST(g.nodeOf(v.forwarder) == (g.nodeOf(v.srcRank) == g.nodeOf(d) ? g.nodeOf(v.srcRank) : g.nodeOf(d)));
          }
        }
        int64_t forwarded = 0;
        for (int r = 0; r < R; ++r) {
          forwarded += p.forwardedTokens[size_t(r)];
          std::set<int> nodes;
          int64_t direct = 0, hybrid = 0;
          for (int t = 0; t < rt[size_t(r)].numTokens; ++t) {
            std::set<int> ranks, tokNodes;
            for (int k = 0; k < K; ++k) {
              const int64_t e = rt[size_t(r)].topkIdx[size_t(t) * K + k];
              if (e >= 0) ranks.insert(int(e / Le)), tokNodes.insert(g.nodeOf(int(e / Le)));
            }
            routed += !ranks.empty();
            for (int d : ranks) direct += g.nodeOf(d) != g.nodeOf(r);
            for (int n : tokNodes) hybrid += n != g.nodeOf(r);
          }
          BOOST_TEST_INFO(where() << ", source " << r);
          BOOST_TEST(p.directNetworkTokens[size_t(r)] == direct);
          BOOST_TEST_INFO(where() << ", source " << r);
          BOOST_TEST(p.hybridNetworkTokens[size_t(r)] == hybrid);
          BOOST_TEST(p.hybridNetworkTokens[size_t(r)] <= p.directNetworkTokens[size_t(r)]);
          if (U == 1) BOOST_TEST(p.hybridNetworkTokens[size_t(r)] == p.directNetworkTokens[size_t(r)]);
          if (U == R) BOOST_TEST(p.directNetworkTokens[size_t(r)] == 0);
        }
        BOOST_TEST_INFO(where());
        BOOST_TEST(forwarded == remoteNotRail);
        BOOST_TEST(p.routedTokens == routed);
        BOOST_TEST(p.distinctNodes <= p.distinctRanks);
      }
    }
  }
  BOOST_TEST(cases == 4 * 20);  // (R, U) pairs with U | R for R = 1..8: 20
}

// Uniform routing (top-8 of 256 experts, no masked slot) over 8 nodes x 8 ranks: the plan's mean
// distinct destination ranks and nodes per token match the analytic expectation that the SM/QP
// estimate uses (epxExpectedGroupsTouched: 7.68 ranks, 5.29 nodes) within 1 %. A source's own node
// is touched as often as any other, so hybrid's network copies per token are 5.29 x 7/8 against
// direct mode's 7.68 x 56/64: 69 % of them (31 % fewer bytes on the NICs).
BOOST_AUTO_TEST_CASE(uniform_routing_matches_the_analytic_count) {
  const uint64_t seed = testSeed();  // 19200 tokens: 1 % is ~9 standard errors of either mean
  BOOST_TEST_MESSAGE("hybrid_plan/uniform_routing_matches_the_analytic_count seed " << seed);
  std::mt19937_64 rng(seed);
  const EpShape s = shapeOf(64, 256, 8);
  NodeGeometry g;
  g.nRanks = 64;
  g.ranksPerNode = 8;
  std::vector<RankRouting> rt = randomRouting(s, 0, 0.0, rng);
  std::vector<int64_t> perm(256);
  for (auto& r : rt) {
    r.numTokens = 300;
    for (int t = 0; t < r.numTokens; ++t) {
      for (int e = 0; e < 256; ++e) perm[size_t(e)] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      r.topkIdx.insert(r.topkIdx.end(), perm.begin(), perm.begin() + 8);
    }
  }
  const HybridPlan p = hybridPlan(s, g, rt);
  BOOST_TEST(p.routedTokens == 64 * 300);
  const double ranks = epx::topo::epxExpectedGroupsTouched(256, 8, 64), nodes = epx::topo::epxExpectedGroupsTouched(256, 8, 8);
  BOOST_TEST(ranks == 7.68, boost::test_tools::tolerance(0.001));
  BOOST_TEST(nodes == 5.29, boost::test_tools::tolerance(0.001));
  BOOST_TEST(p.meanDistinctRanks() == ranks, boost::test_tools::tolerance(0.01));
  BOOST_TEST(p.meanDistinctNodes() == nodes, boost::test_tools::tolerance(0.01));
  int64_t direct = 0, hybrid = 0;
  for (int r = 0; r < 64; ++r) direct += p.directNetworkTokens[size_t(r)], hybrid += p.hybridNetworkTokens[size_t(r)];
  BOOST_TEST(double(hybrid) / double(direct) == (nodes * 7 / 8) / (ranks * 56 / 64), boost::test_tools::tolerance(0.02));
  BOOST_TEST(double(hybrid) / double(direct) == 0.69, boost::test_tools::tolerance(0.02));
}

// The combine with the forwarder's reduction (CombinePath): on values whose sums are exact in BF16
// every node grouping gives direct mode's bits, in both layouts; one node per rank or one node for
// all ranks gives them always (the grouping is then direct mode's).
BOOST_AUTO_TEST_CASE(node_reduced_combine_equals_direct_on_exact_values) {
  const uint64_t seed = testSeed();
  BOOST_TEST_MESSAGE("hybrid_plan/node_reduced_combine_equals_direct_on_exact_values seed " << seed);
  std::mt19937_64 rng(seed);
  for (int R : {2, 4, 6, 8}) {
    for (bool expanded : {true, false}) {
      EpShape s = shapeOf(R, 2 * R, std::min(2 * R, 6));
      s.expanded = expanded;
      s.hidden = 16;
      const auto rt = randomRouting(s, 12, 0.2, rng);
      const auto disp = dispatch(s, rt);
      std::vector<std::vector<uint16_t>> eo(static_cast<size_t>(R));
      for (int d = 0; d < R; ++d)
        for (int i = 0; i < disp[size_t(d)].numRows * s.hidden; ++i)
          eo[size_t(d)].push_back(floatToBf16(float(std::uniform_int_distribution<int>(-8, 8)(rng)) / 4.f));
      const auto direct = combine(s, rt, disp, eo, {}, {});
      for (int U = 1; U <= R; ++U) {
        if (R % U) continue;
        const auto hybrid = combine(s, rt, disp, eo, {}, {}, CombinePath{U});
        for (int r = 0; r < R; ++r) {
          BOOST_TEST_INFO("seed " << seed << ", ranks " << R << ", per node " << U << (expanded ? ", expanded" : ", dedup")
                                  << ", source " << r);
          BOOST_TEST(hybrid[size_t(r)] == direct[size_t(r)], boost::test_tools::per_element());
        }
      }
    }
  }
}

// Where the order differs: 2 nodes x 2 ranks, rank 0's one token has experts on ranks 1, 2 and 3
// returning 2^-8, 1 and 2^-8 (one channel). Direct mode sums 2^-8 + 1 + 2^-8 = 1 + 2^-7, exact in
// BF16. With the forwarder's reduction node 1's partial 1 + 2^-8 rounds to BF16 1 (ties to even),
// and the source gets 2^-8 + 1, which rounds to 1.
BOOST_AUTO_TEST_CASE(node_reduced_combine_rounds_the_node_partial) {
  EpShape s = shapeOf(4, 4, 3);
  s.expanded = true;
  s.hidden = 1;
  std::vector<RankRouting> rt(4);
  rt[0].numTokens = 1;
  rt[0].topkIdx = {1, 2, 3};
  const auto disp = dispatch(s, rt);
  const float tiny = 1.f / 256;
  std::vector<std::vector<uint16_t>> eo = {{}, {floatToBf16(tiny)}, {floatToBf16(1.f)}, {floatToBf16(tiny)}};
  const auto direct = combine(s, rt, disp, eo, {}, {});
  const auto hybrid = combine(s, rt, disp, eo, {}, {}, CombinePath{2});
  BOOST_TEST(bf16ToFloat(direct[0][0]) == 1.f + 2 * tiny);
  BOOST_TEST(bf16ToFloat(hybrid[0][0]) == 1.f);
}

BOOST_AUTO_TEST_SUITE_END()
