// Hybrid forwarding's part of the route (protocol.h "Hybrid forwarding"), after the layout kernel
// validated the top-k ids (Route::tokExpert): CTA n numbers this rank's tokens bound for node n
// (a token counts once per node, on its first slot with an expert there), in token order, so that
// each node's records are contiguous in fwdSend and at the forwarder. CTA of this rank's own node
// marks the slots that are not forwarded. Every (token, slot) is written by exactly one CTA, and
// every (layout chunk, node) of chunkNodeBase by exactly one thread.
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/warp.cuh"

namespace epx::dev {

namespace {

constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads) hybridRouteKernel(const __grid_constant__ LayoutArgs a) {
  __shared__ int counts[kThreads + 1];  // per thread's token range, then its exclusive prefix and the total
  const Route& r = a.r;
  const int K = a.c.shape.topk, Le = a.c.shape.localExperts, N = a.c.nodeSize;
  const int node = blockIdx.x, myNode = nodeOfRank(a.c.link.rank, N), nodes = gridDim.x;
  const int T = r.totals->numTokens;
  const Share mine = shareOf(T, kThreads, threadIdx.x);
  if (node == myNode) {  // slots that stay in this node, or are unused: not forwarded
    for (int t = mine.begin; t < mine.end; ++t) {
      if (t % kLayoutChunk == 0) r.chunkNodeBase[(t / kLayoutChunk) * nodes + node] = 0;
      for (int k = 0; k < K; ++k) {
        const int e = r.tokExpert[t * K + k];
        if (e < 0 || nodeOfRank(destOf(e, Le), N) == myNode) r.tokNodeSlot[t * K + k] = -1;
      }
    }
    if (threadIdx.x == 0) r.nodeCount[node] = 0;
    return;
  }
  int n = 0;
  for (int t = mine.begin; t < mine.end; ++t)
    for (int k = 0; k < K; ++k) n += firstSlotOfNode(r.tokExpert + size_t(t) * K, k, Le, N, node) ? 1 : 0;
  counts[threadIdx.x] = n;
  __syncthreads();
  if (threadIdx.x < kWarp) {  // exclusive prefix over the threads' token ranges (in token order)
    const int total = warpExclusiveScan(counts, counts, kThreads, int(threadIdx.x));
    if (threadIdx.x == 0) r.nodeCount[node] = total;
  }
  __syncthreads();
  int slot = counts[threadIdx.x];
  for (int t = mine.begin; t < mine.end; ++t) {
    // Records before each layout chunk: combine's wait for a prefix of the node sums.
    if (t % kLayoutChunk == 0) r.chunkNodeBase[(t / kLayoutChunk) * nodes + node] = slot;
    for (int k = 0; k < K; ++k) {
      const int e = r.tokExpert[t * K + k];
      if (e < 0 || nodeOfRank(destOf(e, Le), N) != node) continue;
      r.tokNodeSlot[t * K + k] = firstSlotOfNode(r.tokExpert + size_t(t) * K, k, Le, N, node) ? slot++ : -1;
    }
  }
}

}  // namespace

cudaError_t launchHybridRoute(const LayoutArgs& args, cudaStream_t stream) {
  const int nodes = args.c.link.nRanks / args.c.nodeSize;
  hybridRouteKernel<<<nodes, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
