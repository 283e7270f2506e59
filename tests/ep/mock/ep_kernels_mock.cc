#include <cstring>
#include <functional>
#include "ep_kernels.h"
#include "epx/ref/bf16.h"
// The graph tests' user kernel, on the host, through the mock's stream (cuda_nccl_ep_mock.cc).
namespace epx::test {
cudaError_t launchScaleBf16(const void* in, void* out, size_t n, float factor, cudaStream_t stream);
}
extern void mockEnqueue(cudaStream_t s, std::function<void()> f);
cudaError_t epx::test::launchScaleBf16(const void* in, void* out, size_t n, float factor, cudaStream_t stream) {
  mockEnqueue(stream, [=] {
    auto* i = static_cast<const uint16_t*>(in);
    auto* o = static_cast<uint16_t*>(out);
    for (size_t k = 0; k < n; ++k) o[k] = epx::ref::floatToBf16(epx::ref::bf16ToFloat(i[k]) * factor);
  });
  return cudaSuccess;
}
