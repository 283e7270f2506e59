// The protocol session of one dispatch or combine (and of every bucket op), on the completion
// protocol (completion.cuh: sequence numbers, last CTA, credits, bounded waits):
//   begin()        read this op's sequence number; CTA 0 tells every peer that it may send this op
//                  to us (ready; combine: NVLink peers only, see protocol.h readyAtBegin); every CTA waits
//                  until every NVLink peer may receive it from us (its stores go straight into
//                  their windows);
//   lastToStage()  the last CTA to finish staging a put round's GIN rows (it posts the round's
//                  puts, after readyAllGin(): staging overlaps that round trip);
//   arriveLsa()    after this CTA's stores into NVLink peers' windows: +1 on each such peer's
//                  arrival word (GIN arrivals travel with the data puts, see protocol.h);
//   waitArrivals() until every source's data (or "done reading") arrived (waitSourceRange: a range
//                  of sources, so the receiver can start on early ones): NVLink sources when all
//                  their CTAs added (seq * nCtas), network sources when the rows they put (signal
//                  summed over contexts) reach the running total kept in SessionArgs::arrived;
//   end()          the last CTA advances the running totals and publishes the sequence number;
//                  when the op's ready word counts finished ops (freeAtEnd: combine, Engram), it
//                  also publishes that word to every network peer (a bucket op adds its own
//                  "free" word, bucket_layout.h).
// All CTAs of the grid must be co-resident (checked at group creation), and every rank launches
// the same grid (agreed at group creation).
#pragma once
#include "epx/device/completion.cuh"
#include "epx/device/session_args.h"

namespace epx::dev {

// Rows a source's op brings to this rank over GIN (dispatch: rows it sent us; combine: rows we
// sent it, returned).
struct GinRows {
  const int* recvBase;   // dispatch: [nRanks + 1]
  const int* sendCount;  // combine: [nRanks]
  __device__ uint32_t operator()(int src) const {
    return recvBase ? uint32_t(recvBase[src + 1] - recvBase[src]) : uint32_t(sendCount[src]);
  }
};

// Every network source signals once per op (load balancing's "done reading", Engram's request).
struct OnePerPeer {
  __device__ uint32_t operator()(int) const { return 1u; }
};

struct OpSession {
  uint32_t seq;
  int abort;
  int ginReady;  // this CTA has seen every network peer ready (readyAllGin)
  int nodeSize;  // hybrid forwarding (protocol.h): a source of another node arrives through its
                 // forwarder here, whose transport carries the arrival word; 0: direct mode
  int freeAtEnd; // a network peer may write this op's areas once this rank finished the previous
                 // op (end() publishes the ready word), not once it started this one (ginFreeAtEnd)
  int readyKind; // this op's ready word (kFlagReadyDispatch / kFlagReadyCombine)
  int readyPhase; // begin()'s phase: a peer that has not reached this op (recordDataTimeout)

  // finishedFrees: the op's areas are free once the previous op finished, whatever its kind
  // (Engram: its inbox is read in the serve step only); end() then publishes the ready word.
  __device__ void begin(const Transport& t, const SessionArgs& sa, int kind, int phase, int forwardNodeSize = 0,
                        bool finishedFrees = false) {
    const LinkArgs& c = t.link;
    if (threadIdx.x == 0) {
      seq = nextSeq(&sa.state->opSeq[kind]);
      abort = 0;
      ginReady = 0;
      nodeSize = forwardNodeSize;
      freeAtEnd = ginFreeAtEnd(kind) || finishedFrees;
      readyKind = kind == kOpDispatch ? kFlagReadyDispatch : kFlagReadyCombine;
      readyPhase = phase;
    }
    __syncthreads();
    const uint32_t s = seq;
    if (blockIdx.x == 0)
      for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x)
        if (readyAtBegin(t.lsa(p), freeAtEnd)) t.publish(p, readyKind, s);
    bool ok = true;
    for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) {
      if (t.lsa(p)) ok = ok && t.wait(readyKind, p, s, phase);
    }
    if (!ok) abort = 1;
    __syncthreads();
    t.mark(kStepReady);
  }

  // Combine over GIN: a network peer's combine-ready word counts the combines it *finished*
  // (published by end(), not by begin()), because a combine only writes the peer's receive area
  // (combineRecv / combineRecvW), which the peer reads in its own combine and nowhere else: once
  // the peer finished combine #seq-1 it may receive #seq, without waiting for it to start #seq (a
  // one-way signal that the senders of an input already in the window cannot hide behind
  // staging). Dispatch writes rows that the peer's experts read until it calls again, so it keeps
  // "the peer started this op". The buckets use the same end-of-op word (bucket_layout.h).
  // The value a peer's word must reach: protocol.h readyReached (freeAtEnd: it finished the
  // previous op, credit depth 1; else it started this one, depth 0).
  static __device__ bool ginFreeAtEnd(int kind) { return kind == kOpCombine; }

  // Every thread of the CTA, before the CTA's first puts of this op: every network peer may
  // receive it from us. The waits are spread over the threads and joined before any put, so the
  // puts are issued by converged warps, not interleaved with other threads' spinning (see
  // docs/performance.md, "Put rounds", for the measurement at 8 fake nodes).
  __device__ void readyAllGin(const Transport& t, int phase) {
    if (ginReady) return;
    bool ok = true;
    for (int p = threadIdx.x; p < t.link.nRanks; p += blockDim.x)
      if (!t.lsa(p)) ok = ok && t.wait(readyKind, p, readyReached(seq, false, freeAtEnd), phase);
    if (!ok) abort = 1;
    __syncthreads();
    if (threadIdx.x == 0) ginReady = 1;
    __syncthreads();
  }

  // Called by every CTA after staging its rows of put round `round` for network peers: true in the
  // one CTA that came last, which then sees every CTA's staged rows (system-scope fence before
  // counting) and posts the round's GIN puts — a few large operations per peer and round instead
  // of a few per CTA and peer (each GIN operation has a fixed cost in the proxy;
  // docs/performance.md).
  __device__ bool lastToStage(const SessionArgs& sa, int kind, int round) {
    return lastCtaOf(&sa.state->stagedCtas[kind][round]);
  }

  __device__ void arriveLsa(const Transport& t, int kind) {
    __syncthreads();
    const LinkArgs& c = t.link;
    if (abort) return;
    const int arriveKind = kind == kOpDispatch ? kFlagArriveDispatch : kFlagArriveCombine;
    const int first = c.rank - c.lsaRank;
    for (int i = threadIdx.x; i < c.lsaSize; i += blockDim.x) t.addLsa(first + i, arriveKind, 1u);
    t.mark(kStepSent);
  }

  template <class Rows>
  __device__ void waitArrivals(const Transport& t, const SessionArgs& sa, int kind, int phase, bool lsaSources,
                               bool ginSources, const Rows& rows) {
    waitSources(t, sa, kind, phase, lsaSources, ginSources, rows);
    t.mark(kStepArrived);
  }

  // Until the first rows(p) of this op's rows from every network source p have arrived (GIN
  // sources post their rows in order, each put round adding its rows to the arrival signal), so
  // the receiver can work on a prefix while the rest is on the wire. Every thread of the CTA.
  template <class Rows>
  __device__ void waitGinPrefix(const Transport& t, const SessionArgs& sa, int kind, int phase, const Rows& rows) {
    waitSources(t, sa, kind, phase, false, true, rows);
  }

  // Until the data of sources [first, last) arrived (all of them: waitArrivals). Every thread.
  template <class Rows>
  __device__ void waitSourceRange(const Transport& t, const SessionArgs& sa, int kind, int phase, int first, int last,
                                  const Rows& rows) {
    waitSources(t, sa, kind, phase, true, true, rows, first, last);
  }

  // Receive wave `wave` of `waves` (protocol.h, waveRowBegin) of sources [first, last): network
  // sources until the rows of waves 0..wave arrived; NVLink sources (all or nothing) in the last
  // wave only. With one wave: waitSourceRange. Every thread.
  template <class Rows>
  __device__ void waitSourceWave(const Transport& t, const SessionArgs& sa, int kind, int phase, int first, int last,
                                 const Rows& rows, int wave, int waves) {
    waitSources(t, sa, kind, phase, wave == waves - 1, true, rows, first, last, wave, waves);
  }

  // A wait for network data of this op from `peer` timed out (one thread). A peer that has not
  // reached this op yet (its ready word is behind: it has not started, or for a freeAtEnd op not
  // finished the previous one) is the cause, and is named instead: it holds up the others too,
  // which then time out on each other (at 4 ranks, with rank 3 missing from a dispatch, rank 1
  // waits for rank 3's readiness before its puts, so rank 0 would name rank 1). No such peer:
  // `peer` is named.
  __device__ void recordDataTimeout(const Transport& t, int phase, int peer, uint32_t target, uint32_t seen) const {
    const LinkArgs& c = t.link;
    for (int q = 0; q < c.nRanks; ++q) {
      if (q == c.rank) continue;
      const uint32_t want = readyReached(seq, t.lsa(q), freeAtEnd);
      const uint32_t v = t.read(readyKind, q);
      if (!reached(v, want)) {
        recordTimeout(c.error, readyPhase, q, c.rank, t.transportOf(q), want, v);
        return;
      }
    }
    recordTimeout(c.error, phase, peer, c.rank, t.transportOf(peer), target, seen);
  }

  template <class Rows>
  __device__ void waitSources(const Transport& t, const SessionArgs& sa, int kind, int phase, bool lsaSources,
                              bool ginSources, const Rows& rows, int first = 0, int last = -1, int wave = 0,
                              int waves = 1) {
    const LinkArgs& c = t.link;
    const int arriveKind = kind == kOpDispatch ? kFlagArriveDispatch : kFlagArriveCombine;
    if (last < 0) last = c.nRanks;
    bool ok = true;
    if (!abort) {
      for (int p = first + threadIdx.x; p < last && ok; p += blockDim.x) {
        if (t.lsa(p)) {
          if (lsaSources) ok = t.wait(arriveKind, p, seq * uint32_t(sa.nCtas), phase);
        } else if (ginSources) {
          // Rows counted on the word of (kind, p), written by p or, hybrid dispatch, by p's forwarder
          // in this node (read through the forwarder's transport; a timeout names the forwarder).
          // Hybrid combine: p is the rank that returns rows (a forwarder returns its node's sums).
          const uint32_t target = sa.arrived[kind * c.nRanks + p] + uint32_t(waveRowBegin(int(rows(p)), waves, wave + 1));
          const int writer = kind == kOpDispatch ? delivererOf(p, c.rank, nodeSize) : p;
          ok = t.waitWordOr(ginSignalId(arriveKind, p, c.nRanks), writer, target, {},
                            [&](uint32_t seen) { recordDataTimeout(t, phase, writer, target, seen); });
        }
      }
    }
    if (!ok) abort = 1;
    __syncthreads();
  }

  // freeKind: the last CTA also publishes that word to every network peer (the count of ops this
  // rank finished: its receive areas are free again; buckets, bucket_layout.h). A freeAtEnd op's
  // ready word is published without it.
  template <class Rows>
  __device__ void end(const Transport& t, const SessionArgs& sa, int kind, const Rows& rows, int freeKind = -1) {
    endWith(t, sa, kind, rows, -1, rows, freeKind);
  }

  // end() of an op whose network sources also signal on the other kind's arrival word (Engram:
  // requests on one, rows on the other; its LSA arrivals count seq * nCtas there as well): the
  // last CTA advances both running totals, otherKind's by otherRows(p). otherKind -1: none.
  template <class Rows, class OtherRows>
  __device__ void endWith(const Transport& t, const SessionArgs& sa, int kind, const Rows& rows, int otherKind,
                          const OtherRows& otherRows, int freeKind = -1) {
    __syncthreads();
    t.mark(kStepEnd);
    const LinkArgs& c = t.link;
    if (!lastCtaOf(&sa.state->doneCtas[kind])) return;
    if (!abort && t.hasGin())
      for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x)
        if (!t.lsa(p)) {
          sa.arrived[kind * c.nRanks + p] += rows(p);
          if (otherKind >= 0) sa.arrived[otherKind * c.nRanks + p] += otherRows(p);
        }
    __syncthreads();
    if (threadIdx.x == 0) publishSeq(&sa.state->opSeq[kind], seq);
    if (abort || !t.hasGin()) return;
    for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x)
      if (!t.lsa(p)) {
        if (freeAtEnd) t.publish(p, readyKind, seq);
        if (freeKind >= 0) t.publish(p, freeKind, seq);
      }
  }
};

}  // namespace epx::dev
