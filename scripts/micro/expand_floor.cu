// Microbenchmark (experiment, not a test): how fast can C CTAs expand 4096 BF16 rows of 14336 B
// into 8 places each, and read-and-sum them back? Variants of load depth, warps, and TMA bulk
// copies through shared memory; copy-engine reference. Prints median of 30 after 10 warm-up.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); std::exit(1);} } while (0)

constexpr int T = 4096, H = 7168, K = 8, E = 256;
constexpr int kRowBytes = H * 2;
constexpr int kVecs = kRowBytes / 16;

__device__ __forceinline__ int4 ldNc(const int4* p) {
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void stNa(int4* p, const int4& v) {
  asm volatile("st.global.L1::no_allocate.v4.s32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

template <int U>
__global__ void expandWarp(const char* __restrict__ x, char* out, const int* __restrict__ dst) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int t = blockIdx.x * warps + threadIdx.x / 32; t < T; t += gridDim.x * warps) {
    const int4* s = reinterpret_cast<const int4*>(x + size_t(t) * kRowBytes);
    int myDst = lane < K ? dst[t * K + lane] : -1;
    for (int i = lane; i < kVecs; i += U * 32) {
      int4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) v[u] = ldNc(s + i + u * 32);
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const int d = __shfl_sync(0xffffffffu, myDst, j);
        int4* o = reinterpret_cast<int4*>(out + size_t(d) * kRowBytes);
#pragma unroll
        for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) stNa(o + i + u * 32, v[u]);
      }
    }
  }
}

// CTA-wide: the whole CTA copies one row at a time (more parallel bytes per row).
__global__ void expandCta(const char* __restrict__ x, char* out, const int* __restrict__ dst) {
  __shared__ int d[K];
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    __syncthreads();
    if (threadIdx.x < K) d[threadIdx.x] = dst[t * K + threadIdx.x];
    __syncthreads();
    const int4* s = reinterpret_cast<const int4*>(x + size_t(t) * kRowBytes);
    for (int i = threadIdx.x; i < kVecs; i += blockDim.x) {
      const int4 v = ldNc(s + i);
#pragma unroll
      for (int j = 0; j < K; ++j) stNa(reinterpret_cast<int4*>(out + size_t(d[j]) * kRowBytes) + i, v);
    }
  }
}

// TMA: each warp owns one shared-memory row buffer; lane 0 bulk-loads the row (mbarrier), then
// issues K bulk stores from shared memory, and waits for them to have read the buffer.
__device__ __forceinline__ uint32_t smem(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__global__ void expandTma(const char* __restrict__ x, char* out, const int* __restrict__ dst, int stagesPerWarp) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar[32 * 4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    for (int s = 0; s < stagesPerWarp; ++s)
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem(&bar[warp * 4 + s])));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncwarp();
  if (lane != 0) return;
  uint32_t phase[4] = {0, 0, 0, 0};
  int it = 0;
  for (int t = blockIdx.x * warps + warp; t < T; t += gridDim.x * warps, ++it) {
    const int s = it % stagesPerWarp;
    char* b = buf + size_t(warp * stagesPerWarp + s) * kRowBytes;
    // the buffer is free once its earlier stores read it: allow stagesPerWarp-1 groups pending
    if (stagesPerWarp == 1) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    const uint32_t mb = smem(&bar[warp * 4 + s]);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(mb), "r"(kRowBytes));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem(b)), "l"(x + size_t(t) * kRowBytes), "r"(kRowBytes), "r"(mb) : "memory");
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0,1,0,p; }"
                   : "=r"(done) : "r"(mb), "r"(phase[s]) : "memory");
    phase[s] ^= 1;
    for (int j = 0; j < K; ++j) {
      const int d = dst[t * K + j];
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                   ::"l"(out + size_t(d) * kRowBytes), "r"(smem(b)), "r"(kRowBytes) : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ void addBf16x8(float (&acc)[8], const int4& v) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    acc[2 * j] += __uint_as_float(w[j] << 16);
    acc[2 * j + 1] += __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ int4 pack(const float (&a)[8]) {
  uint32_t w[4];
  for (int j = 0; j < 4; ++j) w[j] = (__float_as_uint(a[2 * j]) >> 16) | (__float_as_uint(a[2 * j + 1]) & 0xffff0000u);
  return make_int4(w[0], w[1], w[2], w[3]);
}

// Read-and-sum: warp per token; rows one after another (U vectors each in flight) or all rows'
// vectors in flight (kAll).
template <int U, bool kAll>
__global__ void sumWarp(const char* __restrict__ ex, char* out, const int* __restrict__ rows) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int t = blockIdx.x * warps + threadIdx.x / 32; t < T; t += gridDim.x * warps) {
    int myRow = lane < K ? rows[t * K + lane] : -1;
    const int4* src[K];
#pragma unroll
    for (int j = 0; j < K; ++j) src[j] = reinterpret_cast<const int4*>(ex + size_t(__shfl_sync(0xffffffffu, myRow, j)) * kRowBytes);
    for (int i = lane; i < kVecs; i += U * 32) {
      float acc[U][8] = {};
      if (kAll) {
        int4 v[K][U];
#pragma unroll
        for (int j = 0; j < K; ++j)
#pragma unroll
          for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) v[j][u] = ldNc(src[j] + i + u * 32);
#pragma unroll
        for (int j = 0; j < K; ++j)
#pragma unroll
          for (int u = 0; u < U; ++u) addBf16x8(acc[u], v[j][u]);
      } else {
        for (int j = 0; j < K; ++j) {
          int4 v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) v[u] = ldNc(src[j] + i + u * 32);
#pragma unroll
          for (int u = 0; u < U; ++u) addBf16x8(acc[u], v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) stNa(reinterpret_cast<int4*>(out + size_t(t) * kRowBytes) + i + u * 32, pack(acc[u]));
    }
  }
}


__device__ __forceinline__ int4 ldNcNv(const int4* p) {
  int4 v;
  asm("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
// Runtime row count n (= K here, passed at run time), rows from shared memory, load flavour L.
template <int U, int L>
__global__ void __launch_bounds__(512) sumRt(const char* __restrict__ ex, char* out, const int* __restrict__ rows, int n) {
  __shared__ const int4* srcs[16][K];
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32, warp = threadIdx.x / 32;
  for (int t = blockIdx.x * warps + warp; t < T; t += gridDim.x * warps) {
    if (lane < n) srcs[warp][lane] = reinterpret_cast<const int4*>(ex + size_t(rows[t * K + lane]) * kRowBytes);
    __syncwarp();
    for (int i = lane; i < kVecs; i += U * 32) {
      float acc[U][8] = {};
      for (int j0 = 0; j0 < n; j0 += 8) {
        int4 v[8][U];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (j0 + j < n && i + u * 32 < kVecs) {
              const int4* p = srcs[warp][j0 + j] + i + u * 32;
              v[j][u] = L == 0 ? ldNc(p) : L == 1 ? ldNcNv(p) : *p;
            }
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (j0 + j < n && i + u * 32 < kVecs) addBf16x8(acc[u], v[j][u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) stNa(reinterpret_cast<int4*>(out + size_t(t) * kRowBytes) + i + u * 32, pack(acc[u]));
    }
    __syncwarp();
  }
}

// (a) runtime n, pointers in registers; (b) M compile-time rows, pointers from shared memory.
template <int U, int M, bool kShared>
__global__ void __launch_bounds__(512) sumV(const char* __restrict__ ex, char* out, const int* __restrict__ rows, int n) {
  __shared__ const int4* srcs[16][K];
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32, warp = threadIdx.x / 32;
  for (int t = blockIdx.x * warps + warp; t < T; t += gridDim.x * warps) {
    const int myRow = lane < n ? rows[t * K + lane] : 0;
    if (lane < n) srcs[warp][lane] = reinterpret_cast<const int4*>(ex + size_t(myRow) * kRowBytes);
    __syncwarp();
    const int4* reg[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) reg[j] = reinterpret_cast<const int4*>(ex + size_t(__shfl_sync(0xffffffffu, myRow, j)) * kRowBytes);
    const int nn = M > 0 ? M : n;
    for (int i = lane; i < kVecs; i += U * 32) {
      float acc[U][8] = {};
      int4 v[8][U];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j < nn && i + u * 32 < kVecs) v[j][u] = ldNc((kShared ? srcs[warp][j] : reg[j]) + i + u * 32);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j < nn && i + u * 32 < kVecs) addBf16x8(acc[u], v[j][u]);
#pragma unroll
      for (int u = 0; u < U; ++u) if (i + u * 32 < kVecs) stNa(reinterpret_cast<int4*>(out + size_t(t) * kRowBytes) + i + u * 32, pack(acc[u]));
    }
    __syncwarp();
  }
}

template <class F>
float timeIt(F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int r = 0; r < 40; ++r) {
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 10) v.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  int dev = 0; cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, dev));
  std::printf("# %s, %d SMs; T=%d H=%d K=%d E=%d, expanded bytes %.1f MB\n", p.name, p.multiProcessorCount, T, H, K, E, double(T) * K * kRowBytes / 1e6);
  std::mt19937 rng(1);
  std::vector<int> experts(T * K);
  std::vector<int> count(E, 0);
  for (int t = 0; t < T; ++t) {
    std::vector<int> e(E); for (int i = 0; i < E; ++i) e[i] = i;
    for (int k = 0; k < K; ++k) { std::swap(e[k], e[k + rng() % (E - k)]); experts[t * K + k] = e[k]; count[e[k]]++; }
  }
  std::vector<int> start(E + 1, 0);
  for (int e = 0; e < E; ++e) start[e + 1] = start[e] + count[e];
  std::vector<int> fill(E, 0), dst(T * K);
  for (int t = 0; t < T; ++t) for (int k = 0; k < K; ++k) { int e = experts[t * K + k]; dst[t * K + k] = start[e] + fill[e]++; }
  char *x, *out, *out2; int* dDst;
  const size_t xBytes = size_t(T) * kRowBytes, outBytes = xBytes * K;
  CK(cudaMalloc(&x, xBytes)); CK(cudaMalloc(&out, outBytes)); CK(cudaMalloc(&out2, outBytes)); CK(cudaMalloc(&dDst, T * K * 4));
  CK(cudaMemset(x, 1, xBytes)); CK(cudaMemset(out, 0, outBytes));
  CK(cudaMemcpy(dDst, dst.data(), T * K * 4, cudaMemcpyHostToDevice));
  std::printf("copy engine: one memcpy of %.0f MB: %.1f us; K memcpys of x (%.0f MB each): %.1f us\n", outBytes / 1e6,
              timeIt([&] { CK(cudaMemcpyAsync(out2, out, outBytes, cudaMemcpyDeviceToDevice)); }), xBytes / 1e6,
              timeIt([&] { for (int k = 0; k < K; ++k) CK(cudaMemcpyAsync(out2 + k * xBytes, x, xBytes, cudaMemcpyDeviceToDevice)); }));
  CK(cudaFuncSetAttribute(expandTma, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  for (int C : {24}) {
    std::printf("C=%3d sum runtime n: allU2 %.1f  rtU2-ncvol %.1f  rtU2-nc %.1f  rtU2-plain %.1f  rtU4-nc %.1f rtU1-nc %.1f\n", C,
                timeIt([&] { sumWarp<2, true><<<C, 512>>>(out, x, dDst); }),
                timeIt([&] { sumRt<2, 0><<<C, 512>>>(out, x, dDst, K); }), timeIt([&] { sumRt<2, 1><<<C, 512>>>(out, x, dDst, K); }),
                timeIt([&] { sumRt<2, 2><<<C, 512>>>(out, x, dDst, K); }), timeIt([&] { sumRt<4, 1><<<C, 512>>>(out, x, dDst, K); }),
                timeIt([&] { sumRt<1, 1><<<C, 512>>>(out, x, dDst, K); }));
  }
  std::printf("C= 24 variants: rtN-reg %.1f  ct8-shared %.1f  ct8-reg %.1f  rtN-shared %.1f\n",
              timeIt([&] { sumV<2, 0, false><<<24, 512>>>(out, x, dDst, K); }), timeIt([&] { sumV<2, 8, true><<<24, 512>>>(out, x, dDst, K); }),
              timeIt([&] { sumV<2, 8, false><<<24, 512>>>(out, x, dDst, K); }), timeIt([&] { sumV<2, 0, true><<<24, 512>>>(out, x, dDst, K); }));
  for (int C : {24, 16, 44, 132}) {
    std::printf("C=%3d expand: warpU4x512 %.1f  warpU8x512 %.1f  warpU4x1024 %.1f  warpU2x1024 %.1f  cta512 %.1f  cta1024 %.1f",
                C, timeIt([&] { expandWarp<4><<<C, 512>>>(x, out, dDst); }), timeIt([&] { expandWarp<8><<<C, 512>>>(x, out, dDst); }),
                timeIt([&] { expandWarp<4><<<C, 1024>>>(x, out, dDst); }), timeIt([&] { expandWarp<2><<<C, 1024>>>(x, out, dDst); }),
                timeIt([&] { expandCta<<<C, 512>>>(x, out, dDst); }), timeIt([&] { expandCta<<<C, 1024>>>(x, out, dDst); }));
    std::printf("  tma14w1s %.1f  tma7w2s %.1f  tma4w3s %.1f\n",
                timeIt([&] { expandTma<<<C, 14 * 32, 14 * kRowBytes>>>(x, out, dDst, 1); }),
                timeIt([&] { expandTma<<<C, 7 * 32, 14 * kRowBytes>>>(x, out, dDst, 2); }),
                timeIt([&] { expandTma<<<C, 4 * 32, 12 * kRowBytes>>>(x, out, dDst, 3); }));
    std::printf("C=%3d sum: seqU4x512 %.1f  seqU8x512 %.1f  allU1x512 %.1f  allU2x512 %.1f  allU1x256 %.1f\n", C,
                timeIt([&] { sumWarp<4, false><<<C, 512>>>(out, x, dDst); }), timeIt([&] { sumWarp<8, false><<<C, 512>>>(out, x, dDst); }),
                timeIt([&] { sumWarp<1, true><<<C, 512>>>(out, x, dDst); }), timeIt([&] { sumWarp<2, true><<<C, 512>>>(out, x, dDst); }),
                timeIt([&] { sumWarp<1, true><<<C, 256>>>(out, x, dDst); }));
  }
  return 0;
}
