// Combine kernel, two flows (both sum per source token in FP32: destination ranks in ascending
// order, then bias0, bias1; BF16 out — the order of the CPU reference in host/ref).
//  push: every CTA sends back its share of received rows (expanded layout: the token's local expert
//        rows summed in FP32, rounded to BF16 for the wire) into the source rank's window, signals,
//        waits for all peers, then reduces locally.
//  pull: (deduplicated layout, expert output already in the window's combineX) after every rank
//        has started combine, each rank reads its tokens' rows straight from the peers' windows
//        and reduces; a closing all-to-all arrival keeps combineX stable until every reader is done.
// Combined top-k weights come from the rank that owns each slot's expert.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/op_sync.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;

__device__ void sendBack(const CombineArgs& a, const OpSync& sync, const int* recvBase, int globalWarp, int numWarps,
                         int lane, const int4* (&srcs)[kWarps][kMaxTopk]) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int K = c.topk, H = c.hidden, warp = threadIdx.x >> 5;
  const int total = recvBase[c.nRanks];
  const uint32_t lanesBelow = (1u << lane) - 1u;
  for (int i = globalWarp; i < total; i += numWarps) {
    const int s = sourceOf(recvBase, c.nRanks, i);
    const size_t slotRow = size_t(c.rank) * c.maxTokens + (i - recvBase[s]);
    uint16_t* dst = reinterpret_cast<uint16_t*>(sync.peerBase[s] + c.wl.combineRecv) + slotRow * H;
    float* dstW = reinterpret_cast<float*>(sync.peerBase[s] + c.wl.combineRecvW) + slotRow * K;
    if (!r.expanded) {
      warpCopy16<false>(reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(a.x + size_t(i) * H), H * 2, lane);
      if (a.topkWeights && lane < K) dstW[lane] = a.topkWeights[size_t(i) * K + lane];
      continue;
    }
    const int row = lane < K ? r.recvExpRows[size_t(i) * K + lane] : -1;
    const uint32_t valid = __ballot_sync(0xffffffffu, row >= 0);
    if (a.topkWeights && lane < K) dstW[lane] = row >= 0 ? a.topkWeights[row] : 0.f;
    if (row >= 0) srcs[warp][__popc(valid & lanesBelow)] = reinterpret_cast<const int4*>(a.x + size_t(row) * H);
    __syncwarp();
    warpSumBf16<false>(reinterpret_cast<int4*>(dst), srcs[warp], __popc(valid), nullptr, nullptr, H / 8, lane);
    __syncwarp();
  }
}

// Row of token t in destination rank `lane`'s numbering (pull: in rank lane's combineX; push: the
// slot in this rank's combineRecv[lane]), or -1 when t was not sent there.
template <bool kPull>
__device__ __forceinline__ int reduceRow(const Route& r, int R, int t, int lane) {
  if (lane >= R) return -1;
  const int slot = r.tokSlot[t * R + lane];  // independent loads
  int base = r.chunkRankBase[(t / kLayoutChunk) * R + lane];
  if (kPull) base += r.sendBase[lane];
  return slot >= 0 ? base + slot : -1;
}

// Reduce per source token; the next token's rows are looked up while the current one is summed.
template <bool kPull>
__device__ void reduceTokens(const CombineArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane,
                             const int4* (&srcRows)[kWarps][kMaxRanks], const float* (&srcW)[kWarps][kMaxRanks]) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, H = c.hidden, Le = c.localExperts, warp = threadIdx.x >> 5;
  const int T = r.totals[2];
  int next = globalWarp < T ? reduceRow<kPull>(r, R, globalWarp, lane) : -1;
  for (int t = globalWarp; t < T; t += numWarps) {
    const int row = next;
    if (t + numWarps < T) next = reduceRow<kPull>(r, R, t + numWarps, lane);
    const uint32_t dests = __ballot_sync(0xffffffffu, row >= 0);
    if (row >= 0) {
      const int j = __popc(dests & ((1u << lane) - 1u));
      if (kPull) {
        srcRows[warp][j] = reinterpret_cast<const int4*>(sync.peerBase[lane] + c.wl.combineX + size_t(row) * H * 2);
        srcW[warp][lane] = reinterpret_cast<const float*>(sync.peerBase[lane] + c.wl.recvWeights) + size_t(row) * K;
      } else {
        const size_t at = size_t(lane) * c.maxTokens + row;
        srcRows[warp][j] = reinterpret_cast<const int4*>(sync.local(c) + c.wl.combineRecv + at * H * 2);
        srcW[warp][lane] = reinterpret_cast<const float*>(sync.local(c) + c.wl.combineRecvW) + at * K;
      }
    }
    __syncwarp();
    warpSumBf16<true, kPull ? 8 : 4>(reinterpret_cast<int4*>(a.out + size_t(t) * H), srcRows[warp], __popc(dests),
                      a.bias0 ? reinterpret_cast<const int4*>(a.bias0 + size_t(t) * H) : nullptr,
                      a.bias1 ? reinterpret_cast<const int4*>(a.bias1 + size_t(t) * H) : nullptr, H / 8, lane);
    if (a.combinedTopkWeights && lane < K) {
      const int e = r.tokExpert[t * K + lane];
      a.combinedTopkWeights[size_t(t) * K + lane] = e >= 0 ? ((const volatile float*)srcW[warp][e / Le])[lane] : 0.f;
    }
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kThreads, 1) combineKernel(const CombineArgs a) {
  __shared__ OpSync sync;
  __shared__ const int4* rows[kWarps][kMaxTopk];
  __shared__ const int4* srcRows[kWarps][kMaxRanks];
  __shared__ const float* srcW[kWarps][kMaxRanks];
  __shared__ int recvBase[kMaxRanks + 1];
  const Common& c = a.c;
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;

  if (threadIdx.x <= c.nRanks) recvBase[threadIdx.x] = a.r.recvBase[threadIdx.x];
  sync.begin(c, kOpCombine, kPhaseCombineReady);
  if (a.pull) {
    if (!sync.abort) reduceTokens<true>(a, sync, globalWarp, numWarps, lane, srcRows, srcW);
    sync.signalSent(c, kOpCombine);  // "done reading your combineX"
    sync.waitAllSent(c, kOpCombine, kPhaseCombineData);
  } else {
    if (!sync.abort) sendBack(a, sync, recvBase, globalWarp, numWarps, lane, rows);
    sync.signalSent(c, kOpCombine);
    sync.waitAllSent(c, kOpCombine, kPhaseCombineData);
    if (!sync.abort) reduceTokens<false>(a, sync, globalWarp, numWarps, lane, srcRows, srcW);
  }
  sync.end(c, kOpCombine);
}

}  // namespace

cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream) {
  combineKernel<<<nCtas, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
