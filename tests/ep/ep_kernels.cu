#include <cuda_bf16.h>

#include "ep_kernels.h"

namespace epx::test {

namespace {
__global__ void scaleBf16Kernel(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out, size_t n,
                                float factor) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(__bfloat162float(in[i]) * factor);
}
}  // namespace

cudaError_t launchScaleBf16(const void* in, void* out, size_t n, float factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t threads = 256;
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 2048) blocks = 2048;
  scaleBf16Kernel<<<unsigned(blocks), unsigned(threads), 0, stream>>>(static_cast<const __nv_bfloat16*>(in),
                                                                      static_cast<__nv_bfloat16*>(out), n, factor);
  return cudaGetLastError();
}

}  // namespace epx::test
