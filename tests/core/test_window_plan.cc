// CPU tests of the communicator window's arithmetic (host/src/core/window_plan.h): what an object
// takes (bytes, GIN signals and counters, the drain's share) and the first-fit ranges the window is
// carved into, against a model that marks every unit.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <random>
#include <vector>

#include "core/window_plan.h"
#include "epx/device/link_args.h"
#include "epx/device/window_layout.h"

using namespace epx;

BOOST_AUTO_TEST_SUITE(window_plan)

BOOST_AUTO_TEST_CASE(region_need) {
  static_assert(kRegionAlign == dev::kWindowTotalAlign, "regions keep the windows' alignment");
  // NVLink only: the bytes rounded up to 2 MiB, no GIN.
  WindowNeed n = regionNeed(3 << 20, 40, 8, 8, false);
  BOOST_TEST(n.bytes == uint64_t(4) << 20);
  BOOST_TEST(n.ginSignals == 0);
  BOOST_TEST(n.ginCounters == 0);
  // Network peers: the drain pad after the bytes, one drain signal per rank, at least one counter.
  n = regionNeed(uint64_t(2) << 20, 40, 0, 8, true);
  BOOST_TEST(n.bytes == uint64_t(4) << 20);  // 2 MiB + the 16-byte pad
  BOOST_TEST(n.ginSignals == 48);
  BOOST_TEST(n.ginCounters == 1);
  BOOST_TEST(drainPadOffset(1001) == 1008u);
  BOOST_TEST(drainPadOffset(1008) == 1008u);
  BOOST_TEST(regionNeed(1001, 0, 3, 2, true).bytes == kRegionAlign);
  BOOST_TEST(regionNeed(0, 0, 0, 1, false).bytes == kRegionAlign);  // every region has an address of its own
  BOOST_TEST(regionNeed(kRegionAlign - dev::kLinkPadBytes, 0, 3, 2, true).bytes == kRegionAlign);
  BOOST_TEST(regionNeed(kRegionAlign - dev::kLinkPadBytes + 1, 0, 3, 2, true).bytes == 2 * kRegionAlign);
  const WindowNeed sum = regionNeed(1, 10, 4, 4, true) + regionNeed(5 << 20, 2, 1, 4, true);
  BOOST_TEST(sum.bytes == uint64_t(8) << 20);
  BOOST_TEST(sum.ginSignals == 20);
  BOOST_TEST(sum.ginCounters == 5);
  BOOST_TEST(describeNeed(sum) == "8.0 MiB, 20 GIN signals, 5 GIN counters");
  BOOST_TEST(describeNeed(regionNeed(1, 10, 4, 4, false)) == "2.0 MiB");
}

BOOST_AUTO_TEST_CASE(first_fit_reuses_and_merges) {
  RangeAllocator a(10);
  BOOST_TEST(*a.take(3) == 0u);
  BOOST_TEST(*a.take(3) == 3u);
  BOOST_TEST(*a.take(3) == 6u);
  BOOST_TEST(!a.take(2).has_value());
  BOOST_TEST(a.used() == 9u);
  a.give(3, 3);
  BOOST_TEST(*a.take(2) == 3u);  // the lowest hole that fits
  a.give(0, 3);
  a.give(3, 2);
  a.give(6, 3);
  BOOST_TEST(a.used() == 0u);
  BOOST_TEST(a.largestFree() == 10u);  // every hole merged again
  BOOST_TEST(*a.take(10) == 0u);
  BOOST_TEST(*a.take(0) == 0u);  // nothing taken
  RangeAllocator b(16);
  BOOST_TEST(*b.take(1) == 0u);
  BOOST_TEST(*b.take(4, 4) == 4u);  // aligned
  BOOST_TEST(b.largestFree(4) == 8u);
  BOOST_TEST(b.largestFree() == 8u);
  BOOST_TEST(!RangeAllocator(0).take(1).has_value());
}

// Random takes and gives against a model that marks every unit: ranges never overlap, stay inside
// the size and aligned, and a take fails only when no aligned run of free units is long enough.
BOOST_AUTO_TEST_CASE(randomized_against_a_unit_model) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const uint64_t size = 1 + rng() % 64;
    RangeAllocator a(size);
    std::vector<int> owner(size, -1);
    struct Held {
      uint64_t off, n;
    };
    std::vector<Held> held;
    for (int step = 0; step < 100; ++step) {
      if (!held.empty() && rng() % 3 == 0) {
        const size_t i = rng() % held.size();
        a.give(held[i].off, held[i].n);
        for (uint64_t u = held[i].off; u < held[i].off + held[i].n; ++u) owner[u] = -1;
        held.erase(held.begin() + long(i));
        continue;
      }
      const uint64_t n = 1 + rng() % 16, align = uint64_t(1) << (rng() % 3);
      // The model's first fit.
      std::optional<uint64_t> want;
      for (uint64_t s = 0; s + n <= size && !want; s += align) {
        bool free = true;
        for (uint64_t u = s; u < s + n && free; ++u) free = owner[u] < 0;
        if (free) want = s;
      }
      const std::optional<uint64_t> got = a.take(n, align);
      if (got != want) {
        std::printf("window_plan randomized: seed %llu round %d step %d: take(%llu, %llu) gave %lld, the model %lld\n",
                    (unsigned long long)seed, round, step, (unsigned long long)n, (unsigned long long)align,
                    got ? (long long)*got : -1LL, want ? (long long)*want : -1LL);
        BOOST_FAIL("RangeAllocator differs from the unit model (seed printed above)");
      }
      if (got) {
        for (uint64_t u = *got; u < *got + n; ++u) owner[u] = int(held.size());
        held.push_back({*got, n});
      }
      uint64_t used = 0;
      for (int o : owner) used += o >= 0;
      BOOST_REQUIRE_MESSAGE(a.used() == used, "used() wrong; seed " << seed);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
