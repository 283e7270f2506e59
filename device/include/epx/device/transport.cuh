// epx's one transport layer: how a kernel reaches a peer rank, behind one interface.
//   LSA  (NVLink peers in this rank's LSA team): stores and loads through the peer's window
//        pointer; synchronization words are u32 flags in the window (window_layout.h), written
//        with system-scope release stores/adds.
//   GIN  (every other peer): puts from this rank's registered window into the peer's window, and
//        GIN signals (one per (FlagKind, source rank), see protocol.h), on up to 4 contexts.
// Reads and bounded waits turn a stalled peer into an AsyncError naming the peer, the phase and
// the transport instead of a hang. Used by every epx kernel, through the completion protocol
// (completion.cuh) for its synchronization.
//
// NCCL 2.28.9 constraints honoured here: indexed signals only, SignalAdd (never SignalInc mixed
// with adds), no putValue (the proxy path writes out of bounds), ordering only per (context, peer):
// a data signal is posted on the same context as the puts it covers, and readers sum a kind's
// signal over every context.
#pragma once
#include <nccl_device.h>

#include <cstdint>

#include "epx/device/bulk_copy.cuh"
#include "epx/device/link_args.h"
#include "epx/device/protocol.h"

// One-sided GIN get (ncclGin::get, flushAsync, wait) is in NCCL's device API from 2.30.3 on; a
// build against older headers reads network peers' windows not at all (LSA peers always).
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 3)
#define EPX_HAVE_GIN_GET 1
#else
#define EPX_HAVE_GIN_GET 0
#endif
// NCCL's own bounded waits (flush / wait / waitCounter / waitSignal with timeoutCycles, returning
// ncclTimeout) are in its device API from 2.32 on (not in 2.30.7's headers). epx uses them where it
// has no wait of its own to bound: the flush that completes one-sided gets.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
#define EPX_HAVE_GIN_TIMED_FLUSH 1
#else
#define EPX_HAVE_GIN_TIMED_FLUSH 0
#endif

namespace epx::dev {

// ---- system-scope flag primitives (LSA) -------------------------------------------------------

__device__ __forceinline__ uint32_t loadAcquireSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void storeReleaseSys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void storeReleaseSysI32(int* p, int v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void addReleaseSys(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- async errors ------------------------------------------------------------------------------

// Records `rec`'s kind of error once (first writer wins): fields first, then the code with a
// system-scope release, so a host reader that sees the code sees the fields it describes.
__device__ __forceinline__ void recordError(int* claim, ErrorRecord* rec, int code, int phase, int peer, int rank,
                                            int transport, long long d0, long long d1) {
  if (atomicCAS_system(claim, 0, 1) != 0) return;
  rec->phase = phase;
  rec->peer = peer;
  rec->rank = rank;
  rec->transport = transport;
  rec->detail0 = d0;
  rec->detail1 = d1;
  __threadfence_system();
  storeReleaseSysI32(&rec->code, code);
}

__device__ __forceinline__ void recordTimeout(AsyncError* e, int phase, int peer, int rank, int transport,
                                              long long expected, long long seen) {
  recordError(&e->timeoutClaim, &e->timeout, /*ncclRemoteError*/ 6, phase, peer, rank, transport, expected, seen);
}

__device__ __forceinline__ void recordBadId(AsyncError* e, int rank, long long token, long long value) {
  recordError(&e->badIdClaim, &e->badId, /*ncclInvalidArgument*/ 4, kPhaseBadExpertId, -1, rank, -1, token, value);
}

__device__ __forceinline__ bool timedOut(const AsyncError* e) {
  return *reinterpret_cast<const volatile int*>(&e->timeout.code) != 0;
}

// ---- the transport -----------------------------------------------------------------------------

// How a device wait ends when its target never comes (Transport::spinBounded): after the link's
// timeout counted from `start` (globaltimer ns; 0: from the wait's own start), recording which peer
// and phase; or early, once another wait of the link has recorded its timeout. `quiet`: the link
// already failed and is being drained before an abort: earlier records are ignored and nothing is
// recorded.
struct WaitBound {
  uint64_t start = 0;
  bool quiet = false;
};

struct Transport {
  const LinkArgs& link;
  uint32_t beaconKernel = 0;  // BeaconKernel of the running kernel (0: no beacons)
  uint32_t beaconSeq = 0;
  int counterBase_ = 0;       // GIN counter of CTA 0 (counterOf)

  __device__ explicit Transport(const LinkArgs& l) : link(l) {}
  // counterBase: this kernel's CTA b counts its puts on GIN counter counterBase + b (kernels whose
  // puts must complete independently of another kernel's use disjoint ranges: the low-latency
  // dispatch and combine, ll_layout.h llGinCounterBase).
  __device__ Transport(const LinkArgs& l, int counterBase) : link(l), counterBase_(counterBase) {}

  // Progress beacon of this CTA (debugging; no-op unless the group has beacons): thread 0 stores
  // (kernel, step, sequence) into the CTA's host word. `kernel` starts a kernel (and counts it).
  __device__ void startBeacon(uint32_t kernel, uint32_t seq) {
    beaconKernel = kernel;
    beaconSeq = seq;
    if (link.beacons && kernel != kBeaconLayout && blockIdx.x == 0 && threadIdx.x == 0)
      atomicAdd_system(&link.beacons[kBeaconCtas], 1u);  // dispatch/combine kernels started
    mark(kStepStart);
  }
  __device__ void mark(uint32_t step) const {
    if (link.beacons == nullptr || threadIdx.x != 0 || blockIdx.x >= unsigned(kBeaconCtas)) return;
    *reinterpret_cast<volatile uint32_t*>(&link.beacons[blockIdx.x]) = (beaconKernel << 24) | (step << 16) | (beaconSeq & 0xffffu);
  }

  __device__ const ncclDevComm& devComm() const { return *reinterpret_cast<const ncclDevComm*>(link.devComm); }
  __device__ bool lsa(int peer) const { return isLsaPeer(link.rank, link.lsaRank, link.lsaSize, peer); }
  __device__ int transportOf(int peer) const { return lsa(peer) ? kTransportLsa : kTransportGin; }
  __device__ bool hasGin() const { return link.ginContexts > 0; }

  // Window base of an NVLink peer (or of this rank), as a pointer this GPU can store to.
  __device__ char* lsaBase(int peer) const {
    return static_cast<char*>(ncclGetLsaPointer(link.window, link.region, peer - (link.rank - link.lsaRank)));
  }
  __device__ char* localBase() const { return static_cast<char*>(ncclGetLocalPointer(link.window, link.region)); }
  // NCCL's id of this object's GIN signal `id` / counter `counter` (its ranges of the shared window's
  // device communicator, LinkArgs).
  __device__ ncclGinSignal_t signalId(uint32_t id) const { return ncclGinSignal_t(link.firstSignal + id); }
  __device__ ncclGinCounter_t counterId(int counter) const { return ncclGinCounter_t(link.firstCounter + uint32_t(counter)); }

  // Synchronization word `id` (LSA flag in the window whose base is `base`; the GIN signal with the
  // same index). The high-throughput words are (kind, source) = ginSignalId; low-latency words
  // follow them (ll_layout.h). Ids name the word as its reader sees it (source = the writer).
  __device__ uint32_t* word(char* base, uint32_t id) const {
    return reinterpret_cast<uint32_t*>(base + link.flags) + id;
  }
  __device__ uint32_t* flag(char* base, int kind, int src) const { return word(base, ginSignalId(kind, src, link.nRanks)); }
  __device__ uint32_t ownId(int kind) const { return ginSignalId(kind, link.rank, link.nRanks); }

  // peer's word `id` becomes `value` (LSA store; words that count operations) — GIN adds 1 on the
  // control context, which yields the same cumulative value.
  __device__ void publishWord(int peer, uint32_t id, uint32_t value) const {
    if (lsa(peer)) {
      storeReleaseSys(word(lsaBase(peer), id), value);
    } else {
      ncclGin gin(devComm(), kControlContext);
      gin.signal(ncclTeamWorld(devComm()), peer, ncclGin_SignalAdd{signalId(id), 1});
    }
  }
  __device__ void publish(int peer, int kind, uint32_t value) const { publishWord(peer, ownId(kind), value); }

  // LSA: peer's word `id` += value, after this thread's earlier stores (system scope).
  __device__ void addLsaWord(int peer, uint32_t id, uint32_t value) const {
    __threadfence_system();
    addReleaseSys(word(lsaBase(peer), id), value);
  }
  __device__ void addLsa(int peer, int kind, uint32_t value) const { addLsaWord(peer, ownId(kind), value); }

  // peer's word `id` += value after this thread's earlier stores (LSA) or after every earlier put to
  // peer on context ctx (GIN).
  __device__ void addWord(int peer, uint32_t id, uint32_t value, int ctx) const {
    if (lsa(peer)) {
      addLsaWord(peer, id, value);
    } else {
      __threadfence_system();
      ncclGin gin(devComm(), ctx);
      gin.signal(ncclTeamWorld(devComm()), peer, ncclGin_SignalAdd{signalId(id), value});
    }
  }

  // GIN: `bytes` from this rank's window at srcOff to peer's window at dstOff on context ctx. The
  // source rows may have been written by other threads of the CTA (ordered by a __syncthreads
  // before the call): the system-scope fence makes them visible to the NIC / copy engine on every
  // backend (GDAKI fences only when told the data was already released at system scope).
  // Every put counts its local completion (source consumed) on this CTA's GIN counter, and
  // this CTA's posted total for the context goes up by one: completeGin waits for the two to meet.
  __device__ void put(int peer, uint64_t dstOff, uint64_t srcOff, uint64_t bytes, int ctx) const {
    if (bytes == 0) return;
    __threadfence_system();
    ncclGin gin(devComm(), ctx);
    gin.put(ncclTeamWorld(devComm()), peer, link.window, link.region + dstOff, link.window, link.region + srcOff, bytes,
            ncclGin_None{}, completion());
    countPosted(ctx);
  }

  // GIN: a put whose arrival adds `value` to peer's (kind, this rank) signal on the same context
  // (after this put and every earlier put on that context to that peer). bytes may be 0.
  __device__ void putSignal(int peer, uint64_t dstOff, uint64_t srcOff, uint64_t bytes, int kind, uint32_t value,
                            int ctx) const {
    putSignalWord(peer, dstOff, srcOff, bytes, ownId(kind), value, ctx);
  }
  __device__ void putSignalWord(int peer, uint64_t dstOff, uint64_t srcOff, uint64_t bytes, uint32_t id,
                                uint32_t value, int ctx) const {
    __threadfence_system();
    ncclGin gin(devComm(), ctx);
    const ncclGin_SignalAdd add{signalId(id), value};
    if (bytes == 0) {
      gin.signal(ncclTeamWorld(devComm()), peer, add);
    } else {
      gin.put(ncclTeamWorld(devComm()), peer, link.window, link.region + dstOff, link.window, link.region + srcOff, bytes,
              add, completion());
      countPosted(ctx);
    }
  }

  // One-sided read, called by every thread of the CTA: `bytes` of peer's window at remoteOff into
  // this rank's window at localOff. The peer takes no part (its kernel need not run); what the
  // caller reads must be settled there (the peer's own completion, published earlier).
  //   LSA: the CTA copies through the peer's window pointer; done when the call returns.
  //   GIN (EPX_HAVE_GIN_GET): thread 0 posts a get on context ctx; the bytes are in place after
  //        completeGets(ctx). Without EPX_HAVE_GIN_GET a network peer is never read: the host refuses
  //        such an operation before launch (nccl_version.h, ginGetUnsupported).
  __device__ void get(int peer, uint64_t localOff, uint64_t remoteOff, uint64_t bytes, int ctx) const {
    if (bytes == 0) return;
    if (lsa(peer)) {
      ctaCopyBytes</*kVolatileSrc=*/true>(localBase() + localOff, lsaBase(peer) + remoteOff, bytes);
      return;
    }
#if EPX_HAVE_GIN_GET
    if (threadIdx.x == 0) {
      ncclGin gin(devComm(), ctx);
      gin.get(ncclTeamWorld(devComm()), peer, link.window, link.region + remoteOff, link.window, link.region + localOff,
              bytes);
    }
#else
    (void)ctx;
#endif
  }

  // Every get this CTA posted on context ctx has landed in this rank's window (called by every
  // thread of the CTA; a no-op for LSA reads and without GIN). NCCL's flush of the context: it
  // returns once the NIC (or proxy) completed every earlier operation of the context. Bounded with
  // NCCL's own timeout where the headers have one (2.32+: link.timeoutCycles at the peak SM clock,
  // so at a lower clock the bound is longer in time); a timeout is recorded (kPhaseGinGet, no peer:
  // the flush covers them all) and the call returns false. On 2.30.x the flush is not bounded: a get
  // involves no remote kernel, only the local NIC (or proxy) and the remote memory, and ends when
  // the NIC completes or errors the read; NCCL raises no abort flag in a user's device communicator.
  __device__ bool completeGets(int ctx) const {
    bool ok = true;
#if EPX_HAVE_GIN_GET
    if (hasGin()) {
      __syncthreads();  // every get of this CTA is posted
      mark(kStepCompleting);
      ncclGin gin(devComm(), ctx);
#if EPX_HAVE_GIN_TIMED_FLUSH
      const ncclResult_t r =
          gin.flush(ncclCoopCta(), cuda::memory_order_acquire, ncclGin_None{}, uint64_t(link.timeoutCycles));
      if (r != ncclSuccess && threadIdx.x == 0)
        recordTimeout(link.error, kPhaseGinGet, -1, link.rank, kTransportGin, (long long)link.timeoutCycles, 0);
      ok = r == ncclSuccess;
#else
      gin.flush(ncclCoopCta());
#endif
      mark(kStepCompleted);
    }
#else
    (void)ctx;
#endif
    __syncthreads();
    return ok;
  }

  // Every GIN source buffer this CTA posted is consumed (not: arrived) — before the kernel ends,
  // so the caller may overwrite its buffers and the next op may reuse the staging area. A bounded
  // wait on this CTA's GIN counter of every context against the puts posted so far (NCCL's
  // flush() spins without bound, e.g. after the GIN progress thread stopped on a dead peer).
  // Called by every thread of the CTA (the puts were posted by several threads); false after a
  // timeout (recorded, phase kPhaseGinCompletion).
  __device__ bool completeGin(WaitBound bound = {}) const { return completeGinCounters(counterOf(), 1, bound); }

  // The same for the puts counted on counters [first, first + n) (the low-latency kernels wait for
  // every CTA's earlier puts before they overwrite the staging rows that any CTA may have posted).
  __device__ bool completeGinCounters(int first, int n, WaitBound bound = {}) const {
    __syncthreads();  // every put of this CTA is posted and counted
    mark(kStepCompleting);
    // One (context, counter) pair per thread: the waits overlap instead of adding up.
    bool mine = true;
    for (int i = threadIdx.x; i < n * link.ginContexts && mine; i += blockDim.x) {
      const int ctx = i / n, counter = first + i % n;
      const uint64_t target = atomicAdd(reinterpret_cast<unsigned long long*>(postedSlotOf(ctx, counter)), 0ull);
      ncclGin gin(devComm(), ctx);
      uint64_t seen = 0;
      mine = spinBounded([&] { return counterReached(seen = gin.readCounter(counterId(counter)), target); }, bound, [&] {
        recordTimeout(link.error, kPhaseGinCompletion, -1, link.rank, kTransportGin, (long long)target, (long long)seen);
      });
    }
    const bool ok = __syncthreads_or(!mine) == 0;
    mark(kStepCompleted);
    return ok;
  }

  // This kernel's first GIN counter (see the two-argument constructor).
  __device__ int counterBase() const { return counterBase_; }
  // This CTA's GIN counter (the same id on every context) and its posted total on context ctx.
  __device__ int counterOf() const { return counterBase_ + int(blockIdx.x); }
  __device__ ncclGin_CounterInc completion() const { return ncclGin_CounterInc{counterId(counterOf())}; }
  __device__ uint64_t* postedSlotOf(int ctx, int counter) const {
    return link.ginPosted + size_t(ctx) * link.ginCounters + counter;
  }
  __device__ uint64_t* postedSlot(int ctx) const { return postedSlotOf(ctx, counterOf()); }
  __device__ void countPosted(int ctx) const { atomicAdd(reinterpret_cast<unsigned long long*>(postedSlot(ctx)), 1ull); }

  // Value of (kind, src) as seen by this rank: the LSA flag, or the GIN signal summed over contexts.
  __device__ uint32_t read(int kind, int src) const { return readWord(ginSignalId(kind, src, link.nRanks), src); }
  // Value of word `id`, written by src.
  __device__ uint32_t readWord(uint32_t id, int src) const {
    if (lsa(src)) return loadAcquireSys(word(localBase(), id));
    uint64_t sum = 0;
    for (int ctx = 0; ctx < link.ginContexts; ++ctx) {
      ncclGin gin(devComm(), ctx);
      sum += gin.readSignal(signalId(id));
    }
    return uint32_t(sum);
  }

  // Waits until read(kind, src) reaches target (wrap-safe). Returns false after the group's timeout
  // (recording which peer, phase and transport) or when another wait of the group timed out.
  // Single-thread wait; callers spread sources over threads.
  __device__ bool wait(int kind, int src, uint32_t target, int phase) const {
    return waitWord(ginSignalId(kind, src, link.nRanks), src, target, phase);
  }
  __device__ bool waitWord(uint32_t id, int src, uint32_t target, int phase, WaitBound bound = {}) const {
    return waitWordOr(id, src, target, bound,
                      [&](uint32_t v) { recordTimeout(link.error, phase, src, link.rank, transportOf(src), target, v); });
  }
  // The same, with the caller's own record: onTimeout(value last seen).
  template <class OnTimeout>
  __device__ bool waitWordOr(uint32_t id, int src, uint32_t target, WaitBound bound, OnTimeout onTimeout) const {
    uint32_t v = 0;
    return spinBounded([&] { return reached(v = readWord(id, src), target); }, bound, [&] { onTimeout(v); });
  }

  // The one bounded wait of every device wait: spins until ready() (checked first, then every
  // spin), giving up after the link's timeout counted from bound.start (0: from the call) or, every
  // 256 spins, once another wait of the link recorded a timeout. onTimeout() records this wait's
  // own timeout (it should name the peer and phase). A quiet bound ignores earlier records and
  // records nothing (the drain of a link that already failed).
  template <class Ready, class OnTimeout>
  __device__ bool spinBounded(Ready ready, WaitBound bound, OnTimeout onTimeout) const {
    if (ready()) return true;
    const uint64_t start = bound.start ? bound.start : globalTimerNs();
    for (uint32_t spin = 1;; ++spin) {
      if (ready()) return true;
      if ((spin & kSpinsPerCheck) == 0) {
        if (!bound.quiet && timedOut(link.error)) return false;
        if (globalTimerNs() - start > uint64_t(link.timeoutNs)) {
          if (!bound.quiet) onTimeout();
          return false;
        }
      }
    }
  }
  static constexpr uint32_t kSpinsPerCheck = 255u;  // spins between clock and error checks, minus 1
};

}  // namespace epx::dev
