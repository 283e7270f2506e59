// Routing generation for epx-bench (see routing.h).
#include "routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace epxbench {

namespace {

// splitmix64: small, fast, deterministic.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform01() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  uint64_t below(uint64_t n) { return next() % n; }
};

// Groups usable at this shape: kRoutingGroups when experts split evenly and the chosen groups
// hold at least topk experts; else 1 (plain popularity-weighted sampling).
int groupsFor(const BenchShape& s) {
  const int G = kRoutingGroups;
  if (s.experts % G == 0 && (s.experts / G) * kRoutingTopGroups >= s.topk) return G;
  return 1;
}

void gateWeights(Rng& rng, float* w, int K) {
  double sum = 0;
  for (int k = 0; k < K; ++k) {
    w[k] = float(0.05 + rng.uniform01());
    sum += w[k];
  }
  for (int k = 0; k < K; ++k) w[k] = float(w[k] / sum);
}

void uniformTokens(const BenchShape& s, Rng& rng, epx::ref::RankRouting& r) {
  std::vector<int> perm(s.experts);
  std::iota(perm.begin(), perm.end(), 0);
  for (int t = 0; t < s.tokens; ++t) {
    for (int k = 0; k < s.topk; ++k) {
      const int j = k + int(rng.below(uint64_t(s.experts - k)));
      std::swap(perm[k], perm[j]);
      r.topkIdx[size_t(t) * s.topk + k] = perm[k];
    }
  }
}

void groupedTokens(const BenchShape& s, const std::vector<double>& logPop, Rng& rng,
                   epx::ref::RankRouting& r) {
  const int E = s.experts, K = s.topk, G = groupsFor(s), perGroup = E / G;
  const int topGroups = G == 1 ? 1 : kRoutingTopGroups;
  std::vector<double> score(E);
  std::vector<std::pair<double, int>> groups(G), cand;
  for (int t = 0; t < s.tokens; ++t) {
    for (int e = 0; e < E; ++e) {
      double u = rng.uniform01();
      if (u <= 0) u = 1e-300;
      score[e] = logPop[e] - std::log(-std::log(u == 1.0 ? 0.999999999 : u));  // + Gumbel
    }
    for (int g = 0; g < G; ++g) {
      double b1 = -1e300, b2 = -1e300;
      for (int e = g * perGroup; e < (g + 1) * perGroup; ++e) {
        if (score[e] > b1) {
          b2 = b1;
          b1 = score[e];
        } else if (score[e] > b2) {
          b2 = score[e];
        }
      }
      groups[g] = {perGroup > 1 ? b1 + b2 : b1, g};
    }
    std::partial_sort(groups.begin(), groups.begin() + topGroups, groups.end(),
                      [](auto& a, auto& b) { return a.first > b.first; });
    cand.clear();
    for (int i = 0; i < topGroups; ++i)
      for (int e = groups[i].second * perGroup; e < (groups[i].second + 1) * perGroup; ++e)
        cand.emplace_back(score[e], e);
    std::partial_sort(cand.begin(), cand.begin() + K, cand.end(),
                      [](auto& a, auto& b) { return a.first > b.first; });
    for (int k = 0; k < K; ++k) r.topkIdx[size_t(t) * K + k] = cand[k].second;
  }
}

}  // namespace

std::vector<epx::ref::RankRouting> makeRouting(RoutingKind kind, const BenchShape& s, uint64_t seed) {
  // Expert popularity: Zipf over a shuffled order, drawn from the seed (same on every rank).
  std::vector<double> logPop(s.experts);
  if (kind == RoutingKind::Grouped) {
    Rng prng(seed * 0x2545F4914F6CDD1Dull + 17);
    std::vector<int> order(s.experts);
    std::iota(order.begin(), order.end(), 0);
    for (int i = s.experts - 1; i > 0; --i) std::swap(order[i], order[prng.below(uint64_t(i) + 1)]);
    for (int i = 0; i < s.experts; ++i) logPop[order[i]] = -kZipfExponent * std::log(double(i + 1));
  }
  std::vector<epx::ref::RankRouting> out(s.nRanks);
  for (int r = 0; r < s.nRanks; ++r) {
    Rng rng(seed * 1000003ull + uint64_t(r) * 7919ull + (kind == RoutingKind::Grouped ? 1 : 0));
    auto& rr = out[r];
    rr.numTokens = s.tokens;
    rr.topkIdx.assign(size_t(s.tokens) * s.topk, -1);
    rr.topkWeights.assign(size_t(s.tokens) * s.topk, 0.f);
    if (kind == RoutingKind::Uniform) uniformTokens(s, rng, rr);
    else groupedTokens(s, logPop, rng, rr);
    for (int t = 0; t < s.tokens; ++t) gateWeights(rng, &rr.topkWeights[size_t(t) * s.topk], s.topk);
  }
  return out;
}

std::string routingDescription(RoutingKind kind, const BenchShape& s) {
  std::ostringstream os;
  if (kind == RoutingKind::Uniform) {
    os << "uniform: each token picks " << s.topk << " distinct experts of " << s.experts
       << " uniformly at random";
  } else {
    const int G = groupsFor(s);
    if (G > 1)
      os << "grouped: " << G << " expert groups of " << s.experts / G << ", each token keeps the top-"
         << kRoutingTopGroups << " groups (sum of its 2 best scores) and the top-" << s.topk
         << " experts inside them; ";
    else
      os << "grouped (shape too small for 8 groups x top-4: no group limit): top-" << s.topk
         << " experts; ";
    os << "score = log(Zipf(" << kZipfExponent << ") popularity over a seed-shuffled order) + Gumbel noise";
  }
  return os.str();
}

Traffic trafficOf(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing) {
  Traffic tr;
  tr.n = s.nRanks;
  tr.rows.assign(size_t(s.nRanks) * s.nRanks, 0);
  const int epr = s.expertsPerRank();
  std::vector<char> hit(s.nRanks);
  for (int src = 0; src < s.nRanks; ++src) {
    const auto& r = routing[src];
    for (int t = 0; t < r.numTokens; ++t) {
      std::fill(hit.begin(), hit.end(), 0);
      for (int k = 0; k < s.topk; ++k) {
        const int64_t e = r.topkIdx[size_t(t) * s.topk + k];
        if (e >= 0) hit[size_t(e / epr)] = 1;
      }
      for (int d = 0; d < s.nRanks; ++d) tr.rows[size_t(src) * s.nRanks + d] += hit[d];
    }
  }
  return tr;
}

Traffic hybridTrafficOf(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing, int forwardNodeSize) {
  const int n = s.nRanks, R = forwardNodeSize, epr = s.expertsPerRank();
  Traffic tr;
  tr.n = n;
  tr.rows.assign(size_t(n) * n, 0);
  std::vector<char> hit(static_cast<size_t>(n), 0), nodeHit(static_cast<size_t>(n / R), 0);
  for (int src = 0; src < n; ++src) {
    const auto& r = routing[size_t(src)];
    const int srcNode = src / R, lane = src % R;
    for (int t = 0; t < r.numTokens; ++t) {
      std::fill(hit.begin(), hit.end(), 0);
      std::fill(nodeHit.begin(), nodeHit.end(), 0);
      for (int k = 0; k < s.topk; ++k) {
        const int64_t e = r.topkIdx[size_t(t) * s.topk + k];
        if (e >= 0) hit[size_t(e / epr)] = 1, nodeHit[size_t(e / epr / R)] = 1;
      }
      for (int node = 0; node < n / R; ++node) {
        if (!nodeHit[size_t(node)]) continue;
        const int rail = node * R + lane;  // the source's own node: the source itself
        if (node != srcNode) ++tr.rows[size_t(src) * n + rail];
        for (int d = node * R; d < (node + 1) * R; ++d)
          if (hit[size_t(d)] && d != rail) ++tr.rows[size_t(rail) * n + d];
        if (node == srcNode && hit[size_t(src)]) ++tr.rows[size_t(src) * n + src];
      }
    }
  }
  return tr;
}

int64_t Traffic::recvRows(int d) const {
  int64_t v = 0;
  for (int s = 0; s < n; ++s) v += at(s, d);
  return v;
}
int64_t Traffic::remoteRecvRows(int d) const { return recvRows(d) - at(d, d); }
int64_t Traffic::remoteSendRows(int s) const {
  int64_t v = 0;
  for (int d = 0; d < n; ++d)
    if (d != s) v += at(s, d);
  return v;
}

}  // namespace epxbench
