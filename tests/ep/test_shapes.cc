// Dispatch + combine against the CPU reference at the target shapes: hidden 2048/4096/7168/8192,
// top-k 1/6/8, 16 and 256 experts, alignment 1 and 128, BF16 and FP8, the DeepSeek-V3 shape at the
// maximum token count, and SM budgets; then both ends of every documented range of ep.h: top-k 31
// and 32 (both layouts and modes, source info checked), hidden 8 and 65536 (BF16; 128 and 65536
// FP8), 1024 experts with alignment 1024, tokens 0 and maxTokensPerRank = 65536. Every output is
// poisoned first.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "ep_harness.h"

using namespace epx::test;

BOOST_AUTO_TEST_SUITE(shapes)

BOOST_AUTO_TEST_CASE(h2048_top8_e16_expanded_exact) {
  CaseConfig c;
  c.g = {512, 2048, 8, 16};
  c.numBias = 1;
  Rng rng(nextSeed());
  runCase(c, randomTokens(256, 512, rng));
}

BOOST_AUTO_TEST_CASE(h4096_top6_e256_align128_zero_gaps) {
  CaseConfig c;
  c.g = {256, 4096, 6, 256};
  c.alignment = 128;
  c.zeroGaps = 1;
  c.combineWeights = true;
  Rng rng(nextSeed());
  runCase(c, randomTokens(128, 256, rng));
}

// DeepSeek-V3 (the benchmark shape): 4096 tokens per rank (= maxTokensPerRank), hidden 7168,
// top-8 of 256 experts. Quick mode (EPX_TEST_QUICK=1): 1024 tokens per rank (= maxTokensPerRank):
// every process builds every rank's data and reference, which at 8 ranks x 4096 tokens is ~4 GB
// and many seconds of host work per process.
BOOST_AUTO_TEST_CASE(h7168_top8_e256_deepseek_at_max_tokens) {
  const int T = quick() ? 1024 : 4096;
  CaseConfig c;
  c.g = {T, 7168, 8, 256};
  c.numBias = 2;
  c.combineWeights = true;
  runCase(c, allTokens(T));
}

BOOST_AUTO_TEST_CASE(h7168_top8_e256_fp8_capacity_align128) {
  CaseConfig c;
  c.g = {1024, 7168, 8, 256, 1};
  c.fp8 = true;
  c.mode = ncclEpModeCapacity;
  c.alignment = 128;
  c.zeroGaps = 1;
  Rng rng(nextSeed());
  runCase(c, randomTokens(512, 1024, rng));
}

BOOST_AUTO_TEST_CASE(h7168_top8_e256_dedup_capacity) {
  CaseConfig c;
  c.g = {1024, 7168, 8, 256};
  c.layout = ncclEpLayoutDeduplicated;
  c.mode = ncclEpModeCapacity;
  c.combineWeights = true;
  c.numBias = 1;
  Rng rng(nextSeed());
  runCase(c, randomTokens(512, 1024, rng));
}

BOOST_AUTO_TEST_CASE(h8192_top1_e16_dedup_capacity) {
  CaseConfig c;
  c.g = {256, 8192, 1, 16};
  c.layout = ncclEpLayoutDeduplicated;
  c.mode = ncclEpModeCapacity;
  c.combineWeights = true;
  Rng rng(nextSeed());
  runCase(c, randomTokens(1, 256, rng));
}

BOOST_AUTO_TEST_CASE(h8192_top8_e256_fp8_dedup_exact_ids32) {
  CaseConfig c;
  c.g = {256, 8192, 8, 256, 1};
  c.fp8 = true;
  c.layout = ncclEpLayoutDeduplicated;
  c.int64Ids = false;
  c.numBias = 2;
  Rng rng(nextSeed());
  runCase(c, randomTokens(128, 256, rng));
}

BOOST_AUTO_TEST_CASE(h8192_top1_e256_expanded_align128) {
  CaseConfig c;
  c.g = {256, 8192, 1, 256};
  c.alignment = 128;
  c.zeroGaps = 1;
  c.combineWeights = true;
  Rng rng(nextSeed());
  runCase(c, randomTokens(128, 256, rng));
}

BOOST_AUTO_TEST_CASE(h4096_top6_e16_fp8_expanded_exact) {
  CaseConfig c;
  c.g = {512, 4096, 6, 16, 1};
  c.fp8 = true;
  c.int64Ids = false;
  c.combineWeights = true;
  Rng rng(nextSeed());
  runCase(c, randomTokens(256, 512, rng));
}

// Few CTAs per kernel (each CTA loops over many rows) and the bench's 24-SM budget.
BOOST_AUTO_TEST_CASE(sm_budgets) {
  for (int sms : {4, 24}) {
    for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated}) {
      CaseConfig c;
      c.g = {512, 2048, 8, 16, 0, sms};
      c.layout = layout;
      c.mode = ncclEpModeCapacity;
      c.numBias = 1;
      c.combineWeights = true;
      runCase(c, allTokens(512));
    }
  }
}

// ---- both ends of the documented ranges ------------------------------------------------------

namespace {
// `want` experts rounded down to a multiple of the rank count (at least one per rank).
int expertsFor(int want) { return std::max(nRanks(), want / nRanks() * nRanks()); }
}  // namespace

// Top-k 31 and 32: every lane of a warp holds a slot, so nothing else may be written by lanes K and
// K + 1 (the received rows' source info was, before). Both layouts and modes, masked slots,
// optional outputs (recvSrcInfo) on; one dedup case in the window (zero copy) and one FP8.
BOOST_AUTO_TEST_CASE(topk_31_and_32) {
  for (int K : {32, 31})
    for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
      for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
        CaseConfig c;
        c.g = {128, 1024, K, expertsFor(64), 1};
        c.layout = layout;
        c.mode = mode;
        c.fp8 = mode == ncclEpModeCapacity && K == 31;
        c.int64Ids = K == 32;
        if (layout == ncclEpLayoutExpanded) {
          c.alignment = mode == ncclEpModeExact ? 1 : 32;
          c.zeroGaps = 1;
        } else {
          c.zeroCopy = mode == ncclEpModeCapacity ? 2 : 0;
        }
        c.numBias = 1;
        c.combineWeights = true;
        Rng rng(nextSeed());
        BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(64, 128, rng), RouteSpec{RouteKind::Uniform, 0.2}); }
      }
}

// Hidden at both ends: 8 (one 16-byte vector per row) and 65536, BF16; FP8 at 128 and 65536.
BOOST_AUTO_TEST_CASE(hidden_8_and_65536) {
  struct H {
    int hidden, maxT;
    bool fp8;
  };
  for (const H h : {H{8, 512, false}, H{65536, 16, false}, H{128, 256, true}, H{65536, 16, true}})
    for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated}) {
      CaseConfig c;
      c.g = {h.maxT, h.hidden, 8, expertsFor(16), h.fp8 ? 1 : 0};
      c.fp8 = h.fp8;
      c.layout = layout;
      c.mode = layout == ncclEpLayoutExpanded ? ncclEpModeExact : ncclEpModeCapacity;
      c.numBias = 2;
      c.combineWeights = true;
      BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(h.maxT), RouteSpec{RouteKind::Uniform, 0.1}); }
    }
}

// The most experts (1024, rounded to the rank count) with the largest alignment: up to 1023 gap
// rows per expert (about a million rows, hence the small hidden); also top-k 32 of 1024.
BOOST_AUTO_TEST_CASE(experts_1024_alignment_1024) {
  for (auto mode : {ncclEpModeExact, ncclEpModeCapacity})
    for (int K : {8, 32}) {
      CaseConfig c;
      c.g = {64, 16, K, expertsFor(1024)};
      c.mode = mode;
      c.alignment = 1024;
      c.zeroGaps = mode == ncclEpModeCapacity;
      c.combineWeights = true;
      BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(64)); }
    }
  CaseConfig d;  // deduplicated at 1024 experts
  d.g = {64, 16, 32, expertsFor(1024)};
  d.layout = ncclEpLayoutDeduplicated;
  d.mode = ncclEpModeCapacity;
  runCase(d, allTokens(64));
}

// maxTokensPerRank at its documented maximum (65536), every rank sending all of them, then only
// rank 0 (the others 0), then no rank at all.
BOOST_AUTO_TEST_CASE(tokens_0_and_65536) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated}) {
    CaseConfig c;
    c.g = {65536, 8, 4, expertsFor(16)};
    c.layout = layout;
    c.mode = ncclEpModeCapacity;
    c.combineWeights = true;
    BOOST_TEST_CONTEXT(c.describe()) {
      runCase(c, allTokens(65536), RouteSpec{RouteKind::Uniform, 0.1});
      std::vector<int> t = allTokens(0);
      t[0] = 65536;
      runCase(c, t);
      runCase(c, allTokens(0));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
