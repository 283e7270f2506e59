// Layout kernel of ncclEpDispatchLayout: validates top-k ids, computes the route, and exchanges
// counts with all ranks over NVLink.
//
// CTA c takes tokens [512c, 512c + 512). Each warp builds one 32-bit lane mask per expert and per
// destination rank in shared memory; a token's chunk-local position is the count in earlier warps
// plus popc(mask & lanes below it), so rows keep source-token order (deterministic, as the CPU
// reference in host/ref specifies). The last CTA to finish turns the per-chunk totals into chunk
// bases, all-gathers every rank's per-destination row counts and per-expert counts, and derives
// where this rank's rows go in each destination (sendBase) and where received rows land.
#include <nccl_device.h>

#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/sync.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = kLayoutChunk / 32;

// Per-warp expert masks and bases, then the chunk's ids [K][512].
size_t layoutSmemBytes(int numExperts, int topk) {
  return (size_t(2) * kWarps * numExperts + size_t(topk) * kLayoutChunk) * sizeof(uint32_t);
}

__device__ __forceinline__ long long loadId(const LayoutArgs& a, int i) {
  return a.idxIs64 ? static_cast<const long long*>(a.topkIdx)[i] : static_cast<const int*>(a.topkIdx)[i];
}

// Chunk pass: validation, chunk-local positions, chunk totals (stored as chunk bases' inputs).
__device__ void chunkPass(const LayoutArgs& a, uint32_t* expertMask, uint32_t* expertBase, int* ids, int* badKey) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, K = c.topk, E = c.numExperts, Le = c.localExperts;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t lanesBelow = (1u << lane) - 1u;
  __shared__ uint32_t rankMask[kWarps][kMaxRanks];

  for (int i = tid; i < kWarps * E; i += kLayoutChunk) expertMask[i] = 0;
  __syncthreads();
  const int t = blockIdx.x * kLayoutChunk + tid;
  const bool valid = t < a.numTokens;
  uint32_t destMask = 0;
  if (valid) {
    for (int k = 0; k < K; ++k) {
      long long e = loadId(a, t * K + k);
      bool bad = e < -1 || e >= E;
      // A repeated id finds its own lane bit already set by the earlier slot.
      if (!bad && e >= 0) bad = (atomicOr(&expertMask[warp * E + e], 1u << lane) >> lane) & 1u;
      if (bad) {
        atomicMin(badKey, t * kMaxTopk + k);
        e = -1;
      }
      r.tokExpert[t * K + k] = int(e);
      ids[k * kLayoutChunk + tid] = int(e);
      if (e >= 0) destMask |= 1u << (e / Le);
    }
  }
  for (int d = 0; d < R; ++d) {
    const uint32_t b = __ballot_sync(0xffffffffu, (destMask >> d) & 1u);
    if (lane == 0) rankMask[warp][d] = b;
  }
  __syncthreads();
  int* chunkExpert = r.chunkExpertBase + blockIdx.x * E;  // chunk totals for now
  for (int e = tid; e < E; e += kLayoutChunk) {
    int run = 0;
    for (int w = 0; w < kWarps; ++w) {
      expertBase[w * E + e] = run;
      run += __popc(expertMask[w * E + e]);
    }
    chunkExpert[e] = run;
  }
  if (tid < R) {
    int run = 0;
    for (int w = 0; w < kWarps; ++w) run += __popc(rankMask[w][tid]);
    r.chunkRankBase[blockIdx.x * R + tid] = run;
  }
  __syncthreads();
  if (valid) {
    for (int d = 0; d < R; ++d) {
      int slot = -1;
      if ((destMask >> d) & 1u) {
        slot = __popc(rankMask[warp][d] & lanesBelow);
        for (int w = 0; w < warp; ++w) slot += __popc(rankMask[w][d]);
      }
      r.tokSlot[t * R + d] = slot;
    }
    for (int k = 0; k < K; ++k) {
      const int e = ids[k * kLayoutChunk + tid];
      r.tokExpertPos[t * K + k] =
          e >= 0 ? int(expertBase[warp * E + e] + __popc(expertMask[warp * E + e] & lanesBelow)) : -1;
    }
  }
}

// Last CTA: chunk bases, count all-gather, receive-side offsets.
__device__ void finalize(const LayoutArgs& a, int* expertTotal, int badKeyValue) {
  const Common& c = a.c;
  const Route& r = a.r;
  const int R = c.nRanks, E = c.numExperts, Le = c.localExperts, tid = threadIdx.x;
  const int chunks = gridDim.x;
  __shared__ char* peerBase[kMaxRanks];
  __shared__ int rankTotal[kMaxRanks];
  __shared__ uint32_t seqS;
  __shared__ int abortS;
  if (tid < R) peerBase[tid] = static_cast<char*>(ncclGetLsaPointer(c.window, 0, tid));
  if (tid == 0) {
    seqS = *reinterpret_cast<volatile uint32_t*>(&c.state->layoutSeq) + 1;
    abortS = 0;
    r.totals[3] = 0;  // chunk counter, ready for the next layout
  }
  for (int e = tid; e < E; e += kLayoutChunk) {
    int run = 0;
    for (int ch = 0; ch < chunks; ++ch) {
      const int n = r.chunkExpertBase[ch * E + e];
      r.chunkExpertBase[ch * E + e] = run;
      run += n;
    }
    expertTotal[e] = run;
  }
  if (tid < R) {
    int run = 0;
    for (int ch = 0; ch < chunks; ++ch) {
      const int n = r.chunkRankBase[ch * R + tid];
      r.chunkRankBase[ch * R + tid] = run;
      run += n;
    }
    rankTotal[tid] = run;
  }
  __syncthreads();
  const uint32_t seq = seqS;
  const int parity = seq & 1;
  const int stride = c.wl.countStride;
  // To every rank d: [rows this rank sends to each rank (kMaxRanks)] + [counts of d's experts].
  const int entry = kMaxRanks + Le;
  for (int i = tid; i < R * entry; i += kLayoutChunk) {
    const int d = i / entry, j = i % entry;
    int* dst = reinterpret_cast<int*>(peerBase[d] + c.wl.counts) + (parity * kMaxRanks + c.rank) * stride + j;
    const int v = j < kMaxRanks ? (j < R ? rankTotal[j] : 0) : expertTotal[d * Le + j - kMaxRanks];
    *reinterpret_cast<volatile int*>(dst) = v;
  }
  __syncthreads();
  if (tid < R) {
    __threadfence_system();
    storeReleaseSys(countFlag(peerBase[tid], c.wl, c.rank), seq);
    if (!waitFlag(countFlag(peerBase[c.rank], c.wl, tid), seq, c, kPhaseCounts, tid)) abortS = 1;
  }
  __syncthreads();
  const volatile int* cnt =
      reinterpret_cast<const volatile int*>(peerBase[c.rank] + c.wl.counts) + parity * kMaxRanks * stride;
  if (tid < R) {  // where this rank's rows start in rank `tid`'s receive arrays
    int base = 0;
    for (int s = 0; s < c.rank; ++s) base += cnt[s * stride + tid];
    r.sendBase[tid] = base;
  }
  int* count = expertTotal;  // reuse: this rank's per-local-expert received rows
  __syncthreads();
  for (int le = tid; le < Le; le += kLayoutChunk) {
    int run = 0;
    for (int s = 0; s < R; ++s) {
      r.srcExpertOff[s * Le + le] = run;
      run += cnt[s * stride + kMaxRanks + le];
    }
    r.expertCount[le] = run;
    count[le] = run;
  }
  __syncthreads();
  if (tid == 0) {
    int base = 0;
    for (int s = 0; s < R; ++s) {
      r.recvBase[s] = base;
      base += cnt[s * stride + c.rank];
    }
    r.recvBase[R] = base;
    int start = 0;
    for (int le = 0; le < Le; ++le) {  // shared-memory prefix: a few cycles per expert
      const int n = count[le];
      count[le] = start;
      start += r.expanded ? (n + r.alignment - 1) / r.alignment * r.alignment : n;
    }
    count[Le] = start;
    r.totals[0] = base;
    r.totals[1] = r.expanded ? start : base;
    r.totals[2] = a.numTokens;
  }
  __syncthreads();
  for (int le = tid; le <= Le; le += kLayoutChunk) r.expertStart[le] = count[le];
  if (a.summary)
    for (int le = tid; le < Le; le += kLayoutChunk) a.summary->expertCounts[le] = r.expertCount[le];
  if (tid == 0) {
    const int base = r.totals[0];
    int badToken = -1, badSlot = -1, badKind = 0;
    long long badValue = 0;
    if (badKeyValue != 0x7fffffff) {
      badToken = badKeyValue / kMaxTopk;
      badSlot = badKeyValue % kMaxTopk;
      badValue = loadId(a, badToken * c.topk + badSlot);
      badKind = (badValue < -1 || badValue >= E) ? 1 : 2;
    }
    if (a.summary) {
      LayoutSummary* s = a.summary;
      s->numRows = abortS ? -1 : r.totals[1];
      s->numTokens = abortS ? -1 : base;
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

__global__ void __launch_bounds__(kLayoutChunk, 1) layoutKernel(const LayoutArgs a, int* badKeys) {
  extern __shared__ uint32_t smem[];
  uint32_t* expertMask = smem;                                   // [warp][E]
  uint32_t* expertBase = expertMask + kWarps * a.c.numExperts;   // [warp][E]
  int* ids = reinterpret_cast<int*>(expertBase + kWarps * a.c.numExperts);  // [K][512]
  __shared__ int badKey;
  __shared__ bool last;
  if (threadIdx.x == 0) badKey = 0x7fffffff;
  __syncthreads();
  chunkPass(a, expertMask, expertBase, ids, &badKey);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(badKeys, badKey);
    __threadfence();
    last = atomicAdd(&a.r.totals[3], 1) == int(gridDim.x) - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) badKey = atomicExch(badKeys, 0x7fffffff);  // read and re-arm for the next layout
  __syncthreads();
  finalize(a, reinterpret_cast<int*>(smem), badKey);  // the masks are no longer needed
}

}  // namespace

cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream) {
  const size_t smem = layoutSmemBytes(args.c.numExperts, args.c.topk);
  cudaError_t err = cudaFuncSetAttribute(layoutKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const int chunks = args.numTokens > 0 ? (args.numTokens + kLayoutChunk - 1) / kLayoutChunk : 1;
  // totals[3] counts finished chunks; badKeys sits in totals' spare slot area (see Route::totals).
  layoutKernel<<<chunks, kLayoutChunk, smem, stream>>>(args, args.r.totals + 4);
  return cudaGetLastError();
}

}  // namespace epx::dev
