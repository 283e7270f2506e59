// A small "user expert" kernel for the graph-capture tests (compiled by nvcc, no Boost here).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace epx::test {
// out[i] = bf16(float(in[i]) * factor) for n BF16 values (NaN stays NaN). Stream-ordered.
cudaError_t launchScaleBf16(const void* in, void* out, size_t n, float factor, cudaStream_t stream);
}  // namespace epx::test
