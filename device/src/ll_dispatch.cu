// Low-latency dispatch: one kernel, a send half and a receive half (either or both per launch).
// Send: count the (token, slot) pairs per expert (every CTA counts all tokens: no grid sync), give
// each of this CTA's pairs its slot among this rank's tokens of that expert (token order), and write
// each token's row once per selected expert as a message (payload BF16 or FP8 + scales, meta):
// straight into NVLink peers' receive rows, or into the staging rows of network peers. The last
// CTA then announces the rows: to an NVLink destination it adds (rows + 1) to the count word of
// (expert, this rank) by a release add; to a network destination it posts one GIN put-with-signal
// of the per-local-expert counts (header) and all the destination's staged rows (contiguous:
// staging is in global expert order, each destination's header right before its rows) into this
// rank's landing area there — one GIN operation per destination rank. Receive: wait for every (local expert, source) count (NVLink:
// count word; network: the source's header, once its arrival word says this op landed), copy the
// rows into the expert-major output in (source, slot) order, and free the bank for the sources.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/launch.h"
#include "epx/device/ll_session.cuh"
#include "epx/device/warp.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * kWarp;
constexpr uint32_t kFull = 0xffffffffu;

__device__ __forceinline__ long long loadId(const LlDispatchArgs& a, int t, int k) {
  const size_t i = size_t(t) * a.shape.topk + k;
  return a.idxIs64 ? static_cast<const long long*>(a.topkIdx)[i] : static_cast<const int*>(a.topkIdx)[i];
}

// Global expert of slot `lane` of token t, or -1: masked (-1), out of range, or repeating a lower
// slot of the token (the first occurrence is kept). Every lane of the warp; lanes >= K get -1.
__device__ __forceinline__ int slotExpert(const LlDispatchArgs& a, int t, int lane, long long* raw) {
  const long long v = lane < a.shape.topk ? loadId(a, t, lane) : -1;
  *raw = v;
  int e = v >= 0 && v < a.shape.numExperts ? int(v) : -1;
  const uint32_t same = __match_any_sync(kFull, e);
  if (e >= 0 && (same & ((1u << lane) - 1u))) e = -1;
  return e;
}

// The same rule for one thread that holds a whole token (the counting pass).
__device__ __forceinline__ void countToken(const LlDispatchArgs& a, int t, int* hist) {
  int seen[kMaxTopk];
#pragma unroll
  for (int k = 0; k < kMaxTopk; ++k) {
    seen[k] = -1;
    if (k < a.shape.topk) {
      const long long v = loadId(a, t, k);
      int e = v >= 0 && v < a.shape.numExperts ? int(v) : -1;
#pragma unroll
      for (int j = 0; j < k; ++j)
        if (seen[j] == e) e = -1;
      seen[k] = e;
      if (e >= 0) atomicAdd(&hist[e], 1);
    }
  }
}

struct SendSmem {  // dynamic shared memory of the send half, E = numExperts
  int* before;     // [E] pairs of tokens before this CTA's first token
  int* total;      // [E] pairs of all tokens
  int* stage;      // [E + 1] exclusive prefix of total: first staging row of each expert
  int* warpStart;  // [kWarps][E] first slot of each warp's tokens
  __device__ explicit SendSmem(int* s, int E) : before(s), total(s + E), stage(s + 2 * E), warpStart(s + 3 * E + 1) {}
  __host__ __device__ static size_t bytes(int E) { return (size_t(3 + kWarps) * E + 1) * sizeof(int); }
};

struct RecvSmem {   // dynamic shared memory of the receive half
  int* count;       // [Le * nRanks] rows from each (local expert, source)
  int* ginOff;      // [Le * nRanks] GIN source: first message of (local expert, source) in its landing area
  int* srcStart;    // [Le][nRanks + 1] exclusive prefix over sources
  int* leCount;     // [Le]
  int* leStart;     // [Le + 1] exclusive prefix over local experts (flattened rows)
  __device__ RecvSmem(int* s, int Le, int R)
      : count(s), ginOff(s + Le * R), srcStart(s + 2 * Le * R), leCount(srcStart + Le * (R + 1)), leStart(leCount + Le) {}
  __host__ __device__ static size_t bytes(int Le, int R) { return (2 * size_t(Le) * R + size_t(Le) * (R + 1) + 2 * Le + 1) * sizeof(int); }
};

// Writes token t's row as a message to each of n destinations (dsts[j]: message base): payload
// (BF16 copy, or FP8 cast with one scale per 128 channels) and scales. Every lane of the warp.
__device__ void sendRow(const LlDispatchArgs& a, const LlLayout& l, int t, char* const* dsts, int n, int lane) {
  const int vecs = a.shape.hidden / 8;  // 16-byte BF16 vectors of the row
  const int4* src = reinterpret_cast<const int4*>(a.x + size_t(t) * a.shape.hidden);
  const bool fp8 = a.fp8 != 0;
  const uint32_t scaleOff = l.payloadBytes(true);
  for (int base = 0; base < vecs; base += kWarp) {
    const int i = base + lane;
    const bool active = i < vecs;  // hidden % 128 == 0: a 16-lane block is all active or all not
    const int4 v = active ? ldNc(src + i) : make_int4(0, 0, 0, 0);
    if (!fp8) {
      if (active)
        for (int j = 0; j < n; ++j) stNa(reinterpret_cast<int4*>(dsts[j]) + i, v);
      continue;
    }
    float m = absMax8(v);
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
    const float scale = llFp8Scale(m, a.roundScale != 0);
    const uint2 q = castFp8x8(v, __frcp_rn(scale));
    if (!active) continue;
    for (int j = 0; j < n; ++j) {
      reinterpret_cast<uint2*>(dsts[j])[i] = q;
      if ((lane & 15) == 0) reinterpret_cast<float*>(dsts[j] + scaleOff)[i / 16] = scale;
    }
  }
}

__device__ void sendHalf(const LlDispatchArgs& a, LlSession& ses, uint32_t seq, int* smem, char* (&dsts)[kWarps][kMaxTopk]) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int E = sh.numExperts, Le = sh.localExperts, K = sh.topk, T = a.numTokens;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool fp8 = a.fp8 != 0, gin = tr.hasGin();
  SendSmem sm(smem, E);
  // Staging rows may still be read by this rank's earlier GIN puts (any CTA posted them).
  if (gin && !tr.completeGinCounters(tr.counterBase(), gridDim.x)) ses.abort = true;
  ses.waitFree(kLlDispatch, seq, kPhaseLlDispatchFree);

  const Share mine = shareOf(T, gridDim.x, blockIdx.x);
  for (int e = threadIdx.x; e < E; e += kThreads) sm.before[e] = sm.total[e] = 0;
  for (int i = threadIdx.x; i < kWarps * E; i += kThreads) sm.warpStart[i] = 0;
  __syncthreads();
  // Pass 1: pairs per expert of all tokens, and of the tokens before this CTA's.
  for (int t = threadIdx.x; t < T; t += kThreads) {
    countToken(a, t, sm.total);
    if (t < mine.begin) countToken(a, t, sm.before);
  }
  // Pass 2: each warp's contiguous part of this CTA's tokens, in token order: slot within the warp.
  const Share part = shareOf(mine.end - mine.begin, kWarps, warp);
  int* hist = sm.warpStart + warp * E;
  for (int t = mine.begin + part.begin; t < mine.begin + part.end; ++t) {
    long long raw;
    const int e = slotExpert(a, t, lane, &raw);
    if (lane < K && e < 0 && raw != -1) recordBadId(c.error, c.rank, t, raw);
    int rel = -1;
    if (e >= 0) rel = hist[e]++;  // lanes hold distinct experts
    __syncwarp();
    if (lane < K) {
      a.r.tokExpert[size_t(t) * K + lane] = e;
      a.r.tokSlot[size_t(t) * K + lane] = rel;
    }
  }
  __syncthreads();
  // Slot bases: every warp's part starts after the earlier warps' and the earlier CTAs' pairs.
  for (int e = threadIdx.x; e < E; e += kThreads) {
    int run = sm.before[e];
    for (int w = 0; w < kWarps; ++w) {
      const int h = sm.warpStart[w * E + e];
      sm.warpStart[w * E + e] = run;
      run += h;
    }
  }
  if (gin && warp == 0) warpExclusiveScan(sm.total, sm.stage, E, lane);
  __syncthreads();
  // Combine finds a GIN expert's returned rows in this staging order.
  if (gin && blockIdx.x == 0)
    for (int e = threadIdx.x; e <= E; e += kThreads) a.r.stageStart[e] = sm.stage[e];
  // Pass 3: messages.
  if (!ses.abort) {
    for (int t = mine.begin + part.begin; t < mine.begin + part.end; ++t) {
      int e = -1, slot = -1;
      if (lane < K) {
        e = a.r.tokExpert[size_t(t) * K + lane];
        if (e >= 0) {
          slot = sm.warpStart[warp * E + e] + a.r.tokSlot[size_t(t) * K + lane];
          a.r.tokSlot[size_t(t) * K + lane] = slot;
        }
      }
      const uint32_t valid = __ballot_sync(kFull, e >= 0);
      if (e >= 0) {
        const int d = e / Le;
        char* msg = tr.lsa(d) ? tr.lsaBase(d) + l.recvMsg(bank, e % Le, c.rank, slot, fp8)
                              : tr.localBase() + l.stageMsg(sm.stage[e] + slot, d, fp8);
        dsts[warp][__popc(valid & ((1u << lane) - 1u))] = msg;
        int* meta = reinterpret_cast<int*>(msg + l.metaOffset(fp8));
        meta[0] = t;
        meta[1] = lane;
      }
      __syncwarp();
      sendRow(a, l, t, dsts[warp], __popc(valid), lane);
      __syncwarp();
    }
  }
  // The last CTA announces the rows, after them. LSA: (rows + 1) per expert by a release add after
  // every CTA's stores. GIN: per destination rank one put of its header and rows carrying the
  // arrival signal (applied after the data).
  if (!lastCtaOf(&a.g.state->sentCtas[kLlDispatch])) return;
  if (!ses.abort && !timedOut(c.error)) {
    for (int e = threadIdx.x; e < E; e += kThreads)
      if (tr.lsa(e / Le)) tr.addLsaWord(e / Le, l.countWord(bank, e % Le, c.rank), uint32_t(sm.total[e]) + 1);
    for (int d = threadIdx.x; d < c.nRanks && gin; d += kThreads) {
      if (tr.lsa(d)) continue;
      const int first = sm.stage[d * Le], rows = sm.stage[(d + 1) * Le] - first;
      int* hdr = reinterpret_cast<int*>(tr.localBase() + l.hdrStage(d, first, fp8));
      for (int le = 0; le < Le; ++le) hdr[le] = sm.total[d * Le + le];
      tr.putSignalWord(d, l.hdr(bank, c.rank), l.hdrStage(d, first, fp8), l.hdrBytes() + uint64_t(rows) * l.msgBytes(fp8),
                       l.dispatchArriveWord(bank, c.rank), 1, dataContextOf(d, c.ginContexts));
    }
  }
  if (threadIdx.x == 0) {  // this send half is done: the group's count and the handle's
    publishSeq(&a.g.state->seq[kLlDispatch], seq);
    publishSeq(&a.r.seq[kLlDispatch], seq);
  }
}

__device__ void recvHalf(const LlDispatchArgs& a, LlSession& ses, uint32_t seq, int* smem) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int R = c.nRanks, Le = sh.localExperts, E = sh.numExperts;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool fp8 = a.fp8 != 0;
  const int rowsPer = l.rowsPerExpert();
  RecvSmem sm(smem, Le, R);
  uint32_t* seen = a.g.countSeen + size_t(bank) * E;
  bool ok = true;
  for (int i = threadIdx.x; i < E; i += kThreads) {
    const int le = i / R, src = i % R;
    int n = 0;
    if (tr.lsa(src)) {
      const uint32_t id = l.countWord(bank, le, src), prev = seen[i];
      if (ok && !ses.abort && tr.waitWord(id, src, prev + 1, kPhaseLlDispatchData))
        n = int(tr.readWord(id, src) - prev - 1);
      else
        ok = false;
    } else if (ok && !ses.abort &&
               tr.waitWord(l.dispatchArriveWord(bank, src), src, llArriveTarget(seq), kPhaseLlDispatchData)) {
      n = reinterpret_cast<const volatile int*>(tr.localBase() + l.hdr(bank, src))[le];
    } else {
      ok = false;
    }
    sm.count[i] = n;
  }
  ses.abort = __syncthreads_or(!ok) != 0 || ses.abort;
  // A GIN source's rows are packed by local expert in its landing area.
  for (int src = threadIdx.x; src < R; src += kThreads) {
    int run = 0;
    for (int le = 0; le < Le; ++le) {
      sm.ginOff[le * R + src] = run;
      run += sm.count[le * R + src];
    }
  }
  for (int le = warp; le < Le; le += kWarps) warpExclusiveScan(sm.count + le * R, sm.srcStart + le * (R + 1), R, lane);
  __syncthreads();
  for (int le = threadIdx.x; le < Le; le += kThreads) sm.leCount[le] = sm.srcStart[le * (R + 1) + R];
  __syncthreads();
  if (warp == 0) warpExclusiveScan(sm.leCount, sm.leStart, Le, lane);
  __syncthreads();
  if (!ses.abort) {
    const int total = sm.leStart[Le];
    const int payload = int(l.payloadBytes(fp8)), scaleWords = fp8 ? sh.hidden / kLlScaleBlock : 0;
    const int numWarps = gridDim.x * kWarps;
    for (int n = blockIdx.x * kWarps + warp; n < total; n += numWarps) {
      const int le = sourceOfRow(sm.leStart, Le, n);
      const int j = n - sm.leStart[le];
      const int* starts = sm.srcStart + le * (R + 1);
      const int src = sourceOfRow(starts, R, j);
      const int slot = j - starts[src];
      const char* msg = tr.localBase() + (tr.lsa(src) ? l.recvMsg(bank, le, src, slot, fp8)
                                                      : l.ginRecvMsg(bank, src, sm.ginOff[le * R + src] + slot, fp8));
      const size_t row = size_t(le) * rowsPer + j;
      warpCopy16<true>(a.recvX + row * payload, msg, payload, lane);
      for (int q = lane; q < scaleWords; q += kWarp)
        a.recvScales[row * scaleWords + q] = reinterpret_cast<const volatile float*>(msg + payload)[q];
      if (lane < 2) a.r.rowSrc[row * 2 + lane] = lane == 0 ? src : slot;
      if (a.recvSrcInfo && lane < 3) {
        const volatile int* meta = reinterpret_cast<const volatile int*>(msg + l.metaOffset(fp8));
        a.recvSrcInfo[row * 3 + lane] = lane == 0 ? src : meta[lane - 1];
      }
    }
    if (blockIdx.x == 0) {
      for (int le = threadIdx.x; le < Le; le += kThreads) {
        a.recvCount[le] = sm.leCount[le];
        a.r.expertCount[le] = sm.leCount[le];
      }
      for (int i = threadIdx.x; i < Le * (R + 1); i += kThreads) a.r.srcStart[i] = sm.srcStart[i];
    }
  }
  if (!lastCtaOf(&a.g.state->recvCtas[kLlDispatch])) return;
  if (ses.abort || timedOut(c.error)) return;
  for (int i = threadIdx.x; i < E; i += kThreads)
    if (tr.lsa(i % R)) seen[i] += uint32_t(sm.count[i]) + 1;
  __syncthreads();
  ses.freeBank(kLlDispatch, seq);
}

__global__ void __launch_bounds__(kThreads, 1) llDispatchKernel(const __grid_constant__ LlDispatchArgs a) {
  extern __shared__ int smem[];
  __shared__ char* dsts[kWarps][kMaxTopk];
  Transport tr(a.link, llGinCounterBase(kLlDispatch, int(gridDim.x)));
  LlSession ses(tr, a.g);
  uint32_t seq = 0;
  if (a.halves & kLlHalfSend) {
    seq = ses.sendSeq(kLlDispatch);
    sendHalf(a, ses, seq, smem, dsts);
  } else {
    seq = LlSession::recvSeq(a.r, kLlDispatch);
  }
  if (a.halves & kLlHalfRecv) {
    __syncthreads();
    recvHalf(a, ses, seq, smem);
  }
}

size_t dispatchSmem(int numExperts, int localExperts, int nRanks) {
  const size_t s = SendSmem::bytes(numExperts), r = RecvSmem::bytes(localExperts, nRanks);
  return s > r ? s : r;
}

}  // namespace

cudaError_t llPrepareKernels() {
  // The largest dynamic shared memory any LL group needs (kMaxExperts experts), set once at group
  // creation so that launches (possibly under graph capture) need no attribute call.
  return cudaFuncSetAttribute(llDispatchKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(llDispatchSmem(kMaxExperts, 1)));
}

cudaError_t launchLlDispatch(const LlDispatchArgs& args, int nCtas, cudaStream_t stream) {
  const size_t smem = dispatchSmem(args.shape.numExperts, args.shape.localExperts, args.link.nRanks);
  llDispatchKernel<<<nCtas, kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

size_t llDispatchSmem(int numExperts, int nRanks) {
  return dispatchSmem(numExperts, numExperts / nRanks, nRanks);
}

}  // namespace epx::dev
