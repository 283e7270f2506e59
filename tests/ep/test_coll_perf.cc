// Bus bandwidth of the bucket collectives and PP send/recv against NCCL's own calls in the same run
// (suite "coll_perf", disabled by default: run it explicitly with --run_test=coll_perf). Bus
// bandwidth as nccl-tests defines it: all-gather and reduce-scatter algbw x (R-1)/R, all-reduce
// algbw x 2(R-1)/R, send/recv algbw; algbw = bytes of the whole tensor (PP: of one message) / time.
// On fake nodes, NCCL's calls go through the socket transport: compare epx with the emulated NIC's
// line rate (EPX_GIN_EMU_GBPS, printed as "floor") instead. The slowest rank's time counts. Checks
// nothing but that every call succeeds (correctness is the bucket and pp suites').
// EPX_COLL_PERF_MIB (default 64) sets the collectives' tensor size, EPX_COLL_PERF_PP_MIB (16) the
// PP message, EPX_COLL_PERF_ITERS (20) the timed iterations.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/bucket.h"
#include "epx/pp.h"

using namespace epx::test;

namespace {

constexpr int kWarmup = 3;

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && std::atoi(v) > 0 ? std::atoi(v) : dflt;
}

double floorGBps() {
  const char* v = std::getenv("EPX_GIN_EMU_GBPS");
  return v ? std::atof(v) : 0.0;
}

// Seconds per call of `op` on every rank (slowest rank), after warm-up. `op` gets the rank's
// stream and a second stream of its own (forked from the first at the start of the timed loop and
// joined back at its end), for calls a user would overlap on two streams.
using TimedOp = std::function<void(const RankContext&, cudaStream_t side)>;
double timePerCall(const TimedOp& op, int iters) {
  std::vector<double> secs(size_t(nRanks()), 0.0);
  gpus().run([&](const RankContext& c) {
    cudaStream_t side;
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    for (int i = 0; i < kWarmup; ++i) op(c, side);
    cudaEvent_t a, b, joined;
    EPX_CHECK_CUDA(cudaEventCreate(&a));
    EPX_CHECK_CUDA(cudaEventCreate(&b));
    EPX_CHECK_CUDA(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
    EPX_CHECK_CUDA(cudaStreamSynchronize(side));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    EPX_CHECK_CUDA(cudaEventRecord(a, c.stream));
    EPX_CHECK_CUDA(cudaStreamWaitEvent(side, a, 0));
    for (int i = 0; i < iters; ++i) op(c, side);
    EPX_CHECK_CUDA(cudaEventRecord(joined, side));
    EPX_CHECK_CUDA(cudaStreamWaitEvent(c.stream, joined, 0));
    EPX_CHECK_CUDA(cudaEventRecord(b, c.stream));
    EPX_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    EPX_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    secs[size_t(c.rank)] = ms / 1e3 / iters;
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaEventDestroy(joined);
    EPX_CHECK_CUDA(cudaStreamDestroy(side));
  });
  secs = gpus().gatherPerRank(secs);
  return *std::max_element(secs.begin(), secs.end());
}

void report(const char* what, const char* impl, size_t bytes, double secs, double busFactor) {
  const double alg = double(bytes) / secs / 1e9, bus = alg * busFactor, fl = floorGBps();
  char ratio[64] = "";
  if (fl > 0) std::snprintf(ratio, sizeof(ratio), "  %5.1f%% of floor %.1f", 100.0 * bus / fl, fl);
  BOOST_TEST_MESSAGE("");  // keep Boost's line discipline
  std::printf("%-14s %-5s %12zu B %10.1f us  algbw %8.2f GB/s  busbw %8.2f GB/s%s\n", what, impl, bytes, secs * 1e6, alg,
              bus, ratio);
  std::fflush(stdout);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(coll_perf, *boost::unit_test::disabled())

BOOST_AUTO_TEST_CASE(bucket_collectives) {
  const int R = nRanks();
  const int iters = envInt("EPX_COLL_PERF_ITERS", 20);
  const size_t bytes = size_t(envInt("EPX_COLL_PERF_MIB", 64)) << 20;
  const size_t count = bytes / 4 / size_t(R) * size_t(R);
  const ncclEpBucketTensor_t plan{count, ncclFloat32};
  std::vector<ncclEpBucket_t> b(static_cast<size_t>(R), nullptr);
  std::vector<DevBuf> a(static_cast<size_t>(R)), o(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpBucketConfig_t cfg = NCCL_EP_BUCKET_CONFIG_INITIALIZER;
    cfg.numCtas = envInt("EPX_COLL_PERF_CTAS", 4);
    EPX_CHECK_EP(ncclEpBucketCreate(c.comm, &plan, 1, &cfg, &b[size_t(c.rank)]));
    a[size_t(c.rank)].reserve(count * 4);
    o[size_t(c.rank)].reserve(count * 4);
    void* t = nullptr;
    EPX_CHECK_EP(ncclEpBucketGetTensor(b[size_t(c.rank)], 0, &t));
    EPX_CHECK_CUDA(launchFillFloats(t, count, false, 1 + c.rank, c.stream));
  });
  const ncclEpBucketItem_t it{0, count, ncclFloat32, nullptr};
  const double f1 = double(R - 1) / R, f2 = 2.0 * (R - 1) / R;
  const size_t total = count * 4, shard = total / size_t(R);
  report("all-gather", "epx", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_EP(ncclEpBucketAllGather(b[size_t(c.rank)], &it, 1, nullptr, c.stream));
  }, iters), f1);
  report("all-gather", "nccl", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_NCCL(ncclAllGather(a[size_t(c.rank)].as<char>() + c.rank * shard, o[size_t(c.rank)].ptr(), shard, ncclUint8,
                                 c.comm, c.stream));
  }, iters), f1);
  report("reduce-scatter", "epx", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_EP(ncclEpBucketReduceScatter(b[size_t(c.rank)], &it, 1, nullptr, nullptr, c.stream));
  }, iters), f1);
  const ncclEpBucketReduceOpts_t bf{ncclBfloat16, 0, 1.0f};
  report("rs bf16 wire", "epx", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_EP(ncclEpBucketReduceScatter(b[size_t(c.rank)], &it, 1, &bf, nullptr, c.stream));
  }, iters), f1);
  report("reduce-scatter", "nccl", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_NCCL(ncclReduceScatter(a[size_t(c.rank)].ptr(), o[size_t(c.rank)].ptr(), count / size_t(R), ncclFloat32,
                                     ncclSum, c.comm, c.stream));
  }, iters), f1);
  report("all-reduce", "epx", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_EP(ncclEpBucketAllReduce(b[size_t(c.rank)], &it, 1, nullptr, nullptr, c.stream));
  }, iters), f2);
  report("all-reduce", "nccl", total, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_NCCL(ncclAllReduce(a[size_t(c.rank)].ptr(), o[size_t(c.rank)].ptr(), count, ncclFloat32, ncclSum, c.comm,
                                 c.stream));
  }, iters), f2);
  gpus().run([&](const RankContext& c) {
    ncclResult_t r = ncclSuccess;
    EPX_CHECK_EP(ncclEpBucketGetAsyncError(b[size_t(c.rank)], &r, nullptr, 0));
    if (r != ncclSuccess) throw std::runtime_error("bucket async error " + std::to_string(int(r)));
    EPX_CHECK_EP(ncclEpBucketDestroy(b[size_t(c.rank)]));
  });
}

BOOST_AUTO_TEST_CASE(pp_send_recv) {
  const int R = nRanks();
  const int iters = envInt("EPX_COLL_PERF_ITERS", 20);
  const size_t bytes = size_t(envInt("EPX_COLL_PERF_PP_MIB", 16)) << 20;
  std::vector<ncclEpPpChannel_t> ch(static_cast<size_t>(R), nullptr);
  std::vector<DevBuf> s(static_cast<size_t>(R)), d(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
    cfg.maxMessageBytes = bytes;
    cfg.slots = 4;
    cfg.numCtas = envInt("EPX_COLL_PERF_CTAS", 4);
    EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &cfg, &ch[size_t(c.rank)]));
    s[size_t(c.rank)].reserve(bytes);
    d[size_t(c.rank)].reserve(bytes);
  });
  report("pp ring", "epx", bytes, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_EP(ncclEpPpSend(ch[size_t(c.rank)], s[size_t(c.rank)].ptr(), bytes, (c.rank + 1) % R, c.stream));
    EPX_CHECK_EP(ncclEpPpRecv(ch[size_t(c.rank)], d[size_t(c.rank)].ptr(), bytes, (c.rank + R - 1) % R, nullptr, c.stream));
  }, iters), 1.0);
  // The same ring with the receives on a second stream: message n+1 is staged and put while
  // message n is still being received (what a user overlapping PP send and receive does; NCCL's
  // grouped send/recv below runs both at once as well).
  report("pp ring 2str", "epx", bytes, timePerCall([&](const RankContext& c, cudaStream_t side) {
    EPX_CHECK_EP(ncclEpPpSend(ch[size_t(c.rank)], s[size_t(c.rank)].ptr(), bytes, (c.rank + 1) % R, c.stream));
    EPX_CHECK_EP(ncclEpPpRecv(ch[size_t(c.rank)], d[size_t(c.rank)].ptr(), bytes, (c.rank + R - 1) % R, nullptr, side));
  }, iters), 1.0);
  report("pp ring", "nccl", bytes, timePerCall([&](const RankContext& c, cudaStream_t) {
    EPX_CHECK_NCCL(ncclGroupStart());
    EPX_CHECK_NCCL(ncclSend(s[size_t(c.rank)].ptr(), bytes, ncclUint8, (c.rank + 1) % R, c.comm, c.stream));
    EPX_CHECK_NCCL(ncclRecv(d[size_t(c.rank)].ptr(), bytes, ncclUint8, (c.rank + R - 1) % R, c.comm, c.stream));
    EPX_CHECK_NCCL(ncclGroupEnd());
  }, iters), 1.0);
  gpus().run([&](const RankContext& c) {
    ncclResult_t r = ncclSuccess;
    EPX_CHECK_EP(ncclEpPpGetAsyncError(ch[size_t(c.rank)], &r, nullptr, 0));
    if (r != ncclSuccess) throw std::runtime_error("PP channel async error " + std::to_string(int(r)));
    EPX_CHECK_EP(ncclEpPpChannelDestroy(ch[size_t(c.rank)]));
  });
}

BOOST_AUTO_TEST_SUITE_END()
