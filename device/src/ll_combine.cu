// Low-latency combine: one kernel, a send half and a receive half (either or both per launch).
// Send: every expert output row goes back to its source rank. NVLink sources: stored into the row
// (expert, slot) of the source's combine receive bank, then the last CTA adds 1 to the source's
// arrival word (release add). Network sources: the rows are gathered into the staging region packed
// by source (local expert, then slot: the source's own dispatch staging order) and the last CTA
// returns them with one put-with-signal per source into this rank's landing area there (the
// signal adds 1 to the arrival word after the rows). Zero-copy input (the window's combineSend
// region, dispatch output layout) is put from where it is, one put per (local expert, source) with
// rows, then the signal. Receive: wait for every source, then per token sum weight[k] * row(expert
// of slot k) over k = 0..K-1 in FP32 (masked slots add nothing), BF16 out, and free the bank for
// the expert ranks.
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

struct SendSmem {  // dynamic shared memory of the send half
  int* leStart;    // [Le + 1] exclusive prefix of the rows per local expert
  int* leOff;      // [Le * nRanks] GIN source p: rows of (local expert, p) before local expert le's
  int* srcRows;    // [nRanks] GIN source p: rows for it (0 for NVLink sources)
  int* srcBase;    // [nRanks + 1] exclusive prefix of srcRows: first packed staging row per source
  __device__ SendSmem(int* s, int Le, int R) : leStart(s), leOff(s + Le + 1), srcRows(leOff + Le * R), srcBase(srcRows + R) {}
  __host__ __device__ static size_t bytes(int Le, int R) { return (size_t(Le) + 1 + size_t(Le) * R + 2 * size_t(R) + 1) * sizeof(int); }
};

__device__ void sendHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, int* smem) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int R = c.nRanks, Le = sh.localExperts, rowsPer = l.rowsPerExpert();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool gin = tr.hasGin();
  // Staging rows may still be read by this rank's earlier GIN puts (any CTA posted them).
  if (gin && !tr.completeGinCounters(tr.counterBase(), gridDim.x)) ses.abort = true;
  ses.waitFree(kLlCombine, seq, kPhaseLlCombineFree);
  SendSmem sm(smem, Le, R);
  const int* srcStart = a.r.srcStart;  // [Le][R + 1]
  for (int p = threadIdx.x; p < R; p += kThreads) {
    int run = 0;
    for (int le = 0; le < Le && !tr.lsa(p); ++le) {
      sm.leOff[le * R + p] = run;
      run += srcStart[le * (R + 1) + p + 1] - srcStart[le * (R + 1) + p];
    }
    sm.srcRows[p] = run;
  }
  __syncthreads();
  if (warp == 0) warpExclusiveScan(a.r.expertCount, sm.leStart, Le, lane);
  if (warp == 1) warpExclusiveScan(sm.srcRows, sm.srcBase, R, lane);
  __syncthreads();
  const int* leStart = sm.leStart;
  if (!ses.abort) {
    const int total = leStart[Le];
    for (int n = blockIdx.x * kWarps + warp; n < total; n += gridDim.x * kWarps) {
      const int le = sourceOfRow(leStart, Le, n);
      const int j = n - leStart[le];
      const size_t row = size_t(le) * rowsPer + j;
      const int src = a.r.rowSrc[row * 2], slot = a.r.rowSrc[row * 2 + 1];
      char* dst;
      if (tr.lsa(src))
        dst = tr.lsaBase(src) + l.combineRecvRow(bank, c.rank * Le + le, slot);
      else if (!a.zeroCopy)
        dst = tr.localBase() + l.combineStageRow(sm.srcBase[src] + sm.leOff[le * R + src] + slot);
      else
        continue;
      warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x) + row * l.rowBytes, int(l.rowBytes), lane);
    }
  }
  if (!lastCtaOf(&a.g.state->sentCtas[kLlCombine])) return;
  if (!ses.abort && !timedOut(c.error)) {
    for (int p = threadIdx.x; p < R; p += kThreads) {
      const uint32_t id = l.combineArriveWord(bank, c.rank);
      if (tr.lsa(p)) {
        tr.addLsaWord(p, id, 1);
        continue;
      }
      const int ctx = dataContextOf(p, c.ginContexts);
      if (!a.zeroCopy) {  // bytes 0: the signal alone
        tr.putSignalWord(p, l.ginCombineRecvRow(bank, c.rank, 0), l.combineStageRow(sm.srcBase[p]),
                         uint64_t(sm.srcRows[p]) * l.rowBytes, id, 1, ctx);
        continue;
      }
      for (int le = 0; le < Le; ++le) {
        const int first = srcStart[le * (R + 1) + p], n = srcStart[le * (R + 1) + p + 1] - first;
        tr.put(p, l.ginCombineRecvRow(bank, c.rank, sm.leOff[le * R + p]), l.combineSendRow(le, first),
               uint64_t(n) * l.rowBytes, ctx);  // n == 0: nothing posted
      }
      tr.putSignalWord(p, 0, 0, 0, id, 1, ctx);  // after the puts on ctx
    }
  }
  if (threadIdx.x == 0) {  // this send half is done: the group's count and the handle's
    publishSeq(&a.g.state->seq[kLlCombine], seq);
    publishSeq(&a.r.seq[kLlCombine], seq);
  }
}

__device__ void recvHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, const int4* (&rows)[kWarps][kMaxTopk],
                         float (&wts)[kWarps][kMaxTopk]) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int K = sh.topk, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  bool ok = true;
  for (int p = threadIdx.x; p < c.nRanks && ok; p += kThreads)
    ok = tr.waitWord(l.combineArriveWord(bank, p), p, llArriveTarget(seq), kPhaseLlCombineData);
  ses.abort = __syncthreads_or(!ok) != 0 || ses.abort;
  if (!ses.abort) {
    const int groups = sh.hidden / 8;
    for (int t = blockIdx.x * kWarps + warp; t < a.numTokens; t += gridDim.x * kWarps) {
      int e = -1, slot = -1;
      float w = 0.f;
      if (lane < K) {
        e = a.r.tokExpert[size_t(t) * K + lane];
        slot = a.r.tokSlot[size_t(t) * K + lane];
        if (e >= 0) w = a.topkWeights[size_t(t) * K + lane];
      }
      const uint32_t valid = __ballot_sync(kFull, e >= 0);
      if (e >= 0) {
        const int j = __popc(valid & ((1u << lane) - 1u));  // slot order kept
        const int r = e / sh.localExperts;  // a GIN expert rank returned our rows in our staging order
        rows[warp][j] = reinterpret_cast<const int4*>(
            tr.localBase() + (tr.lsa(r) ? l.combineRecvRow(bank, e, slot)
                                        : l.ginCombineRecvRow(bank, r, a.r.stageStart[e] - a.r.stageStart[r * sh.localExperts] + slot)));
        wts[warp][j] = w;
      }
      __syncwarp();
      const int n = __popc(valid);
      int4* out = reinterpret_cast<int4*>(a.out + size_t(t) * sh.hidden);
      for (int g = lane; g < groups; g += kWarp) {
        float acc[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[q] = 0.f;
        for (int j = 0; j < n; ++j) {
          const int4 v = ldVolatile(rows[warp][j] + g);
          const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
          const float wj = wts[warp][j];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 f = __bfloat1622float2(h[q]);
            acc[2 * q] = __fadd_rn(acc[2 * q], __fmul_rn(wj, f.x));
            acc[2 * q + 1] = __fadd_rn(acc[2 * q + 1], __fmul_rn(wj, f.y));
          }
        }
        stNa(out + g, packBf16x8(acc));
      }
      __syncwarp();
    }
  }
  if (!lastCtaOf(&a.g.state->recvCtas[kLlCombine])) return;
  if (ses.abort || timedOut(c.error)) return;
  ses.freeBank(kLlCombine, seq);
}

__global__ void __launch_bounds__(kThreads, 1) llCombineKernel(const __grid_constant__ LlCombineArgs a) {
  extern __shared__ int smem[];
  __shared__ const int4* rows[kWarps][kMaxTopk];
  __shared__ float wts[kWarps][kMaxTopk];
  Transport tr(a.link, llGinCounterBase(kLlCombine, int(gridDim.x)));
  LlSession ses(tr, a.g);
  uint32_t seq = 0;
  if (a.halves & kLlHalfSend) {
    seq = ses.sendSeq(kLlCombine);
    sendHalf(a, ses, seq, smem);
  } else {
    seq = LlSession::recvSeq(a.r, kLlCombine);
  }
  if (a.halves & kLlHalfRecv) {
    __syncthreads();
    recvHalf(a, ses, seq, rows, wts);
  }
}

}  // namespace

cudaError_t launchLlCombine(const LlCombineArgs& args, int nCtas, cudaStream_t stream) {
  // Le + 1 + E + 2 * nRanks + 1 ints (E <= kMaxExperts, nRanks <= E): under 48 KiB, no opt-in needed
  const size_t smem = SendSmem::bytes(args.shape.localExperts, args.link.nRanks);
  llCombineKernel<<<nCtas, kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
