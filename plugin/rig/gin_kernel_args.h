// What the GIN ipc backend's own kernels (gin_kernels.cu) take, shared by the kernels and the host
// code that launches them through the driver API (gin_kernels.h). No CUDA headers: plain C++.
#pragma once

#include <cstdint>

namespace epx::plugin::gin {

// Entry points of the embedded module (extern "C": the names cuModuleGetFunction looks up).
inline constexpr const char* kCopyKernelName = "epxGinCopyKernel";
inline constexpr const char* kSignalAddKernelName = "epxGinSignalAddKernel";

// Copy kernel shape: each CTA of kCopyThreads threads moves up to kCopyBytesPerCta bytes of a put;
// a put of `bytes` gets copyCtas(bytes) CTAs (at most kCopyMaxCtas: the kernel runs beside GIN
// kernels that hold most SMs).
inline constexpr int kCopyThreads = 256;
inline constexpr uint64_t kCopyBytesPerCta = 16384;
inline constexpr int kCopyMaxCtas = 4;
inline constexpr int copyCtas(uint64_t bytes) {
  const uint64_t ctas = (bytes + kCopyBytesPerCta - 1) / kCopyBytesPerCta;
  return ctas < 1 ? 1 : ctas > uint64_t(kCopyMaxCtas) ? kCopyMaxCtas : int(ctas);
}

// CTA b of `ctas` copies bytes [b * share, min((b + 1) * share, bytes)) of a put, share =
// copyShare(bytes, ctas): a multiple of 16 bytes, so every CTA but the last starts and ends on a
// 16-byte boundary. (Device code calls it too: nvcc --expt-relaxed-constexpr.)
inline constexpr uint64_t copyShare(uint64_t bytes, int ctas) {
  return ((bytes + uint64_t(ctas) - 1) / uint64_t(ctas) + 15) / 16 * 16;
}

// One launch of the signal kernel: `count` 64-bit signals in device memory, each incremented by
// its delta with one device-scope atomic (the kernel parameter is this struct, by value: 1 KiB).
struct SignalAddBatch {
  static constexpr int kMax = 63;
  uint32_t count = 0;
  uint32_t pad = 0;
  uint64_t address[kMax] = {};
  uint64_t delta[kMax] = {};
};
inline constexpr int kSignalThreads = 64;  // >= SignalAddBatch::kMax: one thread per signal

}  // namespace epx::plugin::gin
