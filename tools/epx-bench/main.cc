// epx-bench: times epx EP dispatch/combine on the local GPUs (one thread and one NCCL communicator
// per GPU) against a plain NCCL all-to-all dispatcher and the NVLink peer-copy ceiling measured in
// the same run, and checks every configuration against the CPU reference. See docs/bench.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "baseline.h"
#include "check.h"
#include "common.h"
#include "epx/testing/multigpu.h"
#include "epx_runner.h"
#include "peer_copy.h"
#include "report.h"
#include "routing.h"

namespace epxbench {
namespace {

constexpr int kMaxRanks = 8;        // one NVLink domain in this release
constexpr int kCeilingFewCtas = 24;

RoutingInfo describe(RoutingKind kind, const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing) {
  RoutingInfo info{kind, routingDescription(kind, s), trafficOf(s, routing), {}, {}, {}, 0, 0};
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

int run(const Options& opt) {
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
    return 0;
  }
  if (nDev == 1) {
    std::printf("epx-bench: found 1 CUDA GPU; expert-parallel dispatch/combine needs >= 2 GPUs; nothing to run\n");
    return 0;
  }
  int n = opt.gpus ? opt.gpus : std::min(nDev, kMaxRanks);
  if (n < 2 || n > nDev || n > kMaxRanks) {
    std::fprintf(stderr, "epx-bench: --gpus %d: need 2..%d and at most the %d local GPUs\n", n, kMaxRanks, nDev);
    return 2;
  }
  if (opt.experts % n) {
    std::fprintf(stderr, "epx-bench: --experts %d is not a multiple of the %d ranks\n", opt.experts, n);
    return 2;
  }
  const BenchShape s{n, opt.tokens, opt.hidden, opt.topk, opt.experts};
  const bool fp8 = s.hidden % 128 == 0;

  Report rep(opt);
  rep.printSystem(n);
  if (!opt.gpus && nDev > kMaxRanks)
    rep.note("using GPUs 0.." + std::to_string(kMaxRanks - 1) + " of " + std::to_string(nDev) + " (--gpus to choose)");

  // Routing: one draw for the timed loops, a fresh one for the correctness check.
  std::vector<std::vector<epx::ref::RankRouting>> timed, check;
  std::vector<RoutingInfo> infos;
  for (RoutingKind k : opt.routings) {
    timed.push_back(makeRouting(k, s, opt.seed));
    check.push_back(makeRouting(k, s, opt.seed + 7777));
    infos.push_back(describe(k, s, timed.back()));
  }
  const uint64_t timedData = opt.seed * 3 + 1, checkData = opt.seed * 3 + 2;
  rep.printConditions(s, infos);
  if (!fp8) rep.note("hidden is not a multiple of 128: FP8 dispatch not measured");

  epx::testing::MultiGpu mg(n);
  bool failed = false;

  // 1. NVLink peer-copy ceiling with the remote bytes of the first routing's BF16 dispatch.
  if (opt.ceiling) {
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
      for (const auto& r : br) {
        b.dispUs = std::max(b.dispUs, r.dispatchUs);
        b.fp8Us = std::max(b.fp8Us, r.fp8DispatchUs);
        b.combUs = std::max(b.combUs, r.combineUs);
        b.checked = b.checked || r.checked;
        if (!r.ok) {
          b.ok = false;
          if (b.msg.empty()) b.msg = r.checkMsg;
        }
      }
      failed = failed || !b.ok;
      rep.printBaseline(infos[i], b);
    }
  }

  // 3. epx, per SM budget x layout x mode x routing.
  rep.printEpxHeader();
  for (int sms : opt.sms) {
    std::vector<ncclEpGroup_t> groups(n, nullptr);
    std::vector<int> used(n, 0);
    mg.run([&](const epx::testing::RankContext& ctx) {
      groups[ctx.rank] = createGroup(ctx, s, sms, fp8);
      BENCH_EP(ncclEpGroupGetSmCount(groups[ctx.rank], &used[ctx.rank]));
    });
    for (int layout : opt.layouts) {
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
            EpxRow row;
            row.kind = infos[i].kind;
            row.layout = layout;
            row.mode = mode;
            row.align = spec.align;
            row.window = spec.window;
            row.smsReq = sms;
            row.smsUsed = used[0];
            row.fp8 = fp8;
            std::string problems;
            for (int r = 0; r < n; ++r) {
              row.layoutUs = std::max(row.layoutUs, times[r].layoutUs);
              row.bf16Us = std::max(row.bf16Us, times[r].bf16Us);
              row.fp8Us = std::max(row.fp8Us, times[r].fp8Us);
              row.combUs = std::max(row.combUs, times[r].combineUs);
              if (used[r] != used[0]) problems = "ranks report different SM counts; ";
              if (!asyncErr[r].empty()) problems += "rank " + std::to_string(r) + " async error: " + asyncErr[r] + "; ";
            }
            if (opt.check) {
              const CheckResult cres = checkEpx(s, spec, check[i], caps, checkData);
              if (!cres.ok) problems += cres.msg;
            }
            row.checked = opt.check || !problems.empty();
            row.ok = problems.empty();
            row.msg = problems;
            failed = failed || !row.ok;
            rep.printEpx(row, infos[i], opt.baseline ? &base[i] : nullptr);
          }
          mg.run([&](const epx::testing::RankContext& ctx) { BENCH_EP(ncclEpHandleDestroy(handles[ctx.rank])); });
        }
      }
    }
    mg.run([&](const epx::testing::RankContext& ctx) { BENCH_EP(ncclEpGroupDestroy(groups[ctx.rank])); });
  }

  std::printf("# result: %s\n", failed ? "FAILED (see the lines above)" : opt.check ? "all checks OK" : "not checked");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace epxbench

int main(int argc, char** argv) {
  const epxbench::Options opt = epxbench::parseArgs(argc, argv);
  try {
    return epxbench::run(opt);
  } catch (const std::exception& ex) {
    std::fflush(stdout);
    std::fprintf(stderr, "epx-bench: error: %s\n", ex.what());
    return 2;
  }
}
