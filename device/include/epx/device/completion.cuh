// The completion protocol of every epx kernel (EP layout, dispatch and combine, low-latency halves,
// bucket collectives, PP send/recv), on the transport layer (transport.cuh):
//   op sequence   every op stream (an op kind of a group, an LL half, an ordered PP pair) counts
//                 its ops in device memory: an op is number nextSeq() (the count + 1), and the
//                 op's last CTA publishes that number when the op is done (publishSeq), so CUDA
//                 graphs replay and back-to-back calls run without the host;
//   last CTA      lastCtaOf(): the one CTA that finished a grid-wide step last does the step's
//                 single-threaded part (posts a put round, publishes a count, frees a slot,
//                 finalizes the layout), seeing every CTA's stores;
//   credits       before a producer writes op #seq into a consumer's area it waits for the
//                 consumer's released count: waitCredit(), the free/ready rule of protocol.h
//                 (creditTarget: depth 0 "started", 1 "finished the previous op", LL banks, PP
//                 slots);
//   arrivals      a consumer waits for cumulative arrival words and signals: NVLink sources add
//                 per CTA, network sources per row or put (the sessions: session.cuh for EP and
//                 buckets, ll_session.cuh for LL; PP counts put rounds);
//   bounded       every wait is Transport::wait / waitWord: a timeout records the peer, the
//                 phase and the transport (AsyncError) and the kernel aborts instead of hanging.
// Every synchronization word is cumulative and never reset while its owner lives (protocol.h).
#pragma once
#include "epx/device/transport.cuh"

namespace epx::dev {

// The op stream's published count (ops done so far), and the number of the op that starts on it.
__device__ __forceinline__ uint32_t publishedCount(const uint32_t* count) {
  return *reinterpret_cast<const volatile uint32_t*>(count);
}
__device__ __forceinline__ uint32_t nextSeq(const uint32_t* count) { return publishedCount(count) + 1u; }

// The op's last CTA (one thread): op #seq is done on `count`, after this CTA's earlier stores.
__device__ __forceinline__ void publishSeq(uint32_t* count, uint32_t seq) {
  __threadfence();
  *reinterpret_cast<volatile uint32_t*>(count) = seq;
}

// Every thread of the CTA, after its share of a grid-wide step: true in every thread of the one CTA
// that got here last, which then sees every CTA's earlier stores (system-scope fence before
// counting, so also the NIC / copy engine of a GIN put it posts next). `counter` (zero between
// steps) is re-armed for the next step.
__device__ __forceinline__ bool lastCtaOf(uint32_t* counter) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
    if (last) {
      *counter = 0;  // every CTA has counted this step
      __threadfence();
    }
  }
  __syncthreads();
  return last != 0;
}

// One thread: until `src` released enough ops for this rank to write op #seq into one of its
// `depth` areas (protocol.h creditTarget), on `src`'s word of `kind`. false after a timeout
// (recorded, naming the peer and `phase`).
__device__ __forceinline__ bool waitCredit(const Transport& t, int kind, int src, uint32_t seq, uint32_t depth,
                                           int phase) {
  return t.wait(kind, src, creditTarget(seq, depth), phase);
}
// The same on a synchronization word of the caller's own layout (low-latency free words).
__device__ __forceinline__ bool waitCreditWord(const Transport& t, uint32_t id, int src, uint32_t seq, uint32_t depth,
                                               int phase) {
  return t.waitWord(id, src, creditTarget(seq, depth), phase);
}

}  // namespace epx::dev
