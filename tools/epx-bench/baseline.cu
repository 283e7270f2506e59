// NCCL all-to-all EP dispatcher (see baseline.h).
#include <cuda_bf16.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "baseline.h"
#include "common.h"
#include "data.h"
#include "epx/ref/bf16.h"
#include "randgen.h"

namespace epxbench {

namespace {

// Block d: for every token, whether it goes to rank d (pos = row in segment d, or -1), the sum of
// its gate weights there, the inverse map rowSrc (row -> token), and the row count.
__global__ void routeKernel(const int64_t* topk, const float* weights, int T, int K, int epr,
                            int* pos, int* rowSrc, float* rowW, int* counts) {
  const int d = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = blockDim.x >> 5;
  __shared__ int warpBase[32];
  __shared__ int chunkTotal;
  int base = 0;  // identical in every thread
  for (int c = 0; c < T; c += blockDim.x) {
    const int t = c + threadIdx.x;
    bool hit = false;
    float w = 0.f;
    if (t < T) {
      for (int k = 0; k < K; ++k) {
        const int64_t e = topk[size_t(t) * K + k];
        if (e >= 0 && int(e / epr) == d) {
          hit = true;
          w += weights[size_t(t) * K + k];
        }
      }
    }
    const unsigned m = __ballot_sync(0xffffffffu, hit);
    const int pre = __popc(m & ((1u << lane) - 1u));
    if (lane == 0) warpBase[warp] = __popc(m);
    __syncthreads();
    if (warp == 0) {
      const int v = lane < nWarps ? warpBase[lane] : 0;
      int incl = v;
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      if (lane < nWarps) warpBase[lane] = incl - v;
      if (lane == 31) chunkTotal = incl;
    }
    __syncthreads();
    if (t < T) {
      const int p = hit ? base + warpBase[warp] + pre : -1;
      pos[size_t(d) * T + t] = p;
      rowW[size_t(d) * T + t] = w;
      if (hit) rowSrc[size_t(d) * T + p] = t;
    }
    base += chunkTotal;
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[d] = base;
}

// Row p of segment d (blockIdx.y) of dst <- row rowSrc[d][p] of src.
template <class V>
__global__ void permuteKernel(const char* src, char* dst, size_t rowBytes, int T, const int* rowSrc,
                              const int* counts) {
  const int d = blockIdx.y;
  const int n = counts[d];
  const size_t nv = rowBytes / sizeof(V);
  for (int p = blockIdx.x; p < n; p += gridDim.x) {
    const V* s = reinterpret_cast<const V*>(src + size_t(rowSrc[size_t(d) * T + p]) * rowBytes);
    V* o = reinterpret_cast<V*>(dst + (size_t(d) * T + p) * rowBytes);
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x) o[i] = s[i];
  }
}

void permuteRows(const void* src, void* dst, size_t rowBytes, int T, int nRanks, const int* rowSrc,
                 const int* counts, cudaStream_t st) {
  const dim3 grid(unsigned(std::max(1, std::min(T, 1024 / nRanks))), unsigned(nRanks));
  if (rowBytes % 16 == 0)
    permuteKernel<uint4><<<grid, 256, 0, st>>>((const char*)src, (char*)dst, rowBytes, T, rowSrc, counts);
  else
    permuteKernel<uint32_t><<<grid, 256, 0, st>>>((const char*)src, (char*)dst, rowBytes, T, rowSrc, counts);
  BENCH_CUDA(cudaGetLastError());
}

// out[t] = sum over d of rowW[d][t] * ret[d][pos[d][t]], FP32 accumulation in rank order.
__global__ void unpermuteKernel(const __nv_bfloat16* ret, const int* pos, const float* rowW, int T,
                                int H, int nRanks, __nv_bfloat16* out) {
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    for (int c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
      float acc[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = 0.f;
      for (int d = 0; d < nRanks; ++d) {
        const int p = pos[size_t(d) * T + t];
        if (p < 0) continue;
        const float w = rowW[size_t(d) * T + t];
        const uint4 v = *reinterpret_cast<const uint4*>(ret + (size_t(d) * T + p) * H + c);
        const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(w, __bfloat162float(b[j]), acc[j]);
      }
      uint4 o;
      __nv_bfloat16* ob = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
      for (int j = 0; j < 8; ++j) ob[j] = __float2bfloat16_rn(acc[j]);
      *reinterpret_cast<uint4*>(out + size_t(t) * H + c) = o;
    }
  }
}

}  // namespace

BaselineRankResult runBaseline(const epx::testing::RankContext& ctx, const BenchShape& s,
                               const epx::ref::RankRouting& routing, const Options& opt,
                               uint64_t dataSeed) {
  const int n = ctx.nRanks, me = ctx.rank, T = s.tokens, H = s.hidden, K = s.topk;
  const bool fp8 = H % 128 == 0;
  const size_t rowB = size_t(H) * 2, rowB8 = size_t(H), rowSc = fp8 ? size_t(H / 128) * 4 : 0;
  const size_t segRows = size_t(n) * T;
  cudaStream_t st = ctx.stream;
  ncclComm_t comm = ctx.comm;

  DevBuf topk(size_t(T) * K * 8), w(size_t(T) * K * 4), x(size_t(T) * rowB), out(size_t(T) * rowB);
  DevBuf x8(fp8 ? size_t(T) * rowB8 : 0), sc(fp8 ? size_t(T) * rowSc : 0);
  DevBuf pos(segRows * 4), rowSrc(segRows * 4), rowW(segRows * 4), counts(size_t(n) * 4),
      recvCounts(size_t(n) * 4);
  DevBuf send(segRows * rowB), recv(segRows * rowB), ret(segRows * rowB);
  DevBuf send8(fp8 ? segRows * rowB8 : 0), recv8(fp8 ? segRows * rowB8 : 0);
  DevBuf sendSc(fp8 ? segRows * rowSc : 0), recvSc(fp8 ? segRows * rowSc : 0);
  int* hCounts = nullptr;  // [0, n): rows sent to each peer; [n, 2n): rows received from each peer
  BENCH_CUDA(cudaMallocHost(&hCounts, sizeof(int) * 2 * n));

  BENCH_CUDA(cudaMemcpyAsync(topk.get(), routing.topkIdx.data(), size_t(T) * K * 8, cudaMemcpyHostToDevice, st));
  BENCH_CUDA(cudaMemcpyAsync(w.get(), routing.topkWeights.data(), size_t(T) * K * 4, cudaMemcpyHostToDevice, st));
  fillBf16(x.as<uint16_t>(), size_t(T) * H, streamKey(dataSeed, kTensorX, me), st);
  if (fp8) {
    fillFp8(x8.as<uint8_t>(), size_t(T) * H, streamKey(dataSeed, kTensorX8, me), st);
    fillScales(sc.as<float>(), size_t(T) * (H / 128), streamKey(dataSeed, kTensorScales, me), st);
  }
  BENCH_CUDA(cudaStreamSynchronize(st));

  auto sendRecvRows = [&](const DevBuf& sbuf, DevBuf& rbuf, size_t rb, const int* sendRows,
                          const int* recvRows) {
    for (int p = 0; p < n; ++p) {
      if (sendRows[p] > 0)
        BENCH_NCCL(ncclSend(sbuf.as<char>() + size_t(p) * T * rb, size_t(sendRows[p]) * rb, ncclUint8, p, comm, st));
      if (recvRows[p] > 0)
        BENCH_NCCL(ncclRecv(rbuf.as<char>() + size_t(p) * T * rb, size_t(recvRows[p]) * rb, ncclUint8, p, comm, st));
    }
  };
  auto dispatch = [&](bool useFp8) {
    routeKernel<<<n, 1024, 0, st>>>(topk.as<int64_t>(), w.as<float>(), T, K, s.expertsPerRank(),
                                    pos.as<int>(), rowSrc.as<int>(), rowW.as<float>(), counts.as<int>());
    BENCH_CUDA(cudaGetLastError());
    if (useFp8) {
      permuteRows(x8.get(), send8.get(), rowB8, T, n, rowSrc.as<int>(), counts.as<int>(), st);
      permuteRows(sc.get(), sendSc.get(), rowSc, T, n, rowSrc.as<int>(), counts.as<int>(), st);
    } else {
      permuteRows(x.get(), send.get(), rowB, T, n, rowSrc.as<int>(), counts.as<int>(), st);
    }
    BENCH_NCCL(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      BENCH_NCCL(ncclSend(counts.as<int>() + p, 1, ncclInt32, p, comm, st));
      BENCH_NCCL(ncclRecv(recvCounts.as<int>() + p, 1, ncclInt32, p, comm, st));
    }
    BENCH_NCCL(ncclGroupEnd());
    BENCH_CUDA(cudaMemcpyAsync(hCounts, counts.get(), sizeof(int) * n, cudaMemcpyDeviceToHost, st));
    BENCH_CUDA(cudaMemcpyAsync(hCounts + n, recvCounts.get(), sizeof(int) * n, cudaMemcpyDeviceToHost, st));
    BENCH_CUDA(cudaStreamSynchronize(st));
    BENCH_NCCL(ncclGroupStart());
    if (useFp8) {
      sendRecvRows(send8, recv8, rowB8, hCounts, hCounts + n);
      sendRecvRows(sendSc, recvSc, rowSc, hCounts, hCounts + n);
    } else {
      sendRecvRows(send, recv, rowB, hCounts, hCounts + n);
    }
    BENCH_NCCL(ncclGroupEnd());
  };
  auto combine = [&] {
    BENCH_NCCL(ncclGroupStart());
    sendRecvRows(recv, ret, rowB, hCounts + n, hCounts);  // back: what we received goes home
    BENCH_NCCL(ncclGroupEnd());
    unpermuteKernel<<<unsigned(std::min(T, 1024)), 256, 0, st>>>(
        ret.as<__nv_bfloat16>(), pos.as<int>(), rowW.as<float>(), T, H, n, out.as<__nv_bfloat16>());
    BENCH_CUDA(cudaGetLastError());
  };

  const int total = opt.warmup + opt.iters;
  EventSeq ev(size_t(total) * 4);
  std::vector<double> dUs, cUs, d8Us;
  for (int it = 0; it < total; ++it) {
    const size_t e = size_t(it) * 4;
    ev.record(e + 0, st);
    dispatch(false);
    ev.record(e + 1, st);
    combine();
    ev.record(e + 2, st);
    if (fp8) dispatch(true);
    ev.record(e + 3, st);
    BENCH_CUDA(cudaStreamSynchronize(st));
    if (it >= opt.warmup) {
      dUs.push_back(ev.us(e + 0, e + 1));
      cUs.push_back(ev.us(e + 1, e + 2));
      if (fp8) d8Us.push_back(ev.us(e + 2, e + 3));
    }
  }
  BaselineRankResult res;
  res.dispatchUs = median(dUs);
  res.combineUs = median(cUs);
  res.fp8DispatchUs = fp8 ? median(d8Us) : 0.0;

  if (opt.check) {
    // Identity expert: out[t] = bf16(sum_d rowW(t, d) * x[t]) with the rank-ordered FP32 sum.
    res.checked = true;
    std::vector<uint16_t> hOut(size_t(T) * H);
    BENCH_CUDA(cudaMemcpy(hOut.data(), out.get(), hOut.size() * 2, cudaMemcpyDeviceToHost));
    const uint64_t key = streamKey(dataSeed, kTensorX, me);
    const int epr = s.expertsPerRank();
    std::vector<float> rw(n);
    int64_t bad = 0;
    std::ostringstream first;
    for (int t = 0; t < T; ++t) {
      std::fill(rw.begin(), rw.end(), 0.f);
      std::vector<char> hit(n, 0);
      for (int k = 0; k < K; ++k) {
        const int64_t e = routing.topkIdx[size_t(t) * K + k];
        if (e < 0) continue;
        hit[size_t(e / epr)] = 1;
        rw[size_t(e / epr)] += routing.topkWeights[size_t(t) * K + k];
      }
      for (int c = 0; c < H; ++c) {
        const float xv = epx::ref::bf16ToFloat(randBf16(key, size_t(t) * H + c));
        float acc = 0.f;
        for (int d = 0; d < n; ++d)
          if (hit[d]) acc = std::fma(rw[d], xv, acc);
        const float want = epx::ref::bf16ToFloat(epx::ref::floatToBf16(acc));
        const float got = epx::ref::bf16ToFloat(hOut[size_t(t) * H + c]);
        if (!(std::fabs(got - want) <= 1e-2f * std::fabs(want) + 1e-3f)) {
          if (bad++ == 0) first << "token " << t << " channel " << c << ": got " << got << ", want " << want;
        }
      }
    }
    res.ok = bad == 0;
    if (bad) res.checkMsg = "rank " + std::to_string(me) + ": " + std::to_string(bad) + " wrong values; first " + first.str();
  }
  BENCH_CUDA(cudaFreeHost(hCounts));
  return res;
}

}  // namespace epxbench
