#include "epx/topology/paths.h"

#include <cstring>

namespace epx::topo {

namespace {

/// Steps from `n` up to the root, or -1 when the parent chain leaves the node table or loops
/// (a corrupt model must not hang). No allocation: the matrix printers call this per cell.
int depthOf(const Topology& t, int n) {
  int depth = 0;
  for (size_t steps = 0; steps <= t.nodes.size(); ++steps) {
    const int p = t.nodes[n].parent;
    if (p < 0) return depth;
    if (p >= static_cast<int>(t.nodes.size())) return -1;
    n = p;
    ++depth;
  }
  return -1;
}

}  // namespace

PathType pathBetweenNodes(const Topology& t, int a, int b) {
  if (a < 0 || b < 0 || a >= (int)t.nodes.size() || b >= (int)t.nodes.size()) return PathType::UNKNOWN;
  int da = depthOf(t, a), db = depthOf(t, b);
  if (da < 0 || db < 0) return PathType::UNKNOWN;
  // Climb to the lowest common ancestor, counting the switches strictly between the ends and it.
  int switches = 0;
  auto climb = [&](int& n, int end) {
    if (n != end && t.nodes[n].kind == NodeKind::Switch) ++switches;
    n = t.nodes[n].parent;
  };
  int x = a, y = b;
  for (; da > db; --da) climb(x, a);
  for (; db > da; --db) climb(y, b);
  while (x != y) {
    climb(x, a);
    climb(y, b);
  }
  if (x < 0) return PathType::UNKNOWN;  // two roots: no common ancestor
  switch (t.nodes[x].kind) {
    case NodeKind::Switch:
    case NodeKind::Device:
      // The switches below the LCA on both sides, plus the LCA itself.
      if (t.nodes[x].kind == NodeKind::Switch) ++switches;
      return switches <= 1 ? PathType::PIX : PathType::PXB;
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
