// Configuration sampler of the randomized differential test: see random_config.h.
#include "random_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "epx/ep.h"

namespace epx::test::rnd {

uint64_t streamSeed(uint64_t base, uint64_t what, uint64_t index) {
  return base ^ (what * 0x9e3779b97f4a7c15ull) ^ ((index + 1) * 0xd1b54a32d192ed03ull);
}

int logUniform(Rng& rng, int lo, int hi) { return int(logUniform64(rng, uint64_t(lo), uint64_t(hi))); }

uint64_t logUniform64(Rng& rng, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  const double v = std::exp(std::log(double(lo)) + rng.unit() * (std::log(double(hi) + 1) - std::log(double(lo))));
  return v <= double(lo) ? lo : v >= double(hi) ? hi : uint64_t(v);
}

uint64_t uniform64(Rng& rng, uint64_t lo, uint64_t hi) { return hi <= lo ? lo : lo + rng.next() % (hi - lo + 1); }

namespace {

constexpr int kMaxHidden = 1 << 16, kMaxTopk = 32, kMaxExperts = 1024, kMaxTokens = 65536, kMaxAlign = 1024;

constexpr uint64_t kGroupStream = 0x67726f7570ull, kCaseStream = 0x63617365ull;

}  // namespace

int drawTopk(Rng& rng) {
  const double u = rng.unit();
  if (u < 0.17) return 32;
  if (u < 0.34) return 31;
  if (u < 0.44) return 1;
  return rng.uniform(1, kMaxTopk);
}

namespace {

size_t windowHint(const GroupSpec& g, int nRanks) {
  const ncclEpConfig_t c = makeConfig(g);
  size_t bytes = 0;
  if (ncclEpGetBufferSizeHint(&c, nRanks, &bytes) != ncclSuccess) return ~size_t(0);
  return bytes;
}

}  // namespace

GroupSpec drawGroup(uint64_t baseSeed, int group, int R) {
  Rng rng(streamSeed(baseSeed, kGroupStream, uint64_t(group)));
  GroupSpec g;
  g.topk = drawTopk(rng);
  const int maxLe = kMaxExperts / R;
  double u = rng.unit();
  const int Le = u < 0.2 ? maxLe : u < 0.3 ? 1 : logUniform(rng, 1, maxLe);
  g.numExperts = Le * R;
  g.fp8 = rng.unit() < 0.35 ? 1 : 0;
  const int quant = g.fp8 ? 128 : 8;
  u = rng.unit();
  g.hidden = u < 0.12 ? quant : u < 0.24 ? kMaxHidden : std::max(quant, logUniform(rng, quant, kMaxHidden) / quant * quant);
  g.exactCombine = rng.unit() < 0.15 ? 1 : 0;
  g.smBudget = rng.unit() < 0.15 ? rng.uniform(1, 16) : 0;
  // maxTokensPerRank: its largest value within the row budget (often), else log-uniform below.
  // Bytes per (token, rank): its expanded rows (data + per-row metadata) and its top-k arrays.
  const double tokenBytes = double(std::min(g.topk, Le)) * (g.hidden * 2 + 32) + g.topk * 8 + 32;
  const int cap = int(std::clamp(kRowBytesBudget / (double(R) * R * tokenBytes), 1.0, double(kMaxTokens)));
  // The smallest hidden often comes with the most tokens (65536 when the budget allows).
  g.maxTokens = rng.unit() < (g.hidden == quant ? 0.6 : 0.2) ? cap : logUniform(rng, 1, cap);
  while (g.maxTokens > 1 && double(windowHint(g, R)) * R > kWindowBytesBudget) g.maxTokens /= 2;
  return g;
}

RandomCase drawCase(uint64_t baseSeed, int index, const GroupSpec& g, int R) {
  Rng rng(streamSeed(baseSeed, kCaseStream, uint64_t(index)));
  RandomCase rc;
  rc.index = index;
  CaseConfig& c = rc.cfg;
  c.g = g;
  const int Le = g.numExperts / R;
  c.layout = rng.unit() < 0.5 ? ncclEpLayoutExpanded : ncclEpLayoutDeduplicated;
  c.mode = rng.unit() < 0.5 ? ncclEpModeExact : ncclEpModeCapacity;
  const bool expanded = c.layout == ncclEpLayoutExpanded;
  const bool exact = c.mode == ncclEpModeExact;
  double u = rng.unit();
  if (expanded) {
    int a = u < 0.3 ? 1 : u < 0.45 ? kMaxAlign : u < 0.7 ? 1 << rng.uniform(1, 10) : rng.uniform(2, kMaxAlign);
    const double gapRow = double(R) * Le * g.hidden * 2;  // one more alignment row on every rank
    a = std::min(a, 1 + int(std::min(kGapBytesBudget / gapRow, double(kMaxAlign))));
    c.alignment = a;
    c.zeroGaps = rng.unit() < 0.5 ? 1 : 0;
  }
  c.fp8 = g.fp8 && rng.unit() < 0.7;
  c.int64Ids = rng.unit() < 0.5;
  c.dispatchWeights = rng.unit() < 0.8;
  c.optionalOutputs = !exact || rng.unit() < 0.85;
  c.shapeChecks = rng.unit() < 0.7;
  c.numBias = rng.uniform(0, 2);
  c.combineWeights = rng.unit() < 0.5;
  if (!expanded) {
    c.zeroCopy = rng.unit() < 0.5 ? 0 : rng.uniform(1, 3);
    c.pullCombine = rng.unit() < 0.3;
    if (c.pullCombine && c.combineWeights) c.dispatchWeights = true;  // weights come from the window
  }
  c.combineFp32 = g.exactCombine && rng.unit() < 0.6;
  rc.tokens.resize(size_t(R));
  for (int& t : rc.tokens) {
    u = rng.unit();
    t = u < 0.15 ? 0 : u < 0.3 ? g.maxTokens : rng.uniform(0, g.maxTokens);
  }
  u = rng.unit();
  if (u < 0.12) {
    rc.route.kind = RouteKind::SingleExpert;  // every token to one expert
    rc.route.singleExpert = rng.uniform(0, g.numExperts - 1);
  } else if (u < 0.2) {
    rc.route.kind = RouteKind::RankSkewed;
  }
  if (rc.route.kind != RouteKind::SingleExpert) {
    rc.route.maskProb = rng.unit() < 0.35 ? 0.0 : 0.75 * rng.unit();
    rc.route.fullyMaskedToken = rng.unit() < 0.15;
  }
  rc.repeats = rng.unit() < 0.15 ? 2 : 1;
  rc.dataSeed = rng.next();
  return rc;
}

std::string describe(const RandomCase& rc) {
  std::ostringstream os;
  os << "case " << rc.index << ": " << rc.cfg.describe() << (rc.cfg.g.fp8 ? " fp8Group" : "")
     << (rc.cfg.shapeChecks ? "" : " noShapeChecks") << " T=[";
  for (size_t i = 0; i < rc.tokens.size(); ++i) os << (i ? "," : "") << rc.tokens[i];
  os << "] route=";
  switch (rc.route.kind) {
    case RouteKind::Uniform: os << "uniform"; break;
    case RouteKind::SingleExpert: os << "single(" << rc.route.singleExpert << ")"; break;
    case RouteKind::RankSkewed: os << "lastRankOnly"; break;
  }
  os << " mask=" << rc.route.maskProb << (rc.route.fullyMaskedToken ? " token0Masked" : "")
     << " repeats=" << rc.repeats << " dataSeed=0x" << std::hex << rc.dataSeed;
  return os.str();
}

namespace {
long envLong(const char* name, long dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 0);
  if (end && *end == 0) return x;
  std::fprintf(stderr, "epx tests: %s=%s is not a number; using %ld\n", name, v, dflt);
  return dflt;
}
}  // namespace

int caseCount() { return int(std::max(1L, envLong("EPX_RANDOM_CASES", quick() ? 100 : 300))); }
int replayCase() { return int(std::max(-1L, envLong("EPX_RANDOM_CASE", -1))); }
double timeLimitSeconds() { return double(std::max(0L, envLong("EPX_RANDOM_SECONDS", 150))); }

}  // namespace epx::test::rnd
