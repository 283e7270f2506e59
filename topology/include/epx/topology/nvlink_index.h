// epx topology: NVLink adjacency of all GPU pairs, built once.
//
// Topology::nvlinkBetween() answers one pair by scanning both GPUs' edge lists; callers that ask
// about every pair (epx-topo's matrix, JSON and NVLink domain size) build this index instead, so a
// pair costs a binary search and a topology with many GPUs stays fast. Same answers as the model.
#pragma once
#include <utility>
#include <vector>

#include "epx/topology/model.h"

namespace epx::topo {

class NvlinkIndex {
 public:
  explicit NvlinkIndex(const Topology& t);

  /// Links between GPUs `a` and `b`: Topology::nvlinkBetween(a, b).
  int between(int a, int b) const;
  /// GPUs other than `gpu` with at least one link to it (its NVLink peers).
  int peers(int gpu) const;

 private:
  using Links = std::vector<std::pair<int, int>>;  // (peer GPU, links), sorted by peer
  static int linksTo(const Links& l, int peer);

  std::vector<int> switchLinks_;  // per GPU: links that end at an NVSwitch
  std::vector<Links> out_;        // per GPU: direct links it lists, by far-end GPU
  std::vector<Links> in_;         // per GPU: direct links other GPUs list towards it
  int switchGpus_ = 0;            // GPUs with at least one NVSwitch link
};

}  // namespace epx::topo
