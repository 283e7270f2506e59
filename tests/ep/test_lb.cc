// GPU tests of expert load balancing (suite "lb", epx/lb.h): weight prefetch byte-exact and
// gradient reduction bit-exact against the CPU reference (host/ref lb_ref.h) for mappings with no
// replica, one per slot on other ranks, every slot replicating one hot expert (its owner's slots
// included), and seeded random ones; rows of one vector, odd vector counts and several GIN chunks;
// unused slots keep their (poisoned) bytes; the mapping read at run time in a replayed CUDA graph;
// a bad mapping entry reported and skipped; argument errors. Inputs are generated on the device from
// seeds and recomputed on the host.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/lb.h"
#include "lb_harness.h"

using namespace epx::test;
using namespace epx::test::lb;

namespace {

Plan defaultPlan() {
  // Rows of one 16-byte vector, of an odd vector count, and of a few chunks plus a tail.
  Plan p;
  const size_t large = 2 * kDefaultChunkBytes + 48;
  p.weightRowBytes = {16, 4112, large};
  p.gradRowElems = {4, 1028, large / 4};
  return p;
}

void report(const std::vector<std::string>& f, const std::string& what) {
  for (int r : localRanks()) BOOST_TEST(f[size_t(r)] == "", what << ", rank " << r << ": " << f[size_t(r)]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lb)

// Fixed mappings: no replica; every slot a replica of another rank's expert; every slot of every
// rank the same hot expert (its owner's slots too); seeded random ones (with unused slots).
BOOST_AUTO_TEST_CASE(prefetch_and_reduce_mappings) {
  const LbObjects o(defaultPlan());
  const int R = nRanks(), S = o.plan.numSlots, L = o.plan.localExperts, E = o.plan.numExperts();
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  cases.push_back({"no replica", std::vector<int32_t>(size_t(R * S), -1)});
  std::vector<int32_t> other(size_t(R * S));
  for (int d = 0; d < R; ++d)
    for (int s = 0; s < S; ++s) other[size_t(d * S + s)] = ((d + 1 + s) % R) * L + s % L;
  cases.push_back({"other ranks' experts", other});
  cases.push_back({"one hot expert everywhere", std::vector<int32_t>(size_t(R * S), E - 1)});
  const uint64_t seed = nextSeed();
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 3; ++k) {
    std::vector<int32_t> m(size_t(R * S));
    std::uniform_int_distribution<int> pick(-1, E - 1);
    for (auto& e : m) e = pick(rng);
    cases.push_back({"random mapping " + std::to_string(k) + " of seed " + std::to_string(seed), m});
  }
  if (o.gradsRefused) BOOST_TEST_MESSAGE("lb: gradient reduction refused (NCCL headers without GIN get, network peers)");
  for (const auto& [name, map] : cases) report(runMapping(o, map, nextSeed()), name);
}

// An entry outside [-1, numExperts) is skipped on every rank and reported (naming rank and slot);
// the other slots are still right and the object stays usable.
BOOST_AUTO_TEST_CASE(bad_mapping_entry_is_skipped_and_reported) {
  Plan p;
  p.localExperts = 1;
  p.numSlots = 2;
  p.weightRowBytes = {64};
  p.gradRowElems = {16};
  const LbObjects o(p);
  const int R = nRanks();
  std::vector<int32_t> map(size_t(R * 2));
  for (int d = 0; d < R; ++d) map[size_t(d * 2)] = map[size_t(d * 2 + 1)] = (d + 1) % R;
  map[0] = R + 7;                 // rank 0, slot 0
  map[size_t(R * 2 - 1)] = -5;    // last rank, slot 1
  const std::string want = "the load-balancing mapping entry of rank 0, slot 0 is " + std::to_string(R + 7);
  const auto fails = runMapping(o, map, nextSeed(), want);
  report(fails, "bad entries");
}

// A captured prefetch reads the mapping when it runs: each replay after a new mapping (copied on
// the stream) fills the slots of that mapping.
BOOST_AUTO_TEST_CASE(graph_replay_reads_the_current_mapping) {
  Plan p = defaultPlan();
  p.gradRowElems.clear();
  const LbObjects o(p);
  const int R = nRanks(), S = p.numSlots, E = p.numExperts();
  const int replays = quick() ? 3 : 6;
  std::vector<RankBuffers> bufs(static_cast<size_t>(R));
  std::vector<cudaGraphExec_t> execs(static_cast<size_t>(R), nullptr);
  const uint64_t base = nextSeed();
  std::vector<int32_t> map(size_t(R * S), -1);
  gpus().run([&](const RankContext& c) {
    RankBuffers& b = bufs[size_t(c.rank)];
    prepare(o, c.rank, c.stream, b, base, map);
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    cudaGraph_t g = nullptr;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    EPX_CHECK_EP(ncclEpLbPrefetchWeights(o.lb[size_t(c.rank)], b.mapping, b.weights.data(), c.stream));
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &g));
    EPX_CHECK_CUDA(cudaGraphInstantiate(&execs[size_t(c.rank)], g, 0));
    cudaGraphDestroy(g);
  });
  for (int k = 0; k < replays; ++k) {
    for (int i = 0; i < R * S; ++i) map[size_t(i)] = (i * 7 + k * 3) % (E + 1) - 1;  // -1 .. E-1, moving
    gpus().run([&](const RankContext& c) {
      RankBuffers& b = bufs[size_t(c.rank)];
      for (size_t t = 0; t < p.weightRowBytes.size(); ++t)
        EPX_CHECK_CUDA(cudaMemsetAsync(o.slots(c.rank, int(t)), kPoison, size_t(S) * p.weightRowBytes[t], c.stream));
      EPX_CHECK_CUDA(cudaMemcpyAsync(b.mapping, map.data(), map.size() * sizeof(int32_t), cudaMemcpyHostToDevice, c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(execs[size_t(c.rank)], c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    });
    std::vector<std::string> f(static_cast<size_t>(R));
    gpus().runLocal([&](const RankContext& c) {
      f[size_t(c.rank)] = asyncErrorOf(o.lb[size_t(c.rank)]);
      if (f[size_t(c.rank)].empty()) f[size_t(c.rank)] = checkSlots(o, c.rank, base, map);
    });
    report(f, "replay " + std::to_string(k));
  }
  gpus().runLocal([&](const RankContext& c) { cudaGraphExecDestroy(execs[size_t(c.rank)]); });
}

BOOST_AUTO_TEST_CASE(argument_errors) {
  Plan p;
  p.localExperts = 1;
  p.numSlots = 1;
  p.weightRowBytes = {32};
  const LbObjects o(p);
  gpus().runLocal([&](const RankContext& c) {
    ncclEpLb_t lb = o.lb[size_t(c.rank)];
    int32_t* map = nullptr;
    char* w = nullptr;
    EPX_CHECK_CUDA(cudaMalloc(&map, sizeof(int32_t) * size_t(nRanks())));
    EPX_CHECK_CUDA(cudaMalloc(&w, 64));
    const void* ok[1] = {w};
    const void* odd[1] = {w + 4};
    const void* none[1] = {nullptr};
    BOOST_TEST(ncclEpLbPrefetchWeights(lb, nullptr, ok, c.stream) == ncclInvalidArgument);
    BOOST_TEST(std::string(ncclEpGetLastError()).find("mapping is NULL") != std::string::npos);
    BOOST_TEST(ncclEpLbPrefetchWeights(lb, map, none, c.stream) == ncclInvalidArgument);
    BOOST_TEST(std::string(ncclEpGetLastError()).find("weights[0] is NULL") != std::string::npos);
    BOOST_TEST(ncclEpLbPrefetchWeights(lb, map, odd, c.stream) == ncclInvalidArgument);
    BOOST_TEST(std::string(ncclEpGetLastError()).find("not 16-byte aligned") != std::string::npos);
    float* g[1] = {reinterpret_cast<float*>(w)};
    BOOST_TEST(ncclEpLbReduceGrads(lb, map, g, c.stream) == ncclInvalidArgument);
    BOOST_TEST(std::string(ncclEpGetLastError()).find("the plan has no gradient tensors") != std::string::npos);
    void* slots = nullptr;
    BOOST_TEST(ncclEpLbGetSlots(lb, 1, &slots) == ncclInvalidArgument);
    float* sg = nullptr;
    BOOST_TEST(ncclEpLbGetSlotGrads(lb, 0, &sg) == ncclInvalidArgument);
    // Plans refused before any communication (every rank alike).
    ncclEpLbPlan_t bad{};
    bad.numExperts = nRanks() * 2 + 1;
    bad.numSlots = 1;
    bad.numWeightTensors = 1;
    bad.weightRowBytes[0] = 16;
    ncclEpLb_t out = nullptr;
    if (nRanks() > 1) {
      BOOST_TEST(ncclEpLbCreate(c.comm, &bad, nullptr, &out) == ncclInvalidArgument);
      BOOST_TEST(std::string(ncclEpGetLastError()).find("not a positive multiple") != std::string::npos);
    }
    bad.numExperts = nRanks();
    bad.weightRowBytes[0] = 24;
    BOOST_TEST(ncclEpLbCreate(c.comm, &bad, nullptr, &out) == ncclInvalidArgument);
    BOOST_TEST(std::string(ncclEpGetLastError()).find("not a positive multiple of 16") != std::string::npos);
    BOOST_TEST(out == nullptr);
    cudaFree(map);
    cudaFree(w);
  });
}

BOOST_AUTO_TEST_SUITE_END()
