// epx runner (see epx_runner.h).
#include "epx_runner.h"

#include <functional>

#include "data.h"
#include "randgen.h"
#include "epx/testing/stack_dump.h"

namespace epxbench {

ncclEpGroup_t createGroup(const epx::testing::RankContext& ctx, const BenchShape& s, int sms, bool fp8,
                          int hybridNodeSize) {
  ncclEpConfig_t cfg = NCCL_EP_CONFIG_INITIALIZER;
  cfg.maxTokensPerRank = s.tokens;
  cfg.hidden = s.hidden;
  cfg.topk = s.topk;
  cfg.numExperts = s.experts;
  cfg.fp8Dispatch = fp8 ? 1 : 0;
  cfg.smBudget = sms;
  if (hybridNodeSize > 0) {
    cfg.forwarding = ncclEpForwardHybrid;
    cfg.forwardNodeSize = hybridNodeSize;
  }
  ncclEpGroup_t g = nullptr;
  epx::testing::setPhase("ncclEpGroupCreate");
  BENCH_EP(ncclEpGroupCreate(ctx.comm, &cfg, &g));
  epx::testing::setPhase("epx: after group create");
  return g;
}

ncclEpHandle_t createHandle(ncclEpGroup_t group, const EpxRunSpec& spec) {
  ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
  hc.layout = spec.layout;
  hc.mode = spec.mode;
  hc.expertAlignment = spec.align;
  hc.zeroGaps = 0;
  ncclEpHandle_t h = nullptr;
  BENCH_EP(ncclEpHandleCreate(group, &hc, &h));
  return h;
}

namespace {

template <class T>
std::vector<T> download(const void* p, size_t count) {
  std::vector<T> v(count);
  if (count) BENCH_CUDA(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

struct EpxRank::Impl {
  ncclEpGroup_t group;
  ncclEpHandle_t handle;
  BenchShape s;
  EpxRunSpec spec;
  const Options& opt;
  int cap = 0;
  bool dedup = true;
  size_t nSc = 0;

  // Inputs (always ours) and the small outputs (always ours).
  DevBuf topk, w, x, x8, sc, counts, offsets, numRows, out;
  // User-mode outputs (unused in window mode).
  DevBuf uRecvX, uRecvX8, uRecvSc, uRecvW, uRecvIdx, uSrcInfo;

  ncclEpRouting_t routing{};
  ncclEpDispatchInputs_t in16{}, in8{};
  ncclEpDispatchOutputs_t out16{}, out8{};
  ncclEpCombineInputs_t cin{};
  ncclEpCombineOutputs_t cout{};
  void* combineX = nullptr;  // where combine input rows live (window combineX or uRecvX)
  size_t combineRows = 0;

  Impl(ncclEpGroup_t g, ncclEpHandle_t h, const BenchShape& shape, const EpxRunSpec& sp, const Options& o)
      : group(g), handle(h), s(shape), spec(sp), opt(o) {
    const int T = s.tokens, H = s.hidden, K = s.topk, Le = s.expertsPerRank();
    dedup = spec.layout == ncclEpLayoutDeduplicated;
    BENCH_REQUIRE(dedup || !spec.window, "window buffers need the deduplicated layout");
    nSc = size_t(H / 128);
    BENCH_EP(ncclEpHandleGetCapacity(handle, &cap));
    BENCH_REQUIRE(cap >= 0, "negative capacity");
    const size_t R = size_t(cap);

    topk.alloc(size_t(T) * K * (opt.idx64 ? 8 : 4));
    w.alloc(size_t(T) * K * 4);
    x.alloc(size_t(T) * H * 2);
    if (spec.fp8) {
      x8.alloc(size_t(T) * H);
      sc.alloc(size_t(T) * nSc * 4);
    }
    counts.alloc(size_t(Le) * 4);
    offsets.alloc(size_t(Le + 1) * 4);
    numRows.alloc(16);
    out.alloc(size_t(T) * H * 2);

    routing.topkIdx = topk.get();
    routing.topkIdxType = opt.idx64 ? ncclInt64 : ncclInt32;
    routing.numTokens = T;

    in16.x = x.get();
    in16.xType = ncclBfloat16;
    in16.xScales = nullptr;
    in16.topkWeights = w.as<float>();
    in16.hidden = H;  // shape checks (ep.h: 0 = unchecked)
    in8 = in16;
    if (spec.fp8) {
      in8.x = x8.get();
      in8.xType = ncclFloat8e4m3;
      in8.xScales = sc.as<float>();
    }

    out16.expertCounts = counts.as<int32_t>();
    out16.expertOffsets = offsets.as<int32_t>();
    out16.numRecvRows = numRows.as<int32_t>();
    out16.numRows = cap;
    if (spec.window) {
      ncclEpBuffers_t wb{};
      BENCH_EP(ncclEpGroupGetBuffers(group, &wb));
      BENCH_REQUIRE(wb.rows >= cap, "window has fewer rows than the handle's capacity");
      out16.recvX = wb.recvX;
      out16.recvTopkWeights = wb.recvTopkWeights;
      out16.recvTopkIdx = wb.recvTopkIdx;
      out16.recvSrcInfo = wb.recvSrcInfo;
      out8 = out16;
      out8.recvScales = wb.recvScales;  // FP8 rows are packed into recvX (row stride = hidden bytes)
      combineX = wb.combineX;
      combineRows = size_t(wb.rows);
    } else {
      uRecvX.alloc(std::max<size_t>(R * H * 2, 16));
      uRecvW.alloc(std::max<size_t>(R * (dedup ? K : 1) * 4, 16));
      if (dedup) uRecvIdx.alloc(std::max<size_t>(R * K * 4, 16));
      uSrcInfo.alloc(std::max<size_t>(R * 2 * 4, 16));
      if (spec.fp8) {
        uRecvX8.alloc(std::max<size_t>(R * H, 16));
        uRecvSc.alloc(std::max<size_t>(R * nSc * 4, 16));
      }
      out16.recvX = uRecvX.get();
      out16.recvTopkWeights = uRecvW.as<float>();
      out16.recvTopkIdx = dedup ? uRecvIdx.as<int32_t>() : nullptr;
      out16.recvSrcInfo = nullptr;  // only the check run asks for it
      out8 = out16;
      out8.recvX = uRecvX8.get();
      out8.recvScales = uRecvSc.as<float>();
      combineX = uRecvX.get();  // identity expert: combine what BF16 dispatch delivered
      combineRows = R;
    }
    if (!spec.fp8) out8 = {};

    cin.x = combineX;
    cin.xType = ncclBfloat16;
    cin.numRows = cap;
    cin.hidden = H;
    cout.out = out.get();
    cout.numTokens = T;
  }

  void upload(const epx::ref::RankRouting& r, cudaStream_t st) {
    const size_t n = size_t(s.tokens) * s.topk;
    BENCH_REQUIRE(r.topkIdx.size() == n && r.topkWeights.size() == n, "routing size mismatch");
    if (opt.idx64) {
      BENCH_CUDA(cudaMemcpyAsync(topk.get(), r.topkIdx.data(), n * 8, cudaMemcpyHostToDevice, st));
    } else {
      std::vector<int32_t> v(r.topkIdx.begin(), r.topkIdx.end());
      BENCH_CUDA(cudaMemcpyAsync(topk.get(), v.data(), n * 4, cudaMemcpyHostToDevice, st));
      BENCH_CUDA(cudaStreamSynchronize(st));  // v goes out of scope
    }
    BENCH_CUDA(cudaMemcpyAsync(w.get(), r.topkWeights.data(), n * 4, cudaMemcpyHostToDevice, st));
    BENCH_CUDA(cudaStreamSynchronize(st));
  }

  void fillInputs(uint64_t seed, int rank, cudaStream_t st) {
    const size_t elems = size_t(s.tokens) * s.hidden;
    fillBf16(x.as<uint16_t>(), elems, streamKey(seed, kTensorX, rank), st);
    if (spec.fp8) {
      fillFp8(x8.as<uint8_t>(), elems, streamKey(seed, kTensorX8, rank), st);
      fillScales(sc.as<float>(), size_t(s.tokens) * nSc, streamKey(seed, kTensorScales, rank), st);
    }
  }

  void poison(void* p, int byte, size_t bytes, cudaStream_t st) {
    if (p && bytes) BENCH_CUDA(cudaMemsetAsync(p, byte, bytes, st));
  }
};

EpxRank::EpxRank(ncclEpGroup_t group, ncclEpHandle_t handle, const BenchShape& s, const EpxRunSpec& spec,
                 const Options& opt)
    : p_(new Impl(group, handle, s, spec, opt)) {}

EpxRank::~EpxRank() = default;

EpxTimes EpxRank::timed(const epx::testing::RankContext& ctx, const epx::ref::RankRouting& routing,
                        uint64_t dataSeed) {
  Impl& m = *p_;
  cudaStream_t st = ctx.stream;
  m.upload(routing, st);
  m.fillInputs(dataSeed, ctx.rank, st);
  if (m.spec.window)  // expert output in place (its values do not matter for timing)
    fillBf16(static_cast<uint16_t*>(m.combineX), m.combineRows * m.s.hidden,
             streamKey(dataSeed, kTensorExpertOut, ctx.rank), st);
  BENCH_CUDA(cudaStreamSynchronize(st));

  const int total = m.opt.warmup + m.opt.iters;
  epx::testing::setPhase("epx: timed loop (enqueue, then stream sync)");
  // Each iteration times four ops, each between its own start and end events; with --sync-start
  // an untimed all-reduce of one value before each start lines the ranks up.
  constexpr size_t kOps = 4, kEventsPerIter = 2 * kOps;
  EventSeq ev(size_t(total) * kEventsPerIter);
  const SyncStart syncStart(m.opt.syncStart);
  for (int it = 0; it < total; ++it) {
    const size_t e = size_t(it) * kEventsPerIter;
    auto timedOp = [&](size_t op, auto&& call) {
      syncStart(ctx.comm, st);
      ev.record(e + 2 * op, st);
      call();
      ev.record(e + 2 * op + 1, st);
    };
    timedOp(0, [&] { BENCH_EP(ncclEpDispatchLayout(m.handle, &m.routing, st)); });
    timedOp(1, [&] { BENCH_EP(ncclEpDispatch(m.handle, &m.in16, &m.out16, st)); });
    timedOp(2, [&] { BENCH_EP(ncclEpCombine(m.handle, &m.cin, &m.cout, st)); });
    if (m.spec.fp8) timedOp(3, [&] { BENCH_EP(ncclEpDispatch(m.handle, &m.in8, &m.out8, st)); });
  }
  BENCH_CUDA(cudaStreamSynchronize(st));
  epx::testing::setPhase("epx: after timed loop");
  std::vector<double> lay, d16, comb, d8;
  for (int it = m.opt.warmup; it < total; ++it) {
    const size_t e = size_t(it) * kEventsPerIter;
    lay.push_back(ev.us(e + 0, e + 1));
    d16.push_back(ev.us(e + 2, e + 3));
    comb.push_back(ev.us(e + 4, e + 5));
    if (m.spec.fp8) d8.push_back(ev.us(e + 6, e + 7));
  }
  EpxTimes t;
  t.layoutUs = median(lay);
  t.bf16Us = median(d16);
  t.combineUs = median(comb);
  t.fp8Us = m.spec.fp8 ? median(d8) : 0.0;
  return t;
}

EpxGinCalls EpxRank::ginPerCall(const epx::testing::RankContext& ctx, const GinStatsReader& gin) {
  Impl& m = *p_;
  cudaStream_t st = ctx.stream;
  epx::testing::setPhase("epx: GIN traffic per call");
  // The reset and the snapshot bracket one call; the sync makes this rank's puts of that call
  // complete locally (the kernel waits for them), so every one of them is counted.
  auto one = [&](const std::function<void()>& call) {
    BENCH_CUDA(cudaStreamSynchronize(st));
    gin.reset();
    call();
    BENCH_CUDA(cudaStreamSynchronize(st));
    return gin.total();
  };
  EpxGinCalls g;
  g.measured = gin.available();
  g.layout = one([&] { BENCH_EP(ncclEpDispatchLayout(m.handle, &m.routing, st)); });
  g.bf16 = one([&] { BENCH_EP(ncclEpDispatch(m.handle, &m.in16, &m.out16, st)); });
  g.combine = one([&] { BENCH_EP(ncclEpCombine(m.handle, &m.cin, &m.cout, st)); });
  if (m.spec.fp8) g.fp8 = one([&] { BENCH_EP(ncclEpDispatch(m.handle, &m.in8, &m.out8, st)); });
  return g;
}

EpxCapture EpxRank::check(const epx::testing::RankContext& ctx, const epx::ref::RankRouting& routing,
                          uint64_t dataSeed) {
  Impl& m = *p_;
  const int T = m.s.tokens, H = m.s.hidden, K = m.s.topk, Le = m.s.expertsPerRank(), me = ctx.rank;
  const size_t R = size_t(m.cap), nSc = m.nSc;
  cudaStream_t st = ctx.stream;
  EpxCapture c;
  c.capacity = m.cap;

  m.upload(routing, st);
  m.fillInputs(dataSeed, me, st);
  ncclEpDispatchOutputs_t o16 = m.out16;
  if (!m.spec.window) o16.recvSrcInfo = m.uSrcInfo.as<int32_t>();
  // Poison every output (NaN for floats, 0x7f7f7f7f for ints).
  m.poison(o16.recvX, 0xff, R * H * 2, st);
  m.poison(o16.recvTopkWeights, 0xff, R * (m.dedup ? K : 1) * 4, st);
  m.poison(o16.recvTopkIdx, 0x7f, R * K * 4, st);
  m.poison(o16.recvSrcInfo, 0x7f, R * 2 * 4, st);
  m.poison(m.counts.get(), 0x7f, m.counts.bytes(), st);
  m.poison(m.offsets.get(), 0x7f, m.offsets.bytes(), st);
  m.poison(m.numRows.get(), 0x7f, m.numRows.bytes(), st);
  m.poison(m.out.get(), 0xff, m.out.bytes(), st);
  if (m.spec.fp8 && !m.spec.window) m.poison(m.out8.recvX, 0xff, R * H, st);
  if (m.spec.fp8) m.poison(m.out8.recvScales, 0xff, R * nSc * 4, st);

  BENCH_EP(ncclEpDispatchLayout(m.handle, &m.routing, st));
  if (m.spec.mode == ncclEpModeExact) {
    ncclEpCounts_t cnt{};
    BENCH_EP(ncclEpHandleGetCounts(m.handle, &cnt));
    c.exactRows = cnt.numRows;
    c.exactTokens = cnt.numTokens;
    if (cnt.expertCounts && cnt.numLocalExperts > 0)
      c.exactCounts.assign(cnt.expertCounts, cnt.expertCounts + cnt.numLocalExperts);
  }
  BENCH_EP(ncclEpDispatch(m.handle, &m.in16, &o16, st));
  BENCH_CUDA(cudaStreamSynchronize(st));

  int v = -1;
  BENCH_CUDA(cudaMemcpy(&v, m.numRows.get(), sizeof(int), cudaMemcpyDeviceToHost));
  c.numRows = v;
  const bool rowsOk = v >= 0 && size_t(v) <= R;
  if (!rowsOk) c.error = "numRecvRows " + std::to_string(v) + " outside [0, capacity " + std::to_string(m.cap) + "]";
  const size_t rows = rowsOk ? size_t(v) : 0;
  c.x = download<uint16_t>(o16.recvX, rows * H);
  c.weights = download<float>(o16.recvTopkWeights, rows * (m.dedup ? K : 1));
  if (m.dedup) c.topkIdx = download<int32_t>(o16.recvTopkIdx, rows * K);
  c.srcInfo = download<int32_t>(o16.recvSrcInfo, rows * 2);
  c.counts = download<int32_t>(m.counts.get(), size_t(Le));
  c.offsets = download<int32_t>(m.offsets.get(), size_t(Le) + 1);

  // Expert outputs: fresh values in every row (gap and spare rows included), then combine.
  fillBf16(static_cast<uint16_t*>(m.combineX), m.combineRows * H, streamKey(dataSeed, kTensorExpertOut, me), st);
  BENCH_EP(ncclEpCombine(m.handle, &m.cin, &m.cout, st));
  BENCH_CUDA(cudaStreamSynchronize(st));
  c.out = download<uint16_t>(m.out.get(), size_t(T) * H);
  if (m.spec.fp8) {
    if (m.spec.window) m.poison(m.out8.recvX, 0xff, R * H, st);  // BF16 rows were downloaded above
    BENCH_EP(ncclEpDispatch(m.handle, &m.in8, &m.out8, st));
    BENCH_CUDA(cudaStreamSynchronize(st));
    c.x8 = download<uint8_t>(m.out8.recvX, rows * H);
    c.scales = download<float>(m.out8.recvScales, rows * nSc);
  }
  c.valid = rowsOk;
  return c;
}

}  // namespace epxbench
