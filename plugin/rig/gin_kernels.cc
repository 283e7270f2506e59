#include "rig/gin_kernels.h"

namespace epx::plugin::gin {

std::string GinKernels::load(const CudaDriver* cu) {
  if (module_ != nullptr) return "";
  if (kGinKernelsFatbinSize == 0) return "this plugin was built without CUDA device code (EPX_BUILD_CUDA=OFF)";
  if (cu->cuModuleLoadData == nullptr || cu->cuModuleGetFunction == nullptr || cu->cuLaunchKernel == nullptr)
    return "the CUDA driver lacks the module API";
  cu_ = cu;
  CUresult r = cu->cuModuleLoadData(&module_, kGinKernelsFatbin);
  if (r != CUDA_SUCCESS) {
    module_ = nullptr;
    return "loading the GIN signal kernel: " + cuErrorText(r);
  }
  r = cu->cuModuleGetFunction(&signalAdd_, module_, kSignalAddKernelName);
  if (r != CUDA_SUCCESS) {
    unload();
    return "finding the GIN signal kernel: " + cuErrorText(r);
  }
  return "";
}

void GinKernels::unload() {
  if (module_ != nullptr && cu_ != nullptr && cu_->cuModuleUnload != nullptr) cu_->cuModuleUnload(module_);
  module_ = nullptr;
  signalAdd_ = nullptr;
}

CUresult GinKernels::signalAdd(CUstream stream, const SignalAddBatch& batch) const {
  SignalAddBatch b = batch;
  void* params[] = {&b};
  return cu_->cuLaunchKernel(signalAdd_, 1, 1, 1, kSignalThreads, 1, 1, 0, stream, params, nullptr);
}

}  // namespace epx::plugin::gin
