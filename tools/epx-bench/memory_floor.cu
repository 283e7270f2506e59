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

// One tile of a row sum: kUnroll vectors of up to kRows rows are loaded before they are added;
// kRows * kUnroll = kSumRows * kSumUnroll vectors per lane in flight whatever the fan-out.
template <int kUnroll, int kRows>
__device__ __forceinline__ void sumTile(const int4* const* rows, int n, int4* dst, int i, int vecs) {
  float acc[kUnroll][8] = {};
  for (int o0 = 0; o0 < n; o0 += kRows) {
    int4 v[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (o0 + r < n && i + u * kWarp < vecs) v[r][u] = rows[o0 + r][i + u * kWarp];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (o0 + r < n && i + u * kWarp < vecs) addBf16x8(acc[u], v[r][u]);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (i + u * kWarp >= vecs) continue;
    int4 out;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int q = 0; q < 4; ++q) h[q] = __floats2bfloat162_rn(acc[u][2 * q], acc[u][2 * q + 1]);
    dst[i + u * kWarp] = out;
  }
}

template <int kRows, int kUnroll>
__device__ __forceinline__ void sumRow(const int4* const* rows, int n, int4* dst, int lane, int vecs) {
  for (int i = lane; i < vecs; i += kUnroll * kWarp) sumTile<kUnroll, kRows>(rows, n, dst, i, vecs);
}

// One row: the sum is the row itself (BF16 -> FP32 -> BF16 is exact): a copy, vectors in flight
// as for a sum of kSumRows rows.
__device__ __forceinline__ void copyRow(const int4* src, int4* dst, int lane, int vecs) {
  constexpr int kUnroll = kSumRows * kSumUnroll / 2;
  for (int i = lane; i < vecs; i += kUnroll * kWarp) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < vecs) v[u] = src[i + u * kWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < vecs) dst[i + u * kWarp] = v[u];
  }
}

__global__ void __launch_bounds__(kThreads) sumRows(const int4* __restrict__ ex, int4* dst,
                                                    const int* __restrict__ first,
                                                    const int* __restrict__ outRows, int rows, int vecs) {
  __shared__ const int4* rowPtr[kThreads / kWarp][kMaxFanout];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int j = blockIdx.x * warps + warp; j < rows; j += gridDim.x * warps) {
    const int b = first[j], n = min(first[j + 1] - b, kMaxFanout);
    if (lane < n) rowPtr[warp][lane] = ex + size_t(outRows[b + lane]) * vecs;
    __syncwarp();
    int4* d = dst + size_t(j) * vecs;
    // One row (the deduplicated layout): a copy, 8 vectors per lane in flight.
    if (n == 1) copyRow(rowPtr[warp][0], d, lane, vecs);
    else sumRow<kSumRows, kSumUnroll>(rowPtr[warp], n, d, lane, vecs);
    __syncwarp();
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
  ft.dispatchBytes = double(outs) * double(rb);
  ft.combineBytes = ft.dispatchBytes;
  DevBuf copyDst(ex.bytes());
  ft.dispatchCeUs = medianUs(st, iters, [&] {
    BENCH_CUDA(cudaMemcpyAsync(copyDst.get(), ex.get(), ex.bytes(), cudaMemcpyDeviceToDevice, st));
  });
  ft.combineCeUs = ft.dispatchCeUs;  // the same bytes, read once
  ft.dispatchSmUs = medianUs(st, iters, [&] {
    expandRows<<<ctas, kThreads, 0, st>>>(src.as<int4>(), ex.as<int4>(), first.as<int>(), outRows.as<int>(), int(rows), vecs);
  });
  ft.combineSmUs = medianUs(st, iters, [&] {
    sumRows<<<ctas, kThreads, 0, st>>>(ex.as<int4>(), src.as<int4>(), first.as<int>(), outRows.as<int>(), int(rows), vecs);
  });
  return ft;
}

}  // namespace epxbench
