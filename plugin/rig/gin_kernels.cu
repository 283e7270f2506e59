// The GIN ipc backend's own kernels, built into a fatbin that the plugin embeds and loads through
// the driver API (gin_kernels.h): the plugin does not link the CUDA runtime.
//   epxGinCopyKernel       a put's bytes, source to destination (EPX_GIN_COPY=kernel: puts up to
//                          64 KiB; many processes' small copies then run side by side on SMs
//                          instead of one after another on the copy engines)
//   epxGinSignalAddKernel  received signal updates applied with device atomics (EPX_GIN_SIGNAL=
//                          kernel), instead of a read-back to the host and a write
#include <cstdint>

#include "rig/gin_kernel_args.h"

using epx::plugin::gin::kCopyThreads;
using epx::plugin::gin::SignalAddBatch;

namespace {

// Moves bytes [begin, end) of the put with elements of type T; the caller checked alignment.
template <typename T>
__device__ void copySpan(unsigned char* dst, const unsigned char* src, uint64_t begin, uint64_t end) {
  const uint64_t first = begin / sizeof(T), last = end / sizeof(T);
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  for (uint64_t i = first + threadIdx.x; i < last; i += kCopyThreads) d[i] = s[i];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kCopyThreads) epxGinCopyKernel(void* dstPtr, const void* srcPtr,
                                                                            uint64_t bytes) {
  auto* dst = static_cast<unsigned char*>(dstPtr);
  const auto* src = static_cast<const unsigned char*>(srcPtr);
  // CTA b copies one contiguous share, a multiple of 16 bytes (the last CTA takes the tail).
  const uint64_t share = epx::plugin::gin::copyShare(bytes, static_cast<int>(gridDim.x));
  const uint64_t begin = share * blockIdx.x;
  if (begin >= bytes) return;
  const uint64_t end = begin + share < bytes ? begin + share : bytes;
  const uintptr_t misalign = (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15;
  uint64_t vectorEnd = begin;
  if (misalign == 0) {
    vectorEnd = end / 16 * 16;
    copySpan<uint4>(dst, src, begin, vectorEnd);
  }
  for (uint64_t i = vectorEnd + threadIdx.x; i < end; i += kCopyThreads) dst[i] = src[i];
}

extern "C" __global__ void epxGinSignalAddKernel(SignalAddBatch batch) {
  for (uint32_t i = threadIdx.x; i < batch.count; i += blockDim.x)
    atomicAdd(reinterpret_cast<unsigned long long*>(batch.address[i]), static_cast<unsigned long long>(batch.delta[i]));
}
