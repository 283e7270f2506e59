// Long runs and several groups: 1000 back-to-back dispatch/combine iterations without drift
// (checked at iterations in between and at the end), and two groups on one communicator used
// alternately.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "ep_harness.h"

using namespace epx::test;

namespace {

// `iters` iterations with no host synchronization except at the checkpoints. Capacity mode runs
// layout + dispatch + combine every iteration; exact mode lays out once (cached dispatch).
void runIterations(const CaseConfig& cfg, int iters, const std::vector<int>& checkpoints) {
  const uint64_t seed = nextSeed();
  Rng rng(seed);
  const std::string name = cfg.describe() + " seed=" + std::to_string(seed);
  BOOST_TEST_MESSAGE("iterations case " << name);
  EpSession s(cfg);
  s.randomRouting(randomTokens(cfg.g.maxTokens / 2, cfg.g.maxTokens, rng), RouteSpec{RouteKind::Uniform, 0.1}, rng);
  s.randomData(rng);
  const int R = nRanks();
  const bool capacity = cfg.mode == ncclEpModeCapacity;
  if (!capacity) s.layout();
  std::vector<std::vector<RankResult>> snaps(checkpoints.size(), std::vector<RankResult>(R));
  gpus().run([&](const RankContext& c) {
    RankState& st = s.rank(c.rank);
    const int T = s.routing[c.rank].numTokens;
    st.uploadRouting(c, s.routing[c.rank]);
    st.uploadTokens(c, s.inputs[c.rank]);
    st.uploadCombineInputs(c, s.inputs[c.rank]);
    size_t next = 0;
    for (int i = 0; i < iters; ++i) {
      st.poisonDispatchOutputs(c);
      st.poisonCombineOutputs(c);
      if (capacity) st.enqueueLayout(c, T);
      st.enqueueDispatch(c, T);
      st.enqueueCombine(c, T);
      if (next < checkpoints.size() && checkpoints[next] == i) {
        st.downloadDispatch(c, s.expect[c.rank].numRows, snaps[next][c.rank]);
        st.downloadCombine(c, T, snaps[next][c.rank]);
        ++next;
      }
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  for (size_t j = 0; j < checkpoints.size(); ++j) {
    s.results = snaps[j];
    if (!capacity)
      for (int r : localRanks()) {  // exact-mode counts come from the one layout
        s.results[r].counts = s.rank(r).counts;
        s.results[r].hostCounts = s.rank(r).hostCounts;
      }
    s.expectAllCorrect(name + " iteration " + std::to_string(checkpoints[j]));
  }
  // No drift: the last iteration is bit-identical to the first.
  bool same = true;
  for (int r : localRanks()) same = same && snaps.front()[r].combOut == snaps.back()[r].combOut;
  BOOST_TEST_MESSAGE(name << ": last combine output " << (same ? "identical to" : "differs from") << " the first");
}

}  // namespace

namespace {
// Quick mode (EPX_TEST_QUICK=1): 100 iterations instead of 1000, checkpoints at the same places
// (first ones, middle, last ones).
int iters() { return quick() ? 100 : 1000; }
std::vector<int> points(std::vector<int> full) {
  if (!quick()) return full;
  for (int& p : full) p = p < 3 ? p : p >= 998 ? p - 900 : p / 10;
  return full;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(stress)

BOOST_AUTO_TEST_CASE(iterations_1000_capacity_layout_each_time) {
  CaseConfig c;
  c.g = {256, 2048, 8, 16};
  c.mode = ncclEpModeCapacity;
  c.alignment = 128;
  c.zeroGaps = 1;
  c.numBias = 1;
  c.combineWeights = true;
  runIterations(c, iters(), points({0, 1, 2, 499, 998, 999}));
}

BOOST_AUTO_TEST_CASE(iterations_1000_exact_cached_dedup) {
  CaseConfig c;
  c.g = {256, 2048, 8, 16};
  c.layout = ncclEpLayoutDeduplicated;
  c.numBias = 2;
  c.combineWeights = true;
  runIterations(c, iters(), points({0, 1, 500, 999}));
}

// The zero-copy dispatch and pull combine, 1000 times on the same window buffers.
BOOST_AUTO_TEST_CASE(iterations_1000_zero_copy_pull) {
  CaseConfig c;
  c.g = {256, 2048, 8, 16};
  c.layout = ncclEpLayoutDeduplicated;
  c.mode = ncclEpModeCapacity;
  c.zeroCopy = 2;
  c.pullCombine = true;
  c.numBias = 1;
  c.combineWeights = true;
  runIterations(c, iters(), points({0, 1, 500, 999}));
}

// Two groups (different shapes) on the same communicators; their layouts, dispatches and combines
// interleave on one stream per rank, for several rounds with new routing.
BOOST_AUTO_TEST_CASE(two_groups_alternating) {
  CaseConfig ca;
  ca.g = {256, 2048, 8, 16};
  ca.mode = ncclEpModeExact;
  ca.alignment = 4;
  ca.zeroGaps = 1;
  ca.numBias = 1;
  ca.combineWeights = true;
  CaseConfig cb;
  cb.g = {128, 4096, 6, 32, 1};
  cb.layout = ncclEpLayoutDeduplicated;
  cb.mode = ncclEpModeCapacity;
  cb.fp8 = true;
  cb.numBias = 2;
  cb.combineWeights = true;
  // Groups of their own (not the shared cache) so that both really are distinct groups.
  auto ga = createGroups(ca.g);
  auto gb = createGroups(cb.g);
  {
    EpSession a(ca, &ga), b(cb, &gb);
    const uint64_t seed = nextSeed();
    Rng rng(seed);
    for (int round = 0; round < 6; ++round) {
      a.randomRouting(randomTokens(0, 256, rng), RouteSpec{RouteKind::Uniform, 0.1}, rng);
      b.randomRouting(randomTokens(0, 128, rng), RouteSpec{RouteKind::Uniform, 0.1}, rng);
      a.randomData(rng);
      b.randomData(rng);
      gpus().run([&](const RankContext& c) {
        RankState& sa = a.rank(c.rank);
        RankState& sb = b.rank(c.rank);
        const int ta = a.routing[c.rank].numTokens, tb = b.routing[c.rank].numTokens;
        sa.uploadRouting(c, a.routing[c.rank]);
        sb.uploadRouting(c, b.routing[c.rank]);
        if (round % 2) {
          sb.enqueueLayout(c, tb);
          sa.enqueueLayout(c, ta);
        } else {
          sa.enqueueLayout(c, ta);
          sb.enqueueLayout(c, tb);
        }
        sa.uploadTokens(c, a.inputs[c.rank]);
        sb.uploadTokens(c, b.inputs[c.rank]);
        sa.poisonDispatchOutputs(c);
        sb.poisonDispatchOutputs(c);
        sa.uploadCombineInputs(c, a.inputs[c.rank]);
        sb.uploadCombineInputs(c, b.inputs[c.rank]);
        sa.poisonCombineOutputs(c);
        sb.poisonCombineOutputs(c);
        sb.enqueueDispatch(c, tb);
        sa.enqueueDispatch(c, ta);
        sa.enqueueCombine(c, ta);
        sb.enqueueCombine(c, tb);
        sa.downloadDispatch(c, a.expect[c.rank].numRows, a.results[c.rank]);
        sb.downloadDispatch(c, b.expect[c.rank].numRows, b.results[c.rank]);
        sa.downloadCombine(c, ta, a.results[c.rank]);
        sb.downloadCombine(c, tb, b.results[c.rank]);
      });
      a.expectAllCorrect("group A round " + std::to_string(round) + " seed " + std::to_string(seed));
      b.expectAllCorrect("group B round " + std::to_string(round) + " seed " + std::to_string(seed));
    }
  }
  destroyGroups(ga);
  destroyGroups(gb);
}

BOOST_AUTO_TEST_SUITE_END()
