#include "coll_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common.h"
#include "epx/bucket.h"
#include "epx/lb.h"
#include "epx/pp.h"
#include "gin_report.h"

namespace epxbench {

namespace {

using epx::testing::MultiGpu;
using epx::testing::RankContext;

// Messages in flight per direction of the PP channel (the receiver may lag this many behind).
constexpr int kPpSlots = 4;

// One timed call of an op on a rank: its stream and a second stream of its own (forked from the
// first before the timed loop and joined back after it), for calls a user overlaps on two streams.
using TimedOp = std::function<void(const RankContext&, cudaStream_t side)>;

// The ranks' shared measurement: times ops and prints one line each (rank 0), with a `# gin` line
// under every epx line when the GIN latency counters are on (fake nodes, gin_report.h).
class CollBench {
 public:
  CollBench(const Options& opt, MultiGpu& mg, bool printer) : opt_(opt), mg_(mg), printer_(printer), gin_(mg, printer) {}

  // Collective: opt.warmup untimed calls, then opt.iters timed ones; the line: op, implementation,
  // bytes, µs per call of the slowest rank, algbw, busbw (algbw x busFactor), % of the network rate.
  void run(const char* what, const char* impl, size_t bytes, double busFactor, const TimedOp& op) {
    const bool epx = std::string(impl) == "epx";
    std::vector<double> secs(size_t(mg_.size()), 0.0);
    mg_.run([&](const RankContext& c) {
      cudaStream_t side;
      BENCH_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
      for (int i = 0; i < opt_.warmup; ++i) op(c, side);
      BENCH_CUDA(cudaStreamSynchronize(side));
      BENCH_CUDA(cudaStreamSynchronize(c.stream));
      cudaEvent_t start, stop, joined;
      BENCH_CUDA(cudaEventCreate(&start));
      BENCH_CUDA(cudaEventCreate(&stop));
      BENCH_CUDA(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
      if (epx) gin_.start(c);
      BENCH_CUDA(cudaEventRecord(start, c.stream));
      BENCH_CUDA(cudaStreamWaitEvent(side, start, 0));
      for (int i = 0; i < opt_.iters; ++i) op(c, side);
      BENCH_CUDA(cudaEventRecord(joined, side));
      BENCH_CUDA(cudaStreamWaitEvent(c.stream, joined, 0));
      BENCH_CUDA(cudaEventRecord(stop, c.stream));
      BENCH_CUDA(cudaEventSynchronize(stop));
      if (epx) gin_.stop(c);
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
      secs[size_t(c.rank)] = double(ms) / 1e3 / opt_.iters;
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      cudaEventDestroy(joined);
      BENCH_CUDA(cudaStreamDestroy(side));
    });
    secs = mg_.gatherPerRank(secs);
    const double t = *std::max_element(secs.begin(), secs.end());
    if (printer_) {
      const double alg = double(bytes) / t / 1e9, bus = alg * busFactor, floorGBps = opt_.netGBps;
      char ratio[64] = "";
      if (floorGBps > 0) std::snprintf(ratio, sizeof(ratio), "  %5.1f%% of floor %.1f", 100.0 * bus / floorGBps, floorGBps);
      std::printf("%-14s %-5s %12zu B %10.1f us  algbw %8.2f GB/s  busbw %8.2f GB/s%s\n", what, impl, bytes, t * 1e6,
                  alg, bus, ratio);
      std::fflush(stdout);
    }
    if (epx) gin_.print(what);
  }

 private:
  const Options& opt_;
  MultiGpu& mg_;
  bool printer_;
  GinLatencyReport gin_;
};

// After the timed calls, on every rank: the object's async error (printed) and its destroy. 1 when
// any rank had an error, else 0 (collective).
template <class GetError, class Destroy>
int finish(MultiGpu& mg, const char* what, GetError getError, Destroy destroy) {
  std::vector<double> bad(size_t(mg.size()), 0.0);
  mg.run([&](const RankContext& c) {
    ncclResult_t r = ncclSuccess;
    char msg[512] = {};
    BENCH_EP(getError(c, &r, msg, sizeof(msg)));
    if (r != ncclSuccess) {
      std::fprintf(stderr, "epx-bench: %s async error on rank %d: %s\n", what, c.rank, msg);
      bad[size_t(c.rank)] = 1;
    }
    BENCH_EP(destroy(c));
  });
  bad = mg.gatherPerRank(bad);
  return *std::max_element(bad.begin(), bad.end()) > 0 ? 1 : 0;
}

int runBucket(const Options& opt, MultiGpu& mg, int R, bool printer) {
  const size_t count = (opt.collBytes / 4) / size_t(R) * size_t(R);  // FP32 elements, a multiple of R
  const size_t total = count * 4, shard = total / size_t(R);
  const ncclEpBucketTensor_t plan{count, ncclFloat32};
  std::vector<ncclEpBucket_t> b(size_t(R), nullptr);
  std::vector<DevBuf> in(static_cast<size_t>(R)), out(static_cast<size_t>(R));  // NCCL's buffers
  mg.run([&](const RankContext& c) {
    ncclEpBucketConfig_t cfg = NCCL_EP_BUCKET_CONFIG_INITIALIZER;
    if (opt.collCtas > 0) cfg.numCtas = opt.collCtas;
    cfg.chunkBytes = opt.chunkBytes;
    BENCH_EP(ncclEpBucketCreate(c.comm, &plan, 1, &cfg, &b[size_t(c.rank)]));
    in[size_t(c.rank)].alloc(total);
    out[size_t(c.rank)].alloc(total);
    void* t = nullptr;
    BENCH_EP(ncclEpBucketGetTensor(b[size_t(c.rank)], 0, &t));
    // FP32 values of bytes 0x3c (~0.0115 each); the reductions scale by 1/R (below), so repeated
    // in-place calls keep them finite.
    BENCH_CUDA(cudaMemsetAsync(t, 0x3c, total, c.stream));
    BENCH_CUDA(cudaMemsetAsync(in[size_t(c.rank)].get(), 0x3c, total, c.stream));
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
  });
  const ncclEpBucketItem_t it{0, count, ncclFloat32, nullptr};
  CollBench bench(opt, mg, printer);
  // Every reduction scales by 1/R: the in-place sums then stay where they started over any number
  // of calls (without it the all-reduce multiplies the tensor by R per call, to inf).
  const float invR = 1.0f / float(R);
  const ncclEpBucketReduceOpts_t fp32Wire{ncclFloat32, 1, invR}, bf16Wire{ncclBfloat16, 1, invR};
  const double f1 = double(R - 1) / R, f2 = 2.0 * (R - 1) / R;
  auto ep = [&](const RankContext& c) { return b[size_t(c.rank)]; };
  bench.run("all-gather", "epx", total, f1, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpBucketAllGather(ep(c), &it, 1, nullptr, c.stream));
  });
  bench.run("all-gather", "nccl", total, f1, [&](const RankContext& c, cudaStream_t) {
    BENCH_NCCL(ncclAllGather(in[size_t(c.rank)].as<char>() + size_t(c.rank) * shard, out[size_t(c.rank)].get(), shard,
                             ncclUint8, c.comm, c.stream));
  });
  bench.run("reduce-scatter", "epx", total, f1, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpBucketReduceScatter(ep(c), &it, 1, &fp32Wire, nullptr, c.stream));
  });
  // BF16 wire: algbw counts the FP32 tensor (comparable with the FP32 wire's), busbw and the floor
  // ratio the bytes that travel (BF16 contributions; the all-reduce's gather half is FP32).
  bench.run("rs bf16 wire", "epx", total, f1 / 2, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpBucketReduceScatter(ep(c), &it, 1, &bf16Wire, nullptr, c.stream));
  });
  bench.run("reduce-scatter", "nccl", total, f1, [&](const RankContext& c, cudaStream_t) {
    BENCH_NCCL(ncclReduceScatter(in[size_t(c.rank)].get(), out[size_t(c.rank)].get(), count / size_t(R), ncclFloat32,
                                 ncclSum, c.comm, c.stream));
  });
  bench.run("all-reduce", "epx", total, f2, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpBucketAllReduce(ep(c), &it, 1, &fp32Wire, nullptr, c.stream));
  });
  bench.run("ar bf16 wire", "epx", total, f1 * 1.5, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpBucketAllReduce(ep(c), &it, 1, &bf16Wire, nullptr, c.stream));
  });
  bench.run("all-reduce", "nccl", total, f2, [&](const RankContext& c, cudaStream_t) {
    BENCH_NCCL(ncclAllReduce(in[size_t(c.rank)].get(), out[size_t(c.rank)].get(), count, ncclFloat32, ncclSum, c.comm,
                             c.stream));
  });
  return finish(mg, "bucket", [&](const RankContext& c, ncclResult_t* r, char* msg, size_t len) {
    return ncclEpBucketGetAsyncError(ep(c), r, msg, len);
  }, [&](const RankContext& c) { return ncclEpBucketDestroy(ep(c)); });
}

int runPp(const Options& opt, MultiGpu& mg, int R, bool printer) {
  const size_t bytes = opt.ppBytes;
  std::vector<ncclEpPpChannel_t> ch(size_t(R), nullptr);
  std::vector<DevBuf> src(static_cast<size_t>(R)), dst(static_cast<size_t>(R));
  mg.run([&](const RankContext& c) {
    ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
    cfg.maxMessageBytes = bytes;
    cfg.slots = kPpSlots;
    if (opt.collCtas > 0) cfg.numCtas = opt.collCtas;
    cfg.chunkBytes = opt.chunkBytes;
    BENCH_EP(ncclEpPpChannelCreate(c.comm, &cfg, &ch[size_t(c.rank)]));
    src[size_t(c.rank)].alloc(bytes);
    dst[size_t(c.rank)].alloc(bytes);
    BENCH_CUDA(cudaMemsetAsync(src[size_t(c.rank)].get(), 0x5a, bytes, c.stream));
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
  });
  CollBench bench(opt, mg, printer);
  auto next = [&](const RankContext& c) { return (c.rank + 1) % R; };
  auto prev = [&](const RankContext& c) { return (c.rank + R - 1) % R; };
  bench.run("pp ring", "epx", bytes, 1.0, [&](const RankContext& c, cudaStream_t) {
    BENCH_EP(ncclEpPpSend(ch[size_t(c.rank)], src[size_t(c.rank)].get(), bytes, next(c), c.stream));
    BENCH_EP(ncclEpPpRecv(ch[size_t(c.rank)], dst[size_t(c.rank)].get(), bytes, prev(c), nullptr, c.stream));
  });
  // The receives on the second stream: message n+1 is staged and put while message n is still
  // being received (a PP stage that sends forward while it receives; NCCL's grouped send/recv
  // below runs both at once too).
  bench.run("pp ring 2str", "epx", bytes, 1.0, [&](const RankContext& c, cudaStream_t side) {
    BENCH_EP(ncclEpPpSend(ch[size_t(c.rank)], src[size_t(c.rank)].get(), bytes, next(c), c.stream));
    BENCH_EP(ncclEpPpRecv(ch[size_t(c.rank)], dst[size_t(c.rank)].get(), bytes, prev(c), nullptr, side));
  });
  bench.run("pp ring", "nccl", bytes, 1.0, [&](const RankContext& c, cudaStream_t) {
    BENCH_NCCL(ncclGroupStart());
    BENCH_NCCL(ncclSend(src[size_t(c.rank)].get(), bytes, ncclUint8, next(c), c.comm, c.stream));
    BENCH_NCCL(ncclRecv(dst[size_t(c.rank)].get(), bytes, ncclUint8, prev(c), c.comm, c.stream));
    BENCH_NCCL(ncclGroupEnd());
  });
  return finish(mg, "PP channel", [&](const RankContext& c, ncclResult_t* r, char* msg, size_t len) {
    return ncclEpPpGetAsyncError(ch[size_t(c.rank)], r, msg, len);
  }, [&](const RankContext& c) { return ncclEpPpChannelDestroy(ch[size_t(c.rank)]); });
}

// One DeepSeek-V3 expert (gate, up and down projections: 3 x 7168 x 2048 parameters).
constexpr size_t kExpertParams = size_t(3) * 7168 * 2048;
// Its FP8 weights' scales: one FP32 per 128 x 128 block.
constexpr size_t kExpertScaleBytes = size_t(3) * (7168 / 128) * (2048 / 128) * 4;

// Expert load balancing: every rank's slot 0 replicates local expert 0 of the next rank, so each
// rank sends one expert's rows and receives one (a ring, like pp ring). Lines: prefetch of the FP8
// weights with their scales, of BF16 weights, and the FP32 gradient reduction (the owner reads its
// replica's gradient), each against an NCCL send/recv ring of the same bytes; % of the network rate
// counts the bytes each rank receives.
int runLb(const Options& opt, MultiGpu& mg, int R, bool printer) {
  const size_t fp8Bytes = kExpertParams, bf16Bytes = kExpertParams * 2, gradBytes = kExpertParams * 4;
  struct Rank {
    ncclEpLb_t fp8 = nullptr, bf16 = nullptr;
    bool hasGrads = false;
    DevBuf weights8, scales, weights16, grads, mapping, send, recv;
  };
  std::vector<Rank> rk(static_cast<size_t>(R));
  std::vector<int32_t> map(static_cast<size_t>(R));
  for (int d = 0; d < R; ++d) map[size_t(d)] = (d + 1) % R;  // one expert per rank: its id is its owner's rank
  mg.run([&](const RankContext& c) {
    Rank& x = rk[size_t(c.rank)];
    ncclEpLbConfig_t cfg = NCCL_EP_LB_CONFIG_INITIALIZER;
    if (opt.collCtas > 0) cfg.numCtas = opt.collCtas;
    cfg.chunkBytes = opt.chunkBytes;
    ncclEpLbPlan_t p{};
    p.numExperts = R;
    p.numSlots = 1;
    p.numWeightTensors = 2;
    p.weightRowBytes[0] = fp8Bytes;
    p.weightRowBytes[1] = kExpertScaleBytes;
    p.numGradTensors = 1;
    p.gradRowElems[0] = kExpertParams;
    // A build on NCCL older than 2.30.3 reads no network peer's slot gradients (lb.h): without the
    // gradient tensor then, and no reduction line.
    const ncclResult_t r = ncclEpLbCreate(c.comm, &p, &cfg, &x.fp8);
    if (r == ncclInvalidUsage && std::strstr(ncclEpGetLastError(), "GIN get")) {
      if (c.rank == 0) std::printf("# lb reduce: not run (%s)\n", ncclEpGetLastError());
      p.numGradTensors = 0;
      BENCH_EP(ncclEpLbCreate(c.comm, &p, &cfg, &x.fp8));
    } else {
      BENCH_EP(r);
    }
    x.hasGrads = p.numGradTensors > 0;
    ncclEpLbPlan_t q{};
    q.numExperts = R;
    q.numSlots = 1;
    q.numWeightTensors = 1;
    q.weightRowBytes[0] = bf16Bytes;
    BENCH_EP(ncclEpLbCreate(c.comm, &q, &cfg, &x.bf16));
    x.weights8.alloc(fp8Bytes);
    x.scales.alloc(kExpertScaleBytes);
    x.weights16.alloc(bf16Bytes);
    x.grads.alloc(gradBytes);
    x.mapping.alloc(map.size() * sizeof(int32_t));
    x.send.alloc(gradBytes);
    x.recv.alloc(gradBytes);
    BENCH_CUDA(cudaMemsetAsync(x.weights8.get(), 0x3c, fp8Bytes, c.stream));
    BENCH_CUDA(cudaMemsetAsync(x.scales.get(), 0x3c, kExpertScaleBytes, c.stream));
    BENCH_CUDA(cudaMemsetAsync(x.weights16.get(), 0x3c, bf16Bytes, c.stream));
    BENCH_CUDA(cudaMemsetAsync(x.grads.get(), 0, gradBytes, c.stream));  // +0 plus zero replicas stays 0
    if (x.hasGrads) {
      float* sg = nullptr;
      BENCH_EP(ncclEpLbGetSlotGrads(x.fp8, 0, &sg));
      BENCH_CUDA(cudaMemsetAsync(sg, 0, gradBytes, c.stream));
    }
    BENCH_CUDA(cudaMemsetAsync(x.send.get(), 0x5a, gradBytes, c.stream));
    BENCH_CUDA(cudaMemcpyAsync(x.mapping.get(), map.data(), map.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                               c.stream));
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
  });
  CollBench bench(opt, mg, printer);
  auto x = [&](const RankContext& c) -> Rank& { return rk[size_t(c.rank)]; };
  auto ring = [&](const RankContext& c, size_t bytes) {
    BENCH_NCCL(ncclGroupStart());
    BENCH_NCCL(ncclSend(x(c).send.get(), bytes, ncclUint8, (c.rank + R - 1) % R, c.comm, c.stream));
    BENCH_NCCL(ncclRecv(x(c).recv.get(), bytes, ncclUint8, (c.rank + 1) % R, c.comm, c.stream));
    BENCH_NCCL(ncclGroupEnd());
  };
  bench.run("lb prefetch fp8", "epx", fp8Bytes + kExpertScaleBytes, 1.0, [&](const RankContext& c, cudaStream_t) {
    const void* w[2] = {x(c).weights8.get(), x(c).scales.get()};
    BENCH_EP(ncclEpLbPrefetchWeights(x(c).fp8, x(c).mapping.as<int32_t>(), w, c.stream));
  });
  bench.run("lb prefetch fp8", "nccl", fp8Bytes + kExpertScaleBytes, 1.0,
            [&](const RankContext& c, cudaStream_t) { ring(c, fp8Bytes + kExpertScaleBytes); });
  bench.run("lb prefetch bf16", "epx", bf16Bytes, 1.0, [&](const RankContext& c, cudaStream_t) {
    const void* w[1] = {x(c).weights16.get()};
    BENCH_EP(ncclEpLbPrefetchWeights(x(c).bf16, x(c).mapping.as<int32_t>(), w, c.stream));
  });
  bench.run("lb prefetch bf16", "nccl", bf16Bytes, 1.0, [&](const RankContext& c, cudaStream_t) { ring(c, bf16Bytes); });
  if (rk[size_t(mg.localRanks()[0])].hasGrads) {  // the same on every rank
    bench.run("lb reduce fp32", "epx", gradBytes, 1.0, [&](const RankContext& c, cudaStream_t) {
      float* g[1] = {x(c).grads.as<float>()};
      BENCH_EP(ncclEpLbReduceGrads(x(c).fp8, x(c).mapping.as<int32_t>(), g, c.stream));
    });
    bench.run("lb reduce fp32", "nccl", gradBytes, 1.0, [&](const RankContext& c, cudaStream_t) { ring(c, gradBytes); });
  }
  int bad = finish(mg, "LB (FP8)", [&](const RankContext& c, ncclResult_t* r, char* msg, size_t len) {
    return ncclEpLbGetAsyncError(x(c).fp8, r, msg, len);
  }, [&](const RankContext& c) { return ncclEpLbDestroy(x(c).fp8); });
  bad |= finish(mg, "LB (BF16)", [&](const RankContext& c, ncclResult_t* r, char* msg, size_t len) {
    return ncclEpLbGetAsyncError(x(c).bf16, r, msg, len);
  }, [&](const RankContext& c) { return ncclEpLbDestroy(x(c).bf16); });
  return bad;
}

}  // namespace

int runCollectives(const Options& opt, MultiGpu& mg, int nRanks, bool printer) {
  const char* what = opt.algo == Algo::Pp ? "PP send/recv" : opt.algo == Algo::Lb ? "expert load balancing"
                                                                                 : "bucket collectives";
  const std::string shape = opt.algo == Algo::Pp   ? std::to_string(opt.ppBytes) + " B messages, ring"
                            : opt.algo == Algo::Lb ? "one DeepSeek-V3 expert to the next rank's slot, ring"
                                                   : std::to_string(opt.collBytes) + " B FP32 tensor";
  if (printer)
    std::printf("# %s: %d ranks, %s CTAs per kernel, %d timed calls after %d, %s; floor: %s\n", what, nRanks,
                opt.collCtas > 0 ? std::to_string(opt.collCtas).c_str() : "the library's default", opt.iters,
                opt.warmup, shape.c_str(),
                opt.netGBps > 0 ? (std::to_string(opt.netGBps) + " GB/s (network rate)").c_str() : "none (no network rate)");
  if (opt.algo == Algo::Lb) return runLb(opt, mg, nRanks, printer);
  return opt.algo == Algo::Pp ? runPp(opt, mg, nRanks, printer) : runBucket(opt, mg, nRanks, printer);
}

}  // namespace epxbench
