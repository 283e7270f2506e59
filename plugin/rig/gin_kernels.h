// Loads the GIN ipc backend's signal kernel (gin_kernels.cu, embedded as a fatbin at build time)
// into a CUDA context and launches it on the backend's signal stream through the driver API.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gin/cuda_driver.h"
#include "rig/gin_kernel_args.h"

namespace epx::plugin::gin {

// The fatbin built from gin_kernels.cu (gin_kernels_fatbin.cc, generated); size 0 when the plugin
// was built without CUDA device code (EPX_BUILD_CUDA=OFF): signals are then applied by read-back.
extern const unsigned char kGinKernelsFatbin[];
extern const size_t kGinKernelsFatbinSize;

class GinKernels {
 public:
  // Loads the module into the current CUDA context. Returns "" or why it cannot.
  std::string load(const CudaDriver* cu);
  void unload();
  bool loaded() const { return module_ != nullptr; }
  // Adds batch.delta[i] to the 64-bit word at batch.address[i], i < batch.count, on `stream`.
  CUresult signalAdd(CUstream stream, const SignalAddBatch& batch) const;

 private:
  const CudaDriver* cu_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction signalAdd_ = nullptr;
};

}  // namespace epx::plugin::gin
