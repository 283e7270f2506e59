// Warp-wide helpers shared by the kernels: the warp size and one warp's exclusive scan.
#pragma once

namespace epx::dev {

constexpr int kWarp = 32;

// The count of an item as it is: warpExclusiveScan's default.
struct ScanAsIs {
  __device__ int operator()(int n) const { return n; }
};

// One warp (all 32 lanes): out[0..n) becomes the exclusive prefix of size(in[i]) and out[n] the
// total (out holds n + 1 entries); returns the total (every lane). in and out may alias (an
// in-place scan): each lane reads its own contiguous slice before writing it, and out[n] is
// written last. Lane l scans its slice, then the slices' sums are scanned across lanes.
template <class Size = ScanAsIs>
__device__ __forceinline__ int warpExclusiveScan(const int* in, int* out, int n, int lane, Size size = {}) {
  const int per = (n + kWarp - 1) / kWarp, b = lane * per, e = min(n, b + per);
  int sum = 0;
  for (int i = b; i < e; ++i) sum += size(in[i]);
  int incl = sum;
#pragma unroll
  for (int o = 1; o < kWarp; o <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  const int total = __shfl_sync(0xffffffffu, incl, kWarp - 1);
  __syncwarp();
  int run = incl - sum;
  for (int i = b; i < e; ++i) {
    const int v = size(in[i]);
    out[i] = run;
    run += v;
  }
  __syncwarp();
  if (lane == 0) out[n] = total;
  __syncwarp();
  return total;
}

}  // namespace epx::dev
