// Zeroes an EP group's GIN signals (all FlagKinds x source ranks) and its GIN completion counters
// (one per CTA) on every context.
#include <nccl_device.h>

#include "epx/device/launch.h"
#include "epx/device/transport.cuh"

namespace epx::dev {

namespace {

__global__ void resetGinSignalsKernel(const __grid_constant__ Common c) {
  const Transport tr(c);
  const int n = c.ginSignals;
  for (int ctx = 0; ctx < c.ginContexts; ++ctx) {
    ncclGin gin(tr.devComm(), ctx);
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < n; id += gridDim.x * blockDim.x) gin.resetSignal(id);
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < c.ginCounters; id += gridDim.x * blockDim.x)
      gin.resetCounter(id);
  }
}

}  // namespace

cudaError_t launchResetGinSignals(const Common& c, cudaStream_t stream) {
  if (c.ginContexts == 0) return cudaSuccess;
  resetGinSignalsKernel<<<1, 256, 0, stream>>>(c);
  return cudaGetLastError();
}

}  // namespace epx::dev
