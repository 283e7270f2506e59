// BF16 <-> FP32 conversion of the reference (epx/ref/bf16.h): round-to-nearest-even like CUDA's
// __float2bfloat16_rn, NaN kept quiet, exact round trip of every BF16 value.
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "epx/ref/bf16.h"

using epx::ref::bf16ToFloat;
using epx::ref::floatToBf16;

namespace {
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool isNanBf16(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }
}  // namespace

BOOST_AUTO_TEST_SUITE(bf16)

BOOST_AUTO_TEST_CASE(simple_values) {
  BOOST_TEST(floatToBf16(0.0f) == 0x0000);
  BOOST_TEST(floatToBf16(-0.0f) == 0x8000);
  BOOST_TEST(floatToBf16(1.0f) == 0x3f80);
  BOOST_TEST(floatToBf16(-1.0f) == 0xbf80);
  BOOST_TEST(floatToBf16(2.0f) == 0x4000);
  BOOST_TEST(floatToBf16(0.5f) == 0x3f00);
  BOOST_TEST(floatToBf16(-2.375f) == 0xc018);
  BOOST_TEST(bf16ToFloat(0x3f80) == 1.0f);
  BOOST_TEST(bf16ToFloat(0xc018) == -2.375f);
  BOOST_TEST(bf16ToFloat(0x7f80) == std::numeric_limits<float>::infinity());
  BOOST_TEST(bf16ToFloat(0xff80) == -std::numeric_limits<float>::infinity());
}

BOOST_AUTO_TEST_CASE(round_trip_every_value) {
  int bad = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t v = uint16_t(b);
    uint16_t back = floatToBf16(bf16ToFloat(v));
    if (isNanBf16(v)) {
      if (!isNanBf16(back) || (back & 0x8000) != (v & 0x8000)) ++bad;
    } else if (back != v) {
      ++bad;
    }
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_CASE(round_to_nearest_even) {
  // ulp of BF16 at 1.0 is 2^-7.
  BOOST_TEST(floatToBf16(1.0f + 0x1p-8f) == 0x3f80);              // tie -> even (down)
  BOOST_TEST(floatToBf16(1.0f + 3 * 0x1p-8f) == 0x3f82);          // tie -> even (up)
  BOOST_TEST(floatToBf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);   // above the tie -> up
  BOOST_TEST(floatToBf16(1.0f + 0x1p-8f - 0x1p-20f) == 0x3f80);   // below the tie -> down
  BOOST_TEST(floatToBf16(-(1.0f + 0x1p-8f + 0x1p-20f)) == 0xbf81);
  BOOST_TEST(floatToBf16(1.0f + 0x1p-7f) == 0x3f81);              // exact
  // Carry into the exponent: largest BF16 below 2 plus a bit more than half an ulp -> 2.0.
  BOOST_TEST(floatToBf16(fromBits(0x3fffc000u)) == 0x4000);
  // Overflow: FLT_MAX rounds to +inf; the largest finite BF16 stays.
  BOOST_TEST(floatToBf16(FLT_MAX) == 0x7f80);
  BOOST_TEST(floatToBf16(-FLT_MAX) == 0xff80);
  BOOST_TEST(floatToBf16(fromBits(0x7f7f0000u)) == 0x7f7f);
  BOOST_TEST(floatToBf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  // Subnormals round like normals.
  BOOST_TEST(floatToBf16(fromBits(0x00010000u)) == 0x0001);
  BOOST_TEST(floatToBf16(fromBits(0x00008000u)) == 0x0000);  // tie -> even (0)
  BOOST_TEST(floatToBf16(fromBits(0x00018000u)) == 0x0002);  // tie -> even (2)
}

BOOST_AUTO_TEST_CASE(nan_stays_quiet_nan) {
  BOOST_TEST(isNanBf16(floatToBf16(std::numeric_limits<float>::quiet_NaN())));
  // A signalling NaN whose payload lives only in the low 16 bits must not turn into infinity.
  uint16_t s = floatToBf16(fromBits(0x7f800001u));
  BOOST_TEST(isNanBf16(s));
  BOOST_TEST((s & 0x0040) != 0);  // quiet bit set
  uint16_t n = floatToBf16(fromBits(0xff800001u));
  BOOST_TEST(isNanBf16(n));
  BOOST_TEST((n & 0x8000) != 0);  // sign kept
  BOOST_TEST(std::isnan(bf16ToFloat(0xffff)));  // the tests' poison pattern is a NaN
}

BOOST_AUTO_TEST_CASE(matches_fp32_rounding_on_random_values) {
  // Round-to-nearest-even computed independently: compare against the two BF16 neighbours.
  uint64_t st = 0x1234567887654321ull;
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    uint32_t u = uint32_t(st) & 0xbfffffffu;  // keep away from inf/NaN exponents
    float f = fromBits(u);
    uint16_t lo = uint16_t(u >> 16);
    uint16_t hi = uint16_t(lo + 1);
    double dlo = std::fabs(double(f) - double(bf16ToFloat(lo)));
    double dhi = std::fabs(double(bf16ToFloat(hi)) - double(f));
    uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    if (floatToBf16(f) != want) ++bad;
  }
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_SUITE_END()
