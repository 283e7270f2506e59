// Dispatch kernel. Send: every CTA stores its share of (token, destination rank) rows straight
// into the destination's receive arrays (NVLink stores through LSA pointers) at the row agreed in
// the layout's count exchange, with the token's top-k meta; then one release-add per peer.
// Receive: after all peers arrived, copy the rows into the caller's layout (deduplicated copy, or
// expanded by local expert) — skipped entirely when the caller's outputs are the window arrays.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/op_sync.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;

// Typed views of the receive arrays in a window whose local base is `base`.
struct RecvArrays {
  char* x;
  float* scales;
  int32_t* idx;
  float* weights;
  int32_t* info;
  int32_t* pos;
  __device__ RecvArrays(char* base, const WindowLayout& wl)
      : x(base + wl.recvX),
        scales(reinterpret_cast<float*>(base + wl.recvScales)),
        idx(reinterpret_cast<int32_t*>(base + wl.recvIdx)),
        weights(reinterpret_cast<float*>(base + wl.recvWeights)),
        info(reinterpret_cast<int32_t*>(base + wl.recvInfo)),
        pos(reinterpret_cast<int32_t*>(base + wl.recvPos)) {}
};

// What one warp needs to send token t: lane d < R holds the token's row in rank d's receive
// arrays (-1: not sent there); lane k < K holds its slot-k expert, position and weight.
struct SendPlan {
  int row, e, pos;
  float w;
};

__device__ __forceinline__ SendPlan loadPlan(const DispatchArgs& a, int t, int lane) {
  const Route& r = a.r;
  const int R = a.c.nRanks, K = a.c.topk, chunk = t / kLayoutChunk;
  SendPlan p{-1, -1, -1, 0.f};
  if (lane < R) {  // three independent loads
    const int slot = r.tokSlot[t * R + lane];
    const int base = r.sendBase[lane] + r.chunkRankBase[chunk * R + lane];
    p.row = slot >= 0 ? base + slot : -1;
  }
  if (lane < K) {
    p.e = r.tokExpert[t * K + lane];
    const int local = r.tokExpertPos[t * K + lane];
    if (p.e >= 0) p.pos = r.chunkExpertBase[chunk * a.c.numExperts + p.e] + local;
    if (a.topkWeights) p.w = a.topkWeights[size_t(t) * K + lane];
  }
  return p;
}

// Send phase: warp-strided over this rank's tokens; the next token's plan is loaded while the
// current row is copied, so the index loads' latency hides behind the data movement. Each 16-byte
// vector of the row is loaded once and stored to every destination.
__device__ void sendTokens(const DispatchArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane,
                           char* (&dsts)[kWarps][kMaxTopk]) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int K = c.topk, Le = c.localExperts, T = r.totals[2], warp = threadIdx.x >> 5;
  const int scaleWords = a.scaleRowBytes / 4;
  SendPlan next = globalWarp < T ? loadPlan(a, globalWarp, lane) : SendPlan{-1, -1, -1, 0.f};
  for (int t = globalWarp; t < T; t += numWarps) {
    const SendPlan cur = next;
    if (t + numWarps < T) next = loadPlan(a, t + numWarps, lane);
    const uint32_t dests = __ballot_sync(0xffffffffu, cur.row >= 0);
    if (cur.row >= 0)
      dsts[warp][__popc(dests & ((1u << lane) - 1u))] = sync.peerBase[lane] + c.wl.recvX + size_t(cur.row) * a.xRowBytes;
    __syncwarp();
    warpCopy16Multi<false, 8>(dsts[warp], __popc(dests), a.x + size_t(t) * a.xRowBytes, a.xRowBytes, lane);
    // FP8 scales: one load per word, stored to every destination.
    const float scale = scaleWords && lane < scaleWords ? a.xScales[size_t(t) * scaleWords + lane] : 0.f;
    const float scale2 = scaleWords > 32 && lane + 32 < scaleWords ? a.xScales[size_t(t) * scaleWords + lane + 32] : 0.f;
    __syncwarp();
    for (uint32_t m = dests; m; m &= m - 1) {
      const int d = __ffs(m) - 1;
      const size_t drow = size_t(__shfl_sync(0xffffffffu, cur.row, d));
      RecvArrays dst(sync.peerBase[d], c.wl);
      if (lane < scaleWords) dst.scales[drow * scaleWords + lane] = scale;
      if (lane + 32 < scaleWords) dst.scales[drow * scaleWords + lane + 32] = scale2;
      for (int j = lane + 64; j < scaleWords; j += 32) dst.scales[drow * scaleWords + j] = a.xScales[size_t(t) * scaleWords + j];
      const bool owned = cur.e >= 0 && cur.e / Le == d;
      if (lane < K) {
        dst.idx[drow * K + lane] = owned ? cur.e - d * Le : -1;
        dst.weights[drow * K + lane] = owned ? cur.w : 0.f;
        if (r.expanded) dst.pos[drow * K + lane] = owned ? cur.pos : -1;
      } else if (lane < K + 2) {
        dst.info[drow * 2 + lane - K] = lane == K ? c.rank : t;
      }
    }
  }
}

// Deduplicated layout into caller buffers: row i of the window arrays -> row i of the outputs.
__device__ void copyDedup(const DispatchArgs& a, const RecvArrays& in, int total, int globalWarp, int numWarps,
                          int lane) {
  const int K = a.c.topk, scaleWords = a.scaleRowBytes / 4;
  const bool copyX = !a.zeroCopy;
  for (int i = globalWarp; i < total; i += numWarps) {
    const size_t row = size_t(i);
    if (copyX) warpCopy16<true>(a.recvX + row * a.xRowBytes, in.x + row * a.xRowBytes, a.xRowBytes, lane);
    if (scaleWords && a.recvScales && a.recvScales != in.scales)
      for (int j = lane; j < scaleWords; j += 32) a.recvScales[row * scaleWords + j] = ((volatile float*)in.scales)[row * scaleWords + j];
    if (lane < K) {
      if (a.recvTopkIdx && a.recvTopkIdx != in.idx) a.recvTopkIdx[row * K + lane] = ((volatile int32_t*)in.idx)[row * K + lane];
      if (a.recvTopkWeights && a.recvTopkWeights != in.weights)
        a.recvTopkWeights[row * K + lane] = ((volatile float*)in.weights)[row * K + lane];
    } else if (lane < K + 2 && a.recvSrcInfo && a.recvSrcInfo != in.info) {
      a.recvSrcInfo[row * 2 + lane - K] = ((volatile int32_t*)in.info)[row * 2 + lane - K];
    }
  }
}

// Expanded layout: received row i goes to one output row per local expert of its token.
__device__ void copyExpanded(const DispatchArgs& a, const RecvArrays& in, const int* recvBase, int total,
                             int globalWarp, int numWarps, int lane, char* (&dsts)[kWarps][kMaxTopk],
                             int (&rows)[kWarps][kMaxTopk]) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int K = c.topk, Le = c.localExperts, warp = threadIdx.x >> 5, scaleWords = a.scaleRowBytes / 4;
  const uint32_t lanesBelow = (1u << lane) - 1u;
  for (int i = globalWarp; i < total; i += numWarps) {
    const int s = sourceOf(recvBase, c.nRanks, i);
    const size_t row = size_t(i);
    int outRow = -1;
    float w = 0.f;
    if (lane < K) {
      const int le = ((volatile int32_t*)in.idx)[row * K + lane];
      if (le >= 0) {
        outRow = r.expertStart[le] + r.srcExpertOff[s * Le + le] + ((volatile int32_t*)in.pos)[row * K + lane];
        w = ((volatile float*)in.weights)[row * K + lane];
      }
      r.recvExpRows[row * K + lane] = outRow;
    }
    const uint32_t local = __ballot_sync(0xffffffffu, outRow >= 0);
    if (outRow >= 0) {
      const int j = __popc(local & lanesBelow);
      dsts[warp][j] = a.recvX + size_t(outRow) * a.xRowBytes;
      rows[warp][j] = outRow;
      if (a.recvTopkWeights) a.recvTopkWeights[outRow] = w;
      if (a.recvSrcInfo) {
        a.recvSrcInfo[2 * size_t(outRow)] = s;
        a.recvSrcInfo[2 * size_t(outRow) + 1] = ((volatile int32_t*)in.info)[row * 2 + 1];
      }
    }
    __syncwarp();
    const int n = __popc(local);
    warpCopy16Multi<true>(dsts[warp], n, in.x + row * a.xRowBytes, a.xRowBytes, lane);
    if (scaleWords)
      for (int j = 0; j < n; ++j)
        for (int q = lane; q < scaleWords; q += 32)
          a.recvScales[size_t(rows[warp][j]) * scaleWords + q] = ((volatile float*)in.scales)[row * scaleWords + q];
    __syncwarp();
  }
}

// Expanded layout: alignment gap rows get no source (-1), weight 0, and zeros when asked.
__device__ void fillGaps(const DispatchArgs& a, int globalWarp, int numWarps, int lane) {
  const Route& r = a.r;
  const int Le = a.c.localExperts, A = r.alignment, scaleWords = a.scaleRowBytes / 4;
  if (!r.expanded || A <= 1) return;
  for (int g = globalWarp; g < Le * A; g += numWarps) {
    const int le = g / A;
    const int row = r.expertStart[le] + r.expertCount[le] + g % A;
    if (row >= r.expertStart[le + 1]) continue;
    if (a.zeroGaps) {
      warpZero16(a.recvX + size_t(row) * a.xRowBytes, a.xRowBytes, lane);
      for (int j = lane; j < scaleWords; j += 32) a.recvScales[size_t(row) * scaleWords + j] = 0.f;
    }
    if (lane == 0) {
      if (a.recvTopkWeights) a.recvTopkWeights[row] = 0.f;
      if (a.recvSrcInfo) {
        a.recvSrcInfo[2 * size_t(row)] = -1;
        a.recvSrcInfo[2 * size_t(row) + 1] = -1;
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) dispatchKernel(const DispatchArgs a) {
  __shared__ OpSync sync;
  __shared__ char* dsts[kWarps][kMaxTopk];
  __shared__ int rows[kWarps][kMaxTopk];
  __shared__ int recvBase[kMaxRanks + 1];
  const Common& c = a.c;
  const Route& r = a.r;
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;

  if (threadIdx.x <= c.nRanks) recvBase[threadIdx.x] = r.recvBase[threadIdx.x];
  sync.begin(c, kOpDispatch, kPhaseDispatchReady);
  if (!sync.abort) sendTokens(a, sync, globalWarp, numWarps, lane, dsts);
  sync.signalSent(c, kOpDispatch);
  sync.waitAllSent(c, kOpDispatch, kPhaseDispatchData);
  if (!sync.abort) {
    const RecvArrays in(sync.local(c), c.wl);
    const int total = recvBase[c.nRanks];
    if (r.expanded) {
      copyExpanded(a, in, recvBase, total, globalWarp, numWarps, lane, dsts, rows);
      fillGaps(a, globalWarp, numWarps, lane);
    } else {
      copyDedup(a, in, total, globalWarp, numWarps, lane);
    }
    if (blockIdx.x == 0) {
      for (int le = threadIdx.x; le <= c.localExperts; le += kThreads) {
        if (a.expertCounts && le < c.localExperts) a.expertCounts[le] = r.expertCount[le];
        if (a.expertOffsets) a.expertOffsets[le] = r.expertStart[le];
      }
      if (threadIdx.x == 0 && a.numRecvRows) *a.numRecvRows = r.totals[1];
    }
  }
  sync.end(c, kOpDispatch);
}

}  // namespace

cudaError_t launchDispatch(const DispatchArgs& args, int nCtas, cudaStream_t stream) {
  dispatchKernel<<<nCtas, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
