// The GIN lifecycle kernels of a window link (host/src/link.cc): zeroing its signals and counters
// when it opens, draining the signals in flight between ranks before it closes.
#include <nccl_device.h>

#include "epx/device/launch.h"
#include "epx/device/transport.cuh"

namespace epx::dev {

namespace {

// Zeroes the link's GIN signals and completion counters (its ranges of the window's device
// communicator) on every context.
__global__ void resetGinSignalsKernel(const __grid_constant__ LinkArgs c) {
  const Transport tr(c);
  const int n = c.ginSignals;
  for (int ctx = 0; ctx < c.ginContexts; ++ctx) {
    ncclGin gin(tr.devComm(), ctx);
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < n; id += gridDim.x * blockDim.x)
      gin.resetSignal(tr.signalId(uint32_t(id)));
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < c.ginCounters; id += gridDim.x * blockDim.x)
      gin.resetCounter(tr.counterId(id));
  }
}

// One CTA; a thread per network peer. Each (context, peer) pair carries exactly one drain add, so
// the drain word of src summed over contexts reaches ginContexts once all of them arrived. Every
// rank waits for its peers' adds before it closes its window: a live peer's signal that lands after
// the window is gone fails that peer's GIN proxy (and its communicator). The adds ride on puts of
// the link's pad (kLinkPadBytes at padOffset, the same place on every rank), counted on the CTA's
// GIN counter, and the kernel waits until they are consumed: a bare signal may still be queued in
// this rank's GIN proxy when its device communicator is destroyed, and then never leaves (seen on
// NCCL 2.30.7 at 8 fake nodes: every peer waited for that rank's adds). A link that already timed
// out (`quiet`) does the same, but records nothing and gives up after the link's timeout in all: a
// peer that stalled or died sends none.
__global__ void drainGinKernel(const __grid_constant__ LinkArgs c, uint32_t drainBase, uint64_t padOffset, bool quiet) {
  const Transport tr(c);
  const WaitBound bound{globalTimerNs(), quiet};
  for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) {
    if (p == c.rank || tr.lsa(p)) continue;
    for (int ctx = 0; ctx < c.ginContexts; ++ctx)
      tr.putSignalWord(p, padOffset, padOffset, kLinkPadBytes, drainBase + uint32_t(c.rank), 1, ctx);
  }
  if (!tr.completeGin(bound)) return;
  for (int p = threadIdx.x; p < c.nRanks; p += blockDim.x) {
    if (p == c.rank || tr.lsa(p)) continue;
    if (!tr.waitWord(drainBase + uint32_t(p), p, uint32_t(c.ginContexts), kPhaseLinkDrain, bound)) break;
  }
}

constexpr int kLifecycleThreads = 256;

}  // namespace

cudaError_t launchResetGinSignals(const LinkArgs& c, cudaStream_t stream) {
  if (c.ginContexts == 0) return cudaSuccess;
  resetGinSignalsKernel<<<1, kLifecycleThreads, 0, stream>>>(c);
  return cudaGetLastError();
}

cudaError_t launchDrainGin(const LinkArgs& c, uint32_t drainBase, uint64_t padOffset, bool quiet,
                           cudaStream_t stream) {
  if (c.ginContexts == 0) return cudaSuccess;
  drainGinKernel<<<1, kLifecycleThreads, 0, stream>>>(c, drainBase, padOffset, quiet);
  return cudaGetLastError();
}

}  // namespace epx::dev
