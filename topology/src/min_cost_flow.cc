#include "min_cost_flow.h"

#include <algorithm>
#include <limits>

namespace epx::topo::detail {

int MinCostFlow::addEdge(int u, int v, int capacity, long long cost) {
  edges_.push_back({v, capacity, 0, cost});
  graph_[u].push_back(static_cast<int>(edges_.size()) - 1);
  edges_.push_back({u, 0, 0, -cost});
  graph_[v].push_back(static_cast<int>(edges_.size()) - 1);
  return static_cast<int>(edges_.size()) - 2;
}

int MinCostFlow::run(int s, int t) {
  const long long kInf = std::numeric_limits<long long>::max() / 4;
  const int n = static_cast<int>(graph_.size());
  int total = 0;
  for (;;) {
    std::vector<long long> dist(n, kInf);
    std::vector<int> via(n, -1);
    dist[s] = 0;
    // Bellman-Ford: residual graphs of this problem have no negative cycles.
    for (int round = 0; round < n; ++round) {
      bool changed = false;
      for (int u = 0; u < n; ++u) {
        if (dist[u] == kInf) continue;
        for (int id : graph_[u]) {
          const Edge& e = edges_[id];
          if (e.cap - e.flow > 0 && dist[u] + e.cost < dist[e.to]) {
            dist[e.to] = dist[u] + e.cost;
            via[e.to] = id;
            changed = true;
          }
        }
      }
      if (!changed) break;
    }
    if (dist[t] == kInf) return total;
    int push = std::numeric_limits<int>::max();
    for (int v = t; v != s; v = edges_[via[v] ^ 1].to) push = std::min(push, edges_[via[v]].cap - edges_[via[v]].flow);
    for (int v = t; v != s; v = edges_[via[v] ^ 1].to) {
      edges_[via[v]].flow += push;
      edges_[via[v] ^ 1].flow -= push;
    }
    total += push;
  }
}

}  // namespace epx::topo::detail
