// CPU reference of epx dispatch/combine. See ep_ref.h for the contract.
#include "epx/ref/ep_ref.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "epx/ref/bf16.h"

namespace epx::ref {

namespace {
int ownerOf(const EpShape& s, int64_t e) { return int(e / s.localExperts()); }
int64_t idAt(const EpShape& s, const RankRouting& r, int t, int k) { return r.topkIdx[size_t(t) * s.topk + k]; }
bool sendsTo(const EpShape& s, const RankRouting& r, int t, int rank) {
  for (int k = 0; k < s.topk; ++k) {
    int64_t e = idAt(s, r, t, k);
    if (e >= 0 && ownerOf(s, e) == rank) return true;
  }
  return false;
}
float weightAt(const EpShape& s, const RankRouting& r, int t, int k) {
  return r.topkWeights.empty() ? 0.f : r.topkWeights[size_t(t) * s.topk + k];
}
}  // namespace

std::string validateRouting(const EpShape& s, const RankRouting& r) {
  for (int t = 0; t < r.numTokens; ++t) {
    for (int k = 0; k < s.topk; ++k) {
      int64_t e = idAt(s, r, t, k);
      if (e < -1 || e >= s.numExperts) {
        std::ostringstream os;
        os << "token " << t << " slot " << k << ": expert id " << e << " out of range [-1, "
           << s.numExperts << ")";
        return os.str();
      }
      for (int j = 0; j < k && e >= 0; ++j) {
        if (idAt(s, r, t, j) == e) {
          std::ostringstream os;
          os << "token " << t << ": expert id " << e << " repeated in slots " << j << " and " << k;
          return os.str();
        }
      }
    }
  }
  return {};
}

std::vector<int32_t> tokensSentTo(const EpShape& s, const RankRouting& src, int rank) {
  std::vector<int32_t> out;
  for (int t = 0; t < src.numTokens; ++t)
    if (sendsTo(s, src, t, rank)) out.push_back(t);
  return out;
}

std::vector<RankDispatch> dispatch(const EpShape& s, const std::vector<RankRouting>& routing) {
  const int R = s.nRanks, K = s.topk, Le = s.localExperts();
  std::vector<RankDispatch> res(R);
  for (int r = 0; r < R; ++r) {
    RankDispatch& d = res[r];
    d.expertCounts.assign(Le, 0);
    d.expertOffsets.assign(Le + 1, 0);
    // Deduplicated (token, rank) pairs, ordered by (source rank, token).
    std::vector<std::pair<int, int>> pairs;
    for (int src = 0; src < R; ++src)
      for (int t : tokensSentTo(s, routing[src], r)) pairs.emplace_back(src, t);
    d.numTokens = int(pairs.size());
    for (auto [src, t] : pairs)
      for (int k = 0; k < K; ++k) {
        int64_t e = idAt(s, routing[src], t, k);
        if (e >= 0 && ownerOf(s, e) == r) d.expertCounts[e - int64_t(r) * Le]++;
      }
    if (!s.expanded) {
      for (int e = 0; e < Le; ++e) d.expertOffsets[e + 1] = d.expertOffsets[e] + d.expertCounts[e];
      d.numRows = d.numTokens;
      for (auto [src, t] : pairs) {
        d.srcRank.push_back(src);
        d.srcToken.push_back(t);
        d.srcSlot.push_back(-1);
        for (int k = 0; k < K; ++k) {
          int64_t e = idAt(s, routing[src], t, k);
          bool local = e >= 0 && ownerOf(s, e) == r;
          d.recvTopkIdx.push_back(local ? int32_t(e - int64_t(r) * Le) : -1);
          d.recvWeights.push_back(local ? weightAt(s, routing[src], t, k) : 0.f);
        }
      }
      continue;
    }
    const int A = s.expertAlignment;
    for (int e = 0; e < Le; ++e) {
      int aligned = (d.expertCounts[e] + A - 1) / A * A;
      d.expertOffsets[e + 1] = d.expertOffsets[e] + aligned;
    }
    d.numRows = d.expertOffsets[Le];
    d.srcRank.assign(d.numRows, -1);
    d.srcToken.assign(d.numRows, -1);
    d.srcSlot.assign(d.numRows, -1);
    d.recvWeights.assign(d.numRows, 0.f);
    std::vector<int> fill(d.expertOffsets.begin(), d.expertOffsets.end() - 1);
    for (auto [src, t] : pairs)
      for (int k = 0; k < K; ++k) {
        int64_t e = idAt(s, routing[src], t, k);
        if (e < 0 || ownerOf(s, e) != r) continue;
        int row = fill[e - int64_t(r) * Le]++;
        d.srcRank[row] = src;
        d.srcToken[row] = t;
        d.srcSlot[row] = k;
        d.recvWeights[row] = weightAt(s, routing[src], t, k);
      }
  }
  return res;
}

namespace {
// rows[d][(src, token)] = output rows of rank d holding that token, in top-k slot order.
std::vector<std::map<std::pair<int, int>, std::vector<int>>> rowsByToken(const EpShape& s,
                                                                         const std::vector<RankDispatch>& disp) {
  std::vector<std::map<std::pair<int, int>, std::vector<std::pair<int, int>>>> tmp(s.nRanks);
  for (int d = 0; d < s.nRanks; ++d)
    for (int row = 0; row < disp[d].numRows; ++row)
      if (disp[d].srcRank[row] >= 0)
        tmp[d][{disp[d].srcRank[row], disp[d].srcToken[row]}].emplace_back(disp[d].srcSlot[row], row);
  std::vector<std::map<std::pair<int, int>, std::vector<int>>> out(s.nRanks);
  for (int d = 0; d < s.nRanks; ++d)
    for (auto& [key, v] : tmp[d]) {
      std::map<int, int> bySlot(v.begin(), v.end());
      for (auto [slot, row] : bySlot) out[d][key].push_back(row);
    }
  return out;
}
}  // namespace

std::vector<std::vector<uint16_t>> combine(const EpShape& s, const std::vector<RankRouting>& routing,
                                           const std::vector<RankDispatch>& disp,
                                           const std::vector<std::vector<uint16_t>>& expertOut,
                                           const std::vector<std::vector<uint16_t>>& bias0,
                                           const std::vector<std::vector<uint16_t>>& bias1, const CombinePath& path) {
  const int R = s.nRanks, H = s.hidden;
  const int U = path.reduceRanksPerNode > 0 ? path.reduceRanksPerNode : 1;  // 1: every rank its own "node"
  auto rows = rowsByToken(s, disp);
  std::vector<std::vector<uint16_t>> out(R);
  std::vector<float> partial(H), node(H), acc(H);
  // A partial as it travels: BF16 on the wire, unless partials travel as FP32.
  const auto wire = [&](float v) { return s.fp32Partials && s.expanded ? v : bf16ToFloat(floatToBf16(v)); };
  for (int src = 0; src < R; ++src) {
    const int T = routing[src].numTokens;
    out[src].assign(size_t(T) * H, 0);
    for (int t = 0; t < T; ++t) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int first = 0; first < R; first += U) {  // nodes in ascending order
        const bool reduced = U > 1 && first / U != src / U;  // another node: its forwarder sums it
        bool any = false;
        std::fill(node.begin(), node.end(), 0.f);
        for (int d = first; d < std::min(first + U, R); ++d) {
          auto it = rows[d].find({src, t});
          if (it == rows[d].end()) continue;
          std::fill(partial.begin(), partial.end(), 0.f);
          for (int row : it->second)
            for (int h = 0; h < H; ++h) partial[h] += bf16ToFloat(expertOut[d][size_t(row) * H + h]);
          any = true;
          for (int h = 0; h < H; ++h) (reduced ? node[h] : acc[h]) += wire(partial[h]);
        }
        if (reduced && any)
          for (int h = 0; h < H; ++h) acc[h] += wire(node[h]);
      }
      for (int h = 0; h < H; ++h) {
        float v = acc[h];
        if (!bias0.empty() && !bias0[src].empty()) v += bf16ToFloat(bias0[src][size_t(t) * H + h]);
        if (!bias1.empty() && !bias1[src].empty()) v += bf16ToFloat(bias1[src][size_t(t) * H + h]);
        out[src][size_t(t) * H + h] = floatToBf16(v);
      }
    }
  }
  return out;
}

std::vector<std::vector<float>> combineWeights(const EpShape& s,
                                               const std::vector<RankRouting>& routing,
                                               const std::vector<RankDispatch>& disp,
                                               const std::vector<std::vector<float>>& recvWeights) {
  const int R = s.nRanks, K = s.topk;
  std::vector<std::vector<float>> out(R);
  for (int src = 0; src < R; ++src) out[src].assign(size_t(routing[src].numTokens) * K, 0.f);
  for (int d = 0; d < R; ++d)
    for (int row = 0; row < disp[d].numRows; ++row) {
      int src = disp[d].srcRank[row], t = disp[d].srcToken[row];
      if (src < 0) continue;
      if (s.expanded) {
        out[src][size_t(t) * K + disp[d].srcSlot[row]] = recvWeights[d][row];
      } else {
        for (int k = 0; k < K; ++k)
          if (disp[d].recvTopkIdx[size_t(row) * K + k] >= 0)
            out[src][size_t(t) * K + k] = recvWeights[d][size_t(row) * K + k];
      }
    }
  return out;
}

}  // namespace epx::ref
