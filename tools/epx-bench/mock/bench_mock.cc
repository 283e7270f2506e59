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
#include <vector>

#include "baseline.h"
#include "data.h"
#include "peer_copy.h"
#include "coll_bench.h"
#include "engram_bench.h"
#include "engram_work.h"
#include "epx/ref/engram_ref.h"
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

// Engram: no ncclEpEngram* in the ncclEp mock. The host logic runs as the real bench runs it (shape,
// indices, floor, the printed lines, the check of fetched rows against the pattern), with the CPU
// reference (epx::ref::engramFetch) as the fetch and times made up from the floor (1.1 x per layer).
int runEngram(const Options& opt, epx::testing::MultiGpu& mg, int n, int ranksPerNode, bool printer) {
  std::string why;
  const EngramBenchShape s = engramShapeOf(opt, n, &why);
  if (!why.empty()) {
    std::fprintf(stderr, "epx-bench: %s\n", why.c_str());
    return 2;
  }
  const int ctas = opt.collCtas > 0 ? opt.collCtas : 8;
  std::vector<std::vector<int32_t>> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all[size_t(r)] = engramIndices(s, opt.seed, r);
  const double outBytes = double(s.rowsPerLayer()) * double(s.rowBytes);
  const EngramFloor floor = ranksPerNode < n ? engramNetFloor(engramNetTraffic(s, all, ranksPerNode), opt.netGBps, opt.netLatencyUs)
                                             : engramMemFloor(s.layers, outBytes, 10.0, 12.0, ctas);
  if (printer) printEngramHeader(s, opt, ranksPerNode, ctas, floor);
  bool failed = false;
  if (opt.check) {
    const epx::ref::EngramShape rs = s.ref();
    const auto shards = engramShards(s, opt.seed);
    for (int r : mg.localRanks()) {
      const epx::ref::EngramResult got = epx::ref::engramFetch(rs, shards, all[size_t(r)]);
      for (int l = 0; l < s.layers && !failed; ++l) {
        const std::string m = engramCheckLayer(s, opt.seed, l, all[size_t(r)],
                                               got.out.data() + size_t(l) * size_t(s.rowsPerLayer()) * s.rowBytes);
        if (!m.empty()) std::printf("# engram check: FAILED on rank %d: %s\n", r, m.c_str());
        failed = !m.empty();
      }
    }
    if (printer && !failed) std::printf("# engram check: OK (mock: the CPU reference's rows)\n");
  }
  EngramTimes t;
  double done = 0;
  for (int l = 0; l < s.layers; ++l) {
    const double us = floor.layerUs.empty() ? 100.0 : 1.1 * floor.layerUs[size_t(l)];
    done += us;
    t.doneUs.push_back(done);
    t.layerUs.push_back(us);
  }
  if (printer) {
    printEngramTimes(s, t, floor);
    std::printf("# result: %s\n", failed ? "FAILED (see the lines above)" : opt.check ? "all checks OK" : "not checked");
  }
  return failed ? 1 : 0;
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
