// Dispatch kernel. Send: each warp sends a token's row once to every destination rank of its
// top-k: NVLink peers get the row and its top-k meta stored straight into their receive arrays
// (LSA) at the row agreed in the layout's count exchange; rows for network peers are staged in
// this rank's window, grouped by destination in receive order. With network peers the tokens are
// sent in a few put rounds of whole layout chunks (protocol.h), each cut into contiguous CTA
// shares: the last CTA to finish staging a round moves each destination's rows of that round with
// one GIN put that adds their count to the arrival signal, so the wire overlaps the staging of the
// next round; the per-row arrays of all rows are staged first and leave with the first round. With
// the expanded layout the rank's own tokens go straight from the send phase into their expert
// rows. Receive: in waves (a network source's rows as its rounds land, NVLink sources in the last
// wave) and groups of sources (kArrivalGroups), each piece copied into the caller's layout
// (deduplicated copy, or expanded by local expert) as soon as it arrived — so the expansion
// overlaps the transfer; skipped when the caller's outputs are the window arrays.
#include <nccl_device.h>

#include "epx/device/copy.cuh"
#include "epx/device/ep_args.h"
#include "epx/device/launch.h"
#include "epx/device/session.cuh"

namespace epx::dev {

namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
// Source groups of the receive step (contiguous rank ranges, shareOf): the copy-out of one group
// overlaps the arrival of the next; few enough that the waits stay cheap at 1024 ranks.
constexpr int kArrivalGroups = 8;

// Offsets of the six row arrays of one side (the receive arrays, or the GIN staging arrays).
struct RowOffsets {
  uint64_t x, scales, idx, weights, info, pos;
  __device__ static RowOffsets recv(const WindowLayout& wl) {
    return {wl.recvX, wl.recvScales, wl.recvIdx, wl.recvWeights, wl.recvInfo, wl.recvPos};
  }
  __device__ static RowOffsets stage(const WindowLayout& wl) {
    return {wl.stageX, wl.stageScales, wl.stageIdx, wl.stageWeights, wl.stageInfo, wl.stagePos};
  }
};

// Typed views of one side's row arrays in a window whose base is `base`.
struct RowArrays {
  char* x;
  float* scales;
  int32_t* idx;
  float* weights;
  int32_t* info;
  int32_t* pos;
  __device__ RowArrays(char* base, const RowOffsets& o)
      : x(base + o.x),
        scales(reinterpret_cast<float*>(base + o.scales)),
        idx(reinterpret_cast<int32_t*>(base + o.idx)),
        weights(reinterpret_cast<float*>(base + o.weights)),
        info(reinterpret_cast<int32_t*>(base + o.info)),
        pos(reinterpret_cast<int32_t*>(base + o.pos)) {}
};

// What lane k (< K) needs to send token t: its slot's expert, position and weight, and, when slot
// k is the first with its destination rank d, the row in d's receive arrays (NVLink) or in the
// staging arrays (network), and the global slot among this rank's rows to d.
// Hybrid forwarding: a slot whose rank is in another node has no direct destination (dest -1);
// fwdRow is its row in that rank's receive arrays (the forwarder writes it there), else -1.
struct SendPlan {
  int e, pos, dest, row, gslot;
  float w;
  int fwdRow = -1;
};

__device__ __forceinline__ SendPlan loadPlan(const DispatchArgs& a, const Transport& tr, int t, int lane) {
  const Route& r = a.r;
  const int R = a.c.link.nRanks, K = a.c.shape.topk, chunk = chunkOf(t);
  SendPlan p{-1, -1, -1, -1, -1, 0.f};
  if (lane < K) {
    p.e = r.tokExpert[t * K + lane];
    const int slot = r.tokSlot[t * K + lane];
    const int local = r.tokExpertPos[t * K + lane];
    if (a.topkWeights) p.w = a.topkWeights[size_t(t) * K + lane];
    if (p.e >= 0) p.pos = r.chunkExpertBase[chunk * a.c.shape.numExperts + p.e] + local;
    if (slot >= 0) {
      p.dest = destOf(p.e, a.c.shape.localExperts);
      p.gslot = r.chunkRankBase[chunk * R + p.dest] + slot;
      if (isForwarded(a.c.link.rank, p.dest, a.c.nodeSize)) {
        p.fwdRow = r.sendBase[p.dest] + p.gslot;
        p.dest = -1;
      } else {
        p.row = (tr.lsa(p.dest) ? r.sendBase[p.dest] : r.stageBase[p.dest]) + p.gslot;
      }
    }
  }
  return p;
}

// Expanded layout: the output row of slot `lane`'s expert when this rank owns it (its own tokens
// need no receive copy: the sender writes them straight into their expert segments), else -1.
__device__ __forceinline__ int ownExpandedRow(const DispatchArgs& a, const SendPlan& p) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  if (!r.expanded || p.e < 0 || destOf(p.e, c.shape.localExperts) != c.link.rank) return -1;
  const int le = p.e - c.link.rank * c.shape.localExperts;
  return r.expertStart[le] + r.srcExpertOff[c.link.rank * c.shape.localExperts + le] + p.pos;
}

// The metadata of this rank's own expanded output rows of token t (lane k: slot k's row or -1),
// and, for combine, the expanded rows of its received row (recvExpRows).
__device__ void writeOwnRows(const DispatchArgs& a, const SendPlan& cur, int t, int outRow, uint32_t own,
                             float scale, float scale2, int lane) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, scaleWords = a.scaleRowBytes / 4;
  const uint32_t selfSlot = __ballot_sync(0xffffffffu, cur.dest == c.link.rank);
  const int gslot = __shfl_sync(0xffffffffu, cur.gslot, __ffs(selfSlot) - 1);
  if (lane < K) r.recvExpRows[size_t(r.recvBase[c.link.rank] + gslot) * K + lane] = outRow;
  if (outRow >= 0) {
    if (a.recvTopkWeights) a.recvTopkWeights[outRow] = cur.w;
    if (a.recvSrcInfo) {
      a.recvSrcInfo[2 * size_t(outRow)] = c.link.rank;
      a.recvSrcInfo[2 * size_t(outRow) + 1] = t;
    }
  }
  if (!scaleWords) return;
  for (uint32_t m = own; m; m &= m - 1) {
    const size_t row = size_t(__shfl_sync(0xffffffffu, outRow, __ffs(m) - 1));
    float* dst = a.recvScales + row * scaleWords;
    if (lane < scaleWords) dst[lane] = scale;
    if (lane + 32 < scaleWords) dst[lane + 32] = scale2;
    for (int q = lane + 64; q < scaleWords; q += 32) dst[q] = a.xScales[size_t(t) * scaleWords + q];
  }
}

// Lanes whose slot goes to an NVLink peer (or this rank): their rows are stored in the peer's
// receive arrays directly, never staged.
__device__ __forceinline__ uint32_t nvlinkLanes(const Transport& tr, int dest) {
  return __ballot_sync(0xffffffffu, dest >= 0 && tr.lsa(dest));
}

// The per-row arrays of token t's row to each destination of `dests` (a mask of lanes whose slot
// is the first with its destination): NVLink peers' receive arrays, or this rank's staging arrays
// for network peers. The whole warp calls it; scale / scale2 are the token's FP8 scale words lane
// and lane + 32.
__device__ void writeRowMetas(const DispatchArgs& a, const Transport& tr, const SendPlan& cur, uint32_t dests, int t,
                              float scale, float scale2, int lane) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, Le = c.shape.localExperts, scaleWords = a.scaleRowBytes / 4;
  for (uint32_t m = dests; m; m &= m - 1) {
    const int j = __ffs(m) - 1;
    const int d = __shfl_sync(0xffffffffu, cur.dest, j);
    const size_t drow = size_t(__shfl_sync(0xffffffffu, cur.row, j));
    const bool lsa = tr.lsa(d);
    const RowArrays dst(lsa ? tr.lsaBase(d) : tr.localBase(), lsa ? RowOffsets::recv(c.wl) : RowOffsets::stage(c.wl));
    if (lane < scaleWords) dst.scales[drow * scaleWords + lane] = scale;
    if (lane + 32 < scaleWords) dst.scales[drow * scaleWords + lane + 32] = scale2;
    for (int q = lane + 64; q < scaleWords; q += 32) dst.scales[drow * scaleWords + q] = a.xScales[size_t(t) * scaleWords + q];
    const bool owned = cur.e >= 0 && destOf(cur.e, Le) == d;
    if (lane < K) {
      dst.idx[drow * K + lane] = owned ? cur.e - d * Le : -1;
      dst.weights[drow * K + lane] = owned ? cur.w : 0.f;
      if (r.expanded) dst.pos[drow * K + lane] = owned ? cur.pos : -1;
    }
    if (lane < 2) dst.info[drow * 2 + lane] = lane == 0 ? c.link.rank : t;
  }
}

// Send phase over this CTA's tokens (warp-strided); the next token's plan is loaded while the
// current row is copied. Each 16-byte vector of the row is loaded once and stored to every
// destination. Network rows go to the staging arrays; with the expanded layout, rows for this
// rank's own experts go straight to their output rows. ginMetaStaged: network rows' per-row arrays
// were staged already (stageGinMeta), only their hidden rows are written here.
__device__ void sendTokens(const DispatchArgs& a, const Transport& tr, Share share, int lane, char* (&dsts)[kWarps][kMaxTopk],
                           bool ginMetaStaged) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int warp = threadIdx.x >> 5;
  const int scaleWords = a.scaleRowBytes / 4;
  const uint32_t lanesBelow = (1u << lane) - 1u;
  const int t0 = share.begin + warp;
  SendPlan next = t0 < share.end ? loadPlan(a, tr, t0, lane) : SendPlan{-1, -1, -1, -1, -1, 0.f};
  for (int t = t0; t < share.end; t += kWarps) {
    const SendPlan cur = next;
    if (t + kWarps < share.end) next = loadPlan(a, tr, t + kWarps, lane);
    const int outRow = ownExpandedRow(a, cur);
    const uint32_t own = __ballot_sync(0xffffffffu, outRow >= 0);
    const bool toWindow = cur.dest >= 0 && !(r.expanded && cur.dest == c.link.rank);
    const uint32_t dests = __ballot_sync(0xffffffffu, toWindow);
    if (toWindow) {
      char* base = tr.lsa(cur.dest) ? tr.lsaBase(cur.dest) + c.wl.recvX : tr.localBase() + c.wl.stageX;
      dsts[warp][__popc(dests & lanesBelow)] = base + size_t(cur.row) * a.xRowBytes;
    }
    if (outRow >= 0) dsts[warp][__popc(dests) + __popc(own & lanesBelow)] = a.recvX + size_t(outRow) * a.xRowBytes;
    __syncwarp();
    warpCopy16Multi<false, 8>(dsts[warp], __popc(dests) + __popc(own), a.x + size_t(t) * a.xRowBytes, a.xRowBytes, lane);
    // FP8 scales: one load per word, stored to every destination.
    const float scale = scaleWords && lane < scaleWords ? a.xScales[size_t(t) * scaleWords + lane] : 0.f;
    const float scale2 = scaleWords > 32 && lane + 32 < scaleWords ? a.xScales[size_t(t) * scaleWords + lane + 32] : 0.f;
    __syncwarp();
    if (own) writeOwnRows(a, cur, t, outRow, own, scale, scale2, lane);
    const uint32_t metaDests = ginMetaStaged ? dests & nvlinkLanes(tr, cur.dest) : dests;
    writeRowMetas(a, tr, cur, metaDests, t, scale, scale2, lane);
  }
}

// Network rows' per-row arrays (FP8 scales, local expert ids, weights, expert positions, source)
// of this CTA's share of all the op's tokens, staged before any hidden row: the first put round
// carries them for every row, so a receiver can expand each later round's rows as they land.
__device__ void stageGinMeta(const DispatchArgs& a, const Transport& tr, Share share, int lane) {
  const int scaleWords = a.scaleRowBytes / 4;
  for (int t = share.begin + int(threadIdx.x >> 5); t < share.end; t += kWarps) {
    const SendPlan cur = loadPlan(a, tr, t, lane);
    const uint32_t dests = __ballot_sync(0xffffffffu, cur.dest >= 0) & ~nvlinkLanes(tr, cur.dest);
    if (!dests) continue;
    const float scale = scaleWords && lane < scaleWords ? a.xScales[size_t(t) * scaleWords + lane] : 0.f;
    const float scale2 = scaleWords > 32 && lane + 32 < scaleWords ? a.xScales[size_t(t) * scaleWords + lane + 32] : 0.f;
    writeRowMetas(a, tr, cur, dests, t, scale, scale2, lane);
  }
}

// Called by the last CTA to finish staging put round `tok` (whole layout chunks of tokens): per
// network destination d, the rank's rows to d from those tokens are contiguous in the staging
// arrays and in d's receive arrays (rowsBeforeToken bounds them), so one GIN put moves their
// hidden rows and adds their count to d's arrival signal. The first round first moves the small
// per-row arrays of all of d's rows (staged by stageGinMeta before any hidden row): every put to d
// goes on the same context, so each round's signal covers them and every earlier round, and the
// signal counts the rows of d that arrived, in token order. Destinations are spread over the
// contexts.
__device__ void putRound(const DispatchArgs& a, const Transport& tr, OpSession& ses, Share tok, bool firstRound) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, T = r.totals->numTokens;
  const RowOffsets recv = RowOffsets::recv(c.wl), stage = RowOffsets::stage(c.wl);
  ses.readyAllGin(tr, kPhaseDispatchReady);
  if (ses.abort) return;
  for (int d = threadIdx.x; d < c.link.nRanks; d += kThreads) {
    const int n = r.sendCount[d];
    if (n == 0 || tr.lsa(d) || isForwarded(c.link.rank, d, c.nodeSize)) continue;  // hybrid: via the forwarder
    const int lo = rowsBeforeToken(r.chunkRankBase, r.sendCount, c.link.nRanks, T, tok.begin, d);
    const int hi = rowsBeforeToken(r.chunkRankBase, r.sendCount, c.link.nRanks, T, tok.end, d);
    if (hi == lo && !firstRound) continue;
    const int ctx = dataContextOf(d, c.link.ginContexts);
    const uint64_t dstRow = uint64_t(r.sendBase[d]);
    const uint64_t srcRow = uint64_t(r.stageBase[d]);
    auto putRows = [&](uint64_t dstOff, uint64_t srcOff, uint64_t rowBytes, int first, int count) {
      tr.put(d, dstOff + (dstRow + first) * rowBytes, srcOff + (srcRow + first) * rowBytes, uint64_t(count) * rowBytes, ctx);
    };
    if (firstRound) {
      putRows(recv.scales, stage.scales, a.scaleRowBytes, 0, n);
      putRows(recv.idx, stage.idx, K * 4, 0, n);
      putRows(recv.weights, stage.weights, K * 4, 0, n);
      if (r.expanded) putRows(recv.pos, stage.pos, K * 4, 0, n);
      putRows(recv.info, stage.info, 8, 0, n);
    }
    if (hi > lo)
      tr.putSignal(d, recv.x + (dstRow + lo) * a.xRowBytes, stage.x + (srcRow + lo) * a.xRowBytes,
                   uint64_t(hi - lo) * a.xRowBytes, kFlagArriveDispatch, uint32_t(hi - lo), ctx);
  }
  __syncthreads();  // ses.abort is read by every thread next
}


// ---- hybrid forwarding (protocol.h "Hybrid forwarding") ------------------------------------------

// Typed views of a record array set (fwdSend or fwdRecv) in the window whose base is `base`.
struct RecordArrays {
  char* x;
  float* scales;
  int32_t* meta;
  __device__ static RecordArrays send(char* base, const WindowLayout& wl) {
    return {base + wl.fwdSendX, reinterpret_cast<float*>(base + wl.fwdSendScales), reinterpret_cast<int32_t*>(base + wl.fwdSendMeta)};
  }
  __device__ static RecordArrays recv(char* base, const WindowLayout& wl) {
    return {base + wl.fwdRecvX, reinterpret_cast<float*>(base + wl.fwdRecvScales), reinterpret_cast<int32_t*>(base + wl.fwdRecvMeta)};
  }
};

// This CTA's share of the op's tokens: one record per (token, other node it goes to) in fwdSend at
// row node * maxTokens + the token's slot among this rank's tokens to that node (tokNodeSlot):
// the row, its FP8 scales and the record metadata (window_layout.h fwdRecordInts).
__device__ void stageRecords(const DispatchArgs& a, const Transport& tr, Share share, int lane) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, Le = c.shape.localExperts, N = c.nodeSize, scaleWords = a.scaleRowBytes / 4;
  const int RI = int(fwdRecordInts(K));
  const RecordArrays rec = RecordArrays::send(tr.localBase(), c.wl);
  for (int t = share.begin + int(threadIdx.x >> 5); t < share.end; t += kWarps) {
    const SendPlan p = loadPlan(a, tr, t, lane);
    const int nodeSlot = lane < K ? r.tokNodeSlot[t * K + lane] : -1;
    const int myNode = p.e >= 0 ? nodeOfRank(destOf(p.e, Le), N) : -1;
    for (uint32_t m = __ballot_sync(0xffffffffu, nodeSlot >= 0); m; m &= m - 1) {
      const int j = __ffs(m) - 1;
      const int node = __shfl_sync(0xffffffffu, myNode, j);
      const size_t q = size_t(fwdRecordRow(node, __shfl_sync(0xffffffffu, nodeSlot, j), c.shape.maxTokens));
      warpCopy16<false>(rec.x + q * a.xRowBytes, a.x + size_t(t) * a.xRowBytes, a.xRowBytes, lane);
      for (int w = lane; w < scaleWords; w += 32) rec.scales[q * scaleWords + w] = a.xScales[size_t(t) * scaleWords + w];
      int32_t* meta = rec.meta + q * RI;
      if (lane < K) {
        const bool here = myNode == node;
        meta[lane] = here ? p.e : -1;
        meta[K + lane] = __float_as_int(here ? p.w : 0.f);
        meta[2 * K + lane] = here ? p.pos : -1;
        meta[3 * K + lane] = here ? p.fwdRow : -1;
      }
      if (lane == 0) meta[4 * K] = t;
    }
  }
}

// The last CTA to finish staging records: per other node, one put of the node's rows, one of their
// scales and one of their metadata to the rail peer there, the last adding records + 1 to its
// (kFlagForwardDispatch, this rank) word (+1: a node with no record still says "none").
__device__ void postRecords(const DispatchArgs& a, const Transport& tr, OpSession& ses) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int N = c.nodeSize, nodes = c.link.nRanks / N, myNode = nodeOfRank(c.link.rank, N), T = c.shape.maxTokens;
  const uint64_t metaBytes = uint64_t(fwdRecordInts(c.shape.topk)) * 4;
  ses.readyAllGin(tr, kPhaseDispatchReady);
  if (ses.abort) return;
  for (int n = threadIdx.x; n < nodes; n += kThreads) {
    if (n == myNode) continue;
    const int f = railPeerOf(c.link.rank, n, N), ctx = dataContextOf(f, c.link.ginContexts);
    const uint64_t cnt = uint64_t(r.nodeCount[n]);
    const uint64_t src = uint64_t(fwdRecordRow(n, 0, T)), dst = uint64_t(fwdRecordRow(myNode, 0, T));
    tr.put(f, c.wl.fwdRecvX + dst * a.xRowBytes, c.wl.fwdSendX + src * a.xRowBytes, cnt * a.xRowBytes, ctx);
    tr.put(f, c.wl.fwdRecvScales + dst * a.scaleRowBytes, c.wl.fwdSendScales + src * a.scaleRowBytes, cnt * a.scaleRowBytes, ctx);
    tr.putSignalWord(f, c.wl.fwdRecvMeta + dst * metaBytes, c.wl.fwdSendMeta + src * metaBytes, cnt * metaBytes,
                     tr.ownId(kFlagForwardDispatch), uint32_t(cnt) + 1u, ctx);
  }
  __syncthreads();
}

// Rows of one record q (from source node n, source rank s) to each rank d of this node that needs
// it: the row, its scales and its packed row metadata (fwdRowInts), at the row the layout agreed
// (record metadata): fwdRowsBase + j, j the record's index in the run of rows to d (protocol.h
// "Batching"). An NVLink peer's (or this rank's) receive arrays get them stored in place; a network
// rank's go to j of the segment (n, d) of the forwarding areas, which postForwarded moves with one
// put per array. The whole warp.
__device__ void forwardRecord(const DispatchArgs& a, const Transport& tr, size_t q, int n, int s, int lane) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, Le = c.shape.localExperts, N = c.nodeSize, T = c.shape.maxTokens;
  const int scaleWords = a.scaleRowBytes / 4;
  const int RI = int(fwdRecordInts(K)), WI = int(fwdRowInts(K));
  const RecordArrays rec = RecordArrays::recv(tr.localBase(), c.wl);
  const volatile int32_t* meta = rec.meta + q * RI;
  const int e = lane < K ? meta[lane] : -1;
  const float w = lane < K ? __int_as_float(meta[K + lane]) : 0.f;
  const int pos = lane < K ? meta[2 * K + lane] : -1;
  const int drow = lane < K ? meta[3 * K + lane] : -1;
  const int token = meta[4 * K];
  const int eDest = destOf(e, Le);
  const int dest = drow >= 0 ? eDest : -1;  // the slot's rank when the record's row goes there
  const uint32_t dests = __ballot_sync(0xffffffffu, dest >= 0);
  uint64_t mask = 0;
  char* local = tr.localBase();
  for (uint32_t m = dests; m; m &= m - 1) {
    const int l = __ffs(m) - 1;
    const int d = __shfl_sync(0xffffffffu, dest, l);
    const int row = __shfl_sync(0xffffffffu, drow, l);
    const int dLocal = d % N;
    const int j = row - r.fwdRowsBase[n * N + dLocal];
    mask |= uint64_t(1) << dLocal;
    const bool owned = e >= 0 && eDest == d;
    const bool lsa = tr.lsa(d);
    // Where the row goes: d's receive arrays (NVLink) or the segment (n, d) for the put.
    const uint64_t seg = fwdSegmentRow(n, dLocal, j, N, T);
    char* peer = lsa ? tr.lsaBase(d) : nullptr;
    int32_t* packed = lsa ? reinterpret_cast<int32_t*>(peer + c.wl.recvFwdMeta) + size_t(row) * WI
                          : reinterpret_cast<int32_t*>(local + c.wl.fwdMetaStage) + seg * WI;
    char* x = lsa ? peer + c.wl.recvX + size_t(row) * a.xRowBytes : local + c.wl.fwdOutX + seg * a.xRowBytes;
    float* sc = lsa ? reinterpret_cast<float*>(peer + c.wl.recvScales) + size_t(row) * scaleWords
                    : reinterpret_cast<float*>(local + c.wl.fwdOutScales) + seg * scaleWords;
    if (lane < K) {
      packed[lane] = owned ? e - d * Le : -1;
      packed[K + lane] = __float_as_int(owned ? w : 0.f);
      packed[2 * K + lane] = owned ? pos : -1;
    }
    if (lane == 0) {
      packed[3 * K] = s;
      packed[3 * K + 1] = token;
      packed[3 * K + 2] = int(q);
      r.fwdSlot[q * N + dLocal] = j;  // combine finds d's partial of this record at j
    }
    warpCopy16<true>(x, rec.x + q * a.xRowBytes, a.xRowBytes, lane);
    for (int i = lane; i < scaleWords; i += 32) sc[i] = ((volatile float*)rec.scales)[q * scaleWords + i];
    __syncwarp();
  }
  if (lane == 0) r.fwdMask[q] = mask;
  if (lane < K) r.fwdExperts[q * K + lane] = e;  // combine takes each slot's weight from its owner
}

// The last CTA to finish forwarding (every CTA's rows are staged or stored): per source node n and
// rank d of this node with rows from n, the run of fwdRowsTo rows goes out in one piece: a network
// rank gets one put of the rows, one of their FP8 scales and one of their packed metadata, the
// last adding the rows to d's arrival word of the source (its rail peer on n); an NVLink rank (or
// this rank), whose rows were stored in place, gets the rows added to that word. One thread per
// (n, d): each signal covers the puts before it on its context.
__device__ void postForwarded(const DispatchArgs& a, const Transport& tr) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int R = c.link.nRanks, N = c.nodeSize, nodes = R / N, myNode = nodeOfRank(c.link.rank, N), T = c.shape.maxTokens;
  const uint64_t WB = uint64_t(fwdRowInts(c.shape.topk)) * 4;
  for (int i = threadIdx.x; i < nodes * N; i += kThreads) {
    const int n = i / N, dLocal = i % N, d = myNode * N + dLocal;
    const int rows = r.fwdRowsTo[i];
    if (n == myNode || rows == 0) continue;
    const uint32_t id = ginSignalId(kFlagArriveDispatch, railPeerOf(c.link.rank, n, N), R);
    if (tr.lsa(d)) {
      tr.addLsaWord(d, id, uint32_t(rows));
      continue;
    }
    const int ctx = dataContextOf(d, c.link.ginContexts);
    const uint64_t seg = fwdSegmentRow(n, dLocal, 0, N, T), base = uint64_t(r.fwdRowsBase[i]), cnt = uint64_t(rows);
    tr.put(d, c.wl.recvX + base * a.xRowBytes, c.wl.fwdOutX + seg * a.xRowBytes, cnt * a.xRowBytes, ctx);
    tr.put(d, c.wl.recvScales + base * a.scaleRowBytes, c.wl.fwdOutScales + seg * a.scaleRowBytes, cnt * a.scaleRowBytes, ctx);
    tr.putSignalWord(d, c.wl.recvFwdMeta + base * WB, c.wl.fwdMetaStage + seg * WB, cnt * WB, id, uint32_t(rows), ctx);
  }
  __syncthreads();
}

// The forwarder's step: wait for every rail peer's records (its word reached the running total + 1;
// the value says how many), forward each record's rows (all CTAs share the records), then the last
// CTA posts the runs (postForwarded): the receiver waits for them as for direct rows.
__device__ void forwardRecords(const DispatchArgs& a, const Transport& tr, OpSession& ses, int globalWarp, int numWarps,
                               int lane) {
  __shared__ int counts[kMaxRanks];  // records per source node
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const SessionArgs& sa = c.session;
  const int R = c.link.nRanks, N = c.nodeSize, nodes = R / N, myNode = nodeOfRank(c.link.rank, N), T = c.shape.maxTokens;
  ses.readyAllGin(tr, kPhaseDispatchReady);  // network ranks of this node may receive rows
  bool ok = !ses.abort;
  for (int n = threadIdx.x; n < nodes; n += kThreads) {
    counts[n] = 0;
    if (n == myNode || !ok) continue;
    const int s = railPeerOf(c.link.rank, n, N);
    const uint32_t id = ginSignalId(kFlagForwardDispatch, s, R);
    const uint32_t prev = sa.arrived[kArrivedFwdDispatch * R + s];
    ok = tr.waitWord(id, s, prev + 1u, kPhaseDispatchData);
    if (ok) counts[n] = int(tr.readWord(id, s) - prev - 1u);
  }
  if (!ok) ses.abort = 1;
  __syncthreads();
  for (int n = 0; n < nodes && !ses.abort; ++n) {
    const int s = railPeerOf(c.link.rank, n, N);
    for (int j = globalWarp; j < counts[n]; j += numWarps) forwardRecord(a, tr, size_t(fwdRecordRow(n, j, T)), n, s, lane);
  }
  // Every CTA counts (lastCtaOf re-arms the step for the next op), aborted or not.
  if (!lastCtaOf(&sa.state->fwdCtas[kFwdRowsWritten]) || ses.abort) return;
  postForwarded(a, tr);
  for (int n = threadIdx.x; n < nodes; n += kThreads) {
    if (n == myNode) continue;
    r.fwdCount[n] = counts[n];
    sa.arrived[kArrivedFwdDispatch * R + railPeerOf(c.link.rank, n, N)] += uint32_t(counts[n]) + 1u;
  }
  __syncthreads();
}

// A received row of a forwarded source: its metadata came packed (recvFwdMeta); unpack it into the
// receive arrays the copy-out reads (and the caller may own: zero-copy). The whole warp; the
// warp's later reads of these arrays see the stores.
__device__ void unpackForwarded(const DispatchArgs& a, const RowArrays& in, size_t row, int lane) {
  const int K = a.c.shape.topk, WI = int(fwdRowInts(K));
  const char* base = in.x - a.c.wl.recvX;  // this rank's window (in: its receive arrays)
  const volatile int32_t* p = reinterpret_cast<const volatile int32_t*>(base + a.c.wl.recvFwdMeta) + row * WI;
  if (lane < K) {
    in.idx[row * K + lane] = p[lane];
    in.weights[row * K + lane] = __int_as_float(p[K + lane]);
    in.pos[row * K + lane] = p[2 * K + lane];
  }
  if (lane < 2) in.info[row * 2 + lane] = p[3 * K + lane];
  __syncwarp();
}

// The received rows of one receive wave (protocol.h, waveRowBegin): a network source's rows whose
// wave is `wave`, every row of an NVLink source (or of this rank) in the last wave. One wave: all.
struct WaveRows {
  const EpCommon& c;
  const int* recvBase;  // [nRanks + 1]
  int wave, waves;
  __device__ bool has(int s, int i) const {
    if (waves == 1) return true;
    if (isLsaPeer(c.link.rank, c.link.lsaRank, c.link.lsaSize, s)) return wave == waves - 1;
    return waveOfRow(recvBase[s + 1] - recvBase[s], waves, i - recvBase[s]) == wave;
  }
  __device__ bool has(int i) const { return waves == 1 || has(sourceOfRow(recvBase, c.link.nRanks, i), i); }
};

// Deduplicated layout into caller buffers: row i of the window arrays -> row i of the outputs.
__device__ void copyDedup(const DispatchArgs& a, const RowArrays& in, Share recvRows, const WaveRows& wave,
                          int globalWarp, int numWarps, int lane) {
  const int K = a.c.shape.topk, scaleWords = a.scaleRowBytes / 4;
  const bool copyX = !a.zeroCopy;
  // An output that is the window's own array (as the caller addresses it) needs no copy.
  const RowArrays win(a.c.userBase, RowOffsets::recv(a.c.wl));
  const bool copyScales = scaleWords && a.recvScales && a.recvScales != win.scales;
  const bool copyIdx = a.recvTopkIdx && a.recvTopkIdx != win.idx;
  const bool copyW = a.recvTopkWeights && a.recvTopkWeights != win.weights;
  const bool copyInfo = a.recvSrcInfo && a.recvSrcInfo != win.info;
  const bool hybrid = a.c.nodeSize > 0;  // forwarded rows' metadata is unpacked even without a copy
  if (!hybrid && !copyX && !copyScales && !copyIdx && !copyW && !copyInfo) return;
  for (int i = recvRows.begin + globalWarp; i < recvRows.end; i += numWarps) {
    if (!wave.has(i)) continue;
    const size_t row = size_t(i);
    if (hybrid && isForwarded(sourceOfRow(a.r.recvBase, a.c.link.nRanks, i), a.c.link.rank, a.c.nodeSize))
      unpackForwarded(a, in, row, lane);
    if (copyX) warpCopy16<true>(a.recvX + row * a.xRowBytes, in.x + row * a.xRowBytes, a.xRowBytes, lane);
    if (copyScales)
      for (int j = lane; j < scaleWords; j += 32) a.recvScales[row * scaleWords + j] = ((volatile float*)in.scales)[row * scaleWords + j];
    if (lane < K) {
      if (copyIdx) a.recvTopkIdx[row * K + lane] = ((volatile int32_t*)in.idx)[row * K + lane];
      if (copyW) a.recvTopkWeights[row * K + lane] = ((volatile float*)in.weights)[row * K + lane];
    }
    if (lane < 2 && copyInfo) a.recvSrcInfo[row * 2 + lane] = ((volatile int32_t*)in.info)[row * 2 + lane];
  }
}

// Expanded layout: received row i goes to one output row per local expert of its token. This
// rank's own rows were written by its send phase (sendTokens) and are skipped.
__device__ void copyExpanded(const DispatchArgs& a, const RowArrays& in, Share recvRows, const WaveRows& wave,
                             int globalWarp, int numWarps, int lane, char* (&dsts)[kWarps][kMaxTopk],
                             int (&rows)[kWarps][kMaxTopk]) {
  const EpCommon& c = a.c;
  const Route& r = a.r;
  const int K = c.shape.topk, Le = c.shape.localExperts, warp = threadIdx.x >> 5, scaleWords = a.scaleRowBytes / 4;
  const uint32_t lanesBelow = (1u << lane) - 1u;
  const RowsExcept others = rowsExcept(recvRows, intersect(Share{r.recvBase[c.link.rank], r.recvBase[c.link.rank + 1]}, recvRows));
  const int n = others.count();
  for (int v = globalWarp; v < n; v += numWarps) {
    const int i = others.rowOf(v);
    const int s = sourceOfRow(r.recvBase, c.link.nRanks, i);
    if (!wave.has(s, i)) continue;
    const size_t row = size_t(i);
    if (isForwarded(s, c.link.rank, c.nodeSize)) unpackForwarded(a, in, row, lane);
    int outRow = -1;
    float w = 0.f;
    if (lane < K) {
      const int le = ((volatile int32_t*)in.idx)[row * K + lane];
      if (le >= 0) {
        outRow = r.expertStart[le] + r.srcExpertOff[s * Le + le] + ((volatile int32_t*)in.pos)[row * K + lane];
        w = ((volatile float*)in.weights)[row * K + lane];
      }
      r.recvExpRows[row * K + lane] = outRow;
    }
    const uint32_t local = __ballot_sync(0xffffffffu, outRow >= 0);
    const int srcToken = ((volatile int32_t*)in.info)[row * 2 + 1];
    if (outRow >= 0) {
      const int j = __popc(local & lanesBelow);
      dsts[warp][j] = a.recvX + size_t(outRow) * a.xRowBytes;
      rows[warp][j] = outRow;
      if (a.recvTopkWeights) a.recvTopkWeights[outRow] = w;
      if (a.recvSrcInfo) {
        a.recvSrcInfo[2 * size_t(outRow)] = s;
        a.recvSrcInfo[2 * size_t(outRow) + 1] = srcToken;
      }
    }
    __syncwarp();
    const int n = __popc(local);
    warpCopy16Multi<true>(dsts[warp], n, in.x + row * a.xRowBytes, a.xRowBytes, lane);
    if (scaleWords)
      for (int j = 0; j < n; ++j)
        for (int q = lane; q < scaleWords; q += 32)
          a.recvScales[size_t(rows[warp][j]) * scaleWords + q] = ((volatile float*)in.scales)[row * scaleWords + q];
    __syncwarp();
  }
}

// Expanded layout: alignment gap rows get no source (-1), weight 0, and zeros when asked.
__device__ void fillGaps(const DispatchArgs& a, int globalWarp, int numWarps, int lane) {
  const Route& r = a.r;
  const int Le = a.c.shape.localExperts, A = r.alignment, scaleWords = a.scaleRowBytes / 4;
  if (!r.expanded || A <= 1) return;
  for (int g = globalWarp; g < Le * A; g += numWarps) {
    const int le = g / A;
    const int row = r.expertStart[le] + r.expertCount[le] + g % A;
    if (row >= r.expertStart[le + 1]) continue;
    if (a.zeroGaps) {
      warpZero16(a.recvX + size_t(row) * a.xRowBytes, a.xRowBytes, lane);
      for (int j = lane; j < scaleWords; j += 32) a.recvScales[size_t(row) * scaleWords + j] = 0.f;
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

__global__ void __launch_bounds__(kThreads, 1) dispatchKernel(const __grid_constant__ DispatchArgs a) {
  __shared__ OpSession ses;
  __shared__ char* dsts[kWarps][kMaxTopk];
  __shared__ int rows[kWarps][kMaxTopk];
  const EpCommon& c = a.c;
  const Route& r = a.r;
  Transport tr(c.link);
  tr.startBeacon(kBeaconDispatch, nextSeq(&c.session.state->opSeq[kOpDispatch]));
  const int lane = threadIdx.x & 31;
  const int globalWarp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int numWarps = gridDim.x * kWarps;
  const bool gin = tr.hasGin();
  const bool hybrid = c.nodeSize > 0;
  const GinRows ginRows{r.recvBase, nullptr};

  ses.begin(tr, a.c.session, kOpDispatch, kPhaseDispatchReady, c.nodeSize);
  const int T = r.totals->numTokens;
  // Hybrid: the records go first (the network hop feeds the forwarders), so they are on the wire
  // while this node's rows are staged and sent, and the forwarders find them landed.
  if (hybrid) {
    if (!ses.abort) stageRecords(a, tr, shareOf(T, gridDim.x, blockIdx.x), lane);
    if (lastCtaOf(&c.session.state->fwdCtas[kFwdRecordsStaged]) && !ses.abort) postRecords(a, tr, ses);
  }
  // Send in put rounds (protocol.h): round j's rows leave while round j+1 is staged.
  const int rounds =
      putRoundsOf((T + kLayoutChunk - 1) / kLayoutChunk, gin, defaultPutRounds(c.link.nRanks - c.link.lsaSize));
  for (int j = 0; j < rounds; ++j) {
    const Share tok = dispatchRoundTokens(T, rounds, j);
    const Share mine = shareOf(tok.end - tok.begin, gridDim.x, blockIdx.x);
    if (gin && j == 0 && !ses.abort) stageGinMeta(a, tr, shareOf(T, gridDim.x, blockIdx.x), lane);
    if (!ses.abort) sendTokens(a, tr, Share{tok.begin + mine.begin, tok.begin + mine.end}, lane, dsts, gin);
    if (gin && ses.lastToStage(a.c.session, kOpDispatch, j) && !ses.abort) putRound(a, tr, ses, tok, j == 0);
  }
  if (hybrid) forwardRecords(a, tr, ses, globalWarp, numWarps, lane);  // this rank's forwarder step
  ses.arriveLsa(tr, kOpDispatch);
  // Receive in waves (network sources' rows as their rounds land; NVLink sources in the last wave)
  // and, within a wave, in groups of sources starting with the group after this rank's own: each
  // piece is copied out as soon as it arrived, while later ones may still be on the way.
  const RowArrays in(tr.localBase(), RowOffsets::recv(c.wl));
  const int groups = c.link.nRanks < kArrivalGroups ? c.link.nRanks : kArrivalGroups;
  int ownGroup = 0;
  while (shareOf(c.link.nRanks, groups, ownGroup).end <= c.link.rank) ++ownGroup;
  // Hybrid: forwarded rows land in no particular order (one wave: all of a source's rows).
  const int waves = gin && !hybrid ? rounds : 1;
  for (int w = 0; w < waves && !ses.abort; ++w) {
    const WaveRows wave{c, r.recvBase, w, waves};
    for (int k = 1; k <= groups && !ses.abort; ++k) {
      const int g = (ownGroup + k) % groups;
      const Share src = shareOf(c.link.nRanks, groups, g);
      ses.waitSourceWave(tr, a.c.session, kOpDispatch, kPhaseDispatchData, src.begin, src.end, ginRows, w, waves);
      if (ses.abort) break;
      const Share recvRows{r.recvBase[src.begin], r.recvBase[src.end]};
      if (r.expanded)
        copyExpanded(a, in, recvRows, wave, globalWarp, numWarps, lane, dsts, rows);
      else
        copyDedup(a, in, recvRows, wave, globalWarp, numWarps, lane);
    }
  }
  tr.mark(kStepArrived);
  if (!ses.abort) {
    if (r.expanded) fillGaps(a, globalWarp, numWarps, lane);
    if (blockIdx.x == 0) {
      for (int le = threadIdx.x; le <= c.shape.localExperts; le += kThreads) {
        if (a.expertCounts && le < c.shape.localExperts) a.expertCounts[le] = r.expertCount[le];
        if (a.expertOffsets) a.expertOffsets[le] = r.expertStart[le];
      }
      if (threadIdx.x == 0 && a.numRecvRows) *a.numRecvRows = r.totals->outRows;
    }
  }
  if (gin) tr.completeGin();  // staging is reused by the next dispatch
  ses.end(tr, a.c.session, kOpDispatch, ginRows);
}

}  // namespace

cudaError_t launchDispatch(const DispatchArgs& args, int nCtas, cudaStream_t stream) {
  dispatchKernel<<<nCtas, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t dispatchMaxCtasPerSm(int* ctas) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas, dispatchKernel, kThreads, 0);
}

}  // namespace epx::dev
