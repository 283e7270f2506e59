// BF16 <-> FP32 on the host, round-to-nearest-even (the rounding of CUDA's __float2bfloat16_rn).
#pragma once
#include <cstdint>
#include <cstring>

namespace epx::ref {

inline float bf16ToFloat(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return uint16_t((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace epx::ref
