// The row of zeros that pads a warp sum's row list to whole batches (copy.cuh, kRowBatch). A header
// of its own, included only where row lists are padded (ep_combine.cu): gZeroRow is a static
// __device__ array, so every translation unit that includes it gets its own 128 KiB copy (there is
// no separable compilation, so one TU cannot share another's through extern __device__).
#pragma once
#include "epx/device/copy.cuh"
#include "epx/device/warp.cuh"

namespace epx::dev {

// A row of zeros (BF16 rows of the largest hidden, ep.h) that pads a row list to whole batches:
// adding +0 to an FP32 sum that started at +0 leaves it unchanged bit for bit (such a sum is never
// -0), so a batch's loads need no per-row predicate.
constexpr int kMaxBf16RowBytes = 65536 * 2;
static __device__ int4 gZeroRow[kMaxBf16RowBytes / 16];

// Lane l of the warp fills rows[l] for n <= l < paddedRows(n) (rows holds at least paddedRows(n)).
__device__ __forceinline__ void padRowList(const int4** rows, int n, int lane) {
  for (int l = lane; l < paddedRows(n); l += kWarp)
    if (l >= n) rows[l] = gZeroRow;
}

}  // namespace epx::dev
