// CUDA graph capture in capacity mode: Layout -> Dispatch -> a user kernel (expert = 2 * x) ->
// Combine, captured once per rank and replayed 100 times with new routing, tokens and biases
// written into the same input buffers before each replay. Every replay is checked.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>

#include "epx/ref/bf16.h"
#include "ep_harness.h"
#include "ep_kernels.h"

using namespace epx::test;

namespace {

struct Graphs {
  std::vector<cudaGraph_t> graph;
  std::vector<cudaGraphExec_t> exec;
  explicit Graphs(int n) : graph(n, nullptr), exec(n, nullptr) {}
};

// Enqueues the captured sequence of rank c.rank on its stream (combine input = 2 * recvX over all
// capacity rows; combine's topkWeights = the received weights, so combined weights round-trip).
void enqueueSequence(EpSession& s, const RankContext& c, int T) {
  RankState& st = s.rank(c.rank);
  const CaseConfig& cfg = s.cfg();
  st.enqueueLayout(c, T);
  st.enqueueDispatch(c, T);
  // Zero-copy / pull variants: recvX and combineX are the group's window buffers.
  EPX_CHECK_CUDA(launchScaleBf16(st.rX().p, st.rCombIn().p, size_t(st.rows) * cfg.g.hidden, 2.0f, c.stream));
  ncclEpCombineInputs_t in{};
  in.x = st.rCombIn().p;
  in.xType = ncclBfloat16;
  in.bias0 = st.bias0.ptr();
  in.topkWeights = static_cast<float*>(cfg.pullCombine ? st.rCombW().p : st.rW().p);
  in.numRows = st.rows;
  in.hidden = cfg.g.hidden;
  ncclEpCombineOutputs_t o{};
  o.out = st.out.ptr();
  o.combinedTopkWeights = st.outW.as<float>();
  o.numTokens = T;
  EPX_CHECK_EP(ncclEpCombine(st.handle, &in, &o, c.stream));
}

// Quick mode (EPX_TEST_QUICK=1): at most 10 replays per case.
void runGraphCase(const CaseConfig& cfg, int T, int replays) {
  if (quick()) replays = std::min(replays, 10);
  const uint64_t seed = nextSeed();
  Rng rng(seed);
  const std::string name = cfg.describe() + " T=" + std::to_string(T) + " seed=" + std::to_string(seed);
  BOOST_TEST_MESSAGE("graph case " << name);
  BOOST_TEST_REQUIRE(cfg.mode == ncclEpModeCapacity);
  BOOST_TEST_REQUIRE(cfg.numBias == 1);
  BOOST_TEST_REQUIRE(cfg.combineWeights);
  BOOST_TEST_REQUIRE(cfg.dispatchWeights);
  EpSession s(cfg);
  const int R = nRanks();
  const size_t H = cfg.g.hidden;
  Graphs g(R);

  // Buffers for the first data set, then capture (nothing below allocates during capture).
  s.randomRouting(allTokens(T), RouteSpec{RouteKind::Uniform, 0.1}, rng);
  s.randomData(rng);
  gpus().run([&](const RankContext& c) {
    RankState& st = s.rank(c.rank);
    st.uploadRouting(c, s.routing[c.rank]);
    st.uploadTokens(c, s.inputs[c.rank]);
    st.uploadCombineInputs(c, s.inputs[c.rank]);
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueueSequence(s, c, T);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(c.stream, &broken);
      if (broken) cudaGraphDestroy(broken);
      throw;
    }
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &g.graph[c.rank]));
    EPX_CHECK_CUDA(cudaGraphInstantiate(&g.exec[c.rank], g.graph[c.rank], 0));
  });

  int failures = 0;
  for (int rep = 0; rep < replays; ++rep) {
    if (rep > 0) {  // new routing (same T, different masks) and new data in the same buffers
      s.randomRouting(allTokens(T), RouteSpec{RouteKind::Uniform, 0.05 * (rep % 5)}, rng);
      s.randomData(rng);
    }
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      st.uploadRouting(c, s.routing[c.rank]);
      st.uploadTokens(c, s.inputs[c.rank]);
      st.uploadCombineInputs(c, s.inputs[c.rank]);  // bias0 (combine x/weights come from the graph)
      st.poisonDispatchOutputs(c);
      st.poisonCombineOutputs(c);
      EPX_CHECK_CUDA(cudaMemsetAsync(st.rCombIn().p, 0xff, size_t(st.rows) * H * 2, c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(g.exec[c.rank], c.stream));
      st.downloadDispatch(c, s.expect[c.rank].numRows, s.results[c.rank]);
      st.downloadCombine(c, T, s.results[c.rank]);
    });
    // What the graph's expert computed: 2 * the dispatched token; combine weights = received ones.
    for (int r = 0; r < R; ++r) {
      const auto& e = s.expect[r];
      auto& in = s.inputs[r];
      in.expertOut.assign(size_t(e.numRows) * H, 0xffff);
      for (int row = 0; row < e.numRows; ++row) {
        if (e.srcRank[row] < 0) continue;
        const uint8_t* xrow = &s.inputs[e.srcRank[row]].x[size_t(e.srcToken[row]) * H * 2];
        for (size_t h = 0; h < H; ++h) {
          uint16_t v;
          std::memcpy(&v, xrow + 2 * h, 2);
          in.expertOut[size_t(row) * H + h] = epx::ref::floatToBf16(2.f * epx::ref::bf16ToFloat(v));
        }
      }
      in.combW = e.recvWeights;
    }
    std::string d = s.checkDispatch();
    double maxErr = 0;
    int maxU = 0;
    std::string cm = s.checkCombine(1, &maxErr, &maxU);
    std::string a = asyncErrors(s.groups());
    if (!d.empty() || !cm.empty() || !a.empty()) ++failures;
    BOOST_CHECK_MESSAGE(d.empty(), name << " replay " << rep << ": dispatch: " << d);
    BOOST_CHECK_MESSAGE(cm.empty(), name << " replay " << rep << ": combine: " << cm);
    BOOST_CHECK_MESSAGE(a.empty(), name << " replay " << rep << ": " << a);
    if (rep % 25 == 0 || rep == replays - 1)
      BOOST_TEST_MESSAGE(name << " replay " << rep << ": combine max error " << maxErr << " (" << maxU << " ulp)");
    if (gpus().anyRank(failures >= 3)) {  // all processes stop together
      BOOST_ERROR(name << ": stopping after 3 failed replays");
      break;
    }
  }
  gpus().run([&](const RankContext& c) {
    if (g.exec[c.rank]) EPX_CHECK_CUDA(cudaGraphExecDestroy(g.exec[c.rank]));
    if (g.graph[c.rank]) EPX_CHECK_CUDA(cudaGraphDestroy(g.graph[c.rank]));
  });
}

CaseConfig graphConfig(ncclEpLayout_t layout) {
  CaseConfig c;
  c.g = {128, 2048, 8, 16};
  c.layout = layout;
  c.mode = ncclEpModeCapacity;
  c.alignment = layout == ncclEpLayoutExpanded ? 128 : 1;
  c.zeroGaps = layout == ncclEpLayoutExpanded ? 1 : 0;
  c.numBias = 1;
  c.combineWeights = true;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(graph)

BOOST_AUTO_TEST_CASE(capture_expanded_100_replays) { runGraphCase(graphConfig(ncclEpLayoutExpanded), 128, 100); }

BOOST_AUTO_TEST_CASE(capture_dedup_100_replays) { runGraphCase(graphConfig(ncclEpLayoutDeduplicated), 128, 100); }

// Expanded without zeroed gaps: gap rows keep the poison (NaN), the user kernel doubles it, and
// combine must never read those rows.
BOOST_AUTO_TEST_CASE(capture_expanded_gaps_not_zeroed_int32_ids) {
  CaseConfig c = graphConfig(ncclEpLayoutExpanded);
  c.zeroGaps = 0;
  c.int64Ids = false;
  c.g = {96, 4096, 6, 16};
  runGraphCase(c, 96, 30);
}

// The zero-copy path: dispatch straight into the window's receive rows, the user kernel writes the
// expert output into the window's combineX, and combine pulls it from the peers.
BOOST_AUTO_TEST_CASE(capture_dedup_zero_copy_pull_100_replays) {
  CaseConfig c = graphConfig(ncclEpLayoutDeduplicated);
  c.zeroCopy = 2;
  c.pullCombine = true;
  runGraphCase(c, 128, 100);
}

BOOST_AUTO_TEST_SUITE_END()
