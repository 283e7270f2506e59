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
#pragma once
#include <cstdint>

namespace epx::dev {

enum FlagKind : int {
  kFlagCounts = 0,          // source wrote its counts for layout #seq (value: seq)
  kFlagReadyDispatch = 1,   // source may receive dispatch #seq from us (value: seq)
  kFlagReadyCombine = 2,
  kFlagArriveDispatch = 3,  // source's CTAs finished storing dispatch rows (cumulative CTAs)
  kFlagArriveCombine = 4,   // push: rows stored; pull: done reading our combineX
  kNumFlagKinds = 5
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
  bool hasGinPeers() const { return lsaSize < nRanks; }
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
  uint64_t totalBytes;
  uint32_t countStride;  // ints per count entry: nRanks (rows to every rank) + localExperts, rounded up
  uint32_t rows;         // nRanks * maxTokens
  uint32_t stageRows;    // maxTokens * min(topk, network peers): rows this rank can send over GIN
  uint32_t combineRowBytes;  // hidden * 2 (BF16) or hidden * 4 (FP32 combine)
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
  wl.totalBytes = cur.total();
  return wl;
}

// Bytes that must be zero before any peer can write (flags and counts).
inline uint64_t windowZeroedPrefix(const WindowLayout& wl) { return wl.countStage; }

}  // namespace epx::dev
