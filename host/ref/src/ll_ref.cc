#include "epx/ref/ll_ref.h"

#include <cmath>
#include <cstring>

#include "epx/ref/bf16.h"

namespace epx::ref {

namespace {
constexpr float kE4m3Max = 448.f;
constexpr float kMinAmax = 1e-4f;
constexpr int kScaleBlock = 128;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
int64_t idAt(const LlShape& s, const LlRouting& r, int t, int k) { return r.topkIdx[size_t(t) * s.topk + k]; }
bool inRange(const LlShape& s, int64_t v) { return v >= 0 && v < s.numExperts; }
}  // namespace

int llSlotExpert(const LlShape& s, const LlRouting& r, int t, int k) {
  const int64_t v = idAt(s, r, t, k);
  if (!inRange(s, v)) return -1;
  for (int j = 0; j < k; ++j)
    if (idAt(s, r, t, j) == v) return -1;
  return int(v);
}

bool llSlotInvalid(const LlShape& s, const LlRouting& r, int t, int k) {
  const int64_t v = idAt(s, r, t, k);
  return v != -1 && llSlotExpert(s, r, t, k) < 0;
}

LlReceived llDispatchRows(const LlShape& s, const std::vector<LlRouting>& all, int rank) {
  const int Le = s.localExperts();
  LlReceived out;
  out.rows.resize(Le);
  for (int src = 0; src < s.nRanks; ++src)
    for (int t = 0; t < all[src].numTokens; ++t)
      for (int k = 0; k < s.topk; ++k) {
        const int e = llSlotExpert(s, all[src], t, k);
        if (e >= 0 && e / Le == rank) out.rows[e % Le].push_back(LlRow{src, t, k});
      }
  return out;
}

uint8_t fp8E4m3FromFloat(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= kE4m3Max) return sign | 0x7e;  // saturate (448 = 0x7e)
  // e4m3: exponent bias 7, 3 mantissa bits; smallest normal 2^-6, subnormal step 2^-9.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;     // a = 1.xxx * 2^exp
  if (exp < -6) exp = -6;  // subnormal range: fixed step 2^-9
  const float step = std::ldexp(1.f, exp - 3);
  float q = std::nearbyint(a / step);  // round to nearest even (default rounding mode); a / step is exact
  float v = q * step;
  if (v >= kE4m3Max) return sign | 0x7e;
  if (v == 0.f) return sign;
  int ve;
  std::frexp(v, &ve);
  int vexp = ve - 1;
  if (vexp < -6) {  // subnormal: mantissa = v / 2^-9
    return sign | uint8_t(int(v / std::ldexp(1.f, -9)));
  }
  const int mant = int(std::ldexp(v, -vexp) * 8.f) - 8;  // 1.mmm -> mmm
  return sign | uint8_t(((vexp + 7) << 3) | mant);
}

float fp8E4m3ToFloat(uint8_t v) {
  const float sign = (v & 0x80) ? -1.f : 1.f;
  const int exp = (v >> 3) & 0xf, mant = v & 7;
  if (exp == 0xf && mant == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(mant), -9);
  return sign * std::ldexp(1.f + mant / 8.f, exp - 7);
}

float llFp8Scale(float amax, bool roundPow2) {
  const float a = amax > kMinAmax ? amax : kMinAmax;
  float s = a / kE4m3Max;
  if (roundPow2) {
    uint32_t u = bits(s);
    if (u & 0x007fffffu) u = (u & 0xff800000u) + 0x00800000u;
    s = fromBits(u);
  }
  return s;
}

void llCastRowFp8(const uint16_t* x, int hidden, bool roundPow2, uint8_t* q, float* scales) {
  for (int b = 0; b < hidden / kScaleBlock; ++b) {
    float amax = 0.f;
    for (int i = 0; i < kScaleBlock; ++i) amax = std::fmax(amax, std::fabs(bf16ToFloat(x[b * kScaleBlock + i])));
    const float scale = llFp8Scale(amax, roundPow2);
    const float inv = 1.f / scale;
    scales[b] = scale;
    for (int i = 0; i < kScaleBlock; ++i) q[b * kScaleBlock + i] = fp8E4m3FromFloat(bf16ToFloat(x[b * kScaleBlock + i]) * inv);
  }
}

std::vector<uint16_t> llCombine(const LlShape& s, const LlRouting& r, const std::vector<float>& weights,
                                const std::function<const uint16_t*(int t, int k)>& row) {
  const int H = s.hidden;
  std::vector<uint16_t> out(size_t(r.numTokens) * H);
  std::vector<float> acc(H);
  for (int t = 0; t < r.numTokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int k = 0; k < s.topk; ++k) {
      if (llSlotExpert(s, r, t, k) < 0) continue;
      const float w = weights[size_t(t) * s.topk + k];
      const uint16_t* y = row(t, k);
      for (int c = 0; c < H; ++c) {
        const volatile float p = w * bf16ToFloat(y[c]);  // no fused multiply-add: the kernel rounds the product
        acc[c] = acc[c] + p;
      }
    }
    for (int c = 0; c < H; ++c) out[size_t(t) * H + c] = floatToBf16(acc[c]);
  }
  return out;
}

}  // namespace epx::ref
