// Combine kernel: every CTA sends back its share of the rows it received in dispatch (expanded
// layout: the local experts' rows of a token summed in FP32, rounded to BF16 for the wire) into
// the source ranks' windows, signals, waits for all peers, then reduces per source token: FP32 sum
// over destination ranks in ascending order, + bias0 + bias1, BF16 out (the order the CPU
// reference uses). Combined top-k weights are taken from the rank that owns each slot's expert.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/op_sync.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;

__device__ void sendBack(const CombineArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane,
                         int (&rows)[kWarps][kMaxTopk], const int* recvBase) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, H = c.hidden, warp = threadIdx.x >> 5;
  const int total = recvBase[R];
  const int rowBytes = H * 2;
  const uint32_t lanesBelow = (1u << lane) - 1u;
  for (int i = globalWarp; i < total; i += numWarps) {
    int s = 0;
    while (s + 1 < R && i >= recvBase[s + 1]) ++s;
    const int slot = i - recvBase[s];
    const size_t routeRow = size_t(s) * c.maxTokens + slot;
    char* dst = sync.peerBase[s] + c.wl.combineRegion + (size_t(c.rank) * c.maxTokens + slot) * c.wl.combineRowBytes;
    float w = 0.f;
    if (!r.expanded) {
      warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x) + size_t(i) * rowBytes, rowBytes, lane);
      if (a.topkWeights && lane < K && ((r.recvLocalMask[routeRow] >> lane) & 1u)) w = a.topkWeights[size_t(i) * K + lane];
    } else {
      const int row = lane < K ? r.recvExpRows[routeRow * K + lane] : -1;
      const uint32_t valid = __ballot_sync(0xffffffffu, row >= 0);
      if (row >= 0) rows[warp][__popc(valid & lanesBelow)] = row;
      if (a.topkWeights && row >= 0) w = a.topkWeights[row];
      __syncwarp();
      const int n = __popc(valid);
      for (int v = lane; v < H / 8; v += 32) {
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int j = 0; j < n; ++j)
          addBf16x8(acc, ldNc(reinterpret_cast<const int4*>(a.x + size_t(rows[warp][j]) * H) + v));
        stNa(reinterpret_cast<int4*>(dst) + v, packBf16x8(acc));
      }
      __syncwarp();
    }
    if (a.topkWeights && lane < K) reinterpret_cast<float*>(dst + c.wl.combineMetaOffset)[lane] = w;
  }
}

__device__ void reduceTokens(const CombineArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane,
                             const char* (&srcRows)[kWarps][kMaxRanks]) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, H = c.hidden, Le = c.localExperts, warp = threadIdx.x >> 5;
  const int T = r.totals[2];
  const char* region = sync.local(c) + c.wl.combineRegion;
  for (int t = globalWarp; t < T; t += numWarps) {
    const int slot = lane < R ? r.tokSlot[t * R + lane] : -1;
    const uint32_t dests = __ballot_sync(0xffffffffu, slot >= 0);
    if (slot >= 0)
      srcRows[warp][__popc(dests & ((1u << lane) - 1u))] =
          region + (size_t(lane) * c.maxTokens + slot) * c.wl.combineRowBytes;
    __syncwarp();
    const int n = __popc(dests);
    for (int v = lane; v < H / 8; v += 32) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (int j = 0; j < n; ++j) addBf16x8(acc, ldVolatile(reinterpret_cast<const int4*>(srcRows[warp][j]) + v));
      if (a.bias0) addBf16x8(acc, ldNc(reinterpret_cast<const int4*>(a.bias0 + size_t(t) * H) + v));
      if (a.bias1) addBf16x8(acc, ldNc(reinterpret_cast<const int4*>(a.bias1 + size_t(t) * H) + v));
      stNa(reinterpret_cast<int4*>(a.out + size_t(t) * H) + v, packBf16x8(acc));
    }
    if (a.combinedTopkWeights && lane < K) {
      const int e = r.tokExpert[t * K + lane];
      float w = 0.f;
      if (e >= 0) {
        const int d = e / Le;
        const char* row = region + (size_t(d) * c.maxTokens + r.tokSlot[t * R + d]) * c.wl.combineRowBytes;
        w = reinterpret_cast<const volatile float*>(row + c.wl.combineMetaOffset)[lane];
      }
      a.combinedTopkWeights[size_t(t) * K + lane] = w;
    }
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kThreads, 1) combineKernel(const CombineArgs a) {
  __shared__ OpSync sync;
  __shared__ int rows[kWarps][kMaxTopk];
  __shared__ const char* srcRows[kWarps][kMaxRanks];
  __shared__ int recvBase[kMaxRanks + 1];
  const Common& c = a.c;
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;

  if (threadIdx.x <= c.nRanks) recvBase[threadIdx.x] = a.r.recvBase[threadIdx.x];
  sync.begin(c, kOpCombine, kPhaseCombineReady);
  if (!sync.abort) sendBack(a, sync, globalWarp, numWarps, lane, rows, recvBase);
  sync.signalSent(c, kOpCombine);
  sync.waitAllSent(c, kOpCombine, kPhaseCombineData);
  if (!sync.abort) reduceTokens(a, sync, globalWarp, numWarps, lane, srcRows);
  sync.end(c, kOpCombine);
}

}  // namespace

cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream) {
  combineKernel<<<nCtas, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
