// Memory floor kernels and timing (memory_floor.h). Plain code on purpose: this is the yardstick,
// not epx's implementation.
#include <cuda_bf16.h>

#include "common.h"
#include "memory_floor.h"

namespace epxbench {

namespace {

constexpr int kThreads = 512;
constexpr int kWarp = 32;
constexpr int kCopyUnroll = 4;  // 16-byte vectors per lane loaded before they are stored
constexpr int kSumRows = 8;     // rows whose vectors are loaded together before they are summed
constexpr int kSumUnroll = 2;   // vectors per lane and row in flight
constexpr int kWarmup = 5;
constexpr int kMaxFanout = 32;  // top-k <= 32: output rows per received row

__global__ void __launch_bounds__(kThreads) expandRows(const int4* __restrict__ src, int4* dst,
                                                       const int* __restrict__ first,
                                                       const int* __restrict__ outRows, int rows, int vecs) {
  const int lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
  for (int j = blockIdx.x * warps + threadIdx.x / kWarp; j < rows; j += gridDim.x * warps) {
    const int4* s = src + size_t(j) * vecs;
    const int b = first[j], n = first[j + 1] - b;
    for (int i = lane; i < vecs; i += kCopyUnroll * kWarp) {
      int4 v[kCopyUnroll];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u)
        if (i + u * kWarp < vecs) v[u] = s[i + u * kWarp];
      for (int o = 0; o < n; ++o) {
        int4* d = dst + size_t(outRows[b + o]) * vecs;
#pragma unroll
        for (int u = 0; u < kCopyUnroll; ++u)
          if (i + u * kWarp < vecs) d[i + u * kWarp] = v[u];
      }
    }
  }
}

__device__ __forceinline__ void addBf16x8(float* acc, const int4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 f = __bfloat1622float2(h[q]);
    acc[2 * q] += f.x;
    acc[2 * q + 1] += f.y;
  }
}

// Zeros that pad a row list to a whole batch (adding +0 to an FP32 sum that started at +0 changes
// nothing), so the batch's loads need no per-row predicate (measured: about 10 % faster).
constexpr int kMaxRowVecs = 65536 * 2 / 16;
__device__ int4 gZeros[kMaxRowVecs];

// Deduplicated layout (one row per received row): the sum is the row itself (BF16 -> FP32 ->
// BF16 is exact): a copy, as many vectors per lane in flight as a batch of a sum.
__global__ void __launch_bounds__(kThreads) copyRows(const int4* __restrict__ ex, int4* dst,
                                                     const int* __restrict__ first,
                                                     const int* __restrict__ outRows, int rows, int vecs) {
  constexpr int kUnroll = kSumRows * kSumUnroll;
  const int lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
  for (int j = blockIdx.x * warps + threadIdx.x / kWarp; j < rows; j += gridDim.x * warps) {
    const int4* src = ex + size_t(outRows[first[j]]) * vecs;
    int4* d = dst + size_t(j) * vecs;
    for (int i = lane; i < vecs; i += kUnroll * kWarp) {
      int4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < vecs) v[u] = src[i + u * kWarp];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < vecs) d[i + u * kWarp] = v[u];
    }
  }
}

// acc += one batch of kSumRows rows at tile i, every load issued before the first add.
__device__ __forceinline__ void addBatch(float (&acc)[kSumUnroll][8], const int4* const (&src)[kSumRows], int i, int vecs) {
  int4 v[kSumRows][kSumUnroll];
#pragma unroll
  for (int r = 0; r < kSumRows; ++r)
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u)
      if (i + u * kWarp < vecs) v[r][u] = src[r][i + u * kWarp];
#pragma unroll
  for (int r = 0; r < kSumRows; ++r)
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u)
      if (i + u * kWarp < vecs) addBf16x8(acc[u], v[r][u]);
}

__global__ void __launch_bounds__(kThreads) sumRows(const int4* __restrict__ ex, int4* dst,
                                                    const int* __restrict__ first,
                                                    const int* __restrict__ outRows, int rows, int vecs) {
  const int lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
  for (int j = blockIdx.x * warps + threadIdx.x / kWarp; j < rows; j += gridDim.x * warps) {
    const int b = first[j], n = min(first[j + 1] - b, kMaxFanout);
    const int myRow = lane < n ? outRows[b + lane] : 0;
    int4* d = dst + size_t(j) * vecs;
    // Row pointers of a batch, the first one computed once per received row (in registers).
    auto batch = [&](int o0, const int4* (&src)[kSumRows]) {
#pragma unroll
      for (int r = 0; r < kSumRows; ++r) {
        const int row = __shfl_sync(0xffffffffu, myRow, (o0 + r) % kWarp);
        src[r] = o0 + r < n ? ex + size_t(row) * vecs : gZeros;
      }
    };
    const int4* head[kSumRows];
    batch(0, head);
    for (int i = lane; i < vecs; i += kSumUnroll * kWarp) {
      float acc[kSumUnroll][8] = {};
      addBatch(acc, head, i, vecs);
      for (int o0 = kSumRows; o0 < n; o0 += kSumRows) {
        const int4* src[kSumRows];
        batch(o0, src);
        addBatch(acc, src, i, vecs);
      }
#pragma unroll
      for (int u = 0; u < kSumUnroll; ++u) {
        if (i + u * kWarp >= vecs) continue;
        int4 out;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int q = 0; q < 4; ++q) h[q] = __floats2bfloat162_rn(acc[u][2 * q], acc[u][2 * q + 1]);
        d[i + u * kWarp] = out;
      }
    }
  }
}

template <class F>
double medianUs(cudaStream_t st, int iters, F&& launch) {
  EventSeq ev(2);
  std::vector<double> t;
  for (int i = 0; i < kWarmup + iters; ++i) {
    ev.record(0, st);
    launch();
    ev.record(1, st);
    BENCH_CUDA(cudaStreamSynchronize(st));
    if (i >= kWarmup) t.push_back(ev.us(0, 1));
  }
  BENCH_CUDA(cudaGetLastError());
  return median(t);
}

}  // namespace

MemFloorTimes runMemFloor(const epx::testing::RankContext& ctx, const MemFloorWork& w, int ctas, int iters) {
  MemFloorTimes ft;
  ft.ctas = ctas;
  const int64_t rows = w.receivedRows(), outs = w.outputRows();
  if (rows == 0 || ctas <= 0) return ft;
  const cudaStream_t st = ctx.stream;
  const size_t rb = size_t(w.rowBytes);
  const int vecs = int(rb / 16);
  DevBuf src(size_t(rows) * rb), ex(size_t(outs) * rb), first(w.first.size() * 4), outRows(w.outRows.size() * 4);
  BENCH_CUDA(cudaMemsetAsync(src.get(), 0x3c, src.bytes(), st));
  BENCH_CUDA(cudaMemsetAsync(ex.get(), 0x3c, ex.bytes(), st));
  BENCH_CUDA(cudaMemcpyAsync(first.get(), w.first.data(), first.bytes(), cudaMemcpyHostToDevice, st));
  BENCH_CUDA(cudaMemcpyAsync(outRows.get(), w.outRows.data(), outRows.bytes(), cudaMemcpyHostToDevice, st));
  ft.bytes = double(outs) * double(rb);
  DevBuf copyDst(ex.bytes());
  ft.ceUs = medianUs(st, iters, [&] {
    BENCH_CUDA(cudaMemcpyAsync(copyDst.get(), ex.get(), ex.bytes(), cudaMemcpyDeviceToDevice, st));
  });
  ft.copySmUs = medianUs(st, iters, [&] {
    expandRows<<<ctas, kThreads, 0, st>>>(src.as<int4>(), ex.as<int4>(), first.as<int>(), outRows.as<int>(), int(rows), vecs);
  });
  ft.sumSmUs = medianUs(st, iters, [&] {
    if (w.expanded)
      sumRows<<<ctas, kThreads, 0, st>>>(ex.as<int4>(), src.as<int4>(), first.as<int>(), outRows.as<int>(), int(rows), vecs);
    else
      copyRows<<<ctas, kThreads, 0, st>>>(ex.as<int4>(), src.as<int4>(), first.as<int>(), outRows.as<int>(), int(rows), vecs);
  });
  return ft;
}

}  // namespace epxbench
