// Expert load balancing's CPU reference (host/ref lb_ref.h): a worked example of prefetch and
// gradient reduction, the fixed (rank, slot) order of the reduction on a case where the order
// changes the FP32 result, mapping validation, and seeded random mappings over 1..8 ranks (prefetch
// copies exactly the used slots; the reduction of exact values equals original + replica sum; the
// traffic counts). A failing case prints its seed; EPX_TEST_SEED=<seed> repeats it.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "epx/ref/lb_ref.h"
#include "test_seed.h"

using namespace epx::ref;
using epx::test::testSeed;

namespace {

// Rank r's rows of one tensor, each byte naming (rank, row, byte): distinct everywhere.
std::vector<std::vector<uint8_t>> patternRows(int nRanks, int rows, size_t rowBytes, uint8_t salt) {
  std::vector<std::vector<uint8_t>> v(size_t(nRanks), std::vector<uint8_t>(size_t(rows) * rowBytes));
  for (int r = 0; r < nRanks; ++r)
    for (size_t i = 0; i < v[size_t(r)].size(); ++i) v[size_t(r)][i] = uint8_t(salt + 31 * r + 7 * i);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lb_ref)

// 2 ranks, 4 experts (rank 0 owns 0 and 1, rank 1 owns 2 and 3), 2 slots per rank. Rank 0's slot 0
// replicates expert 3, its slot 1 is unused; rank 1's slots replicate experts 0 and 1.
BOOST_AUTO_TEST_CASE(worked_example) {
  const LbShape s{2, 4, 2};
  const std::vector<int32_t> map = {3, -1, 0, 1};
  BOOST_TEST(lbCheckMapping(s, map) == "");
  const size_t rowBytes = 3;
  const std::vector<std::vector<uint8_t>> orig = {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}};
  std::vector<std::vector<uint8_t>> slots = {{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}, {0, 0, 0, 0, 0, 0}};
  lbPrefetch(s, map, rowBytes, orig, &slots);
  const std::vector<std::vector<uint8_t>> wantSlots = {{10, 11, 12, 0xee, 0xee, 0xee}, {1, 2, 3, 4, 5, 6}};
  BOOST_TEST(slots == wantSlots);

  std::vector<std::vector<float>> grads = {{1, 1, 2, 2}, {3, 3, 4, 4}};        // 2 elements per row
  const std::vector<std::vector<float>> slotGrads = {{10, 20, 99, 99}, {100, 200, 1000, 2000}};
  lbReduceGrads(s, map, 2, slotGrads, &grads);
  const std::vector<std::vector<float>> want = {{101, 201, 1002, 2002}, {3, 3, 14, 24}};
  BOOST_TEST(grads == want);

  const LbTraffic t = lbTraffic(s, map);
  BOOST_TEST(t.rowsOut == (std::vector<int64_t>{2, 1}));
  BOOST_TEST(t.rowsIn == (std::vector<int64_t>{1, 2}));
}

// Expert 0 (value 2^24) has replicas at (rank 0, slot 1) = 1, (rank 1, slot 0) = 1 and (rank 1,
// slot 1) = 2. Added in (rank, slot) order: 2^24 + 1 rounds to 2^24 (ties to even) twice, then
// + 2 = 2^24 + 2. Adding the 2 first would give 2^24 + 4: the order is part of the result.
BOOST_AUTO_TEST_CASE(reduction_order_is_rank_then_slot) {
  const LbShape s{2, 2, 2};
  const std::vector<int32_t> map = {-1, 0, 0, 0};
  std::vector<std::vector<float>> grads = {{16777216.0f}, {5.0f}};
  const std::vector<std::vector<float>> slotGrads = {{1e30f, 1.0f}, {1.0f, 2.0f}};
  lbReduceGrads(s, map, 1, slotGrads, &grads);
  BOOST_TEST(grads[0][0] == 16777218.0f);
  BOOST_TEST(grads[1][0] == 5.0f);  // expert 1: no replica, untouched
  float other = 16777216.0f;
  other = other + 2.0f;
  other = other + 1.0f;
  other = other + 1.0f;
  BOOST_TEST(other == 16777220.0f);  // the case does tell the orders apart
  BOOST_TEST(lbReplicas(s, map)[0] == (std::vector<int>{1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(mapping_validation_names_the_entry) {
  BOOST_TEST(lbCheckMapping(LbShape{2, 4, 2}, {0, 1, 2, 3}) == "");
  BOOST_TEST(lbCheckMapping(LbShape{2, 4, 0}, {}) == "");
  BOOST_TEST(lbCheckMapping(LbShape{2, 4, 2}, {0, 1, 4, 3}) ==
             "mapping entry of rank 1, slot 0 is 4 (want -1 or 0..3)");
  BOOST_TEST(lbCheckMapping(LbShape{2, 4, 2}, {0, -2, 1, 3}) ==
             "mapping entry of rank 0, slot 1 is -2 (want -1 or 0..3)");
  BOOST_TEST(lbCheckMapping(LbShape{2, 4, 2}, {0, 1, 2}) ==
             "the mapping has 3 entries, not nRanks * numSlots = 4");
  BOOST_TEST(lbCheckMapping(LbShape{3, 4, 1}, {0, 1, 2}) ==
             "numExperts (4) must be a positive multiple of nRanks (3)");
}

BOOST_AUTO_TEST_CASE(random_mappings_every_shape) {
  const uint64_t seed = testSeed();
  BOOST_TEST_MESSAGE("lb_ref/random_mappings_every_shape seed " << seed);
  std::mt19937_64 rng(seed);
  for (int R = 1; R <= 8; ++R)
    for (int L = 1; L <= 4; ++L)
      for (int S = 0; S <= 3; ++S) {
        const LbShape s{R, R * L, S};
        const std::string where = "seed " + std::to_string(seed) + ", ranks " + std::to_string(R) +
                                  ", local experts " + std::to_string(L) + ", slots " + std::to_string(S);
        std::vector<int32_t> map(size_t(R) * size_t(S));
        std::uniform_int_distribution<int> pick(-1, s.numExperts - 1);
        for (auto& m : map) m = pick(rng);
        BOOST_TEST_INFO(where);
        BOOST_TEST(lbCheckMapping(s, map) == "");

        // Prefetch: used slots hold their expert's row, unused ones keep theirs.
        const size_t rowBytes = 5;
        const auto orig = patternRows(R, L, rowBytes, 1);
        const auto before = patternRows(R, S, rowBytes, 101);
        auto slots = before;
        lbPrefetch(s, map, rowBytes, orig, &slots);
        for (int d = 0; d < R; ++d)
          for (int k = 0; k < S; ++k) {
            const int e = map[size_t(d * S + k)];
            const auto& src = e < 0 ? before[size_t(d)] : orig[size_t(e / L)];
            const size_t row = size_t(e < 0 ? k : e % L);
            const std::vector<uint8_t> want(src.begin() + long(row * rowBytes), src.begin() + long((row + 1) * rowBytes));
            const std::vector<uint8_t> got(slots[size_t(d)].begin() + long(size_t(k) * rowBytes),
                                           slots[size_t(d)].begin() + long(size_t(k + 1) * rowBytes));
            BOOST_TEST_INFO(where << ", rank " << d << ", slot " << k);
            BOOST_TEST(got == want);
          }

        // Reduction of small integers (exact in FP32 in any order): original + sum of replicas.
        const size_t elems = 3;
        std::vector<std::vector<float>> grads(size_t(R), std::vector<float>(size_t(L) * elems));
        std::vector<std::vector<float>> slotGrads(size_t(R), std::vector<float>(size_t(S) * elems));
        std::uniform_int_distribution<int> small(-1000, 1000);
        for (auto& g : grads) for (auto& v : g) v = float(small(rng));
        for (auto& g : slotGrads) for (auto& v : g) v = float(small(rng));
        auto want = grads;
        for (int d = 0; d < R; ++d)
          for (int k = 0; k < S; ++k) {
            const int e = map[size_t(d * S + k)];
            if (e < 0) continue;
            for (size_t j = 0; j < elems; ++j)
              want[size_t(e / L)][size_t(e % L) * elems + j] += slotGrads[size_t(d)][size_t(k) * elems + j];
          }
        lbReduceGrads(s, map, elems, slotGrads, &grads);
        BOOST_TEST_INFO(where);
        BOOST_TEST(grads == want);

        // Traffic: every used slot of another rank's expert is one row out of its owner and in.
        const LbTraffic t = lbTraffic(s, map);
        int64_t out = 0, in = 0, remote = 0;
        for (int r = 0; r < R; ++r) out += t.rowsOut[size_t(r)], in += t.rowsIn[size_t(r)];
        for (size_t i = 0; i < map.size(); ++i) remote += map[i] >= 0 && map[i] / L != int(i) / std::max(S, 1);
        BOOST_TEST_INFO(where);
        BOOST_TEST(out == remote);
        BOOST_TEST(in == remote);
      }
}

BOOST_AUTO_TEST_SUITE_END()
