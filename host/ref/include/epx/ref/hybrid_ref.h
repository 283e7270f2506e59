// CPU reference of hybrid-mode routing (no CUDA). In hybrid mode a token bound for ranks of another
// node crosses the network once per destination node, to the rank of that node on the source's
// rail (the same local index), which forwards it over NVLink to the ranks of its node that need it;
// ranks of the source's own node get it over NVLink from the source. The plan defines what the
// hybrid kernels must deliver (the same (source rank, token) pairs as direct mode, ep_ref.h's
// tokensSentTo) and counts the token copies each mode puts on the network.
#pragma once
#include <cstdint>
#include <vector>

#include "epx/ref/ep_ref.h"

namespace epx::ref {

// Ranks grouped into nodes (scale-up domains) of ranksPerNode consecutive ranks.
struct NodeGeometry {
  int nRanks = 0;
  int ranksPerNode = 1;
  int nodes() const { return nRanks / ranksPerNode; }
  int nodeOf(int rank) const { return rank / ranksPerNode; }
  int localIndex(int rank) const { return rank % ranksPerNode; }
  // The rank of `node` on `rank`'s rail (the same local index): where hybrid mode puts `rank`'s
  // tokens bound for that node.
  int railPeer(int rank, int node) const { return node * ranksPerNode + localIndex(rank); }
};

// One token delivered to a destination rank, and the rank that wrote it there over NVLink (the
// source itself for its own node, else the source's rail peer on the destination's node; a rank
// that is its own rail peer's destination gets the token straight from the network).
struct HybridDelivery {
  int srcRank = -1;
  int srcToken = -1;
  int forwarder = -1;
  bool operator==(const HybridDelivery& o) const {
    return srcRank == o.srcRank && srcToken == o.srcToken && forwarder == o.forwarder;
  }
};

struct HybridPlan {
  // [destination rank]: deliveries in (source rank, source token) order.
  std::vector<std::vector<HybridDelivery>> deliveries;
  // [source rank]: token copies put on the network per dispatch. Direct mode: one per distinct
  // destination rank on another node; hybrid: one per distinct destination node other than its own.
  std::vector<int64_t> directNetworkTokens;
  std::vector<int64_t> hybridNetworkTokens;
  // [rank]: token copies this rank forwards over NVLink to other ranks of its node as a rail peer.
  std::vector<int64_t> forwardedTokens;
  // Over all ranks' tokens with at least one valid expert: their count, and the sums of their
  // distinct destination ranks and distinct destination nodes.
  int64_t routedTokens = 0;
  int64_t distinctRanks = 0;
  int64_t distinctNodes = 0;
  double meanDistinctRanks() const { return routedTokens ? double(distinctRanks) / double(routedTokens) : 0.0; }
  double meanDistinctNodes() const { return routedTokens ? double(distinctNodes) / double(routedTokens) : 0.0; }
};

// The plan of one dispatch. Requires g.nRanks == s.nRanks, ranksPerNode >= 1 dividing nRanks, and
// valid routing (validateRouting); the combine takes the same paths back.
HybridPlan hybridPlan(const EpShape& s, const NodeGeometry& g, const std::vector<RankRouting>& routing);

}  // namespace epx::ref
