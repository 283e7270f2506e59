// The low-latency (LL) region of an EP group's window and its synchronization words: pure
// arithmetic, shared by the host (sizing, CPU tests) and the LL kernels. No CUDA types.
//
// Rows are per (local expert, source rank, slot): slot = position of the (token, top-k slot) among
// the source's tokens routed to that expert, in token order, so every destination row is known to
// the sender without a count exchange. Every region that peers write is double-buffered by a bank
// = parity of the group's device-side LL sequence number (ncclEpGroup owns it, not a handle: two
// handles used alternately get alternate banks and never share a word; NVIDIA/nccl #2303):
//   dispatchRecv  [2 bank][nRanks src] areas of srcBytes: a header (hdrBytes: Le int32, 16-byte
//                 aligned), then [Le][maxTokens] messages: payload (BF16 row, or FP8 row then its
//                 FP32 scales, one per 128 channels), then meta (source token, top-k slot); the
//                 message stride depends on the call's dtype (msgBytes), the area is sized for
//                 BF16, the larger. NVLink (LSA) sources store message (le, slot) at
//                 [le][slot]; a network (GIN) source puts its header (its rows per local expert)
//                 and its rows packed in its staging order (local expert, then slot) in one put:
//                 the receiver finds them through the header (ginRecvMsg)
//   dispatchStage [nRanks] headers + [maxTokens * topk] messages: rows for network (GIN) peers,
//                 grouped by global expert in expert order (GIN puts only from registered
//                 memory), destination d's header right before d's first row, so header and rows
//                 of one destination rank are contiguous: one put per destination rank
//   combineRecv   [2 bank][numExperts][maxTokens] BF16 rows at the source rank: expert e's output
//                 for the token in slot `slot` of e (NVLink experts); for a GIN expert rank r the
//                 bank's Le * maxTokens rows of r's experts are r's landing area: the rows packed
//                 in this rank's dispatch staging order (ginCombineRecvRow)
//   combineSend   [Le][nRanks * maxTokens] BF16 rows: the zero-copy combine input (dispatch output
//                 layout); otherwise GIN staging of combine, packed by source rank, then local
//                 expert, then slot (combineStageRow), one put per source rank
//
// Synchronization words (LSA: u32 in the flags region; GIN: signal with the same index), all
// cumulative, never reset, indexed after the high-throughput words (protocol.h):
//   count(bank, le, src)  dispatch, LSA source: src adds (rows it sent to local expert le) + 1 once
//                         per op on that bank; the receiver keeps its running total per word (LlState)
//   combineArrive(bank, src)  combine: src adds 1 per op on that bank after all its rows for us
//   dispatchArrive(bank, src) dispatch, GIN source: src adds 1 per op on that bank with its one
//                         put of header + rows (the signal is applied after the data)
//   free(kind, src)       src finished receiving op #seq of kind (dispatch/combine): value seq.
//                         A sender puts op #seq into bank seq&1 only when free >= seq - 2 (the
//                         receiver has consumed the op that used that bank before).
#pragma once
#include <cstdint>

#include "epx/device/protocol.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

constexpr int kLlBanks = 2;
constexpr int kLlScaleBlock = 128;    // channels per FP32 scale (and the hidden granularity)
constexpr int kLlMetaBytes = 16;      // int32 source token, int32 top-k slot, 8 bytes padding
constexpr int kLlMaxTokens = 4096;    // maxTokensPerRank of an LL group (decode)
constexpr float kFp8E4m3Max = 448.f;  // largest finite e4m3 value
constexpr float kLlMinAmax = 1e-4f;   // amax floor of the FP8 cast (an all-zero block gets this scale)

EPX_HD uint32_t llAlign16(uint32_t v) { return (v + 15u) & ~15u; }

enum LlOp : int { kLlDispatch = 0, kLlCombine = 1, kLlNumOps = 2 };

// GIN completion counters of a low-latency group: each op kind has its own range of nCtas (CTA b of
// op `op` counts on llGinCounterBase(op, nCtas) + b), so a send half waits only for its own kind's
// earlier puts before it overwrites that kind's staging rows — not for the other kind's puts,
// still in flight right after the other kind's send.
EPX_HD int llGinCounterBase(int op, int nCtas) { return op * nCtas; }
EPX_HD int llGinCounterCount(int nCtas) { return kLlNumOps * nCtas; }

struct LlShape {
  int nRanks = 1;
  int maxTokens = 1;
  int hidden = 128;
  int topk = 1;
  int numExperts = 1;
  bool fp8 = false;  // FP8 dispatch allowed
  int localExperts() const { return numExperts / nRanks; }
};

struct LlLayout {
  uint64_t dispatchRecv;   // [2][nRanks] srcBytes: header, [Le][maxTokens] msgBytes
  uint64_t dispatchStage;  // nRanks headers + [maxTokens * topk] msgBytes
  uint64_t srcBytes;       // one source's area of a bank in dispatchRecv
  uint64_t combineRecv;    // [2][numExperts][maxTokens] rowBytes
  uint64_t combineSend;    // [Le][nRanks * maxTokens] rowBytes
  uint64_t endBytes;       // end of the LL region (from the window's start)
  uint32_t rowBytes;       // combine rows: hidden * 2
  int hidden, nRanks, maxTokens, localExperts, numExperts;
  uint32_t wordBase;       // first LL synchronization word (after the high-throughput words)

  // ---- dispatch messages: [payload][scales (FP8)][meta] ----
  EPX_HD uint32_t payloadBytes(bool fp8) const { return uint32_t(hidden) * (fp8 ? 1u : 2u); }
  EPX_HD uint32_t scaleBytes(bool fp8) const { return fp8 ? llAlign16(uint32_t(hidden / kLlScaleBlock) * 4u) : 0u; }
  EPX_HD uint32_t metaOffset(bool fp8) const { return payloadBytes(fp8) + scaleBytes(fp8); }
  EPX_HD uint32_t msgBytes(bool fp8) const { return metaOffset(fp8) + kLlMetaBytes; }
  // A header: Le int32 row counts, padded to 16 bytes (the messages after it stay aligned).
  EPX_HD uint32_t hdrBytes() const { return llAlign16(uint32_t(localExperts) * sizeof(int32_t)); }
  // Header of source src's area in `bank` (GIN sources write it; the put's landing address).
  EPX_HD uint64_t hdr(int bank, int src) const { return dispatchRecv + (uint64_t(bank) * nRanks + src) * srcBytes; }
  EPX_HD uint64_t recvMsg(int bank, int le, int src, int slot, bool fp8) const {
    return hdr(bank, src) + hdrBytes() + (uint64_t(le) * maxTokens + slot) * msgBytes(fp8);
  }
  // Message `idx` of GIN source src's landing area in `bank` (its rows packed: local expert, slot).
  EPX_HD uint64_t ginRecvMsg(int bank, int src, int idx, bool fp8) const { return recvMsg(bank, 0, src, idx, fp8); }
  // Staging row `row` (global expert order), destined to rank dst: after the headers of ranks <= dst.
  EPX_HD uint64_t stageMsg(int row, int dst, bool fp8) const {
    return dispatchStage + uint64_t(dst + 1) * hdrBytes() + uint64_t(row) * msgBytes(fp8);
  }
  // Header for rank dst in staging, right before its first row `firstRow`.
  EPX_HD uint64_t hdrStage(int dst, int firstRow, bool fp8) const { return stageMsg(firstRow, dst, fp8) - hdrBytes(); }
  EPX_HD uint64_t combineRecvRow(int bank, int expert, int slot) const {
    return combineRecv + ((uint64_t(bank) * numExperts + expert) * uint64_t(maxTokens) + slot) * rowBytes;
  }
  EPX_HD uint64_t combineSendRow(int le, int row) const {
    return combineSend + (uint64_t(le) * nRanks * uint64_t(maxTokens) + row) * rowBytes;
  }
  // Row `idx` of GIN expert rank r's landing area in `bank` (rows packed in this rank's staging order).
  EPX_HD uint64_t ginCombineRecvRow(int bank, int r, int idx) const { return combineRecvRow(bank, r * localExperts, idx); }
  // Row `idx` of the packed GIN combine staging (source rank, local expert, slot).
  EPX_HD uint64_t combineStageRow(int idx) const { return combineSendRow(0, idx); }
  // Rows of one local expert in the dispatch output (and the combine input).
  EPX_HD int rowsPerExpert() const { return nRanks * maxTokens; }

  // ---- synchronization words ----
  EPX_HD uint32_t countWord(int bank, int le, int src) const {
    return wordBase + (uint32_t(bank) * localExperts + le) * nRanks + src;
  }
  EPX_HD uint32_t combineArriveWord(int bank, int src) const {
    return wordBase + uint32_t(kLlBanks) * localExperts * nRanks + uint32_t(bank) * nRanks + src;
  }
  EPX_HD uint32_t dispatchArriveWord(int bank, int src) const {
    return wordBase + uint32_t(kLlBanks) * localExperts * nRanks + uint32_t(kLlBanks + bank) * nRanks + src;
  }
  EPX_HD uint32_t freeWord(int op, int src) const {
    return wordBase + uint32_t(kLlBanks) * localExperts * nRanks + uint32_t(2 * kLlBanks) * nRanks +
           uint32_t(op) * nRanks + src;
  }
  EPX_HD uint32_t wordCount() const {
    return uint32_t(kLlBanks) * localExperts * nRanks + uint32_t(2 * kLlBanks + kLlNumOps) * nRanks;
  }
};

// Bank of LL op #seq (seq counts from 1 per op kind).
EPX_HD int llBankOf(uint32_t seq) { return int(seq & 1u); }
// Value of a combineArrive word once op #seq (on bank seq & 1) has arrived: ops so far on that bank.
EPX_HD uint32_t llArriveTarget(uint32_t seq) { return (seq + 1u) >> 1; }
// A sender may put op #seq once the receiver's free word allows it with depth kLlBanks
// (protocol.h mayWrite: the receiver consumed op seq - 2, the bank's previous op).


// Synchronization words of an LL group: the high-throughput ones, then the LL ones.
EPX_HD uint32_t llTotalWords(int nRanks, int numExperts) {
  return uint32_t(kNumFlagKinds) * nRanks + uint32_t(kLlBanks) * numExperts + uint32_t(2 * kLlBanks + kLlNumOps) * nRanks;
}

// The LL region placed at `base` (bytes from the window's start).
inline LlLayout layoutLl(const LlShape& s, uint64_t base) {
  LlLayout l{};
  l.nRanks = s.nRanks;
  l.maxTokens = s.maxTokens;
  l.numExperts = s.numExperts;
  l.localExperts = s.localExperts();
  l.hidden = s.hidden;
  l.rowBytes = uint32_t(s.hidden) * 2;
  l.wordBase = uint32_t(kNumFlagKinds) * s.nRanks;
  RegionCursor cur{base};
  const uint64_t T = uint64_t(s.maxTokens);
  // BF16 messages are the larger (2H >= H + H/32 rounded up to 16, for H a multiple of 128).
  const uint64_t msg = l.msgBytes(false) > l.msgBytes(s.fp8) ? l.msgBytes(false) : l.msgBytes(s.fp8);
  l.srcBytes = l.hdrBytes() + uint64_t(l.localExperts) * T * msg;
  l.dispatchRecv = cur.take(uint64_t(kLlBanks) * s.nRanks * l.srcBytes);
  l.dispatchStage = cur.take(uint64_t(s.nRanks) * l.hdrBytes() + T * s.topk * msg);
  l.combineRecv = cur.take(uint64_t(kLlBanks) * s.numExperts * T * l.rowBytes);
  l.combineSend = cur.take(uint64_t(s.numExperts) * T * l.rowBytes);
  l.endBytes = cur.off;
  return l;
}

}  // namespace epx::dev
