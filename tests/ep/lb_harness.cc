#include "lb_harness.h"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/ref/lb_ref.h"

namespace epx::test::lb {

namespace {

enum : int { kWeights = 1, kGrads = 2, kSlotGrads = 3 };

uint64_t seedOf(uint64_t base, int what, int rank, int t) {
  return mix64(base ^ (uint64_t(what) << 56) ^ (uint64_t(rank) << 40) ^ uint64_t(t));
}

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
  if (n) EPX_CHECK_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// The mapping as the kernels use it: entries outside [-1, numExperts) are skipped.
std::vector<int32_t> validOnly(const std::vector<int32_t>& map, int numExperts) {
  std::vector<int32_t> v = map;
  for (auto& e : v)
    if (e < -1 || e >= numExperts) e = -1;
  return v;
}

}  // namespace

int Plan::numExperts() const { return localExperts * nRanks(); }

LbObjects::LbObjects(const Plan& p) : plan(p), lb(static_cast<size_t>(nRanks()), nullptr) {
  if (!create() && !plan.gradRowElems.empty()) {
    gradsRefused = true;
    plan.gradRowElems.clear();
    if (!plan.weightRowBytes.empty()) BOOST_REQUIRE(create());  // else nothing left to create: empty()
  }
}

bool LbObjects::create() {
  ncclEpLbPlan_t pl{};
  pl.numExperts = plan.numExperts();
  pl.numSlots = plan.numSlots;
  pl.numWeightTensors = int(plan.weightRowBytes.size());
  for (size_t t = 0; t < plan.weightRowBytes.size(); ++t) pl.weightRowBytes[t] = plan.weightRowBytes[t];
  pl.numGradTensors = int(plan.gradRowElems.size());
  for (size_t t = 0; t < plan.gradRowElems.size(); ++t) pl.gradRowElems[t] = plan.gradRowElems[t];
  ncclEpLbConfig_t cfg = NCCL_EP_LB_CONFIG_INITIALIZER;
  cfg.chunkBytes = plan.chunkBytes;
  cfg.numCtas = smCap() > 0 ? std::max(1, std::min(plan.numCtas, smCap())) : plan.numCtas;
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

LbObjects::~LbObjects() {
  try {
    gpus().run([&](const RankContext& c) {
      if (lb[size_t(c.rank)]) ncclEpLbDestroy(lb[size_t(c.rank)]);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncclEpLbDestroy: %s\n", e.what());
  }
}

char* LbObjects::slots(int r, int t) const {
  void* p = nullptr;
  EPX_CHECK_EP(ncclEpLbGetSlots(lb[size_t(r)], t, &p));
  return static_cast<char*>(p);
}

float* LbObjects::slotGrads(int r, int t) const {
  float* p = nullptr;
  EPX_CHECK_EP(ncclEpLbGetSlotGrads(lb[size_t(r)], t, &p));
  return p;
}

RankBuffers::~RankBuffers() {
  for (void* p : weights) cudaFree(p);
  for (void* p : grads) cudaFree(p);
  cudaFree(mapping);
}

std::string asyncErrorOf(ncclEpLb_t lb, ncclResult_t* code) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpLbGetAsyncError(lb, &r, msg, sizeof(msg));
  if (code) *code = r;
  return r == ncclSuccess ? std::string() : std::string(msg);
}

void prepare(const LbObjects& o, int rank, cudaStream_t stream, RankBuffers& b, uint64_t base,
             const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const size_t L = size_t(p.localExperts), S = size_t(p.numSlots);
  if (b.mapping == nullptr) {
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
    EPX_CHECK_CUDA(cudaMalloc(&b.mapping, std::max<size_t>(1, map.size()) * sizeof(int32_t)));
  }
  for (size_t t = 0; t < p.weightRowBytes.size(); ++t) {
    EPX_CHECK_CUDA(launchFillPattern(b.weights[t], L * p.weightRowBytes[t], seedOf(base, kWeights, rank, int(t)), stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(o.slots(rank, int(t)), kPoison, S * p.weightRowBytes[t], stream));
  }
  for (size_t t = 0; t < p.gradRowElems.size(); ++t) {
    EPX_CHECK_CUDA(launchFillFloats(b.grads[t], L * p.gradRowElems[t], false, seedOf(base, kGrads, rank, int(t)), stream));
    EPX_CHECK_CUDA(launchFillFloats(o.slotGrads(rank, int(t)), S * p.gradRowElems[t], false,
                                    seedOf(base, kSlotGrads, rank, int(t)), stream));
  }
  EPX_CHECK_CUDA(cudaMemcpyAsync(b.mapping, map.data(), map.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
}

std::string checkSlots(const LbObjects& o, int r, uint64_t base, const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const int R = nRanks(), S = p.numSlots, L = p.localExperts;
  const epx::ref::LbShape shape{R, p.numExperts(), S};
  // Rank r's valid entries only: the reference then needs only the owners of r's experts.
  std::vector<int32_t> mine(map.size(), -1);
  const std::vector<int32_t> valid = validOnly(map, p.numExperts());
  for (int s = 0; s < S; ++s) mine[size_t(r * S + s)] = valid[size_t(r * S + s)];
  for (size_t t = 0; t < p.weightRowBytes.size(); ++t) {
    const size_t w = p.weightRowBytes[t];
    std::vector<std::vector<uint8_t>> orig(static_cast<size_t>(R)), want(static_cast<size_t>(R));
    for (int s = 0; s < S; ++s) {
      const int e = mine[size_t(r * S + s)];
      if (e >= 0 && orig[size_t(e / L)].empty())
        orig[size_t(e / L)] = patternBytes(seedOf(base, kWeights, e / L, int(t)), size_t(L) * w);
    }
    for (int q = 0; q < R; ++q) want[size_t(q)].assign(size_t(S) * w, kPoison);
    epx::ref::lbPrefetch(shape, mine, w, orig, &want);
    const auto got = download<uint8_t>(o.slots(r, int(t)), size_t(S) * w);
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[size_t(r)][i])
        return "weight tensor " + std::to_string(t) + ", slot " + std::to_string(i / w) + ", byte " +
               std::to_string(i % w) + ": " + std::to_string(got[i]) + ", reference " +
               std::to_string(want[size_t(r)][i]) + (got[i] == kPoison ? " (poison: not written)" : "");
  }
  return {};
}

std::string checkGrads(const LbObjects& o, const RankBuffers& b, int r, uint64_t base, const std::vector<int32_t>& map) {
  const Plan& p = o.plan;
  const int R = nRanks(), L = p.localExperts;
  const epx::ref::LbShape shape{R, p.numExperts(), p.numSlots};
  const std::vector<int32_t> valid = validOnly(map, p.numExperts());
  for (size_t t = 0; t < p.gradRowElems.size(); ++t) {
    const size_t g = p.gradRowElems[t];
    std::vector<std::vector<float>> grads(static_cast<size_t>(R)), slotGrads(static_cast<size_t>(R));
    for (int q = 0; q < R; ++q) {
      grads[size_t(q)] = q == r ? patternFloats(seedOf(base, kGrads, q, int(t)), size_t(L) * g)
                                : std::vector<float>(size_t(L) * g, 0.0f);
      slotGrads[size_t(q)] = patternFloats(seedOf(base, kSlotGrads, q, int(t)), size_t(p.numSlots) * g);
    }
    epx::ref::lbReduceGrads(shape, valid, g, slotGrads, &grads);
    const auto got = download<float>(b.grads[t], size_t(L) * g);
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &grads[size_t(r)][i], 4) != 0)
        return "gradient tensor " + std::to_string(t) + ", expert " + std::to_string(r * L + int(i / g)) + ", element " +
               std::to_string(i % g) + ": " + std::to_string(got[i]) + ", reference " + std::to_string(grads[size_t(r)][i]);
  }
  return {};
}

std::vector<std::string> runMapping(const LbObjects& o, const std::vector<int32_t>& map, uint64_t base,
                                    const std::string& badEntryMessage) {
  const int R = nRanks();
  std::vector<std::string> fails(static_cast<size_t>(R));
  std::vector<RankBuffers> bufs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    RankBuffers& b = bufs[size_t(c.rank)];
    prepare(o, c.rank, c.stream, b, base, map);
    if (!o.plan.weightRowBytes.empty())
      EPX_CHECK_EP(ncclEpLbPrefetchWeights(o.lb[size_t(c.rank)], b.mapping, b.weights.data(), c.stream));
    if (!o.plan.gradRowElems.empty())
      EPX_CHECK_EP(ncclEpLbReduceGrads(o.lb[size_t(c.rank)], b.mapping,
                                       reinterpret_cast<float* const*>(b.grads.data()), c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  gpus().runLocal([&](const RankContext& c) {
    std::string& f = fails[size_t(c.rank)];
    ncclResult_t code = ncclSuccess;
    const std::string err = asyncErrorOf(o.lb[size_t(c.rank)], &code);
    if (badEntryMessage.empty())
      f = err;
    else if (code != ncclInvalidArgument || err.find(badEntryMessage) == std::string::npos)
      f = "async error " + std::to_string(int(code)) + " '" + err + "', want ncclInvalidArgument with '" +
          badEntryMessage + "'";
    if (f.empty()) f = checkSlots(o, c.rank, base, map);
    if (f.empty()) f = checkGrads(o, bufs[size_t(c.rank)], c.rank, base, map);
  });
  return fails;
}

}  // namespace epx::test::lb
