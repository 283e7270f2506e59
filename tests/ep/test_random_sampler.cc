// CPU half of the randomized differential test (suite `random_sampler`, no GPU needed): the
// configuration sampler of random_config.h draws only valid configurations inside its budgets,
// deterministically from the seed, and covers both ends of every documented range (top-k 31/32
// included) within the default number of cases; its routings pass the reference's validation.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "ep_harness.h"
#include "random_config.h"

using namespace epx::test;

namespace {

constexpr int kDefaultCases = 300;
const int kRankCounts[] = {1, 2, 3, 8};

// Every case of a run of `n` cases at R ranks, as the GPU suite draws them.
std::vector<rnd::RandomCase> drawRun(uint64_t seed, int R, int n) {
  std::vector<rnd::RandomCase> out;
  GroupSpec g;
  for (int i = 0; i < n; ++i) {
    if (i % rnd::kCasesPerGroup == 0) g = rnd::drawGroup(seed, rnd::groupOf(i), R);
    out.push_back(rnd::drawCase(seed, i, g, R));
  }
  return out;
}

// Problems of one case ("" when valid): the documented ranges and the harness's constraints.
std::string invalid(const rnd::RandomCase& rc, int R) {
  const CaseConfig& c = rc.cfg;
  const GroupSpec& g = c.g;
  const ncclEpConfig_t cfg = makeConfig(g);
  size_t hint = 0;
  if (ncclEpGetBufferSizeHint(&cfg, R, &hint) != ncclSuccess) return std::string("config rejected: ") + ncclEpGetLastError();
  if (double(hint) * R > rnd::kWindowBytesBudget && g.maxTokens > 1) return "window over budget";
  if (g.hidden < 8 || g.hidden > 65536 || g.hidden % (g.fp8 ? 128 : 8)) return "hidden";
  if (g.topk < 1 || g.topk > 32) return "topk";
  if (g.numExperts < R || g.numExperts > 1024 || g.numExperts % R) return "numExperts";
  if (g.maxTokens < 1 || g.maxTokens > 65536) return "maxTokens";
  const int Le = g.numExperts / R;
  if (g.maxTokens > 1 && double(R) * R * g.maxTokens * std::min(g.topk, Le) * g.hidden * 2 > rnd::kRowBytesBudget)
    return "rows over budget";
  const bool expanded = c.layout == ncclEpLayoutExpanded;
  if (c.alignment < 1 || c.alignment > 1024 || (!expanded && c.alignment != 1)) return "alignment";
  if (expanded && c.alignment > 1 && double(R) * Le * (c.alignment - 1) * g.hidden * 2 > rnd::kGapBytesBudget)
    return "gap rows over budget";
  if (c.fp8 && !g.fp8) return "fp8 without an fp8 group";
  if ((c.zeroCopy || c.pullCombine) && expanded) return "zero copy / pull with the expanded layout";
  if (c.zeroCopy < 0 || c.zeroCopy > 3) return "zeroCopy";
  if (c.pullCombine && c.combineWeights && !c.dispatchWeights) return "pull combine weights without dispatched weights";
  if (c.combineFp32 && !g.exactCombine) return "combineFp32 without exactCombine";
  if (c.numBias < 0 || c.numBias > 2) return "numBias";
  if (int(rc.tokens.size()) != R) return "tokens per rank";
  for (int t : rc.tokens)
    if (t < 0 || t > g.maxTokens) return "tokens out of [0, maxTokens]";
  if (rc.route.kind == RouteKind::SingleExpert && (rc.route.singleExpert < 0 || rc.route.singleExpert >= g.numExperts))
    return "single expert";
  if (rc.route.maskProb < 0 || rc.route.maskProb > 0.75) return "mask fraction";
  if (rc.repeats < 1 || rc.repeats > 2) return "repeats";
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_sampler)

BOOST_AUTO_TEST_CASE(draws_are_valid_and_within_budget) {
  for (int R : kRankCounts)
    for (uint64_t seed : {1ull, 0xdeadbeefull, 0x123456789abcdefull}) {
      for (const auto& rc : drawRun(seed, R, 600)) {
        const std::string why = invalid(rc, R);
        BOOST_TEST(why.empty(), "R=" << R << " seed " << seed << " " << rnd::describe(rc) << ": " << why);
      }
    }
}

BOOST_AUTO_TEST_CASE(draws_are_deterministic) {
  for (int R : kRankCounts) {
    const auto a = drawRun(42, R, 60), b = drawRun(42, R, 60), other = drawRun(43, R, 60);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      BOOST_TEST(rnd::describe(a[i]) == rnd::describe(b[i]));
      same += rnd::describe(a[i]) == rnd::describe(other[i]);
    }
    BOOST_TEST(same < 3, same << " of 60 cases equal under another seed");
    // Replay: case i alone from its group's draw equals case i of the run.
    const int i = 37;
    const auto alone = rnd::drawCase(42, i, rnd::drawGroup(42, rnd::groupOf(i), R), R);
    BOOST_TEST(rnd::describe(alone) == rnd::describe(a[size_t(i)]));
  }
}

// Both ends of every range within the default run, for several seeds.
BOOST_AUTO_TEST_CASE(default_run_covers_the_range_ends) {
  for (int R : {1, 2})
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      std::map<std::string, int> seen;
      for (const auto& rc : drawRun(seed * 0x9e3779b97f4a7c15ull, R, kDefaultCases)) {
        const CaseConfig& c = rc.cfg;
        const GroupSpec& g = c.g;
        const bool expanded = c.layout == ncclEpLayoutExpanded;
        seen["topk 32"] += g.topk == 32;
        seen["topk 31"] += g.topk == 31;
        seen["topk 31/32 expanded"] += g.topk >= 31 && expanded;
        seen["topk 31/32 dedup"] += g.topk >= 31 && !expanded;
        seen["topk 1"] += g.topk == 1;
        seen["topk 2..30"] += g.topk >= 2 && g.topk <= 30;
        seen["hidden 8"] += g.hidden == 8;
        seen["hidden 65536"] += g.hidden == 65536;
        seen["fp8 hidden 128"] += c.fp8 && g.hidden == 128;
        seen["experts max"] += g.numExperts == 1024 / R * R;
        seen["1 expert per rank"] += g.numExperts == R;
        seen["alignment 1024"] += c.alignment == 1024;
        seen["alignment 2..1023"] += c.alignment > 1 && c.alignment < 1024;
        seen["expanded"] += expanded;
        seen["dedup"] += !expanded;
        seen["exact"] += c.mode == ncclEpModeExact;
        seen["capacity"] += c.mode == ncclEpModeCapacity;
        seen["fp8"] += c.fp8;
        seen["bf16"] += !c.fp8;
        seen["ids32"] += !c.int64Ids;
        seen["ids64"] += c.int64Ids;
        seen["no weights"] += !c.dispatchWeights;
        seen["2 biases"] += c.numBias == 2;
        seen["combined weights"] += c.combineWeights;
        for (int z = 1; z <= 3; ++z) seen["zero copy " + std::to_string(z)] += c.zeroCopy == z;
        seen["pull combine"] += c.pullCombine;
        seen["fp32 combine"] += c.combineFp32;
        seen["tokens 0"] += std::count(rc.tokens.begin(), rc.tokens.end(), 0) > 0;
        seen["tokens max"] += std::count(rc.tokens.begin(), rc.tokens.end(), g.maxTokens) > 0;
        if (R == 1) seen["maxTokens 65536"] += g.maxTokens == 65536;  // rows budget: R^2 * maxT * ...
        seen["maxTokens >= 1024"] += g.maxTokens >= 1024;
        seen["one expert for all"] += rc.route.kind == RouteKind::SingleExpert;
        seen["last rank only"] += rc.route.kind == RouteKind::RankSkewed;
        seen["masked >= 50%"] += rc.route.maskProb >= 0.5;
        seen["cached dispatch"] += rc.repeats == 2;
        if (R > 1) {
          std::set<int> distinct(rc.tokens.begin(), rc.tokens.end());
          seen["tokens differ per rank"] += distinct.size() > 1;
        }
      }
      for (const auto& [what, n] : seen) BOOST_TEST(n > 0, "R=" << R << " seed " << seed << ": never drew " << what);
      if (seed == 1) {
        std::string counts;
        for (const auto& [what, n] : seen) counts += what + " " + std::to_string(n) + ", ";
        BOOST_TEST_MESSAGE("R=" << R << ", " << kDefaultCases << " cases: " << counts);
      }
      // "Meaningful probability" for the ends of top-k: at least 10% of the cases.
      BOOST_TEST(seen["topk 31"] + seen["topk 32"] >= kDefaultCases / 10, "R=" << R << " seed " << seed);
    }
}

// The reference accepts the routings the harness generates for drawn cases (small ones only here).
BOOST_AUTO_TEST_CASE(drawn_routings_are_valid) {
  int checked = 0;
  for (int R : {1, 2, 3})
    for (const auto& rc : drawRun(7, R, 300)) {
      const GroupSpec& g = rc.cfg.g;
      long tokens = 0;
      for (int t : rc.tokens) tokens += t;
      if (tokens * g.topk > 200000) continue;
      Rng rng(rc.dataSeed);
      const auto routing = makeRouting(g, rc.tokens, rc.route, rng);
      epx::ref::EpShape shape;
      shape.nRanks = R;
      shape.hidden = g.hidden;
      shape.topk = g.topk;
      shape.numExperts = g.numExperts;
      shape.expertAlignment = rc.cfg.layout == ncclEpLayoutExpanded ? rc.cfg.alignment : 1;
      shape.expanded = rc.cfg.layout == ncclEpLayoutExpanded;
      for (const auto& r : routing) {
        const std::string err = epx::ref::validateRouting(shape, r);
        BOOST_TEST(err.empty(), rnd::describe(rc) << ": " << err);
      }
      ++checked;
    }
  BOOST_TEST(checked > 100);
}

BOOST_AUTO_TEST_SUITE_END()
