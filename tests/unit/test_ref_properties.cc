// Properties of the reference on random routing: every (token, local expert) lands in exactly one
// expanded row, counts and aligned offsets add up, deduplicated rows are ordered by (source rank,
// token), validateRouting catches bad ids, and combine of identity experts returns the input.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "epx/ref/bf16.h"
#include "epx/ref/ep_ref.h"

using namespace epx::ref;

namespace {

struct Params {
  int nRanks, numExperts, topk, align, maxTokens;
  double maskProb;
};

std::ostream& operator<<(std::ostream& os, const Params& p) {
  return os << "ranks=" << p.nRanks << " E=" << p.numExperts << " K=" << p.topk << " align=" << p.align
            << " T<=" << p.maxTokens << " mask=" << p.maskProb;
}

const std::vector<Params> kParams = {
    {2, 4, 2, 1, 16, 0.0},   {2, 16, 1, 1, 40, 0.0},  {2, 16, 6, 4, 40, 0.2},  {2, 16, 8, 128, 64, 0.1},
    {4, 16, 4, 3, 33, 0.3},  {4, 64, 8, 8, 50, 0.0},  {8, 256, 8, 1, 60, 0.1}, {8, 16, 2, 16, 20, 0.5},
    {2, 256, 8, 128, 100, 0.05}, {3, 12, 5, 2, 30, 0.25},
};

// Distinct ids per token, some masked; rank 1 (when present) gets zero tokens in every 3rd draw.
std::vector<RankRouting> randomRouting(const Params& p, std::mt19937_64& rng, bool zeroRank) {
  std::vector<RankRouting> rt(p.nRanks);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int64_t> perm(p.numExperts);
  for (int r = 0; r < p.nRanks; ++r) {
    int T = std::uniform_int_distribution<int>(0, p.maxTokens)(rng);
    if (zeroRank && r == 1) T = 0;
    rt[r].numTokens = T;
    for (int t = 0; t < T; ++t) {
      for (int e = 0; e < p.numExperts; ++e) perm[e] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int k = 0; k < p.topk; ++k) {
        rt[r].topkIdx.push_back(u(rng) < p.maskProb ? -1 : perm[k]);
        // Weights exact in BF16 and FP32 (multiples of 1/64).
        rt[r].topkWeights.push_back(float(std::uniform_int_distribution<int>(1, 64)(rng)) / 64.f);
      }
    }
  }
  return rt;
}

EpShape makeShape(const Params& p, bool expanded, int hidden = 8) {
  EpShape s;
  s.nRanks = p.nRanks;
  s.hidden = hidden;
  s.topk = p.topk;
  s.numExperts = p.numExperts;
  s.expertAlignment = p.align;
  s.expanded = expanded;
  return s;
}

// BF16-exact inputs with few mantissa bits (k/8, |k| <= 16) so that sums of up to 32 copies plus
// biases are exact.
std::vector<std::vector<uint16_t>> randomTokens(const EpShape& s, const std::vector<RankRouting>& rt,
                                                std::mt19937_64& rng) {
  std::vector<std::vector<uint16_t>> x(s.nRanks);
  std::uniform_int_distribution<int> d(-16, 16);
  for (int r = 0; r < s.nRanks; ++r)
    for (size_t i = 0; i < size_t(rt[r].numTokens) * s.hidden; ++i) x[r].push_back(floatToBf16(float(d(rng)) / 8.f));
  return x;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ref_properties)

BOOST_AUTO_TEST_CASE(expanded_layout) {
  std::mt19937_64 rng(12345);
  for (size_t pi = 0; pi < kParams.size(); ++pi)
    for (int rep = 0; rep < 4; ++rep) {
      const Params& p = kParams[pi];
      BOOST_TEST_CONTEXT(p << " rep=" << rep) {
        auto rt = randomRouting(p, rng, rep % 3 == 0);
        auto s = makeShape(p, true);
        for (int r = 0; r < p.nRanks; ++r) BOOST_TEST_REQUIRE(validateRouting(s, rt[r]).empty());
        auto d = dispatch(s, rt);
        BOOST_TEST_REQUIRE(int(d.size()) == p.nRanks);
        const int Le = s.localExperts();
        // (src, token, slot) -> number of rows holding it, over all ranks.
        std::map<std::tuple<int, int, int>, int> seen;
        long validRows = 0;
        for (int r = 0; r < p.nRanks; ++r) {
          const RankDispatch& rd = d[r];
          BOOST_TEST(int(rd.expertCounts.size()) == Le);
          BOOST_TEST_REQUIRE(int(rd.expertOffsets.size()) == Le + 1);
          BOOST_TEST(rd.expertOffsets[0] == 0);
          BOOST_TEST(rd.numRows == rd.expertOffsets[Le]);
          BOOST_TEST_REQUIRE(int(rd.srcRank.size()) == rd.numRows);
          BOOST_TEST_REQUIRE(int(rd.srcToken.size()) == rd.numRows);
          BOOST_TEST_REQUIRE(int(rd.srcSlot.size()) == rd.numRows);
          BOOST_TEST_REQUIRE(int(rd.recvWeights.size()) == rd.numRows);
          std::set<std::pair<int, int>> pairs;
          for (int le = 0; le < Le; ++le) {
            int begin = rd.expertOffsets[le], end = rd.expertOffsets[le + 1], cnt = rd.expertCounts[le];
            BOOST_TEST(begin % p.align == 0);
            BOOST_TEST(end - begin == (cnt + p.align - 1) / p.align * p.align);
            std::pair<int, int> prev{-1, -1};
            for (int row = begin; row < end; ++row) {
              if (row >= begin + cnt) {  // gap
                BOOST_TEST(rd.srcRank[row] == -1);
                BOOST_TEST(rd.srcToken[row] == -1);
                BOOST_TEST(rd.recvWeights[row] == 0.f);
                continue;
              }
              int src = rd.srcRank[row], t = rd.srcToken[row], k = rd.srcSlot[row];
              BOOST_TEST_REQUIRE((src >= 0 && src < p.nRanks));
              BOOST_TEST_REQUIRE((t >= 0 && t < rt[src].numTokens));
              BOOST_TEST_REQUIRE((k >= 0 && k < p.topk));
              // Right expert, right weight, ordered by (source rank, token) within the expert.
              BOOST_TEST(rt[src].topkIdx[size_t(t) * p.topk + k] == int64_t(r) * Le + le);
              BOOST_TEST(rd.recvWeights[row] == rt[src].topkWeights[size_t(t) * p.topk + k]);
              BOOST_TEST((std::make_pair(src, t) > prev));
              prev = {src, t};
              seen[{src, t, k}]++;
              pairs.insert({src, t});
              ++validRows;
            }
          }
          BOOST_TEST(rd.numTokens == int(pairs.size()));
        }
        long unmasked = 0;
        for (int src = 0; src < p.nRanks; ++src)
          for (int t = 0; t < rt[src].numTokens; ++t)
            for (int k = 0; k < p.topk; ++k)
              if (rt[src].topkIdx[size_t(t) * p.topk + k] >= 0) {
                ++unmasked;
                BOOST_TEST(seen[std::make_tuple(src, t, k)] == 1);
              }
        BOOST_TEST(validRows == unmasked);
        BOOST_TEST(long(seen.size()) == unmasked);
      }
    }
}

BOOST_AUTO_TEST_CASE(deduplicated_layout) {
  std::mt19937_64 rng(777);
  for (size_t pi = 0; pi < kParams.size(); ++pi)
    for (int rep = 0; rep < 4; ++rep) {
      const Params& p = kParams[pi];
      BOOST_TEST_CONTEXT(p << " rep=" << rep) {
        auto rt = randomRouting(p, rng, rep % 3 == 1);
        auto s = makeShape(p, false);
        auto d = dispatch(s, rt);
        auto dx = dispatch(makeShape(p, true), rt);
        const int Le = s.localExperts(), K = p.topk;
        for (int r = 0; r < p.nRanks; ++r) {
          const RankDispatch& rd = d[r];
          BOOST_TEST(rd.numRows == rd.numTokens);
          BOOST_TEST(rd.numTokens == dx[r].numTokens);
          BOOST_TEST(rd.expertCounts == dx[r].expertCounts, boost::test_tools::per_element());
          BOOST_TEST_REQUIRE(int(rd.recvTopkIdx.size()) == rd.numRows * K);
          BOOST_TEST_REQUIRE(int(rd.recvWeights.size()) == rd.numRows * K);
          // Rows: exactly the tokens sent to r, by (source rank, token).
          std::vector<std::pair<int, int>> want;
          for (int src = 0; src < p.nRanks; ++src)
            for (int t : tokensSentTo(s, rt[src], r)) want.emplace_back(src, t);
          BOOST_TEST_REQUIRE(int(want.size()) == rd.numRows);
          std::vector<int> counts(Le, 0);
          for (int row = 0; row < rd.numRows; ++row) {
            BOOST_TEST(rd.srcRank[row] == want[row].first);
            BOOST_TEST(rd.srcToken[row] == want[row].second);
            if (row > 0)
              BOOST_TEST((std::make_pair(rd.srcRank[row - 1], rd.srcToken[row - 1]) <
                          std::make_pair(rd.srcRank[row], rd.srcToken[row])));
            int src = want[row].first, t = want[row].second;
            bool any = false;
            for (int k = 0; k < K; ++k) {
              int64_t e = rt[src].topkIdx[size_t(t) * K + k];
              bool local = e >= 0 && e / Le == r;
              int32_t li = rd.recvTopkIdx[size_t(row) * K + k];
              BOOST_TEST(li == (local ? int32_t(e - int64_t(r) * Le) : -1));
              BOOST_TEST(rd.recvWeights[size_t(row) * K + k] ==
                         (local ? rt[src].topkWeights[size_t(t) * K + k] : 0.f));
              if (li >= 0) {
                counts[li]++;
                any = true;
              }
            }
            BOOST_TEST(any);
          }
          BOOST_TEST(rd.expertCounts == counts, boost::test_tools::per_element());
          BOOST_TEST_REQUIRE(int(rd.expertOffsets.size()) == Le + 1);
          for (int le = 0; le < Le; ++le)
            BOOST_TEST(rd.expertOffsets[le + 1] - rd.expertOffsets[le] == rd.expertCounts[le]);
          BOOST_TEST(rd.expertOffsets[0] == 0);
        }
      }
    }
}

// Experts that return their input: dedup combine gives x * (number of destination ranks), and
// expanded combine gives x * (number of unmasked slots); plus biases. Exact with these inputs.
BOOST_AUTO_TEST_CASE(identity_experts_combine) {
  std::mt19937_64 rng(4242);
  for (size_t pi = 0; pi < kParams.size(); ++pi)
    for (bool expanded : {false, true}) {
      const Params& p = kParams[pi];
      BOOST_TEST_CONTEXT(p << " expanded=" << expanded) {
        auto rt = randomRouting(p, rng, pi % 2 == 0);
        auto s = makeShape(p, expanded, 8);
        const int H = s.hidden, K = p.topk, Le = s.localExperts();
        auto d = dispatch(s, rt);
        auto x = randomTokens(s, rt, rng);
        std::vector<std::vector<uint16_t>> eo(p.nRanks), b0(p.nRanks), b1(p.nRanks);
        for (int r = 0; r < p.nRanks; ++r) {
          eo[r].assign(size_t(d[r].numRows) * H, 0x7fc0);  // gap rows NaN: must be skipped
          for (int row = 0; row < d[r].numRows; ++row)
            if (d[r].srcRank[row] >= 0)
              std::copy_n(&x[d[r].srcRank[row]][size_t(d[r].srcToken[row]) * H], H, &eo[r][size_t(row) * H]);
          for (size_t i = 0; i < size_t(rt[r].numTokens) * H; ++i) {
            b0[r].push_back(floatToBf16(float(int(i % 5) - 2) * 0.25f));
            b1[r].push_back(floatToBf16(i % 3 == 0 ? 1.f : -0.5f));
          }
        }
        auto out = combine(s, rt, d, eo, {}, {});
        auto outB = combine(s, rt, d, eo, b0, b1);
        for (int r = 0; r < p.nRanks; ++r) {
          BOOST_TEST_REQUIRE(out[r].size() == size_t(rt[r].numTokens) * H);
          int bad = 0, badB = 0, checkedSingle = 0;
          for (int t = 0; t < rt[r].numTokens; ++t) {
            int slots = 0;
            std::set<int> dests;
            for (int k = 0; k < K; ++k) {
              int64_t e = rt[r].topkIdx[size_t(t) * K + k];
              if (e >= 0) {
                ++slots;
                dests.insert(int(e / Le));
              }
            }
            float mult = expanded ? float(slots) : float(dests.size());
            if (!expanded && dests.size() == 1) ++checkedSingle;
            for (int h = 0; h < H; ++h) {
              size_t i = size_t(t) * H + h;
              float xv = bf16ToFloat(x[r][i]);
              if (bf16ToFloat(out[r][i]) != mult * xv) ++bad;
              float wantB = mult * xv + bf16ToFloat(b0[r][i]) + bf16ToFloat(b1[r][i]);
              if (bf16ToFloat(outB[r][i]) != wantB) ++badB;
              // One destination: dedup combine of identity experts returns the input bits.
              if (!expanded && dests.size() == 1 && out[r][i] != x[r][i] && xv != 0.f) ++bad;
            }
          }
          BOOST_TEST(bad == 0);
          BOOST_TEST(badB == 0);
          (void)checkedSingle;
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(combine_weights_round_trip) {
  std::mt19937_64 rng(99);
  for (size_t pi = 0; pi < kParams.size(); ++pi)
    for (bool expanded : {false, true}) {
      const Params& p = kParams[pi];
      BOOST_TEST_CONTEXT(p << " expanded=" << expanded) {
        auto rt = randomRouting(p, rng, false);
        auto s = makeShape(p, expanded);
        auto d = dispatch(s, rt);
        std::vector<std::vector<float>> rw;
        for (auto& rd : d) rw.push_back(rd.recvWeights);
        auto w = combineWeights(s, rt, d, rw);
        for (int r = 0; r < p.nRanks; ++r) {
          std::vector<float> want = rt[r].topkWeights;
          for (size_t i = 0; i < want.size(); ++i)
            if (rt[r].topkIdx[i] < 0) want[i] = 0.f;
          BOOST_TEST(w[r] == want, boost::test_tools::per_element());
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(validate_routing) {
  Params p{2, 16, 4, 1, 8, 0.0};
  std::mt19937_64 rng(5);
  auto rt = randomRouting(p, rng, false);
  rt[0].numTokens = 8;
  rt[0].topkIdx.assign(8 * 4, -1);
  rt[0].topkWeights.assign(8 * 4, 1.f);
  auto s = makeShape(p, true);
  BOOST_TEST(validateRouting(s, rt[0]).empty());  // all masked (and repeated -1) is valid
  for (int t = 0; t < 8; ++t)
    for (int k = 0; k < 4; ++k) rt[0].topkIdx[t * 4 + k] = (t * 4 + k) % 16;
  BOOST_TEST(validateRouting(s, rt[0]).empty());

  auto bad = rt[0];
  bad.topkIdx[5 * 4 + 2] = 16;  // == numExperts
  std::string m = validateRouting(s, bad);
  BOOST_TEST(!m.empty());
  BOOST_TEST(m.find("out of range") != std::string::npos);
  BOOST_TEST(m.find("token 5") != std::string::npos);

  bad = rt[0];
  bad.topkIdx[3 * 4 + 0] = -2;
  BOOST_TEST(!validateRouting(s, bad).empty());

  bad = rt[0];
  bad.topkIdx[7 * 4 + 3] = bad.topkIdx[7 * 4 + 1];  // duplicate within token 7
  m = validateRouting(s, bad);
  BOOST_TEST(m.find("repeated") != std::string::npos);
  BOOST_TEST(m.find("token 7") != std::string::npos);

  // The same expert in different tokens is fine.
  auto ok = rt[0];
  for (int t = 0; t < 8; ++t) ok.topkIdx[t * 4] = 3, ok.topkIdx[t * 4 + 1] = -1, ok.topkIdx[t * 4 + 2] = -1,
                              ok.topkIdx[t * 4 + 3] = -1;
  BOOST_TEST(validateRouting(s, ok).empty());
}

// Every token of every rank to one expert: one segment holds all tokens, the others are empty.
BOOST_AUTO_TEST_CASE(all_tokens_to_one_expert) {
  EpShape s;
  s.nRanks = 2;
  s.hidden = 8;
  s.topk = 8;
  s.numExperts = 16;
  s.expertAlignment = 128;
  std::vector<RankRouting> rt(2);
  for (int r = 0; r < 2; ++r) {
    rt[r].numTokens = 100;
    for (int t = 0; t < 100; ++t)
      for (int k = 0; k < 8; ++k) {
        rt[r].topkIdx.push_back(k == t % 8 ? 11 : -1);
        rt[r].topkWeights.push_back(1.f);
      }
  }
  auto d = dispatch(s, rt);
  BOOST_TEST(d[0].numRows == 0);
  BOOST_TEST(d[0].numTokens == 0);
  BOOST_TEST(d[1].numTokens == 200);
  BOOST_TEST(d[1].expertCounts == (std::vector<int32_t>{0, 0, 0, 200, 0, 0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertOffsets == (std::vector<int32_t>{0, 0, 0, 0, 256, 256, 256, 256, 256}),
             boost::test_tools::per_element());
  BOOST_TEST(d[1].numRows == 256);
  for (int i = 0; i < 200; ++i) {
    BOOST_TEST(d[1].srcRank[i] == i / 100);
    BOOST_TEST(d[1].srcToken[i] == i % 100);
    BOOST_TEST(d[1].srcSlot[i] == (i % 100) % 8);
  }
}

BOOST_AUTO_TEST_SUITE_END()
