#include "epx/topology/rails.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "epx/topology/paths.h"
#include "min_cost_flow.h"

namespace epx::topo {

namespace {

struct Card {
  int id = 0;
  std::vector<int> ports;
  double gbps = 0;        // sum of known port rates
  int order = 0;          // position among candidate cards
};

constexpr long long kBig = 1'000'000'000;   // forces every GPU/card to its guaranteed share first
constexpr long long kPathWeight = 100'000;  // one path-type step outweighs any order tie-break

std::string fmtGbps(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%g Gb/s", g);
  return b;
}

}  // namespace

RailPlan assignRails(const Topology& t) {
  RailPlan plan;
  const int G = static_cast<int>(t.gpus.size());
  plan.gpus.resize(G);
  for (int g = 0; g < G; ++g) plan.gpus[g].gpu = g;

  // 1. Cards, skipping ports that are known to be down.
  std::map<int, Card> byId;
  for (const Nic& n : t.nics) {
    if (!n.state.empty() && n.state != "ACTIVE") {
      plan.excluded.push_back(n.name + ": port " + std::to_string(n.port) + " is " + n.state);
      continue;
    }
    Card& c = byId[n.card];
    c.id = n.card;
    c.ports.push_back(n.index);
    c.gbps += n.speedGbps;
  }
  std::vector<Card> cards;
  for (auto& [id, c] : byId) cards.push_back(c);

  // 2. Drop slow front-end cards: under half the fastest card's rate (when rates are known).
  double fastest = 0;
  for (const Card& c : cards) fastest = std::max(fastest, c.gbps);
  if (fastest > 0) {
    std::vector<Card> kept;
    for (const Card& c : cards) {
      if (c.gbps > 0 && c.gbps < fastest / 2) {
        plan.excluded.push_back(t.nics[c.ports[0]].name + ": " + fmtGbps(c.gbps) + " is under half of the fastest NIC (" +
                                fmtGbps(fastest) + ")");
      } else {
        kept.push_back(c);
      }
    }
    cards.swap(kept);
  }
  if (G == 0 || cards.empty()) {
    plan.policy = "none";
    return plan;
  }

  // Path from a GPU to a card: the best over its ports.
  auto path = [&](int g, const Card& c) {
    PathType best = PathType::UNKNOWN;
    for (int p : c.ports) best = std::min(best, gpuNicPath(t, g, p));
    return best;
  };

  // 3. Keep a card only if some GPU has no strictly closer card.
  {
    std::vector<PathType> bestOfGpu(G, PathType::UNKNOWN);
    for (int g = 0; g < G; ++g)
      for (const Card& c : cards) bestOfGpu[g] = std::min(bestOfGpu[g], path(g, c));
    std::vector<Card> kept;
    for (const Card& c : cards) {
      bool closest = false;
      for (int g = 0; g < G; ++g) closest |= path(g, c) == bestOfGpu[g];
      if (closest) kept.push_back(c);
      else plan.excluded.push_back(t.nics[c.ports[0]].name + ": farther from every GPU than another NIC");
    }
    cards.swap(kept);
  }
  const int C = static_cast<int>(cards.size());
  for (int i = 0; i < C; ++i) cards[i].order = i;

  // 4. Min-cost assignment. Nodes: source, GPUs, cards, sink.
  const int S = 0, T = 1 + G + C;
  detail::MinCostFlow flow(T + 1);
  auto gpuNode = [](int g) { return 1 + g; };
  auto cardNode = [G](int c) { return 1 + G + c; };
  if (C >= G) {
    for (int g = 0; g < G; ++g) {
      flow.addEdge(S, gpuNode(g), C / G, -kBig);
      if (C % G) flow.addEdge(S, gpuNode(g), 1, 0);
    }
    for (int c = 0; c < C; ++c) flow.addEdge(cardNode(c), T, 1, 0);
  } else {
    for (int g = 0; g < G; ++g) flow.addEdge(S, gpuNode(g), 1, 0);
    for (int c = 0; c < C; ++c) {
      flow.addEdge(cardNode(c), T, G / C, -kBig);
      if (G % C) flow.addEdge(cardNode(c), T, 1, 0);
    }
  }
  std::vector<std::vector<int>> edge(G, std::vector<int>(C, -1));
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < C; ++c) {
      PathType p = path(g, cards[c]);
      // Tie-break: keep GPU order aligned with NIC order (GPU g ↔ card g·C/G).
      long long skew = std::llabs(static_cast<long long>(g) * C - static_cast<long long>(c) * G);
      edge[g][c] = flow.addEdge(gpuNode(g), cardNode(c), 1, static_cast<long long>(p) * kPathWeight + skew);
    }
  flow.run(S, T);

  // 5. Rails numbered by first use in GPU order.
  std::vector<int> railOfCard(C, -1);
  for (int g = 0; g < G; ++g) {
    GpuRail& gr = plan.gpus[g];
    for (int c = 0; c < C; ++c) {
      if (flow.flowOn(edge[g][c]) <= 0) continue;
      if (railOfCard[c] < 0) {
        railOfCard[c] = static_cast<int>(plan.rails.size());
        Rail r;
        r.index = railOfCard[c];
        r.card = cards[c].id;
        r.nics = cards[c].ports;
        plan.rails.push_back(r);
      }
      Rail& r = plan.rails[railOfCard[c]];
      r.gpus.push_back(g);
      gr.rails.push_back(r.index);
      gr.nics.insert(gr.nics.end(), r.nics.begin(), r.nics.end());
      PathType p = path(g, cards[c]);
      gr.path = gr.path == PathType::UNKNOWN ? p : std::max(gr.path, p);
    }
    std::sort(gr.rails.begin(), gr.rails.end());
    gr.rail = gr.rails.empty() ? -1 : gr.rails.front();
  }
  plan.policy = C == G ? "one-per-gpu" : C < G ? "shared" : "multi-per-gpu";
  return plan;
}

}  // namespace epx::topo
