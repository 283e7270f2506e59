#include "epx/topology/paths.h"

#include <cstring>
#include <vector>

namespace epx::topo {

namespace {
std::vector<int> chainToRoot(const Topology& t, int n) {
  std::vector<int> chain;
  // Bounded by the node count, so a corrupt parent loop cannot hang.
  for (size_t steps = 0; n >= 0 && steps <= t.nodes.size(); ++steps) {
    chain.push_back(n);
    n = t.nodes[n].parent;
  }
  return chain;
}
}  // namespace

PathType pathBetweenNodes(const Topology& t, int a, int b) {
  if (a < 0 || b < 0 || a >= (int)t.nodes.size() || b >= (int)t.nodes.size()) return PathType::UNKNOWN;
  std::vector<int> ca = chainToRoot(t, a), cb = chainToRoot(t, b);
  // Lowest common ancestor: first node of a's chain that is also in b's chain.
  int lca = -1;
  size_t ia = 0, ib = 0;
  for (ia = 0; ia < ca.size() && lca < 0; ++ia)
    for (ib = 0; ib < cb.size(); ++ib)
      if (ca[ia] == cb[ib]) { lca = ca[ia]; break; }
  if (lca < 0) return PathType::UNKNOWN;
  switch (t.nodes[lca].kind) {
    case NodeKind::Switch:
    case NodeKind::Device: {
      // Count switches strictly below the LCA on both sides, plus the LCA itself.
      int switches = t.nodes[lca].kind == NodeKind::Switch ? 1 : 0;
      for (int n : ca) { if (n == lca) break; if (n != a && t.nodes[n].kind == NodeKind::Switch) ++switches; }
      for (int n : cb) { if (n == lca) break; if (n != b && t.nodes[n].kind == NodeKind::Switch) ++switches; }
      return switches <= 1 ? PathType::PIX : PathType::PXB;
    }
    case NodeKind::HostBridge: return PathType::PHB;
    case NodeKind::Numa: return PathType::NODE;
    case NodeKind::Machine: return PathType::SYS;
  }
  return PathType::UNKNOWN;
}

PathType gpuNicPath(const Topology& t, int gpu, int nic) {
  return pathBetweenNodes(t, t.gpus.at(gpu).node, t.nics.at(nic).node);
}

PathType gpuGpuPath(const Topology& t, int a, int b) {
  return pathBetweenNodes(t, t.gpus.at(a).node, t.gpus.at(b).node);
}

PathType parsePathType(const char* s) {
  for (PathType p : {PathType::PIX, PathType::PXB, PathType::PHB, PathType::NODE, PathType::SYS})
    if (std::strcmp(s, toString(p)) == 0) return p;
  return PathType::UNKNOWN;
}

}  // namespace epx::topo
