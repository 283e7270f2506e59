// epx-bench's memory floor: the local row work each rank's floor kernels time (received rows and
// their output rows), on a hand-checked routing and on random routings against the CPU reference's
// row counts.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include "memory_floor_work.h"

using epxbench::BenchShape;
using epxbench::memFloorWork;
using epx::ref::RankRouting;

namespace {

RankRouting routingOf(int tokens, const std::vector<int64_t>& ids) {
  RankRouting r;
  r.numTokens = tokens;
  r.topkIdx = ids;
  r.topkWeights.assign(ids.size(), 0.5f);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bench_memory_floor)

// 2 ranks, 4 experts (2 per rank), top-2. Rank 0 owns experts 0 and 1.
BOOST_AUTO_TEST_CASE(hand_checked_rank0) {
  const BenchShape s{2, 3, 64, 2, 4};
  const std::vector<RankRouting> routing = {
      routingOf(3, {0, 3, /**/ 1, -1, /**/ 2, 3}),  // rank 0's tokens: t0 -> e0, t1 -> e1, t2 -> none
      routingOf(3, {1, 0, /**/ 3, 2, /**/ -1, 1}),  // rank 1's tokens: t0 -> e1,e0, t1 -> none, t2 -> e1
  };
  const auto dedup = memFloorWork(s, routing, 0, false);
  BOOST_TEST(dedup.rowBytes == 128);
  BOOST_TEST(dedup.receivedRows() == 4);  // (r0,t0) (r0,t1) (r1,t0) (r1,t2)
  BOOST_TEST(dedup.outputRows() == 4);
  BOOST_TEST(dedup.first == std::vector<int32_t>({0, 1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(dedup.outRows == std::vector<int32_t>({0, 1, 2, 3}), boost::test_tools::per_element());

  const auto exp = memFloorWork(s, routing, 0, true);
  BOOST_TEST(exp.expanded);
  BOOST_TEST(exp.receivedRows() == 4);
  // Expert 0: (r0,t0), (r1,t0) -> rows 0, 1; expert 1: (r0,t1), (r1,t0), (r1,t2) -> rows 2, 3, 4.
  BOOST_TEST(exp.first == std::vector<int32_t>({0, 1, 2, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(exp.outRows == std::vector<int32_t>({0, 2, 3, 1, 4}), boost::test_tools::per_element());
}

// Random routings, 1 to 8 ranks: every output row is used once, rows of one expert are contiguous
// and in arrival order, and the counts match what the routing implies.
BOOST_AUTO_TEST_CASE(random_routings) {
  std::mt19937_64 rng(7);
  for (int n : {1, 2, 3, 8}) {
    const int T = 37, K = 4, E = 8 * n;
    const BenchShape s{n, T, 128, K, E};
    std::vector<RankRouting> routing;
    for (int r = 0; r < n; ++r) {
      std::vector<int64_t> ids;
      for (int t = 0; t < T; ++t) {
        std::vector<int64_t> e(E);
        for (int i = 0; i < E; ++i) e[i] = i;
        std::shuffle(e.begin(), e.end(), rng);
        for (int k = 0; k < K; ++k) ids.push_back(rng() % 5 == 0 ? -1 : e[k]);
      }
      routing.push_back(routingOf(T, ids));
    }
    for (int rank = 0; rank < n; ++rank) {
      const int Le = E / n, lo = rank * Le;
      int64_t received = 0, slots = 0;
      for (const auto& src : routing)
        for (int t = 0; t < T; ++t) {
          int mine = 0;
          for (int k = 0; k < K; ++k) mine += src.topkIdx[t * K + k] >= lo && src.topkIdx[t * K + k] < lo + Le;
          received += mine > 0;
          slots += mine;
        }
      const auto dedup = memFloorWork(s, routing, rank, false);
      const auto exp = memFloorWork(s, routing, rank, true);
      BOOST_TEST(dedup.receivedRows() == received);
      BOOST_TEST(dedup.outputRows() == received);
      BOOST_TEST(exp.receivedRows() == received);
      BOOST_TEST(exp.outputRows() == slots);
      std::vector<int32_t> sorted = exp.outRows;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i) BOOST_TEST(sorted[i] == int32_t(i));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
