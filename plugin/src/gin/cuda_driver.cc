#include "gin/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace epx::plugin::gin {

namespace {
CudaDriver gDriver;
const CudaDriver* gLoaded = nullptr;
std::string gWhy;

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

void load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    gWhy = std::string("cannot load libcuda.so.1: ") + dlerror();
    return;
  }
  auto getProc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (getProc == nullptr) {
    gWhy = "libcuda.so.1 has no cuGetProcAddress_v2 (driver too old)";
    return;
  }
  bool ok = true;
  auto get = [&](const char* name, auto& fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status;
    if (getProc(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || p == nullptr) {
      gWhy = std::string("CUDA driver lacks ") + name;
      ok = false;
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
#define EPX_CU_GET(name) get(#name, gDriver.name);
  EPX_CU_GET(cuInit)
  EPX_CU_GET(cuGetErrorString)
  EPX_CU_GET(cuCtxGetCurrent)
  EPX_CU_GET(cuCtxSetCurrent)
  EPX_CU_GET(cuCtxGetDevice)
  EPX_CU_GET(cuDeviceGetPCIBusId)
  EPX_CU_GET(cuStreamCreateWithPriority)
  EPX_CU_GET(cuStreamDestroy)
  EPX_CU_GET(cuStreamSynchronize)
  EPX_CU_GET(cuStreamQuery)
  EPX_CU_GET(cuStreamWriteValue64)
  EPX_CU_GET(cuEventCreate)
  EPX_CU_GET(cuEventRecord)
  EPX_CU_GET(cuEventQuery)
  EPX_CU_GET(cuEventDestroy)
  EPX_CU_GET(cuMemcpyAsync)
  EPX_CU_GET(cuMemcpyDtoHAsync)
  EPX_CU_GET(cuMemRetainAllocationHandle)
  EPX_CU_GET(cuMemRelease)
  EPX_CU_GET(cuMemGetAddressRange)
  EPX_CU_GET(cuMemExportToShareableHandle)
  EPX_CU_GET(cuMemImportFromShareableHandle)
  EPX_CU_GET(cuMemGetAllocationGranularity)
  EPX_CU_GET(cuMemGetAllocationPropertiesFromHandle)
  EPX_CU_GET(cuMemAddressReserve)
  EPX_CU_GET(cuMemAddressFree)
  EPX_CU_GET(cuMemMap)
  EPX_CU_GET(cuMemUnmap)
  EPX_CU_GET(cuMemSetAccess)
  EPX_CU_GET(cuMemAlloc)
  EPX_CU_GET(cuMemCreate)
  EPX_CU_GET(cuMemFree)
  EPX_CU_GET(cuMemAllocHost)
  EPX_CU_GET(cuMemFreeHost)
  EPX_CU_GET(cuMemHostGetDevicePointer)
  EPX_CU_GET(cuModuleLoadData)
  EPX_CU_GET(cuModuleUnload)
  EPX_CU_GET(cuModuleGetFunction)
  EPX_CU_GET(cuLaunchKernel)
#undef EPX_CU_GET
  if (!ok) return;
  {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status;
    if (getProc("cuMemcpyBatchAsync", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
        status == CU_GET_PROC_ADDRESS_SUCCESS && p != nullptr) {
      gDriver.memcpyBatchAsync13 = reinterpret_cast<decltype(gDriver.memcpyBatchAsync13)>(p);
    } else if (getProc("cuMemcpyBatchAsync", &p, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
               status == CU_GET_PROC_ADDRESS_SUCCESS && p != nullptr) {
      gDriver.memcpyBatchAsync128 = reinterpret_cast<decltype(gDriver.memcpyBatchAsync128)>(p);
    }
  }
  CUresult r = gDriver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    gWhy = "cuInit failed: " + cuErrorText(r);
    return;
  }
  gLoaded = &gDriver;
}
}  // namespace

const CudaDriver* cudaDriver(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load);
  if (gLoaded == nullptr && why != nullptr) *why = gWhy;
  return gLoaded;
}

std::string cuErrorText(CUresult r) {
  const char* text = nullptr;
  if (gLoaded != nullptr && gDriver.cuGetErrorString != nullptr) gDriver.cuGetErrorString(r, &text);
  return std::string(text != nullptr ? text : "CUDA error") + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace epx::plugin::gin
