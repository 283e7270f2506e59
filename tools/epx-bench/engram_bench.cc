#include "engram_bench.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common.h"
#include "data.h"
#include "engram_work.h"
#include "epx/engram.h"
#include "gin_report.h"
#include "memory_floor.h"
#include "memory_floor_work.h"

namespace epxbench {

namespace {

using epx::testing::MultiGpu;
using epx::testing::RankContext;

constexpr int kEngramDefaultCtas = 8;  // engram.h: ncclEpEngramConfig_t.numCtas default
// Timed fetches whose events are in flight at once: the host reads them back (one synchronization)
// after this many fetches.
constexpr int kEventBatch = 32;

struct Rank {
  ncclEpEngram_t e = nullptr;
  std::vector<DevBuf> tables;  // [layer]: this rank's shard
  DevBuf indices, output;
  std::vector<int32_t> idx;    // this rank's indices (host)
  cudaStream_t side = nullptr;
  std::string checkMsg;        // "" = the rows matched (or not checked)
  std::string asyncErr;
  std::vector<double> doneUs, layerUs;  // [layer], mean over the timed fetches
  MemFloorTimes floor;
};

// Fetch into r.output on c.stream.
void fetch(const Rank& r, const RankContext& c, const EngramBenchShape& s) {
  BENCH_EP(ncclEpEngramFetch(r.e, r.indices.as<int32_t>(), s.tokens, r.output.get(), c.stream));
}

std::string asyncError(ncclEpEngram_t e) {
  ncclResult_t ae = ncclSuccess;
  char msg[512] = {};
  BENCH_EP(ncclEpEngramGetAsyncError(e, &ae, msg, sizeof(msg)));
  return ae == ncclSuccess ? std::string() : std::string(ncclGetErrorString(ae)) + ": " + msg;
}

// The check: one fetch, each layer copied back on the side stream after ncclEpEngramWaitLayer (so
// the per-layer completion is what makes the rows visible), compared with the pattern.
std::string checkRows(Rank& r, const RankContext& c, const EngramBenchShape& s, uint64_t seed) {
  fetch(r, c, s);
  const size_t layerBytes = size_t(s.rowsPerLayer()) * s.rowBytes;
  std::vector<uint8_t> host(layerBytes);
  std::string msg;
  for (int l = 0; l < s.layers; ++l) {
    BENCH_EP(ncclEpEngramWaitLayer(r.e, l, r.side));
    BENCH_CUDA(cudaMemcpyAsync(host.data(), r.output.as<char>() + size_t(l) * layerBytes, layerBytes,
                               cudaMemcpyDeviceToHost, r.side));
    BENCH_CUDA(cudaStreamSynchronize(r.side));
    if (msg.empty()) msg = engramCheckLayer(s, seed, l, r.idx, host.data());
  }
  BENCH_CUDA(cudaStreamSynchronize(c.stream));
  if (msg.empty()) msg = asyncError(r.e);  // e.g. a timeout that left rows unwritten
  return msg;
}

// opt.iters timed fetches (after opt.warmup): per layer, the mean time from the fetch's start to
// the layer's completion as a second stream sees it.
void timeFetches(Rank& r, const RankContext& c, const EngramBenchShape& s, const Options& opt, GinLatencyReport& gin) {
  const int L = s.layers;
  for (int i = 0; i < opt.warmup; ++i) fetch(r, c, s);
  BENCH_CUDA(cudaStreamSynchronize(c.stream));
  const int batch = std::min(opt.iters, kEventBatch);
  // Fetch b of a batch: event b * (L + 1) before it on the stream, b * (L + 1) + 1 + l after layer
  // l on the side stream (events of one device: their elapsed times compare across streams).
  EventSeq ev(size_t(batch) * size_t(L + 1));
  auto at = [&](int b, int k) { return size_t(b) * size_t(L + 1) + size_t(k); };
  std::vector<double> sumDone(size_t(L), 0.0), sumLayer(size_t(L), 0.0);
  gin.start(c);
  for (int i = 0; i < opt.iters; ++i) {
    const int slot = i % batch;
    ev.record(at(slot, 0), c.stream);
    fetch(r, c, s);
    for (int l = 0; l < L; ++l) {
      BENCH_EP(ncclEpEngramWaitLayer(r.e, l, r.side));
      ev.record(at(slot, 1 + l), r.side);
    }
    if (slot != batch - 1 && i != opt.iters - 1) continue;
    BENCH_CUDA(cudaStreamSynchronize(r.side));
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
    for (int b = 0; b <= slot; ++b) {
      double prev = 0;
      for (int l = 0; l < L; ++l) {
        const double t = ev.us(at(b, 0), at(b, 1 + l));
        sumDone[size_t(l)] += t;
        sumLayer[size_t(l)] += t - prev;
        prev = t;
      }
    }
  }
  gin.stop(c);
  r.doneUs.assign(size_t(L), 0.0);
  r.layerUs.assign(size_t(L), 0.0);
  for (int l = 0; l < L; ++l) {
    r.doneUs[size_t(l)] = sumDone[size_t(l)] / opt.iters;
    r.layerUs[size_t(l)] = sumLayer[size_t(l)] / opt.iters;
  }
}

}  // namespace

int runEngram(const Options& opt, MultiGpu& mg, int n, int ranksPerNode, bool printer) {
  std::string why;
  const EngramBenchShape s = engramShapeOf(opt, n, &why);
  if (!why.empty()) {
    std::fprintf(stderr, "epx-bench: %s\n", why.c_str());
    return 2;
  }
  const int ctas = opt.collCtas > 0 ? opt.collCtas : kEngramDefaultCtas;
  const bool network = ranksPerNode < n;
  auto gather = [&](const std::function<double(int)>& value) {
    std::vector<double> v(size_t(n), 0.0);
    for (int r : mg.localRanks()) v[size_t(r)] = value(r);
    return mg.gatherPerRank(v);
  };
  std::vector<Rank> rk(static_cast<size_t>(n));

  // Every rank's indices (the same in every process): this rank's to fetch, all for the floor.
  std::vector<std::vector<int32_t>> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    if (network || mg.isLocal(r)) all[size_t(r)] = engramIndices(s, opt.seed, r);

  mg.run([&](const RankContext& c) {
    Rank& x = rk[size_t(c.rank)];
    x.idx = all[size_t(c.rank)];
    ncclEpEngramPlan_t plan{};
    plan.numLayers = s.layers;
    plan.numRows = s.numRows;
    plan.rowBytes = s.rowBytes;
    plan.maxTokens = s.tokens;
    plan.entriesPerToken = s.entries;
    ncclEpEngramConfig_t cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.numCtas = ctas;
    cfg.chunkBytes = opt.chunkBytes;
    BENCH_EP(ncclEpEngramCreate(c.comm, &plan, &cfg, &x.e));
    const uint64_t words = s.rowBytes / 4, shardWords = uint64_t(s.rowsPerRank()) * words;
    x.tables.resize(size_t(s.layers));
    for (int l = 0; l < s.layers; ++l) {
      x.tables[size_t(l)].alloc(shardWords * 4);
      fillEngramWords(x.tables[size_t(l)].as<uint32_t>(), shardWords, engramTableKey(opt.seed, l),
                      uint64_t(c.rank) * shardWords, c.stream);
      BENCH_EP(ncclEpEngramSetTable(x.e, l, x.tables[size_t(l)].get()));
    }
    x.indices.alloc(x.idx.size() * sizeof(int32_t));
    BENCH_CUDA(cudaMemcpyAsync(x.indices.get(), x.idx.data(), x.indices.bytes(), cudaMemcpyHostToDevice, c.stream));
    x.output.alloc(size_t(s.layers) * size_t(s.rowsPerLayer()) * s.rowBytes);
    BENCH_CUDA(cudaMemsetAsync(x.output.get(), 0, x.output.bytes(), c.stream));
    BENCH_CUDA(cudaStreamCreateWithFlags(&x.side, cudaStreamNonBlocking));
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
  });

  // The floor: network (ranks on other nodes, with a rate), else the memory floor of the layer's
  // output rows on each rank (one node).
  EngramFloor floor;
  if (network) {
    floor = engramNetFloor(engramNetTraffic(s, all, ranksPerNode), opt.netGBps, opt.netLatencyUs);
  } else {
    MemFloorWork w;
    w.rowBytes = int(s.rowBytes);
    w.expanded = false;
    for (int64_t j = 0; j <= s.rowsPerLayer(); ++j) w.first.push_back(int32_t(j));
    for (int64_t j = 0; j < s.rowsPerLayer(); ++j) w.outRows.push_back(int32_t(j));
    mg.run([&](const RankContext& c) { rk[size_t(c.rank)].floor = runMemFloor(c, w, ctas, std::max(opt.iters, 20)); });
    const auto ce = gather([&](int r) { return rk[size_t(r)].floor.ceUs; });
    const auto sm = gather([&](int r) { return rk[size_t(r)].floor.copySmUs; });
    floor = engramMemFloor(s.layers, double(s.rowsPerLayer()) * double(s.rowBytes), maxOf(ce), maxOf(sm), ctas);
  }
  if (printer) printEngramHeader(s, opt, ranksPerNode, ctas, floor);

  bool failed = false;
  if (opt.check) {
    mg.run([&](const RankContext& c) {
      Rank& x = rk[size_t(c.rank)];
      x.checkMsg = checkRows(x, c, s, opt.seed);
      if (!x.checkMsg.empty() && !printer) std::fprintf(stderr, "epx-bench: rank %d: engram check FAILED: %s\n", c.rank, x.checkMsg.c_str());
    });
    const auto bad = gather([&](int r) { return rk[size_t(r)].checkMsg.empty() ? 0.0 : 1.0; });
    std::string ranks, first;
    for (int r = 0; r < n; ++r)
      if (bad[size_t(r)] != 0) {
        ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
        if (first.empty() && mg.isLocal(r)) first = "rank " + std::to_string(r) + ": " + rk[size_t(r)].checkMsg;
      }
    failed = !ranks.empty();
    if (printer) {
      if (failed)
        std::printf("# engram check: FAILED on rank(s) %s: %s\n", ranks.c_str(), first.empty() ? "(see their logs)" : first.c_str());
      else
        std::printf("# engram check: OK (every rank's %d layers x %lld rows match the tables; each layer read after "
                    "ncclEpEngramWaitLayer on a second stream)\n",
                    s.layers, (long long)s.rowsPerLayer());
      std::fflush(stdout);
    }
  } else if (printer) {
    std::printf("# engram check: skipped (--no-check)\n");
  }

  GinLatencyReport gin(mg, printer);
  mg.run([&](const RankContext& c) { timeFetches(rk[size_t(c.rank)], c, s, opt, gin); });
  EngramTimes t;
  for (int l = 0; l < s.layers; ++l) {
    t.doneUs.push_back(maxOf(gather([&](int r) { return rk[size_t(r)].doneUs[size_t(l)]; })));
    t.layerUs.push_back(maxOf(gather([&](int r) { return rk[size_t(r)].layerUs[size_t(l)]; })));
  }
  if (printer) printEngramTimes(s, t, floor);
  gin.print("engram fetch");

  mg.run([&](const RankContext& c) {
    Rank& x = rk[size_t(c.rank)];
    BENCH_CUDA(cudaStreamSynchronize(c.stream));
    x.asyncErr = asyncError(x.e);
    if (!x.asyncErr.empty()) std::fprintf(stderr, "epx-bench: engram async error on rank %d: %s\n", c.rank, x.asyncErr.c_str());
    BENCH_EP(ncclEpEngramDestroy(x.e));
    x.e = nullptr;
    BENCH_CUDA(cudaStreamDestroy(x.side));
    x.side = nullptr;
    x.tables.clear();
    x.indices.release();
    x.output.release();
  });
  const auto asyncBad = gather([&](int r) { return rk[size_t(r)].asyncErr.empty() ? 0.0 : 1.0; });
  failed = failed || maxOf(asyncBad) > 0;
  if (printer)
    std::printf("# result: %s\n", failed ? "FAILED (see the lines above)" : opt.check ? "all checks OK" : "not checked");
  return failed ? 1 : 0;
}

}  // namespace epxbench
