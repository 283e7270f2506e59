// Randomized differential test of the Engram fetch (suite `random_engram`): objects and fetches
// drawn from the documented range of engram.h, each fetch checked byte for byte against the CPU
// reference and its async error against its indices (engram_harness.h). Per object (group of
// kCasesPerObject cases): 1..4 layers (now and then 5..64 layers of tiny sizes), rows of 16 B ..
// 4 KiB (multiples of 16), 1 .. 4096 rows per rank (numRows a multiple of the rank count), maxTokens
// 1..1024, 1..32 entries per token, 1..8 CTAs, chunks of the default 8 MiB, 64 KiB, 256 KiB or an
// odd multiple of 16 above 64 KiB, tables in device memory (now and then mapped pinned host memory);
// budgets keep the output (per rank) and the tables (all ranks) small. Per case: every rank's token
// count 0..maxTokens and its indices: uniform with a random share of -1, every index to one owner,
// every rank its own rows, every index -1, or uniform with a few bad indices (outside [-1,
// numRows)) on some ranks, whose rows must be zeroed and reported (ncclInvalidArgument naming the
// first layer with one; the report stays for the object's later cases). Every draw is a pure
// function of (seed, index, rank count): all processes of a fake-node run draw the same cases.
//
// Environment: EPX_TEST_SEED, EPX_RANDOM_CASES (default 300, 100 with EPX_TEST_QUICK),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed and rank count),
// EPX_RANDOM_SECONDS (no new object after this many seconds). A failing case prints its index, the
// seed, its plan and case, and the command line that replays it.
//
// The suite `random_engram_sampler` (no GPU) checks the draws: valid plans within the budgets, the
// documented ends of every range and every case kind covered, deterministic per index.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "engram_harness.h"
#include "ep_harness.h"
#include "random_config.h"
#include "random_run.h"

using namespace epx::test;
using namespace epx::test::engram;

namespace {

constexpr int kCasesPerObject = 4;
// Output bytes of one rank's fetch, and table bytes of all ranks together (every process builds
// every rank's tables for the reference).
constexpr double kOutputBudget = 16.0 * (1 << 20);
constexpr double kTableBudget = 32.0 * (1 << 20);
constexpr uint64_t kObjectStream = 0x656e6f626aull, kCaseStream = 0x656e63617365ull;

struct ObjectSpec {
  Plan plan;
  TableMemory memory = TableMemory::Device;
};

std::string describe(const ObjectSpec& s) {
  return s.plan.describe() + (s.memory == TableMemory::MappedHost ? ", tables in mapped host memory" : "");
}

ObjectSpec drawObject(uint64_t seed, int group, int R) {
  Rng rng(rnd::streamSeed(seed, kObjectStream, uint64_t(group)));
  ObjectSpec s;
  Plan& p = s.plan;
  if (rng.unit() < 0.06) {  // many layers of tiny sizes
    p.numLayers = rng.unit() < 0.5 ? NCCL_EP_ENGRAM_MAX_LAYERS : rng.uniform(5, NCCL_EP_ENGRAM_MAX_LAYERS - 1);
    p.rowBytes = 16 * size_t(rng.uniform(1, 4));
    p.maxTokens = rnd::logUniform(rng, 1, 8);
    p.entries = rng.uniform(1, 4);
    p.rowsPerRank = rnd::logUniform(rng, 1, 16);
  } else {
    p.numLayers = rng.uniform(1, 4);
    double u = rng.unit();
    p.rowBytes = 16 * size_t(u < 0.15 ? 1 : u < 0.25 ? 256 : rnd::logUniform(rng, 1, 256));
    u = rng.unit();
    p.entries = u < 0.15 ? 1 : u < 0.3 ? 32 : rng.uniform(1, 32);
    u = rng.unit();
    p.maxTokens = u < 0.1 ? 1 : rnd::logUniform(rng, 1, 1024);
    u = rng.unit();
    p.rowsPerRank = u < 0.1 ? 1 : rnd::logUniform(rng, 1, 4096);
  }
  const auto outBytes = [&] { return double(p.numLayers) * p.maxTokens * p.entries * double(p.rowBytes); };
  while (p.maxTokens > 1 && outBytes() > kOutputBudget) p.maxTokens /= 2;
  while (p.rowsPerRank > 1 && double(R) * p.rowsPerRank * double(p.rowBytes) * p.numLayers > kTableBudget)
    p.rowsPerRank /= 2;
  p.numCtas = rng.uniform(1, 8);
  const double u = rng.unit();
  p.chunkBytes = u < 0.45 ? 0
                 : u < 0.7 ? uint64_t(64) << 10
                 : u < 0.85 ? uint64_t(256) << 10
                            : (uint64_t(64) << 10) + 16 * uint64_t(rng.uniform(1, 4095));
  s.memory = rng.unit() < 0.12 ? TableMemory::MappedHost : TableMemory::Device;
  return s;
}

enum Kind { kUniform = 0, kOneOwner, kOwnRows, kUnused, kBad, kNumKinds };
const char* kKindNames[] = {"uniform", "one owner", "own rows", "all -1", "bad indices"};

struct Case {
  Kind kind = kUniform;
  std::vector<Fetch> fetches;  // [rank]
  double unusedShare = 0;
  int owner = -1;              // kOneOwner
  int badRanks = 0;            // ranks with a bad index
};

Case drawCase(uint64_t seed, int index, const Plan& p, int R) {
  Rng rng(rnd::streamSeed(seed, kCaseStream, uint64_t(index)));
  Case c;
  const double k = rng.unit();
  c.kind = k < 0.4 ? kUniform : k < 0.55 ? kOneOwner : k < 0.67 ? kOwnRows : k < 0.75 ? kUnused : kBad;
  c.unusedShare = c.kind == kUnused ? 1.0 : rng.unit() < 0.3 ? 0.0 : rng.unit() * 0.6;
  c.owner = rng.uniform(0, R - 1);
  const bool allZero = rng.unit() < 0.04;
  for (int r = 0; r < R; ++r) {
    const double u = rng.unit();
    const int tokens = allZero || u < 0.12 ? 0 : u < 0.35 ? p.maxTokens : rng.uniform(0, p.maxTokens);
    std::vector<int> owners;
    if (c.kind == kOneOwner) owners = {c.owner};
    if (c.kind == kOwnRows) owners = {r};
    c.fetches.push_back(Fetch::random(p, R, tokens, rng.next(), c.unusedShare, owners));
  }
  if (c.kind == kBad) {
    const int64_t numRows = p.numRows(R);
    for (int r = 0; r < R; ++r) {
      Fetch& f = c.fetches[size_t(r)];
      if (f.indices.empty() || (r > 0 && rng.unit() < 0.5)) continue;
      const int n = rng.uniform(1, 3);
      for (int j = 0; j < n; ++j) {
        int32_t v;
        switch (rng.uniform(0, 3)) {
          case 0: v = int32_t(std::min<int64_t>(numRows + rng.uniform(0, 100), INT32_MAX)); break;
          case 1: v = INT32_MAX; break;
          case 2: v = -2 - rng.uniform(0, 100); break;
          default: v = INT32_MIN; break;
        }
        f.indices[size_t(rng.next() % f.indices.size())] = v;
      }
      ++c.badRanks;
    }
  }
  return c;
}

std::string describe(const Case& c) {
  std::string s = kKindNames[c.kind];
  if (c.kind == kOneOwner) s += " (rank " + std::to_string(c.owner) + ")";
  if (c.kind != kUnused) s += ", " + std::to_string(int(c.unusedShare * 100)) + "% -1";
  if (c.kind == kBad) s += ", bad indices on " + std::to_string(c.badRanks) + " rank(s)";
  s += ", tokens [";
  for (const auto& f : c.fetches) s += " " + std::to_string(f.tokens);
  return s + " ]";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_engram)

BOOST_AUTO_TEST_CASE(differential) {
  rnd::RandomRun run("random_engram", kCasesPerObject);
  const uint64_t seed = run.seed();
  const int R = run.ranks();
  for (int grp = run.firstGroup(); grp < run.endGroup(); ++grp) {
    if (run.timeUp()) break;
    const ObjectSpec spec = drawObject(seed, grp, R);
    std::unique_ptr<EngramObjects> o;
    try {
      o = std::make_unique<EngramObjects>(spec.plan, mix64(seed ^ (uint64_t(grp) << 20) ^ 0x7461626cull), spec.memory);
    } catch (const std::exception& e) {
      run.reportFailure("to create object " + std::to_string(grp) + " {" + describe(spec) + "}", run.caseBegin(grp), e.what());
      throw;
    }
    for (int i = run.caseBegin(grp); i < run.caseEnd(grp); ++i) {
      const Case c = drawCase(seed, i, spec.plan, R);
      const std::string name = "case " + std::to_string(i) + " {" + describe(spec) + "; " + describe(c) + "}";
      BOOST_TEST_MESSAGE("random_engram " << name);
      const double start = run.elapsed();
      std::string why;
      try {
        const auto fails = runFetch(*o, c.fetches);
        for (int r : localRanks())
          if (!fails[size_t(r)].empty()) why += (why.empty() ? "rank " : "; rank ") + std::to_string(r) + ": " + fails[size_t(r)];
      } catch (const std::exception& e) {
        run.reportFailure(name, i, e.what());
        throw;
      }
      if (!why.empty()) run.reportFailure(name, i, why);
      BOOST_TEST(why.empty(), name << ": " << why);
      run.count(why.empty(), run.elapsed() - start, name);
      run.feature(std::string("indices ") + kKindNames[c.kind]);
      run.feature("more than 4 layers", spec.plan.numLayers > 4);
      run.feature("16 B rows", spec.plan.rowBytes == 16);
      run.feature("4 KiB rows", spec.plan.rowBytes == 4096);
      run.feature("1 entry", spec.plan.entries == 1);
      run.feature("32 entries", spec.plan.entries == 32);
      run.feature("1 row per rank", spec.plan.rowsPerRank == 1);
      run.feature("chunk 64 KiB", spec.plan.chunkBytes == (uint64_t(64) << 10));
      run.feature("1 CTA", spec.plan.numCtas == 1);
      run.feature("mapped host tables", spec.memory == TableMemory::MappedHost);
      run.feature("0 tokens on every rank",
                  std::all_of(c.fetches.begin(), c.fetches.end(), [](const Fetch& f) { return f.tokens == 0; }));
      run.feature("maxTokens on a rank",
                  std::any_of(c.fetches.begin(), c.fetches.end(), [&](const Fetch& f) { return f.tokens == spec.plan.maxTokens; }));
    }
  }
  run.finish();
}

BOOST_AUTO_TEST_SUITE_END()

// CPU half: the draws themselves (no GPU).
BOOST_AUTO_TEST_SUITE(random_engram_sampler)

BOOST_AUTO_TEST_CASE(draws_are_valid_bounded_deterministic_and_cover_the_range) {
  constexpr int kCases = 300;
  for (const uint64_t seed : {1ull, 0xdeadbeefull, 0x123456789abcdefull}) {
    for (const int R : {1, 2, 3, 8}) {
      std::map<std::string, int> seen;
      for (int grp = 0; grp < kCases / kCasesPerObject; ++grp) {
        const ObjectSpec s = drawObject(seed, grp, R);
        const Plan& p = s.plan;
        const std::string what = "seed " + std::to_string(seed) + ", R " + std::to_string(R) + ", object " +
                                 std::to_string(grp) + ": " + describe(s);
        BOOST_TEST_REQUIRE((p.numLayers >= 1 && p.numLayers <= NCCL_EP_ENGRAM_MAX_LAYERS), what);
        BOOST_TEST_REQUIRE((p.rowBytes >= 16 && p.rowBytes <= 4096 && p.rowBytes % 16 == 0), what);
        BOOST_TEST_REQUIRE((p.rowsPerRank >= 1 && p.numRows(R) % R == 0 && p.numRows(R) < (int64_t(1) << 31)), what);
        BOOST_TEST_REQUIRE((p.maxTokens >= 1 && p.maxTokens <= 1024 && p.entries >= 1 && p.entries <= 32), what);
        BOOST_TEST_REQUIRE((p.numCtas >= 1 && p.numCtas <= 8), what);
        BOOST_TEST_REQUIRE((p.chunkBytes == 0 || (p.chunkBytes >= (uint64_t(64) << 10) && p.chunkBytes % 16 == 0 &&
                                                  p.chunkBytes <= (uint64_t(1) << 30))),
                           what);
        BOOST_TEST_REQUIRE(double(p.numLayers) * p.maxTokens * p.entries * double(p.rowBytes) <= kOutputBudget, what);
        BOOST_TEST_REQUIRE(double(R) * p.rowsPerRank * double(p.rowBytes) * p.numLayers <= kTableBudget, what);
        const ObjectSpec again = drawObject(seed, grp, R);
        BOOST_TEST_REQUIRE(describe(again) == describe(s), what);
        if (p.numLayers == NCCL_EP_ENGRAM_MAX_LAYERS) ++seen["64 layers"];
        if (p.numLayers == 1) ++seen["1 layer"];
        if (p.rowBytes == 16) ++seen["16 B rows"];
        if (p.rowBytes == 4096) ++seen["4 KiB rows"];
        if (p.entries == 1) ++seen["1 entry"];
        if (p.entries == 32) ++seen["32 entries"];
        if (p.maxTokens == 1) ++seen["maxTokens 1"];
        if (p.maxTokens >= 512) ++seen["maxTokens >= 512"];
        if (p.rowsPerRank == 1) ++seen["1 row per rank"];
        if (p.numCtas == 1) ++seen["1 CTA"];
        if (p.numCtas == 8) ++seen["8 CTAs"];
        if (p.chunkBytes == 0) ++seen["default chunk"];
        if (p.chunkBytes == (uint64_t(64) << 10)) ++seen["chunk 64 KiB"];
        if (s.memory == TableMemory::MappedHost) ++seen["mapped host tables"];
        for (int i = grp * kCasesPerObject; i < (grp + 1) * kCasesPerObject; ++i) {
          const Case c = drawCase(seed, i, p, R);
          const std::string cw = what + ", case " + std::to_string(i) + ": " + describe(c);
          BOOST_TEST_REQUIRE(c.fetches.size() == size_t(R), cw);
          bool anyBad = false, allZero = true;
          for (int r = 0; r < R; ++r) {
            const Fetch& f = c.fetches[size_t(r)];
            BOOST_TEST_REQUIRE((f.tokens >= 0 && f.tokens <= p.maxTokens), cw);
            BOOST_TEST_REQUIRE(f.indices.size() == indexCount(p, f.tokens), cw);
            allZero = allZero && f.tokens == 0;
            if (f.tokens == p.maxTokens) ++seen["maxTokens on a rank"];
            std::string wrong;  // the first index that does not belong to the case's kind
            for (int32_t v : f.indices) {
              const bool bad = v < -1 || int64_t(v) >= p.numRows(R);
              anyBad = anyBad || bad;
              const bool ok = (c.kind == kBad || !bad) && (c.kind != kUnused || v == -1) &&
                              (v < 0 || bad || c.kind != kOneOwner || int(v / p.rowsPerRank) == c.owner) &&
                              (v < 0 || bad || c.kind != kOwnRows || int(v / p.rowsPerRank) == r);
              if (!ok && wrong.empty()) wrong = "rank " + std::to_string(r) + " has index " + std::to_string(v);
            }
            BOOST_TEST_REQUIRE(wrong.empty(), cw << ": " << wrong);
          }
          const Case again = drawCase(seed, i, p, R);
          for (int r = 0; r < R; ++r) BOOST_TEST_REQUIRE(again.fetches[size_t(r)].indices == c.fetches[size_t(r)].indices, cw);
          ++seen[std::string("indices ") + kKindNames[c.kind]];
          if (anyBad) ++seen["a bad index"];
          if (allZero) ++seen["0 tokens on every rank"];
        }
      }
      for (const char* want : {"64 layers", "1 layer", "16 B rows", "4 KiB rows", "1 entry", "32 entries", "maxTokens 1",
                               "maxTokens >= 512", "1 row per rank", "1 CTA", "8 CTAs", "default chunk", "chunk 64 KiB",
                               "mapped host tables", "maxTokens on a rank", "indices uniform", "indices one owner",
                               "indices own rows", "indices all -1", "indices bad indices", "a bad index",
                               "0 tokens on every rank"})
        BOOST_TEST(seen[want] > 0, "seed " << seed << ", R " << R << ": no draw with " << want);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
