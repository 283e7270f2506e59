// The reference's worked example, computed by hand: two ranks, four tokens each, top-2, four
// experts (two per rank: rank 0 owns experts 0 and 1, rank 1 owns 2 and 3), hidden 4.
//
//   rank 0 tokens   ids       weights         rank 1 tokens   ids       weights
//   t0              [ 0,  2]  [0.5 , 0.25 ]   t0              [ 2,  3]  [0.5  , 0.5  ]
//   t1              [ 1,  0]  [0.75, 0.25 ]   t1              [ 0,  3]  [0.25 , 0.75 ]
//   t2              [-1, -1]  [0.5 , 0.5  ]   t2              [-1,  3]  [0    , 1    ]
//   t3              [ 3, -1]  [1   , 0    ]   t3              [ 2,  1]  [0.375, 0.625]
//
// r0.t2 has no expert at all (its weights must not leak), r0.t3 and r1.t2 have a masked slot.
//
// Rank 0 receives the (rank, token) pairs (0,0) (0,1) (1,1) (1,3) -> 4 deduplicated rows.
//   expert 0: (0,0,slot 0) (0,1,slot 1) (1,1,slot 0)   count 3
//   expert 1: (0,1,slot 0) (1,3,slot 1)                count 2
// Rank 1 receives (0,0) (0,3) (1,0) (1,1) (1,2) (1,3) -> 6 deduplicated rows.
//   expert 2 (local 0): (0,0,slot 1) (1,0,slot 0) (1,3,slot 0)            count 3
//   expert 3 (local 1): (0,3,slot 0) (1,0,slot 1) (1,1,slot 1) (1,2,slot 1) count 4
//
// Combine: every row's expert output is w * (e + 1) * base(rank, token) * m[h] with
// m = [1, 2, -1, 0.5] and base = r0: [1, 2, 3, -1], r1: [0.5, 1, -2, 4], so token (r, t) combines to
// S * base * m where S = sum over its unmasked slots of w * (e + 1):
//   r0.t0: 0.5*1 + 0.25*3 = 1.25      -> 1.25 * 1   = 1.25
//   r0.t1: 0.75*2 + 0.25*1 = 1.75     -> 1.75 * 2   = 3.5
//   r0.t2: no expert                  -> 0
//   r0.t3: 1*4 = 4                    -> 4 * -1     = -4
//   r1.t0: 0.5*3 + 0.5*4 = 3.5        -> 3.5 * 0.5  = 1.75
//   r1.t1: 0.25*1 + 0.75*4 = 3.25     -> 3.25 * 1   = 3.25
//   r1.t2: 1*4 = 4                    -> 4 * -2     = -8
//   r1.t3: 0.375*3 + 0.625*2 = 2.375  -> 2.375 * 4  = 9.5
// All of these (and every partial sum) are exact in BF16, so the expected outputs are literal.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "epx/ref/bf16.h"
#include "epx/ref/ep_ref.h"

using namespace epx::ref;

namespace {

EpShape shape(bool expanded, int align = 1) {
  EpShape s;
  s.nRanks = 2;
  s.hidden = 4;
  s.topk = 2;
  s.numExperts = 4;
  s.expertAlignment = align;
  s.expanded = expanded;
  return s;
}

std::vector<RankRouting> routing() {
  RankRouting r0{4, {0, 2, 1, 0, -1, -1, 3, -1}, {0.5f, 0.25f, 0.75f, 0.25f, 0.5f, 0.5f, 1.0f, 0.0f}};
  RankRouting r1{4, {2, 3, 0, 3, -1, 3, 2, 1}, {0.5f, 0.5f, 0.25f, 0.75f, 0.0f, 1.0f, 0.375f, 0.625f}};
  return {r0, r1};
}

const float kBase[2][4] = {{1.f, 2.f, 3.f, -1.f}, {0.5f, 1.f, -2.f, 4.f}};
const float kM[4] = {1.f, 2.f, -1.f, 0.5f};

// Expert outputs of every rank in its dispatch layout (gap rows hold NaN: combine must skip them).
std::vector<std::vector<uint16_t>> expertOutputs(const EpShape& s, const std::vector<RankRouting>& rt,
                                                 const std::vector<RankDispatch>& d) {
  std::vector<std::vector<uint16_t>> out(2);
  for (int r = 0; r < 2; ++r) {
    out[r].assign(size_t(d[r].numRows) * 4, 0xffff);
    for (int row = 0; row < d[r].numRows; ++row) {
      int src = d[r].srcRank[row], t = d[r].srcToken[row];
      if (src < 0) continue;
      float scale = 0.f;  // sum of w * (e + 1) over this row's experts
      for (int k = 0; k < 2; ++k) {
        int64_t e = rt[src].topkIdx[size_t(t) * 2 + k];
        bool mine = s.expanded ? k == d[r].srcSlot[row] : (e >= 0 && e / 2 == r);
        if (mine) scale += rt[src].topkWeights[size_t(t) * 2 + k] * float(e + 1);
      }
      for (int h = 0; h < 4; ++h) out[r][size_t(row) * 4 + h] = floatToBf16(scale * kBase[src][t] * kM[h]);
    }
  }
  return out;
}

std::vector<float> toFloat(const std::vector<uint16_t>& v) {
  std::vector<float> f;
  for (uint16_t b : v) f.push_back(bf16ToFloat(b));
  return f;
}

const std::vector<float> kOut0 = {1.25f, 2.5f, -1.25f, 0.625f,  3.5f, 7.f, -3.5f, 1.75f,
                                  0.f,   0.f,  0.f,    0.f,     -4.f, -8.f, 4.f,  -2.f};
const std::vector<float> kOut1 = {1.75f, 3.5f, -1.75f, 0.875f, 3.25f, 6.5f, -3.25f, 1.625f,
                                  -8.f,  -16.f, 8.f,   -4.f,   9.5f,  19.f, -9.5f,  4.75f};
// bias0 = 0.5 everywhere, bias1 = [1, 0, -1, 0.25] on every token: adds [1.5, 0.5, -0.5, 0.75].
const std::vector<float> kOut0Bias = {2.75f, 3.f,  -1.75f, 1.375f, 5.f,   7.5f, -4.f, 2.5f,
                                      1.5f,  0.5f, -0.5f,  0.75f,  -2.5f, -7.5f, 3.5f, -1.25f};
const std::vector<float> kOut1Bias = {3.25f, 4.f,   -2.25f, 1.625f, 4.75f, 7.f,   -3.75f, 2.375f,
                                      -6.5f, -15.5f, 7.5f,  -3.25f, 11.f,  19.5f, -10.f,  5.5f};
// bias0 only: adds 0.5.
const std::vector<float> kOut0Bias0 = {1.75f, 3.f, -0.75f, 1.125f, 4.f,   7.5f, -3.f, 2.25f,
                                       0.5f,  0.5f, 0.5f,  0.5f,   -3.5f, -7.5f, 4.5f, -1.5f};

std::vector<std::vector<uint16_t>> constBias(float v) {
  return {std::vector<uint16_t>(16, floatToBf16(v)), std::vector<uint16_t>(16, floatToBf16(v))};
}
std::vector<std::vector<uint16_t>> channelBias() {
  std::vector<uint16_t> b;
  for (int t = 0; t < 4; ++t)
    for (float v : {1.f, 0.f, -1.f, 0.25f}) b.push_back(floatToBf16(v));
  return {b, b};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ref_worked_example)

BOOST_AUTO_TEST_CASE(routing_is_valid) {
  auto rt = routing();
  BOOST_TEST(validateRouting(shape(true), rt[0]).empty());
  BOOST_TEST(validateRouting(shape(true), rt[1]).empty());
}

BOOST_AUTO_TEST_CASE(tokens_sent_to) {
  auto rt = routing();
  auto s = shape(false);
  BOOST_TEST(tokensSentTo(s, rt[0], 0) == (std::vector<int32_t>{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(tokensSentTo(s, rt[0], 1) == (std::vector<int32_t>{0, 3}), boost::test_tools::per_element());
  BOOST_TEST(tokensSentTo(s, rt[1], 0) == (std::vector<int32_t>{1, 3}), boost::test_tools::per_element());
  BOOST_TEST(tokensSentTo(s, rt[1], 1) == (std::vector<int32_t>{0, 1, 2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(expanded_alignment_1) {
  auto d = dispatch(shape(true, 1), routing());
  BOOST_TEST_REQUIRE(d.size() == 2u);
  // rank 0: expert 0 rows 0..2, expert 1 rows 3..4.
  BOOST_TEST(d[0].numRows == 5);
  BOOST_TEST(d[0].numTokens == 4);
  BOOST_TEST(d[0].srcRank == (std::vector<int32_t>{0, 0, 1, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcToken == (std::vector<int32_t>{0, 1, 1, 1, 3}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcSlot == (std::vector<int32_t>{0, 1, 0, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].expertCounts == (std::vector<int32_t>{3, 2}), boost::test_tools::per_element());
  BOOST_TEST(d[0].expertOffsets == (std::vector<int32_t>{0, 3, 5}), boost::test_tools::per_element());
  BOOST_TEST(d[0].recvWeights == (std::vector<float>{0.5f, 0.25f, 0.25f, 0.75f, 0.625f}),
             boost::test_tools::per_element());
  // rank 1: expert 2 rows 0..2, expert 3 rows 3..6.
  BOOST_TEST(d[1].numRows == 7);
  BOOST_TEST(d[1].numTokens == 6);
  BOOST_TEST(d[1].srcRank == (std::vector<int32_t>{0, 1, 1, 0, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].srcToken == (std::vector<int32_t>{0, 0, 3, 3, 0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(d[1].srcSlot == (std::vector<int32_t>{1, 0, 0, 0, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertCounts == (std::vector<int32_t>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertOffsets == (std::vector<int32_t>{0, 3, 7}), boost::test_tools::per_element());
  BOOST_TEST(d[1].recvWeights == (std::vector<float>{0.25f, 0.5f, 0.375f, 1.f, 0.5f, 0.75f, 1.f}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(expanded_alignment_4_with_gaps) {
  auto d = dispatch(shape(true, 4), routing());
  // rank 0: expert 0 rows 0..2 + gap 3; expert 1 at 4: rows 4..5 + gaps 6, 7.
  BOOST_TEST(d[0].numRows == 8);
  BOOST_TEST(d[0].numTokens == 4);
  BOOST_TEST(d[0].srcRank == (std::vector<int32_t>{0, 0, 1, -1, 0, 1, -1, -1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcToken == (std::vector<int32_t>{0, 1, 1, -1, 1, 3, -1, -1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcSlot == (std::vector<int32_t>{0, 1, 0, -1, 0, 1, -1, -1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].expertCounts == (std::vector<int32_t>{3, 2}), boost::test_tools::per_element());
  BOOST_TEST(d[0].expertOffsets == (std::vector<int32_t>{0, 4, 8}), boost::test_tools::per_element());
  BOOST_TEST(d[0].recvWeights == (std::vector<float>{0.5f, 0.25f, 0.25f, 0.f, 0.75f, 0.625f, 0.f, 0.f}),
             boost::test_tools::per_element());
  // rank 1: expert 2 rows 0..2 + gap 3; expert 3 rows 4..7 exactly fill its segment.
  BOOST_TEST(d[1].numRows == 8);
  BOOST_TEST(d[1].srcRank == (std::vector<int32_t>{0, 1, 1, -1, 0, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].srcToken == (std::vector<int32_t>{0, 0, 3, -1, 3, 0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(d[1].srcSlot == (std::vector<int32_t>{1, 0, 0, -1, 0, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertCounts == (std::vector<int32_t>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertOffsets == (std::vector<int32_t>{0, 4, 8}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(expanded_alignment_2) {
  auto d = dispatch(shape(true, 2), routing());
  // rank 0: 3 -> 4 rows, 2 -> 2 rows; rank 1: 3 -> 4, 4 -> 4.
  BOOST_TEST(d[0].expertOffsets == (std::vector<int32_t>{0, 4, 6}), boost::test_tools::per_element());
  BOOST_TEST(d[0].numRows == 6);
  BOOST_TEST(d[0].srcRank == (std::vector<int32_t>{0, 0, 1, -1, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertOffsets == (std::vector<int32_t>{0, 4, 8}), boost::test_tools::per_element());
  BOOST_TEST(d[1].numRows == 8);
}

BOOST_AUTO_TEST_CASE(deduplicated) {
  auto d = dispatch(shape(false), routing());
  BOOST_TEST(d[0].numRows == 4);
  BOOST_TEST(d[0].numTokens == 4);
  BOOST_TEST(d[0].srcRank == (std::vector<int32_t>{0, 0, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcToken == (std::vector<int32_t>{0, 1, 1, 3}), boost::test_tools::per_element());
  BOOST_TEST(d[0].srcSlot == (std::vector<int32_t>{-1, -1, -1, -1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].recvTopkIdx == (std::vector<int32_t>{0, -1, 1, 0, 0, -1, -1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[0].recvWeights == (std::vector<float>{0.5f, 0.f, 0.75f, 0.25f, 0.25f, 0.f, 0.f, 0.625f}),
             boost::test_tools::per_element());
  BOOST_TEST(d[0].expertCounts == (std::vector<int32_t>{3, 2}), boost::test_tools::per_element());
  BOOST_TEST(d[0].expertOffsets == (std::vector<int32_t>{0, 3, 5}), boost::test_tools::per_element());

  BOOST_TEST(d[1].numRows == 6);
  BOOST_TEST(d[1].numTokens == 6);
  BOOST_TEST(d[1].srcRank == (std::vector<int32_t>{0, 0, 1, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(d[1].srcToken == (std::vector<int32_t>{0, 3, 0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(d[1].recvTopkIdx == (std::vector<int32_t>{-1, 0, 1, -1, 0, 1, -1, 1, -1, 1, 0, -1}),
             boost::test_tools::per_element());
  BOOST_TEST(d[1].recvWeights ==
                 (std::vector<float>{0.f, 0.25f, 1.f, 0.f, 0.5f, 0.5f, 0.f, 0.75f, 0.f, 1.f, 0.375f, 0.f}),
             boost::test_tools::per_element());
  BOOST_TEST(d[1].expertCounts == (std::vector<int32_t>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(d[1].expertOffsets == (std::vector<int32_t>{0, 3, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(combine_hand_computed) {
  auto rt = routing();
  for (bool expanded : {true, false})
    for (int align : {1, 2, 4}) {
      if (!expanded && align != 1) continue;
      BOOST_TEST_CONTEXT("expanded=" << expanded << " align=" << align) {
        auto s = shape(expanded, align);
        auto d = dispatch(s, rt);
        auto eo = expertOutputs(s, rt, d);
        auto out = combine(s, rt, d, eo, {}, {});
        BOOST_TEST_REQUIRE(out.size() == 2u);
        BOOST_TEST(toFloat(out[0]) == kOut0, boost::test_tools::per_element());
        BOOST_TEST(toFloat(out[1]) == kOut1, boost::test_tools::per_element());

        auto outB = combine(s, rt, d, eo, constBias(0.5f), channelBias());
        BOOST_TEST(toFloat(outB[0]) == kOut0Bias, boost::test_tools::per_element());
        BOOST_TEST(toFloat(outB[1]) == kOut1Bias, boost::test_tools::per_element());

        auto outB0 = combine(s, rt, d, eo, constBias(0.5f), {});
        BOOST_TEST(toFloat(outB0[0]) == kOut0Bias0, boost::test_tools::per_element());
      }
    }
}

BOOST_AUTO_TEST_CASE(combined_topk_weights) {
  auto rt = routing();
  // Masked slots give 0 (r0.t2 had weights 0.5/0.5 on masked slots: they must not come back).
  const std::vector<float> w0 = {0.5f, 0.25f, 0.75f, 0.25f, 0.f, 0.f, 1.f, 0.f};
  const std::vector<float> w1 = {0.5f, 0.5f, 0.25f, 0.75f, 0.f, 1.f, 0.375f, 0.625f};
  for (bool expanded : {true, false}) {
    BOOST_TEST_CONTEXT("expanded=" << expanded) {
      auto s = shape(expanded, expanded ? 4 : 1);
      auto d = dispatch(s, rt);
      auto w = combineWeights(s, rt, d, {d[0].recvWeights, d[1].recvWeights});
      BOOST_TEST(w[0] == w0, boost::test_tools::per_element());
      BOOST_TEST(w[1] == w1, boost::test_tools::per_element());
    }
  }
}

// The wire format: each destination rank sums its rows in FP32 and sends BF16; the source sums
// the BF16 partials in FP32 and rounds once more. Token r0.t0 with ids [0, 1, 2] (2 on rank 1):
// rank 0's partial 1 + 2^-8 rounds to 1.0 (tie to even), + rank 1's 2^-8 = 1 + 2^-8 -> 1.0.
// An FP32 sum of all three would give 1 + 2^-7 = 1.0078125 (exact in BF16).
BOOST_AUTO_TEST_CASE(combine_rounds_partials_to_bf16_per_rank) {
  EpShape s;
  s.nRanks = 2;
  s.hidden = 1;
  s.topk = 3;
  s.numExperts = 4;
  std::vector<RankRouting> rt = {RankRouting{1, {0, 1, 2}, {1.f, 1.f, 1.f}}, RankRouting{0, {}, {}}};
  auto d = dispatch(s, rt);
  BOOST_TEST_REQUIRE(d[0].numRows == 2);
  BOOST_TEST_REQUIRE(d[1].numRows == 1);
  std::vector<std::vector<uint16_t>> eo = {{floatToBf16(1.f), floatToBf16(0x1p-8f)}, {floatToBf16(0x1p-8f)}};
  auto out = combine(s, rt, d, eo, {}, {});
  BOOST_TEST(bf16ToFloat(out[0][0]) == 1.0f);
  BOOST_TEST(out[1].empty());
}

BOOST_AUTO_TEST_SUITE_END()

// ncclEpCombineFp32: contributions 256 and 1 on one rank and -256 on another sum to exactly 1
// (BF16 partials give 0: 257 rounds to 256 on the wire).
BOOST_AUTO_TEST_CASE(fp32_partials_keep_small_contributions) {
  epx::ref::EpShape s;
  s.nRanks = 2;
  s.hidden = 8;
  s.topk = 3;
  s.numExperts = 4;  // experts 0, 1 on rank 0; 2, 3 on rank 1
  std::vector<epx::ref::RankRouting> routing(2);
  routing[0].numTokens = 1;
  routing[0].topkIdx = {0, 1, 2};
  routing[0].topkWeights = {1.f, 1.f, 1.f};
  routing[1].numTokens = 0;
  const auto disp = epx::ref::dispatch(s, routing);
  std::vector<std::vector<uint16_t>> out(2);
  const uint16_t b256 = epx::ref::floatToBf16(256.f), b1 = epx::ref::floatToBf16(1.f), bm256 = epx::ref::floatToBf16(-256.f);
  out[0].assign(size_t(disp[0].numRows) * 8, 0);
  out[1].assign(size_t(disp[1].numRows) * 8, 0);
  BOOST_REQUIRE(disp[0].numRows == 2);  // expert 0 then expert 1
  BOOST_REQUIRE(disp[1].numRows == 1);
  for (int h = 0; h < 8; ++h) {
    out[0][h] = b256;
    out[0][8 + h] = b1;
    out[1][h] = bm256;
  }
  const auto bf16 = epx::ref::combine(s, routing, disp, out, {}, {});
  BOOST_TEST(epx::ref::bf16ToFloat(bf16[0][0]) == 0.f);
  s.fp32Partials = true;
  const auto fp32 = epx::ref::combine(s, routing, disp, out, {}, {});
  for (int h = 0; h < 8; ++h) BOOST_TEST(epx::ref::bf16ToFloat(fp32[0][h]) == 1.f);
}
