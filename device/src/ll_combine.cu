// Low-latency combine: one kernel, a send half and a receive half (either or both per launch).
// Send: every expert output row goes back to its source rank, in the send rounds of the source's
// dispatch (the rows of a source's round-q tokens go back in round q: their counts came with the
// dispatch headers, roundCount). NVLink sources: stored into the row (expert, slot) of the source's
// combine receive bank, then the last CTA adds 1 to the source's arrival word (release add).
// Network sources: the rows are gathered into the staging region packed by source, then as the
// source's dispatch rows landed here (send round, local expert, slot), and the last CTA of each
// round returns that round's rows with one put-with-signal per source into this rank's landing
// area there (llRoundSignal: every op adds kLlSendRounds). Zero-copy input (the window's
// combineSend region, dispatch output layout) is put from where it is, one put per (local expert,
// source, round) with rows, then the round's signal. Receive: per send round q of this rank's
// tokens, wait for every expert rank's round q, then per token sum weight[k] * row(expert of slot
// k) over k = 0..K-1 in FP32 (masked slots add nothing), BF16 out, while later rounds are on the
// wire; the last CTA frees the bank for the expert ranks.
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

struct SendSmem {   // dynamic shared memory of the send half; i = le * nRanks + src
  int* roundStart;  // [kLlSendRounds][Le * nRanks + 1] exclusive prefix of roundCount[q] over i
  int* ginOff;      // [kLlSendRounds][Le * nRanks] GIN source: its row of (q, i)'s first in its packing
  int* srcRows;     // [nRanks][kLlSendRounds] GIN source: rows for it per round (0 for NVLink sources)
  int* srcBase;     // [nRanks + 1] exclusive prefix of a source's rows: its first packed staging row
  __device__ SendSmem(int* s, int Le, int R)
      : roundStart(s), ginOff(s + kLlSendRounds * (Le * R + 1)), srcRows(ginOff + kLlSendRounds * Le * R),
        srcBase(srcRows + R * kLlSendRounds) {}
  __host__ __device__ static size_t bytes(int Le, int R) {
    return (size_t(kLlSendRounds) * (2 * size_t(Le) * R + 1 + R) + R + 1) * sizeof(int);
  }
};

// The last CTA of round q: per network source one put of the round's rows (staged) or one per
// (local expert, source) with rows from the zero-copy input, then the round's signal.
__device__ void postRound(const LlCombineArgs& a, const LlSession& ses, const SendSmem& sm, int q, int bank) {
  const LinkArgs& c = a.link;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int R = c.nRanks, Le = a.shape.localExperts, E = Le * R;
  const uint32_t id = l.combineArriveWord(bank, c.rank);
  for (int p = threadIdx.x; p < R; p += kThreads) {
    if (tr.lsa(p)) continue;
    const int* rows = sm.srcRows + p * kLlSendRounds;
    if (!llRoundPosted(rows, q)) continue;
    const int ctx = dataContextOf(p, c.ginContexts);
    if (!a.zeroCopy) {  // round 0 without rows: the signal alone
      int first = 0;
      for (int x = 0; x < q; ++x) first += rows[x];
      tr.putSignalWord(p, l.ginCombineRecvRow(bank, c.rank, first), l.combineStageRow(sm.srcBase[p] + first),
                       uint64_t(rows[q]) * l.rowBytes, id, llRoundSignal(rows, q), ctx);
      continue;
    }
    for (int le = 0; le < Le; ++le) {
      const int i = le * R + p, n = a.r.roundCount[q * E + i];
      if (n == 0) continue;
      int slot = a.r.srcStart[le * (R + 1) + p];  // first row of (le, p) in the dispatch output
      for (int x = 0; x < q; ++x) slot += a.r.roundCount[x * E + i];
      tr.put(p, l.ginCombineRecvRow(bank, c.rank, sm.ginOff[q * E + i]), l.combineSendRow(le, slot),
             uint64_t(n) * l.rowBytes, ctx);
    }
    tr.putSignalWord(p, 0, 0, 0, id, llRoundSignal(rows, q), ctx);  // after the round's puts on ctx
  }
}

__device__ void sendHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, int* smem) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int R = c.nRanks, Le = sh.localExperts, E = Le * R, rowsPer = l.rowsPerExpert();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool gin = tr.hasGin();
  // Staging rows may still be read by this rank's earlier GIN puts (any CTA posted them).
  if (gin && !tr.completeGinCounters(tr.counterBase(), gridDim.x)) ses.abort = true;
  ses.waitFree(kLlCombine, seq, kPhaseLlCombineFree);
  SendSmem sm(smem, Le, R);
  const int* srcStart = a.r.srcStart;  // [Le][R + 1]
  const int* count = a.r.roundCount;   // [kLlSendRounds][E]
  // A network source's rows packed by round, then local expert (as they landed here: llLandingRow).
  for (int j = threadIdx.x; j < R * kLlSendRounds; j += kThreads) {
    const int p = j / kLlSendRounds, q = j % kLlSendRounds;
    int run = 0;
    for (int le = 0; le < Le && !tr.lsa(p); ++le) {
      sm.ginOff[q * E + le * R + p] = run;
      run += count[q * E + le * R + p];
    }
    sm.srcRows[j] = run;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < R * kLlSendRounds; j += kThreads) {
    const int p = j / kLlSendRounds, q = j % kLlSendRounds;
    int earlier = 0;
    for (int x = 0; x < q; ++x) earlier += sm.srcRows[p * kLlSendRounds + x];
    for (int le = 0; le < Le && !tr.lsa(p); ++le) sm.ginOff[q * E + le * R + p] += earlier;
  }
  for (int p = threadIdx.x; p < R; p += kThreads) {
    int n = 0;
    for (int q = 0; q < kLlSendRounds; ++q) n += sm.srcRows[p * kLlSendRounds + q];
    sm.srcBase[p] = n;
  }
  for (int q = warp - 1; q >= 0 && q < kLlSendRounds; q += kWarps)
    warpExclusiveScan(count + q * E, sm.roundStart + q * (E + 1), E, lane);
  __syncthreads();
  if (warp == 0) warpExclusiveScan(sm.srcBase, sm.srcBase, R, lane);
  __syncthreads();
  // Round by round: every CTA copies its share of the round's rows, the last one puts the round.
  for (int q = 0; q < kLlSendRounds; ++q) {
    const int* rs = sm.roundStart + q * (E + 1);
    if (q > 0 && rs[E] == 0) continue;  // no source has rows in round q (every CTA alike)
    if (!ses.abort) {
      for (int n = blockIdx.x * kWarps + warp; n < rs[E]; n += gridDim.x * kWarps) {
        const int i = sourceOfRow(rs, E, n);
        const int le = i / R, src = i % R, jr = n - rs[i];
        int slot = jr;  // among src's rows to le
        for (int x = 0; x < q; ++x) slot += count[x * E + i];
        char* dst;
        if (tr.lsa(src))
          dst = tr.lsaBase(src) + l.combineRecvRow(bank, c.rank * Le + le, slot);
        else if (!a.zeroCopy)
          dst = tr.localBase() + l.combineStageRow(sm.srcBase[src] + sm.ginOff[q * E + i] + jr);
        else
          continue;
        const size_t row = size_t(le) * rowsPer + srcStart[le * (R + 1) + src] + slot;
        warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x) + row * l.rowBytes, int(l.rowBytes), lane);
      }
    }
    if (lastCtaOf(&a.g.state->roundCtas[kLlCombine][q]) && gin && !ses.abort && !timedOut(c.error))
      postRound(a, ses, sm, q, bank);
  }
  if (!lastCtaOf(&a.g.state->sentCtas[kLlCombine])) return;
  if (!ses.abort && !timedOut(c.error))
    for (int p = threadIdx.x; p < R; p += kThreads)
      if (tr.lsa(p)) tr.addLsaWord(p, l.combineArriveWord(bank, c.rank), 1);
  if (threadIdx.x == 0) {  // this send half is done: the group's count and the handle's
    publishSeq(&a.g.state->seq[kLlCombine], seq);
    publishSeq(&a.r.seq[kLlCombine], seq);
  }
}

// Every thread of the CTA: until every expert rank's rows of this rank's send round q are here
// (NVLink ranks: before round 0, all of them). false after a timeout (recorded).
__device__ bool waitRound(const LlCombineArgs& a, const Transport& tr, uint32_t seq, int q) {
  const LlLayout& l = a.g.l;
  const int R = a.link.nRanks, bank = llBankOf(seq);
  bool ok = true;
  for (int p = threadIdx.x; p < R && ok; p += kThreads) {
    const uint32_t id = l.combineArriveWord(bank, p);
    if (tr.lsa(p)) {
      if (q == 0) ok = tr.waitWord(id, p, llArriveTarget(seq), kPhaseLlCombineData);
      continue;
    }
    int rows[kLlSendRounds];
    for (int x = 0; x < kLlSendRounds; ++x) rows[x] = a.r.roundRows[x * R + p];
    if (llRoundPosted(rows, q))
      ok = tr.waitWord(id, p, llRoundArriveBase(seq) + llArrivedBy(rows, q), kPhaseLlCombineData);
  }
  return __syncthreads_or(!ok) == 0;
}

__device__ void recvHalf(const LlCombineArgs& a, LlSession& ses, uint32_t seq, const int4* (&rows)[kWarps][kMaxTopk],
                         float (&wts)[kWarps][kMaxTopk]) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int K = sh.topk, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const int groups = sh.hidden / 8;
  for (int q = 0; q < kLlSendRounds && !ses.abort; ++q) {
    if (!waitRound(a, tr, seq, q)) ses.abort = true;
    if (ses.abort) break;
    const Share round = shareOf(a.numTokens, kLlSendRounds, q);
    for (int t = round.begin + blockIdx.x * kWarps + warp; t < round.end; t += gridDim.x * kWarps) {
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
        const int r = e / sh.localExperts;  // a GIN expert rank returned our row where it landed there
        rows[warp][j] = reinterpret_cast<const int4*>(
            tr.localBase() + (tr.lsa(r) ? l.combineRecvRow(bank, e, slot)
                                        : l.ginCombineRecvRow(bank, r, a.r.tokLanding[size_t(t) * K + lane])));
        wts[warp][j] = w;
      }
      __syncwarp();
      const int n = __popc(valid);
      int4* out = reinterpret_cast<int4*>(a.out + size_t(t) * sh.hidden);
      for (int g = lane; g < groups; g += kWarp) {
        float acc[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) acc[x] = 0.f;
        for (int j = 0; j < n; ++j) {
          const int4 v = ldVolatile(rows[warp][j] + g);
          const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
          const float wj = wts[warp][j];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const float2 f = __bfloat1622float2(h[x]);
            acc[2 * x] = __fadd_rn(acc[2 * x], __fmul_rn(wj, f.x));
            acc[2 * x + 1] = __fadd_rn(acc[2 * x + 1], __fmul_rn(wj, f.y));
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

cudaError_t llPrepareCombineKernel() {
  // The largest dynamic shared memory any LL group needs (kMaxExperts experts over as many ranks),
  // set once at group creation so that launches (possibly under graph capture) need no attribute call.
  return cudaFuncSetAttribute(llCombineKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(SendSmem::bytes(1, kMaxExperts)));
}

cudaError_t launchLlCombine(const LlCombineArgs& args, int nCtas, cudaStream_t stream) {
  const size_t smem = SendSmem::bytes(args.shape.localExperts, args.link.nRanks);
  llCombineKernel<<<nCtas, kThreads, smem, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace epx::dev
