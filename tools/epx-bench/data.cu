// Fill kernels of data.h.
#include "common.h"
#include "data.h"
#include "engram_work.h"
#include "randgen.h"

namespace epxbench {

namespace {

__global__ void fillBf16Kernel(uint16_t* p, size_t n, uint64_t key) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = randBf16(key, i);
}
__global__ void fillFp8Kernel(uint8_t* p, size_t n, uint64_t key) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = randFp8(key, i);
}
__global__ void fillScalesKernel(float* p, size_t n, uint64_t key) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = randScale(key, i);
}

__global__ void fillEngramKernel(uint32_t* p, size_t n, uint64_t key, uint64_t first) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = engramWord(key, first + i);
}

unsigned gridFor(size_t n) {
  size_t g = (n + 255) / 256;
  return unsigned(g < 4096 ? (g ? g : 1) : 4096);
}

}  // namespace

void fillBf16(uint16_t* p, size_t n, uint64_t key, cudaStream_t s) {
  if (!n) return;
  fillBf16Kernel<<<gridFor(n), 256, 0, s>>>(p, n, key);
  BENCH_CUDA(cudaGetLastError());
}
void fillFp8(uint8_t* p, size_t n, uint64_t key, cudaStream_t s) {
  if (!n) return;
  fillFp8Kernel<<<gridFor(n), 256, 0, s>>>(p, n, key);
  BENCH_CUDA(cudaGetLastError());
}
void fillScales(float* p, size_t n, uint64_t key, cudaStream_t s) {
  if (!n) return;
  fillScalesKernel<<<gridFor(n), 256, 0, s>>>(p, n, key);
  BENCH_CUDA(cudaGetLastError());
}

void fillEngramWords(uint32_t* p, size_t n, uint64_t key, uint64_t first, cudaStream_t s) {
  if (!n) return;
  fillEngramKernel<<<gridFor(n), 256, 0, s>>>(p, n, key, first);
  BENCH_CUDA(cudaGetLastError());
}

}  // namespace epxbench
