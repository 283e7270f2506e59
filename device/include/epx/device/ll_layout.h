// The low-latency (LL) region of an EP group's window and its synchronization words: pure
// arithmetic, shared by the host (sizing, CPU tests) and the LL kernels. No CUDA types.
//
// Rows are per (local expert, source rank, slot): slot = position of the (token, top-k slot) among
// the source's tokens routed to that expert, in token order, so every destination row is known to
// the sender without a count exchange. Every region that peers write is double-buffered by a bank
// = parity of the group's device-side LL sequence number (ncclEpGroup owns it, not a handle: two
// handles used alternately get alternate banks and never share a word; NVIDIA/nccl #2303):
//   dispatchRecv  [2 bank][nRanks src] areas of srcBytes: a header (hdrBytes: [kLlSendRounds][Le]
//                 int32, 16-byte aligned), then [Le][maxTokens] messages: payload (BF16 row, or FP8 row then its
//                 FP32 scales, one per 128 channels), then meta (source token, top-k slot); the
//                 message stride depends on the call's dtype (msgBytes), the area is sized for
//                 BF16, the larger. NVLink (LSA) sources store message (le, slot) at
//                 [le][slot]; a network (GIN) source puts its header (its rows per send round and
//                 local expert) and its rows packed in its staging order (send round, local
//                 expert, slot) in one put per non-empty round (round 0 carries the header): the
//                 receiver finds them through the header (ginRecvMsg, llLandingRow)
//   dispatchStage [nRanks] headers + [maxTokens * topk] messages: rows for network (GIN) peers,
//                 destination-major, then send round, then global expert (GIN puts only from
//                 registered memory; llStageRow), destination d's header right before d's first
//                 row, so header and each round's rows of one destination are contiguous
//   combineRecv   [2 bank][numExperts][maxTokens] BF16 rows at the source rank: expert e's output
//                 for the token in slot `slot` of e (NVLink experts); for a GIN expert rank r the
//                 bank's Le * maxTokens rows of r's experts are r's landing area: the rows packed
//                 as this rank's dispatch rows landed at r (send round, local expert, slot:
//                 llLandingRow), so round q's rows return in round q (ginCombineRecvRow)
//   combineSend   [Le][nRanks * maxTokens] BF16 rows: the zero-copy combine input (dispatch output
//                 layout); otherwise GIN staging of combine, packed by source rank, then as the
//                 source's dispatch rows landed here (combineStageRow), one put per source rank and
//                 send round of that source's dispatch
//
// Synchronization words (LSA: u32 in the flags region; GIN: signal with the same index), all
// cumulative, never reset, indexed after the high-throughput words (protocol.h):
//   count(bank, le, src)  dispatch, LSA source: src adds (rows it sent to local expert le) + 1 once
//                         per op on that bank; the receiver keeps its running total per word (LlState)
//   combineArrive(bank, src)  combine: an NVLink src adds 1 per op on that bank after all its rows
//                         for us; a GIN src kLlSendRounds over its round puts (as dispatchArrive,
//                         with our dispatch's rows to src per round)
//   dispatchArrive(bank, src) dispatch, GIN source: src adds kLlSendRounds per op on that bank
//                         over its puts of that op (llRoundSignal; each signal is applied after
//                         its put's data, and one source's puts to one rank land in order)
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
// Send rounds of a dispatch: a rank's tokens split in kLlSendRounds contiguous shares (shareOf);
// every CTA stages its part of round r, and the last CTA to finish the round puts the round's rows
// to each network destination while the CTAs stage round r + 1, so the wire overlaps the staging,
// and the receiver copies out round r while later rounds are on the wire.
constexpr int kLlSendRounds = 4;

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
  // A header: [kLlSendRounds][Le] int32 row counts, padded to 16 bytes (the messages after it stay
  // aligned).
  EPX_HD uint32_t hdrBytes() const {
    return llAlign16(uint32_t(kLlSendRounds) * uint32_t(localExperts) * sizeof(int32_t));
  }
  // Header of source src's area in `bank` (GIN sources write it; the put's landing address).
  EPX_HD uint64_t hdr(int bank, int src) const { return dispatchRecv + (uint64_t(bank) * nRanks + src) * srcBytes; }
  EPX_HD uint64_t recvMsg(int bank, int le, int src, int slot, bool fp8) const {
    return hdr(bank, src) + hdrBytes() + (uint64_t(le) * maxTokens + slot) * msgBytes(fp8);
  }
  // Message `idx` of GIN source src's landing area in `bank` (its rows packed: send round, local
  // expert, slot; llLandingRow).
  EPX_HD uint64_t ginRecvMsg(int bank, int src, int idx, bool fp8) const { return recvMsg(bank, 0, src, idx, fp8); }
  // Staging row `row` (llStageRow), destined to rank dst: after the headers of ranks <= dst.
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
  // Row `idx` of GIN expert rank r's landing area in `bank` (rows packed as this rank's dispatch rows
  // landed at r: llLandingRow).
  EPX_HD uint64_t ginCombineRecvRow(int bank, int r, int idx) const { return combineRecvRow(bank, r * localExperts, idx); }
  // Row `idx` of the packed GIN combine staging (source rank, then send round, local expert, slot).
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

// ---- dispatch send rounds (GIN) ----
// Staging row of the j-th row of send round r to global expert e (destination d = e / Le). pref is
// [kLlSendRounds][E + 1]: pref[r * (E + 1) + x] = this rank's rows of round r to experts < x.
// Order: destination, then round, then expert, then slot; destination d's rows start at
// llDestFirstRow(pref, E, d * Le).
EPX_HD int llDestFirstRow(const int* pref, int E, int firstExpert) {
  int row = 0;
  for (int r = 0; r < kLlSendRounds; ++r) row += pref[r * (E + 1) + firstExpert];
  return row;
}
EPX_HD int llRoundRowsTo(const int* pref, int E, int Le, int r, int d) {
  return pref[r * (E + 1) + (d + 1) * Le] - pref[r * (E + 1) + d * Le];
}
EPX_HD int llStageRow(const int* pref, int E, int Le, int r, int e, int j) {
  const int d = e / Le;
  int row = llDestFirstRow(pref, E, d * Le);
  for (int q = 0; q < r; ++q) row += llRoundRowsTo(pref, E, Le, q, d);
  return row + pref[r * (E + 1) + e] - pref[r * (E + 1) + d * Le] + j;
}
// Landing index (ginRecvMsg) of the j-th row of round r to local expert le, from the source's
// header hdr [kLlSendRounds][Le]: rows of earlier rounds, then of earlier local experts in round r.
// (The receiver computes the same from its copy of the header in shared memory.)
EPX_HD int llLandingRow(const int* hdr, int Le, int r, int le, int j) {
  int idx = j;
  for (int q = 0; q < r; ++q)
    for (int x = 0; x < Le; ++x) idx += hdr[q * Le + x];
  for (int x = 0; x < le; ++x) idx += hdr[r * Le + x];
  return idx;
}
// Signals of one op's puts from one source to one destination; rows[r]: the rows of round r. A put
// goes out for round 0 (it carries the header) and for every non-empty later round; each adds 1 to
// the arrival word, and the last one also the skipped rounds, so every op adds kLlSendRounds
// (the receiver's target without a running total).
EPX_HD bool llRoundPosted(const int* rows, int r) { return r == 0 || rows[r] > 0; }
EPX_HD uint32_t llRoundSignal(const int* rows, int r) {
  int posted = 0, last = 0;
  for (int q = 0; q < kLlSendRounds; ++q)
    if (llRoundPosted(rows, q)) ++posted, last = q;
  return r == last ? uint32_t(1 + kLlSendRounds - posted) : 1u;
}
// What the arrival word has gained from this op once rounds 0 .. r have landed.
EPX_HD uint32_t llArrivedBy(const int* rows, int r) {
  uint32_t v = 0;
  for (int q = 0; q <= r; ++q)
    if (llRoundPosted(rows, q)) v += llRoundSignal(rows, q);
  return v;
}

// Bank of LL op #seq (seq counts from 1 per op kind).
EPX_HD int llBankOf(uint32_t seq) { return int(seq & 1u); }
// Value of a combineArrive word once op #seq (on bank seq & 1) has arrived: ops so far on that bank.
EPX_HD uint32_t llArriveTarget(uint32_t seq) { return (seq + 1u) >> 1; }
// A GIN arrival word (dispatchArrive, combineArrive) before op #seq's puts: kLlSendRounds per earlier
// op on that bank.
EPX_HD uint32_t llRoundArriveBase(uint32_t seq) { return (llArriveTarget(seq) - 1u) * uint32_t(kLlSendRounds); }
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
