// CTA-wide copies and element loads of arbitrary byte ranges, for the bucket and PP kernels: 16-byte
// vectors when source and destination share their alignment modulo 16, 4-byte words or bytes
// otherwise. Sources written by peers (NVLink stores, GIN puts) in the same operation are read with
// volatile loads (no stale L1 lines).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "epx/device/copy.cuh"

namespace epx::dev {

constexpr int kBulkUnroll = 4;

// This CTA's threads copy src[0, bytes) to dst (with `parts` CTAs, call it on each CTA's share).
template <bool kVolatileSrc>
__device__ __forceinline__ void ctaCopyBytes(char* dst, const char* src, uint64_t bytes) {
  if (bytes == 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(dst), b = reinterpret_cast<uintptr_t>(src);
  const uint64_t nt = blockDim.x;
  if (((a ^ b) & 15u) == 0) {
    uint64_t head = (16u - (a & 15u)) & 15u;
    if (head > bytes) head = bytes;
    const uint64_t vecs = (bytes - head) / 16;
    for (uint64_t i = threadIdx.x; i < head; i += nt) dst[i] = reinterpret_cast<const volatile char*>(src)[i];
    const int4* s = reinterpret_cast<const int4*>(src + head);
    int4* d = reinterpret_cast<int4*>(dst + head);
    for (uint64_t i = threadIdx.x; i < vecs; i += kBulkUnroll * nt) {
      int4 v[kBulkUnroll];
#pragma unroll
      for (int u = 0; u < kBulkUnroll; ++u)
        if (i + u * nt < vecs) v[u] = kVolatileSrc ? ldVolatile(s + i + u * nt) : ldNc(s + i + u * nt);
#pragma unroll
      for (int u = 0; u < kBulkUnroll; ++u)
        if (i + u * nt < vecs) stNa(d + i + u * nt, v[u]);
    }
    for (uint64_t i = head + vecs * 16 + threadIdx.x; i < bytes; i += nt)
      dst[i] = reinterpret_cast<const volatile char*>(src)[i];
  } else if (((a ^ b) & 3u) == 0) {
    uint64_t head = (4u - (a & 3u)) & 3u;
    if (head > bytes) head = bytes;
    const uint64_t words = (bytes - head) / 4;
    for (uint64_t i = threadIdx.x; i < head; i += nt) dst[i] = reinterpret_cast<const volatile char*>(src)[i];
    const volatile uint32_t* s = reinterpret_cast<const volatile uint32_t*>(src + head);
    uint32_t* d = reinterpret_cast<uint32_t*>(dst + head);
    for (uint64_t i = threadIdx.x; i < words; i += nt) d[i] = s[i];
    for (uint64_t i = head + words * 4 + threadIdx.x; i < bytes; i += nt)
      dst[i] = reinterpret_cast<const volatile char*>(src)[i];
  } else {
    for (uint64_t i = threadIdx.x; i < bytes; i += nt) dst[i] = reinterpret_cast<const volatile char*>(src)[i];
  }
}

__device__ __forceinline__ float ldF32Volatile(const float* p) { return *reinterpret_cast<const volatile float*>(p); }
__device__ __forceinline__ int32_t ldI32Volatile(const int32_t* p) { return *reinterpret_cast<const volatile int32_t*>(p); }
__device__ __forceinline__ float ldBf16Volatile(const uint16_t* p) {
  return __uint_as_float(uint32_t(*reinterpret_cast<const volatile uint16_t*>(p)) << 16);
}
__device__ __forceinline__ uint16_t toBf16Bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
// f rounded to BF16 and back (the value a BF16 wire carries).
__device__ __forceinline__ float roundBf16(float f) { return __uint_as_float(uint32_t(toBf16Bits(f)) << 16); }

}  // namespace epx::dev
