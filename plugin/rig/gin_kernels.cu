// The GIN ipc backend's own kernel, built into a fatbin that the plugin embeds and loads through
// the driver API (gin_kernels.h): the plugin does not link the CUDA runtime.
//   epxGinSignalAddKernel  received signal updates applied with device atomics, instead of a
//                          read-back to the host and a write
#include <cstdint>

#include "rig/gin_kernel_args.h"

using epx::plugin::gin::SignalAddBatch;

extern "C" __global__ void epxGinSignalAddKernel(SignalAddBatch batch) {
  for (uint32_t i = threadIdx.x; i < batch.count; i += blockDim.x)
    atomicAdd(reinterpret_cast<unsigned long long*>(batch.address[i]), static_cast<unsigned long long>(batch.delta[i]));
}
