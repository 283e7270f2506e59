// The Engram fetch kernel (ncclEpEngramFetch; engram_layout.h): one launch per layer, one op of the
// protocol session (session.cuh) on every rank:
//   begin      ready to every NVLink peer (this rank's inbox may be written), NVLink peers'
//              readiness; network peers learn it from end() of the layer before;
//   requests   CTA 0 counts this rank's valid indices per owner, writes each owner's list (header:
//              rows, first receive row; then the owner's local rows) and each receive row's output
//              position, publishes "built"; network owners get their list with one put (+1 on
//              their request word) once they finished their previous layer (so its serve step has
//              read the inbox: no round trip at the start of a layer); NVLink owners read it in place once every
//              CTA of this rank added 1 to their request word; bad indices are recorded (once per
//              link) and never used;
//   serve      once every requester's list arrived, requesters in rotation from the next rank on
//              (owner o serves o + 1 first, so each requester hears from one owner at a time, in
//              the order rank - 1, rank - 2, ...): for network requesters, chunks of chunkRows
//              rows (chunk item i over the call: CTA i % nCtas) gathered from the table into one of
//              the CTA's two stage buffers and put with +1 on the requester's rows word; for NVLink
//              requesters, every warp of the grid stores rows straight into the requester's
//              receive rows (this rank's own rows: into their output positions); then each CTA
//              adds 1 to every NVLink requester's rows word;
//   receive    owner by owner in the order their rows come (rank - 1, rank - 2, ...), once that
//              owner's rows arrived (NVLink: all its CTAs; network: its chunks, counted from this
//              rank's own request header to it): every warp copies them to their output positions
//              while later owners' rows are still on the wire; then output rows of index -1 or of
//              bad indices are zeroed;
//   end        the CTAs' stage puts and CTA 0's request puts have left their buffers; the running
//              totals of both arrival words advance; every network peer hears "finished".
#include "epx/device/bulk_copy.cuh"
#include "epx/device/coll_launch.h"
#include "epx/device/engram_layout.h"
#include "epx/device/session.cuh"

namespace epx::dev {

namespace {

constexpr int kWarpsPerCta = kCollThreads / kWarp;

__device__ __forceinline__ bool validRow(int32_t v, const EngramLayout& l, int nRanks) {
  return v >= 0 && int64_t(v) < l.rowsPerRank * nRanks;
}

// Network chunks owner p sends this rank in this op: the rows of this rank's request header to p.
struct RowChunks {
  const EngramLayout* l;
  const char* local;  // this rank's window region
  __device__ uint32_t operator()(int owner) const {
    const int32_t* h = reinterpret_cast<const int32_t*>(local + l->requestOffset(owner));
    return engramChunksOf(ldI32Volatile(h + kEngramHeaderRows), l->chunkRows);
  }
};

// Per-owner tallies of CTA 0 while it builds the request lists (shared memory).
struct RequestTally {
  int rows[kEngramMaxRanks];  // valid indices per owner, then the running cursor
  int first[kEngramMaxRanks]; // first receive row of each owner's rows
};

// CTA 0: this layer's request lists and receive positions (see the file comment).
__device__ void buildRequests(const EngramArgs& a, const Transport& t, RequestTally& tally) {
  const LinkArgs& c = a.link;
  const EngramLayout& l = a.l;
  const int n = a.numTokens * l.entries;
  char* local = t.localBase();
  int32_t* positions = reinterpret_cast<int32_t*>(local + l.positions);
  for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) tally.rows[p] = 0;
  __syncthreads();
  // Whole warps walk the indices (lanes past n carry owner -1), so the lanes with one owner can
  // share one shared-memory atomic (an owner gets thousands of rows per layer).
  const int lane = int(threadIdx.x) % kWarp;
  const int nWhole = (n + kWarp - 1) / kWarp * kWarp;
  for (int i = threadIdx.x; i < nWhole; i += blockDim.x) {
    const int32_t v = i < n ? a.indices[i] : -1;
    const bool valid = validRow(v, l, c.nRanks);
    if (i < n && !valid && v != -1 && c.error)
      recordError(&c.error->badIdClaim, &c.error->badId, /*ncclInvalidArgument*/ 4, kPhaseEngramBadIndex, a.layer,
                  c.rank, i % l.entries, i / l.entries, v);
    const int owner = valid ? int(v / l.rowsPerRank) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, owner);
    if (valid && lane == __ffs(same) - 1) atomicAdd(&tally.rows[owner], __popc(same));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int p = 0; p < c.nRanks; ++p) {
      tally.first[p] = run;
      run += tally.rows[p];
    }
  }
  __syncthreads();
  for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) {
    int32_t* h = reinterpret_cast<int32_t*>(local + l.requestOffset(p));
    h[kEngramHeaderRows] = tally.rows[p];
    h[kEngramHeaderRecvRow] = tally.first[p];
    tally.rows[p] = 0;  // now the cursor
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nWhole; i += blockDim.x) {
    const int32_t v = i < n ? a.indices[i] : -1;
    const bool valid = validRow(v, l, c.nRanks);
    const int p = valid ? int(v / l.rowsPerRank) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, p);
    const int leader = __ffs(same) - 1;
    int k0 = 0;
    if (valid && lane == leader) k0 = atomicAdd(&tally.rows[p], __popc(same));
    k0 = __shfl_sync(0xffffffffu, k0, leader);
    if (!valid) continue;
    const int k = k0 + __popc(same & ((1u << lane) - 1u));  // this lane's place among the warp's rows to p
    reinterpret_cast<int32_t*>(local + l.requestOffset(p))[kEngramHeaderInts + k] = int32_t(v - p * l.rowsPerRank);
    positions[tally.first[p] + k] = i;
  }
  __syncthreads();
}

// Rows [r0, r1) of a request list gathered from this rank's table into dst (row k - r0 at
// dst + (k - r0) * rowBytes), or, with `positions` (this rank's own request), straight into
// a.output at row positions[k]: blocks of kWarp rows, block b to warp b % warps of the `warps`
// that share them (this one is `warp`), every lane reading one list entry.
__device__ void gatherRows(char* dst, const int32_t* list, int r0, int r1, const EngramArgs& a, int warp, int warps,
                           const int32_t* positions = nullptr) {
  const EngramLayout& l = a.l;
  const int lane = int(threadIdx.x) % kWarp;
  const uint32_t vecs = uint32_t(l.rowBytes / kVecBytes);
  for (int k0 = r0 + warp * kWarp; k0 < r1; k0 += warps * kWarp) {
    const int k = k0 + lane, n = r1 - k0 < kWarp ? r1 - k0 : kWarp;
    const char* src = nullptr;
    char* out = nullptr;
    if (k < r1) {
      const int32_t lr = ldI32Volatile(list + k);
      out = positions ? a.output + uint64_t(ldI32Volatile(positions + k)) * l.rowBytes : dst + uint64_t(k - r0) * l.rowBytes;
      // A local row outside the shard never comes from a well-formed list: zeroed, never read.
      if (lr >= 0 && int64_t(lr) < l.rowsPerRank) src = a.table + uint64_t(lr) * l.rowBytes;
    }
    warpCopyRowBlock</*kPeerSrc=*/false>(src, out, n, vecs, lane);
  }
}

// A request header as its owner reads it, clamped to the receive rows (a list from the same
// build of the same plan is always within them).
struct Request {
  int rows, recvRow;
  const int32_t* list;
};
__device__ Request readRequest(const char* listBase, const EngramLayout& l) {
  const int32_t* h = reinterpret_cast<const int32_t*>(listBase);
  Request r{ldI32Volatile(h + kEngramHeaderRows), ldI32Volatile(h + kEngramHeaderRecvRow), h + kEngramHeaderInts};
  if (r.rows < 0 || r.recvRow < 0 || r.rows > l.maxRequests || r.recvRow > l.maxRequests - r.rows) r.rows = 0;
  return r;
}

// The i-th requester (1 ... nRanks) this rank serves: the ranks after it in rotation, itself last.
// Every owner starting one further on spreads each requester's rows over time, one owner at a
// time (no incast of every owner at rank 0), and receive() takes the owners in that order.
__device__ __forceinline__ int servedAt(const LinkArgs& c, int i) { return (c.rank + i) % c.nRanks; }
// The k-th owner (1 ... nRanks - 1) whose rows reach this rank (servedAt's inverse order).
__device__ __forceinline__ int ownerAt(const LinkArgs& c, int k) { return (c.rank - k + c.nRanks) % c.nRanks; }

__device__ void serve(const EngramArgs& a, const Transport& t, OpSession& ses) {
  const LinkArgs& c = a.link;
  const EngramLayout& l = a.l;
  const int nCtas = int(gridDim.x), me = int(blockIdx.x);
  const int warp = int(threadIdx.x) / kWarp;
  char* local = t.localBase();
  const Transport stageT[kEngramStageBuffers] = {Transport(c, engramStageCounterBase(0, nCtas)),
                                                 Transport(c, engramStageCounterBase(1, nCtas))};
  static_assert(kEngramStageBuffers == 2, "stageT lists one transport per stage buffer");
  // Network requesters first: their chunks are on the wire while the NVLink rows are stored.
  uint64_t item = 0;
  int buffer = 0;
  for (int i = 1; i <= c.nRanks && !ses.abort; ++i) {
    const int p = servedAt(c, i);
    if (t.lsa(p)) continue;
    const Request r = readRequest(local + l.inboxOffset(p), l);
    const int chunks = int(engramChunksOf(r.rows, l.chunkRows));
    for (int ch = 0; ch < chunks; ++ch, ++item) {
      if (int(item % uint64_t(nCtas)) != me) continue;
      const Transport& st = stageT[buffer];
      // The buffer's previous put (this CTA's, counted on its own counter) has left it.
      if (!st.completeGinCounters(st.counterOf(), 1)) ses.abort = 1;
      if (ses.abort) break;
      const int r0 = ch * l.chunkRows, r1 = r0 + l.chunkRows < r.rows ? r0 + l.chunkRows : r.rows;
      const uint64_t stageOff = l.stageOffset(me, buffer);
      gatherRows(local + stageOff, r.list, r0, r1, a, warp, kWarpsPerCta);
      __syncthreads();
      if (threadIdx.x == 0)
        st.putSignal(p, l.recvOffset(r.recvRow + r0), stageOff, uint64_t(r1 - r0) * l.rowBytes, kFlagArriveCombine, 1u,
                     dataContextOf(p, c.ginContexts));
      buffer = (buffer + 1) % kEngramStageBuffers;
    }
  }
  // NVLink requesters: every warp of the grid stores rows into their receive rows; this rank's
  // own rows go straight to their output positions (its CTA 0 built them before its arrival).
  for (int i = 1; i <= c.nRanks && !ses.abort; ++i) {
    const int p = servedAt(c, i);
    if (!t.lsa(p)) continue;
    const bool self = p == c.rank;
    char* base = self ? local : t.lsaBase(p);
    const Request r = readRequest(base + l.requestOffset(c.rank), l);
    const int32_t* positions = self ? reinterpret_cast<const int32_t*>(local + l.positions) + r.recvRow : nullptr;
    gatherRows(base + l.recvOffset(r.recvRow), r.list, 0, r.rows, a, me * kWarpsPerCta + warp, nCtas * kWarpsPerCta,
               positions);
  }
  // Every put of this CTA left its stage buffers (the next layer reuses them; destroy may follow).
  if (t.hasGin())
    for (int k = 0; k < kEngramStageBuffers; ++k)
      if (!stageT[k].completeGinCounters(stageT[k].counterOf(), 1)) ses.abort = 1;
  ses.arriveLsa(t, kEngramRowsKind);
}

__device__ void receive(const EngramArgs& a, const Transport& t, OpSession& ses) {
  const LinkArgs& c = a.link;
  const EngramLayout& l = a.l;
  const int nCtas = int(gridDim.x), me = int(blockIdx.x);
  const int lane = int(threadIdx.x) % kWarp;
  const int gw = me * kWarpsPerCta + int(threadIdx.x) / kWarp, warps = nCtas * kWarpsPerCta;
  char* local = t.localBase();
  // CTA 0's lists and positions of this op are built (it publishes whatever happened before).
  if (threadIdx.x == 0) {
    uint32_t seen = 0;
    const bool ok = t.spinBounded([&] { return reached(seen = loadAcquireSys(a.builtSeq), ses.seq); }, WaitBound{},
                                  [&] { recordTimeout(c.error, kPhaseEngramRows, c.rank, c.rank, kTransportLsa, ses.seq, seen); });
    if (!ok) ses.abort = 1;
  }
  __syncthreads();
  // Each owner's receive rows to their output positions as soon as they arrived (this rank's own
  // rows are there already): blocks of kWarp rows per warp (warpCopyRowBlock).
  const RowChunks chunks{&l, local};
  const int32_t* positions = reinterpret_cast<const int32_t*>(local + l.positions);
  const uint32_t vecs = uint32_t(l.rowBytes / kVecBytes);
  for (int k = 1; k < c.nRanks && !ses.abort; ++k) {
    const int owner = ownerAt(c, k);
    ses.waitSourceRange(t, a.session, kEngramRowsKind, kPhaseEngramRows, owner, owner + 1, chunks);
    if (ses.abort) break;
    const Request q = readRequest(local + l.requestOffset(owner), l);
    const int end = q.recvRow + q.rows;
    for (int j0 = q.recvRow + gw * kWarp; j0 < end; j0 += warps * kWarp) {
      const int j = j0 + lane, n = end - j0 < kWarp ? end - j0 : kWarp;
      const char* src = j < end ? local + l.recvOffset(j) : nullptr;
      char* dst = j < end ? a.output + uint64_t(ldI32Volatile(positions + j)) * l.rowBytes : nullptr;
      warpCopyRowBlock</*kPeerSrc=*/true>(src, dst, n, vecs, lane);
    }
  }
  t.mark(kStepArrived);
  if (ses.abort) return;
  // The rows of -1 and bad indices zeroed.
  const int n = a.numTokens * l.entries;
  for (int i0 = gw * kWarp; i0 < n; i0 += warps * kWarp) {
    const int i = i0 + lane, m = n - i0 < kWarp ? n - i0 : kWarp;
    char* dst = i < n && !validRow(a.indices[i], l, c.nRanks) ? a.output + uint64_t(i) * l.rowBytes : nullptr;
    warpCopyRowBlock</*kPeerSrc=*/false>(nullptr, dst, m, vecs, lane);
  }
}

__global__ void __launch_bounds__(kCollThreads, 1) engramKernel(const __grid_constant__ EngramArgs a) {
  const Transport t(a.link);
  const LinkArgs& c = a.link;
  __shared__ OpSession ses;
  __shared__ RequestTally tally;
  // A requester's list may go to a network owner once the owner finished its previous layer (it
  // read its inbox in that layer's serve step): no round trip at the start of each layer.
  ses.begin(t, a.session, kEngramRequestKind, kPhaseEngramReady, 0, /*finishedFrees=*/true);
  if (blockIdx.x == 0) {
    buildRequests(a, t, tally);
    if (threadIdx.x == 0) {
      __threadfence();
      storeReleaseSys(a.builtSeq, ses.seq);
    }
    if (t.hasGin()) {
      ses.readyAllGin(t, kPhaseEngramReady);
      const Transport reqT(c, engramRequestCounterBase(int(gridDim.x)));
      if (!ses.abort)
        for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) {
          if (t.lsa(p)) continue;
          const int rows = reinterpret_cast<const int32_t*>(t.localBase() + a.l.requestOffset(p))[kEngramHeaderRows];
          const uint64_t bytes = alignUp(uint64_t(kEngramHeaderInts + rows) * 4, kVecBytes);
          reqT.putSignal(p, a.l.inboxOffset(c.rank), a.l.requestOffset(p), bytes, kFlagArriveDispatch, 1u,
                         dataContextOf(p, c.ginContexts));
        }
    }
  }
  ses.arriveLsa(t, kEngramRequestKind);
  ses.waitArrivals(t, a.session, kEngramRequestKind, kPhaseEngramRequests, true, true, OnePerPeer{});
  serve(a, t, ses);
  receive(a, t, ses);
  // CTA 0's request puts left its lists (the next layer rebuilds them).
  if (blockIdx.x == 0 && t.hasGin()) {
    const Transport reqT(c, engramRequestCounterBase(int(gridDim.x)));
    if (!reqT.completeGinCounters(reqT.counterOf(), 1)) ses.abort = 1;
  }
  ses.endWith(t, a.session, kEngramRequestKind, OnePerPeer{}, kEngramRowsKind, RowChunks{&a.l, t.localBase()});
}

}  // namespace

cudaError_t launchEngram(const EngramArgs& a, int nCtas, cudaStream_t stream) {
  engramKernel<<<nCtas, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t preloadEngramKernels() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, engramKernel);
}

}  // namespace epx::dev
