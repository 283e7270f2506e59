// Low-latency combine: one kernel, a send half and a receive half (either or both per launch).
// Send: every expert output row goes back to its source rank, into the row (expert, slot) of the
// source's combine receive bank: NVLink peers by stores, network peers from the staging rows (or
// straight from the input when it is the window's combineSend region: zero-copy) with one GIN put
// per (local expert, source); the last CTA then adds 1 to each source's arrival word (after the
// rows: LSA release add; GIN signal on the puts' context). Receive: wait for every source, then per
// token sum weight[k] * row(expert of slot k) over k = 0..K-1 in FP32 (masked slots add nothing),
// BF16 out, and free the bank for the expert ranks.
#include <nccl_device.h>

#include "epx/device/launch.h"
#include "epx/device/ll_session.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * kWarp;
constexpr uint32_t kFull = 0xffffffffu;

__device__ void sendHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, int* leStart) {
  const Common& c = a.c;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int R = c.nRanks, Le = c.localExperts, rowsPer = l.rowsPerExpert();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool gin = tr.hasGin();
  // Staging rows may still be read by this rank's earlier GIN puts (any CTA posted them).
  if (gin && !tr.completeGinCounters(0, gridDim.x)) ses.abort = true;
  ses.waitFree(kLlCombine, seq, kPhaseLlCombineFree);
  if (warp == 0) warpExclusiveScan(a.r.expertCount, leStart, Le, lane);
  __syncthreads();
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
        dst = tr.localBase() + l.combineSendRow(le, j);
      else
        continue;
      warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x) + row * l.rowBytes, int(l.rowBytes), lane);
    }
  }
  if (!LlSession::lastCta(&a.g.state->sentCtas[kLlCombine])) return;
  if (!ses.abort && !timedOut(c.error)) {
    for (int p = threadIdx.x; p < R; p += kThreads) {
      const uint32_t id = l.combineArriveWord(bank, c.rank);
      if (tr.lsa(p)) {
        tr.addLsaWord(p, id, 1);
        continue;
      }
      const int ctx = dataContextOf(p, c.ginContexts);
      for (int le = 0; le < Le; ++le) {
        const int first = a.r.srcStart[le * (R + 1) + p], n = a.r.srcStart[le * (R + 1) + p + 1] - first;
        if (n > 0)
          tr.put(p, l.combineRecvRow(bank, c.rank * Le + le, 0), l.combineSendRow(le, first), uint64_t(n) * l.rowBytes,
                 ctx);
      }
      tr.putSignalWord(p, 0, 0, 0, id, 1, ctx);  // after the puts on ctx
    }
  }
  if (threadIdx.x == 0) {
    a.g.state->seq[kLlCombine] = seq;
    a.r.seq[kLlCombine] = seq;
    __threadfence();
  }
}

__device__ void recvHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, const int4* (&rows)[kWarps][kMaxTopk],
                         float (&wts)[kWarps][kMaxTopk]) {
  const Common& c = a.c;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int K = c.topk, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  bool ok = true;
  for (int p = threadIdx.x; p < c.nRanks && ok; p += kThreads)
    ok = tr.waitWord(l.combineArriveWord(bank, p), p, llArriveTarget(seq), kPhaseLlCombineData);
  ses.abort = __syncthreads_or(!ok) != 0 || ses.abort;
  if (!ses.abort) {
    const int groups = c.hidden / 8;
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
        rows[warp][j] = reinterpret_cast<const int4*>(tr.localBase() + l.combineRecvRow(bank, e, slot));
        wts[warp][j] = w;
      }
      __syncwarp();
      const int n = __popc(valid);
      int4* out = reinterpret_cast<int4*>(a.out + size_t(t) * c.hidden);
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
  if (!LlSession::lastCta(&a.g.state->recvCtas[kLlCombine])) return;
  if (ses.abort || timedOut(c.error)) return;
  ses.freeBank(kLlCombine, seq);
}

__global__ void __launch_bounds__(kThreads, 1) llCombineKernel(const __grid_constant__ LlCombineArgs a) {
  extern __shared__ int smem[];
  __shared__ const int4* rows[kWarps][kMaxTopk];
  __shared__ float wts[kWarps][kMaxTopk];
  Transport tr(a.c);
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
  const size_t smem = size_t(args.c.localExperts + 1) * sizeof(int);  // <= 4 KiB: no opt-in needed
  llCombineKernel<<<nCtas, kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
