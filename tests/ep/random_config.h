// Configuration sampler of the randomized differential test (GPU suite `random`, test_random.cc;
// checked on the CPU by the suite `random_sampler`). Every draw is a pure function of (base seed,
// index, nRanks): all processes of a multi-process run draw the same group and case configs (the
// base seed is rank 0's), and one case can be replayed alone from its index.
//
// Ranges are the documented ones of epx/ep.h: hidden 8..65536 (multiples of 8; of 128 for FP8
// groups), top-k 1..32 (the ends drawn often), experts up to 1024 (a multiple of nRanks), tokens
// 0..maxTokensPerRank per rank (1..65536), alignment 1..1024, both layouts and modes, BF16/FP8,
// int32/int64 ids, biases, weights, zero-copy and pull combine, masked slots and skewed routes.
// Budgets keep every case small enough to run fast: maxTokensPerRank and the alignment shrink
// until the rows and the window (ncclEpGetBufferSizeHint) fit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ep_harness.h"

namespace epx::test::rnd {

// Bytes of all ranks' capacity-sized outputs together (nRanks^2 * maxT * min(K, Le) rows of H * 2
// bytes, plus their metadata):
// every process builds every rank's data, and fake nodes put every rank on one GPU.
constexpr double kRowBytesBudget = 64.0 * (1 << 20);
// Alignment gap rows of all ranks (nRanks * Le * (alignment - 1) * H * 2).
constexpr double kGapBytesBudget = 64.0 * (1 << 20);
// ncclEpGetBufferSizeHint of one rank's window, times nRanks (one GPU under fake nodes).
constexpr double kWindowBytesBudget = 1024.0 * (1 << 20);
// Cases drawn per group config (group creation is collective and costly).
constexpr int kCasesPerGroup = 6;

struct RandomCase {
  int index = 0;
  CaseConfig cfg;
  std::vector<int> tokens;  // T per rank
  RouteSpec route;
  int repeats = 1;          // 2: cached dispatch, the route dispatched and combined again
  uint64_t dataSeed = 0;    // routing and data (runCaseOn)
};

// Group config of group `group` (cases [group * kCasesPerGroup, (group + 1) * kCasesPerGroup)).
GroupSpec drawGroup(uint64_t baseSeed, int group, int nRanks);
inline int groupOf(int caseIndex) { return caseIndex / kCasesPerGroup; }
// Case `index` on its group's config g (= drawGroup(baseSeed, groupOf(index), nRanks)).
RandomCase drawCase(uint64_t baseSeed, int index, const GroupSpec& g, int nRanks);

// Everything that defines the case, on one line (with the group fields describe() leaves out).
std::string describe(const RandomCase& c);

// Draw helpers shared by the randomized suites' samplers (random_{bucket,pp,ll}_config.h too).
// Independent generator seed per (what, index) from the base seed.
uint64_t streamSeed(uint64_t base, uint64_t what, uint64_t index);
// Log-uniform integer in [lo, hi], lo >= 1 (small and large values equally likely per octave).
int logUniform(Rng& rng, int lo, int hi);
uint64_t logUniform64(Rng& rng, uint64_t lo, uint64_t hi);
// Uniform integer in [lo, hi].
uint64_t uniform64(Rng& rng, uint64_t lo, uint64_t hi);
// Top-k: both ends of 1..32 often (31 and 32 in about a third of the draws), else uniform.
int drawTopk(Rng& rng);

// Environment, read by every randomized suite (random, random_bucket, random_pp, random_ll):
// EPX_RANDOM_CASES (number of cases, default 300, 100 with EPX_TEST_QUICK), EPX_RANDOM_CASE (replay
// this index alone; -1 when unset), EPX_RANDOM_SECONDS (no new group after this many seconds,
// default 150; 0 = no limit).
int caseCount();
int replayCase();
double timeLimitSeconds();

}  // namespace epx::test::rnd
