// Seed of the CPU tests' randomized cases: EPX_TEST_SEED=<seed> repeats a run; else a fresh seed,
// which each test prints (and names in every failure).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <random>

namespace epx::test {

inline uint64_t testSeed() {
  if (const char* v = std::getenv("EPX_TEST_SEED")) return std::strtoull(v, nullptr, 0);
  return std::random_device{}();
}

}  // namespace epx::test
