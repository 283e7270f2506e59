// Layout kernel of ncclEpDispatchLayout: validates top-k ids, computes the route, and exchanges
// counts with all ranks through the transport layer (NVLink stores or GIN puts).
//
// CTA c takes tokens [512c, 512c + 512). Each warp builds one 32-bit lane mask per expert in shared
// memory; the mask of destination rank d is the OR of the masks of d's experts. A token's
// chunk-local position (per expert, per destination) is the count in earlier warps plus popc(mask &
// lanes below it), so rows keep source-token order (deterministic, as the CPU reference in host/ref
// specifies). The last CTA to finish turns the per-chunk totals into chunk bases, sends every rank
// its count entry (rows this rank sends to each rank, and counts of the receiver's experts), and
// derives where this rank's rows go in each destination (sendBase), where network-bound rows are
// staged (stageBase) and where received rows land.
#include <nccl_device.h>

#include "epx/device/ep_args.h"
#include "epx/device/completion.cuh"
#include "epx/device/launch.h"
#include "epx/device/warp.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = kLayoutWarps;

__device__ __forceinline__ long long loadId(const LayoutArgs& a, int i) {
  return a.idxIs64 ? static_cast<const long long*>(a.topkIdx)[i] : static_cast<const int*>(a.topkIdx)[i];
}

// Tokens of earlier warps of this chunk that go to destination (or expert) column `col`.
__device__ __forceinline__ int earlierWarps(const uint32_t* mask, int stride, int warp, int col) {
  int n = 0;
  for (int w = 0; w < warp; ++w) n += __popc(mask[w * stride + col]);
  return n;
}

// Column `col` of a [rows, stride] array of per-chunk counts becomes its exclusive prefix over the
// rows (the chunk bases); returns the column's total. Loads go out a batch at a time, not one
// round trip per chunk.
__device__ __forceinline__ int exclusiveScanColumn(int32_t* a, int stride, int col, int rows) {
  constexpr int kBatch = 8;
  int run = 0;
  for (int r0 = 0; r0 < rows; r0 += kBatch) {
    int v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) v[b] = r0 + b < rows ? a[size_t(r0 + b) * stride + col] : 0;
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (r0 + b < rows) {
        a[size_t(r0 + b) * stride + col] = run;
        run += v[b];
      }
  }
  return run;
}

// Chunk pass: validation, chunk-local positions and slots, chunk totals (inputs of chunk bases).
__device__ void chunkPass(const LayoutArgs& a, uint32_t* expertMask, uint32_t* expertBase, uint32_t* rankMask,
                          int* badKey) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int R = c.link.nRanks, K = c.shape.topk, E = c.shape.numExperts, Le = c.shape.localExperts;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t lanesBelow = (1u << lane) - 1u;

  for (int i = tid; i < kWarps * E; i += kLayoutChunk) expertMask[i] = 0;
  __syncthreads();
  const int t = blockIdx.x * kLayoutChunk + tid;
  const bool valid = t < a.numTokens;
  // The token's validated ids stay in registers (every index below is a compile-time one): the
  // slot pass reads them K + K(K-1)/2 times.
  int ids[kMaxTopk];
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) ids[k] = -1;
  if (valid) {
    long long raw[kMaxTopk];
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) raw[k] = k < K ? loadId(a, t * K + k) : -1;  // all loads in flight
#pragma unroll
    for (int k = 0; k < kMaxTopk; ++k) {
      if (k >= K) break;
      long long e = raw[k];
      bool bad = e < -1 || e >= E;
      // A repeated id finds its own lane bit already set by the earlier slot.
      if (!bad && e >= 0) bad = (atomicOr(&expertMask[warp * E + e], 1u << lane) >> lane) & 1u;
      if (bad) {
        atomicMin(badKey, t * kMaxTopk + k);
        e = -1;
      }
      ids[k] = int(e);
      r.tokExpert[t * K + k] = int(e);
    }
  }
  for (int i = tid; i < kWarps * R; i += kLayoutChunk) rankMask[i] = 0;
  __syncthreads();
  // Destination masks: a token goes to rank d when any of d's experts has its lane bit. Every
  // thread ORs a slice of one (warp, rank) pair's experts.
  const int slices = R * kWarps >= kLayoutChunk ? 1 : kLayoutChunk / (R * kWarps);
  for (int i = tid; i < kWarps * R * slices; i += kLayoutChunk) {
    const int pair = i / slices, slice = i % slices, w = pair / R, d = pair % R;
    uint32_t m = 0;
    for (int le = slice; le < Le; le += slices) m |= expertMask[w * E + d * Le + le];
    if (m) atomicOr(&rankMask[w * R + d], m);
  }
  int* chunkExpert = r.chunkExpertBase + blockIdx.x * E;  // chunk totals for now
  for (int e = tid; e < E; e += kLayoutChunk) {
    int run = 0;
    for (int w = 0; w < kWarps; ++w) {
      expertBase[w * E + e] = run;
      run += __popc(expertMask[w * E + e]);
    }
    chunkExpert[e] = run;
  }
  __syncthreads();
  for (int d = tid; d < R; d += kLayoutChunk) r.chunkRankBase[blockIdx.x * R + d] = earlierWarps(rankMask, R, kWarps, d);
  if (!valid) return;
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) {
    if (k >= K) break;
    const int e = ids[k];
    const int d = destOf(e, Le);
    bool first = e >= 0;
#pragma unroll
    for (int j = 0; j < kMaxTopk; ++j)
      if (j < k) first = first && destOf(ids[j], Le) != d;
    r.tokSlot[t * K + k] = first ? __popc(rankMask[warp * R + d] & lanesBelow) + earlierWarps(rankMask, R, warp, d) : -1;
    r.tokExpertPos[t * K + k] =
        e >= 0 ? int(expertBase[warp * E + e] + __popc(expertMask[warp * E + e] & lanesBelow)) : -1;
  }
}

// Last CTA: chunk bases, count exchange, receive-side offsets.
__device__ void finalize(const LayoutArgs& a, int* smem, int badKeyValue) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  Transport tr(c.link);
  tr.startBeacon(kBeaconLayout, nextSeq(&c.session.state->layoutSeq));
  const int R = c.link.nRanks, E = c.shape.numExperts, Le = c.shape.localExperts, tid = threadIdx.x;
  const int chunks = gridDim.x;
  int* expertTotal = smem;               // [E]
  int* rankTotal = expertTotal + E;      // [R]
  int* count = rankTotal + R;            // [Le + 1]
  __shared__ uint32_t seqS;
  __shared__ int abortS;
  if (tid == 0) {
    seqS = nextSeq(&c.session.state->layoutSeq);
    abortS = 0;
  }
  for (int e = tid; e < E; e += kLayoutChunk) expertTotal[e] = exclusiveScanColumn(r.chunkExpertBase, E, e, chunks);
  for (int d = tid; d < R; d += kLayoutChunk) {
    rankTotal[d] = exclusiveScanColumn(r.chunkRankBase, R, d, chunks);
    r.sendCount[d] = rankTotal[d];
  }
  __syncthreads();
  const uint32_t seq = seqS;
  const int parity = seq & 1;
  const int stride = c.wl.countStride;
  const int entry = R + Le;
  char* local = tr.localBase();
  // Count entry for every rank d, written into NVLink peers' windows or staged for a GIN put.
  for (size_t i = tid; i < size_t(R) * entry; i += kLayoutChunk) {
    const int d = int(i / entry), j = int(i % entry);
    const int v = j < R ? rankTotal[j] : expertTotal[d * Le + j - R];
    char* base = tr.lsa(d) ? tr.lsaBase(d) + c.wl.counts + (size_t(parity) * R + c.link.rank) * stride * 4
                           : local + c.wl.countStage + size_t(d) * stride * 4;
    reinterpret_cast<volatile int*>(base)[j] = v;
  }
  __syncthreads();
  for (int d = tid; d < R; d += kLayoutChunk) {
    if (tr.lsa(d)) {
      __threadfence_system();
      tr.publish(d, kFlagCounts, seq);
    } else {
      tr.putSignal(d, c.wl.counts + (uint64_t(parity) * R + c.link.rank) * stride * 4, c.wl.countStage + uint64_t(d) * stride * 4,
                   uint64_t(entry) * 4, kFlagCounts, 1, kControlContext);
    }
  }
  tr.mark(kStepSent);
  bool ok = true;
  for (int s = tid; s < R && ok; s += kLayoutChunk) ok = tr.wait(kFlagCounts, s, seq, kPhaseCounts);
  if (!ok) abortS = 1;
  __syncthreads();
  tr.mark(kStepArrived);
  const volatile int* cnt = reinterpret_cast<const volatile int*>(local + c.wl.counts) + size_t(parity) * R * stride;
  for (int d = tid; d < R; d += kLayoutChunk) {  // where this rank's rows start in rank d's receive arrays
    int base = 0;
    for (int s = 0; s < c.link.rank; ++s) base += cnt[s * stride + d];
    r.sendBase[d] = base;
  }
  if (c.nodeSize > 0) {  // hybrid: the runs this rank forwards to each rank of its node (protocol.h)
    const int N = c.nodeSize, nodes = R / N, myNode = nodeOfRank(c.link.rank, N);
    const auto counts = [&](int s, int d) { return int(cnt[size_t(s) * stride + d]); };
    for (int i = tid; i < nodes * N; i += kLayoutChunk) {
      const int n = i / N, d = myNode * N + i % N;
      const ForwardedRun run = n == myNode ? ForwardedRun{0, 0} : forwardedRun(counts, R, c.link.rank, n, d, N);
      r.fwdRowsBase[i] = run.base;
      r.fwdRowsTo[i] = run.rows;
    }
  }
  for (int le = tid; le < Le; le += kLayoutChunk) {
    int run = 0;
    for (int s = 0; s < R; ++s) {
      r.srcExpertOff[s * Le + le] = run;
      run += cnt[s * stride + R + le];
    }
    r.expertCount[le] = run;
    count[le] = run;
  }
  __syncthreads();
  if (tid == 0) {
    int base = 0, ginBase = 0, stage = 0;
    for (int s = 0; s < R; ++s) {
      r.recvBase[s] = base;
      r.recvGinBase[s] = ginBase;
      base += cnt[s * stride + c.link.rank];
      if (!tr.lsa(s)) ginBase += cnt[s * stride + c.link.rank];
      r.stageBase[s] = tr.lsa(s) ? -1 : stage;
      if (!tr.lsa(s)) stage += rankTotal[s];
    }
    r.recvBase[R] = base;
    r.recvGinBase[R] = ginBase;
    r.totals->recvRows = base;
    r.totals->numTokens = a.numTokens;
  }
  // Segment starts of the local experts (expanded: aligned sizes): one warp scans count[] in place
  // (count[Le]: the total).
  if (tid < kWarp) {
    const int A = r.expanded ? r.alignment : 1;
    const int start = warpExclusiveScan(count, count, Le, tid, [A](int n) { return (n + A - 1) / A * A; });
    if (tid == 0) r.totals->outRows = r.expanded ? start : r.totals->recvRows;
  }
  __syncthreads();
  for (int le = tid; le <= Le; le += kLayoutChunk) r.expertStart[le] = count[le];
  if (a.summary)
    for (int le = tid; le < Le; le += kLayoutChunk) a.summary->expertCounts[le] = r.expertCount[le];
  if (tid == 0) {
    const int base = r.totals->recvRows;
    int badToken = -1, badSlot = -1, badKind = 0;
    long long badValue = 0;
    if (badKeyValue != 0x7fffffff) {
      badToken = badKeyValue / kMaxTopk;
      badSlot = badKeyValue % kMaxTopk;
      badValue = loadId(a, badToken * c.shape.topk + badSlot);
      badKind = (badValue < -1 || badValue >= E) ? 1 : 2;
    }
    if (a.summary) {
      LayoutSummary* s = a.summary;
      s->numRows = abortS ? -1 : r.totals->outRows;
      s->numTokens = abortS ? -1 : base;
      s->badToken = badToken;
      s->badSlot = badSlot;
      s->badValue = badValue;
      s->badKind = badKind;
      __threadfence_system();
    } else if (badKind) {
      recordBadId(c.link.error, c.link.rank, badToken, badValue);
    }
    publishSeq(&c.session.state->layoutSeq, seq);
  }
  if (tr.hasGin()) tr.completeGin();  // the count stage is reused by the next layout
  tr.mark(kStepEnd);
}

__global__ void __launch_bounds__(kLayoutChunk, 1) layoutKernel(const __grid_constant__ LayoutArgs a) {
  extern __shared__ uint32_t smem[];
  const int E = a.c.shape.numExperts;
  uint32_t* expertMask = smem;                       // [warp][E]
  uint32_t* expertBase = expertMask + kWarps * E;    // [warp][E]
  uint32_t* rankMask = expertBase + kWarps * E;      // [warp][R]
  __shared__ int badKey;
  if (threadIdx.x == 0) badKey = 0x7fffffff;
  __syncthreads();
  chunkPass(a, expertMask, expertBase, rankMask, &badKey);
  __syncthreads();
  if (threadIdx.x == 0) atomicMin(&a.r.totals->firstBadKey, badKey);
  if (!lastCtaOf(&a.r.totals->chunksDone)) return;  // the last chunk's CTA finalizes (count re-armed)
  if (threadIdx.x == 0) badKey = atomicExch(&a.r.totals->firstBadKey, 0x7fffffff);  // read and re-arm
  __syncthreads();
  finalize(a, reinterpret_cast<int*>(smem), badKey);  // the masks are no longer needed
}

}  // namespace

size_t layoutSmem(int numExperts, int nRanks, int localExperts) {
  return layoutSmemBytes(numExperts, nRanks, localExperts);
}

cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream) {
  const size_t smem = layoutSmemBytes(args.c.shape.numExperts, args.c.link.nRanks, args.c.shape.localExperts);
  cudaError_t err = cudaFuncSetAttribute(layoutKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  const int chunks = args.numTokens > 0 ? (args.numTokens + kLayoutChunk - 1) / kLayoutChunk : 1;
  layoutKernel<<<chunks, kLayoutChunk, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
