// What the GIN ipc backend's own kernel (gin_kernels.cu) takes, shared by the kernel and the host
// code that launches it through the driver API (gin_kernels.h). No CUDA headers: plain C++.
#pragma once

#include <cstdint>

namespace epx::plugin::gin {

// Entry point of the embedded module (extern "C": the name cuModuleGetFunction looks up).
inline constexpr const char* kSignalAddKernelName = "epxGinSignalAddKernel";

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
