// The regions of an EP group's registered window, laid out by device/ for every kernel that uses
// the window (layout, dispatch, combine). Plain C++ usable on the host (sizing, CPU tests) and on
// the device; identical on every rank of a group (NCCL maps peers' windows with the local size).
//
// Region roles:
//   sync     LSA flags: u32 [kNumFlagKinds][nRanks], one word per (kind, source rank), written by
//            NVLink peers with release stores/adds (GIN peers use GIN signals instead, see
//            protocol.h).
//   counts   the count exchange of ncclEpDispatchLayout: i32 [2 parity][nRanks source][countStride].
//   recv*    dispatch receive arrays, one row per (source token, destination rank), rows from source
//            s start at the prefix of the rows earlier sources send (agreed in the count exchange).
//   combine* combine: combineX is the expert output in place (pull combine, and the staging area
//            of rows returned over GIN); combineRecv[expertRank][slot] receives returned rows.
//   stage*   GIN only (0 bytes when every peer is an NVLink peer): puts go from registered memory,
//            so rows for network peers are staged here, grouped by destination in receive order,
//            and sent with one put per destination and array.
//   fwd*     hybrid forwarding only (0 bytes in direct mode; protocol.h "Hybrid forwarding"):
//            fwdSend* this rank's token records, one per (destination node, token), grouped by node;
//            fwdRecv* the records of the rank on this rank's rail in every other node, by source
//            node; fwdOut* / fwdMetaStage the rows and packed row metadata a forwarder puts to the
//            network ranks of its node, one segment per (source node, rank) (protocol.h
//            fwdSegmentRow; fwdOut* only when the node has network ranks, i.e. virtual nodes);
//            recvFwdMeta the packed metadata of rows that arrived forwarded; fwdPart* combine
//            partials of the node's ranks for the records this rank forwarded, in the same
//            segments; fwdNode* their node sums, staged for the one put back to each source node.
#pragma once
#include <cstdint>

namespace epx::dev {

enum FlagKind : int {
  kFlagCounts = 0,          // source wrote its counts for layout #seq (value: seq)
  kFlagReadyDispatch = 1,   // source may receive dispatch #seq from us (value: seq)
  kFlagReadyCombine = 2,
  kFlagArriveDispatch = 3,  // source's CTAs finished storing dispatch rows (cumulative CTAs)
  kFlagArriveCombine = 4,   // push: rows stored; pull: done reading our combineX
  kFlagForwardDispatch = 5, // hybrid: a rail peer's token records for this forwarder (records + 1 per op)
  kFlagForwardCombine = 6,  // hybrid: partials a rank of this node stored for this forwarder (rows)
  kNumFlagKinds = 7
};

// Sizes that decide the window (all ranks agree on them).
struct WindowShape {
  int nRanks = 1;
  int lsaSize = 1;        // ranks per NVLink (LSA) domain; < nRanks means GIN peers exist
  int maxTokens = 1;      // per rank
  int hidden = 8;
  int topk = 1;
  int localExperts = 1;
  bool fp8 = false;
  bool fp32Combine = false;  // combineRecv holds FP32 rows (exact combine precision)
  uint32_t extraFlagWords = 0;  // synchronization words after the kNumFlagKinds ones (low-latency groups)
  int nodeSize = 0;       // hybrid forwarding: ranks per node (0: direct mode, no fwd* regions)
  bool hasGinPeers() const { return lsaSize < nRanks; }
  int nodes() const { return nodeSize > 0 ? nRanks / nodeSize : 0; }
};

struct WindowLayout {
  uint64_t flags;        // u32 [kNumFlagKinds][nRanks], then WindowShape::extraFlagWords
  uint64_t counts;       // i32 [2][nRanks][countStride]
  uint64_t countStage;   // i32 [nRanks][countStride] (GIN: this rank's entries, staged per destination)
  uint64_t recvX;        // [rows][hidden * 2 bytes]: BF16 rows, or FP8 rows packed at stride hidden
  uint64_t recvScales;   // f32 [rows][hidden / 128]
  uint64_t recvIdx;      // i32 [rows][K]: local expert index or -1
  uint64_t recvWeights;  // f32 [rows][K]
  uint64_t recvInfo;     // i32 [rows][2]: source rank, source token
  uint64_t recvPos;      // i32 [rows][K]: position among the source's tokens of that expert
  uint64_t combineX;     // BF16 [rows][hidden] (rows of combineRowBytes reserved: FP32 staging)
  uint64_t combineRecv;  // [nRanks][maxTokens][hidden] BF16 (or FP32 with fp32Combine)
  uint64_t combineRecvW; // f32 [nRanks][maxTokens][K]
  uint64_t combineStageW;// f32 [rows][K] (GIN: combine weights staged for the put)
  uint64_t stageX;       // GIN dispatch staging: [stageRows][hidden * 2 bytes]
  uint64_t stageScales;  // f32 [stageRows][hidden / 128]
  uint64_t stageIdx;     // i32 [stageRows][K]
  uint64_t stageWeights; // f32 [stageRows][K]
  uint64_t stageInfo;    // i32 [stageRows][2]
  uint64_t stagePos;     // i32 [stageRows][K]
  uint64_t fwdSendX;     // hybrid: [fwdRows][hidden * 2 bytes] records to forwarders, row node * maxTokens + slot
  uint64_t fwdSendScales;// f32 [fwdRows][hidden / 128]
  uint64_t fwdSendMeta;  // i32 [fwdRows][fwdRecordInts(K)]
  uint64_t fwdRecvX;     // hybrid: the same three arrays as received, row sourceNode * maxTokens + slot
  uint64_t fwdRecvScales;
  uint64_t fwdRecvMeta;
  uint64_t fwdOutX;      // [nodes][nodeSize][maxTokens] rows (hidden * 2 bytes) forwarded to network node peers
  uint64_t fwdOutScales; // f32 [nodes][nodeSize][maxTokens][hidden / 128]
  uint64_t fwdMetaStage; // i32 [nodes][nodeSize][maxTokens][fwdRowInts(K)]: their packed row metadata
  uint64_t recvFwdMeta;  // i32 [rows][fwdRowInts(K)]: packed metadata of forwarded receive rows
  uint64_t fwdPartX;     // combine: [nodes][nodeSize][maxTokens] partial rows (combineRowBytes) of the node's ranks
  uint64_t fwdPartW;     // f32 [nodes][nodeSize][maxTokens][K]
  uint64_t fwdNodeX;     // combine: [fwdRows] node sums (combineRowBytes), put back to the source nodes
  uint64_t fwdNodeW;     // f32 [fwdRows][K]
  uint64_t totalBytes;
  uint32_t countStride;  // ints per count entry: nRanks (rows to every rank) + localExperts, rounded up
  uint32_t rows;         // nRanks * maxTokens
  uint32_t stageRows;    // maxTokens * min(topk, network peers): rows this rank can send over GIN
  uint32_t combineRowBytes;  // hidden * 2 (BF16) or hidden * 4 (FP32 combine)
  uint32_t fwdRows;          // hybrid: nodes * maxTokens (records one rank sends or forwards); 0 direct
  uint32_t nodeSize;         // hybrid: ranks per node; 0 direct
};

constexpr uint64_t kWindowRegionAlign = 4096;
constexpr uint64_t kWindowTotalAlign = uint64_t(2) << 20;

inline constexpr uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Lays out a window's areas one after another: take() returns where the next area of `bytes`
// starts (aligned to `align`) and moves past it; `off` is the end so far. Every layout of the
// window (EP groups, low latency, buckets, PP, load balancing) places its areas with it.
struct RegionCursor {
  uint64_t off = 0;
  constexpr uint64_t take(uint64_t bytes, uint64_t align = kWindowRegionAlign) {
    off = alignUp(off, align);
    const uint64_t at = off;
    off += bytes;
    return at;
  }
  constexpr uint64_t total() const { return alignUp(off, kWindowTotalAlign); }
};

// Count entry sent by every rank to every rank: [rows to each rank (nRanks)] [counts of the
// receiver's local experts (localExperts)].
inline constexpr uint32_t countStrideOf(int nRanks, int localExperts) {
  return uint32_t(alignUp(uint64_t(nRanks) + uint64_t(localExperts), 4));
}

// Hybrid forwarding's packed metadata (ints; 16-byte multiples).
//   record (fwdSend/fwdRecv, one per (token, destination node)): global expert id [K], weight [K]
//     (float bits), position among the source's tokens of that expert [K], row in the receive
//     arrays of the slot's rank when the slot is the first of its rank in that node, else -1 [K],
//     source token.
//   row (recvFwdMeta / fwdMetaStage, one per forwarded receive row): local expert index or -1 [K],
//     weight [K], position [K], source rank, source token, the record's row at the forwarder.
inline constexpr uint32_t fwdRecordInts(int topk) { return uint32_t(alignUp(uint64_t(4) * topk + 1, 4)); }
inline constexpr uint32_t fwdRowInts(int topk) { return uint32_t(alignUp(uint64_t(3) * topk + 3, 4)); }
inline WindowLayout layoutWindow(const WindowShape& s) {
  WindowLayout wl{};
  const uint64_t K = s.topk, H = s.hidden, R = s.nRanks;
  const uint64_t rows = R * uint64_t(s.maxTokens);
  const uint64_t netPeers = s.hasGinPeers() ? uint64_t(s.nRanks - s.lsaSize) : 0;
  const uint64_t stageRows = uint64_t(s.maxTokens) * (netPeers < K ? netPeers : K);
  wl.rows = uint32_t(rows);
  wl.stageRows = uint32_t(stageRows);
  wl.countStride = countStrideOf(s.nRanks, s.localExperts);
  wl.combineRowBytes = uint32_t(H * (s.fp32Combine ? 4 : 2));
  RegionCursor cur;
  wl.flags = cur.take((uint64_t(kNumFlagKinds) * R + s.extraFlagWords) * 4);
  wl.counts = cur.take(uint64_t(2) * R * wl.countStride * 4);
  wl.countStage = cur.take(s.hasGinPeers() ? R * wl.countStride * 4 : 0);
  // The six per-row arrays of dispatch, for n rows (receive side and GIN staging side alike).
  auto rowArrays = [&](uint64_t n, uint64_t& x, uint64_t& scales, uint64_t& idx, uint64_t& weights, uint64_t& info,
                       uint64_t& pos) {
    x = cur.take(n * H * 2);
    scales = cur.take(s.fp8 ? n * (H / 128) * 4 : 0);
    idx = cur.take(n * K * 4);
    weights = cur.take(n * K * 4);
    info = cur.take(n * 2 * 4);
    pos = cur.take(n * K * 4);
  };
  rowArrays(rows, wl.recvX, wl.recvScales, wl.recvIdx, wl.recvWeights, wl.recvInfo, wl.recvPos);
  wl.combineX = cur.take(rows * wl.combineRowBytes);  // BF16 rows in place; FP32 staging (exact combine)
  wl.combineRecv = cur.take(rows * wl.combineRowBytes);
  wl.combineRecvW = cur.take(rows * K * 4);
  wl.combineStageW = cur.take(s.hasGinPeers() ? rows * K * 4 : 0);
  rowArrays(stageRows, wl.stageX, wl.stageScales, wl.stageIdx, wl.stageWeights, wl.stageInfo, wl.stagePos);
  const uint64_t fwd = uint64_t(s.nodes()) * uint64_t(s.maxTokens);  // 0 in direct mode
  const uint64_t node = s.nodeSize > 0 ? uint64_t(s.nodeSize) : 0;
  wl.fwdRows = uint32_t(fwd);
  wl.nodeSize = uint32_t(node);
  wl.fwdSendX = cur.take(fwd * H * 2);
  wl.fwdSendScales = cur.take(s.fp8 ? fwd * (H / 128) * 4 : 0);
  wl.fwdSendMeta = cur.take(fwd * fwdRecordInts(s.topk) * 4);
  wl.fwdRecvX = cur.take(fwd * H * 2);
  wl.fwdRecvScales = cur.take(s.fp8 ? fwd * (H / 128) * 4 : 0);
  wl.fwdRecvMeta = cur.take(fwd * fwdRecordInts(s.topk) * 4);
  // Rows a forwarder stages for network ranks of its node: only when the node has some (a node
  // holds whole NVLink teams; virtual nodes of fake nodes have lsaSize 1).
  const uint64_t out = s.lsaSize < s.nodeSize ? fwd * node : 0;
  wl.fwdOutX = cur.take(out * H * 2);
  wl.fwdOutScales = cur.take(s.fp8 ? out * (H / 128) * 4 : 0);
  wl.fwdMetaStage = cur.take(out * fwdRowInts(s.topk) * 4);
  wl.recvFwdMeta = cur.take(fwd ? rows * fwdRowInts(s.topk) * 4 : 0);
  wl.fwdPartX = cur.take(fwd * node * wl.combineRowBytes);
  wl.fwdPartW = cur.take(fwd * node * K * 4);
  wl.fwdNodeX = cur.take(fwd * wl.combineRowBytes);
  wl.fwdNodeW = cur.take(fwd * K * 4);
  wl.totalBytes = cur.total();
  return wl;
}

// Bytes that must be zero before any peer can write (flags and counts).
inline uint64_t windowZeroedPrefix(const WindowLayout& wl) { return wl.countStage; }

}  // namespace epx::dev
