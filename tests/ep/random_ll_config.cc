// Configuration sampler of the randomized low-latency test: see random_ll_config.h.
#include "random_ll_config.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <utility>

#include "random_config.h"

namespace epx::test::rnd::ll {

namespace {

constexpr uint64_t kLlGroupStream = 0x6c6c67726full, kLlCaseStream = 0x6c6c63617365ull;
constexpr int kMaxTokens = 4096, kMaxHidden = 65536, kBlock = 128, kMaxExperts = 1024;

enum Dim : int { kTokens = 0, kExperts = 1, kHidden = 2 };

}  // namespace

ncclEpConfig_t makeLlConfig(const LlGroup& g) {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.algorithm = ncclEpAlgoLowLatency;
  c.maxTokensPerRank = g.maxTokens;
  c.hidden = g.hidden;
  c.topk = g.topk;
  c.numExperts = g.numExperts;
  c.fp8Dispatch = g.fp8;
  if (g.smBudget > 0) c.smBudget = g.smBudget;
  return c;
}

bool withinBudget(const LlGroup& g, int R, double* windowBytes) {
  const ncclEpConfig_t c = makeLlConfig(g);
  size_t hint = 0;
  const double window = ncclEpGetBufferSizeHint(&c, R, &hint) == ncclSuccess ? double(hint) * R : 1e300;
  if (windowBytes) *windowBytes = window;
  const double outputs = double(R) * g.numExperts * g.maxTokens * g.hidden * 4.0;
  const double rowElems = double(R) * g.maxTokens * std::min(g.topk, g.numExperts) * g.hidden;
  return window <= kWindowBytesBudget && outputs <= kOutputBytesBudget && rowElems <= kRowElemsBudget;
}

LlGroup drawGroup(uint64_t baseSeed, int group, int R) {
  Rng rng(streamSeed(baseSeed, kLlGroupStream, uint64_t(group)));
  LlGroup g;
  g.topk = drawTopk(rng);
  const int maxLe = kMaxExperts / R;
  double u = rng.unit();
  int Le = u < 0.2 ? maxLe : u < 0.3 ? 1 : logUniform(rng, 1, maxLe);
  u = rng.unit();
  g.hidden = u < 0.15 ? kBlock : u < 0.27 ? kMaxHidden : u < 0.37 ? 7168 : kBlock * logUniform(rng, 1, kMaxHidden / kBlock);
  u = rng.unit();
  g.maxTokens = u < 0.1 ? 1 : u < 0.25 ? kMaxTokens : logUniform(rng, 1, kMaxTokens);
  g.fp8 = rng.unit() < 0.6 ? 1 : 0;
  g.smBudget = rng.unit() < 0.15 ? rng.uniform(1, 16) : 0;
  // One dimension may be kept at its maximum: it shrinks last.
  u = rng.unit();
  std::vector<int> order = {kTokens, kExperts, kHidden};
  int keep = -1;
  if (u < 0.15) keep = kTokens, g.maxTokens = kMaxTokens;
  else if (u < 0.27) keep = kHidden, g.hidden = kMaxHidden;
  else if (u < 0.37) keep = kExperts, Le = maxLe;
  if (keep >= 0) {
    order.erase(std::find(order.begin(), order.end(), keep));
    order.push_back(keep);
  }
  g.numExperts = Le * R;
  for (int d : order)
    while (!withinBudget(g, R)) {
      if (d == kTokens && g.maxTokens > 1) g.maxTokens /= 2;
      else if (d == kExperts && Le > 1) Le /= 2, g.numExperts = Le * R;
      else if (d == kHidden && g.hidden > kBlock) g.hidden = std::max(kBlock, g.hidden / 2 / kBlock * kBlock);
      else break;
    }
  return g;
}

LlCase drawCase(uint64_t baseSeed, int index, const LlGroup& g, int R) {
  Rng rng(streamSeed(baseSeed, kLlCaseStream, uint64_t(index)));
  LlCase c;
  c.index = index;
  c.tokens.resize(size_t(R));
  for (int& t : c.tokens) {
    const double u = rng.unit();
    t = u < 0.15 ? 0 : u < 0.3 ? g.maxTokens : rng.uniform(0, g.maxTokens);
  }
  c.fp8 = g.fp8 && rng.unit() < 0.6;
  c.roundScale = c.fp8 && rng.unit() < 0.5;
  c.int32Ids = rng.unit() < 0.5;
  double u = rng.unit();
  if (u < 0.1) {
    c.singleExpert = rng.uniform(0, g.numExperts - 1);
  } else {
    c.maskProb = rng.unit() < 0.35 ? 0.0 : 0.75 * rng.unit();
    c.fullyMaskedToken = rng.unit() < 0.15;
  }
  c.zeroBlocks = rng.unit() < 0.2;
  c.split = rng.unit() < 0.4;
  c.zeroCopy = rng.unit() < 0.35;
  c.srcInfo = rng.unit() < 0.75;
  c.dataSeed = rng.next();
  return c;
}

LlInputs makeInputs(const LlGroup& g, const LlCase& c, int R) {
  Rng rng(c.dataSeed);
  const int K = g.topk, E = g.numExperts, H = g.hidden;
  LlInputs in;
  for (int r = 0; r < R; ++r) {
    const int T = c.tokens[size_t(r)];
    epx::ref::LlRouting rt;
    rt.numTokens = T;
    rt.topkIdx.assign(size_t(T) * K, -1);
    std::vector<int64_t> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    for (int t = 0; t < T; ++t) {
      int64_t* ids = &rt.topkIdx[size_t(t) * K];
      if (c.singleExpert >= 0) {
        ids[rng.uniform(0, K - 1)] = c.singleExpert;
        continue;
      }
      for (int k = 0; k < K && k < E; ++k) {  // partial Fisher-Yates: distinct experts
        std::swap(perm[size_t(k)], perm[size_t(rng.uniform(k, E - 1))]);
        if (rng.unit() >= c.maskProb) ids[k] = perm[size_t(k)];
      }
      if (c.fullyMaskedToken && t == 0) std::fill(ids, ids + K, -1);
    }
    in.routing.push_back(std::move(rt));
    std::vector<uint16_t> x = randomBf16(size_t(T) * H, rng);
    if (c.zeroBlocks)
      for (int t = 0; t < T; ++t)
        if (rng.unit() < 0.25) {
          const size_t b = size_t(t) * H + size_t(rng.uniform(0, H / 128 - 1)) * 128;
          std::fill(x.begin() + long(b), x.begin() + long(b + 128), uint16_t(rng.unit() < 0.5 ? 0x0000 : 0x8000));
        }
    in.x.push_back(std::move(x));
    std::vector<float> w(size_t(T) * K);
    for (float& v : w) v = float(rng.uniform(-64, 64)) / 32.f;
    in.weights.push_back(std::move(w));
  }
  return in;
}

std::string describe(const LlGroup& g) {
  std::ostringstream os;
  os << "H=" << g.hidden << " K=" << g.topk << " E=" << g.numExperts << " maxT=" << g.maxTokens
     << " fp8Group=" << g.fp8 << " sms=" << g.smBudget;
  return os.str();
}

std::string describe(const LlCase& c, const LlGroup& g) {
  std::ostringstream os;
  os << "case " << c.index << ": group {" << describe(g) << "} T=[";
  for (size_t i = 0; i < c.tokens.size(); ++i) os << (i ? "," : "") << c.tokens[i];
  os << "] " << (c.fp8 ? (c.roundScale ? "fp8/ue8m0" : "fp8") : "bf16") << (c.int32Ids ? " ids32" : " ids64");
  if (c.singleExpert >= 0) os << " oneExpert(" << c.singleExpert << ")";
  else os << " mask=" << c.maskProb << (c.fullyMaskedToken ? " token0Masked" : "");
  os << (c.zeroBlocks ? " zeroBlocks" : "") << (c.split ? " split" : "") << (c.zeroCopy ? " zeroCopy" : "")
     << (c.srcInfo ? "" : " noSrcInfo") << " dataSeed=0x" << std::hex << c.dataSeed;
  return os.str();
}

}  // namespace epx::test::rnd::ll
