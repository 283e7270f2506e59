#include <cuda_bf16.h>

#include "coll_kernels.h"

namespace epx::test {

namespace {

__global__ void fillPatternKernel(uint8_t* p, size_t bytes, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x)
    p[i] = patternByte(seed, i);
}

__global__ void fillPatternRangeKernel(uint8_t* p, size_t begin, size_t end, uint64_t seed) {
  for (size_t i = begin + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < end; i += size_t(gridDim.x) * blockDim.x)
    p[i] = patternByte(seed, i);
}

__global__ void fillFloatsKernel(void* p, size_t n, bool bf16, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float f = patternFloat(seed, i);
    if (bf16)
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(f);
    else
      static_cast<float*>(p)[i] = f;
  }
}

__global__ void delayKernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;
int blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return int(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

}  // namespace

cudaError_t launchFillPattern(void* p, size_t bytes, uint64_t seed, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  fillPatternKernel<<<blocksFor(bytes), kThreads, 0, stream>>>(static_cast<uint8_t*>(p), bytes, seed);
  return cudaGetLastError();
}

cudaError_t launchFillPatternRange(void* p, size_t begin, size_t end, uint64_t seed, cudaStream_t stream) {
  if (end <= begin) return cudaSuccess;
  fillPatternRangeKernel<<<blocksFor(end - begin), kThreads, 0, stream>>>(static_cast<uint8_t*>(p), begin, end, seed);
  return cudaGetLastError();
}

cudaError_t launchFillFloats(void* p, size_t n, bool bf16, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fillFloatsKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, n, bf16, seed);
  return cudaGetLastError();
}

cudaError_t launchDelay(uint64_t ns, cudaStream_t stream) {
  delayKernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace epx::test
