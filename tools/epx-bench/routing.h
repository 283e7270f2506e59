// Router decisions for the benchmark (host, deterministic from a seed) and the traffic they imply.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "epx/ref/ep_ref.h"

namespace epxbench {

struct BenchShape {
  int nRanks = 0;
  int tokens = 0;  // per rank
  int hidden = 0;
  int topk = 0;
  int experts = 0;
  int expertsPerRank() const { return experts / nRanks; }
};

// Group-limited routing parameters (DeepSeek-V3: 8 groups, top-4 groups).
constexpr int kRoutingGroups = 8;
constexpr int kRoutingTopGroups = 4;
constexpr double kZipfExponent = 0.8;

// Routing of every rank (index = source rank): ids [T, K] distinct per token, FP32 gate weights
// (positive, summing to 1 per token).
//  uniform: each token picks K distinct experts uniformly at random.
//  grouped: experts have a Zipf(kZipfExponent) popularity over a seed-shuffled order; each token
//           scores experts by log(popularity) + Gumbel noise, keeps the kRoutingTopGroups groups
//           with the best sum of their two best scores, and takes the K best experts inside them
//           (popularity-weighted sampling without replacement, restricted to those groups).
//           Falls back to fewer constraints when the shape cannot hold it (see routingDescription).
std::vector<epx::ref::RankRouting> makeRouting(RoutingKind kind, const BenchShape& s, uint64_t seed);

// One line describing how `kind` routes at this shape.
std::string routingDescription(RoutingKind kind, const BenchShape& s);

// Deduplicated rows (token, destination rank) between every pair of ranks.
struct Traffic {
  int n = 0;
  std::vector<int64_t> rows;  // [src * n + dst]
  int64_t at(int src, int dst) const { return rows[size_t(src) * n + dst]; }
  int64_t recvRows(int d) const;        // rows rank d receives, incl. its own tokens
  int64_t remoteRecvRows(int d) const;  // rows rank d receives from other ranks
  int64_t remoteSendRows(int s) const;  // rows rank s sends to other ranks
};
Traffic trafficOf(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing);
// The rows hybrid forwarding moves over nodes of forwardNodeSize ranks, both hops as transfers
// between ranks: a token goes once to each other destination node's rank on its source's rail,
// which passes it on to every other rank of that node that needs it; ranks of the source's own
// node get it from the source (as direct mode). Every (source, token, destination) of direct mode
// is reached through exactly one chain.
Traffic hybridTrafficOf(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing, int forwardNodeSize);

}  // namespace epxbench
