// Combine kernel. Sums, per source token, the rows its destination ranks return, in FP32: in
// ascending destination rank, then bias0, bias1; BF16 out (the order of the CPU reference in
// host/ref).
//  send: CTA b takes a contiguous share of the received rows (of each put round); each row goes back to its source
//        rank's combineRecv[this rank][slot] (expanded layout: the token's local expert rows summed
//        in FP32, rounded to BF16 for the wire — or kept FP32 with the exact-combine option, so
//        every contribution is rounded once, at the source's final BF16 output): stored directly
//        into NVLink peers' windows, or staged in this rank's combineX and moved over GIN in a few
//        put rounds, round j carrying the j-th share of every network source's rows (in its token
//        order): the last CTA to finish staging a round posts, per network source, one put of the
//        weights and one of the rows, which adds the rows to the source's arrival signal — every
//        source reduces each layout chunk of its tokens as soon as that chunk's rows arrived,
//        while later rounds are on the wire.
//  pull: (deduplicated layout, expert output already in the window's combineX) NVLink peers'
//        rows are not sent: after every rank started combine, each rank reads its tokens' rows
//        straight from those peers' windows; a closing arrival ("done reading") keeps combineX
//        stable until every reader is done. Network peers' rows are still put (GIN has no remote
//        reads here).
// Expanded layout: a rank's own tokens are not sent back to itself; its reduction sums their local
// expert rows directly, rounded as the wire would round them (the same values in the same order).
// Combined top-k weights come from the rank that owns each slot's expert.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/session.cuh"
#include "epx/device/zero_row.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
// A warp's row list: up to top-k sources and two bias rows.
constexpr int kMaxRowList = kMaxTopk + 2;

// Where received row i goes back to (its source's combineRecv slot) and where it is staged.
struct ReturnRow {
  int src;
  size_t slotRow;  // this rank's slot row in the source's combineRecv: rank * maxTokens + slot
};

__device__ __forceinline__ ReturnRow returnRowOf(const EpCommon& c, const Route& r, int i) {
  const int s = sourceOfRow(r.recvBase, c.link.nRanks, i);
  return ReturnRow{s, size_t(c.link.rank) * c.shape.maxTokens + (i - r.recvBase[s])};
}

// Deduplicated layout: an input that already is the window's region (expert output written into
// combineX, weights = the dispatch's recvTopkWeights) is put from there without staging. (The host
// refuses combineX as the expanded layout's input: there it is the staging area.)
__device__ __forceinline__ bool inWindow(const CombineArgs& a, const Transport& tr, const void* p, uint64_t off) {
  return !a.r.expanded && p == a.c.userBase + off;
}

// Bytes of one returned row: BF16, or FP32 partial sums (exact combine, expanded layout only).
__device__ __forceinline__ size_t wireRowBytes(const CombineArgs& a) { return size_t(a.c.shape.hidden) * (a.fp32 ? 4 : 2); }

// Which received rows a send pass covers: rows from network sources, numbered in source order
// (a put round, protocol.h), or rows from NVLink sources (lsaRows).
enum class SendRows { kGin, kLsa };

// Received rows from NVLink sources, numbered 0..count(): contiguous in receive order (the LSA team
// is a contiguous rank range), less this rank's own rows in the expanded layout (folded into its
// reduction; they lie inside the team's rows).
__device__ __forceinline__ RowsExcept lsaRows(const EpCommon& c, const Route& r, bool skipOwn) {
  const int first = c.link.rank - c.link.lsaRank;
  const int begin = r.recvBase[first], end = r.recvBase[first + c.link.lsaSize], skipBegin = r.recvBase[c.link.rank];
  return RowsExcept{begin, end, skipBegin, skipOwn ? r.recvBase[c.link.rank + 1] - skipBegin : 0};
}

// Send phase over this CTA's rows [share.begin, share.end) of `which`. WireRow: what travels.
template <class WireRow, bool kExpanded>
__device__ void sendBack(const CombineArgs& a, const Transport& tr, SendRows which, Share share, int lane,
                         const int4* (&srcs)[kWarps][kMaxRowList]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, H = c.shape.hidden, warp = threadIdx.x >> 5;
  const size_t wire = wireRowBytes(a);
  const uint32_t lanesBelow = (1u << lane) - 1u;
  char* local = tr.localBase();
  const bool xInWindow = inWindow(a, tr, a.x, c.wl.combineX);
  const bool wInWindow = inWindow(a, tr, a.topkWeights, c.wl.recvWeights);
  const RowsExcept lsaRecv = lsaRows(c, r, kExpanded);
  for (int v = share.begin + warp; v < share.end; v += kWarps) {
    const int i = which == SendRows::kGin ? ginRowOf(r.recvBase, r.recvGinBase, c.link.nRanks, v) : lsaRecv.rowOf(v);
    const ReturnRow rr = returnRowOf(c, r, i);
    if (isForwarded(rr.src, c.link.rank, c.nodeSize)) continue;  // hybrid: its partial goes to the forwarder
    const bool lsa = tr.lsa(rr.src);
    if (lsa != (which == SendRows::kLsa)) continue;
    if (lsa && a.pull) continue;  // the source reads this row in place
    if (kExpanded && rr.src == c.link.rank) continue;  // folded into this rank's reduction (reduceRange)
    char* dst;
    float* dstW;
    if (lsa) {
      char* peer = tr.lsaBase(rr.src);
      dst = peer + c.wl.combineRecv + rr.slotRow * wire;
      dstW = reinterpret_cast<float*>(peer + c.wl.combineRecvW) + rr.slotRow * K;
    } else {  // staged at row i for the GIN put (nothing to do when already in the window)
      dst = xInWindow ? nullptr : local + c.wl.combineX + size_t(i) * wire;
      dstW = wInWindow ? nullptr : reinterpret_cast<float*>(local + c.wl.combineStageW) + size_t(i) * K;
    }
    if constexpr (!kExpanded) {
      if (dst) warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x + size_t(i) * H), H * 2, lane);
      if (a.topkWeights && dstW && lane < K) dstW[lane] = a.topkWeights[size_t(i) * K + lane];
      continue;
    }
    const int row = lane < K ? r.recvExpRows[size_t(i) * K + lane] : -1;
    const uint32_t valid = __ballot_sync(0xffffffffu, row >= 0);
    if (a.topkWeights && dstW && lane < K) dstW[lane] = row >= 0 ? a.topkWeights[row] : 0.f;
    if (row >= 0) srcs[warp][__popc(valid & lanesBelow)] = reinterpret_cast<const int4*>(a.x + size_t(row) * H);
    padRowList(srcs[warp], __popc(valid), lane);
    __syncwarp();
    // One vector per lane and row (8 rows in flight): the kernel's register budget (512 threads,
    // 128 each) goes to the reduction's 8 x 2 batches; two here made the kernel spill.
    warpSumBf16Rows<WireRow, 1>(reinterpret_cast<int4*>(dst), srcs[warp], __popc(valid), H / 8, lane);
    __syncwarp();
  }
}

// Called by the last CTA to finish staging put round `round` of `rounds`: per network source s,
// the round's rows s sent us (combineRoundRows) are contiguous here and in its combineRecv (this
// rank's slots, in s's token order), so one put of their weights and one of the rows, which adds
// the rows to s's arrival signal: s reduces its tokens as their rows arrive (waitGinPrefix).
// Sources are spread over the contexts; each source's puts stay on one context, in row order.
__device__ void putRound(const CombineArgs& a, const Transport& tr, OpSession& ses, int round, int rounds) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk;
  const uint64_t wire = wireRowBytes(a);
  const uint64_t wOff = inWindow(a, tr, a.topkWeights, c.wl.recvWeights) ? c.wl.recvWeights : c.wl.combineStageW;
  ses.readyAllGin(tr, kPhaseCombineFree);
  if (ses.abort) return;
  for (int s = threadIdx.x; s < c.link.nRanks; s += kThreads) {
    if (tr.lsa(s) || isForwarded(s, c.link.rank, c.nodeSize)) continue;
    const int ginBase = r.recvGinBase[s], base = r.recvBase[s];
    const Share v = combineRoundRows(r.recvGinBase, s, rounds, round);
    const Share piece{base + (v.begin - ginBase), base + (v.end - ginBase)};
    const int n = piece.end - piece.begin;
    if (n == 0) continue;
    const int ctx = dataContextOf(s, c.link.ginContexts);
    const uint64_t slotRow = uint64_t(c.link.rank) * c.shape.maxTokens + uint64_t(piece.begin - base);
    if (a.topkWeights)
      tr.put(s, c.wl.combineRecvW + slotRow * K * 4, wOff + uint64_t(piece.begin) * K * 4, uint64_t(n) * K * 4, ctx);
    tr.putSignal(s, c.wl.combineRecv + slotRow * wire, c.wl.combineX + uint64_t(piece.begin) * wire, uint64_t(n) * wire,
                 kFlagArriveCombine, uint32_t(n), ctx);
  }
  __syncthreads();  // ses.abort is read by every thread next
}


// ---- hybrid forwarding (protocol.h "Hybrid forwarding") ------------------------------------------

// Rows a rank returns to this rank over GIN in one combine: direct mode every destination its
// sendCount; hybrid, the rank of another node on this rank's rail returns one node sum per token of
// this rank bound for its node, and the other ranks of that node return nothing.
struct CombineReturns {
  const Route& r;
  int rank, nodeSize;
  __device__ uint32_t operator()(int p) const {
    if (!isForwarded(rank, p, nodeSize)) return uint32_t(r.sendCount[p]);
    const int node = nodeOfRank(p, nodeSize);
    return p == railPeerOf(rank, node, nodeSize) ? uint32_t(r.nodeCount[node]) : 0u;
  }
};

// Rows this rank received through forwarder f (a rank of its node): the rows of f's rail peers on
// the other nodes, one run per source (protocol.h "Batching").
__device__ __forceinline__ int rowsThrough(const EpCommon& c, const Route& r, int f) {
  const int N = c.nodeSize, myNode = nodeOfRank(c.link.rank, N);
  int rows = 0;
  for (int n = 0; n < c.link.nRanks / N; ++n) {
    if (n == myNode) continue;
    const int s = railPeerOf(f, n, N);
    rows += r.recvBase[s + 1] - r.recvBase[s];
  }
  return rows;
}

// Partials the forwarder expects per combine from rank dLocal of its node: the rows it forwarded
// to that rank at dispatch, from every other node (Route::fwdRowsTo).
__device__ __forceinline__ uint32_t partialsFrom(const Route& r, int dLocal, int nodes, int myNode, int N) {
  uint32_t rows = 0;
  for (int n = 0; n < nodes; ++n) rows += n == myNode ? 0u : uint32_t(r.fwdRowsTo[n * N + dLocal]);
  return rows;
}

// Each received row i of a forwarded source s goes back to its forwarder f (the rank of this node
// on s's rail) as this rank's partial: j = i - recvBase[s] of the segment (s's node, this rank) of
// f's fwdPart areas, with its weights. An NVLink forwarder (or this rank) gets it stored there; for
// a network one it is staged at row i of combineX (as direct mode stages; already there when the
// input is the window's combineX) and the last CTA moves each source's run with one put of
// weights and one of rows, which adds the run's rows to f's (kFlagForwardCombine, this rank) word;
// NVLink forwarders get their rows added to that word after the stores.
template <class WireRow, bool kExpanded>
__device__ void sendPartials(const CombineArgs& a, const Transport& tr, OpSession& ses, int lane,
                             const int4* (&srcs)[kWarps][kMaxRowList]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, H = c.shape.hidden, N = c.nodeSize, T = c.shape.maxTokens, warp = threadIdx.x >> 5;
  const int R = c.link.nRanks, myLocal = c.link.rank % N;
  const size_t wire = wireRowBytes(a);
  const uint32_t lanesBelow = (1u << lane) - 1u;
  const bool xInWindow = inWindow(a, tr, a.x, c.wl.combineX);
  ses.readyAllGin(tr, kPhaseCombineFree);  // network forwarders finished their previous combine
  const Share mine = shareOf(r.recvBase[R], gridDim.x, blockIdx.x);
  for (int i = mine.begin + warp; i < mine.end && !ses.abort; i += kWarps) {
    const int s = sourceOfRow(r.recvBase, R, i);
    if (!isForwarded(s, c.link.rank, N)) continue;
    const int f = delivererOf(s, c.link.rank, N);
    const size_t part = fwdSegmentRow(nodeOfRank(s, N), myLocal, i - r.recvBase[s], N, T);
    const bool lsa = tr.lsa(f);
    char* base = lsa ? tr.lsaBase(f) : nullptr;
    char* dst = lsa ? base + c.wl.fwdPartX + part * wire : tr.localBase() + c.wl.combineX + size_t(i) * wire;
    float* dstW = lsa ? reinterpret_cast<float*>(base + c.wl.fwdPartW) + part * K
                      : reinterpret_cast<float*>(tr.localBase() + c.wl.combineStageW) + size_t(i) * K;
    if constexpr (!kExpanded) {
      if (lsa || !xInWindow) warpCopy16<false>(dst, reinterpret_cast<const char*>(a.x + size_t(i) * H), H * 2, lane);
      if (lane < K) dstW[lane] = a.topkWeights ? a.topkWeights[size_t(i) * K + lane] : 0.f;
    } else {
      const int row = lane < K ? r.recvExpRows[size_t(i) * K + lane] : -1;
      const uint32_t valid = __ballot_sync(0xffffffffu, row >= 0);
      if (lane < K) dstW[lane] = row >= 0 && a.topkWeights ? a.topkWeights[row] : 0.f;
      if (row >= 0) srcs[warp][__popc(valid & lanesBelow)] = reinterpret_cast<const int4*>(a.x + size_t(row) * H);
      padRowList(srcs[warp], __popc(valid), lane);
      __syncwarp();
      warpSumBf16Rows<WireRow, 1>(reinterpret_cast<int4*>(dst), srcs[warp], __popc(valid), H / 8, lane);
    }
    __syncwarp();
  }
  if (!lastCtaOf(&c.session.state->fwdCtas[kFwdPartialsSent]) || ses.abort) return;
  const int first = c.link.rank - myLocal, nodes = R / N, myNode = nodeOfRank(c.link.rank, N);
  for (int fi = threadIdx.x; fi < N; fi += kThreads) {
    const int f = first + fi;
    if (tr.lsa(f)) {
      const int rows = rowsThrough(c, r, f);
      if (rows > 0) tr.addLsaWord(f, tr.ownId(kFlagForwardCombine), uint32_t(rows));
      continue;
    }
    const int ctx = dataContextOf(f, c.link.ginContexts);
    for (int n = 0; n < nodes; ++n) {
      const int s = railPeerOf(f, n, N);
      const int rows = n == myNode ? 0 : r.recvBase[s + 1] - r.recvBase[s];
      if (rows == 0) continue;
      const uint64_t part = fwdSegmentRow(n, myLocal, 0, N, T), at = uint64_t(r.recvBase[s]), cnt = uint64_t(rows);
      tr.put(f, c.wl.fwdPartW + part * K * 4, c.wl.combineStageW + at * K * 4, cnt * K * 4, ctx);
      tr.putSignal(f, c.wl.fwdPartX + part * wire, c.wl.combineX + at * wire, cnt * wire, kFlagForwardCombine,
                   uint32_t(rows), ctx);
    }
  }
  __syncthreads();
}

// The forwarder's node sums of round i, posted by the last CTA to sum them: to every source node,
// its records [shareOf(count, rounds, i)) (one put of weights, one of rows adding them to the
// source's arrival word of this rank). Rounds leave in order (a CTA counts for round i + 1 only
// after posting round i), so each signal covers the rows of the rounds before it.
__device__ void postNodeSums(const CombineArgs& a, const Transport& tr, OpSession& ses, int i, int rounds) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int R = c.link.nRanks, K = c.shape.topk, N = c.nodeSize, nodes = R / N, myNode = nodeOfRank(c.link.rank, N);
  const int T = c.shape.maxTokens;
  const size_t wire = wireRowBytes(a);
  ses.readyAllGin(tr, kPhaseCombineFree);  // the sources finished their previous combine
  if (ses.abort) return;
  for (int n = threadIdx.x; n < nodes; n += kThreads) {
    const Share js = shareOf(r.fwdCount[n], rounds, i);
    if (n == myNode || js.end == js.begin) continue;
    const int s = railPeerOf(c.link.rank, n, N), ctx = dataContextOf(s, c.link.ginContexts);
    const uint64_t at = uint64_t(c.link.rank) * T + uint64_t(js.begin), q0 = uint64_t(fwdRecordRow(n, js.begin, T));
    const uint64_t cnt = uint64_t(js.end - js.begin);
    if (a.topkWeights) tr.put(s, c.wl.combineRecvW + at * K * 4, c.wl.fwdNodeW + q0 * K * 4, cnt * K * 4, ctx);
    tr.putSignal(s, c.wl.combineRecv + at * wire, c.wl.fwdNodeX + q0 * wire, cnt * wire, kFlagArriveCombine,
                 uint32_t(cnt), ctx);
  }
  __syncthreads();
}

// Rounds of node sums: as many as direct mode's put rounds over the other nodes (protocol.h
// defaultPutRounds), at most one per layout chunk of the largest record count. Every CTA computes
// the same number (the counts are the dispatch's).
__device__ int nodeSumRounds(const Route& r, int nodes, int myNode) {
  int most = 0;
  for (int n = 0; n < nodes; ++n)
    if (n != myNode && r.fwdCount[n] > most) most = r.fwdCount[n];
  return putRoundsOf((most + kLayoutChunk - 1) / kLayoutChunk, true, defaultPutRounds(nodes - 1));
}

// The forwarder's step: once every rank of its node stored its partials (their words reached the
// running totals plus the rows forwarded to them at dispatch), each record's node sum: the
// partials in ascending rank order, summed in FP32 and rounded like a rank partial, and each slot's
// weight from the rank that owns its expert. In rounds of each source node's records (token
// order), each posted as soon as summed (postNodeSums), so the source starts reducing early tokens
// while later sums are on the wire.
template <class WireRow>
__device__ void sumNodes(const CombineArgs& a, const Transport& tr, OpSession& ses, int globalWarp, int numWarps, int lane,
                         const int4* (&srcs)[kWarps][kMaxRowList]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const SessionArgs& sa = c.session;
  const int R = c.link.nRanks, K = c.shape.topk, H = c.shape.hidden, N = c.nodeSize, Le = c.shape.localExperts;
  const int nodes = R / N, myNode = nodeOfRank(c.link.rank, N), first = myNode * N, T = c.shape.maxTokens;
  const int warp = threadIdx.x >> 5;
  const size_t wire = wireRowBytes(a);
  char* local = tr.localBase();
  bool ok = !ses.abort;
  for (int i = threadIdx.x; i < N && ok; i += kThreads) {
    const int d = first + i;
    ok = tr.waitWord(ginSignalId(kFlagForwardCombine, d, R), d,
                     sa.arrived[kArrivedFwdCombine * R + d] + partialsFrom(r, i, nodes, myNode, N), kPhaseCombineData);
  }
  if (!ok) ses.abort = 1;
  __syncthreads();
  const int rounds = nodeSumRounds(r, nodes, myNode);
  for (int round = 0; round < rounds; ++round) {
    for (int n = 0; n < nodes && !ses.abort; ++n) {
      if (n == myNode) continue;
      const Share js = shareOf(r.fwdCount[n], rounds, round);
      for (int j = js.begin + globalWarp; j < js.end; j += numWarps) {
        const size_t q = size_t(fwdRecordRow(n, j, T));
        const uint64_t mask = r.fwdMask[q];
        // d's partial of record q: j = fwdSlot of its run from node n (protocol.h "Batching").
        auto partOf = [&](int dLocal) { return fwdSegmentRow(n, dLocal, r.fwdSlot[q * N + dLocal], N, T); };
        int k = 0;
        for (uint64_t m = mask; m; m &= m - 1, ++k)
          if (lane == 0) srcs[warp][k] = reinterpret_cast<const int4*>(local + c.wl.fwdPartX + partOf(__ffsll(m) - 1) * wire);
        __syncwarp();
        warpSumRows<WireRow, WireRow, true, 2>(reinterpret_cast<int4*>(local + c.wl.fwdNodeX + q * wire), srcs[warp], k,
                                               nullptr, nullptr, H / 8, lane);
        if (lane < K) {
          const int e = r.fwdExperts[q * K + lane];
          const float* w = reinterpret_cast<const float*>(local + c.wl.fwdPartW);
          reinterpret_cast<float*>(local + c.wl.fwdNodeW)[q * K + lane] =
              e >= 0 ? ((const volatile float*)w)[partOf(destOf(e, Le) % N) * K + lane] : 0.f;
        }
        __syncwarp();
      }
    }
    // Every CTA counts every round (lastCtaOf re-arms it for the next op), aborted or not.
    if (!lastCtaOf(&sa.state->fwdSumCtas[round]) || ses.abort) continue;
    postNodeSums(a, tr, ses, round, rounds);
    if (round == rounds - 1 && !ses.abort) {  // every CTA has read the running totals above
      for (int i = threadIdx.x; i < N; i += kThreads)
        sa.arrived[kArrivedFwdCombine * R + first + i] += partialsFrom(r, i, nodes, myNode, N);
      __syncthreads();
    }
  }
}

// Rows network peer p returns to this rank for its tokens before token t (in that order): the
// prefix of p's returned rows that the tokens before t need. Direct: the rows this rank sent p.
// Hybrid: the same for p of this node; for the rank on this rank's rail of another node, its
// node sums (one per token with a record for that node); none from the other ranks there.
struct ReturnedBefore {
  const Route& r;
  int rank, nRanks, nodeSize, t;
  __device__ int operator()(int p) const {
    const int T = r.totals->numTokens;
    if (!isForwarded(rank, p, nodeSize)) return rowsBeforeToken(r.chunkRankBase, r.sendCount, nRanks, T, t, p);
    const int node = nodeOfRank(p, nodeSize);
    return p == railPeerOf(rank, node, nodeSize) ? rowsBeforeToken(r.chunkNodeBase, r.nodeCount, nRanks / nodeSize, T, t, node)
                                                 : 0;
  }
};

// Groups per lane and row of the reduction's tiles: pull reads one row per destination rank from
// NVLink peers (deep per row); the expanded layout's own partial sum loads 8 rows per batch
// (kRowBatch), so its tiles are narrower (FP32 wire rows take twice the registers).
template <bool kPull, class WireRow, bool kExpanded>
constexpr int kReduceUnroll = kPull ? 8 : !kExpanded ? 4 : WireRow::kVecsPer8 == 1 ? 2 : 1;

// Reduce per source token. Lane k whose slot is the first with its destination rank d holds the
// row d returned: in d's combineX (pull from an NVLink peer) or in this rank's combineRecv[d].
//
// Expanded layout: this rank's own share of a token (its local experts' rows) is not staged by
// sendBack; the warp sums those expert rows itself (a PartialSum, rounded as the wire would) at
// this rank's place in the destination order.
template <bool kPull, class WireRow, bool kExpanded>
__device__ void reduceRange(const CombineArgs& a, const Transport& tr, Share tokens, int globalWarp, int numWarps,
                            int lane, const int4* (&srcRows)[kWarps][kMaxRowList], const int4* (&ownRows)[kWarps][kMaxTopk]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int R = c.link.nRanks, K = c.shape.topk, H = c.shape.hidden, Le = c.shape.localExperts, warp = threadIdx.x >> 5;
  const size_t wire = wireRowBytes(a);
  const uint32_t lanesBelow = (1u << lane) - 1u;
  char* local = tr.localBase();
  // The next token's expert and slot are loaded while this token's rows are summed.
  auto slotOf = [&](int t, int& e, int& slot) {
    e = -1;
    slot = -1;
    if (lane < K && t < tokens.end) {
      e = r.tokExpert[t * K + lane];
      slot = r.tokSlot[t * K + lane];
    }
  };
  int nextE, nextSlot;
  slotOf(tokens.begin + globalWarp, nextE, nextSlot);
  for (int t = tokens.begin + globalWarp; t < tokens.end; t += numWarps) {
    int e = nextE, dest = -1, ownRecvRow = -1;
    const int slot = nextSlot;
    slotOf(t + numWarps, nextE, nextSlot);
    const int4* row = nullptr;
    const float* w = nullptr;
    // Hybrid: a slot of another node is read from its node sum (lane of the node's first slot),
    // ordered at the node's first rank; its ranks return nothing directly.
    const int N = c.nodeSize;
    const int nodeSlot = N > 0 && lane < K ? r.tokNodeSlot[t * K + lane] : -1;
    if (lane < K) {
      if (nodeSlot >= 0) {
        const int node = nodeOfRank(destOf(e, Le), N);
        dest = node * N;
        const size_t at = size_t(railPeerOf(c.link.rank, node, N)) * c.shape.maxTokens + nodeSlot;
        row = reinterpret_cast<const int4*>(local + c.wl.combineRecv + at * wire);
        w = reinterpret_cast<const float*>(local + c.wl.combineRecvW) + at * K;
      } else if (slot >= 0 && !isForwarded(c.link.rank, destOf(e, Le), N)) {
        dest = destOf(e, Le);
        const int gslot = r.chunkRankBase[chunkOf(t) * R + dest] + slot;
        if (kExpanded && dest == c.link.rank) {
          ownRecvRow = r.recvBase[c.link.rank] + gslot;  // this rank's received row of token t
        } else if (kPull && tr.lsa(dest)) {
          char* peer = tr.lsaBase(dest);
          const size_t at = size_t(r.sendBase[dest]) + gslot;
          row = reinterpret_cast<const int4*>(peer + c.wl.combineX + at * H * 2);
          w = reinterpret_cast<const float*>(peer + c.wl.recvWeights) + at * K;
        } else {
          const size_t at = size_t(dest) * c.shape.maxTokens + gslot;
          row = reinterpret_cast<const int4*>(local + c.wl.combineRecv + at * wire);
          w = reinterpret_cast<const float*>(local + c.wl.combineRecvW) + at * K;
        }
      }
    }
    const uint32_t dests = __ballot_sync(0xffffffffu, dest >= 0);
    const uint32_t ownLane = __ballot_sync(0xffffffffu, ownRecvRow >= 0);
    // Rank of this destination among the token's destinations, so the sum runs in rank order.
    int order = 0, ownAt = 0;
    const float* myW = nullptr;
    const int myDest = e >= 0 ? combineOrderKey(c.link.rank, destOf(e, Le), N) : -1;  // the key of e's returned row
    for (uint32_t m = dests; m; m &= m - 1) {
      const int j = __ffs(m) - 1;
      const int dj = __shfl_sync(0xffffffffu, dest, j);
      const float* wj = reinterpret_cast<const float*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(w), j));
      if (dj < dest) ++order;
      if (dj < c.link.rank) ++ownAt;
      if (dj == myDest) myW = wj;
    }
    // This rank's own expert rows of the token (lane k: slot k's expanded row, in slot order).
    PartialSum own;
    int ownRow = -1;
    if (kExpanded && ownLane) {
      const int i = __shfl_sync(0xffffffffu, ownRecvRow, __ffs(ownLane) - 1);
      ownRow = lane < K ? r.recvExpRows[size_t(i) * K + lane] : -1;
      const uint32_t valid = __ballot_sync(0xffffffffu, ownRow >= 0);
      if (ownRow >= 0) ownRows[warp][__popc(valid & lanesBelow)] = reinterpret_cast<const int4*>(a.x + size_t(ownRow) * H);
      padRowList(ownRows[warp], __popc(valid), lane);
      own = PartialSum{ownRows[warp], __popc(valid), ownAt};
    }
    if (a.combinedTopkWeights && lane < K) {
      float cw = 0.f;
      if (kExpanded && e >= 0 && myDest == c.link.rank)
        cw = ownRow >= 0 && a.topkWeights ? a.topkWeights[ownRow] : 0.f;
      else if (e >= 0)
        cw = ((const volatile float*)myW)[lane];
      a.combinedTopkWeights[size_t(t) * K + lane] = cw;
    }
    if (dest >= 0 && ownRecvRow < 0) srcRows[warp][order - (ownLane && dest > c.link.rank ? 1 : 0)] = row;
    // Biases are added after every source: BF16 wire rows take them as two more sources (no
    // registers held for them through the sum); FP32 wire rows add them as BF16 rows at the end.
    int nSrc = __popc(dests) - (ownLane ? 1 : 0);
    const int4* bias0 = a.bias0 ? reinterpret_cast<const int4*>(a.bias0 + size_t(t) * H) : nullptr;
    const int4* bias1 = a.bias1 ? reinterpret_cast<const int4*>(a.bias1 + size_t(t) * H) : nullptr;
    if constexpr (WireRow::kVecsPer8 == 1) {
      if (bias0) srcRows[warp][nSrc++] = bias0;
      if (bias1) srcRows[warp][nSrc++] = bias1;
      bias0 = bias1 = nullptr;
    }
    __syncwarp();
    warpSumRows<WireRow, Bf16Row, true, kReduceUnroll<kPull, WireRow, kExpanded>>(
        reinterpret_cast<int4*>(a.out + size_t(t) * H), srcRows[warp], nSrc, bias0, bias1, H / 8, lane, own);
    __syncwarp();
  }
}

// With network peers the tokens go in layout chunks, each after its rows from every network
// destination arrived (the rest is still on the wire).
template <bool kPull, class WireRow, bool kExpanded>
__device__ void reduceTokens(const CombineArgs& a, const Transport& tr, OpSession& ses, int globalWarp, int numWarps,
                             int lane, const int4* (&srcRows)[kWarps][kMaxRowList], const int4* (&ownRows)[kWarps][kMaxTopk]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int T = r.totals->numTokens;
  const int step = tr.hasGin() ? kLayoutChunk : (T > 0 ? T : 1);
  for (int t0 = 0; t0 < T; t0 += step) {
    const int t1 = t0 + step < T ? t0 + step : T;
    if (tr.hasGin())
      ses.waitGinPrefix(tr, a.c.session, kOpCombine, kPhaseCombineData,
                        ReturnedBefore{r, c.link.rank, c.link.nRanks, c.nodeSize, t1});
    if (ses.abort) return;
    reduceRange<kPull, WireRow, kExpanded>(a, tr, Share{t0, t1}, globalWarp, numWarps, lane, srcRows, ownRows);
  }
}

// WireRow: BF16 (pull or push), or FP32 partial sums (push, exact combine, expanded layout only).
// kExpanded: the expanded layout (push only) or the deduplicated one (pull or push): separate
// kernels, so neither carries the other's registers.
template <class WireRow, bool kExpanded>
__global__ void __launch_bounds__(kThreads, 1) combineKernel(const __grid_constant__ CombineArgs a) {
  __shared__ OpSession ses;
  __shared__ const int4* rows[kWarps][kMaxRowList];
  __shared__ const int4* ownRows[kWarps][kMaxTopk];
  const EpCommon& c = a.c;
  const Route& r = a.r;
  Transport tr(c.link);
  tr.startBeacon(kBeaconCombine, nextSeq(&c.session.state->opSeq[kOpCombine]));
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;
  const bool gin = tr.hasGin();
  const GinRows ginRows{nullptr, r.sendCount};

  ses.begin(tr, a.c.session, kOpCombine, kPhaseCombineReady);
  // Rows from network sources in put rounds (protocol.h): round j (the j-th share of every
  // network source's rows) leaves while round j+1 is staged; then rows from NVLink sources
  // (push), while the last round is on the wire.
  if (gin) {
    const int ginRows = r.recvGinBase[c.link.nRanks];
    const int rounds = putRoundsOf((ginRows + kLayoutChunk - 1) / kLayoutChunk, true,
                                   defaultPutRounds(c.link.nRanks - c.link.lsaSize));
    for (int j = 0; j < rounds; ++j) {
      for (int s = 0; s < c.link.nRanks && !ses.abort; ++s) {
        const Share piece = combineRoundRows(r.recvGinBase, s, rounds, j);
        if (piece.end == piece.begin) continue;
        const Share mine = shareOf(piece.end - piece.begin, gridDim.x, blockIdx.x);
        sendBack<WireRow, kExpanded>(a, tr, SendRows::kGin, Share{piece.begin + mine.begin, piece.begin + mine.end}, lane, rows);
      }
      if (ses.lastToStage(a.c.session, kOpCombine, j) && !ses.abort) putRound(a, tr, ses, j, rounds);
    }
  }
  // Hybrid: partials of forwarded rows to their forwarders, then this rank's node sums. (Partials
  // first, before the rows returned directly, measured slower: docs/performance.md.)
  if (c.nodeSize > 0) {
    sendPartials<WireRow, kExpanded>(a, tr, ses, lane, rows);
    sumNodes<WireRow>(a, tr, ses, globalWarp, numWarps, lane, rows);
  }
  const bool pull = !kExpanded && a.pull;
  if (!pull && !ses.abort)
    sendBack<WireRow, kExpanded>(a, tr, SendRows::kLsa, shareOf(lsaRows(c, r, kExpanded).count(), gridDim.x, blockIdx.x),
                                 lane, rows);
  if (pull) {
    if constexpr (!kExpanded) {
      if (!ses.abort) reduceTokens<true, Bf16Row, false>(a, tr, ses, globalWarp, numWarps, lane, rows, ownRows);
    }
    ses.arriveLsa(tr, kOpCombine);  // "done reading your combineX"
    ses.waitArrivals(tr, a.c.session, kOpCombine, kPhaseCombineData, true, false, ginRows);
  } else {
    ses.arriveLsa(tr, kOpCombine);
    ses.waitArrivals(tr, a.c.session, kOpCombine, kPhaseCombineData, true, false, ginRows);
    if (!ses.abort) reduceTokens<false, WireRow, kExpanded>(a, tr, ses, globalWarp, numWarps, lane, rows, ownRows);
  }
  if (gin) tr.completeGin();  // combineX / weights are the caller's again
  // end() tells network peers that this combine finished (protocol.h readyReached).
  if (c.nodeSize > 0)
    ses.end(tr, a.c.session, kOpCombine, CombineReturns{r, c.link.rank, c.nodeSize});
  else
    ses.end(tr, a.c.session, kOpCombine, ginRows);
}

}  // namespace

cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream) {
  if (args.fp32)
    combineKernel<Fp32Row, true><<<nCtas, kThreads, 0, stream>>>(args);
  else if (args.r.expanded)
    combineKernel<Bf16Row, true><<<nCtas, kThreads, 0, stream>>>(args);
  else
    combineKernel<Bf16Row, false><<<nCtas, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t combineMaxCtasPerSm(int* ctas) {
  int a = 0, b = 0, d = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, combineKernel<Bf16Row, true>, kThreads, 0);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, combineKernel<Fp32Row, true>, kThreads, 0);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&d, combineKernel<Bf16Row, false>, kThreads, 0);
  *ctas = a < b ? (a < d ? a : d) : (b < d ? b : d);
  return e;
}

}  // namespace epx::dev
