// Device half of the transport suite (test_transport.cc): one-sided reads through epx's device
// transport (Transport::get, completeGets), one CTA per source rank.
#include "epx/device/transport.cuh"
#include "transport_kernels.h"

namespace epx::test {

namespace {

// CTA s reads `bytes` of rank sources[s]'s window at srcOff into this rank's window at
// dstBase + s * dstStride, then waits until its reads have landed.
__global__ void getKernel(dev::LinkArgs link, const int* sources, uint64_t srcOff, uint64_t dstBase,
                          uint64_t dstStride, uint64_t bytes) {
  const dev::Transport t(link, /*counterBase=*/0);
  const int ctx = link.ginContexts > 0 ? int(blockIdx.x) % link.ginContexts : 0;
  t.get(sources[blockIdx.x], dstBase + blockIdx.x * dstStride, srcOff, bytes, ctx);
  t.completeGets(ctx);
}

}  // namespace

bool transportHasGinGet() { return EPX_HAVE_GIN_GET != 0; }

cudaError_t launchGets(const dev::LinkArgs& link, const int* sources, int nSources, uint64_t srcOff, uint64_t dstBase,
                       uint64_t dstStride, uint64_t bytes, cudaStream_t stream) {
  if (nSources == 0) return cudaSuccess;
  getKernel<<<nSources, kGetThreads, 0, stream>>>(link, sources, srcOff, dstBase, dstStride, bytes);
  return cudaGetLastError();
}

}  // namespace epx::test
