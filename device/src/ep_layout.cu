// Layout kernel of ncclEpDispatchLayout: validates top-k ids, computes the route (slot of every
// token in each destination's receive region, position of every (token, expert) among this rank's
// tokens of that expert), and exchanges per-rank / per-expert counts with all ranks over NVLink.
//
// One CTA of 16 warps walks the tokens in chunks of 512. Inside a chunk, each warp builds one
// 32-bit lane mask per expert and per destination rank in shared memory; a token's position is
// then the running count before its warp plus popc(mask & lanes below it). Deterministic: rows
// are ordered by source token, as the CPU reference (host/ref) specifies.
#include <nccl_device.h>

#include <climits>

#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/sync.cuh"

namespace epx::dev {

namespace {

constexpr int kLayoutWarps = 16;
constexpr int kLayoutThreads = kLayoutWarps * 32;

size_t layoutSmemBytes(int numExperts) {
  return (size_t(2) * kLayoutWarps * numExperts + numExperts) * sizeof(uint32_t);
}

__device__ __forceinline__ long long loadId(const LayoutArgs& a, int i) {
  return a.idxIs64 ? static_cast<const long long*>(a.topkIdx)[i] : static_cast<const int*>(a.topkIdx)[i];
}

__global__ void __launch_bounds__(kLayoutThreads, 1) layoutKernel(const LayoutArgs a) {
  extern __shared__ uint32_t smem[];
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, E = c.numExperts, Le = c.localExperts;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t lanesBelow = (1u << lane) - 1u;

  uint32_t* expertMask = smem;                                   // [warp][E]
  uint32_t* expertBase = expertMask + kLayoutWarps * E;          // [warp][E]
  int* expertRun = reinterpret_cast<int*>(expertBase + kLayoutWarps * E);  // [E]
  __shared__ uint32_t rankMask[kLayoutWarps][kMaxRanks], rankBase[kLayoutWarps][kMaxRanks];
  __shared__ int rankRun[kMaxRanks], recvRows[kMaxRanks];
  __shared__ char* peerBase[kMaxRanks];
  __shared__ uint32_t seqS;
  __shared__ int badKey, abortS;

  if (tid < R) {
    peerBase[tid] = static_cast<char*>(ncclGetLsaPointer(c.window, 0, tid));
    rankRun[tid] = 0;
  }
  for (int e = tid; e < E; e += kLayoutThreads) expertRun[e] = 0;
  if (tid == 0) {
    seqS = *reinterpret_cast<volatile uint32_t*>(&c.state->layoutSeq) + 1;
    badKey = INT_MAX;
    abortS = 0;
    r.totals[2] = a.numTokens;
  }
  __syncthreads();
  const uint32_t seq = seqS;
  const int T = a.numTokens;

  for (int chunk = 0; chunk < T; chunk += kLayoutThreads) {
    for (int i = tid; i < kLayoutWarps * E; i += kLayoutThreads) expertMask[i] = 0;
    __syncthreads();
    const int t = chunk + tid;
    uint32_t destMask = 0;
    if (t < T) {
      for (int k = 0; k < K; ++k) {
        long long e = loadId(a, t * K + k);
        bool bad = e < -1 || e >= E;
        for (int j = 0; j < k && !bad && e >= 0; ++j) bad = r.tokExpert[t * K + j] == e;
        if (bad) {
          atomicMin(&badKey, t * kMaxTopk + k);
          e = -1;
        }
        r.tokExpert[t * K + k] = int(e);
        if (e >= 0) {
          atomicOr(&expertMask[warp * E + e], 1u << lane);
          destMask |= 1u << (e / Le);
        }
      }
    }
    for (int d = 0; d < R; ++d) {
      uint32_t b = __ballot_sync(0xffffffffu, (destMask >> d) & 1u);
      if (lane == 0) rankMask[warp][d] = b;
    }
    __syncthreads();
    for (int e = tid; e < E; e += kLayoutThreads) {
      int run = expertRun[e];
      for (int w = 0; w < kLayoutWarps; ++w) {
        expertBase[w * E + e] = run;
        run += __popc(expertMask[w * E + e]);
      }
      expertRun[e] = run;
    }
    if (tid < R) {
      int run = rankRun[tid];
      for (int w = 0; w < kLayoutWarps; ++w) {
        rankBase[w][tid] = run;
        run += __popc(rankMask[w][tid]);
      }
      rankRun[tid] = run;
    }
    __syncthreads();
    if (t < T) {
      for (int d = 0; d < R; ++d)
        r.tokSlot[t * R + d] =
            ((destMask >> d) & 1u) ? int(rankBase[warp][d] + __popc(rankMask[warp][d] & lanesBelow)) : -1;
      for (int k = 0; k < K; ++k) {
        int e = r.tokExpert[t * K + k];
        r.tokExpertPos[t * K + k] =
            e >= 0 ? int(expertBase[warp * E + e] + __popc(expertMask[warp * E + e] & lanesBelow)) : -1;
      }
    }
    __syncthreads();
  }

  // Send counts: to rank d, (rows, counts of d's Le experts), into parity seq&1 of its count area.
  const int parity = seq & 1;
  const int entry = 1 + Le;
  for (int i = tid; i < R * entry; i += kLayoutThreads) {
    const int d = i / entry, j = i % entry;
    int* dst = reinterpret_cast<int*>(peerBase[d] + c.wl.counts) + (parity * kMaxRanks + c.rank) * c.wl.countStride + j;
    *reinterpret_cast<volatile int*>(dst) = j == 0 ? rankRun[d] : expertRun[d * Le + j - 1];
  }
  __syncthreads();
  if (tid < R) {
    __threadfence_system();
    storeReleaseSys(countFlag(peerBase[tid], c.wl, c.rank), seq);
    if (!waitFlag(countFlag(peerBase[c.rank], c.wl, tid), seq, c, kPhaseCounts, tid)) abortS = 1;
  }
  __syncthreads();

  const volatile int* cnt =
      reinterpret_cast<const volatile int*>(peerBase[c.rank] + c.wl.counts) + parity * kMaxRanks * c.wl.countStride;
  if (tid < R) recvRows[tid] = cnt[tid * c.wl.countStride];
  for (int le = tid; le < Le; le += kLayoutThreads) {
    int run = 0;
    for (int s = 0; s < R; ++s) {
      r.srcExpertOff[s * Le + le] = run;
      run += cnt[s * c.wl.countStride + 1 + le];
    }
    r.expertCount[le] = run;
  }
  __syncthreads();
  if (tid == 0) {
    int base = 0;
    for (int s = 0; s < R; ++s) {
      r.recvBase[s] = base;
      base += recvRows[s];
    }
    r.recvBase[R] = base;
    int start = 0;
    for (int le = 0; le < Le; ++le) {
      r.expertStart[le] = start;
      const int n = r.expertCount[le];
      start += r.expanded ? (n + r.alignment - 1) / r.alignment * r.alignment : n;
    }
    r.expertStart[Le] = start;
    r.totals[0] = base;
    r.totals[1] = r.expanded ? start : base;

    int badToken = -1, badSlot = -1, badKind = 0;
    long long badValue = 0;
    if (badKey != INT_MAX) {
      badToken = badKey / kMaxTopk;
      badSlot = badKey % kMaxTopk;
      badValue = loadId(a, badToken * K + badSlot);
      badKind = (badValue < -1 || badValue >= E) ? 1 : 2;
    }
    if (a.summary) {
      LayoutSummary* s = a.summary;
      s->numRows = abortS ? -1 : r.totals[1];
      s->numTokens = abortS ? -1 : base;
      for (int le = 0; le < Le; ++le) s->expertCounts[le] = r.expertCount[le];
      s->badToken = badToken;
      s->badSlot = badSlot;
      s->badValue = badValue;
      s->badKind = badKind;
      __threadfence_system();
    } else if (badKind) {
      recordError(c.error, /*ncclInvalidArgument*/ 4, kPhaseBadExpertId, -1, c.rank, badToken, badValue);
    }
    c.state->layoutSeq = seq;
  }
}

}  // namespace

cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream) {
  const size_t smem = layoutSmemBytes(args.c.numExperts);
  cudaError_t err = cudaFuncSetAttribute(layoutKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  layoutKernel<<<1, kLayoutThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
