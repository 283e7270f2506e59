#include "epx/topology/nvlink_index.h"

#include <algorithm>
#include <map>

namespace epx::topo {

namespace {

/// Sorts by peer and sums the entries of one peer.
void merge(std::vector<std::pair<int, int>>& l) {
  std::sort(l.begin(), l.end());
  size_t w = 0;
  for (size_t r = 0; r < l.size(); ++r) {
    if (w > 0 && l[w - 1].first == l[r].first) l[w - 1].second += l[r].second;
    else l[w++] = l[r];
  }
  l.resize(w);
}

}  // namespace

NvlinkIndex::NvlinkIndex(const Topology& t)
    : switchLinks_(t.gpus.size(), 0), out_(t.gpus.size()), in_(t.gpus.size()) {
  std::map<PciAddress, int> gpuAt;  // bus id → GPU (the first one, as the model's scan finds it)
  for (const Gpu& g : t.gpus) gpuAt.emplace(g.address, g.index);
  for (const Gpu& g : t.gpus) {
    for (const NvLinkEdge& e : g.nvlinks) {
      if (e.toSwitch) {
        switchLinks_[g.index] += e.count;
        continue;
      }
      const std::optional<PciAddress> target = parseBusId(e.target);
      if (!target) continue;
      auto it = gpuAt.find(*target);
      if (it == gpuAt.end() || it->second == g.index) continue;  // not a GPU, or itself
      out_[g.index].push_back({it->second, e.count});
      in_[it->second].push_back({g.index, e.count});
    }
  }
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    merge(out_[g]);
    merge(in_[g]);
    if (switchLinks_[g] > 0) ++switchGpus_;
  }
}

int NvlinkIndex::linksTo(const Links& l, int peer) {
  auto it = std::lower_bound(l.begin(), l.end(), std::make_pair(peer, 0));
  return it != l.end() && it->first == peer ? it->second : 0;
}

int NvlinkIndex::between(int a, int b) const {
  if (a == b) return 0;
  // Direct links are listed from both ends in NVML and NCCL dumps; take either side once.
  const int direct = std::max(linksTo(out_.at(a), b), linksTo(out_.at(b), a));
  return direct + std::min(switchLinks_[a], switchLinks_[b]);
}

int NvlinkIndex::peers(int gpu) const {
  const bool switched = switchLinks_.at(gpu) > 0;
  int n = switched ? switchGpus_ - 1 : 0;  // every other GPU on an NVSwitch
  // Plus the direct peers not already counted through a switch (each once, from either list).
  const Links &o = out_[gpu], &i = in_[gpu];
  size_t x = 0, y = 0;
  while (x < o.size() || y < i.size()) {
    int peer;
    if (y == i.size() || (x < o.size() && o[x].first < i[y].first)) peer = o[x++].first;
    else if (x == o.size() || i[y].first < o[x].first) peer = i[y++].first;
    else { peer = o[x].first; ++x; ++y; }
    if (!(switched && switchLinks_[peer] > 0)) ++n;
  }
  return n;
}

}  // namespace epx::topo
