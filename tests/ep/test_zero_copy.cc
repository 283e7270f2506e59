// Zero-copy deduplicated dispatch into the group's window (ncclEpGroupGetBuffers) and the pull
// combine from the window's combineX, against the reference, in every combination with the
// ordinary outputs; cached dispatch and many iterations on the window buffers.
#include <boost/test/unit_test.hpp>

#include "ep_harness.h"

using namespace epx::test;

namespace {
CaseConfig zcConfig(int zeroCopy, bool pull, ncclEpMode_t mode, bool fp8) {
  CaseConfig c;
  c.g = {256, 2048, 8, 16, fp8 ? 1 : 0};
  c.layout = ncclEpLayoutDeduplicated;
  c.mode = mode;
  c.fp8 = fp8;
  c.zeroCopy = zeroCopy;
  c.pullCombine = pull;
  c.numBias = 1;
  c.combineWeights = true;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(zero_copy)

BOOST_AUTO_TEST_CASE(group_buffers) {
  GroupSpec gs{256, 2048, 8, 16, 1};
  const auto& groups = groupFor(gs);
  for (int r : localRanks()) {
    ncclEpBuffers_t b{};
    BOOST_TEST_REQUIRE(ncclEpGroupGetBuffers(groups[r], &b) == ncclSuccess, ncclEpGetLastError());
    BOOST_TEST(b.rows == nRanks() * gs.maxTokens);
    BOOST_TEST((b.recvX && b.recvScales && b.recvTopkIdx && b.recvTopkWeights && b.recvSrcInfo && b.combineX));
    BOOST_TEST(reinterpret_cast<uintptr_t>(b.recvX) % 16 == 0u);
    BOOST_TEST(reinterpret_cast<uintptr_t>(b.combineX) % 16 == 0u);
  }
  BOOST_TEST(ncclEpGroupGetBuffers(nullptr, nullptr) == ncclInvalidArgument);
  BOOST_TEST(std::string(ncclEpGetLastError()).size() > 0u);
}

BOOST_AUTO_TEST_CASE(dispatch_and_combine_matrix) {
  for (int zc : {0, 1, 2, 3})
    for (bool pull : {false, true})
      for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
        if (zc == 0 && !pull) continue;  // the ordinary path, covered elsewhere
        CaseConfig c = zcConfig(zc, pull, mode, zc == 2 && mode == ncclEpModeCapacity);
        Rng rng(nextSeed());
        BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(0, 256, rng), RouteSpec{RouteKind::Uniform, 0.1}); }
      }
}

BOOST_AUTO_TEST_CASE(pull_without_combined_weights_and_two_biases) {
  for (int zc : {0, 2}) {
    CaseConfig c = zcConfig(zc, true, ncclEpModeCapacity, false);
    c.combineWeights = false;
    c.numBias = 2;
    BOOST_TEST_CONTEXT(c.describe()) { runCase(c, allTokens(256)); }
  }
}

// Combine with the window's combineX but weights of its own: a valid (push) combine too.
BOOST_AUTO_TEST_CASE(window_combine_input_with_own_weights) {
  CaseConfig c = zcConfig(2, false, ncclEpModeExact, false);
  Rng rng(nextSeed());
  EpSession s(c);
  s.randomRouting(randomTokens(1, 256, rng), RouteSpec{RouteKind::Uniform, 0.2}, rng);
  s.randomData(rng);
  s.layout();
  s.dispatch();
  // Expert outputs into the window's combineX; weights from an ordinary buffer.
  gpus().run([&](const RankContext& ctx) {
    RankState& st = s.rank(ctx.rank);
    const auto& in = s.inputs[ctx.rank];
    const size_t H = c.g.hidden;
    EPX_CHECK_CUDA(cudaMemsetAsync(st.win.combineX, 0xff, size_t(st.rows) * H * 2, ctx.stream));
    if (!in.expertOut.empty())
      EPX_CHECK_CUDA(cudaMemcpyAsync(st.win.combineX, in.expertOut.data(), in.expertOut.size() * 2,
                                     cudaMemcpyHostToDevice, ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(st.combW.ptr(), 0xff, st.combW.size(), ctx.stream));
    if (!in.combW.empty())
      EPX_CHECK_CUDA(cudaMemcpyAsync(st.combW.ptr(), in.combW.data(), in.combW.size() * 4, cudaMemcpyHostToDevice,
                                     ctx.stream));
    if (!in.bias0.empty())
      EPX_CHECK_CUDA(cudaMemcpyAsync(st.bias0.ptr(), in.bias0.data(), in.bias0.size() * 2, cudaMemcpyHostToDevice,
                                     ctx.stream));
    st.poisonCombineOutputs(ctx);
    const int T = s.routing[ctx.rank].numTokens;
    ncclEpCombineInputs_t ci{};
    ci.x = st.win.combineX;
    ci.xType = ncclBfloat16;
    ci.bias0 = st.bias0.ptr();
    ci.topkWeights = st.combW.as<float>();
    ncclEpCombineOutputs_t co{};
    co.out = st.out.ptr();
    co.combinedTopkWeights = st.outW.as<float>();
    EPX_CHECK_EP(ncclEpCombine(st.handle, &ci, &co, ctx.stream));
    st.downloadCombine(ctx, T, s.results[ctx.rank]);
  });
  s.expectAllCorrect(c.describe() + " (window combineX, own weights)");
}

BOOST_AUTO_TEST_CASE(cached_dispatch_zero_copy_pull) {
  for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
    CaseConfig c = zcConfig(2, true, mode, mode == ncclEpModeCapacity);
    Rng rng(nextSeed());
    BOOST_TEST_CONTEXT(c.describe()) { runCase(c, randomTokens(1, 256, rng), RouteSpec{}, 3); }
  }
}

BOOST_AUTO_TEST_CASE(zero_copy_edge_cases) {
  CaseConfig c = zcConfig(2, true, ncclEpModeCapacity, false);
  std::vector<int> t = allTokens(256);
  t[0] = 0;
  runCase(c, t);                                      // a rank with no tokens
  runCase(c, allTokens(0));                           // nothing at all
  RouteSpec one{RouteKind::SingleExpert};
  runCase(c, allTokens(256), one);                    // everything to the last rank
  runCase(c, allTokens(200), RouteSpec{RouteKind::RankSkewed});
  RouteSpec masked{RouteKind::Uniform, 0.5};
  masked.fullyMaskedToken = true;
  runCase(c, allTokens(256), masked);
}

// Quick mode (EPX_TEST_QUICK=1): 256 tokens per rank instead of 1024.
BOOST_AUTO_TEST_CASE(zero_copy_large_shape) {
  const int T = quick() ? 256 : 1024;
  CaseConfig c;
  c.g = {T, 7168, 8, 256, 1};
  c.layout = ncclEpLayoutDeduplicated;
  c.mode = ncclEpModeCapacity;
  c.fp8 = true;
  c.zeroCopy = 2;
  c.pullCombine = true;
  c.combineWeights = true;
  c.numBias = 1;
  runCase(c, allTokens(T));
}

BOOST_AUTO_TEST_SUITE_END()
