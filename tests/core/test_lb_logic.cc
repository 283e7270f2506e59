// Expert load balancing's config, plan and agreement checks (core/coll_config.h): defaults, every
// bound, and the reasons in words.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "core/coll_config.h"

using namespace epx;

BOOST_AUTO_TEST_SUITE(lb_logic)

BOOST_AUTO_TEST_CASE(config_defaults_and_bounds) {
  LbConfig c;
  BOOST_TEST(normalizeLbConfig(LbConfigRequest{}, &c) == "");
  BOOST_TEST(c.numCtas == kLbDefaultCtas);
  BOOST_TEST(c.timeoutMs == kCollDefaultTimeoutMs);
  BOOST_TEST(c.chunkBytes == kLbDefaultChunkBytes);
  LbConfigRequest r;
  r.numCtas = 33;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.numCtas = 32;
  r.timeoutMs = 0;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.timeoutMs = 5;
  r.chunkBytes = 1000;
  BOOST_TEST(normalizeLbConfig(r, &c) != "");
  r.chunkBytes = uint64_t(1) << 20;
  BOOST_TEST(normalizeLbConfig(r, &c) == "");
  BOOST_TEST(c.numCtas == 32);
  BOOST_TEST(c.chunkBytes == (uint64_t(1) << 20));
}

BOOST_AUTO_TEST_CASE(plan_checks_name_the_field) {
  LbPlan p;
  p.numExperts = 256;
  p.numSlots = 2;
  p.weightRowBytes = {44040192, 10752};  // one DeepSeek-V3 expert in FP8, and its scales
  p.gradRowElems = {44040192};
  BOOST_TEST(checkLbPlan(p, 8) == "");
  BOOST_TEST(checkLbPlan(p, 3) ==
             "numExperts 256 is not a positive multiple of the 3 ranks (every rank owns an equal share of the "
             "original experts)");
  LbPlan q = p;
  q.numSlots = 0;
  BOOST_TEST(checkLbPlan(q, 8) == "numSlots 0 is not in 1 .. 256");
  q = p;
  q.weightRowBytes[1] = 10753;
  BOOST_TEST(checkLbPlan(q, 8) == "weight tensor 1 has 10753 bytes per expert, not a positive multiple of 16");
  q = p;
  q.gradRowElems[0] = 6;
  BOOST_TEST(checkLbPlan(q, 8) == "gradient tensor 0 has 6 FP32 elements per expert, not a positive multiple of 4");
  q = p;
  q.weightRowBytes.assign(9, 16);
  BOOST_TEST(checkLbPlan(q, 8) == "numWeightTensors 9 is more than 8");
  q = p;
  q.weightRowBytes.clear();
  q.gradRowElems.clear();
  BOOST_TEST(checkLbPlan(q, 8) == "the plan has neither weight nor gradient tensors");
  q.gradRowElems = {4};
  BOOST_TEST(checkLbPlan(q, 8) == "");  // gradients only
}

BOOST_AUTO_TEST_CASE(agreement_names_the_first_difference) {
  LbPlan p;
  p.numExperts = 16;
  p.numSlots = 1;
  p.weightRowBytes = {64};
  const LbConfig c;
  std::vector<LbAgreed> all(3, makeLbAgreed(p, c, 1));
  BOOST_TEST(checkLbAgreement(all) == "");
  LbPlan other = p;
  other.weightRowBytes = {128};
  all[2] = makeLbAgreed(other, c, 1);
  BOOST_TEST(checkLbAgreement(all) ==
             "rank 2 has weightRowBytes[0] 128 but rank 0 has 64; every rank must create the load-balancing "
             "object with the same plan and config");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(engram_logic)

BOOST_AUTO_TEST_CASE(plan_checks_name_the_field) {
  EngramPlan p;
  p.numLayers = 4;
  p.numRows = 1 << 20;
  p.rowBytes = 1024;
  p.maxTokens = 4096;
  p.entriesPerToken = 16;
  BOOST_TEST(checkEngramPlan(p, 8) == "");
  EngramPlan q = p;
  q.numLayers = 65;
  BOOST_TEST(checkEngramPlan(q, 8) == "numLayers 65 is not in 1 .. 64");
  q = p;
  q.numRows = 1001;
  BOOST_TEST(checkEngramPlan(q, 8) ==
             "numRows 1001 is not a positive multiple of the 8 ranks (every rank holds an equal shard of each table)");
  q = p;
  q.rowBytes = 1000;
  BOOST_TEST(checkEngramPlan(q, 8) == "rowBytes 1000 is not a positive multiple of 16");
  q = p;
  q.maxTokens = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "maxTokens 0 must be at least 1");
  q = p;
  q.entriesPerToken = 0;
  BOOST_TEST(checkEngramPlan(q, 8) == "entriesPerToken 0 must be at least 1");
}

BOOST_AUTO_TEST_SUITE_END()
