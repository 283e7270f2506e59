// The synchronization skeleton shared by the dispatch and combine kernels:
//   begin()       read this op's sequence number, tell every peer we may receive it (ready),
//                 wait until every peer may receive it from us;
//   signalSent()  after this CTA's rows are stored in the peers' windows: one release-add on each
//                 peer's per-source arrival counter;
//   waitAllSent() until every CTA of every peer has added (counter >= seq * gridDim.x);
//   end()         the last CTA to finish publishes the sequence number for the next op.
// All CTAs of the grid must be co-resident (grid <= SMs, one CTA per SM), and every rank launches
// the same grid size (it comes from the group config).
#pragma once
#include <nccl_device.h>

#include "epx/device/ep_args.h"
#include "epx/device/sync.cuh"

namespace epx::dev {

// Source rank of received (deduplicated) row i, given the exclusive prefix recvBase[0..R].
__device__ __forceinline__ int sourceOf(const int* recvBase, int R, int i) {
  int s = 0;
  while (s + 1 < R && i >= recvBase[s + 1]) ++s;
  return s;
}

struct OpSync {
  char* peerBase[kMaxRanks];  // window base of every rank (LSA pointers)
  uint32_t seq;
  int abort;

  __device__ char* local(const Common& c) const { return peerBase[c.rank]; }

  __device__ void begin(const Common& c, int kind, int phase) {
    const int tid = threadIdx.x;
    if (tid < c.nRanks) peerBase[tid] = static_cast<char*>(ncclGetLsaPointer(c.window, 0, tid));
    if (tid == 0) {
      seq = reinterpret_cast<volatile uint32_t*>(c.state->opSeq)[kind] + 1;
      abort = 0;
    }
    __syncthreads();
    if (tid < c.nRanks) {
      if (blockIdx.x == 0) storeReleaseSys(readyFlag(peerBase[tid], c.wl, kind, c.rank), seq);
      if (!waitFlag(readyFlag(peerBase[c.rank], c.wl, kind, tid), seq, c, phase, tid)) abort = 1;
    }
    __syncthreads();
  }

  __device__ void signalSent(const Common& c, int kind) {
    __syncthreads();
    if (threadIdx.x < c.nRanks && !abort) {
      __threadfence_system();
      addReleaseSys(arrivals(peerBase[threadIdx.x], c.wl, kind, c.rank), 1u);
    }
  }

  __device__ void waitAllSent(const Common& c, int kind, int phase) {
    if (threadIdx.x < c.nRanks && !abort) {
      if (!waitFlag(arrivals(peerBase[c.rank], c.wl, kind, threadIdx.x), seq * gridDim.x, c, phase, threadIdx.x))
        abort = 1;
    }
    __syncthreads();
  }

  __device__ void end(const Common& c, int kind) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      const uint32_t prev = atomicAdd(&c.state->doneCtas[kind], 1u);
      if (prev == gridDim.x - 1) {
        c.state->doneCtas[kind] = 0;
        reinterpret_cast<volatile uint32_t*>(c.state->opSeq)[kind] = seq;
      }
    }
  }
};

}  // namespace epx::dev
