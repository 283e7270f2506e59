// Warp-cooperative row copies (16-byte vectors) and BF16x8 arithmetic for the EP kernels.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace epx::dev {

constexpr int kWarp = 32;

__device__ __forceinline__ int4 ldNc(const int4* p) {
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ int4 ldVolatile(const int4* p) {
  int4 v;
  asm volatile("ld.volatile.global.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void stNa(int4* p, const int4& v) {
  asm volatile("st.global.L1::no_allocate.v4.s32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

// acc[0..7] += eight BF16 values packed in v.
__device__ __forceinline__ void addBf16x8(float (&acc)[8], const int4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float2 f = __bfloat1622float2(h[j]);
    acc[2 * j] = __fadd_rn(acc[2 * j], f.x);
    acc[2 * j + 1] = __fadd_rn(acc[2 * j + 1], f.y);
  }
}

__device__ __forceinline__ int4 packBf16x8(const float (&acc)[8]) {
  int4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
  return v;
}

// Copies `bytes` (a multiple of 16, both pointers 16-byte aligned) with the lanes of one warp,
// four vectors in flight per lane. `Src` loads from memory written by a previous kernel / peer.
template <bool kPeerSrc>
__device__ __forceinline__ void warpCopy16(char* dst, const char* src, int bytes, int lane) {
  const int4* s = reinterpret_cast<const int4*>(src);
  int4* d = reinterpret_cast<int4*>(dst);
  const int n = bytes >> 4;
  auto ld = [&](int i) { return kPeerSrc ? ldVolatile(s + i) : ldNc(s + i); };
  int i = lane;
  for (; i + 3 * kWarp < n; i += 4 * kWarp) {
    int4 v0 = ld(i), v1 = ld(i + kWarp), v2 = ld(i + 2 * kWarp), v3 = ld(i + 3 * kWarp);
    stNa(d + i, v0);
    stNa(d + i + kWarp, v1);
    stNa(d + i + 2 * kWarp, v2);
    stNa(d + i + 3 * kWarp, v3);
  }
  for (; i < n; i += kWarp) stNa(d + i, ld(i));
}

// Copies `bytes` (a multiple of 4; 4-byte aligned pointers) with the lanes of one warp.
__device__ __forceinline__ void warpCopy4(char* dst, const char* src, int bytes, int lane) {
  const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
  uint32_t* d = reinterpret_cast<uint32_t*>(dst);
  for (int i = lane; i < (bytes >> 2); i += kWarp) d[i] = s[i];
}

// Copies one row to nDst destinations (a token's row to every destination rank, or once per local
// expert in the expanded layout): each lane loads kUnroll 16-byte vectors, then stores them to every
// destination, so kUnroll * 512 bytes per warp are in flight.
template <bool kPeerSrc, int kUnroll = 4>
__device__ __forceinline__ void warpCopy16Multi(char* const* dsts, int nDst, const char* src, int bytes,
                                                int lane) {
  const int4* s = reinterpret_cast<const int4*>(src);
  const int n = bytes >> 4;
  for (int i = lane; i < n; i += kUnroll * kWarp) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < n) v[u] = kPeerSrc ? ldVolatile(s + i + u * kWarp) : ldNc(s + i + u * kWarp);
    for (int j = 0; j < nDst; ++j)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < n) stNa(reinterpret_cast<int4*>(dsts[j]) + i + u * kWarp, v[u]);
  }
}

// Sums BF16 rows srcs[0..n) (+ optional extra rows) into dst with FP32 accumulation, in that
// order. kUnroll 16-byte vectors per lane and source are in flight, so NVLink/HBM latency overlaps.
template <bool kVolatileSrc, int kUnroll = 4>
__device__ __forceinline__ void warpSumBf16(int4* dst, const int4* const* srcs, int n, const int4* extra0,
                                            const int4* extra1, int vecs, int lane) {
  for (int i = lane; i < vecs; i += kUnroll * kWarp) {
    float acc[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[u][q] = 0.f;
    auto addRow = [&](const int4* row, bool vol) {
      int4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < vecs) v[u] = vol ? ldVolatile(row + i + u * kWarp) : ldNc(row + i + u * kWarp);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < vecs) addBf16x8(acc[u], v[u]);
    };
    for (int j = 0; j < n; ++j) addRow(srcs[j], kVolatileSrc);
    if (extra0) addRow(extra0, false);
    if (extra1) addRow(extra1, false);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < vecs) stNa(dst + i + u * kWarp, packBf16x8(acc[u]));
  }
}

__device__ __forceinline__ void warpZero16(char* dst, int bytes, int lane) {
  int4* d = reinterpret_cast<int4*>(dst);
  const int4 z = make_int4(0, 0, 0, 0);
  for (int i = lane; i < (bytes >> 4); i += kWarp) stNa(d + i, z);
}

}  // namespace epx::dev
