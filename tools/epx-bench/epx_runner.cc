// epx runner (see epx_runner.h).
#include "epx_runner.h"

#include "data.h"
#include "randgen.h"

namespace epxbench {

ncclEpGroup_t createGroup(const epx::testing::RankContext& ctx, const BenchShape& s, int sms, bool fp8) {
  ncclEpConfig_t cfg = NCCL_EP_CONFIG_INITIALIZER;
  cfg.maxTokensPerRank = s.tokens;
  cfg.hidden = s.hidden;
  cfg.topk = s.topk;
  cfg.numExperts = s.experts;
  cfg.fp8Dispatch = fp8 ? 1 : 0;
  cfg.smBudget = sms;
  ncclEpGroup_t g = nullptr;
  BENCH_EP(ncclEpGroupCreate(ctx.comm, &cfg, &g));
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

struct RankBuffers {
  DevBuf topk, w, x, x8, sc;                                          // inputs
  DevBuf recvX, recvX8, recvSc, recvW, recvIdx, srcInfo, counts, offsets, numRows, out;  // outputs
};

void uploadRouting(const epx::ref::RankRouting& r, const BenchShape& s, bool idx64, RankBuffers& b,
                   cudaStream_t st) {
  const size_t n = size_t(s.tokens) * s.topk;
  BENCH_REQUIRE(r.topkIdx.size() == n && r.topkWeights.size() == n, "routing size mismatch");
  if (idx64) {
    BENCH_CUDA(cudaMemcpyAsync(b.topk.get(), r.topkIdx.data(), n * 8, cudaMemcpyHostToDevice, st));
  } else {
    std::vector<int32_t> v(r.topkIdx.begin(), r.topkIdx.end());
    BENCH_CUDA(cudaMemcpyAsync(b.topk.get(), v.data(), n * 4, cudaMemcpyHostToDevice, st));
    BENCH_CUDA(cudaStreamSynchronize(st));  // v goes out of scope
  }
  BENCH_CUDA(cudaMemcpyAsync(b.w.get(), r.topkWeights.data(), n * 4, cudaMemcpyHostToDevice, st));
  BENCH_CUDA(cudaStreamSynchronize(st));
}

void fillInputs(const BenchShape& s, bool fp8, uint64_t seed, int rank, RankBuffers& b, cudaStream_t st) {
  const size_t elems = size_t(s.tokens) * s.hidden;
  fillBf16(b.x.as<uint16_t>(), elems, streamKey(seed, kTensorX, rank), st);
  if (fp8) {
    fillFp8(b.x8.as<uint8_t>(), elems, streamKey(seed, kTensorX8, rank), st);
    fillScales(b.sc.as<float>(), size_t(s.tokens) * (s.hidden / 128), streamKey(seed, kTensorScales, rank), st);
  }
}

template <class T>
std::vector<T> download(const DevBuf& b, size_t count) {
  std::vector<T> v(count);
  if (count) BENCH_CUDA(cudaMemcpy(v.data(), b.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

EpxRankResult runEpx(const epx::testing::RankContext& ctx, ncclEpHandle_t handle, const BenchShape& s,
                     const EpxRunSpec& spec, const epx::ref::RankRouting& timed,
                     const epx::ref::RankRouting* check, const Options& opt, uint64_t timedSeed,
                     uint64_t checkSeed) {
  const int T = s.tokens, H = s.hidden, K = s.topk, Le = s.expertsPerRank(), me = ctx.rank;
  const bool dedup = spec.layout == ncclEpLayoutDeduplicated;
  const bool fp8 = spec.fp8;
  const size_t nSc = size_t(H / 128);
  cudaStream_t st = ctx.stream;

  int cap = 0;
  BENCH_EP(ncclEpHandleGetCapacity(handle, &cap));
  BENCH_REQUIRE(cap >= 0, "negative capacity");
  const size_t R = size_t(cap);

  RankBuffers b;
  b.topk.alloc(size_t(T) * K * (opt.idx64 ? 8 : 4));
  b.w.alloc(size_t(T) * K * 4);
  b.x.alloc(size_t(T) * H * 2);
  b.recvX.alloc(std::max<size_t>(R * H * 2, 16));
  b.recvW.alloc(std::max<size_t>(R * (dedup ? K : 1) * 4, 16));
  if (dedup) b.recvIdx.alloc(std::max<size_t>(R * K * 4, 16));
  b.srcInfo.alloc(std::max<size_t>(R * 2 * 4, 16));
  b.counts.alloc(size_t(Le) * 4);
  b.offsets.alloc(size_t(Le + 1) * 4);
  b.numRows.alloc(16);
  b.out.alloc(size_t(T) * H * 2);
  if (fp8) {
    b.x8.alloc(size_t(T) * H);
    b.sc.alloc(size_t(T) * nSc * 4);
    b.recvX8.alloc(std::max<size_t>(R * H, 16));
    b.recvSc.alloc(std::max<size_t>(R * nSc * 4, 16));
  }

  ncclEpRouting_t routing{};
  routing.topkIdx = b.topk.get();
  routing.topkIdxType = opt.idx64 ? ncclInt64 : ncclInt32;
  routing.numTokens = T;

  ncclEpDispatchInputs_t in16{};
  in16.x = b.x.get();
  in16.xType = ncclBfloat16;
  in16.xScales = nullptr;
  in16.topkWeights = b.w.as<float>();
  in16.hidden = H;  // shape checks (ep.h: 0 = unchecked)
  ncclEpDispatchInputs_t in8 = in16;
  if (fp8) {
    in8.x = b.x8.get();
    in8.xType = ncclFloat8e4m3;
    in8.xScales = b.sc.as<float>();
  }

  ncclEpDispatchOutputs_t out16{};
  out16.recvX = b.recvX.get();
  out16.recvScales = nullptr;
  out16.recvTopkWeights = b.recvW.as<float>();
  out16.recvTopkIdx = dedup ? b.recvIdx.as<int32_t>() : nullptr;
  out16.recvSrcInfo = nullptr;
  out16.expertCounts = b.counts.as<int32_t>();
  out16.expertOffsets = b.offsets.as<int32_t>();
  out16.numRecvRows = b.numRows.as<int32_t>();
  out16.numRows = cap;
  ncclEpDispatchOutputs_t out8 = out16;
  if (fp8) {
    out8.recvX = b.recvX8.get();
    out8.recvScales = b.recvSc.as<float>();
  }

  ncclEpCombineInputs_t cin{};
  cin.x = b.recvX.get();  // identity expert: combine what dispatch delivered
  cin.xType = ncclBfloat16;
  cin.numRows = cap;
  cin.hidden = H;
  ncclEpCombineOutputs_t cout{};
  cout.out = b.out.get();
  cout.numTokens = T;

  // --- timed loop ---
  uploadRouting(timed, s, opt.idx64, b, st);
  fillInputs(s, fp8, timedSeed, me, b, st);
  BENCH_CUDA(cudaStreamSynchronize(st));
  const int total = opt.warmup + opt.iters;
  EventSeq ev(size_t(total) * 5);
  for (int it = 0; it < total; ++it) {
    const size_t e = size_t(it) * 5;
    ev.record(e + 0, st);
    BENCH_EP(ncclEpDispatchLayout(handle, &routing, st));
    ev.record(e + 1, st);
    BENCH_EP(ncclEpDispatch(handle, &in16, &out16, st));
    ev.record(e + 2, st);
    BENCH_EP(ncclEpCombine(handle, &cin, &cout, st));
    ev.record(e + 3, st);
    if (fp8) BENCH_EP(ncclEpDispatch(handle, &in8, &out8, st));
    ev.record(e + 4, st);
  }
  BENCH_CUDA(cudaStreamSynchronize(st));
  std::vector<double> lay, d16, comb, d8;
  for (int it = opt.warmup; it < total; ++it) {
    const size_t e = size_t(it) * 5;
    lay.push_back(ev.us(e + 0, e + 1));
    d16.push_back(ev.us(e + 1, e + 2));
    comb.push_back(ev.us(e + 2, e + 3));
    if (fp8) d8.push_back(ev.us(e + 3, e + 4));
  }
  EpxRankResult res;
  res.layoutUs = median(lay);
  res.bf16Us = median(d16);
  res.combineUs = median(comb);
  res.fp8Us = fp8 ? median(d8) : 0.0;
  if (!check) return res;

  // --- check run: fresh routing and data, outputs poisoned first ---
  EpxCapture& c = res.cap;
  c.capacity = cap;
  uploadRouting(*check, s, opt.idx64, b, st);
  fillInputs(s, fp8, checkSeed, me, b, st);
  BENCH_CUDA(cudaMemsetAsync(b.recvX.get(), 0xff, b.recvX.bytes(), st));  // BF16 NaN
  BENCH_CUDA(cudaMemsetAsync(b.recvW.get(), 0xff, b.recvW.bytes(), st));  // FP32 NaN
  if (dedup) BENCH_CUDA(cudaMemsetAsync(b.recvIdx.get(), 0x7f, b.recvIdx.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(b.srcInfo.get(), 0x7f, b.srcInfo.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(b.counts.get(), 0x7f, b.counts.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(b.offsets.get(), 0x7f, b.offsets.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(b.numRows.get(), 0x7f, b.numRows.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(b.out.get(), 0xff, b.out.bytes(), st));
  if (fp8) {
    BENCH_CUDA(cudaMemsetAsync(b.recvX8.get(), 0xff, b.recvX8.bytes(), st));  // e4m3 NaN
    BENCH_CUDA(cudaMemsetAsync(b.recvSc.get(), 0xff, b.recvSc.bytes(), st));
  }
  ncclEpDispatchOutputs_t chk16 = out16;
  chk16.recvSrcInfo = b.srcInfo.as<int32_t>();

  BENCH_EP(ncclEpDispatchLayout(handle, &routing, st));
  if (spec.mode == ncclEpModeExact) {
    ncclEpCounts_t cnt{};
    BENCH_EP(ncclEpHandleGetCounts(handle, &cnt));
    c.exactRows = cnt.numRows;
    c.exactTokens = cnt.numTokens;
    if (cnt.expertCounts && cnt.numLocalExperts > 0)
      c.exactCounts.assign(cnt.expertCounts, cnt.expertCounts + cnt.numLocalExperts);
  }
  BENCH_EP(ncclEpDispatch(handle, &in16, &chk16, st));
  BENCH_CUDA(cudaStreamSynchronize(st));

  const size_t rows = [&] {
    int v = -1;
    BENCH_CUDA(cudaMemcpy(&v, b.numRows.get(), sizeof(int), cudaMemcpyDeviceToHost));
    c.numRows = v;
    return v >= 0 && v <= cap ? size_t(v) : size_t(0);
  }();
  bool rowsOk = c.numRows >= 0 && c.numRows <= cap;
  if (!rowsOk) c.error = "numRecvRows " + std::to_string(c.numRows) + " outside [0, capacity " + std::to_string(cap) + "]";
  c.x = download<uint16_t>(b.recvX, rows * H);
  c.weights = download<float>(b.recvW, rows * (dedup ? K : 1));
  if (dedup) c.topkIdx = download<int32_t>(b.recvIdx, rows * K);
  c.srcInfo = download<int32_t>(b.srcInfo, rows * 2);
  c.counts = download<int32_t>(b.counts, size_t(Le));
  c.offsets = download<int32_t>(b.offsets, size_t(Le) + 1);

  // Expert outputs: fresh values in every row (gap and capacity rows included), then combine.
  fillBf16(b.recvX.as<uint16_t>(), R * H, streamKey(checkSeed, kTensorExpertOut, me), st);
  BENCH_EP(ncclEpCombine(handle, &cin, &cout, st));
  if (fp8) BENCH_EP(ncclEpDispatch(handle, &in8, &out8, st));
  BENCH_CUDA(cudaStreamSynchronize(st));
  c.out = download<uint16_t>(b.out, size_t(T) * H);
  if (fp8) {
    c.x8 = download<uint8_t>(b.recvX8, rows * H);
    c.scales = download<float>(b.recvSc, rows * nSc);
  }
  c.valid = rowsOk;
  return res;
}

}  // namespace epxbench
