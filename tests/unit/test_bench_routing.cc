// CPU tests of epx-bench's traffic model of hybrid forwarding (tools/epx-bench/routing.h
// hybridTrafficOf): a worked example, the edge geometries that make it direct mode's traffic, and
// on seeded random routings that its first hop is the CPU reference's network copies
// (epx::ref::hybridPlan) and that every (source, token, destination) of direct mode is reached once.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "epx/ref/hybrid_ref.h"
#include "routing.h"

namespace {

using namespace epxbench;

BenchShape shape(int n, int tokens, int topk, int experts) {
  BenchShape s;
  s.nRanks = n;
  s.tokens = tokens;
  s.hidden = 128;
  s.topk = topk;
  s.experts = experts;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hybrid_traffic)

BOOST_AUTO_TEST_CASE(worked_example) {
  // 4 ranks as 2 nodes of 2, one expert per rank. Rank 0's token picks experts 1, 2, 3: rank 1 (own
  // node) from rank 0; node 1 once, to rank 2 (rank 0's rail there), which passes it to rank 3.
  // Rank 3's token picks expert 0 and 3: rank 3 keeps its own row; node 0 once, to rank 1 (rank 3's
  // rail there), which passes it to rank 0.
  const BenchShape s = shape(4, 1, 3, 4);
  std::vector<epx::ref::RankRouting> rt(4);
  for (auto& r : rt) r.numTokens = 0;
  rt[0].numTokens = 1;
  rt[0].topkIdx = {1, 2, 3};
  rt[3].numTokens = 1;
  rt[3].topkIdx = {0, 3, -1};
  const Traffic t = hybridTrafficOf(s, rt, 2);
  std::vector<int64_t> want(16, 0);
  want[0 * 4 + 1] = 1;
  want[0 * 4 + 2] = 1;
  want[2 * 4 + 3] = 1;
  want[3 * 4 + 3] = 1;
  want[3 * 4 + 1] = 1;
  want[1 * 4 + 0] = 1;
  BOOST_TEST(t.rows == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(random_routings_against_the_reference) {
  const uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("hybrid_traffic/random_routings_against_the_reference seed " << seed);
  std::mt19937_64 rng(seed);
  for (int n : {2, 4, 8, 16})
    for (int R = 1; R <= n; R *= 2)
      for (RoutingKind kind : {RoutingKind::Uniform, RoutingKind::Grouped}) {
        const int experts = n * (1 + int(rng() % 4)), topk = 1 + int(rng() % std::min(8, experts));
        const BenchShape s = shape(n, 1 + int(rng() % 64), topk, experts);
        const auto rt = makeRouting(kind, s, rng());
        const Traffic direct = trafficOf(s, rt), hybrid = hybridTrafficOf(s, rt, R);
        BOOST_TEST_CONTEXT("seed " << seed << " n " << n << " R " << R << " experts " << experts << " topk " << topk) {
          // One rank per node or one node: nothing is forwarded, the traffic is direct mode's.
          if (R == 1 || R == n) BOOST_TEST(hybrid.rows == direct.rows, boost::test_tools::per_element());
          // The first hop, rows from a source to other nodes: the reference's network copies.
          epx::ref::EpShape es;
          es.nRanks = n;
          es.hidden = s.hidden;
          es.topk = topk;
          es.numExperts = experts;
          epx::ref::NodeGeometry g;
          g.nRanks = n;
          g.ranksPerNode = R;
          const epx::ref::HybridPlan p = epx::ref::hybridPlan(es, g, rt);
          for (int src = 0; src < n; ++src) {
            int64_t out = 0;
            for (int d = 0; d < n; ++d)
              if (d / R != src / R) out += hybrid.at(src, d);
            BOOST_TEST(out == p.hybridNetworkTokens[size_t(src)]);
          }
          // Every destination gets each of its (source, token) rows once: rows into d over both
          // hops are direct mode's rows into d plus the first-hop rows it only passes on.
          for (int d = 0; d < n; ++d) {
            int64_t in = 0;
            for (int a = 0; a < n; ++a) in += hybrid.at(a, d);
            int64_t relayOnly = 0;
            for (int src = 0; src < n; ++src) {
              if (src / R == d / R || src % R != d % R) continue;  // d is src's rail on d's node only
              const auto& r = rt[size_t(src)];
              for (int t = 0; t < r.numTokens; ++t) {
                bool node = false, self = false;
                for (int k = 0; k < topk; ++k) {
                  const int64_t e = r.topkIdx[size_t(t) * topk + k];
                  if (e < 0) continue;
                  const int dst = int(e / s.expertsPerRank());
                  node = node || dst / R == d / R;
                  self = self || dst == d;
                }
                relayOnly += node && !self;
              }
            }
            BOOST_TEST(in == direct.recvRows(d) + relayOnly);
          }
        }
      }
}

BOOST_AUTO_TEST_SUITE_END()
