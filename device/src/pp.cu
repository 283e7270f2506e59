// PP send / recv kernels (ncclEpPpSend / ncclEpPpRecv): one message per launch between this rank
// and a.peer, through the receiver's slots (pp_layout.h), on the transport layer:
//   send  thread 0 of every CTA waits (bounded) until the receiver freed the slot of this message
//         (at most `slots` messages in flight per pair); NVLink peer: the CTAs store the header and
//         their share of the message into the peer's slot and the last CTA publishes the message
//         count; network peer: the CTAs stage the message in this rank's window (one of two stage
//         buffers per peer, alternate messages) in up to 8 rounds of the channel's chunk bytes
//         (ppPutRounds) and the last CTA of each round puts it with +1 on the peer's data signal,
//         so the wire carries one round while the next is staged. The kernel ends once its puts
//         are posted (the message is in the stage: the caller's buffer is free), so a receive
//         queued behind it on the same stream starts while the rounds are on the wire; the next
//         send that uses the same stage buffer first waits until every earlier put from it left
//         (the message before it may still be on the wire); ppFlushKernel waits for all of them
//         before the channel is destroyed.
//   recv  thread 0 of every CTA waits (bounded) for the message (network peer: for its first put
//         round, which carries the header); a message larger than the receive buffer is dropped
//         and reported (async error, nothing written); the CTAs copy their share out — from a
//         network peer round by round, each as soon as it arrived, while later rounds are on the
//         wire — and the last CTA frees the slot (count to the sender).
// Message counts are cumulative per ordered pair and live in device memory (PpState), so sends and
// receives capture into CUDA graphs and replay without the host (the completion protocol,
// completion.cuh: sequence numbers, last CTA, the slot credit of depth `slots`).
#include "epx/device/bulk_copy.cuh"
#include "epx/device/chunking.h"
#include "epx/device/coll_launch.h"
#include "epx/device/completion.cuh"

namespace epx::dev {

namespace {

__global__ void __launch_bounds__(kCollThreads, 1) ppSendKernel(const __grid_constant__ PpArgs a) {
  const LinkArgs& c = a.link;
  const int peer = a.peer;
  const uint32_t seq = nextSeq(&a.st.sendSeq[peer]);  // this message's number (every thread)
  const int buffer = ppStageBufferOf(seq);
  const Transport t(a.link, ppGinCounterBase(buffer, int(gridDim.x)));  // puts count on the buffer's counters
  const bool gin = !t.lsa(peer);
  __shared__ int ok;
  if (threadIdx.x == 0) ok = waitCredit(t, kPpFlagFree, peer, seq, uint32_t(a.pl.numSlots), kPhasePpSlot);
  __syncthreads();
  const int slot = ppSlotOf(seq, a.pl.numSlots);
  const uint64_t slotOff = ppSlotOffset(a.pl, c.rank, slot);
  if (!gin) {  // NVLink: every CTA stores its share into the peer's slot; the last one publishes
    if (ok) {
      char* base = t.lsaBase(peer) + slotOff;
      if (blockIdx.x == 0 && threadIdx.x == 0) {
        PpHeader* h = reinterpret_cast<PpHeader*>(base);
        h->bytes = a.bytes;
        h->seq = seq;
      }
      const ByteRange r = vecShare(a.bytes, gridDim.x, blockIdx.x);
      ctaCopyBytes<false>(base + kPpHeaderBytes + r.begin, a.src + r.begin, r.size());
    }
    if (lastCtaOf(&a.st.sendDone[peer]) && threadIdx.x == 0 && ok) {
      t.publish(peer, kPpFlagData, seq);
      publishSeq(&a.st.sendSeq[peer], seq);
    }
    return;
  }
  // Network: this message's stage buffer is free once every earlier put from that buffer (counted
  // on its counters, by any CTA: message seq - 2's and older) left it; the other buffer may still
  // be on the wire. Then stage and put round by round (the last CTA of each round posts it, +1 on
  // the data signal).
  if (!t.completeGinCounters(t.counterBase(), int(gridDim.x)) && threadIdx.x == 0) ok = 0;
  __syncthreads();
  const uint64_t stageOff = ppStageOffset(a.pl, peer, buffer);
  char* stage = t.localBase() + stageOff;
  const int rounds = ppPutRounds(a.bytes, a.chunkBytes);
  for (int j = 0; j < rounds; ++j) {
    const ByteRange rr = vecShare(a.bytes, rounds, j);
    if (ok) {
      if (j == 0 && blockIdx.x == 0 && threadIdx.x == 0) {
        PpHeader* h = reinterpret_cast<PpHeader*>(stage);
        h->bytes = a.bytes;
        h->seq = seq;
      }
      const ByteRange r = vecShare(rr.size(), gridDim.x, blockIdx.x);
      ctaCopyBytes<false>(stage + kPpHeaderBytes + rr.begin + r.begin, a.src + rr.begin + r.begin, r.size());
    }
    if (lastCtaOf(&a.st.sendStaged[peer * kPpMaxPutRounds + j]) && threadIdx.x == 0 && ok) {
      const uint64_t from = j == 0 ? 0 : kPpHeaderBytes + rr.begin, to = kPpHeaderBytes + rr.end;
      t.putSignal(peer, slotOff + from, stageOff + from, to - from, kPpFlagData, 1u, dataContextOf(peer, c.ginContexts));
      if (j == rounds - 1) publishSeq(&a.st.sendSeq[peer], seq);
    }
  }
}

// Every put of the channel left the stage (before the window goes away). One CTA.
__global__ void __launch_bounds__(kCollThreads, 1) ppFlushKernel(const __grid_constant__ PpArgs a) {
  const Transport t(a.link);
  t.completeGinCounters(0, a.link.ginCounters);
}

__global__ void __launch_bounds__(kCollThreads, 1) ppRecvKernel(const __grid_constant__ PpArgs a) {
  const Transport t(a.link);
  const LinkArgs& c = a.link;
  const int peer = a.peer;
  const bool gin = !t.lsa(peer);
  __shared__ uint32_t seq, rounds0;
  __shared__ int ok;
  __shared__ unsigned long long bytes;
  if (threadIdx.x == 0) {
    seq = nextSeq(&a.st.recvSeq[peer]);
    rounds0 = gin ? publishedCount(&a.st.recvRounds[peer]) : 0;
    // NVLink: the published message count; network: the first put round (it carries the header).
    ok = t.wait(kPpFlagData, peer, gin ? rounds0 + 1 : seq, kPhasePpData);
    if (ok) {
      const char* slotBase = t.localBase() + ppSlotOffset(a.pl, peer, ppSlotOf(seq, a.pl.numSlots));
      bytes = *reinterpret_cast<const volatile unsigned long long*>(slotBase);
    }
  }
  __syncthreads();
  // Network: the sender's put rounds of this message (each one more on the data signal).
  const int rounds = gin && ok ? ppPutRounds(bytes, a.chunkBytes) : 1;
  if (ok) {
    const char* data = t.localBase() + ppSlotOffset(a.pl, peer, ppSlotOf(seq, a.pl.numSlots)) + kPpHeaderBytes;
    const bool fits = bytes <= a.bytes;
    if (!fits && blockIdx.x == 0 && threadIdx.x == 0)
      recordError(&c.error->badIdClaim, &c.error->badId, /*ncclInvalidArgument*/ 4, kPhasePpRecvTooSmall, peer,
                  c.rank, t.transportOf(peer), (long long)bytes, (long long)a.bytes);
    for (int j = 0; j < rounds; ++j) {
      if (j > 0) {  // round j is in once the data signal counts it (rounds arrive in order)
        if (threadIdx.x == 0 && ok) ok = t.wait(kPpFlagData, peer, rounds0 + uint32_t(j) + 1u, kPhasePpData);
        __syncthreads();
        if (!ok) break;
      }
      if (!fits) continue;  // dropped, but every round is waited for before the slot is freed
      const ByteRange rr = vecShare(bytes, rounds, j);
      const ByteRange r = vecShare(rr.size(), gridDim.x, blockIdx.x);
      ctaCopyBytes<true>(a.dst + rr.begin + r.begin, data + rr.begin + r.begin, r.size());
    }
    if (a.recvBytes && blockIdx.x == 0 && threadIdx.x == 0) *a.recvBytes = bytes;
  }
  if (lastCtaOf(&a.st.recvDone[peer]) && threadIdx.x == 0 && ok) {
    t.publish(peer, kPpFlagFree, seq);  // the slot's data has been read by every CTA
    if (gin) publishSeq(&a.st.recvRounds[peer], rounds0 + uint32_t(rounds));
    publishSeq(&a.st.recvSeq[peer], seq);
  }
}

}  // namespace

cudaError_t launchPpSend(const PpArgs& a, int nCtas, cudaStream_t stream) {
  ppSendKernel<<<nCtas, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t preloadPpKernels() {
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, ppSendKernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, ppFlushKernel);
  return e != cudaSuccess ? e : cudaFuncGetAttributes(&attr, ppRecvKernel);
}

cudaError_t launchPpFlush(const PpArgs& a, cudaStream_t stream) {
  ppFlushKernel<<<1, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launchPpRecv(const PpArgs& a, int nCtas, cudaStream_t stream) {
  ppRecvKernel<<<nCtas, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace epx::dev
