// Internal: a small min-cost max-flow (successive shortest paths, Bellman-Ford), for rail assignment.
// Graphs here have at most a few hundred edges, so simplicity beats speed.
#pragma once
#include <vector>

namespace epx::topo::detail {

class MinCostFlow {
 public:
  explicit MinCostFlow(int nodes) : graph_(nodes) {}

  /// Adds edge u→v; returns its id for flowOn().
  int addEdge(int u, int v, int capacity, long long cost);
  /// Pushes as much flow as possible from s to t at minimum cost; returns the flow.
  int run(int s, int t);
  int flowOn(int edgeId) const { return edges_[edgeId].flow; }

 private:
  struct Edge { int to, cap, flow; long long cost; };
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> graph_;
};

}  // namespace epx::topo::detail
