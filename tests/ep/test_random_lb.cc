// Randomized differential test of expert load balancing (suite `random_lb`): objects and mappings
// drawn from the whole documented range of lb.h, each case a prefetch and (with gradient tensors) a
// gradient reduction checked byte and bit exact against the CPU reference (lb_harness.h). Per
// object (group of kCasesPerObject cases): 1..4 local experts, 1..4 slots, 0..3 weight tensors of
// 16 B .. a few chunks per row, 0..3 gradient tensors of 4 .. a few chunks of FP32 per row (not
// both none), 1..8 CTAs, chunks of 64 KiB .. 2 MiB. Per case a mapping: uniform with a random share
// of unused slots, one hot expert in every slot, every slot unused, or a few entries out of range
// (skipped and reported, ncclInvalidArgument naming the first).
//
// Environment: EPX_TEST_SEED, EPX_RANDOM_CASES (default 300, 100 with EPX_TEST_QUICK),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed and rank count),
// EPX_RANDOM_SECONDS (no new object after this many seconds). A failing case prints its index, the
// seed, its configuration and the command line that replays it.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "lb_harness.h"
#include "random_run.h"

using namespace epx::test;
using namespace epx::test::lb;

namespace {

constexpr int kCasesPerObject = 4;
constexpr uint64_t kChunkChoices[] = {uint64_t(64) << 10, uint64_t(256) << 10, uint64_t(2) << 20};

// Row sizes in 16-byte vectors: one, a few, odd counts, and up to two chunks plus a tail.
size_t drawVectors(std::mt19937_64& g, uint64_t chunkBytes) {
  switch (g() % 4) {
    case 0: return 1;
    case 1: return 1 + g() % 16;
    case 2: return 2 * (g() % 500) + 1;
    default: return (chunkBytes / 16) * (1 + g() % 2) + 1 + g() % 64;
  }
}

Plan drawPlan(uint64_t seed, int group) {
  std::mt19937_64 g(mix64(seed ^ (uint64_t(group) << 20) ^ 0x4c42u));
  Plan p;
  p.localExperts = 1 + int(g() % 4);
  p.numSlots = 1 + int(g() % 4);
  p.chunkBytes = kChunkChoices[g() % 3];
  p.numCtas = 1 + int(g() % 8);
  const int w = int(g() % 4), gr = w == 0 ? 1 + int(g() % 3) : int(g() % 4);
  for (int t = 0; t < w; ++t) p.weightRowBytes.push_back(16 * drawVectors(g, p.chunkBytes));
  for (int t = 0; t < gr; ++t) p.gradRowElems.push_back(4 * drawVectors(g, p.chunkBytes));
  return p;
}

std::string describe(const Plan& p) {
  std::string s = std::to_string(p.localExperts) + " local experts, " + std::to_string(p.numSlots) + " slots, " +
                  std::to_string(p.numCtas) + " CTAs, chunk " + std::to_string(p.chunkBytes >> 10) + " KiB, weights [";
  for (size_t b : p.weightRowBytes) s += " " + std::to_string(b);
  s += " ] B, gradients [";
  for (size_t e : p.gradRowElems) s += " " + std::to_string(e);
  return s + " ] FP32";
}

enum MapKind { kUniform = 0, kHot = 1, kUnused = 2, kOutOfRange = 3 };
const char* kMapNames[] = {"uniform", "one hot expert", "all unused", "out-of-range entries"};

struct MapCase {
  MapKind kind;
  std::vector<int32_t> map;
  std::string badMessage;  // the async error the case must report, or ""
};

MapCase drawMapping(uint64_t seed, int index, const Plan& p, int R) {
  std::mt19937_64 g(mix64(seed ^ (uint64_t(index) << 24) ^ 0x4d4150u));
  const int E = p.localExperts * R, n = R * p.numSlots;
  MapCase c{MapKind(g() % 4), std::vector<int32_t>(size_t(n), -1), {}};
  const double unused = double(g() % 100) / 100.0;
  for (int i = 0; i < n; ++i) {
    switch (c.kind) {
      case kUniform:
      case kOutOfRange: c.map[size_t(i)] = double(g() % 1000) / 1000.0 < unused ? -1 : int32_t(g() % uint64_t(E)); break;
      case kHot: c.map[size_t(i)] = int32_t(seed % uint64_t(E)); break;
      case kUnused: break;
    }
  }
  if (c.kind == kOutOfRange) {
    const int first = int(g() % uint64_t(n));
    c.map[size_t(first)] = g() % 2 ? int32_t(E + int(g() % 100)) : int32_t(-2 - int(g() % 100));
    for (int i = first + 1; i < n; ++i)
      if (g() % 4 == 0) c.map[size_t(i)] = E;
    c.badMessage = "the load-balancing mapping entry of rank " + std::to_string(first / p.numSlots) + ", slot " +
                   std::to_string(first % p.numSlots) + " is " + std::to_string(c.map[size_t(first)]);
  }
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_lb)

BOOST_AUTO_TEST_CASE(differential) {
  rnd::RandomRun run("random_lb", kCasesPerObject);
  const uint64_t seed = run.seed();
  const int R = run.ranks();
  for (int grp = run.firstGroup(); grp < run.endGroup(); ++grp) {
    if (run.timeUp()) break;
    const Plan p = drawPlan(seed, grp);
    std::unique_ptr<LbObjects> o;
    try {
      o = std::make_unique<LbObjects>(p);
    } catch (const std::exception& e) {
      run.reportFailure("to create object " + std::to_string(grp) + " {" + describe(p) + "}", run.caseBegin(grp), e.what());
      throw;
    }
    run.feature("gradient reduction refused (no GIN get)", o->gradsRefused);
    if (o->empty()) continue;  // gradients only, and refused: nothing to run
    for (int i = run.caseBegin(grp); i < run.caseEnd(grp); ++i) {
      const MapCase mc = drawMapping(seed, i, o->plan, R);
      const std::string name = "case " + std::to_string(i) + " {" + describe(o->plan) + "; " + kMapNames[mc.kind] + "}";
      BOOST_TEST_MESSAGE("random_lb " << name);
      const double start = run.elapsed();
      std::string why;
      try {
        const auto fails = runMapping(*o, mc.map, mix64(seed ^ uint64_t(i)), mc.badMessage);
        for (int r : localRanks())
          if (!fails[size_t(r)].empty()) why += (why.empty() ? "rank " : "; rank ") + std::to_string(r) + ": " + fails[size_t(r)];
      } catch (const std::exception& e) {
        run.reportFailure(name, i, e.what());
        throw;
      }
      if (!why.empty()) run.reportFailure(name, i, why);
      BOOST_TEST(why.empty(), name << ": " << why);
      run.count(why.empty(), run.elapsed() - start, name);
      run.feature(std::string("mapping ") + kMapNames[mc.kind]);
      run.feature("weights only", o->plan.gradRowElems.empty());
      run.feature("gradients only", o->plan.weightRowBytes.empty());
      run.feature("chunk 64 KiB", o->plan.chunkBytes == kChunkChoices[0]);
      run.feature("1 CTA", o->plan.numCtas == 1);
      // A bad entry is recorded once per object: later cases need a fresh one.
      if (!mc.badMessage.empty() && i + 1 < run.caseEnd(grp)) {  // (an empty plan never gets here)
        o.reset();
        o = std::make_unique<LbObjects>(p);
      }
    }
  }
  run.finish();
}

BOOST_AUTO_TEST_SUITE_END()
