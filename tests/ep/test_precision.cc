// Combine precision (ep.h ncclEpCombinePrecision_t): the FP32 option sums every contribution once
// in FP32, the default rounds each rank's partial sum to BF16 for the wire. Compared with the
// reference in the matching mode, on fresh random data, and on the cancellation case of the
// documentation (256 and 1 on one rank, -256 on another: FP32 gives 1, BF16 partials give 0).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "ep_harness.h"

using namespace epx::test;

namespace {

constexpr uint16_t kBf16Plus256 = 0x4380, kBf16Minus256 = 0xC380, kBf16One = 0x3F80, kBf16Zero = 0x0000;

// Every token of rank s goes to the two experts of rank (s + 1) % R in slots 0 and 1 and to an
// expert of rank s itself in slot 2; the other slots are masked. Experts: 2 per rank.
std::vector<epx::ref::RankRouting> cancellationRouting(int R, int T, int K) {
  std::vector<epx::ref::RankRouting> rt(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) {
    const int d = (s + 1) % R;
    auto& r = rt[size_t(s)];
    r.numTokens = T;
    r.topkIdx.assign(size_t(T) * K, -1);
    r.topkWeights.assign(size_t(T) * K, 0.25f);
    for (int t = 0; t < T; ++t) {
      r.topkIdx[size_t(t) * K + 0] = 2 * d;
      r.topkIdx[size_t(t) * K + 1] = 2 * d + 1;
      r.topkIdx[size_t(t) * K + 2] = 2 * s;
    }
  }
  return rt;
}

// Expanded layout: every received row's expert output by its top-k slot: 256, 1, -256 (every
// channel).
void setCancellationOutputs(EpSession& s, int R, int H) {
  for (int d = 0; d < R; ++d) {
    const auto& e = s.expect[size_t(d)];
    for (int row = 0; row < e.numRows; ++row) {
      if (e.srcRank[size_t(row)] < 0) continue;
      const int slot = e.srcSlot[size_t(row)];
      const uint16_t v = slot == 0 ? kBf16Plus256 : slot == 1 ? kBf16One : kBf16Minus256;
      std::fill_n(&s.inputs[size_t(d)].expertOut[size_t(row) * H], H, v);
    }
  }
}

// One token per rank (onlyRank0: rank 0 alone has one, the others none): rank s sends it to the
// two experts of rank s itself (slots 0 and 1) and to an expert of rank (s - 1) mod R (slot 2), so
// every result needs exactly one network contribution (at 8 fake nodes rank 0's comes from rank 7).
// Experts: 2 per rank; K = 4, slot 3 masked.
std::vector<epx::ref::RankRouting> oneRemoteRouting(int R, int K, bool onlyRank0) {
  std::vector<epx::ref::RankRouting> rt(static_cast<size_t>(R));
  for (int s = 0; s < R; ++s) {
    auto& r = rt[size_t(s)];
    r.numTokens = onlyRank0 && s != 0 ? 0 : 1;
    if (r.numTokens == 0) continue;
    r.topkIdx.assign(size_t(K), -1);
    r.topkWeights.assign(size_t(K), 0.25f);
    r.topkIdx[0] = 2 * s;
    r.topkIdx[1] = 2 * s + 1;
    r.topkIdx[2] = 2 * ((s + R - 1) % R);
  }
  return rt;
}

// Repeats of the one-token case (EPX_PRECISION_REPEATS, default 64; quick 16).
int oneTokenRepeats() {
  if (const char* v = std::getenv("EPX_PRECISION_REPEATS"); v && std::atoi(v) > 0) return std::atoi(v);
  return quick() ? 16 : 64;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(precision)

// The cancellation case with one token per rank, repeated, in both layouts and both precisions of
// one exactCombine group, with a fresh group every fourth repeat (its first combine: no earlier
// op between the ranks), every other repeat with rank 0's token alone, groups of hidden 2048 or 7168
// and maxTokensPerRank 1 or 128 in turn: every combine must sum every contribution, every time.
BOOST_AUTO_TEST_CASE(one_token_every_contribution_repeated, *boost::unit_test::precondition(needsPeers)) {
  const int R = nRanks(), K = 4;
  const int repeats = oneTokenRepeats();
  int failures = 0, ran = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const int H = (rep / 4) % 2 ? 7168 : 2048, maxT = (rep / 8) % 2 ? 128 : 1;
    for (int variant = 0; variant < 3; ++variant) {
      CaseConfig c;
      c.g = {maxT, H, K, 2 * R};
      c.g.exactCombine = 1;
      c.layout = variant == 2 ? ncclEpLayoutDeduplicated : ncclEpLayoutExpanded;
      c.mode = variant == 1 ? ncclEpModeExact : ncclEpModeCapacity;
      c.combineFp32 = variant == 0;
      if (variant == 0 && rep % 4 == 0) evictGroup(c.g);  // this repeat starts on a fresh group
      EpSession s(c);
      const bool onlyRank0 = rep % 2 == 1;
      s.setRouting(oneRemoteRouting(R, K, onlyRank0));
      Rng rng(nextSeed());
      s.randomData(rng);
      if (c.layout == ncclEpLayoutExpanded) setCancellationOutputs(s, R, H);
      s.runAll();
      ++ran;
      const std::string what = c.describe() + " repeat " + std::to_string(rep);
      if (!s.expectAllCorrect(what)) ++failures;
      if (c.layout != ncclEpLayoutExpanded) continue;
      const uint16_t want = c.combineFp32 ? kBf16One : kBf16Zero;
      for (int r : localRanks()) {
        if (onlyRank0 && r != 0) continue;
        const auto& out = s.results[size_t(r)].combOut;
        BOOST_TEST_REQUIRE(out.size() == size_t(H));
        const size_t bad = size_t(std::count_if(out.begin(), out.end(), [&](uint16_t v) { return v != want; }));
        BOOST_TEST(bad == 0u, what << ", rank " << r << ": " << bad << " of " << H << " outputs are not "
                                   << (c.combineFp32 ? "1" : "0") << " (first: bits 0x" << std::hex << out[0]
                                   << std::dec << "; 0x4380 = 256: rank " << (r + R - 1) % R
                                   << "'s -256 missing)");
      }
    }
  }
  BOOST_TEST_MESSAGE("one token, every contribution: " << ran << " combines, " << failures << " failed");
}

// Expanded layout (where partial sums are formed), both precisions in one exactCombine group.
BOOST_AUTO_TEST_CASE(cancellation_256_plus_1_minus_256, *boost::unit_test::precondition(needsPeers)) {
  const int R = nRanks(), T = 64, K = 4, H = 2048;
  for (bool fp32 : {true, false}) {
    CaseConfig c;
    c.g = {T, H, K, 2 * R};
    c.g.exactCombine = 1;
    c.layout = ncclEpLayoutExpanded;
    c.mode = fp32 ? ncclEpModeCapacity : ncclEpModeExact;
    c.combineFp32 = fp32;
    BOOST_TEST_CONTEXT(c.describe()) {
      EpSession s(c);
      s.setRouting(cancellationRouting(R, T, K));
      Rng rng(nextSeed());
      s.randomData(rng);
      setCancellationOutputs(s, R, H);
      s.runAll();
      s.expectAllCorrect(c.describe());  // against the reference in the same precision
      const uint16_t want = fp32 ? kBf16One : kBf16Zero;
      for (int r : localRanks()) {
        const auto& out = s.results[size_t(r)].combOut;
        BOOST_TEST_REQUIRE(out.size() == size_t(T) * H);
        const size_t bad = size_t(std::count_if(out.begin(), out.end(), [&](uint16_t v) { return v != want; }));
        BOOST_TEST(bad == 0u, "rank " << r << ": " << bad << " of " << out.size() << " outputs differ from "
                                      << (fp32 ? "1 (FP32 combine)" : "0 (BF16 partials: 257 rounds to 256)"));
      }
    }
  }
}

// Random data, both layouts and modes, FP32 combine against the reference with FP32 partials.
BOOST_AUTO_TEST_CASE(fp32_combine_random) {
  int i = 0;
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
      CaseConfig c;
      c.g = {256, 4096, 8, 32};
      c.g.exactCombine = 1;
      c.layout = layout;
      c.mode = mode;
      c.combineFp32 = true;
      c.numBias = i % 3;
      c.combineWeights = i % 2;
      if (layout == ncclEpLayoutExpanded) c.alignment = i % 2 ? 64 : 1;
      Rng rng(nextSeed());
      BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(0, 256, rng), RouteSpec{RouteKind::Uniform, 0.15}, 2); }
      ++i;
    }
}

BOOST_AUTO_TEST_SUITE_END()
