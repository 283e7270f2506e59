// Expert load-balancing kernels (ncclEpLbPrefetchWeights / ncclEpLbReduceGrads) on the transport
// layer and the protocol session (session.cuh, slot kLbSessionKind; lb_layout.h):
//   scan       every CTA walks the redundancy mapping in (rank, slot) order, kLbSetLanes entries of
//              this rank's experts at a time (warp 0, ballots); an entry outside [-1, numExperts) is
//              skipped and recorded once (kPhaseLbBadMapping), by every rank alike;
//   prefetch   begin (ready to every peer, NVLink holders' readiness); for each slot holding an
//              expert of this rank and each weight tensor: an NVLink holder (or this rank) gets the
//              row stored into its slot straight from the caller's weights, every CTA its 16-byte
//              share; a network holder gets it in chunks of chunkBytes, chunk item i (counted over
//              the whole call) copied by CTA i % nCtas into one of its two stage buffers and put
//              with +1 on the holder's arrival signal, after every network peer is ready;
//              arrivals: every NVLink source's CTAs, every network source's chunks (counted from
//              the mapping); the CTA's puts have left its stage buffers; end;
//   reduce     begin; each CTA owns an element range of every gradient row; for the replicas of
//              this rank's experts in (rank, slot) order, a batch of up to kLbSetLanes at a time,
//              it walks its range in steps of kLbSetLanes / batch pieces of laneBytes per replica
//              (about one chunk per step): network replicas' pieces of step k + 1 are got into one
//              lane set while the pieces of step k (the other set, flushed) are added, NVLink
//              replicas read in place; each element adds the batch's replicas in order to its
//              expert's gradient (FP32, the same thread for every replica of an element, batch
//              after batch: the order is the mapping's); then "done reading" to every peer
//              (NVLink: every CTA; network: the last CTA, once every CTA's gets completed);
//              arrivals: every peer finished reading this rank's slot gradients; end.
#include "epx/device/bulk_copy.cuh"
#include "epx/device/chunking.h"
#include "epx/device/coll_launch.h"
#include "epx/device/session.cuh"

namespace epx::dev {

namespace {

// One mapping entry naming an expert of this rank: the slot's rank and slot, the expert's local
// index.
struct Replica {
  int holder, slot, local;
};

// The running walk over the mapping (shared memory; warp 0 advances it).
struct MappingScan {
  int pos;                      // next entry to look at
  int count;                    // entries in `batch`
  Replica batch[kLbSetLanes];
};

// Warp 0: the next up to kLbSetLanes entries from s.pos on that name an expert of this rank, in
// mapping order; bad entries are recorded (once per link) and skipped. Every thread of the CTA
// calls it (it ends with a barrier); s.count = 0 at the end of the mapping.
__device__ void nextReplicas(const LbArgs& a, MappingScan& s) {
  const LinkArgs& c = a.link;
  const int n = c.nRanks * a.l.numSlots, L = a.localExperts;
  __syncthreads();  // every thread has read the previous batch (a caller may go straight on)
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    int pos = s.pos, count = 0;
    while (pos < n && count < kLbSetLanes) {
      const int i = pos + int(lane);
      const int e = i < n ? a.mapping[i] : -1;
      const bool bad = i < n && (e < -1 || e >= a.numExperts);
      if (bad && c.error)  // every rank skips the same entry and records it (once per link)
        recordError(&c.error->badIdClaim, &c.error->badId, /*ncclInvalidArgument*/ 4, kPhaseLbBadMapping,
                    i / a.l.numSlots, c.rank, -1, i % a.l.numSlots, e);
      const bool mine = !bad && e >= 0 && e / L == c.rank;
      unsigned ballot = __ballot_sync(0xffffffffu, mine);
      // Take matches in order until the batch is full; the walk resumes after the last one taken.
      int taken = 32;  // entries of this window consumed
      while (ballot != 0u) {
        const int k = __ffs(ballot) - 1;
        if (count == kLbSetLanes) {
          taken = k;
          break;
        }
        if (lane == unsigned(k)) s.batch[count] = Replica{i / a.l.numSlots, i % a.l.numSlots, e % L};
        ++count;
        ballot &= ballot - 1u;
      }
      pos += taken;
    }
    __syncwarp();
    if (lane == 0) {
      s.pos = pos < n ? pos : n;
      s.count = count;
    }
  }
  __syncthreads();
}

// Chunk puts network source p brings to this rank in one prefetch: its rows for this rank's slots,
// cut into chunkBytes.
struct PrefetchPuts {
  const LbArgs* a;
  __device__ uint32_t operator()(int p) const {
    const LinkArgs& c = a->link;
    uint32_t puts = 0;
    for (int s = 0; s < a->l.numSlots; ++s) {
      const int e = a->mapping[c.rank * a->l.numSlots + s];
      if (e < 0 || e >= a->numExperts || e / a->localExperts != p) continue;
      for (int t = 0; t < a->l.numWeightTensors; ++t) puts += uint32_t(chunksOf(a->l.weightRowBytes[t], a->l.chunkBytes));
    }
    return puts;
  }
};

__device__ void prefetch(const LbArgs& a, const Transport& t, OpSession& ses, MappingScan& scan) {
  const LinkArgs& c = a.link;
  const int nCtas = int(gridDim.x), me = int(blockIdx.x);
  const Transport stageT[kLbStageBuffers] = {Transport(c, lbGinCounterBase(0, nCtas)),
                                             Transport(c, lbGinCounterBase(1, nCtas))};
  static_assert(kLbStageBuffers == 2, "stageT lists one transport per stage buffer");
  if (t.hasGin()) ses.readyAllGin(t, kPhaseLbReady);
  uint64_t item = 0;  // network chunk items so far (every CTA counts them all)
  int buffer = 0;
  if (threadIdx.x == 0) scan.pos = 0;
  __syncthreads();
  for (;;) {
    nextReplicas(a, scan);
    if (scan.count == 0 || ses.abort) break;
    for (int r = 0; r < scan.count; ++r) {
      const Replica rep = scan.batch[r];
      for (int ti = 0; ti < a.l.numWeightTensors; ++ti) {
        const uint64_t rowBytes = a.l.weightRowBytes[ti];
        const char* src = a.weights[ti] + uint64_t(rep.local) * rowBytes;
        const uint64_t dstOff = lbSlotOffset(a.l, ti, rep.slot);
        if (rep.holder == c.rank || t.lsa(rep.holder)) {
          char* dst = (rep.holder == c.rank ? t.localBase() : t.lsaBase(rep.holder)) + dstOff;
          const ByteRange share = vecShare(rowBytes, nCtas, me);
          ctaCopyBytes<false>(dst + share.begin, src + share.begin, share.size());
          continue;
        }
        const uint64_t chunks = chunksOf(rowBytes, a.l.chunkBytes);
        for (uint64_t ch = 0; ch < chunks; ++ch, ++item) {
          if (int(item % uint64_t(nCtas)) != me) continue;
          const Transport& st = stageT[buffer];
          // The buffer's previous put (this CTA's, counted on its own counter) has left it.
          if (!st.completeGinCounters(st.counterOf(), 1)) ses.abort = 1;
          if (ses.abort) break;
          const ByteRange piece = chunkRange(rowBytes, a.l.chunkBytes, ch);
          const uint64_t stageOff = lbStageOffset(a.l, me, buffer);
          ctaCopyBytes<false>(t.localBase() + stageOff, src + piece.begin, piece.size());
          __syncthreads();
          if (threadIdx.x == 0)
            st.putSignal(rep.holder, dstOff + piece.begin, stageOff, piece.size(), kFlagArriveDispatch, 1u,
                         dataContextOf(rep.holder, c.ginContexts));
          buffer = (buffer + 1) % kLbStageBuffers;
        }
      }
    }
    __syncthreads();
  }
  // Every put of this CTA left its stage buffers (the next call reuses them; destroy may follow).
  if (t.hasGin())
    for (int k = 0; k < kLbStageBuffers; ++k)
      if (!stageT[k].completeGinCounters(stageT[k].counterOf(), 1)) ses.abort = 1;
  ses.arriveLsa(t, kLbSessionKind);
  const PrefetchPuts rows{&a};
  ses.waitArrivals(t, a.session, kLbSessionKind, kPhaseLbData, true, true, rows);
  ses.end(t, a.session, kLbSessionKind, rows);
}

// One step of the gradient reduction: `pieces` consecutive pieces of laneElems elements from
// element `p0` on (clipped at `end`), for each replica of the batch.
struct GradStep {
  uint64_t p0, end, laneElems;
  int pieces;
  __device__ uint64_t pieceBegin(int g) const { return p0 + uint64_t(g) * laneElems; }
  __device__ uint64_t pieceEnd(int g) const {
    const uint64_t e = pieceBegin(g) + laneElems;
    return e < end ? e : end;
  }
  // Pieces holding elements (the range's last step may hold fewer than `pieces`).
  __device__ int filled() const {
    const uint64_t left = end > p0 ? end - p0 : 0;
    const uint64_t n = (left + laneElems - 1) / laneElems;
    return n < uint64_t(pieces) ? int(n) : pieces;
  }
  // This CTA's lane of piece g of replica r (of `count` in the batch) in lane set `set`.
  static __device__ int lane(int set, int g, int r, int count) { return set * kLbSetLanes + g * count + r; }
};

// Every thread (Transport::get): the gets of one step's network replicas into lane set `set`
// (lane g * count + r of the set: piece g of replica r). true, on every thread, if any was posted.
__device__ bool getStep(const LbArgs& a, const Transport& t, const MappingScan& scan, int ti, const GradStep& st, int set,
                        int ctx) {
  const LinkArgs& c = a.link;
  bool any = false;
  const int pieces = st.filled();
  for (int r = 0; r < scan.count; ++r) {
    const Replica rep = scan.batch[r];
    if (rep.holder == c.rank || t.lsa(rep.holder)) continue;
    for (int g = 0; g < pieces; ++g) {
      const uint64_t b = st.pieceBegin(g), e = st.pieceEnd(g);
      any = true;
      t.get(rep.holder, lbLaneOffset(a.l, int(blockIdx.x), GradStep::lane(set, g, r, scan.count)),
            lbSlotGradOffset(a.l, ti, rep.slot) + b * sizeof(float), (e - b) * sizeof(float), ctx);
    }
  }
  return any;
}

// Every thread: adds one step's pieces (network ones from lane set `set`, flushed) to the
// originals' gradients, each element's replicas in batch order.
__device__ void addStep(const LbArgs& a, const Transport& t, const MappingScan& scan, int ti, const GradStep& st, int set) {
  const LinkArgs& c = a.link;
  const uint64_t rowElems = a.l.gradRowElems[ti];
  const int pieces = st.filled();
  for (int g = 0; g < pieces; ++g) {
    const uint64_t b = st.pieceBegin(g), e = st.pieceEnd(g);
    const float* src[kLbSetLanes];
    float* dst[kLbSetLanes];
    for (int r = 0; r < scan.count; ++r) {
      const Replica rep = scan.batch[r];
      const bool near = rep.holder == c.rank || t.lsa(rep.holder);
      const char* base = near ? (rep.holder == c.rank ? t.localBase() : t.lsaBase(rep.holder)) +
                                    lbSlotGradOffset(a.l, ti, rep.slot) + b * sizeof(float)
                              : t.localBase() + lbLaneOffset(a.l, int(blockIdx.x), GradStep::lane(set, g, r, scan.count));
      src[r] = reinterpret_cast<const float*>(base);
      dst[r] = a.grads[ti] + uint64_t(rep.local) * rowElems + b;
    }
    // Each element: the batch's replicas in mapping order (one thread per 16-byte vector of
    // elements: the order of the additions is the mapping's, whatever the CTA count). Pieces
    // start and end on whole vectors (vecShare, laneBytes % 16 == 0), and rows, slots and lanes
    // are 16-byte aligned; lanes and peers' slots are read volatile (written by GIN / peers).
    const uint64_t vecs = (e - b) * sizeof(float) / kVecBytes;
    for (uint64_t v = threadIdx.x; v < vecs; v += blockDim.x)
      for (int r = 0; r < scan.count; ++r) {
        float4* d = reinterpret_cast<float4*>(dst[r]) + v;
        const int4 raw = ldVolatile(reinterpret_cast<const int4*>(src[r]) + v);
        float4 acc = *d;
        acc.x = acc.x + __int_as_float(raw.x);
        acc.y = acc.y + __int_as_float(raw.y);
        acc.z = acc.z + __int_as_float(raw.z);
        acc.w = acc.w + __int_as_float(raw.w);
        *d = acc;
      }
  }
}

__device__ void reduceGrads(const LbArgs& a, const Transport& t, OpSession& ses, MappingScan& scan) {
  const LinkArgs& c = a.link;
  const int nCtas = int(gridDim.x), me = int(blockIdx.x);
  const int ctx = c.ginContexts > 0 ? me % c.ginContexts : 0;
  if (t.hasGin()) ses.readyAllGin(t, kPhaseLbReady);
  const uint64_t laneElems = a.l.laneBytes / sizeof(float);
  for (int ti = 0; ti < a.l.numGradTensors && !ses.abort; ++ti) {
    // This CTA's elements of every row: whole 16-byte vectors (rows are multiples of 4 elements).
    const ByteRange mine = vecShare(a.l.gradRowElems[ti] * sizeof(float), nCtas, me);
    const uint64_t begin = mine.begin / sizeof(float), end = mine.end / sizeof(float);
    if (threadIdx.x == 0) scan.pos = 0;
    __syncthreads();
    for (;;) {
      nextReplicas(a, scan);
      if (scan.count == 0) break;
      if (begin >= end) continue;  // no elements here; the walk goes on (it records bad entries)
      const int pieces = kLbSetLanes / scan.count;
      const uint64_t stepElems = uint64_t(pieces) * laneElems;
      // Step k + 1's gets go out before step k is added; one flush per step (it waits for every
      // get of this CTA on ctx: those of the step about to be added).
      bool pending = getStep(a, t, scan, ti, GradStep{begin, end, laneElems, pieces}, 0, ctx);
      int set = 0;
      for (uint64_t p0 = begin; p0 < end; p0 += stepElems, set ^= 1) {
        if (pending && !t.completeGets(ctx)) ses.abort = 1;
        pending = false;
        __syncthreads();
        if (ses.abort) break;
        const uint64_t next = p0 + stepElems;
        pending = next < end && getStep(a, t, scan, ti, GradStep{next, end, laneElems, pieces}, set ^ 1, ctx);
        addStep(a, t, scan, ti, GradStep{p0, end, laneElems, pieces}, set);
        __syncthreads();  // this set is free for step k + 2's gets
      }
      if (ses.abort) break;  // the last step posts no gets: none is in flight here (but after a timeout)
    }
  }
  // Done reading: NVLink peers from every CTA; network peers once, from the last CTA, after every
  // CTA's gets completed (each flushed its own before adding).
  ses.arriveLsa(t, kLbSessionKind);
  if (t.hasGin() && ses.lastToStage(a.session, kLbSessionKind, 0) && !ses.abort)
    for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x)
      if (!t.lsa(p)) t.addWord(p, t.ownId(kFlagArriveDispatch), 1u, dataContextOf(p, c.ginContexts));
  const OnePerPeer rows;
  ses.waitArrivals(t, a.session, kLbSessionKind, kPhaseLbData, true, true, rows);
  ses.end(t, a.session, kLbSessionKind, rows);
}

__global__ void __launch_bounds__(kCollThreads, 1) lbKernel(const __grid_constant__ LbArgs a) {
  const Transport t(a.link);
  __shared__ OpSession ses;
  __shared__ MappingScan scan;
  ses.begin(t, a.session, kLbSessionKind, kPhaseLbReady);
  if (a.op == kLbPrefetch)
    prefetch(a, t, ses, scan);
  else
    reduceGrads(a, t, ses, scan);
}

}  // namespace

cudaError_t launchLb(const LbArgs& a, int nCtas, cudaStream_t stream) {
  lbKernel<<<nCtas, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t preloadLbKernels() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, lbKernel);
}

}  // namespace epx::dev
