// The pure arithmetic of epx's device protocol, shared by the host (sizing, CPU tests) and the
// kernels: which GIN signal carries what, how cumulative values are compared, how a token's
// destination set and rows are derived. No CUDA types.
//
// Every synchronization word is cumulative and never reset while the group lives, so CUDA-graph
// replays and back-to-back calls need no host involvement:
//   counts / ready   one per operation and source: value after op #seq is seq;
//   arrival (LSA)    every CTA of the source adds 1 per operation: after op #seq, seq * nCtas
//                    (all ranks run the same CTA count, agreed at group creation);
//   arrival (GIN)    the source adds the number of rows it put, on the context it used: the
//                    receiver sums the signal over all contexts and waits for its running total of
//                    expected rows (kept on the device, GroupState::arrived) plus this op's rows.
// Comparisons are wrap-safe on 32 bits (one operation never moves a word by 2^31 or more).
#pragma once
#include <cstdint>

#include "epx/device/window_layout.h"

#if defined(__CUDACC__)
#define EPX_HD __host__ __device__ __forceinline__
#else
#define EPX_HD inline
#endif

namespace epx::dev {

// GIN signal of (kind, source rank): the same FlagKind roles as the LSA flags.
EPX_HD uint32_t ginSignalId(int kind, int src, int nRanks) { return uint32_t(kind) * uint32_t(nRanks) + uint32_t(src); }
EPX_HD int ginSignalCount(int nRanks) { return kNumFlagKinds * nRanks; }

// 56-bit rolling comparison of NCCL's GIN counters (nccl_device/gin.h): `seen` has reached
// `target` even after the counter wrapped.
EPX_HD bool counterReached(uint64_t seen, uint64_t target) {
  constexpr uint64_t kMask = (uint64_t(1) << 56) - 1;
  return ((seen - target) & kMask) <= (kMask >> 1);
}

// GIN context that carries the control signals (counts, readiness); data puts to peer p use
// context p % contexts and carry their arrival signal on that same context.
constexpr int kControlContext = 0;
EPX_HD int dataContextOf(int peer, int contexts) { return contexts > 0 ? peer % contexts : 0; }

// value has reached target (wrap-safe).
EPX_HD bool reached(uint32_t value, uint32_t target) { return int32_t(value - target) >= 0; }

// The free/ready rule, one for every kernel (completion.cuh waits on it). A producer writes op
// #seq (counted from 1 per op stream: an op kind of a group, an ordered PP pair...) into one of
// `depth` areas of a consumer, used in turn; the consumer publishes a cumulative count of the ops
// it released (read, or started, or finished: the stream says which). The producer may write op
// #seq once that count reached seq - depth:
//   depth 0       the consumer started op #seq (dispatch and bucket "ready");
//   depth 1       the consumer finished op #seq - 1 (combine over GIN, bucket "free");
//   kLlBanks      low-latency banks; `slots`: a PP channel's slots.
EPX_HD uint32_t creditTarget(uint32_t seq, uint32_t depth) { return seq - depth; }
EPX_HD bool mayWrite(uint32_t seq, uint32_t depth, uint32_t released) { return reached(released, creditTarget(seq, depth)); }

// An op's ready word (session.cuh): begin() of op #seq publishes seq to NVLink peers, and to every
// peer unless the op frees its areas at its end (freeAtEnd: combine, Engram), whose network peers
// get seq from end() instead. So a peer that has reached op #seq shows readyReached(seq, ...) on
// this rank: seq, or seq - 1 (it finished the previous op) for a network peer of a freeAtEnd op.
EPX_HD bool readyAtBegin(bool nvlinkPeer, bool freeAtEnd) { return nvlinkPeer || !freeAtEnd; }
EPX_HD uint32_t readyReached(uint32_t seq, bool nvlinkPeer, bool freeAtEnd) {
  return readyAtBegin(nvlinkPeer, freeAtEnd) ? seq : creditTarget(seq, 1);
}

// Token t's layout chunk and the chunk-local numbering (Route).
constexpr int kLayoutChunk = 512;

// GIN counters per context: CTA b of a kernel that puts counts its puts' local completions on
// counter b (ncclGin_CounterInc), so the most CTAs of any such kernel: dispatch/combine (nCtas) or
// the layout (one CTA per kLayoutChunk tokens).
EPX_HD int ginCounterCount(int nCtas, int maxTokens) {
  const int layoutCtas = (maxTokens + kLayoutChunk - 1) / kLayoutChunk;
  return nCtas > layoutCtas ? nCtas : layoutCtas;
}

EPX_HD int chunkOf(int t) { return t / kLayoutChunk; }

// Dynamic shared memory of the layout kernel: per-warp expert masks and bases and per-warp
// destination masks during the chunk pass (16 warps of 32 tokens), reused by the last CTA.
constexpr int kLayoutWarps = kLayoutChunk / 32;
EPX_HD uint64_t layoutSmemBytes(int numExperts, int nRanks, int localExperts) {
  const uint64_t chunkPass = uint64_t(kLayoutWarps) * (2 * uint64_t(numExperts) + uint64_t(nRanks));
  const uint64_t finalize = uint64_t(numExperts) + uint64_t(nRanks) + uint64_t(localExperts) + 1;
  return (chunkPass > finalize ? chunkPass : finalize) * 4;
}
// Opt-in shared memory per CTA on Hopper (227 KiB).
constexpr uint64_t kMaxSmemPerCta = 227 * 1024;

// Destination rank of a global expert id (-1 stays -1).
EPX_HD int destOf(int expert, int localExperts) { return expert >= 0 ? expert / localExperts : -1; }

// Contiguous share [begin, end) of n items for part p of parts (the first n % parts parts get one
// more): CTA b's tokens in dispatch, its received rows in combine. Contiguous shares make every
// CTA's rows to one destination contiguous in that destination's arrays, so one GIN put per
// (CTA, destination, array) moves them.
struct Share {
  int begin, end;
};
EPX_HD Share shareOf(int n, int parts, int p) {
  const int q = n / parts, r = n % parts;
  const int b = p * q + (p < r ? p : r);
  return Share{b, b + q + (p < r ? 1 : 0)};
}

// Put rounds (GIN): an op's rows leave in a few rounds so that the wire overlaps the staging of
// later rows, with few enough GIN operations (each has a fixed cost in the proxy path). Dispatch:
// round j covers whole layout chunks (so each destination's rows of the round are contiguous:
// chunkRankBase gives their bounds); every CTA stages its share of the round's tokens, and the last
// CTA to finish the round posts one put per network destination. Combine: round j covers the j-th
// share of every network source's received rows (combineRoundRows: each source's rows are in its
// token order, so every source gets a prefix of its returned rows in every round and reduces its
// first layout chunks while the later rounds are on the wire — rounds over contiguous rows in
// source order gave the last sources all their rows in the last round, and so their whole
// reduction after the wire); the CTAs share each source's piece; rows of NVLink sources go after
// the last round, while it is on the wire.
constexpr int kMaxPutRounds = 8;
// Default rounds: as many as keep a dispatch's GIN operations per call within kPutOpsBudget (each
// network peer gets one x put per round plus kMetaPutsPerPeer puts of the per-row arrays). The
// budget comes from measurements on fake nodes with the emulated NIC (docs/performance.md, "Put
// rounds"): 8 rounds were best at 1 and 3 network peers (12 and 36 ops); at 7 peers 4 rounds (56
// ops) ran 1.18 x / 1.21 x the floor at 8 / 14 SMs against 1.25 x / 1.23 x with one round, and 8
// rounds gained nothing more (an earlier measurement that favoured one round ran at 16 SMs, where
// 8 processes' CTAs do not all fit on one GPU: "8 fake nodes at 16 SMs" there).
constexpr int kPutOpsBudget = 56;
constexpr int kMetaPutsPerPeer = 4;
EPX_HD int defaultPutRounds(int networkPeers) {
  if (networkPeers < 1) return 1;
  const int r = kPutOpsBudget / networkPeers - kMetaPutsPerPeer;
  return r < 1 ? 1 : (r > kMaxPutRounds ? kMaxPutRounds : r);
}
// Rounds of an op over `items` layout chunks: 1 without network peers, else at most maxRounds
// (the kernels pass defaultPutRounds of the group's network peers; clamped to [1, kMaxPutRounds])
// and at most one per chunk.
EPX_HD int putRoundsOf(int items, bool gin, int maxRounds) {
  const int m = maxRounds < 1 ? 1 : (maxRounds > kMaxPutRounds ? kMaxPutRounds : maxRounds);
  if (!gin || items <= 1) return 1;
  return items < m ? items : m;
}
// Tokens [begin, end) of dispatch round j of `rounds` over numTokens tokens (whole layout chunks).
EPX_HD Share dispatchRoundTokens(int numTokens, int rounds, int j) {
  const int chunks = (numTokens + kLayoutChunk - 1) / kLayoutChunk;
  const Share c = shareOf(chunks, rounds, j);
  const int b = c.begin * kLayoutChunk, e = c.end * kLayoutChunk;
  return Share{b < numTokens ? b : numTokens, e < numTokens ? e : numTokens};
}
// Rows to destination d among this rank's tokens before token t (t a multiple of kLayoutChunk or
// numTokens): the bound of a round's rows to d (chunkRankBase [chunks][nRanks], sendCount [nRanks]).
EPX_HD int rowsBeforeToken(const int* chunkRankBase, const int* sendCount, int nRanks, int numTokens, int t, int d) {
  return t >= numTokens ? sendCount[d] : chunkRankBase[(t / kLayoutChunk) * nRanks + d];
}
// Receive waves (dispatch over GIN): a network source's rows arrive in token order, round by
// round, each round's put adding its rows to the arrival signal, and the per-row arrays of all its
// rows arrive before the first round's rows (round 0 carries them). So the receiver may copy out
// any prefix of a source's rows that the signal covers. It does so in `waves` steps: wave j of a
// source with n rows is rows [waveRowBegin(n, waves, j), waveRowBegin(n, waves, j + 1)) =
// the rows r with waveOfRow(n, waves, r) == j, and needs the first waveRowBegin(n, waves, j + 1)
// rows to have arrived. The waves partition the rows for any n >= 0 and waves >= 1 (CPU-tested);
// they need not match the sender's rounds (its token count may differ), only their count is taken
// from the receiver's own rounds so that a wave's prefix is about one round's worth.
EPX_HD int waveRowBegin(int n, int waves, int j) { return int((int64_t(j) * n + waves - 1) / waves); }
EPX_HD int waveOfRow(int n, int waves, int r) { return int(int64_t(r) * waves / n); }
// Intersection of [a, b) with [c, e) (empty: begin == end).
EPX_HD Share intersect(Share x, Share y) {
  const int b = x.begin > y.begin ? x.begin : y.begin, e = x.end < y.end ? x.end : y.end;
  return Share{b, e > b ? e : b};
}
// Rows [begin, end) less [skipBegin, skipBegin + skipCount) (a sub-range of them, or empty),
// numbered 0..count() in order: a rank's received rows without its own, which its send phase
// (dispatch) or its reduction (combine) handles itself.
struct RowsExcept {
  int begin, end, skipBegin, skipCount;
  EPX_HD int count() const { return end - begin - skipCount; }
  EPX_HD int rowOf(int v) const { return begin + v + (begin + v >= skipBegin ? skipCount : 0); }
};
// rows less skip; skip must lie inside rows or be empty (intersect(skip, rows) makes it so).
EPX_HD RowsExcept rowsExcept(Share rows, Share skip) {
  return RowsExcept{rows.begin, rows.end, skip.begin, skip.end - skip.begin};
}
// Source rank of received row i, given the exclusive prefix recvBase[0..nRanks] (binary search:
// the last s with recvBase[s] <= i, skipping sources that sent nothing).
EPX_HD int sourceOfRow(const int* recvBase, int nRanks, int i) {
  int lo = 0, hi = nRanks - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (recvBase[mid] <= i) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Received row of the v-th row from network sources (rows of network sources in source order):
// recvGinBase is recvBase over network sources only (NVLink sources add no rows).
EPX_HD int ginRowOf(const int* recvBase, const int* recvGinBase, int nRanks, int v) {
  const int s = sourceOfRow(recvGinBase, nRanks, v);
  return recvBase[s] + (v - recvGinBase[s]);
}

// Combine put round j of `rounds`: the rows received from network source s that go back to it in
// that round, numbered as GIN rows (recvGinBase [nRanks + 1]; empty for NVLink sources). Over j
// they tile s's rows in order, so s's arrival count is always a prefix of its rows.
EPX_HD Share combineRoundRows(const int* recvGinBase, int s, int rounds, int j) {
  const Share p = shareOf(recvGinBase[s + 1] - recvGinBase[s], rounds, j);
  return Share{recvGinBase[s] + p.begin, recvGinBase[s] + p.end};
}

// Hybrid forwarding. Ranks form nodes of nodeSize consecutive ranks (the NVLink domain, or, to test
// on fake nodes, virtual nodes of several of them). A token of rank s bound for ranks of another
// node n crosses to node n once, as one record to s's rail peer there (the rank of n with s's index
// in its node), the forwarder, which writes the token's row into the receive arrays of every rank
// of n that needs it (itself included), at the rows the layout agreed, and adds the rows to that
// rank's arrival word of source s (so the receiver waits for s as in direct mode, reading the word
// through the forwarder's transport). Ranks of s's own node get the row from s directly. Combine
// goes back the same way: a rank stores its partial of a forwarded row at the forwarder, the
// forwarder sums its node's partials (ascending rank, FP32, rounded like a rank partial) and
// returns one node partial per record to the source, into the source's combine receive area of the
// forwarder's rank (a rank of another node never returns rows to the source directly). Every hop
// goes through the transport: LSA within an NVLink domain, GIN between fake nodes.
// Order: dispatch puts the records before the rows for the own node, so they are on the wire
// while the rest is staged and the forwarder finds them landed. Combine returns the rows of its
// own node's sources first, then the partials for the forwarders (partials first measured slower
// on fake nodes: docs/performance.md, "Choices measured").
// Batching: every hop moves whole runs of rows, never a row at a time where it goes over GIN (each
// GIN operation has a fixed cost, ~20-300 us on the fake-node rig's proxy path). A source's rows to
// rank d arrive at d in the source's token order, so the forwarder's rows for d from one source
// node are one contiguous run of d's receive arrays: rows [fwdBase, fwdBase + fwdRows) (both from
// the layout's count exchange, forwardedRun), and a record's row at d is fwdBase + j, j its index
// in the run. The forwarder writes NVLink ranks' rows in place and stages network ranks' rows at
// j of the segment (source node, d) (fwdSegmentRow), then moves each segment with one put per
// array, the last adding the run's rows to d's arrival word of the source. Combine mirrors it: d
// stages its partials of the run (its received rows of that source, in order) and puts them into
// the forwarder's segment (source node, d) with one put per array; the forwarder finds record q's
// partial from d at j (Route::fwdSlot). GIN operations per op: a forwarder posts at most 3 per
// (source node, network rank of its node) at dispatch (rows, FP8 scales, metadata + signal), every
// rank 2 per (source node, network forwarder) at combine (weights, rows + signal), independent of
// the token count.
// nodeSize 0 means direct mode (every function below then says "not forwarded").
constexpr int kMaxNodeRanks = 64;  // a forwarded record's destinations are a 64-bit mask of its node's ranks
EPX_HD int nodeOfRank(int rank, int nodeSize) { return nodeSize > 0 ? rank / nodeSize : 0; }
EPX_HD int railPeerOf(int rank, int node, int nodeSize) { return node * nodeSize + rank % nodeSize; }
// Whether rows from src to dst go through a forwarder.
EPX_HD bool isForwarded(int src, int dst, int nodeSize) {
  return nodeSize > 0 && nodeOfRank(src, nodeSize) != nodeOfRank(dst, nodeSize);
}
// The rank that delivers src's rows to dst (src itself in direct mode or within a node).
EPX_HD int delivererOf(int src, int dst, int nodeSize) {
  return isForwarded(src, dst, nodeSize) ? railPeerOf(src, nodeOfRank(dst, nodeSize), nodeSize) : src;
}
// Whether slot k of a token (its K global expert ids, -1 unused) is the token's first slot with an
// expert on `node`: the slot that numbers the token's record for that node (Route::tokNodeSlot).
EPX_HD bool firstSlotOfNode(const int32_t* experts, int k, int localExperts, int nodeSize, int node) {
  const int e = experts[k];
  if (e < 0 || nodeOfRank(destOf(e, localExperts), nodeSize) != node) return false;
  for (int j = 0; j < k; ++j)
    if (experts[j] >= 0 && nodeOfRank(destOf(experts[j], localExperts), nodeSize) == node) return false;
  return true;
}
// Row of a record in fwdSend (node = destination node) / fwdRecv (node = source node).
EPX_HD int fwdRecordRow(int node, int slot, int maxTokens) { return node * maxTokens + slot; }
// Row j of the forwarder's segment (source node, rank of its node with index dLocal) in its
// per-destination areas (fwdOutX / fwdOutScales / fwdMetaStage at dispatch, fwdPartX / fwdPartW
// at combine): [nodes][nodeSize][maxTokens] rows; a run never exceeds maxTokens rows (one source's
// tokens); nodes * nodeSize * maxTokens = nRanks * maxTokens rows in all.
EPX_HD uint64_t fwdSegmentRow(int node, int dLocal, int j, int nodeSize, int maxTokens) {
  return (uint64_t(node) * uint64_t(nodeSize) + uint64_t(dLocal)) * uint64_t(maxTokens) + uint64_t(j);
}
// The run of rows that forwarder `rank` delivers to rank d (of its node) from its rail peer on
// `node`, from the layout's count matrix (counts(s, d): rows source s sends rank d, the same on
// every rank after the count exchange): its first row in d's receive arrays (rows of sources
// before the rail peer) and its length.
struct ForwardedRun {
  int base, rows;
};
template <class Counts>
EPX_HD ForwardedRun forwardedRun(const Counts& counts, int nRanks, int rank, int node, int d, int nodeSize) {
  const int s = railPeerOf(rank, node, nodeSize);
  int base = 0;
  for (int p = 0; p < s && p < nRanks; ++p) base += counts(p, d);
  return ForwardedRun{base, counts(s, d)};
}
// Combine order key of a destination rank seen from source `rank`: its own node's ranks by rank, a
// forwarded node by its first rank (its node partial sits at that place of the ascending order).
EPX_HD int combineOrderKey(int rank, int dest, int nodeSize) {
  return isForwarded(rank, dest, nodeSize) ? nodeOfRank(dest, nodeSize) * nodeSize : dest;
}

// Whether world rank `peer` is an NVLink (LSA) peer of `rank` (LSA teams are consecutive ranks).
EPX_HD bool isLsaPeer(int rank, int lsaRank, int lsaSize, int peer) {
  const int first = rank - lsaRank;
  return peer >= first && peer < first + lsaSize;
}

}  // namespace epx::dev
