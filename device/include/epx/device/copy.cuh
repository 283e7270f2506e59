// Warp-cooperative row copies (16-byte vectors) and BF16x8 arithmetic for the EP kernels.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

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

// Row element types of the warp sums: 8 channels are one 16-byte vector of BF16 or two of FP32.
struct Bf16Row {
  static constexpr int kVecsPer8 = 1;
};
struct Fp32Row {
  static constexpr int kVecsPer8 = 2;
};

template <class Row, bool kVolatile>
__device__ __forceinline__ void load8(const int4* row, int g, int4 (&v)[2]) {
#pragma unroll
  for (int q = 0; q < Row::kVecsPer8; ++q)
    v[q] = kVolatile ? ldVolatile(row + g * Row::kVecsPer8 + q) : ldNc(row + g * Row::kVecsPer8 + q);
}

template <class Row>
__device__ __forceinline__ void add8(float (&acc)[8], const int4 (&v)[2]) {
  if constexpr (Row::kVecsPer8 == 1) {
    addBf16x8(acc, v[0]);
  } else {
    const float* f = reinterpret_cast<const float*>(v);
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q] = __fadd_rn(acc[q], f[q]);
  }
}

template <class Row>
__device__ __forceinline__ void store8(int4* row, int g, const float (&acc)[8]) {
  if constexpr (Row::kVecsPer8 == 1) {
    stNa(row + g, packBf16x8(acc));
  } else {
    stNa(row + 2 * g, make_int4(__float_as_int(acc[0]), __float_as_int(acc[1]), __float_as_int(acc[2]), __float_as_int(acc[3])));
    stNa(row + 2 * g + 1, make_int4(__float_as_int(acc[4]), __float_as_int(acc[5]), __float_as_int(acc[6]), __float_as_int(acc[7])));
  }
}

// Sums rows srcs[0..n) of SrcRow type, then optional BF16 rows extra0/extra1, into dst (DstRow:
// BF16 rounds once at the end, FP32 keeps the exact FP32 sum), with FP32 accumulation in that
// order. `groups` = hidden / 8. kUnroll groups per lane and source are in flight, so NVLink/HBM
// latency overlaps.
template <class SrcRow, class DstRow, bool kVolatileSrc, int kUnroll = 4>
__device__ __forceinline__ void warpSumRows(int4* dst, const int4* const* srcs, int n, const int4* extra0,
                                            const int4* extra1, int groups, int lane) {
  for (int i = lane; i < groups; i += kUnroll * kWarp) {
    float acc[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[u][q] = 0.f;
    auto addRow = [&](const int4* row, auto rowType, auto vol) {
      using Row = decltype(rowType);
      int4 v[kUnroll][2];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < groups) load8<Row, decltype(vol)::value>(row, i + u * kWarp, v[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kWarp < groups) add8<Row>(acc[u], v[u]);
    };
    for (int j = 0; j < n; ++j) addRow(srcs[j], SrcRow{}, std::integral_constant<bool, kVolatileSrc>{});
    if (extra0) addRow(extra0, Bf16Row{}, std::false_type{});
    if (extra1) addRow(extra1, Bf16Row{}, std::false_type{});
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) store8<DstRow>(dst, i + u * kWarp, acc[u]);
  }
}

__device__ __forceinline__ void warpZero16(char* dst, int bytes, int lane) {
  int4* d = reinterpret_cast<int4*>(dst);
  const int4 z = make_int4(0, 0, 0, 0);
  for (int i = lane; i < (bytes >> 4); i += kWarp) stNa(d + i, z);
}

}  // namespace epx::dev
