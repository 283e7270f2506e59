// The Engram fetch's CPU reference (host/ref engram_ref.h): a worked example over 2 ranks and 2
// layers, -1 and out-of-range indices, shape checks, and seeded random fetches over 1..8 ranks
// (every output row is its table row, or zero; the per-owner counts). A failing case prints its
// seed; EPX_TEST_SEED=<seed> repeats it.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "epx/ref/engram_ref.h"
#include "test_seed.h"

using namespace epx::ref;
using epx::test::testSeed;

namespace {

// shards[r][l]: rank r's rows of layer l, byte j of global row g of layer l = g * 7 + l * 31 + j.
std::vector<std::vector<std::vector<uint8_t>>> makeShards(const EngramShape& s) {
  std::vector<std::vector<std::vector<uint8_t>>> sh(size_t(s.nRanks), std::vector<std::vector<uint8_t>>(size_t(s.layers)));
  for (int r = 0; r < s.nRanks; ++r)
    for (int l = 0; l < s.layers; ++l) {
      auto& v = sh[size_t(r)][size_t(l)];
      v.resize(size_t(s.rowsPerRank()) * s.rowBytes);
      for (int64_t i = 0; i < s.rowsPerRank(); ++i)
        for (uint64_t j = 0; j < s.rowBytes; ++j)
          v[size_t(i) * s.rowBytes + j] = uint8_t((r * s.rowsPerRank() + i) * 7 + l * 31 + int64_t(j));
    }
  return sh;
}

uint8_t byteOf(int64_t row, int layer, uint64_t j) { return uint8_t(row * 7 + layer * 31 + int64_t(j)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(engram_ref)

// 2 ranks, 2 layers of 4 rows of 2 bytes (rank 0: rows 0-1, rank 1: rows 2-3), 1 token, 3 entries.
BOOST_AUTO_TEST_CASE(worked_example) {
  EngramShape s;
  s.nRanks = 2;
  s.layers = 2;
  s.numRows = 4;
  s.rowBytes = 2;
  s.tokens = 1;
  s.entries = 3;
  BOOST_TEST(engramCheckShape(s) == "");
  const auto shards = makeShards(s);
  const std::vector<int32_t> idx = {3, -1, 0, /* layer 1 */ 2, 4, 1};
  const EngramResult r = engramFetch(s, shards, idx);
  const std::vector<uint8_t> want = {byteOf(3, 0, 0), byteOf(3, 0, 1), 0, 0, byteOf(0, 0, 0), byteOf(0, 0, 1),
                                     byteOf(2, 1, 0), byteOf(2, 1, 1), 0, 0, byteOf(1, 1, 0), byteOf(1, 1, 1)};
  BOOST_TEST(r.out == want);
  BOOST_TEST(r.firstBad == 4);
  BOOST_TEST(r.firstBadValue == 4);
  const auto per = engramRowsPerOwner(s, idx);
  BOOST_TEST(per[0] == (std::vector<int64_t>{1, 1}));
  BOOST_TEST(per[1] == (std::vector<int64_t>{1, 1}));
}

BOOST_AUTO_TEST_CASE(shape_checks) {
  EngramShape s;
  s.nRanks = 3;
  s.numRows = 10;
  s.rowBytes = 16;
  s.entries = 1;
  BOOST_TEST(engramCheckShape(s) == "numRows (10) must be a positive multiple of nRanks (3)");
  s.numRows = 9;
  BOOST_TEST(engramCheckShape(s) == "");
  s.rowBytes = 0;
  BOOST_TEST(engramCheckShape(s) == "rowBytes must be positive");
}

BOOST_AUTO_TEST_CASE(random_fetches) {
  const uint64_t seed = testSeed();
  BOOST_TEST_MESSAGE("engram_ref/random_fetches seed " << seed);
  std::mt19937_64 rng(seed);
  for (int R = 1; R <= 8; ++R)
    for (int L = 1; L <= 3; ++L) {
      EngramShape s;
      s.nRanks = R;
      s.layers = L;
      s.numRows = int64_t(R) * int64_t(1 + rng() % 20);
      s.rowBytes = 1 + rng() % 40;
      s.tokens = int(rng() % 9);
      s.entries = 1 + int(rng() % 4);
      const auto shards = makeShards(s);
      std::vector<int32_t> idx(size_t(L) * size_t(s.tokens) * size_t(s.entries));
      int64_t firstBad = -1;
      for (size_t k = 0; k < idx.size(); ++k) {
        const uint64_t u = rng() % 20;
        idx[k] = u == 0 ? -1 : u == 1 ? int32_t(s.numRows + int64_t(rng() % 3)) : int32_t(rng() % uint64_t(s.numRows));
        if (u == 1 && firstBad < 0) firstBad = int64_t(k);
      }
      const EngramResult r = engramFetch(s, shards, idx);
      const std::string where = "seed " + std::to_string(seed) + ", ranks " + std::to_string(R) + ", layers " +
                                std::to_string(L);
      BOOST_TEST_INFO(where);
      BOOST_TEST(r.firstBad == firstBad);
      const size_t perLayer = size_t(s.tokens) * size_t(s.entries);
      int64_t valid = 0;
      for (size_t k = 0; k < idx.size(); ++k) {
        const int layer = int(k / std::max<size_t>(perLayer, 1));
        const bool ok = idx[k] >= 0 && idx[k] < s.numRows;
        valid += ok;
        for (uint64_t j = 0; j < s.rowBytes; ++j) {
          const uint8_t want = ok ? byteOf(idx[k], layer, j) : 0;
          if (r.out[k * s.rowBytes + j] != want) {
            BOOST_TEST_INFO(where << ", index " << k << ", byte " << j);
            BOOST_TEST(int(r.out[k * s.rowBytes + j]) == int(want));
            break;
          }
        }
      }
      int64_t counted = 0;
      for (const auto& layer : engramRowsPerOwner(s, idx))
        for (int64_t n : layer) counted += n;
      BOOST_TEST_INFO(where);
      BOOST_TEST(counted == valid);
    }
}

BOOST_AUTO_TEST_SUITE_END()
