// Edge cases of routing: a rank with zero tokens, no tokens at all, masked slots and fully masked
// tokens, every token to one expert, ranks that receive nothing, tokens at the maximum, and the
// optional outputs left NULL.
#include <boost/test/unit_test.hpp>

#include "ep_harness.h"

using namespace epx::test;

namespace {
template <class F>
void forLayoutsAndModes(F&& f) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
      CaseConfig c;
      c.g = {256, 2048, 8, 16};
      c.layout = layout;
      c.mode = mode;
      if (layout == ncclEpLayoutExpanded) {
        c.alignment = mode == ncclEpModeExact ? 1 : 128;
        c.zeroGaps = 1;
      }
      c.numBias = 1;
      c.combineWeights = true;
      BOOST_TEST_CONTEXT(c.describe()) { f(c); }
    }
}
}  // namespace

BOOST_AUTO_TEST_SUITE(edge)

BOOST_AUTO_TEST_CASE(rank_with_zero_tokens) {
  forLayoutsAndModes([](const CaseConfig& c) {
    std::vector<int> t = allTokens(200);
    t[nRanks() > 1 ? 1 : 0] = 0;
    runCase(c, t);
    t = allTokens(0);
    t[0] = 256;
    runCase(c, t);
  });
}

BOOST_AUTO_TEST_CASE(no_tokens_anywhere) {
  forLayoutsAndModes([](const CaseConfig& c) { runCase(c, allTokens(0)); });
}

BOOST_AUTO_TEST_CASE(masked_slots_and_tokens_without_experts) {
  forLayoutsAndModes([](const CaseConfig& c) {
    RouteSpec rs{RouteKind::Uniform, 0.4};
    rs.fullyMaskedToken = true;
    runCase(c, allTokens(256), rs);
    runCase(c, allTokens(64), RouteSpec{RouteKind::Uniform, 0.9});
  });
}

BOOST_AUTO_TEST_CASE(every_token_to_one_expert) {
  forLayoutsAndModes([](const CaseConfig& c) {
    RouteSpec rs{RouteKind::SingleExpert};
    rs.singleExpert = c.g.numExperts - 1;  // on the last rank
    runCase(c, allTokens(c.g.maxTokens), rs);
    rs.singleExpert = 0;  // on rank 0
    runCase(c, allTokens(c.g.maxTokens), rs);
  });
}

// Every token goes only to the last rank's experts: the other ranks receive nothing.
BOOST_AUTO_TEST_CASE(ranks_that_receive_nothing) {
  forLayoutsAndModes([](const CaseConfig& c) { runCase(c, allTokens(200), RouteSpec{RouteKind::RankSkewed}); });
}

BOOST_AUTO_TEST_CASE(tokens_at_max_per_rank) {
  forLayoutsAndModes([](const CaseConfig& c) { runCase(c, allTokens(c.g.maxTokens)); });
}

BOOST_AUTO_TEST_CASE(top1_of_256_experts) {
  for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
    CaseConfig c;
    c.g = {512, 2048, 1, 256};
    c.mode = mode;
    c.alignment = 128;
    c.combineWeights = true;
    BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(512)); }
  }
}

// Exact mode with every optional output NULL: no srcInfo/counts/offsets/numRecvRows, no weights,
// no shape fields.
BOOST_AUTO_TEST_CASE(optional_outputs_null) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated}) {
    CaseConfig c;
    c.g = {256, 2048, 8, 16};
    c.layout = layout;
    c.optionalOutputs = false;
    c.dispatchWeights = false;
    c.shapeChecks = false;
    BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(256), RouteSpec{RouteKind::Uniform, 0.1}); }
  }
}

BOOST_AUTO_TEST_SUITE_END()
