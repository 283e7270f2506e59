// Device helpers of the bucket and PP GPU tests (compiled by nvcc, no Boost here): deterministic
// byte patterns and float values that the host recomputes (no uploads of large inputs), and a
// delay kernel (a receiver that lags behind its sender).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EPX_TEST_HD __host__ __device__ __forceinline__
#else
#define EPX_TEST_HD inline
#endif

namespace epx::test {

EPX_TEST_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Byte i of the pattern `seed`.
EPX_TEST_HD uint8_t patternByte(uint64_t seed, uint64_t i) {
  return uint8_t(mix64(seed * 0x100000001b3ull + (i >> 3)) >> ((i & 7) * 8));
}
// Element i of the float data `seed`: random sign, exponent in [2^-8, 2^8), full 23-bit mantissa
// (sums round, so summation order shows in the bits).
EPX_TEST_HD float patternFloat(uint64_t seed, uint64_t i) {
  const uint64_t h = mix64(seed * 0x100000001b3ull + i);
  const uint32_t exp = uint32_t(127 - 8 + (h >> 32) % 16), mant = uint32_t(h) & 0x7fffffu, sign = uint32_t(h >> 40) & 1u;
  const uint32_t bits = (sign << 31) | (exp << 23) | mant;
  float f;
  static_assert(sizeof(f) == 4);
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Host: the first i in [begin, end) where p[i] != patternByte(seed, i), or end (one mix64 per
// 8 bytes instead of one per byte).
inline size_t firstPatternMismatch(const uint8_t* p, size_t begin, size_t end, uint64_t seed) {
  uint64_t word = 0;
  for (size_t i = begin; i < end; ++i) {
    if (i == begin || (i & 7) == 0) word = mix64(seed * 0x100000001b3ull + (i >> 3));
    if (p[i] != uint8_t(word >> ((i & 7) * 8))) return i;
  }
  return end;
}

cudaError_t launchFillPattern(void* p, size_t bytes, uint64_t seed, cudaStream_t stream);
// Bytes [begin, end) of p set to bytes [begin, end) of the pattern `seed` (the rest untouched).
cudaError_t launchFillPatternRange(void* p, size_t begin, size_t end, uint64_t seed, cudaStream_t stream);
// n floats; bf16: the BF16 rounding of the same values (n uint16).
cudaError_t launchFillFloats(void* p, size_t n, bool bf16, uint64_t seed, cudaStream_t stream);
// Spins for about `ns` nanoseconds.
cudaError_t launchDelay(uint64_t ns, cudaStream_t stream);

}  // namespace epx::test
