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

struct SendSmem {  // dynamic shared memory of the send half, E = numExperts, per send round r
  int* total;      // [kLlSendRounds][E] pairs of round r's tokens per expert
  int* before;     // [kLlSendRounds][E] pairs of round r's tokens before this CTA's share of it
  int* pref;       // [kLlSendRounds][E + 1] exclusive prefix of total[r] over experts (llStageRow)
  int* stage;      // [E + 1] rows to the experts before e over all rounds (destination d starts at stage[d * Le])
  int* warpStart;  // [kWarps][E] first slot of each warp's tokens of the round
  __device__ SendSmem(int* s, int E)
      : total(s), before(s + kLlSendRounds * E), pref(s + 2 * kLlSendRounds * E),
        stage(pref + kLlSendRounds * (E + 1)), warpStart(stage + E + 1) {}
  __host__ __device__ static size_t bytes(int E) {
    return (size_t(3 * kLlSendRounds + 1 + kWarps) * E + kLlSendRounds + 1) * sizeof(int);
  }
  // Slots of expert e taken by the rounds before r.
  __device__ int slotBase(int r, int e, int E) const {
    int n = 0;
    for (int q = 0; q < r; ++q) n += total[q * E + e];
    return n;
  }
};

struct RecvSmem {   // dynamic shared memory of the receive half; i = le * nRanks + src
  int* count;       // [Le * nRanks] rows from each (local expert, source)
  int* rcount;      // [kLlSendRounds][Le * nRanks] of them in each send round (NVLink sources: round 0)
  int* ginOff;      // [kLlSendRounds][Le * nRanks] GIN source: landing index of its first row of the round
  int* roundStart;  // [kLlSendRounds][Le * nRanks + 1] exclusive prefix of rcount[r] over i
  int* srcRows;     // [nRanks][kLlSendRounds] a GIN source's rows per round (its header's sums)
  int* srcStart;    // [Le][nRanks + 1] exclusive prefix over sources
  int* leCount;     // [Le]
  int* leStart;     // [Le + 1] exclusive prefix over local experts (flattened rows)
  __device__ RecvSmem(int* s, int Le, int R)
      : count(s), rcount(count + Le * R), ginOff(rcount + kLlSendRounds * Le * R),
        roundStart(ginOff + kLlSendRounds * Le * R), srcRows(roundStart + kLlSendRounds * (Le * R + 1)),
        srcStart(srcRows + R * kLlSendRounds), leCount(srcStart + Le * (R + 1)), leStart(leCount + Le) {}
  __host__ __device__ static size_t bytes(int Le, int R) {
    const size_t E = size_t(Le) * R;
    return ((1 + 3 * kLlSendRounds) * E + kLlSendRounds + size_t(R) * kLlSendRounds + size_t(Le) * (R + 1) + 2 * Le + 1) *
           sizeof(int);
  }
};

// Writes token t's row as a message at dst: payload (BF16 copy, or FP8 cast with one scale per 128
// channels) and scales. Every lane of the warp.
__device__ void sendRow(const LlDispatchArgs& a, const LlLayout& l, int t, char* dst, int lane) {
  const int vecs = a.shape.hidden / 8;  // 16-byte BF16 vectors of the row
  const int4* src = reinterpret_cast<const int4*>(a.x + size_t(t) * a.shape.hidden);
  const bool fp8 = a.fp8 != 0;
  const uint32_t scaleOff = l.payloadBytes(true);
  for (int base = 0; base < vecs; base += kWarp) {
    const int i = base + lane;
    const bool active = i < vecs;  // hidden % 128 == 0: a 16-lane block is all active or all not
    const int4 v = active ? ldNc(src + i) : make_int4(0, 0, 0, 0);
    if (!fp8) {
      if (active) stNa(reinterpret_cast<int4*>(dst) + i, v);
      continue;
    }
    float m = absMax8(v);
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
    const float scale = llFp8Scale(m, a.roundScale != 0);
    const uint2 q = castFp8x8(v, __frcp_rn(scale));
    if (!active) continue;
    reinterpret_cast<uint2*>(dst)[i] = q;
    if ((lane & 15) == 0) reinterpret_cast<float*>(dst + scaleOff)[i / 16] = scale;
  }
}

// Send round r of `seq` (tokens `round`, this CTA's part `mine`): slots, then the messages, one
// (token, top-k slot) per warp at a time. Every thread of the CTA.
__device__ void sendRound(const LlDispatchArgs& a, const LlSession& ses, const SendSmem& sm, int r, Share mine,
                          int bank) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int E = sh.numExperts, Le = sh.localExperts, K = sh.topk;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const bool fp8 = a.fp8 != 0;
  for (int i = threadIdx.x; i < kWarps * E; i += kThreads) sm.warpStart[i] = 0;
  __syncthreads();
  // Each warp's contiguous part of this CTA's tokens of the round, in token order: slot within the warp.
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
  // Slot bases: every warp's part starts after the earlier rounds', the earlier CTAs' and the
  // earlier warps' pairs.
  for (int e = threadIdx.x; e < E; e += kThreads) {
    int run = sm.slotBase(r, e, E) + sm.before[r * E + e];
    for (int w = 0; w < kWarps; ++w) {
      const int h = sm.warpStart[w * E + e];
      sm.warpStart[w * E + e] = run;
      run += h;
    }
  }
  __syncthreads();
  for (int t = mine.begin + part.begin; t < mine.begin + part.end; ++t) {
    if (lane >= K) continue;
    const size_t i = size_t(t) * K + lane;
    const int e = a.r.tokExpert[i];
    if (e >= 0) a.r.tokSlot[i] = sm.warpStart[warp * E + e] + a.r.tokSlot[i];
  }
  __syncthreads();
  if (ses.abort) return;
  // Messages: NVLink destinations straight into their receive rows, network ones into staging.
  const int pairs = (mine.end - mine.begin) * K;
  for (int p = warp; p < pairs; p += kWarps) {
    const int t = mine.begin + p / K, k = p % K;
    const int e = a.r.tokExpert[size_t(t) * K + k];
    if (e < 0) continue;
    const int slot = a.r.tokSlot[size_t(t) * K + k], d = e / Le;
    char* msg;
    if (tr.lsa(d)) {
      msg = tr.lsaBase(d) + l.recvMsg(bank, e % Le, c.rank, slot, fp8);
    } else {
      const int row = llStageRow(sm.pref, E, Le, r, e, slot - sm.slotBase(r, e, E));
      msg = tr.localBase() + l.stageMsg(row, d, fp8);
      // Where the row lands at d, and so where d's combine returns it.
      if (lane == 0) a.r.tokLanding[size_t(t) * K + k] = row - sm.stage[d * Le];
    }
    if (lane < 2) reinterpret_cast<int*>(msg + l.metaOffset(fp8))[lane] = lane == 0 ? t : k;
    sendRow(a, l, t, msg, lane);
  }
}

// The last CTA of send round r: one put per network destination of the round's rows (round 0:
// with the header of every round's counts, even when empty), each adding llRoundSignal.
__device__ void postRound(const LlDispatchArgs& a, const LlSession& ses, const SendSmem& sm, int r, int bank) {
  const LinkArgs& c = a.link;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int E = a.shape.numExperts, Le = a.shape.localExperts;
  const bool fp8 = a.fp8 != 0;
  for (int d = threadIdx.x; d < c.nRanks; d += kThreads) {
    if (tr.lsa(d)) continue;
    int rows[kLlSendRounds];
    for (int q = 0; q < kLlSendRounds; ++q) rows[q] = llRoundRowsTo(sm.pref, E, Le, q, d);
    if (!llRoundPosted(rows, r)) continue;
    const int first = llDestFirstRow(sm.pref, E, d * Le);
    const int from = llStageRow(sm.pref, E, Le, r, d * Le, 0);
    uint64_t src = l.stageMsg(from, d, fp8), dst = l.ginRecvMsg(bank, c.rank, from - first, fp8);
    uint64_t bytes = uint64_t(rows[r]) * l.msgBytes(fp8);
    if (r == 0) {
      int* hdr = reinterpret_cast<int*>(tr.localBase() + l.hdrStage(d, first, fp8));
      for (int q = 0; q < kLlSendRounds; ++q)
        for (int le = 0; le < Le; ++le) hdr[q * Le + le] = sm.total[q * E + d * Le + le];
      src -= l.hdrBytes();
      dst -= l.hdrBytes();
      bytes += l.hdrBytes();
    }
    tr.putSignalWord(d, dst, src, bytes, l.dispatchArriveWord(bank, c.rank), llRoundSignal(rows, r),
                     dataContextOf(d, c.ginContexts));
  }
}

__device__ void sendHalf(const LlDispatchArgs& a, LlSession& ses, uint32_t seq, int* smem) {
  const LinkArgs& c = a.link;
  const EpShape& sh = a.shape;
  const Transport& tr = ses.t;
  const LlLayout& l = a.g.l;
  const int E = sh.numExperts, Le = sh.localExperts, T = a.numTokens;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, bank = llBankOf(seq);
  const bool gin = tr.hasGin();
  SendSmem sm(smem, E);
  // Staging rows may still be read by this rank's earlier GIN puts (any CTA posted them).
  if (gin && !tr.completeGinCounters(tr.counterBase(), gridDim.x)) ses.abort = true;
  ses.waitFree(kLlDispatch, seq, kPhaseLlDispatchFree);

  for (int i = threadIdx.x; i < 2 * kLlSendRounds * E; i += kThreads) sm.total[i] = 0;  // total, before
  __syncthreads();
  // Pairs per expert of every round's tokens, and of the round's tokens before this CTA's share.
  for (int r = 0; r < kLlSendRounds; ++r) {
    const Share round = shareOf(T, kLlSendRounds, r);
    const int mineBegin = round.begin + shareOf(round.end - round.begin, gridDim.x, blockIdx.x).begin;
    for (int t = round.begin + threadIdx.x; t < round.end; t += kThreads) {
      countToken(a, t, sm.total + r * E);
      if (t < mineBegin) countToken(a, t, sm.before + r * E);
    }
  }
  __syncthreads();
  if (warp < kLlSendRounds) warpExclusiveScan(sm.total + warp * E, sm.pref + warp * (E + 1), E, lane);
  __syncthreads();
  for (int e = threadIdx.x; e <= E; e += kThreads) {
    int s = 0;
    for (int r = 0; r < kLlSendRounds; ++r) s += sm.pref[r * (E + 1) + e];
    sm.stage[e] = s;
  }
  __syncthreads();
  // Combine waits for each GIN expert rank's rounds by these counts (that rank returns our rows of
  // round q in its round q).
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < kLlSendRounds * c.nRanks; i += kThreads)
      a.r.roundRows[i] = llRoundRowsTo(sm.pref, E, Le, i / c.nRanks, i % c.nRanks);
  // The rounds: every CTA stages its part, the last one to finish puts the round on the wire.
  // Rounds without tokens are skipped by every CTA alike, except round 0 (the header).
  for (int r = 0; r < kLlSendRounds; ++r) {
    const Share round = shareOf(T, kLlSendRounds, r);
    if (r > 0 && round.end == round.begin) continue;
    const Share share = shareOf(round.end - round.begin, gridDim.x, blockIdx.x);
    sendRound(a, ses, sm, r, Share{round.begin + share.begin, round.begin + share.end}, bank);
    if (lastCtaOf(&a.g.state->roundCtas[kLlDispatch][r]) && gin && !ses.abort && !timedOut(c.error)) postRound(a, ses, sm, r, bank);
  }
  // The last CTA announces the NVLink rows, after every CTA's stores: (rows + 1) per expert by a
  // release add.
  if (!lastCtaOf(&a.g.state->sentCtas[kLlDispatch])) return;
  if (!ses.abort && !timedOut(c.error))
    for (int e = threadIdx.x; e < E; e += kThreads)
      if (tr.lsa(e / Le))
        tr.addLsaWord(e / Le, l.countWord(bank, e % Le, c.rank), uint32_t(sm.stage[e + 1] - sm.stage[e]) + 1);
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
  const uint32_t arriveBase = llRoundArriveBase(seq);
  RecvSmem sm(smem, Le, R);
  uint32_t* seen = a.g.countSeen + size_t(bank) * E;
  // Rows per (local expert, source): NVLink sources' count words (all their rows are there), network
  // sources' headers (round 0's put: rows per round; the rows follow round by round).
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
      sm.rcount[i] = n;
      for (int r = 1; r < kLlSendRounds; ++r) sm.rcount[r * E + i] = 0;
    } else if (ok && !ses.abort &&
               tr.waitWord(l.dispatchArriveWord(bank, src), src, arriveBase + 1, kPhaseLlDispatchData)) {
      const volatile int* hdr = reinterpret_cast<const volatile int*>(tr.localBase() + l.hdr(bank, src));
      for (int r = 0; r < kLlSendRounds; ++r) {
        const int m = hdr[r * Le + le];
        sm.rcount[r * E + i] = m;
        n += m;
      }
    } else {
      ok = false;
      for (int r = 0; r < kLlSendRounds; ++r) sm.rcount[r * E + i] = 0;
    }
    sm.count[i] = n;
  }
  ses.abort = __syncthreads_or(!ok) != 0 || ses.abort;
  // A GIN source's rows are packed by round, then local expert, in its landing area (llLandingRow).
  for (int j = threadIdx.x; j < R * kLlSendRounds; j += kThreads) {
    const int src = j / kLlSendRounds, r = j % kLlSendRounds;
    int run = 0;
    for (int le = 0; le < Le; ++le) {
      sm.ginOff[r * E + le * R + src] = run;
      run += sm.rcount[r * E + le * R + src];
    }
    sm.srcRows[j] = run;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < R * kLlSendRounds; j += kThreads) {
    const int src = j / kLlSendRounds, r = j % kLlSendRounds;
    int earlier = 0;
    for (int q = 0; q < r; ++q) earlier += sm.srcRows[src * kLlSendRounds + q];
    for (int le = 0; le < Le; ++le) sm.ginOff[r * E + le * R + src] += earlier;
  }
  for (int le = warp; le < Le; le += kWarps) warpExclusiveScan(sm.count + le * R, sm.srcStart + le * (R + 1), R, lane);
  for (int r = warp - (kWarps - kLlSendRounds); r >= 0 && r < kLlSendRounds; r += kWarps)
    warpExclusiveScan(sm.rcount + r * E, sm.roundStart + r * (E + 1), E, lane);
  __syncthreads();
  for (int le = threadIdx.x; le < Le; le += kThreads) sm.leCount[le] = sm.srcStart[le * (R + 1) + R];
  __syncthreads();
  if (warp == 0) warpExclusiveScan(sm.leCount, sm.leStart, Le, lane);
  __syncthreads();
  // Copy out round by round: round r's rows once every network source's round r has landed, while
  // later rounds are on the wire (NVLink sources' rows go with round 0).
  const int payload = int(l.payloadBytes(fp8)), scaleWords = fp8 ? sh.hidden / kLlScaleBlock : 0;
  const int numWarps = gridDim.x * kWarps;
  for (int r = 0; r < kLlSendRounds && !ses.abort; ++r) {
    const int* rs = sm.roundStart + r * (E + 1);
    if (rs[E] == 0) continue;
    ok = true;
    for (int src = threadIdx.x; src < R; src += kThreads) {
      if (tr.lsa(src) || sm.srcRows[src * kLlSendRounds + r] == 0) continue;
      int rows[kLlSendRounds];
      for (int q = 0; q < kLlSendRounds; ++q) rows[q] = sm.srcRows[src * kLlSendRounds + q];
      ok = ok && tr.waitWord(l.dispatchArriveWord(bank, src), src, arriveBase + llArrivedBy(rows, r), kPhaseLlDispatchData);
    }
    ses.abort = __syncthreads_or(!ok) != 0 || ses.abort;
    if (ses.abort) break;
    for (int n = blockIdx.x * kWarps + warp; n < rs[E]; n += numWarps) {
      const int i = sourceOfRow(rs, E, n);
      const int le = i / R, src = i % R, jr = n - rs[i];
      int j = jr;  // slot among src's rows to le
      for (int q = 0; q < r; ++q) j += sm.rcount[q * E + i];
      const char* msg = tr.localBase() + (tr.lsa(src) ? l.recvMsg(bank, le, src, j, fp8)
                                                      : l.ginRecvMsg(bank, src, sm.ginOff[r * E + i] + jr, fp8));
      const size_t row = size_t(le) * rowsPer + sm.srcStart[le * (R + 1) + src] + j;
      warpCopy16<true>(a.recvX + row * payload, msg, payload, lane);
      for (int q = lane; q < scaleWords; q += kWarp)
        a.recvScales[row * scaleWords + q] = reinterpret_cast<const volatile float*>(msg + payload)[q];
      if (lane < 2) a.r.rowSrc[row * 2 + lane] = lane == 0 ? src : j;
      if (a.recvSrcInfo && lane < 3) {
        const volatile int* meta = reinterpret_cast<const volatile int*>(msg + l.metaOffset(fp8));
        a.recvSrcInfo[row * 3 + lane] = lane == 0 ? src : meta[lane - 1];
      }
    }
  }
  if (!ses.abort && blockIdx.x == 0) {
    for (int le = threadIdx.x; le < Le; le += kThreads) {
      a.recvCount[le] = sm.leCount[le];
      a.r.expertCount[le] = sm.leCount[le];
    }
    for (int i = threadIdx.x; i < Le * (R + 1); i += kThreads) a.r.srcStart[i] = sm.srcStart[i];
    for (int i = threadIdx.x; i < kLlSendRounds * E; i += kThreads) a.r.roundCount[i] = sm.rcount[i];
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
  Transport tr(a.link, llGinCounterBase(kLlDispatch, int(gridDim.x)));
  LlSession ses(tr, a.g);
  uint32_t seq = 0;
  if (a.halves & kLlHalfSend) {
    seq = ses.sendSeq(kLlDispatch);
    sendHalf(a, ses, seq, smem);
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
  const cudaError_t ce = cudaFuncSetAttribute(llDispatchKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              int(llDispatchSmem(kMaxExperts, 1)));
  return ce == cudaSuccess ? llPrepareCombineKernel() : ce;
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
