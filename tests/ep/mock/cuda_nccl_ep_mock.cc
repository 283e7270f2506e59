// Host-only mock of the CUDA runtime, NCCL comm init and the ncclEp API, to dry-run the GPU test
// harness (tests/ep) on a machine without GPUs: target epx_ep_mock (not built by default; run it
// like epx_ep_tests, MOCK_GPUS=n for n fake ranks). The EP semantics come from epx::ref, argument
// checks from the library's core (checks.cc/config.cc/errors.cc). MOCK_BREAK=1 corrupts one
// dispatched row, MOCK_BREAK=2 one combined value: the suites must then fail.
// Memory is host memory, streams run everything at once, graphs record closures.
#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/agree.h"
#include "core/checks.h"
#include "core/config.h"
#include "core/errors.h"
#include "epx/ep.h"
#include "epx/ref/bf16.h"
#include "epx/ref/ep_ref.h"

using epx::fail;

namespace {
struct MockStream {
  bool capturing = false;
  std::vector<std::function<void()>> ops;
};
struct MockGraph {
  std::vector<std::function<void()>> ops;
};
thread_local int t_dev = 0;
void enqueue(cudaStream_t s, std::function<void()> f) {
  auto* st = reinterpret_cast<MockStream*>(s);
  if (st && st->capturing)
    st->ops.push_back(std::move(f));
  else
    f();
}

struct Barrier {
  std::mutex mu;
  std::condition_variable cv;
  int n, count = 0;
  long gen = 0;
  explicit Barrier(int n) : n(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(mu);
    long g = gen;
    if (++count == n) {
      count = 0;
      ++gen;
      cv.notify_all();
    } else {
      cv.wait(l, [&] { return gen != g; });
    }
  }
};
struct HandleShared;
struct GroupShared {
  std::mutex mu;
  std::vector<std::shared_ptr<HandleShared>> handles;
  std::vector<int> handleCount;
};
struct World {
  int n;
  Barrier bar;
  std::mutex mu;
  std::vector<std::shared_ptr<GroupShared>> groups;
  std::vector<int> groupCount;
  std::vector<epx::AgreedConfig> agree;  // GroupCreate's config exchange (the library's ncclAllGather)
  explicit World(int n) : n(n), bar(n), groupCount(n, 0), agree(n) {}
};
struct FakeComm {
  std::shared_ptr<World> w;
  int rank;
};
struct HandleShared {
  std::vector<epx::ref::RankRouting> routing;
  std::vector<const char*> x;
  std::vector<const float*> scales, weights, cw;
  std::vector<const uint16_t*> cx;
};
}  // namespace

struct ncclEpGroup {
  FakeComm* comm;
  std::shared_ptr<GroupShared> sh;
  int rank, n;
  epx::GroupConfig cfg;
  std::vector<char> window;
  ncclEpBuffers_t buf{};
  int asyncCode = 0;
  std::string asyncMsg;
};
struct ncclEpHandle {
  ncclEpGroup* g;
  std::shared_ptr<HandleShared> sh;
  epx::HandleConfig cfg;
  long long capacity = 0;
  bool laidOut = false;
  bool dispatched = false;
  int numTokens = 0, numRows = 0, numRecvTokens = 0;
  std::vector<int> counts;
  std::vector<epx::ref::RankRouting> routing;  // all ranks, ids as laid out (bad slots dropped)
  epx::ref::EpShape shape;
};

extern "C" {
cudaError_t cudaGetDeviceCount(int* n) {
  const char* v = std::getenv("MOCK_GPUS");
  *n = v ? std::atoi(v) : 2;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  t_dev = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = t_dev;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = reinterpret_cast<cudaStream_t>(new MockStream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete reinterpret_cast<MockStream*>(s);
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t n) {
  n = (n + 255) / 256 * 256;
  *p = std::aligned_alloc(256, n);
  std::memset(*p, 0xcd, n);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t st) {
  enqueue(st, [=] { std::memcpy(d, s, n); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st) {
  enqueue(st, [=] { std::memset(p, v, n); });
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "mock cuda error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  auto* st = reinterpret_cast<MockStream*>(s);
  st->capturing = true;
  st->ops.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  auto* st = reinterpret_cast<MockStream*>(s);
  st->capturing = false;
  *g = reinterpret_cast<cudaGraph_t>(new MockGraph{std::move(st->ops)});
  st->ops.clear();
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = reinterpret_cast<cudaGraphExec_t>(new MockGraph(*reinterpret_cast<MockGraph*>(g)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  auto* g = reinterpret_cast<MockGraph*>(e);
  for (auto& f : g->ops) enqueue(s, f);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete reinterpret_cast<MockGraph*>(e);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete reinterpret_cast<MockGraph*>(g);
  return cudaSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int n, const int*) {
  auto w = std::make_shared<World>(n);
  for (int i = 0; i < n; ++i) comms[i] = reinterpret_cast<ncclComm_t>(new FakeComm{w, i});
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  delete reinterpret_cast<FakeComm*>(c);
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  static const char* s[] = {"success", "unhandled cuda error", "system error", "internal error", "invalid argument",
                            "invalid usage", "remote error", "in progress"};
  return int(r) >= 0 && int(r) < 8 ? s[r] : "unknown";
}

// ---- ncclEp ---------------------------------------------------------------------------------

ncclResult_t ncclEpGetBufferSizeHint(const ncclEpConfig_t* config, int nRanks, size_t* bytes) {
  if (!bytes) return fail(ncclInvalidArgument, "bytes NULL");
  epx::GroupConfig cfg;
  std::string err = epx::normalizeConfig(config, nRanks, &cfg);
  if (!err.empty()) return fail(ncclInvalidArgument, "hint: " + err);
  *bytes = size_t(nRanks) * cfg.maxTokensPerRank * cfg.hidden * 8 + 4096;
  return ncclSuccess;
}

ncclResult_t ncclEpGroupCreate(ncclComm_t comm, const ncclEpConfig_t* config, ncclEpGroup_t* out) {
  if (!out) return fail(ncclInvalidArgument, "group NULL");
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, "comm NULL");
  auto* fc = reinterpret_cast<FakeComm*>(comm);
  auto* g = new ncclEpGroup;
  g->comm = fc;
  g->rank = fc->rank;
  g->n = fc->w->n;
  std::string err = epx::normalizeConfig(config, g->n, &g->cfg);
  if (!err.empty()) {
    delete g;
    const bool ll = config && config->magic == NCCL_EP_CONFIG_MAGIC && config->algorithm == ncclEpAlgoLowLatency;
    return fail(ll ? ncclInvalidUsage : ncclInvalidArgument, "GroupCreate: " + err);  // as group.cc
  }
  {  // as host/src/agree.cc: every rank sees every rank's record and reaches the same verdict
    fc->w->agree[g->rank] = epx::makeAgreedConfig(g->cfg, epx::resolveCtaCount(g->cfg, 132, g->n, 430.0));
    fc->w->bar.wait();
    const std::vector<epx::AgreedConfig> all = fc->w->agree;
    fc->w->bar.wait();
    err = epx::checkAgreement(all);
    if (!err.empty()) {
      delete g;
      return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + err);
    }
  }
  {
    std::lock_guard<std::mutex> l(fc->w->mu);
    int idx = fc->w->groupCount[g->rank]++;
    while (int(fc->w->groups.size()) <= idx) {
      auto gs = std::make_shared<GroupShared>();
      gs->handleCount.assign(g->n, 0);
      fc->w->groups.push_back(gs);
    }
    g->sh = fc->w->groups[idx];
  }
  const size_t rows = size_t(g->n) * g->cfg.maxTokensPerRank, H = g->cfg.hidden, K = g->cfg.topk;
  size_t off = 0;
  auto take = [&](size_t b) {
    size_t o = off;
    off += (b + 255) / 256 * 256;
    return o;
  };
  size_t oX = take(rows * H * 2), oS = take(rows * (H / 128) * 4), oI = take(rows * K * 4), oW = take(rows * K * 4),
         oInfo = take(rows * 8), oC = take(rows * H * 2);
  g->window.assign(off + 256, char(0xcd));
  char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(g->window.data()) + 255) / 256 * 256);
  g->buf.recvX = base + oX;
  g->buf.recvScales = g->cfg.fp8Dispatch ? reinterpret_cast<float*>(base + oS) : nullptr;
  g->buf.recvTopkIdx = reinterpret_cast<int32_t*>(base + oI);
  g->buf.recvTopkWeights = reinterpret_cast<float*>(base + oW);
  g->buf.recvSrcInfo = reinterpret_cast<int32_t*>(base + oInfo);
  g->buf.combineX = base + oC;
  g->buf.rows = int(rows);
  fc->w->bar.wait();
  *out = g;
  return ncclSuccess;
}
ncclResult_t ncclEpGroupDestroy(ncclEpGroup_t g) {
  delete g;
  return ncclSuccess;
}
ncclResult_t ncclEpGroupGetSmCount(ncclEpGroup_t g, int* s) {
  if (!g || !s) return fail(ncclInvalidArgument, "NULL");
  *s = 1;
  return ncclSuccess;
}
ncclResult_t ncclEpGroupGetAsyncError(ncclEpGroup_t g, ncclResult_t* e, char* msg, size_t len) {
  if (!g || !e) return fail(ncclInvalidArgument, "NULL");
  *e = ncclResult_t(g->asyncCode);
  if (msg && len) std::snprintf(msg, len, "%s", g->asyncCode ? g->asyncMsg.c_str() : "no error");
  return ncclSuccess;
}
ncclResult_t ncclEpGroupGetBuffers(ncclEpGroup_t g, ncclEpBuffers_t* b) {
  if (!g || !b) return fail(ncclInvalidArgument, "GetBuffers: NULL");
  *b = g->buf;
  return ncclSuccess;
}

ncclResult_t ncclEpHandleCreate(ncclEpGroup_t g, const ncclEpHandleConfig_t* config, ncclEpHandle_t* out) {
  if (!out) return fail(ncclInvalidArgument, "handle NULL");
  *out = nullptr;
  if (!g) return fail(ncclInvalidArgument, "group NULL");
  auto* h = new ncclEpHandle;
  h->g = g;
  std::string err = epx::normalizeHandleConfig(config, &h->cfg);
  if (!err.empty()) {
    delete h;
    return fail(ncclInvalidArgument, "HandleCreate: " + err);
  }
  h->capacity = epx::capacityRows(g->cfg, g->n, h->cfg);
  {
    std::lock_guard<std::mutex> l(g->sh->mu);
    int idx = g->sh->handleCount[g->rank]++;
    while (int(g->sh->handles.size()) <= idx) {
      auto hs = std::make_shared<HandleShared>();
      hs->routing.resize(g->n);
      hs->x.resize(g->n);
      hs->scales.resize(g->n);
      hs->weights.resize(g->n);
      hs->cw.resize(g->n);
      hs->cx.resize(g->n);
      g->sh->handles.push_back(hs);
    }
    h->sh = g->sh->handles[idx];
  }
  h->shape.nRanks = g->n;
  h->shape.hidden = g->cfg.hidden;
  h->shape.topk = g->cfg.topk;
  h->shape.numExperts = g->cfg.numExperts;
  h->shape.expanded = h->cfg.expanded;
  h->shape.expertAlignment = h->cfg.expanded ? h->cfg.alignment : 1;
  *out = h;
  return ncclSuccess;
}
ncclResult_t ncclEpHandleDestroy(ncclEpHandle_t h) {
  delete h;
  return ncclSuccess;
}
ncclResult_t ncclEpHandleGetCapacity(ncclEpHandle_t h, int* rows) {
  if (!h || !rows) return fail(ncclInvalidArgument, "GetCapacity NULL");
  *rows = int(h->capacity);
  return ncclSuccess;
}
ncclResult_t ncclEpHandleGetCounts(ncclEpHandle_t h, ncclEpCounts_t* c) {
  if (!h || !c) return fail(ncclInvalidArgument, "GetCounts NULL");
  if (h->cfg.capacity) return fail(ncclInvalidUsage, "capacity mode");
  if (!h->laidOut) return fail(ncclInvalidUsage, "no layout");
  c->numRows = h->numRows;
  c->numTokens = h->numRecvTokens;
  c->numLocalExperts = int(h->counts.size());
  c->expertCounts = h->counts.data();
  return ncclSuccess;
}

static epx::HandleView view(ncclEpHandle* h) {
  return epx::HandleView{&h->g->cfg, &h->cfg, h->g->n, h->laidOut, h->numTokens,
                         h->cfg.capacity ? h->capacity : h->numRows, h->dispatched};
}

ncclResult_t ncclEpDispatchLayout(ncclEpHandle_t h, const ncclEpRouting_t* routing, cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "Layout: handle NULL");
  std::string err = epx::checkRouting(h->g->cfg, routing);
  if (!err.empty()) return fail(ncclInvalidArgument, "Layout: " + err);
  const void* ids = routing->topkIdx;
  const bool i64 = routing->topkIdxType == ncclInt64;
  const int T = routing->numTokens;
  h->numTokens = T;
  h->laidOut = true;
  h->dispatched = false;
  auto result = std::make_shared<std::string>();
  enqueue(stream, [h, ids, i64, T, result] {
    ncclEpGroup* g = h->g;
    const int K = g->cfg.topk;
    epx::ref::RankRouting rr;
    rr.numTokens = T;
    for (int i = 0; i < T * K; ++i)
      rr.topkIdx.push_back(i64 ? static_cast<const int64_t*>(ids)[i] : static_cast<const int32_t*>(ids)[i]);
    rr.topkWeights.assign(size_t(T) * K, 0.f);
    std::string bad = epx::ref::validateRouting(h->shape, rr);
    if (!bad.empty()) {  // drop bad slots
      for (int t = 0; t < T; ++t)
        for (int k = 0; k < K; ++k) {
          int64_t& e = rr.topkIdx[size_t(t) * K + k];
          if (e < -1 || e >= g->cfg.numExperts) e = -1;
          for (int j = 0; j < k; ++j)
            if (e >= 0 && rr.topkIdx[size_t(t) * K + j] == e) e = -1;
        }
      if (h->cfg.capacity) {
        g->asyncCode = 4;
        g->asyncMsg = "bad id: " + bad;
      }
      *result = bad;
    }
    h->sh->routing[g->rank] = rr;
    g->comm->w->bar.wait();
    h->routing = h->sh->routing;
    g->comm->w->bar.wait();
    auto d = epx::ref::dispatch(h->shape, h->routing);
    h->numRows = d[g->rank].numRows;
    h->numRecvTokens = d[g->rank].numTokens;
    h->counts.assign(d[g->rank].expertCounts.begin(), d[g->rank].expertCounts.end());
  });
  if (!h->cfg.capacity && !result->empty()) return fail(ncclInvalidArgument, "Layout: " + *result);
  return ncclSuccess;
}

ncclResult_t ncclEpDispatch(ncclEpHandle_t h, const ncclEpDispatchInputs_t* in, const ncclEpDispatchOutputs_t* out,
                            cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "Dispatch: handle NULL");
  std::string err = epx::checkDispatch(view(h), in, out);
  if (!err.empty()) return fail(ncclInvalidArgument, "Dispatch: " + err);
  h->dispatched = true;
  const ncclEpDispatchInputs_t I = *in;
  const ncclEpDispatchOutputs_t O = *out;
  enqueue(stream, [h, I, O] {
    ncclEpGroup* g = h->g;
    const int r = g->rank, n = g->n, K = g->cfg.topk, H = g->cfg.hidden, Le = g->cfg.numExperts / n;
    const bool fp8 = I.xType == ncclFloat8e4m3;
    const size_t rb = size_t(H) * (fp8 ? 1 : 2), sc = size_t(H) / 128;
    h->sh->x[r] = static_cast<const char*>(I.x);
    h->sh->scales[r] = I.xScales;
    h->sh->weights[r] = I.topkWeights;
    g->comm->w->bar.wait();
    auto rt = h->routing;
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < rt[s].topkWeights.size(); ++i)
        rt[s].topkWeights[i] = h->sh->weights[s] ? h->sh->weights[s][i] : 0.f;
    auto d = epx::ref::dispatch(h->shape, rt)[r];
    const bool dedup = !h->cfg.expanded;
    char* rx = static_cast<char*>(O.recvX);
    for (int row = 0; row < d.numRows; ++row) {
      int src = d.srcRank[row], t = d.srcToken[row];
      if (src < 0) {
        if (h->cfg.zeroGaps) {
          std::memset(rx + row * rb, 0, rb);
          if (fp8) std::memset(O.recvScales + row * sc, 0, sc * 4);
        }
        if (O.recvTopkWeights) O.recvTopkWeights[row] = 0.f;
        if (O.recvSrcInfo) O.recvSrcInfo[2 * row] = -1, O.recvSrcInfo[2 * row + 1] = -1;
        continue;
      }
      std::memcpy(rx + row * rb, h->sh->x[src] + size_t(t) * rb, rb);
      if (fp8) std::memcpy(O.recvScales + row * sc, h->sh->scales[src] + size_t(t) * sc, sc * 4);
      auto meta = [&](int32_t* idx, float* w, int32_t* info) {
        if (dedup) {
          for (int k = 0; k < K; ++k) {
            if (idx) idx[size_t(row) * K + k] = d.recvTopkIdx[size_t(row) * K + k];
            if (w) w[size_t(row) * K + k] = d.recvWeights[size_t(row) * K + k];
          }
        } else if (w) {
          w[row] = d.recvWeights[row];
        }
        if (info) info[2 * row] = src, info[2 * row + 1] = t;
      };
      meta(O.recvTopkIdx, O.recvTopkWeights, O.recvSrcInfo);
      if (dedup) {
        meta(g->buf.recvTopkIdx, g->buf.recvTopkWeights, g->buf.recvSrcInfo);
        if (fp8 && g->buf.recvScales) std::memcpy(g->buf.recvScales + row * sc, h->sh->scales[src] + size_t(t) * sc, sc * 4);
      }
    }
    for (int le = 0; le <= Le; ++le) {
      if (O.expertCounts && le < Le) O.expertCounts[le] = d.expertCounts[le];
      if (O.expertOffsets) O.expertOffsets[le] = d.expertOffsets[le];
    }
    if (O.numRecvRows) *O.numRecvRows = d.numRows;
    if (std::getenv("MOCK_BREAK") && std::atoi(std::getenv("MOCK_BREAK")) == 1 && d.numRows > 0) std::memset(rx + (d.numRows - 1) * rb, 0xff, rb);
    g->comm->w->bar.wait();
  });
  return ncclSuccess;
}

ncclResult_t ncclEpCombine(ncclEpHandle_t h, const ncclEpCombineInputs_t* in, const ncclEpCombineOutputs_t* out,
                           cudaStream_t stream) {
  if (!h) return fail(ncclInvalidArgument, "Combine: handle NULL");
  std::string err = epx::checkCombine(view(h), in, out);
  if (!err.empty()) return fail(ncclInvalidArgument, "Combine: " + err);
  if (err = epx::checkCombineAfterDispatch(view(h)); !err.empty()) return fail(ncclInvalidUsage, "Combine: " + err);
  const ncclEpCombineInputs_t I = *in;
  const ncclEpCombineOutputs_t O = *out;
  enqueue(stream, [h, I, O] {
    ncclEpGroup* g = h->g;
    const int r = g->rank, n = g->n, K = g->cfg.topk, H = g->cfg.hidden;
    h->sh->cx[r] = static_cast<const uint16_t*>(I.x);
    h->sh->cw[r] = I.topkWeights;
    g->comm->w->bar.wait();
    auto disp = epx::ref::dispatch(h->shape, h->routing);
    std::vector<std::vector<uint16_t>> eo(n), b0, b1;
    for (int d = 0; d < n; ++d) eo[d].assign(h->sh->cx[d], h->sh->cx[d] + size_t(disp[d].numRows) * H);
    const int T = h->routing[r].numTokens;
    if (I.bias0) {
      b0.resize(n);
      b0[r].assign(static_cast<const uint16_t*>(I.bias0), static_cast<const uint16_t*>(I.bias0) + size_t(T) * H);
    }
    if (I.bias1) {
      b1.resize(n);
      b1[r].assign(static_cast<const uint16_t*>(I.bias1), static_cast<const uint16_t*>(I.bias1) + size_t(T) * H);
    }
    auto res = epx::ref::combine(h->shape, h->routing, disp, eo, b0, b1);
    if (std::getenv("MOCK_BREAK") && std::atoi(std::getenv("MOCK_BREAK")) == 2 && !res[r].empty()) res[r][res[r].size() / 2] += 2;
    std::memcpy(O.out, res[r].data(), res[r].size() * 2);
    if (O.combinedTopkWeights) {
      std::vector<std::vector<float>> w(n);
      for (int d = 0; d < n; ++d) {
        size_t cnt = size_t(disp[d].numRows) * (h->cfg.expanded ? 1 : K);
        if (h->sh->cw[d]) w[d].assign(h->sh->cw[d], h->sh->cw[d] + cnt);
        else w[d].assign(cnt, 0.f);
      }
      auto cw = epx::ref::combineWeights(h->shape, h->routing, disp, w);
      std::memcpy(O.combinedTopkWeights, cw[r].data(), cw[r].size() * 4);
    }
    g->comm->w->bar.wait();
  });
  return ncclSuccess;
}
}  // extern "C"
void mockEnqueue(cudaStream_t s, std::function<void()> f) { enqueue(s, std::move(f)); }
