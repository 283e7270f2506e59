// NVLink peer-copy ceiling (see peer_copy.h).
#include "peer_copy.h"

namespace epxbench {

namespace {

constexpr int kMaxPeers = 8;

struct PeerJobs {
  uint4* dst[kMaxPeers];
  size_t n16[kMaxPeers];
  const uint4* src;
  int count;
};

// Each thread loads U vectors before storing them, to keep enough stores in flight per SM.
constexpr int kUnroll = 4;
constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads) peerStoreKernel(PeerJobs jobs) {
  for (int j = 0; j < jobs.count; ++j) {
    uint4* __restrict__ dst = jobs.dst[j];
    const uint4* __restrict__ src = jobs.src;
    const size_t n = jobs.n16[j];
    const size_t stride = size_t(gridDim.x) * blockDim.x * kUnroll;
    for (size_t base = size_t(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x; base < n; base += stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + size_t(u) * blockDim.x;
        if (i < n) v[u] = src[i];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + size_t(u) * blockDim.x;
        if (i < n) dst[i] = v[u];
      }
    }
  }
}

}  // namespace

CeilingRankResult runCeiling(const epx::testing::RankContext& ctx, const std::vector<size_t>& bytes,
                             int smFew, int rounds, CeilingShared& shared) {
  const int n = ctx.nRanks, me = ctx.rank;
  BENCH_REQUIRE(n <= kMaxPeers + 1, "peer-copy ceiling: too many ranks");
  cudaStream_t st = ctx.stream;
  CeilingRankResult res;

  // Peer access (SM stores need it; copy engines use it when present).
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    int can = 0;
    BENCH_CUDA(cudaDeviceCanAccessPeer(&can, me, p));
    if (!can) {
      res.p2p = false;
      continue;
    }
    cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else BENCH_CUDA(e);
  }

  // Receive buffer: one segment per source rank, in source order.
  size_t inBytes = 0, srcBytes = 16;
  for (int s = 0; s < n; ++s)
    if (s != me) inBytes += bytes[size_t(s) * n + me];
  for (int p = 0; p < n; ++p)
    if (p != me) srcBytes = std::max(srcBytes, bytes[size_t(me) * n + p]);
  DevBuf src(srcBytes), dst(std::max<size_t>(inBytes, 16));
  BENCH_CUDA(cudaMemsetAsync(src.get(), 0x3c, srcBytes, st));
  BENCH_CUDA(cudaStreamSynchronize(st));
  shared.dst[me] = dst.get();
  shared.p2p[me] = res.p2p ? 1 : 0;
  shared.barrier.wait();
  bool allP2p = true;
  for (int r = 0; r < n; ++r) allP2p = allP2p && shared.p2p[r];
  res.p2p = allP2p;

  // Jobs in rotated order (me+1, me+2, ...) so ranks do not all target the same peer first.
  struct Job { int peer; char* dst; size_t bytes; };
  std::vector<Job> jobs;
  for (int i = 1; i < n; ++i) {
    const int p = (me + i) % n;
    // Offset of my segment inside p's buffer.
    size_t off = 0;
    for (int s = 0; s < me; ++s)
      if (s != p) off += bytes[size_t(s) * n + p];
    jobs.push_back({p, static_cast<char*>(shared.dst[p]) + off, bytes[size_t(me) * n + p]});
    res.outBytes += double(bytes[size_t(me) * n + p]);
  }

  auto copyEngineRound = [&] {
    for (auto& j : jobs)
      if (j.bytes) BENCH_CUDA(cudaMemcpyPeerAsync(j.dst, j.peer, src.get(), me, j.bytes, st));
  };
  PeerJobs pj{};
  pj.src = src.as<uint4>();
  pj.count = int(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    BENCH_REQUIRE(jobs[i].bytes % 16 == 0, "peer-copy ceiling: bytes not a multiple of 16");
    pj.dst[i] = reinterpret_cast<uint4*>(jobs[i].dst);
    pj.n16[i] = jobs[i].bytes / 16;
  }
  auto smRound = [&](int ctas) {
    peerStoreKernel<<<ctas, kThreads, 0, st>>>(pj);
    BENCH_CUDA(cudaGetLastError());
  };

  // Times `rounds` back-to-back rounds started together on every rank; microseconds per round.
  EventSeq ev(2);
  auto timeRounds = [&](auto&& round) {
    for (int i = 0; i < 2; ++i) round();  // warm-up
    BENCH_CUDA(cudaStreamSynchronize(st));
    shared.barrier.wait();
    ev.record(0, st);
    for (int i = 0; i < rounds; ++i) round();
    ev.record(1, st);
    BENCH_CUDA(cudaStreamSynchronize(st));
    shared.barrier.wait();
    return ev.us(0, 1) / rounds;
  };

  int dev = 0, smCount = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&smCount, cudaDevAttrMultiProcessorCount, dev));
  res.smFew = smFew;
  res.smAll = smCount;
  res.copyEngineUs = timeRounds(copyEngineRound);
  if (res.p2p) {  // the same on every rank
    res.smFewUs = timeRounds([&] { smRound(smFew); });
    res.smAllUs = timeRounds([&] { smRound(smCount); });
  }
  return res;
}

}  // namespace epxbench
