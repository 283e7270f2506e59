// Deterministic random test values, computable on the device (to fill buffers) and on the host
// (to check results without copying the inputs back). Values are never zero and never NaN.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define EPXB_HD __host__ __device__ __forceinline__
#else
#define EPXB_HD inline
#endif

namespace epxbench {

EPXB_HD uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Stream key of one tensor on one rank.
EPXB_HD uint64_t streamKey(uint64_t seed, uint64_t tensor, uint64_t rank) {
  return mix64(mix64(seed ^ (tensor << 40)) + rank);
}

// BF16 bits with magnitude in [2^-7, 2), random sign.
EPXB_HD uint16_t randBf16(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key + i);
  const uint32_t sign = uint32_t(h & 1), exp = 120u + uint32_t((h >> 1) % 8u), mant = uint32_t((h >> 8) & 0x7f);
  return uint16_t((sign << 15) | (exp << 7) | mant);
}

// FP8 e4m3 bits: exponent field 1..14 (normal, never NaN or zero), random sign and mantissa.
EPXB_HD uint8_t randFp8(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key + i);
  const uint32_t sign = uint32_t(h & 1), exp = 1u + uint32_t((h >> 1) % 14u), mant = uint32_t((h >> 8) & 7);
  return uint8_t((sign << 7) | (exp << 3) | mant);
}

// FP32 scale in [0.25, 1.25).
EPXB_HD float randScale(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key + i);
  return 0.25f + float((h >> 40) & 0xffff) * (1.0f / 65536.0f);
}

// Tensor ids for streamKey.
enum : uint64_t { kTensorX = 1, kTensorX8 = 2, kTensorScales = 3, kTensorExpertOut = 4 };

}  // namespace epxbench
