// Dispatch + combine against the CPU reference at the shapes: hidden 2048/4096/7168/8192,
// top-k 1/6/8, 16 and 256 experts, alignment 1 and 128, BF16 and FP8, the DeepSeek-V3 shape at the
// maximum token count, and SM budgets. Every output is poisoned first.
#include <boost/test/unit_test.hpp>

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

BOOST_AUTO_TEST_SUITE_END()
