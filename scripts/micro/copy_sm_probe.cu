// Experiment (not a test): does a device-to-device copy (the GIN ipc backend's cuMemcpyAsync /
// cuMemcpyBatchAsync) need free SMs, or does it run on a copy engine while every SM is held by a
// spinning kernel? At 8 fake nodes x 16 CTAs (128 of 132 SMs spinning) the dispatch ran 2x slower
// than at 8 CTAs. Method: N spinner CTAs (one per SM: 1024 threads and most of the shared memory)
// poll the last word of the copy's destination, with a 2 s bound; the copy
// runs on another stream. Prints, per N: copy time (host wall clock) and whether the spinners saw
// the copy land. Build: nvcc -O3 -arch=sm_90a -o scripts/micro/copy_sm_probe.bin scripts/micro/copy_sm_probe.cu
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("CUDA %s at line %d\n", cudaGetErrorString(e_), __LINE__);       \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

constexpr int kSpinThreads = 1024;
constexpr long long kBoundNs = 2000000000LL;

__device__ long long globalNs() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every CTA spins until *word != 0 or the bound; CTA 0 writes 1 (seen) or 2 (timed out).
__global__ void __launch_bounds__(kSpinThreads, 1) spinner(const volatile uint32_t* word, int* result) {
  extern __shared__ char hold[];  // only occupies the SM
  const long long t0 = globalNs();
  bool seen = false;
  while (!(seen = *word != 0u) && globalNs() - t0 < kBoundNs) {
  }
  hold[threadIdx.x] = char(seen);
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) *result = seen ? 1 : 2;
}

int main() {
  int sms = 0, maxSmem = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&maxSmem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CK(cudaFuncSetAttribute(spinner, cudaFuncAttributeMaxDynamicSharedMemorySize, maxSmem));
  const size_t bytes = size_t(256) << 20;
  char *src = nullptr, *dst = nullptr;
  int* result = nullptr;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMallocManaged(&result, sizeof(int)));
  CK(cudaMemset(src, 0x5a, bytes));
  cudaStream_t spin, copy;
  CK(cudaStreamCreateWithFlags(&spin, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  const uint32_t* last = reinterpret_cast<const uint32_t*>(dst + bytes - 4);
  std::printf("SMs %d, copy %zu MiB device to device\n", sms, bytes >> 20);
  const int ns[] = {0, sms / 2, sms - 4, sms};
  for (int mode = 0; mode < 2; ++mode)
  for (int n : ns) {
    for (int rep = 0; rep < 2; ++rep) {
      CK(cudaMemset(dst, 0, bytes));
      *result = 0;
      CK(cudaDeviceSynchronize());
      if (n > 0) spinner<<<n, kSpinThreads, maxSmem, spin>>>(last, result);
      CK(cudaGetLastError());
      // Let the spinners become resident before the copy is issued.
      auto w0 = std::chrono::steady_clock::now();
      while (std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() < 0.01) {
      }
      auto t0 = std::chrono::steady_clock::now();
      if (mode == 0) {
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, copy));
      } else {  // the GIN ipc backend's default: one batched copy preferring a copy engine
        cudaMemcpyAttributes attr{};
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
        void* d = dst;
        const void* s = src;
        size_t size = bytes, attrIdx = 0;
        CK(cudaMemcpyBatchAsync(&d, &s, &size, 1, &attr, &attrIdx, 1, copy));
      }
      CK(cudaStreamSynchronize(copy));
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      CK(cudaStreamSynchronize(spin));
      std::printf("%s spinners %3d: copy %9.1f us (%.2f TB/s read+write), spinners %s\n", mode ? "batched" : "memcpy ", n, us, 2.0 * bytes / us / 1e6,
                  n == 0 ? "-" : (*result == 1 ? "saw the copy land" : "TIMED OUT (copy waited for SMs)"));
    }
  }
  return 0;
}
