// Launchers of the transport suite's kernels (transport_kernels.cu; no Boost there).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "epx/device/link_args.h"

namespace epx::test {

constexpr int kGetThreads = 256;

// Whether this build's device transport can read network (GIN) peers: NCCL 2.30.3+ headers.
bool transportHasGinGet();

// One CTA per entry of `sources` (device array of ranks): CTA s reads `bytes` of that rank's
// window at srcOff into this rank's window at dstBase + s * dstStride (Transport::get, then
// completeGets). Every source must be an LSA peer unless transportHasGinGet().
cudaError_t launchGets(const dev::LinkArgs& link, const int* sources, int nSources, uint64_t srcOff, uint64_t dstBase,
                       uint64_t dstStride, uint64_t bytes, cudaStream_t stream);

}  // namespace epx::test
