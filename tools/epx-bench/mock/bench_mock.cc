// Host-only stand-ins for epx-bench's CUDA parts, to dry-run its logic (multi-process mode,
// gathering, rank-0 printing, the per-rank check, the network floor) without a GPU: target
// epx_bench_mock (not built by default), linked with the CUDA/NCCL/ncclEp mock of tests/ep/mock.
// The fills are the real randgen.h values; the NCCL all-to-all baseline and the peer-copy ceiling
// are not run (fixed times; MOCK_BENCH_BASELINE_FAIL_RANK=r makes rank r's baseline check fail);
// CUDA events read the host clock.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "baseline.h"
#include "data.h"
#include "peer_copy.h"
#include "coll_bench.h"
#include "ll_bench.h"
#include "memory_floor.h"
#include "randgen.h"

void mockEnqueue(cudaStream_t s, std::function<void()> f);

namespace epxbench {

void fillBf16(uint16_t* p, size_t n, uint64_t key, cudaStream_t s) {
  mockEnqueue(s, [=] {
    for (size_t i = 0; i < n; ++i) p[i] = randBf16(key, i);
  });
}
void fillFp8(uint8_t* p, size_t n, uint64_t key, cudaStream_t s) {
  mockEnqueue(s, [=] {
    for (size_t i = 0; i < n; ++i) p[i] = randFp8(key, i);
  });
}
void fillScales(float* p, size_t n, uint64_t key, cudaStream_t s) {
  mockEnqueue(s, [=] {
    for (size_t i = 0; i < n; ++i) p[i] = randScale(key, i);
  });
}

BaselineRankResult runBaseline(const epx::testing::RankContext& ctx, const BenchShape&, const epx::ref::RankRouting&,
                               const Options& opt, uint64_t) {
  BaselineRankResult r;
  r.dispatchUs = 100.0 + ctx.rank;  // the max over ranks must show up in the table
  r.fp8DispatchUs = 80.0 + ctx.rank;
  r.combineUs = 120.0 + ctx.rank;
  r.checked = opt.check;
  const char* f = std::getenv("MOCK_BENCH_BASELINE_FAIL_RANK");
  if (opt.check && f && std::atoi(f) == ctx.rank) {
    r.ok = false;
    r.checkMsg = "rank " + std::to_string(ctx.rank) + ": mock baseline failure";
  }
  return r;
}

CeilingRankResult runCeiling(const epx::testing::RankContext&, const std::vector<size_t>&, int smFew, int,
                             CeilingShared&) {
  CeilingRankResult r;
  r.copyEngineUs = 50;
  r.p2p = false;
  r.smFew = smFew;
  return r;
}

// The low-latency algorithm has no host stand-ins in the ncclEp mock.
int runLowLatency(const Options&, epx::testing::MultiGpu&, int, int, bool) {
  std::fprintf(stderr, "epx_bench_mock: --algo low-latency is not mocked\n");
  return 2;
}

// Nor have the bucket collectives and PP channels.
int runCollectives(const Options&, epx::testing::MultiGpu&, int, bool) {
  std::fprintf(stderr, "epx_bench_mock: --algo bucket / pp is not mocked\n");
  return 2;
}

// Memory floor: no kernels to time here; byte counts as the real one reports them.
MemFloorTimes runMemFloor(const epx::testing::RankContext&, const MemFloorWork& w, int ctas, int) {
  MemFloorTimes t;
  t.ctas = ctas;
  t.bytes = double(w.outputRows()) * w.rowBytes;
  return t;
}

}  // namespace epxbench

namespace {
struct MockEvent {
  std::chrono::steady_clock::time_point t;
};
}  // namespace

extern "C" {
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new MockEvent);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<MockEvent*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto* ev = reinterpret_cast<MockEvent*>(e);
  mockEnqueue(s, [ev] { ev->t = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<MockEvent*>(b)->t -
                                                 reinterpret_cast<MockEvent*>(a)->t).count();
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof(*p));
  std::strcpy(p->name, "mock GPU");
  p->multiProcessorCount = 132;
  p->totalGlobalMem = size_t(141) << 30;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int d) {
  std::snprintf(bus, size_t(len), "0000:%02x:00.0", d);
  return cudaSuccess;
}
ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
}
