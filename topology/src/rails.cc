#include "epx/topology/rails.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "epx/topology/load.h"
#include "epx/topology/paths.h"
#include "assignment.h"

namespace epx::topo {

namespace {

struct Card {
  int id = 0;
  std::vector<int> ports;
  double gbps = 0;        // sum of known port rates
  int order = 0;          // position among candidate cards
};

/// Edge costs of the assignment, scaled to the problem so that the three goals stay strictly
/// ordered whatever its size: every GPU/card gets its guaranteed share first, then the path types
/// are as good as possible, and only then does the GPU/NIC order tie-break decide.
struct Weights {
  long long skewBound;  ///< > the order tie-break of any one pair (|g·C − c·G| < G·C)
  long long path;       ///< one path-type step: > the tie-breaks of all assigned pairs together
  long long share;      ///< one filled guaranteed slot: > the costs of all assigned pairs together
};

Weights weightsFor(int gpus, int cards) {
  const long long units = std::max(gpus, cards);  // pairs in the assignment, at most
  Weights w;
  w.skewBound = static_cast<long long>(gpus) * cards + 1;
  w.path = w.skewBound * units + 1;
  w.share = (static_cast<long long>(PathType::UNKNOWN) * w.path + w.skewBound) * units + 1;
  return w;
}

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
  // The loaders refuse larger topologies; a hand-built one this large would overflow the weights.
  if (static_cast<size_t>(G) + t.nics.size() > kMaxTopologyDevices) {
    plan.policy = "none";
    plan.excluded.push_back("all NICs: " + std::to_string(G) + " GPUs and " + std::to_string(t.nics.size()) +
                            " NIC ports exceed kMaxTopologyDevices (" + std::to_string(kMaxTopologyDevices) +
                            "); no rails assigned");
    return plan;
  }

  // Path from a GPU to a card: the best over its ports, computed once per pair (row per GPU).
  std::vector<PathType> paths(static_cast<size_t>(G) * cards.size(), PathType::UNKNOWN);
  for (size_t c = 0; c < cards.size(); ++c)
    for (int g = 0; g < G; ++g)
      for (int p : cards[c].ports)
        paths[g * cards.size() + c] = std::min(paths[g * cards.size() + c], gpuNicPath(t, g, p));

  // 3. Keep a card only if some GPU has no strictly closer card.
  {
    const size_t n = cards.size();
    std::vector<PathType> bestOfGpu(G, PathType::UNKNOWN);
    for (int g = 0; g < G; ++g)
      for (size_t c = 0; c < n; ++c) bestOfGpu[g] = std::min(bestOfGpu[g], paths[g * n + c]);
    std::vector<Card> kept;
    std::vector<size_t> keptColumns;
    for (size_t c = 0; c < n; ++c) {
      bool closest = false;
      for (int g = 0; g < G && !closest; ++g) closest = paths[g * n + c] == bestOfGpu[g];
      if (closest) {
        kept.push_back(cards[c]);
        keptColumns.push_back(c);
      } else {
        plan.excluded.push_back(t.nics[cards[c].ports[0]].name + ": farther from every GPU than another NIC");
      }
    }
    std::vector<PathType> keptPaths(static_cast<size_t>(G) * kept.size());
    for (int g = 0; g < G; ++g)
      for (size_t k = 0; k < kept.size(); ++k) keptPaths[g * kept.size() + k] = paths[g * n + keptColumns[k]];
    cards.swap(kept);
    paths.swap(keptPaths);
  }
  const int C = static_cast<int>(cards.size());
  for (int i = 0; i < C; ++i) cards[i].order = i;
  auto path = [&](int g, int c) { return paths[static_cast<size_t>(g) * C + c]; };
  const Weights w = weightsFor(G, C);

  // 4. Min-cost assignment (Hungarian method, assignment.h).
  // Each GPU (C >= G) or card (C < G) has slots: ⌊C/G⌋ (⌊G/C⌋) that must be filled, then one
  // optional slot when the division leaves a remainder. The other side's items (cards, or GPUs)
  // are the rows, each assigned to one slot; a GPU never gets one card twice (a card is one row).
  const bool cardsAreRows = C >= G;
  const int items = cardsAreRows ? C : G, owners = cardsAreRows ? G : C;
  const int mustFill = items / owners, slotsPerOwner = mustFill + (items % owners ? 1 : 0);
  auto pairCost = [&](int g, int c) {
    // Tie-break: keep GPU order aligned with NIC order (GPU g ↔ card g·C/G).
    const long long skew = std::llabs(static_cast<long long>(g) * C - static_cast<long long>(c) * G);
    return static_cast<long long>(path(g, c)) * w.path + skew;
  };
  // The cost matrix is filled once (the assignment reads each entry up to `items` times).
  const int slots = owners * slotsPerOwner;
  std::vector<long long> slotCosts(static_cast<size_t>(items) * slots);
  for (int row = 0; row < items; ++row)
    for (int owner = 0; owner < owners; ++owner) {
      const long long pair = cardsAreRows ? pairCost(owner, row) : pairCost(row, owner);
      for (int k = 0; k < slotsPerOwner; ++k)
        slotCosts[static_cast<size_t>(row) * slots + owner * slotsPerOwner + k] = pair + (k < mustFill ? -w.share : 0);
    }
  auto slotCost = [&](int row, int slot) { return slotCosts[static_cast<size_t>(row) * slots + slot]; };
  const std::vector<int> slotOfRow = detail::minCostAssignment(items, slots, slotCost);
  std::vector<std::vector<char>> assigned(G, std::vector<char>(C, 0));
  for (int row = 0; row < items; ++row) {
    const int owner = slotOfRow[row] / slotsPerOwner;
    if (cardsAreRows) assigned[owner][row] = 1;
    else assigned[row][owner] = 1;
  }

  // 5. Rails numbered by first use in GPU order.
  std::vector<int> railOfCard(C, -1);
  for (int g = 0; g < G; ++g) {
    GpuRail& gr = plan.gpus[g];
    for (int c = 0; c < C; ++c) {
      if (!assigned[g][c]) continue;
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
      PathType p = path(g, c);
      gr.path = gr.path == PathType::UNKNOWN ? p : std::max(gr.path, p);
    }
    std::sort(gr.rails.begin(), gr.rails.end());
    gr.rail = gr.rails.empty() ? -1 : gr.rails.front();
  }
  plan.policy = C == G ? "one-per-gpu" : C < G ? "shared" : "multi-per-gpu";
  return plan;
}

}  // namespace epx::topo
