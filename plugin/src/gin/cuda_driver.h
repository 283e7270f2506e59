// CUDA driver entry points, loaded at run time so the plugin loads on machines without a GPU.
#pragma once

#include <cuda.h>

#include <string>

namespace epx::plugin::gin {

struct CudaDriver {
#define EPX_CU_FN(name) decltype(&::name) name = nullptr;
  EPX_CU_FN(cuInit)
  EPX_CU_FN(cuGetErrorString)
  EPX_CU_FN(cuCtxGetCurrent)
  EPX_CU_FN(cuCtxSetCurrent)
  EPX_CU_FN(cuCtxGetDevice)
  EPX_CU_FN(cuDeviceGetPCIBusId)
  EPX_CU_FN(cuStreamCreateWithPriority)
  EPX_CU_FN(cuStreamDestroy)
  EPX_CU_FN(cuStreamSynchronize)
  EPX_CU_FN(cuStreamQuery)
  EPX_CU_FN(cuStreamWriteValue64)
  EPX_CU_FN(cuEventCreate)
  EPX_CU_FN(cuEventRecord)
  EPX_CU_FN(cuEventQuery)
  EPX_CU_FN(cuEventDestroy)
  EPX_CU_FN(cuMemcpyAsync)
  EPX_CU_FN(cuMemcpyDtoHAsync)
  EPX_CU_FN(cuMemRetainAllocationHandle)
  EPX_CU_FN(cuMemRelease)
  EPX_CU_FN(cuMemGetAddressRange)
  EPX_CU_FN(cuMemExportToShareableHandle)
  EPX_CU_FN(cuMemImportFromShareableHandle)
  EPX_CU_FN(cuMemGetAllocationGranularity)
  EPX_CU_FN(cuMemGetAllocationPropertiesFromHandle)
  EPX_CU_FN(cuMemAddressReserve)
  EPX_CU_FN(cuMemAddressFree)
  EPX_CU_FN(cuMemMap)
  EPX_CU_FN(cuMemUnmap)
  EPX_CU_FN(cuMemSetAccess)
  EPX_CU_FN(cuMemAlloc)
  EPX_CU_FN(cuMemCreate)
  EPX_CU_FN(cuMemFree)
  EPX_CU_FN(cuMemAllocHost)
  EPX_CU_FN(cuMemFreeHost)
  EPX_CU_FN(cuMemHostGetDevicePointer)
  EPX_CU_FN(cuModuleLoadData)
  EPX_CU_FN(cuModuleUnload)
  EPX_CU_FN(cuModuleGetFunction)
  EPX_CU_FN(cuLaunchKernel)
#undef EPX_CU_FN
  // Optional (null when the driver lacks them): cuMemcpyBatchAsync of CUDA 13.0 (no failIdx) or,
  // failing that, of CUDA 12.8 (with failIdx).
  CUresult (*memcpyBatchAsync13)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t,
                                 CUstream) = nullptr;
  CUresult (*memcpyBatchAsync128)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t,
                                  size_t*, CUstream) = nullptr;
};

// Loads libcuda.so.1 once; null (with *why filled) when there is no usable driver.
const CudaDriver* cudaDriver(std::string* why);
std::string cuErrorText(CUresult r);

}  // namespace epx::plugin::gin
