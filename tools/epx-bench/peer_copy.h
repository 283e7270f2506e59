// NVLink peer-copy ceiling: every rank copies, at the same time, the bytes the remote part of a
// BF16 dispatch moves (its rows for each peer) into that peer's memory, so both directions of
// every link are loaded. Three ways: copy engines (cudaMemcpyPeerAsync), and an SM store kernel
// (local loads, remote 16-byte stores) with a given number of CTAs.
#pragma once
#include <cstddef>
#include <vector>

#include "common.h"
#include "epx/testing/multigpu.h"

namespace epxbench {

struct CeilingShared {
  explicit CeilingShared(int n) : barrier(n), dst(n, nullptr), p2p(n, 0) {}
  HostBarrier barrier;
  std::vector<void*> dst;  // each rank's receive buffer (segments by source rank)
  std::vector<int> p2p;    // each rank: peer access to every peer enabled
};

struct CeilingRankResult {
  double copyEngineUs = 0;  // per round of copies to all peers, averaged over rounds
  double smFewUs = 0;       // SM stores with smFew CTAs (0: not measured, no P2P access)
  double smAllUs = 0;       // SM stores with one CTA per SM
  int smFew = 0, smAll = 0;
  double outBytes = 0;      // bytes this rank sends per round
  bool p2p = true;          // SM stores need peer access to every peer
};

// bytes[src * n + dst]: bytes rank src sends to rank dst (diagonal ignored). Collective over the
// rank threads of one MultiGpu::run (they meet in shared.barrier).
CeilingRankResult runCeiling(const epx::testing::RankContext& ctx, const std::vector<size_t>& bytes,
                             int smFew, int rounds, CeilingShared& shared);

}  // namespace epxbench
