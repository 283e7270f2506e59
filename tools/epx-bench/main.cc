// epx-bench: times epx EP dispatch/combine on the local GPUs (one thread and one NCCL communicator
// per GPU) against a plain NCCL all-to-all dispatcher and the NVLink peer-copy ceiling measured in
// the same run, and checks every configuration against the CPU reference. See docs/bench.md.
// Multi-process mode (EPX_MP_SIZE / EPX_MP_RANK / EPX_MP_ID_FILE, scripts/fake-nodes.sh): one rank
// per process, ranks on (fake) NCCL nodes; rank 0 prints, every rank checks its own outputs; the
// NVLink ceiling is skipped; with EPX_GIN_EMU_GBPS a network floor is printed.
#include <cuda_runtime.h>

#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "epx/testing/stack_dump.h"
#include "baseline.h"
#include "check.h"
#include "common.h"
#include "epx/testing/multigpu.h"
#include "epx/ref/hybrid_ref.h"
#include "epx/topology/estimate.h"
#include "epx_runner.h"
#include "coll_bench.h"
#include "engram_bench.h"
#include "engram_work.h"
#include "ll_bench.h"
#include "memory_floor.h"
#include "peer_copy.h"
#include "report.h"
#include "routing.h"

namespace epxbench {
namespace {

constexpr int kCeilingFewCtas = 24;

RoutingInfo describe(RoutingKind kind, const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing) {
  RoutingInfo info{kind, routingDescription(kind, s), trafficOf(s, routing), {}, {}, {}, 0, 0, {}, {}};
  const double row16 = 2.0 * s.hidden, row8 = s.hidden % 128 ? 0.0 : s.hidden + s.hidden / 128 * 4.0;
  double recv = 0, remote = 0, maxRemote = 0;
  for (int d = 0; d < s.nRanks; ++d) {
    recv += double(info.traffic.recvRows(d));
    remote += double(info.traffic.remoteRecvRows(d));
    maxRemote = std::max({maxRemote, double(info.traffic.remoteRecvRows(d)), double(info.traffic.remoteSendRows(d))});
  }
  recv /= s.nRanks;
  remote /= s.nRanks;
  info.bf16 = {recv * row16, remote * row16};
  info.fp8 = {recv * row8, remote * row8};
  info.combine = info.bf16;  // combine sends back exactly the BF16 rows dispatch delivered
  info.maxRemoteBytes16 = maxRemote * row16;
  return info;
}

// Rows between ranks of different nodes (node = rank / ranksPerNode): max over ranks of
// max(rows out, rows in), as bytes and as time at the NIC rate plus one latency.
NetFloor netFloor(const BenchShape& s, const Traffic& t, int ranksPerNode, const Options& opt) {
  NetFloor f;
  if (opt.netGBps <= 0) return f;
  f.on = true;
  double maxRows = 0;
  for (int a = 0; a < s.nRanks; ++a) {
    int64_t out = 0, in = 0;
    for (int b = 0; b < s.nRanks; ++b)
      if (a / ranksPerNode != b / ranksPerNode) {
        out += t.at(a, b);
        in += t.at(b, a);
      }
    maxRows = std::max(maxRows, double(std::max(out, in)));
  }
  const double row16 = 2.0 * s.hidden, row8 = s.hidden % 128 ? 0.0 : s.hidden + s.hidden / 128 * 4.0;
  f.bytes16 = maxRows * row16;
  f.bytes8 = maxRows * row8;
  f.bytesComb = f.bytes16;
  auto us = [&](double bytes) { return bytes > 0 ? bytes / (opt.netGBps * 1e3) + opt.netLatencyUs : 0.0; };
  f.us16 = us(f.bytes16);
  f.us8 = us(f.bytes8);
  f.usComb = us(f.bytesComb);
  return f;
}

// Per-op GIN summary over the ranks (collective: gathers every rank's counters).
template <class Gather>
std::vector<GinOpSummary> ginSummary(const std::vector<EpxGinCalls>& gin, const std::vector<EpxTimes>& times,
                                     const Traffic& t, const BenchShape& s, int ranksPerNode, Gather& gather) {
  const int n = s.nRanks;
  const double row16 = 2.0 * s.hidden, row8 = s.hidden % 128 ? 0.0 : s.hidden + s.hidden / 128 * 4.0;
  std::vector<double> outRows(size_t(n), 0), inRows(size_t(n), 0);  // rows crossing nodes per rank
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a / ranksPerNode != b / ranksPerNode) {
        outRows[size_t(a)] += double(t.at(a, b));
        inRows[size_t(a)] += double(t.at(b, a));
      }
  struct OpSel {
    const char* name;
    const GinTraffic EpxGinCalls::*calls;
    double EpxTimes::*us;
  };
  const OpSel sel[] = {{"layout", &EpxGinCalls::layout, &EpxTimes::layoutUs},
                       {"dispatch_bf16", &EpxGinCalls::bf16, &EpxTimes::bf16Us},
                       {"combine_bf16", &EpxGinCalls::combine, &EpxTimes::combineUs},
                       {"dispatch_fp8", &EpxGinCalls::fp8, &EpxTimes::fp8Us}};
  std::vector<GinOpSummary> out;
  for (const OpSel& o : sel) {
    if (o.us == &EpxTimes::fp8Us && row8 == 0) continue;
    auto field = [&](double GinTraffic::*f) { return gather([&](int r) { return (gin[size_t(r)].*(o.calls)).*f; }); };
    const auto ops = field(&GinTraffic::ops), puts = field(&GinTraffic::puts), ps = field(&GinTraffic::putSignals),
               so = field(&GinTraffic::signalOnly), wire = field(&GinTraffic::wireBytes);
    const auto us = gather([&](int r) { return times[size_t(r)].*(o.us); });
    GinOpSummary g;
    g.op = o.name;
    for (int r = 0; r < n; ++r) {
      const double rows = o.us == &EpxTimes::layoutUs ? 0.0
                          : o.us == &EpxTimes::combineUs ? inRows[size_t(r)] * row16
                          : o.us == &EpxTimes::fp8Us     ? outRows[size_t(r)] * row8
                                                         : outRows[size_t(r)] * row16;
      g.opsMean += ops[size_t(r)] / n;
      g.putsMean += puts[size_t(r)] / n;
      g.putSignalsMean += ps[size_t(r)] / n;
      g.signalOnlyMean += so[size_t(r)] / n;
      g.wireMeanBytes += wire[size_t(r)] / n;
      g.rowMeanBytes += rows / n;
      if (wire[size_t(r)] > 0) g.overheadMaxPct = std::max(g.overheadMaxPct, 100.0 * (wire[size_t(r)] - rows) / wire[size_t(r)]);
      if (us[size_t(r)] > 0) g.netGBpsMean += gbps(wire[size_t(r)], us[size_t(r)]) / n;
    }
    out.push_back(g);
  }
  return out;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

// Network copies per routed token of direct and hybrid mode on this routing and, analytically, on
// uniform routing (a source's own node is touched as often as any other). Printed with the network
// floor only, so computed only with a network rate.
NetCopies netCopies(const BenchShape& s, int ranksPerNode, const std::vector<epx::ref::RankRouting>& routing,
                    const Options& opt) {
  NetCopies c;
  if (opt.netGBps <= 0) return c;
  epx::ref::EpShape es;
  es.nRanks = s.nRanks;
  es.hidden = s.hidden;
  es.topk = s.topk;
  es.numExperts = s.experts;
  epx::ref::NodeGeometry g;
  g.nRanks = s.nRanks;
  g.ranksPerNode = ranksPerNode;
  const epx::ref::HybridPlan p = epx::ref::hybridPlan(es, g, routing);
  double direct = 0, hybrid = 0;
  for (int r = 0; r < s.nRanks; ++r) direct += double(p.directNetworkTokens[size_t(r)]), hybrid += double(p.hybridNetworkTokens[size_t(r)]);
  if (p.routedTokens > 0) c.direct = direct / double(p.routedTokens), c.hybrid = hybrid / double(p.routedTokens);
  const int nodes = g.nodes();
  using epx::topo::EpxForwarding;
  c.uniformDirect = epx::topo::epxExpectedNetworkRows(s.experts, s.topk, s.nRanks, nodes, EpxForwarding::kDirect);
  c.uniformHybrid = epx::topo::epxExpectedNetworkRows(s.experts, s.topk, s.nRanks, nodes, EpxForwarding::kHybrid);
  return c;
}

// Ranks per node for the network floor: --ranks-per-node or EPX_MP_RANKS_PER_NODE (parseArgs),
// else one per process in multi-process mode, else all n ranks of this process.
int ranksPerNodeOf(const Options& opt, bool mp, int n) { return opt.ranksPerNode ? opt.ranksPerNode : mp ? 1 : n; }

// The rank count n against the shape: every rank holds the same number of experts, and the ranks
// per node divide the ranks. Prints the problem and returns false.
bool rankShapeFits(const Options& opt, bool mp, int n) {
  std::string why;
  const int perNode = ranksPerNodeOf(opt, mp, n);
  if (n > kMaxJobRanks)  // --gpus is bounded when parsed; a multi-process job's size is not
    why = (mp ? "EPX_MP_SIZE=" : "--gpus ") + std::to_string(n) + ": a job runs 1.." + std::to_string(kMaxJobRanks) + " ranks";
  else if (!opt.collectives() && opt.experts % n)
    why = "--experts " + std::to_string(opt.experts) + " is not a multiple of the " + std::to_string(n) + " ranks";
  else if (perNode > n || n % perNode)
    why = "ranks per node " + std::to_string(perNode) + " (--ranks-per-node / EPX_MP_RANKS_PER_NODE) does not divide the " +
          std::to_string(n) + " ranks";
  else if (opt.hybrid > 0 && (n % opt.hybrid || n / opt.hybrid < 2))
    why = "--hybrid " + std::to_string(opt.hybrid) + ": virtual nodes of " + std::to_string(opt.hybrid) +
          " ranks must split the " + std::to_string(n) + " ranks evenly into two nodes or more";
  else if (opt.algo == Algo::Engram)
    engramShapeOf(opt, n, &why);  // its rows over the ranks
  if (!why.empty()) std::fprintf(stderr, "epx-bench: %s\n", why.c_str());
  return why.empty();
}

int run(const Options& opt) {
  // One process per rank (EPX_MP_SIZE / EPX_MP_RANK / EPX_MP_ID_FILE, scripts/fake-nodes.sh), or all
  // ranks in this process, one per GPU. Read first, so that a bad value is an error on every machine.
  epx::testing::MpEnv mpe;
  try {
    mpe = epx::testing::mpEnv();
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "epx-bench: %s\n", ex.what());
    return 2;
  }
  // A --gpus that contradicts the job's rank count is an error on every machine, GPU or not.
  if (mpe.enabled && opt.gpus && opt.gpus != mpe.size) {
    std::fprintf(stderr, "epx-bench: --gpus %d, but the job has EPX_MP_SIZE=%d ranks\n", opt.gpus, mpe.size);
    return 2;
  }
  // So are a shape and a rank count that do not fit, when the rank count is known without a GPU
  // (else checked once the local GPUs are counted).
  const int knownRanks = mpe.enabled ? mpe.size : opt.gpus;
  if (knownRanks && !rankShapeFits(opt, mpe.enabled, knownRanks)) return 2;
  int nDev = 0;
  const cudaError_t e = cudaGetDeviceCount(&nDev);
  if (e != cudaSuccess || nDev <= 0) {
    // No GPU is a normal outcome here (exit 0); a GPU the runtime cannot use is an error.
    const bool gpuPresent = access("/dev/nvidiactl", F_OK) == 0;
    if (e != cudaSuccess && gpuPresent) {
      std::fprintf(stderr, "epx-bench: NVIDIA GPUs are present but CUDA cannot use them: %s\n", cudaGetErrorString(e));
      return 2;
    }
    std::printf("epx-bench: no CUDA GPU on this machine; nothing to run\n");
    // As one rank of a multi-process job (scripts/fake-nodes.sh), say "skipped" (77, the CTest and
    // fake-nodes convention) so that the job does not report a benchmark that never ran as OK.
    return epx::testing::multiProcessRequested() ? 77 : 0;
  }
  const bool mp = mpe.enabled;
  int n = 0;
  if (mp) {
    n = mpe.size;  // --gpus checked against it above
  } else {
    n = opt.gpus ? opt.gpus : std::min(nDev, kMaxRanks);
    if (n < 1 || n > nDev || n > kMaxRanks) {
      std::fprintf(stderr, "epx-bench: --gpus %d: need 1..%d and at most the %d local GPUs\n", n, kMaxRanks, nDev);
      return 2;
    }
  }
  if (!knownRanks && !rankShapeFits(opt, mp, n)) return 2;
  const int ranksPerNode = ranksPerNodeOf(opt, mp, n);
  const BenchShape s{n, opt.tokens, opt.hidden, opt.topk, opt.experts};
  const bool fp8 = s.hidden % 128 == 0;
  const bool printer = !mp || mpe.rank == 0;  // rank 0 prints the tables; every rank checks

  Report rep(opt, printer);
  rep.printSystem(Placement{n, mp, ranksPerNode, nDev});
  if (!mp && !opt.gpus && nDev > kMaxRanks)
    rep.note("using GPUs 0.." + std::to_string(kMaxRanks - 1) + " of " + std::to_string(nDev) + " (--gpus to choose)");

  // Routing: one draw for the timed loops, a fresh one for the correctness check (the same in
  // every process: it depends only on the options).
  std::vector<std::vector<epx::ref::RankRouting>> timed, check;
  std::vector<RoutingInfo> infos;
  for (RoutingKind k : opt.algo != Algo::HighThroughput ? std::vector<RoutingKind>{} : opt.routings) {
    timed.push_back(makeRouting(k, s, opt.seed));
    check.push_back(makeRouting(k, s, opt.seed + 7777));
    infos.push_back(describe(k, s, timed.back()));
    // Hybrid: the rows of both hops (on fake nodes the forward hop crosses the emulated NIC too).
    infos.back().wire = opt.hybrid > 0 ? hybridTrafficOf(s, timed.back(), opt.hybrid) : infos.back().traffic;
    infos.back().net = netFloor(s, infos.back().wire, ranksPerNode, opt);
    // Hybrid (--hybrid R): the copies of nodes of R ranks, the nodes the run forwards over.
    infos.back().copies = netCopies(s, opt.hybrid > 0 ? opt.hybrid : ranksPerNode, timed.back(), opt);
  }
  const uint64_t timedData = opt.seed * 3 + 1, checkData = opt.seed * 3 + 2;
  if (opt.algo == Algo::HighThroughput) {
    rep.printConditions(s, infos);
    rep.printNetFloor(infos, ranksPerNode);
  }
  if (!fp8) rep.note("hidden is not a multiple of 128: FP8 dispatch not measured");
  if (mp && n > nDev && !opt.collectives()) {
    cudaDeviceProp p{};
    BENCH_CUDA(cudaGetDeviceProperties(&p, 0));
    const int perGpu = (n + nDev - 1) / nDev;
    for (int sms : opt.sms) {
      if (sms == 0)
        rep.note("SM budget 0 (analytic) sizes each rank's kernels as if the GPU were its own; " + std::to_string(perGpu) +
                 " ranks share each GPU here");
      else if (sms * perGpu > p.multiProcessorCount)
        rep.note("SM budget " + std::to_string(sms) + " x " + std::to_string(perGpu) + " ranks per GPU = " +
                 std::to_string(sms * perGpu) + " CTAs > " + std::to_string(p.multiProcessorCount) +
                 " SMs: kernels that need all their CTAs resident at once may stall");
    }
  }

  // --host-sync wins over EPX_HOST_SYNC (which MultiGpu applies): the same flag set once.
  if (!opt.hostSync.empty()) ::setenv("EPX_HOST_SYNC", opt.hostSync.c_str(), 1);
  std::unique_ptr<epx::testing::MultiGpu> mgp;
  try {
    mgp = mp ? std::make_unique<epx::testing::MultiGpu>(mpe) : std::make_unique<epx::testing::MultiGpu>(n);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "epx-bench: cannot set up the ranks: %s\n", ex.what());
    return 2;
  }
  epx::testing::MultiGpu& mg = *mgp;
  if (opt.lowLatency()) return runLowLatency(opt, mg, n, ranksPerNode, printer);
  if (opt.algo == Algo::Engram) return runEngram(opt, mg, n, ranksPerNode, printer);
  if (opt.collectives()) return runCollectives(opt, mg, n, printer);
  std::vector<bool> local(size_t(n), false);
  for (int r : mg.localRanks()) local[size_t(r)] = true;
  // Per-rank value of the local ranks, completed with the other processes' (collective).
  auto gather = [&](const std::function<double(int)>& value) {
    std::vector<double> v(size_t(n), 0.0);
    for (int r : mg.localRanks()) v[size_t(r)] = value(r);
    return mg.gatherPerRank(v);
  };
  auto ranksWhere = [&](const std::vector<double>& v) {
    std::vector<int> out;
    for (int r = 0; r < n; ++r)
      if (v[size_t(r)] != 0) out.push_back(r);
    return out;
  };
  bool failed = false;

  // 1. NVLink peer-copy ceiling with the remote bytes of the first routing's BF16 dispatch.
  if (opt.ceiling && mp) {
    rep.note("NVLink peer-copy ceiling skipped: the ranks are separate processes on separate NCCL nodes (fake nodes),");
    rep.note("  with no NVLink peer path between them (LB% not computed); the NCCL all-to-all still runs, through the net plugin");
  } else if (opt.ceiling && n < 2) {
    rep.note("NVLink peer-copy ceiling skipped: 1 rank has no peer");
  } else if (opt.ceiling) {
    std::vector<size_t> bytes(size_t(n) * n, 0);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) bytes[size_t(a) * n + b] = size_t(infos[0].traffic.at(a, b)) * size_t(s.hidden) * 2;
    CeilingShared shared(n);
    std::vector<CeilingRankResult> cr(n);
    mg.run([&](const epx::testing::RankContext& ctx) {
      cr[ctx.rank] = runCeiling(ctx, bytes, kCeilingFewCtas, std::max(opt.iters, 20), shared);
    });
    CeilingSummary c;
    c.measured = true;
    c.p2p = cr[0].p2p;
    c.smFew = cr[0].smFew;
    c.smAll = cr[0].smAll;
    for (const auto& r : cr) {
      c.bytesPerRank += r.outBytes / n;
      c.ceUs = std::max(c.ceUs, r.copyEngineUs);
      c.smFewUs = std::max(c.smFewUs, r.smFewUs);
      c.smAllUs = std::max(c.smAllUs, r.smAllUs);
      c.smAll = std::min(c.smAll, r.smAll);
    }
    for (auto& info : infos)
      info.lowerBoundUs = c.bestGBps() > 0 ? info.maxRemoteBytes16 / (c.bestGBps() * 1e3) : 0.0;
    rep.printCeiling(c, infos);
  }

  // 2. NCCL all-to-all dispatcher.
  std::vector<BaselineSummary> base(infos.size());
  if (opt.baseline) {
    rep.printBaselineHeader();
    for (size_t i = 0; i < infos.size(); ++i) {
      std::vector<BaselineRankResult> br(n);
      mg.run([&](const epx::testing::RankContext& ctx) {
        br[ctx.rank] = runBaseline(ctx, s, timed[i][ctx.rank], opt, timedData);
      });
      BaselineSummary& b = base[i];
      b.measured = true;
      const auto disp = gather([&](int r) { return br[r].dispatchUs; });
      const auto d8 = gather([&](int r) { return br[r].fp8DispatchUs; });
      const auto comb = gather([&](int r) { return br[r].combineUs; });
      const auto checked = gather([&](int r) { return br[r].checked ? 1.0 : 0.0; });
      const auto bad = gather([&](int r) { return br[r].ok ? 0.0 : 1.0; });
      for (int r = 0; r < n; ++r) {
        b.dispUs = std::max(b.dispUs, disp[r]);
        b.fp8Us = std::max(b.fp8Us, d8[r]);
        b.combUs = std::max(b.combUs, comb[r]);
        b.checked = b.checked || checked[r] != 0;
      }
      for (int r : mg.localRanks())
        if (!br[r].ok) {
          if (b.msg.empty()) b.msg = br[r].checkMsg;
          if (!printer) std::fprintf(stderr, "epx-bench: baseline check FAILED: %s\n", br[r].checkMsg.c_str());
        }
      const auto badRanks = ranksWhere(bad);
      if (!badRanks.empty()) {
        b.ok = false;
        if (b.msg.empty()) b.msg = "rank(s) " + rankList(badRanks) + " (see their logs)";
        else if (mp) b.msg += " [failing ranks: " + rankList(badRanks) + "]";
      }
      failed = failed || !b.ok;
      rep.printBaseline(infos[i], b);
    }
  }

  // 3. epx, per SM budget x layout x mode x routing.
  // GIN traffic per call: read from epx's GIN plugin when every process holds one rank (fake
  // nodes); decided collectively, since reading it runs extra calls on every rank.
  std::unique_ptr<GinStatsReader> ginReader;
  bool ginOn = false;
  if (mp && mg.localRanks().size() == 1) {
    ginReader = std::make_unique<GinStatsReader>();
    const auto missing = gather([&](int) { return ginReader->available() ? 0.0 : 1.0; });
    ginOn = ranksWhere(missing).empty();
    if (!ginOn) rep.note("GIN traffic per call not reported: " + (ginReader->available() ? std::string("not on every rank") : ginReader->why()));
  }
  rep.printEpxHeader();
  for (int sms : opt.sms) {
    std::vector<ncclEpGroup_t> groups(n, nullptr);
    std::vector<int> usedLocal(n, 0);
    mg.run([&](const epx::testing::RankContext& ctx) {
      groups[ctx.rank] = createGroup(ctx, s, sms, fp8, opt.hybrid);
      BENCH_EP(ncclEpGroupGetSmCount(groups[ctx.rank], &usedLocal[ctx.rank]));
    });
    const auto used = gather([&](int r) { return double(usedLocal[r]); });
    for (int layout : opt.layouts) {
      // Memory floor of this layout's local rows with the group's CTA count, per routing.
      std::vector<MemFloorSummary> floors(infos.size());
      if (opt.memFloor)
        for (size_t i = 0; i < infos.size(); ++i) {
          std::vector<MemFloorTimes> ft(n);
          mg.run([&](const epx::testing::RankContext& ctx) {
            const MemFloorWork w = memFloorWork(s, timed[i], ctx.rank, layout == ncclEpLayoutExpanded);
            ft[ctx.rank] = runMemFloor(ctx, w, usedLocal[ctx.rank], std::max(opt.iters, 20));
          });
          MemFloorSummary& f = floors[i];
          f.measured = true;
          f.t.ctas = int(used[0]);
          const auto bytes = gather([&](int r) { return ft[r].bytes; });
          const auto ce = gather([&](int r) { return ft[r].ceUs; });
          const auto copy = gather([&](int r) { return ft[r].copySmUs; });
          const auto sum = gather([&](int r) { return ft[r].sumSmUs; });
          for (int r = 0; r < n; ++r) {
            f.t.bytes += bytes[r] / n;
            f.t.ceUs = std::max(f.t.ceUs, ce[r]);
            f.t.copySmUs = std::max(f.t.copySmUs, copy[r]);
            f.t.sumSmUs = std::max(f.t.sumSmUs, sum[r]);
          }
        }
      // Window (zero-copy) buffers exist for the deduplicated layout only.
      const std::vector<int> bufferModes = layout == ncclEpLayoutDeduplicated ? opt.buffers : std::vector<int>{0};
      for (int window : bufferModes) {
        for (int mode : opt.modes) {
          EpxRunSpec spec;
          spec.layout = layout;
          spec.mode = mode;
          spec.align = layout == ncclEpLayoutExpanded ? opt.align : 1;
          spec.window = window != 0;
          spec.fp8 = fp8;
          spec.forwardNodeSize = opt.hybrid;
          std::vector<ncclEpHandle_t> handles(n, nullptr);
          mg.run([&](const epx::testing::RankContext& ctx) { handles[ctx.rank] = createHandle(groups[ctx.rank], spec); });
          for (size_t i = 0; i < infos.size(); ++i) {
            std::vector<std::unique_ptr<EpxRank>> ranks(n);
            std::vector<EpxTimes> times(n);
            std::vector<EpxCapture> caps(n);
            std::vector<std::string> asyncErr(n);
            // Timed loop, then (all ranks idle again) the check run.
            mg.run([&](const epx::testing::RankContext& ctx) {
              const int r = ctx.rank;
              ranks[r] = std::make_unique<EpxRank>(groups[r], handles[r], s, spec, opt);
              times[r] = ranks[r]->timed(ctx, timed[i][r], timedData);
            });
            std::vector<EpxGinCalls> gin(n);
            if (ginOn)
              mg.run([&](const epx::testing::RankContext& ctx) {
                gin[ctx.rank] = ranks[ctx.rank]->ginPerCall(ctx, *ginReader);
              });
            if (opt.check)
              mg.run([&](const epx::testing::RankContext& ctx) {
                caps[ctx.rank] = ranks[ctx.rank]->check(ctx, check[i][ctx.rank], checkData);
              });
            mg.run([&](const epx::testing::RankContext& ctx) {
              const int r = ctx.rank;
              ranks[r].reset();
              ncclResult_t ae = ncclSuccess;
              char msg[512] = {0};
              BENCH_EP(ncclEpGroupGetAsyncError(groups[r], &ae, msg, sizeof(msg)));
              if (ae != ncclSuccess) asyncErr[r] = std::string(ncclGetErrorString(ae)) + ": " + msg;
            });
            CheckResult cres;
            if (opt.check) cres = checkEpx(s, spec, check[i], caps, checkData, local);
            const auto layoutUs = gather([&](int r) { return times[r].layoutUs; });
            const auto bf16Us = gather([&](int r) { return times[r].bf16Us; });
            const auto fp8Us = gather([&](int r) { return times[r].fp8Us; });
            const auto combUs = gather([&](int r) { return times[r].combineUs; });
            const auto asyncBad = gather([&](int r) { return asyncErr[r].empty() ? 0.0 : 1.0; });
            const auto checkBad = gather([&](int) { return cres.ok ? 0.0 : 1.0; });
            EpxRow row;
            row.kind = infos[i].kind;
            row.layout = layout;
            row.mode = mode;
            row.align = spec.align;
            row.window = spec.window;
            row.smsReq = sms;
            row.smsUsed = int(used[0]);
            row.fp8 = fp8;
            std::string problems;
            for (int r = 0; r < n; ++r) {
              row.layoutUs = std::max(row.layoutUs, layoutUs[r]);
              row.bf16Us = std::max(row.bf16Us, bf16Us[r]);
              row.fp8Us = std::max(row.fp8Us, fp8Us[r]);
              row.combUs = std::max(row.combUs, combUs[r]);
              if (used[r] != used[0]) problems = "ranks report different SM counts; ";
              if (asyncBad[r] != 0)
                problems += "rank " + std::to_string(r) + " async error: " +
                            (local[r] ? asyncErr[r] : std::string("(see its log)")) + "; ";
            }
            if (!cres.ok) problems += cres.msg;
            const auto badChecks = ranksWhere(checkBad);
            if (mp && !badChecks.empty()) problems += " [check failed on rank(s) " + rankList(badChecks) + "]";
            if (!printer)
              for (int r : mg.localRanks())
                if (!asyncErr[r].empty() || !cres.ok)
                  std::fprintf(stderr, "epx-bench: rank %d: %s %s: %s%s\n", r, routingName(row.kind), modeName(mode),
                               asyncErr[r].c_str(), cres.msg.c_str());
            row.checked = opt.check || !problems.empty();
            row.ok = problems.empty();
            row.msg = problems;
            failed = failed || !row.ok;
            rep.printEpx(row, infos[i], opt.baseline ? &base[i] : nullptr);
            rep.printMemFloor(row, floors[i]);
            if (ginOn) rep.printGin(ginSummary(gin, times, infos[i].wire, s, ranksPerNode, gather));
          }
          mg.run([&](const epx::testing::RankContext& ctx) { BENCH_EP(ncclEpHandleDestroy(handles[ctx.rank])); });
        }
      }
    }
    mg.run([&](const epx::testing::RankContext& ctx) { BENCH_EP(ncclEpGroupDestroy(groups[ctx.rank])); });
  }

  if (printer)
    std::printf("# result: %s\n", failed ? "FAILED (see the lines above)" : opt.check ? "all checks OK" : "not checked");
  else
    std::printf("epx-bench: rank %d: %s\n", mpe.rank, failed ? "FAILED (see rank 0's table and the lines above)" : "OK");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace epxbench

int main(int argc, char** argv) {
  epx::testing::installStackDump();  // SIGUSR1: main-thread stack to stderr (fake-nodes.sh at its time limit)
  const epxbench::Options opt = epxbench::parseArgs(argc, argv);
  try {
    return epxbench::run(opt);
  } catch (const std::exception& ex) {
    std::fflush(stdout);
    std::fprintf(stderr, "epx-bench: error: %s\n", ex.what());
    return 2;
  }
}
