// Warp-cooperative row copies (16-byte vectors) and BF16x8 arithmetic for the EP kernels.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "epx/device/warp.cuh"

namespace epx::dev {

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
__device__ __forceinline__ void load8(const int4* row, int g, int4 (&v)[Row::kVecsPer8]) {
#pragma unroll
  for (int q = 0; q < Row::kVecsPer8; ++q)
    v[q] = kVolatile ? ldVolatile(row + g * Row::kVecsPer8 + q) : ldNc(row + g * Row::kVecsPer8 + q);
}

template <class Row>
__device__ __forceinline__ void add8(float (&acc)[8], const int4 (&v)[Row::kVecsPer8]) {
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

// acc[u] += rows[begin..end) at tile i (groups i + u * 32) in row order, one row at a time with
// its kUnroll groups in flight (rows from peers: volatile loads).
template <class Row, bool kVolatile, int kUnroll>
__device__ __forceinline__ void addRowsInOrder(float (&acc)[kUnroll][8], const int4* const* rows, int begin, int end,
                                               int i, int groups) {
  for (int j = begin; j < end; ++j) {
    int4 v[kUnroll][Row::kVecsPer8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) load8<Row, kVolatile>(rows[j], i + u * kWarp, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) add8<Row>(acc[u], v[u]);
  }
}

// A warp summing a token's expert rows is bound by the loads in flight: on one H200, 8 rows x 2
// groups in flight read-and-sum 470 MB with 24 CTAs in 243-249 us (row pointers in registers or
// shared memory), 274 us with a per-row predicate, 288 us one row at a time (docs/performance.md,
// "Expanded layout"). So row lists are padded to whole batches of kRowBatch with a row of zeros
// (padRowList, zero_row.cuh) and a batch's loads are issued without predicates.
constexpr int kRowBatch = 8;
__device__ __forceinline__ int paddedRows(int n) { return n <= kRowBatch ? kRowBatch : (n + kRowBatch - 1) / kRowBatch * kRowBatch; }

// acc[u] += rows[0..kRowBatch) at tile i (groups i + u * 32), in row order, every load issued first.
template <int kUnroll>
__device__ __forceinline__ void addBatch(float (&acc)[kUnroll][8], const int4* const* rows, int i, int groups) {
  int4 v[kRowBatch][kUnroll];
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) v[b][u] = ldNc(rows[b] + i + u * kWarp);
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) addBf16x8(acc[u], v[b][u]);
}

// acc[u] += BF16 rows[0..n) at tile i in row order (the list padded by padRowList): one batch, then
// any further ones (more than kRowBatch rows: top-k above 8).
template <int kUnroll>
__device__ __forceinline__ void addBf16RowsBatched(float (&acc)[kUnroll][8], const int4* const* rows, int n, int i,
                                                   int groups) {
  addBatch<kUnroll>(acc, rows, i, groups);
  for (int j0 = kRowBatch; j0 < n; j0 += kRowBatch) addBatch<kUnroll>(acc, rows + j0, i, groups);
}

// f as a wire row carries it: BF16-rounded, or exact FP32.
template <class WireRow>
__device__ __forceinline__ float asWire(float f) {
  if constexpr (WireRow::kVecsPer8 == 1) return __bfloat162float(__float2bfloat16_rn(f));
  return f;
}

// One source of a warp sum that is itself a sum: BF16 rows[0..n) (padded by padRowList) summed in FP32 in that order,
// then rounded as a wire row (the value a peer would have returned for them), at position `at` of
// the sources. Lets a rank fold its own expert rows into its reduction instead of staging their
// partial sum (combine, expanded layout).
struct PartialSum {
  const int4* const* rows = nullptr;
  int n = 0;
  int at = 0;
};

// Sums BF16 rows[0..n) (padded by padRowList) in FP32 in row order into dst (DstRow: BF16
// rounds once, FP32 keeps the sum). `groups` = hidden / 8.
template <class DstRow, int kUnroll = 2>
__device__ __forceinline__ void warpSumBf16Rows(int4* dst, const int4* const* rows, int n, int groups, int lane) {
  for (int i = lane; i < groups; i += kUnroll * kWarp) {
    float acc[kUnroll][8] = {};
    addBf16RowsBatched<kUnroll>(acc, rows, n, i, groups);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * kWarp < groups) store8<DstRow>(dst, i + u * kWarp, acc[u]);
  }
}

// Sums rows srcs[0..n) of SrcRow type (and a PartialSum, if any, at its position), then optional
// BF16 rows extra0/extra1, into dst (DstRow: BF16 rounds once at the end, FP32 keeps the exact FP32
// sum), with FP32 accumulation in that order. `groups` = hidden / 8. kUnroll groups per lane and
// source are in flight, so NVLink/HBM latency overlaps; the partial sum's rows are batched.
template <class SrcRow, class DstRow, bool kVolatileSrc, int kUnroll = 4>
__device__ __forceinline__ void warpSumRows(int4* dst, const int4* const* srcs, int n, const int4* extra0,
                                            const int4* extra1, int groups, int lane, PartialSum part = {}) {
  const int split = part.n > 0 ? part.at : n;
  for (int i = lane; i < groups; i += kUnroll * kWarp) {
    // The partial sum first (its batch's registers are free again before acc is live). When it
    // comes first in the order it is the sum so far: +0 + w == w (a sum from +0 is never -0).
    float acc[kUnroll][8] = {};
    if (part.n > 0 && split == 0) {
      addBf16RowsBatched<kUnroll>(acc, part.rows, part.n, i, groups);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[u][q] = asWire<SrcRow>(acc[u][q]);
    } else {
      float p[kUnroll][8] = {};
      if (part.n > 0) addBf16RowsBatched<kUnroll>(p, part.rows, part.n, i, groups);
      addRowsInOrder<SrcRow, kVolatileSrc, kUnroll>(acc, srcs, 0, split, i, groups);
      if (part.n > 0)
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[u][q] = __fadd_rn(acc[u][q], asWire<SrcRow>(p[u][q]));
    }
    addRowsInOrder<SrcRow, kVolatileSrc, kUnroll>(acc, srcs, split, n, i, groups);
    if (extra0) addRowsInOrder<Bf16Row, false, kUnroll>(acc, &extra0, 0, 1, i, groups);
    if (extra1) addRowsInOrder<Bf16Row, false, kUnroll>(acc, &extra1, 0, 1, i, groups);
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

// One warp moves up to kWarp whole rows of `vecsPerRow` 16-byte vectors: row j (< n) from
// srcs[j] to dsts[j], where lane j holds row j's pointers (null source: the row is zeroed; null
// destination: the row is skipped). The
// rows' vectors are walked as one range, kRowUnroll per lane at a time with every load issued
// before the stores, so short rows (1 KiB: two vectors per lane) keep as many loads in flight as
// long ones. `kPeerSrc`: sources written by a peer or another CTA (volatile loads), else
// read-only for the kernel (non-coherent loads).
constexpr int kRowUnroll = 8;
template <bool kPeerSrc>
__device__ __forceinline__ void warpCopyRowBlock(const char* src, char* dst, int n, uint32_t vecsPerRow, int lane) {
  const uint32_t total = uint32_t(n) * vecsPerRow;
  const unsigned long long s = reinterpret_cast<unsigned long long>(src), d = reinterpret_cast<unsigned long long>(dst);
  for (uint32_t base = 0; base < total; base += kRowUnroll * kWarp) {
    int4 v[kRowUnroll];
    int4* to[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const uint32_t i = base + uint32_t(u * kWarp + lane);
      const uint32_t row = (i < total ? i : total - 1) / vecsPerRow, e = i - row * vecsPerRow;
      const auto* from = reinterpret_cast<const int4*>(__shfl_sync(0xffffffffu, s, int(row)));
      int4* into = reinterpret_cast<int4*>(__shfl_sync(0xffffffffu, d, int(row)));
      const bool live = i < total && into != nullptr;
      v[u] = make_int4(0, 0, 0, 0);
      if (live && from) v[u] = kPeerSrc ? ldVolatile(from + e) : ldNc(from + e);
      to[u] = live ? into + e : nullptr;
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u)
      if (to[u]) stNa(to[u], v[u]);
  }
}

}  // namespace epx::dev
