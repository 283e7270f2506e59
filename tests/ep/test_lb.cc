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

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/lb.h"
#include "epx/ref/lb_ref.h"

using namespace epx::test;

namespace {

constexpr uint8_t kPoison = 0xa5;
constexpr uint64_t kChunkBytes = uint64_t(256) << 10;

struct Plan {
  int localExperts = 2;
  int numSlots = 2;
  std::vector<size_t> weightRowBytes;
  std::vector<size_t> gradRowElems;
  int numExperts() const { return localExperts * nRanks(); }
};

// The default plan: rows of one 16-byte vector, of an odd vector count, and of a few chunks plus
// a tail (not a multiple of the chunk).
Plan defaultPlan() {
  Plan p;
  const size_t large = 2 * kChunkBytes + 48;
  p.weightRowBytes = {16, 4112, large};
  p.gradRowElems = {4, 1028, large / 4};
  return p;
}

// Creates one object per rank. A build on NCCL older than 2.30.3 cannot read network peers'
// slot gradients (no one-sided GIN get): there creation refuses gradient tensors with network peers
// (checked here, message included), and the object is made without them (gradsRefused).
struct LbObjects {
  Plan plan;
  std::vector<ncclEpLb_t> lb;
  bool gradsRefused = false;
  explicit LbObjects(const Plan& p) : plan(p), lb(size_t(nRanks()), nullptr) {
    if (!create() && !plan.gradRowElems.empty()) {
      gradsRefused = true;
      plan.gradRowElems.clear();
      BOOST_REQUIRE(create());
    }
  }
  // false: refused for want of GIN get (as documented); any other failure throws.
  bool create() {
    ncclEpLbPlan_t pl{};
    pl.numExperts = plan.numExperts();
    pl.numSlots = plan.numSlots;
    pl.numWeightTensors = int(plan.weightRowBytes.size());
    for (size_t t = 0; t < plan.weightRowBytes.size(); ++t) pl.weightRowBytes[t] = plan.weightRowBytes[t];
    pl.numGradTensors = int(plan.gradRowElems.size());
    for (size_t t = 0; t < plan.gradRowElems.size(); ++t) pl.gradRowElems[t] = plan.gradRowElems[t];
    ncclEpLbConfig_t cfg = NCCL_EP_LB_CONFIG_INITIALIZER;
    cfg.chunkBytes = kChunkBytes;
    if (smCap() > 0) cfg.numCtas = std::min(8, smCap());
    bool refused = false;
    gpus().run([&](const RankContext& c) {
      const ncclResult_t r = ncclEpLbCreate(c.comm, &pl, &cfg, &lb[size_t(c.rank)]);
      if (r == ncclInvalidUsage && NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 3) && pl.numGradTensors > 0 &&
          std::string(ncclEpGetLastError()).find("one-sided GIN get") != std::string::npos) {
        refused = true;
        return;
      }
      EPX_CHECK_EP(r);
    });
    return !refused;
  }
  ~LbObjects() {
    try {
      gpus().run([&](const RankContext& c) { ncclEpLbDestroy(lb[size_t(c.rank)]); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ncclEpLbDestroy: %s\n", e.what());
    }
  }
  char* slots(int r, int t) const {
    void* p = nullptr;
    EPX_CHECK_EP(ncclEpLbGetSlots(lb[size_t(r)], t, &p));
    return static_cast<char*>(p);
  }
  float* slotGrads(int r, int t) const {
    float* p = nullptr;
    EPX_CHECK_EP(ncclEpLbGetSlotGrads(lb[size_t(r)], t, &p));
    return p;
  }
};

uint64_t seedOf(uint64_t base, int what, int rank, int t) {
  return mix64(base ^ (uint64_t(what) << 56) ^ (uint64_t(rank) << 40) ^ uint64_t(t));
}
enum : int { kWeights = 1, kGrads = 2, kSlotGrads = 3 };

std::vector<uint8_t> patternBytes(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = patternByte(seed, i);
  return v;
}
std::vector<float> patternFloats(uint64_t seed, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = patternFloat(seed, i);
  return v;
}

template <class T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  EPX_CHECK_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

std::string asyncErrorOf(ncclEpLb_t lb, ncclResult_t* code = nullptr) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpLbGetAsyncError(lb, &r, msg, sizeof(msg));
  if (code) *code = r;
  return r == ncclSuccess ? std::string() : std::string(msg);
}

// One rank's device buffers of a case: originals (weights, gradients) and the mapping.
struct RankBuffers {
  std::vector<void*> weights, grads;
  int32_t* mapping = nullptr;
  ~RankBuffers() {
    for (void* p : weights) cudaFree(p);
    for (void* p : grads) cudaFree(p);
    cudaFree(mapping);
  }
};

// Fills rank c.rank's originals and slot gradients from the seeds, poisons its slots, uploads the
// mapping.
void prepare(const LbObjects& o, const RankContext& c, RankBuffers& b, uint64_t base, const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const size_t L = size_t(p.localExperts), S = size_t(p.numSlots);
  if (b.weights.empty()) {
    for (size_t w : p.weightRowBytes) {
      void* q = nullptr;
      EPX_CHECK_CUDA(cudaMalloc(&q, L * w));
      b.weights.push_back(q);
    }
    for (size_t g : p.gradRowElems) {
      void* q = nullptr;
      EPX_CHECK_CUDA(cudaMalloc(&q, L * g * sizeof(float)));
      b.grads.push_back(q);
    }
    EPX_CHECK_CUDA(cudaMalloc(&b.mapping, map.size() * sizeof(int32_t)));
  }
  for (size_t t = 0; t < p.weightRowBytes.size(); ++t) {
    EPX_CHECK_CUDA(launchFillPattern(b.weights[t], L * p.weightRowBytes[t], seedOf(base, kWeights, c.rank, int(t)), c.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(o.slots(c.rank, int(t)), kPoison, S * p.weightRowBytes[t], c.stream));
  }
  for (size_t t = 0; t < p.gradRowElems.size(); ++t) {
    EPX_CHECK_CUDA(launchFillFloats(b.grads[t], L * p.gradRowElems[t], false, seedOf(base, kGrads, c.rank, int(t)), c.stream));
    EPX_CHECK_CUDA(launchFillFloats(o.slotGrads(c.rank, int(t)), S * p.gradRowElems[t], false,
                                    seedOf(base, kSlotGrads, c.rank, int(t)), c.stream));
  }
  EPX_CHECK_CUDA(cudaMemcpyAsync(b.mapping, map.data(), map.size() * sizeof(int32_t), cudaMemcpyHostToDevice, c.stream));
}

// Rank r's slots of every weight tensor against the reference ("" or the first difference).
std::string checkSlots(const LbObjects& o, int r, uint64_t base, const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const epx::ref::LbShape shape{nRanks(), p.numExperts(), p.numSlots};
  for (size_t t = 0; t < p.weightRowBytes.size(); ++t) {
    const size_t w = p.weightRowBytes[t];
    // Only the owners of experts in rank r's slots matter; the others stay empty.
    std::vector<std::vector<uint8_t>> orig(static_cast<size_t>(nRanks()));
    for (int s = 0; s < p.numSlots; ++s) {
      const int e = map[size_t(r * p.numSlots + s)];
      if (e >= 0 && e < p.numExperts() && orig[size_t(e / p.localExperts)].empty())
        orig[size_t(e / p.localExperts)] = patternBytes(seedOf(base, kWeights, e / p.localExperts, int(t)), size_t(p.localExperts) * w);
    }
    std::vector<std::vector<uint8_t>> want(static_cast<size_t>(nRanks()));
    want[size_t(r)].assign(size_t(p.numSlots) * w, kPoison);
    std::vector<int32_t> mine(map.size(), -1);  // rank r's entries only (valid ones)
    for (int s = 0; s < p.numSlots; ++s) {
      const int32_t e = map[size_t(r * p.numSlots + s)];
      if (e >= 0 && e < p.numExperts()) mine[size_t(r * p.numSlots + s)] = e;
    }
    for (auto& v : want)
      if (v.empty()) v.assign(size_t(p.numSlots) * w, 0);
    epx::ref::lbPrefetch(shape, mine, w, orig, &want);
    const auto got = download<uint8_t>(o.slots(r, int(t)), size_t(p.numSlots) * w);
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[size_t(r)][i])
        return "weight tensor " + std::to_string(t) + ", slot " + std::to_string(i / w) + ", byte " +
               std::to_string(i % w) + ": " + std::to_string(got[i]) + ", reference " + std::to_string(want[size_t(r)][i]);
  }
  return {};
}

// Rank r's gradients of every gradient tensor against the reference, bit for bit.
std::string checkGrads(const LbObjects& o, const RankBuffers& b, int r, uint64_t base, const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const epx::ref::LbShape shape{nRanks(), p.numExperts(), p.numSlots};
  std::vector<int32_t> valid = map;
  for (auto& e : valid)
    if (e < -1 || e >= p.numExperts()) e = -1;  // skipped by the kernel
  for (size_t t = 0; t < p.gradRowElems.size(); ++t) {
    const size_t g = p.gradRowElems[t];
    std::vector<std::vector<float>> grads(static_cast<size_t>(nRanks())), slotGrads(static_cast<size_t>(nRanks()));
    for (int q = 0; q < nRanks(); ++q) {
      grads[size_t(q)] = q == r ? patternFloats(seedOf(base, kGrads, q, int(t)), size_t(p.localExperts) * g)
                                : std::vector<float>(size_t(p.localExperts) * g, 0.0f);
      slotGrads[size_t(q)] = patternFloats(seedOf(base, kSlotGrads, q, int(t)), size_t(p.numSlots) * g);
    }
    epx::ref::lbReduceGrads(shape, valid, g, slotGrads, &grads);
    const auto got = download<float>(b.grads[t], size_t(p.localExperts) * g);
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &grads[size_t(r)][i], 4) != 0)
        return "gradient tensor " + std::to_string(t) + ", expert " + std::to_string(r * p.localExperts + int(i / g)) +
               ", element " + std::to_string(i % g) + ": " + std::to_string(got[i]) + ", reference " +
               std::to_string(grads[size_t(r)][i]);
  }
  return {};
}

// Prefetch then reduce with `map` on every rank; failures per rank.
std::vector<std::string> runMapping(const LbObjects& o, const std::vector<int32_t>& map, uint64_t base) {
  std::vector<std::string> fails(static_cast<size_t>(nRanks()));
  std::vector<RankBuffers> bufs(static_cast<size_t>(nRanks()));
  gpus().run([&](const RankContext& c) {
    RankBuffers& b = bufs[size_t(c.rank)];
    prepare(o, c, b, base, map);
    EPX_CHECK_EP(ncclEpLbPrefetchWeights(o.lb[size_t(c.rank)], b.mapping, b.weights.data(), c.stream));
    if (!o.plan.gradRowElems.empty())
      EPX_CHECK_EP(ncclEpLbReduceGrads(o.lb[size_t(c.rank)], b.mapping,
                                       reinterpret_cast<float* const*>(b.grads.data()), c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  gpus().runLocal([&](const RankContext& c) {
    std::string& f = fails[size_t(c.rank)];
    f = asyncErrorOf(o.lb[size_t(c.rank)]);
    if (f.empty()) f = checkSlots(o, c.rank, base, map);
    if (f.empty()) f = checkGrads(o, bufs[size_t(c.rank)], c.rank, base, map);
  });
  return fails;
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
  const auto fails = [&] {
    std::vector<std::string> f(static_cast<size_t>(R));
    std::vector<RankBuffers> bufs(static_cast<size_t>(R));
    const uint64_t base = nextSeed();
    gpus().run([&](const RankContext& c) {
      RankBuffers& b = bufs[size_t(c.rank)];
      prepare(o, c, b, base, map);
      EPX_CHECK_EP(ncclEpLbPrefetchWeights(o.lb[size_t(c.rank)], b.mapping, b.weights.data(), c.stream));
      if (!o.plan.gradRowElems.empty())
        EPX_CHECK_EP(ncclEpLbReduceGrads(o.lb[size_t(c.rank)], b.mapping,
                                         reinterpret_cast<float* const*>(b.grads.data()), c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    });
    gpus().runLocal([&](const RankContext& c) {
      ncclResult_t code = ncclSuccess;
      const std::string msg = asyncErrorOf(o.lb[size_t(c.rank)], &code);
      const std::string want = "the load-balancing mapping entry of rank 0, slot 0 is " + std::to_string(R + 7);
      if (code != ncclInvalidArgument || msg.find(want) == std::string::npos)
        f[size_t(c.rank)] = "async error " + std::to_string(int(code)) + " '" + msg + "', want ncclInvalidArgument with '" +
                            want + "'";
      if (f[size_t(c.rank)].empty()) f[size_t(c.rank)] = checkSlots(o, c.rank, base, map);
      if (f[size_t(c.rank)].empty()) f[size_t(c.rank)] = checkGrads(o, bufs[size_t(c.rank)], c.rank, base, map);
    });
    return f;
  }();
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
    prepare(o, c, b, base, map);
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
