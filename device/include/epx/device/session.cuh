// The protocol session of one dispatch or combine, on the transport layer (transport.cuh):
//   begin()        read this op's sequence number; CTA 0 tells every peer that it may send this op
//                  to us (ready); every CTA waits until every peer may receive it from us;
//   lastToStage()  the last CTA to finish staging GIN rows (it posts the op's puts);
//   arriveLsa()    after this CTA's stores into NVLink peers' windows: +1 on each such peer's
//                  arrival word (GIN arrivals travel with the data puts, see protocol.h);
//   waitArrivals() until every source's data (or "done reading") arrived: NVLink sources when all
//                  their CTAs added (seq * nCtas), network sources when the rows they put (signal
//                  summed over contexts) reach the running total kept in Common::arrived;
//   end()          the last CTA advances the running totals and publishes the sequence number.
// All CTAs of the grid must be co-resident (checked at group creation), and every rank launches
// the same grid (agreed at group creation).
#pragma once
#include "epx/device/ep_args.h"
#include "epx/device/transport.cuh"

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

struct OpSession {
  uint32_t seq;
  int abort;

  __device__ void begin(const Transport& t, int kind, int phase) {
    const Common& c = t.c;
    const int readyKind = kind == kOpDispatch ? kFlagReadyDispatch : kFlagReadyCombine;
    if (threadIdx.x == 0) {
      seq = reinterpret_cast<volatile uint32_t*>(c.state->opSeq)[kind] + 1;
      abort = 0;
    }
    __syncthreads();
    const uint32_t s = seq;
    if (blockIdx.x == 0)
      for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) t.publish(p, readyKind, s);
    bool ok = true;
    for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) ok = ok && t.wait(readyKind, p, s, phase);
    if (!ok) abort = 1;
    __syncthreads();
    t.mark(kStepReady);
  }

  // Called by every CTA after staging its rows for network peers: true in the one CTA that came
  // last, which then sees every CTA's staged rows (system-scope fence before counting) and posts
  // the GIN puts of the whole op — a few large operations per peer instead of a few per CTA and
  // peer (each GIN operation has a fixed cost in the proxy; docs/performance.md).
  __device__ bool lastToStage(const Transport& t, int kind) {
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) {
      __threadfence_system();
      last = atomicAdd(&t.c.state->stagedCtas[kind], 1u) == gridDim.x - 1;
      if (last) t.c.state->stagedCtas[kind] = 0;  // every CTA has counted
    }
    __syncthreads();
    return last;
  }

  __device__ void arriveLsa(const Transport& t, int kind) {
    __syncthreads();
    const Common& c = t.c;
    if (abort) return;
    const int arriveKind = kind == kOpDispatch ? kFlagArriveDispatch : kFlagArriveCombine;
    const int first = c.rank - c.lsaRank;
    for (int i = threadIdx.x; i < c.lsaSize; i += blockDim.x) t.addLsa(first + i, arriveKind, 1u);
    t.mark(kStepSent);
  }

  __device__ void waitArrivals(const Transport& t, int kind, int phase, bool lsaSources, bool ginSources,
                               const GinRows& rows) {
    const Common& c = t.c;
    const int arriveKind = kind == kOpDispatch ? kFlagArriveDispatch : kFlagArriveCombine;
    bool ok = true;
    if (!abort) {
      for (int p = threadIdx.x; p < c.nRanks && ok; p += blockDim.x) {
        if (t.lsa(p)) {
          if (lsaSources) ok = t.wait(arriveKind, p, seq * uint32_t(c.nCtas), phase);
        } else if (ginSources) {
          const uint32_t target = c.arrived[kind * c.nRanks + p] + rows(p);
          ok = t.wait(arriveKind, p, target, phase);
        }
      }
    }
    if (!ok) abort = 1;
    __syncthreads();
    t.mark(kStepArrived);
  }

  __device__ void end(const Transport& t, int kind, const GinRows& rows) {
    __syncthreads();
    t.mark(kStepEnd);
    const Common& c = t.c;
    __shared__ bool last;
    if (threadIdx.x == 0) {
      __threadfence();
      last = atomicAdd(&c.state->doneCtas[kind], 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    if (!abort && t.hasGin())
      for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x)
        if (!t.lsa(p)) c.arrived[kind * c.nRanks + p] += rows(p);
    __syncthreads();
    if (threadIdx.x == 0) {
      c.state->doneCtas[kind] = 0;
      __threadfence();
      reinterpret_cast<volatile uint32_t*>(c.state->opSeq)[kind] = seq;
    }
  }
};

}  // namespace epx::dev
