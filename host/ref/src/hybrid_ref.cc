// CPU reference of hybrid-mode routing. See hybrid_ref.h for the contract.
#include "epx/ref/hybrid_ref.h"

#include <algorithm>

namespace epx::ref {

HybridPlan hybridPlan(const EpShape& s, const NodeGeometry& g, const std::vector<RankRouting>& routing) {
  const int R = s.nRanks, Le = s.localExperts();
  HybridPlan p;
  p.deliveries.resize(size_t(R));
  p.directNetworkTokens.assign(size_t(R), 0);
  p.hybridNetworkTokens.assign(size_t(R), 0);
  p.forwardedTokens.assign(size_t(R), 0);
  std::vector<char> toRank(static_cast<size_t>(R)), toNode(static_cast<size_t>(g.nodes()));
  for (int src = 0; src < R; ++src) {
    const RankRouting& r = routing[size_t(src)];
    const int home = g.nodeOf(src);
    for (int t = 0; t < r.numTokens; ++t) {
      std::fill(toRank.begin(), toRank.end(), 0);
      std::fill(toNode.begin(), toNode.end(), 0);
      for (int k = 0; k < s.topk; ++k) {
        const int64_t e = r.topkIdx[size_t(t) * s.topk + k];
        if (e < 0) continue;
        const int d = int(e / Le);
        toRank[size_t(d)] = 1;
        toNode[size_t(g.nodeOf(d))] = 1;
      }
      int ranks = 0, nodes = 0;
      for (int d = 0; d < R; ++d) {
        if (!toRank[size_t(d)]) continue;
        ++ranks;
        const int node = g.nodeOf(d);
        const int forwarder = node == home ? src : g.railPeer(src, node);
        p.deliveries[size_t(d)].push_back(HybridDelivery{src, t, forwarder});
        if (node != home) ++p.directNetworkTokens[size_t(src)];
        if (node != home && forwarder != d) ++p.forwardedTokens[size_t(forwarder)];
      }
      for (int n = 0; n < g.nodes(); ++n) {
        if (!toNode[size_t(n)]) continue;
        ++nodes;
        if (n != home) ++p.hybridNetworkTokens[size_t(src)];
      }
      if (ranks == 0) continue;
      ++p.routedTokens;
      p.distinctRanks += ranks;
      p.distinctNodes += nodes;
    }
  }
  return p;
}

}  // namespace epx::ref
