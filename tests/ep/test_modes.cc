// Layouts x sizing modes x dtypes x id types, combine biases and combined weights, cached
// dispatch, re-layout of one handle.
#include <boost/test/unit_test.hpp>

#include "ep_harness.h"

using namespace epx::test;

BOOST_AUTO_TEST_SUITE(modes)

// Every combination of layout, mode, dtype and id type; alignment, biases and combined weights
// vary with the combination.
BOOST_AUTO_TEST_CASE(layout_mode_dtype_ids_matrix) {
  int i = 0;
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (auto mode : {ncclEpModeExact, ncclEpModeCapacity})
      for (bool fp8 : {false, true})
        for (bool ids64 : {false, true}) {
          CaseConfig c;
          c.g = {256, 2048, 8, 16, fp8 ? 1 : 0};
          c.layout = layout;
          c.mode = mode;
          c.fp8 = fp8;
          c.int64Ids = ids64;
          if (layout == ncclEpLayoutExpanded) {
            c.alignment = (i / 2) % 2 ? 128 : 1;
            c.zeroGaps = i % 2;
          }
          c.numBias = i % 3;
          c.combineWeights = (i / 3) % 2;
          Rng rng(nextSeed());
          BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(1, 256, rng), RouteSpec{RouteKind::Uniform, 0.1}); }
          ++i;
        }
}

BOOST_AUTO_TEST_CASE(biases_and_combined_weights) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (int nb : {0, 1, 2})
      for (bool cw : {false, true}) {
        CaseConfig c;
        c.g = {128, 4096, 6, 16};
        c.layout = layout;
        c.mode = nb == 1 ? ncclEpModeCapacity : ncclEpModeExact;
        c.numBias = nb;
        c.combineWeights = cw;
        BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(128), RouteSpec{RouteKind::Uniform, 0.2}); }
      }
}

// Cached dispatch: one layout, then dispatch + combine three times on the same handle with new
// tokens and expert outputs each time.
BOOST_AUTO_TEST_CASE(cached_dispatch) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
      CaseConfig c;
      c.g = {256, 2048, 8, 16, 1};
      c.layout = layout;
      c.mode = mode;
      c.fp8 = mode == ncclEpModeCapacity;
      c.alignment = layout == ncclEpLayoutExpanded ? 128 : 1;
      c.zeroGaps = 1;
      c.numBias = 1;
      c.combineWeights = true;
      Rng rng(nextSeed());
      BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(100, 256, rng), RouteSpec{}, 3); }
    }
}

// One handle, several layouts with new routing and token counts (smaller and larger), each
// followed by dispatch + combine.
BOOST_AUTO_TEST_CASE(relayout_same_handle) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated})
    for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
      CaseConfig c;
      c.g = {256, 2048, 8, 16};
      c.layout = layout;
      c.mode = mode;
      c.alignment = layout == ncclEpLayoutExpanded ? 4 : 1;
      c.zeroGaps = 1;
      c.numBias = 2;
      c.combineWeights = true;
      const uint64_t seed = nextSeed();
      Rng rng(seed);
      EpSession s(c);
      for (int round = 0; round < 4; ++round) {
        std::vector<int> tokens = round == 2 ? allTokens(256) : randomTokens(0, 256, rng);
        s.randomRouting(tokens, RouteSpec{RouteKind::Uniform, round * 0.15}, rng);
        s.randomData(rng);
        s.runAll();
        s.expectAllCorrect(c.describe() + " round " + std::to_string(round) + " seed " + std::to_string(seed));
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()
