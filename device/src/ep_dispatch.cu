// Dispatch kernel: every CTA first sends its share of tokens straight into the receive regions of
// the destination ranks' windows (NVLink stores through LSA pointers; one row per token and
// destination rank, with the token's top-k meta), signals, waits for all peers, then copies the
// rows it received into the caller's output layout (deduplicated or expanded by local expert).
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/op_sync.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;

struct DispatchMeta {  // views of the meta block of one window row
  int32_t* p;
  int K;
  __device__ int32_t& srcToken() const { return p[0]; }
  __device__ int32_t& expert(int k) const { return p[1 + k]; }
  __device__ float& weight(int k) const { return reinterpret_cast<float*>(p)[1 + K + k]; }
  __device__ int32_t& expertPos(int k) const { return p[1 + 2 * K + k]; }
};

// Send phase: warp-strided over this rank's tokens.
__device__ void sendTokens(const DispatchArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, T = r.totals[2];
  const uint32_t rowBytes = c.wl.dispatchRowBytes;
  for (int t = globalWarp; t < T; t += numWarps) {
    const int slot = lane < R ? r.tokSlot[t * R + lane] : -1;
    uint32_t dests = __ballot_sync(0xffffffffu, slot >= 0);
    const size_t rowOff = c.wl.dispatchRegion + (size_t(c.rank) * c.maxTokens + (slot < 0 ? 0 : slot)) * rowBytes;
    int e = -1, pos = -1;
    float w = 0.f;
    if (lane < K) {
      e = r.tokExpert[t * K + lane];
      pos = r.tokExpertPos[t * K + lane];
      if (a.topkWeights) w = a.topkWeights[size_t(t) * K + lane];
    }
    const char* src = a.x + size_t(t) * a.xRowBytes;
    while (dests) {
      const int d = __ffs(dests) - 1;
      dests &= dests - 1;
      char* dst = sync.peerBase[d] + __shfl_sync(0xffffffffu, rowOff, d);
      warpCopy16<false>(dst, src, a.xRowBytes, lane);
      if (a.scaleRowBytes)
        warpCopy4(dst + a.xRowBytes, reinterpret_cast<const char*>(a.xScales) + size_t(t) * a.scaleRowBytes,
                  a.scaleRowBytes, lane);
      DispatchMeta m{reinterpret_cast<int32_t*>(dst + c.wl.dispatchMetaOffset), K};
      if (lane == 0) m.srcToken() = t;
      if (lane < K) {
        m.expert(lane) = e;
        m.weight(lane) = w;
        m.expertPos(lane) = pos;
      }
    }
  }
}

// Receive phase: warp-strided over received (source, slot) rows.
__device__ void receiveRows(const DispatchArgs& a, const OpSync& sync, int globalWarp, int numWarps, int lane,
                            char* (&dsts)[kWarps][kMaxTopk], int (&rows)[kWarps][kMaxTopk], const int* recvBase) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, Le = c.localExperts, warp = threadIdx.x >> 5;
  const int total = recvBase[R];
  const uint32_t lanesBelow = (1u << lane) - 1u;
  for (int i = globalWarp; i < total; i += numWarps) {
    int s = 0;
    while (s + 1 < R && i >= recvBase[s + 1]) ++s;
    const int slot = i - recvBase[s];
    const size_t routeRow = size_t(s) * c.maxTokens + slot;
    const char* row = sync.local(c) + c.wl.dispatchRegion + routeRow * c.wl.dispatchRowBytes;
    DispatchMeta m{reinterpret_cast<int32_t*>(const_cast<char*>(row) + c.wl.dispatchMetaOffset), K};
    const int token = *reinterpret_cast<volatile int32_t*>(&m.srcToken());
    int e = -1, pos = -1;
    float w = 0.f;
    if (lane < K) {
      e = *reinterpret_cast<volatile int32_t*>(&m.expert(lane));
      w = *reinterpret_cast<volatile float*>(&m.weight(lane));
      pos = *reinterpret_cast<volatile int32_t*>(&m.expertPos(lane));
    }
    const bool local = lane < K && e >= 0 && e / Le == c.rank;
    const int le = local ? e - c.rank * Le : -1;
    const uint32_t localMask = __ballot_sync(0xffffffffu, local);
    if (lane == 0) r.recvLocalMask[routeRow] = localMask;

    if (!r.expanded) {
      warpCopy16<true>(a.recvX + size_t(i) * a.xRowBytes, row, a.xRowBytes, lane);
      if (a.scaleRowBytes)
        warpCopy4(reinterpret_cast<char*>(a.recvScales) + size_t(i) * a.scaleRowBytes, row + a.xRowBytes,
                  a.scaleRowBytes, lane);
      if (lane < K) {
        if (a.recvTopkIdx) a.recvTopkIdx[size_t(i) * K + lane] = le;
        if (a.recvTopkWeights) a.recvTopkWeights[size_t(i) * K + lane] = local ? w : 0.f;
      }
      if (lane == 0 && a.recvSrcInfo) {
        a.recvSrcInfo[2 * size_t(i)] = s;
        a.recvSrcInfo[2 * size_t(i) + 1] = token;
      }
      continue;
    }

    const int outRow = local ? r.expertStart[le] + r.srcExpertOff[s * Le + le] + pos : -1;
    if (lane < K) r.recvExpRows[routeRow * K + lane] = outRow;
    if (local) {
      const int j = __popc(localMask & lanesBelow);
      dsts[warp][j] = a.recvX + size_t(outRow) * a.xRowBytes;
      rows[warp][j] = outRow;
      if (a.recvTopkWeights) a.recvTopkWeights[outRow] = w;
      if (a.recvSrcInfo) {
        a.recvSrcInfo[2 * size_t(outRow)] = s;
        a.recvSrcInfo[2 * size_t(outRow) + 1] = token;
      }
    }
    __syncwarp();
    const int n = __popc(localMask);
    warpCopy16Multi(dsts[warp], n, row, a.xRowBytes, lane);
    if (a.scaleRowBytes)
      for (int j = 0; j < n; ++j)
        warpCopy4(reinterpret_cast<char*>(a.recvScales) + size_t(rows[warp][j]) * a.scaleRowBytes, row + a.xRowBytes,
                  a.scaleRowBytes, lane);
    __syncwarp();
  }
}

// Expanded layout: alignment gap rows get no source (-1), weight 0, and zeros when asked.
__device__ void fillGaps(const DispatchArgs& a, int globalWarp, int numWarps, int lane) {
  const Route& r = a.r;
  const int Le = a.c.localExperts, A = r.alignment;
  if (!r.expanded || A <= 1) return;
  for (int g = globalWarp; g < Le * A; g += numWarps) {
    const int le = g / A;
    const int row = r.expertStart[le] + r.expertCount[le] + g % A;
    if (row >= r.expertStart[le + 1]) continue;
    if (a.zeroGaps) {
      warpZero16(a.recvX + size_t(row) * a.xRowBytes, a.xRowBytes, lane);
      if (a.scaleRowBytes)
        for (int j = lane; j < a.scaleRowBytes / 4; j += 32) a.recvScales[size_t(row) * (a.scaleRowBytes / 4) + j] = 0.f;
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
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;

  sync.begin(c, kOpDispatch, kPhaseDispatchReady);
  if (!sync.abort) sendTokens(a, sync, globalWarp, numWarps, lane);
  sync.signalSent(c, kOpDispatch);
  sync.waitAllSent(c, kOpDispatch, kPhaseDispatchData);
  if (threadIdx.x <= c.nRanks) recvBase[threadIdx.x] = a.r.recvBase[threadIdx.x];
  __syncthreads();
  if (!sync.abort) {
    receiveRows(a, sync, globalWarp, numWarps, lane, dsts, rows, recvBase);
    fillGaps(a, globalWarp, numWarps, lane);
    if (blockIdx.x == 0) {
      const Route& r = a.r;
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
