#include "ll_bench.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "epx/ep_ll.h"
#include "epx/ref/ll_ref.h"
#include "gin_report.h"

namespace epxbench {

namespace {

constexpr int kMetaBytes = 16;  // LL message meta (ll_layout.h kLlMetaBytes)

// Row bytes of one LL dispatch message on the wire (payload, FP8 scales rounded to 16, meta).
double msgBytes(int hidden, bool fp8) {
  const int scales = fp8 ? (hidden / 128 * 4 + 15) / 16 * 16 : 0;
  return double(hidden) * (fp8 ? 1 : 2) + scales + kMetaBytes;
}

// Uniform routing: top-k distinct experts per token (the same in every process).
std::vector<epx::ref::LlRouting> makeRouting(int nRanks, int T, int K, int E, unsigned long long seed) {
  std::vector<epx::ref::LlRouting> all(static_cast<size_t>(nRanks));
  std::mt19937_64 rng(seed);
  for (auto& r : all) {
    r.numTokens = T;
    r.topkIdx.resize(size_t(T) * K);
    std::vector<int> perm(static_cast<size_t>(E), 0);
    for (int t = 0; t < T; ++t) {
      for (int e = 0; e < E; ++e) perm[size_t(e)] = e;
      for (int k = 0; k < K; ++k) {
        std::swap(perm[size_t(k)], perm[size_t(k + int(rng() % uint64_t(E - k)))]);
        r.topkIdx[size_t(t) * K + k] = perm[size_t(k)];
      }
    }
  }
  return all;
}

// Most (token, expert) rows any rank sends to or receives from ranks on other nodes.
double maxNetRows(const std::vector<epx::ref::LlRouting>& all, int K, int E, int nRanks, int ranksPerNode) {
  const int Le = E / nRanks;
  std::vector<double> out(size_t(nRanks), 0), in(size_t(nRanks), 0);
  for (int s = 0; s < nRanks; ++s)
    for (int64_t e : all[size_t(s)].topkIdx) {
      const int d = int(e) / Le;
      if (e >= 0 && s / ranksPerNode != d / ranksPerNode) {
        out[size_t(s)] += 1;
        in[size_t(d)] += 1;
      }
    }
  (void)K;
  double m = 0;
  for (int r = 0; r < nRanks; ++r) m = std::max({m, out[size_t(r)], in[size_t(r)]});
  return m;
}

// GIN operations one call posts on the busiest rank (what ll_dispatch.cu / ll_combine.cu post):
// dispatch, per destination rank on another node, one put-with-signal of its header and rows;
// combine (staged, not zero-copy), per source rank on another node, one put-with-signal of its rows
// (a bare signal when none).
struct GinOps {
  double dispatch = 0, combine = 0;
};
GinOps ginOps(const std::vector<epx::ref::LlRouting>& all, int K, int E, int nRanks, int ranksPerNode) {
  GinOps g;
  for (int r = 0; r < nRanks; ++r) {
    double disp = 0, comb = 0;
    for (int d = 0; d < nRanks; ++d) {
      if (d / ranksPerNode == r / ranksPerNode) continue;
      disp += 1;  // header + rows, put-with-signal
      comb += 1;  // rows, put-with-signal
    }
    g.dispatch = std::max(g.dispatch, disp);
    g.combine = std::max(g.combine, comb);
  }
  (void)K;
  return g;
}

struct Times {
  double disp = 0, send = 0, recv = 0, comb = 0, csend = 0, crecv = 0;
  bool countsOk = true;
};

}  // namespace

// With a 0-token line and a network floor: what each call costs over the 0-token call of its dtype
// (the protocol's and the test rig's fixed cost per call: headers, signals and the rig's
// per-operation latency, no rows), against the floor of its rows. On the one-GPU rig that fixed
// cost is mostly the rig's (docs/low-latency.md, "The rig's own floor"), so this is what epx adds
// for the data.
template <class Line>
void printOverFixedCost(const std::vector<Line>& lines) {
  const Line* zero[2] = {nullptr, nullptr};
  for (const Line& l : lines)
    if (l.tokens == 0) zero[l.fp8] = &l;
  bool any = false;
  for (const Line& l : lines) {
    const Line* z = zero[l.fp8];
    if (!z || l.tokens == 0 || l.floorD <= 0 || l.floorC <= 0) continue;
    if (!any)
      std::printf("# over the 0-token call (the fixed cost per call, no rows) against the rows' floor:\n"
                  "%7s %5s %9s %7s %9s %7s\n", "tokens", "dtype", "D-0_us", "D-0/flr", "C-0_us", "C-0/flr");
    any = true;
    const double d = l.disp - z->disp, cm = l.comb - z->comb;
    std::printf("%7d %5s %9.1f %7.2f %9.1f %7.2f\n", l.tokens, l.fp8 ? "fp8" : "bf16", d, d / l.floorD, cm, cm / l.floorC);
  }
}

int runLowLatency(const Options& opt, epx::testing::MultiGpu& mg, int n, int ranksPerNode, bool printer) {
  const int maxT = std::max(1, *std::max_element(opt.llTokens.begin(), opt.llTokens.end()));
  const int H = opt.hidden, K = opt.topk, E = opt.experts, Le = E / n, rowsPer = n * maxT;
  const int sms = opt.sms.empty() ? 0 : opt.sms[0];
  if (printer) {
    std::printf("# low-latency (ncclEpAlgoLowLatency): %d ranks, %d per node, hidden %d, top-%d of %d experts, SM budget %s\n",
                n, ranksPerNode, H, K, E, sms ? std::to_string(sms).c_str() : "analytic");
    if (opt.netGBps > 0)
      std::printf("# network floor: max LL message bytes to/from other nodes per rank / %.1f GB/s + %.1f us\n",
                  opt.netGBps, opt.netLatencyUs);
    std::printf("# per-selection GB/s = tokens x top-k x row bytes (BF16 2H, FP8 H + H/32) / us; halves timed back to back\n");
    std::printf("# ginD/ginC: GIN operations per dispatch/combine call on the busiest rank (0 inside one node)\n");
    std::printf("%7s %5s %9s %9s %9s %9s %9s %9s %10s %10s %10s %7s %10s %7s %6s %6s %6s\n", "tokens", "dtype",
                "disp_us", "send_us", "recv_us", "comb_us", "csend_us", "crecv_us", "disp_GB/s", "comb_GB/s", "floorD_us",
                "D/flr", "floorC_us", "C/flr", "ginD", "ginC", "check");
  }
  GinLatencyReport gin(mg, printer);  // the `# gin` lines (fake nodes with epx's plugin)
  std::vector<ncclEpGroup_t> groups(size_t(n), nullptr);
  mg.run([&](const epx::testing::RankContext& c) {
    ncclEpConfig_t cfg = NCCL_EP_CONFIG_INITIALIZER;
    cfg.algorithm = ncclEpAlgoLowLatency;
    cfg.maxTokensPerRank = maxT;
    cfg.hidden = H;
    cfg.topk = K;
    cfg.numExperts = E;
    cfg.fp8Dispatch = 1;
    if (sms > 0) cfg.smBudget = sms;
    BENCH_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[size_t(c.rank)]));
  });
  int rc = 0;
  // Per (tokens, dtype) line: dispatch / combine µs and their floors, for the summary over the
  // 0-token call (the rig's fixed cost per call) after the table.
  struct Line {
    int tokens, fp8;
    double disp, comb, floorD, floorC;
  };
  std::vector<Line> lines;
  for (int T : opt.llTokens)
    for (int fp8 : {0, 1}) {
      const auto routing = makeRouting(n, T, K, E, opt.seed * 131 + uint64_t(T));
      std::vector<Times> times(static_cast<size_t>(n));
      mg.run([&](const epx::testing::RankContext& c) {
        const size_t rows = size_t(Le) * rowsPer;
        DevBuf x(size_t(std::max(T, 1)) * H * 2), ids(size_t(std::max(T, 1)) * K * 8), w(size_t(std::max(T, 1)) * K * 4);
        DevBuf recvX(rows * H * 2), recvScales(rows * (H / 128) * 4), count(size_t(Le) * 4), combIn(rows * H * 2),
            out(size_t(std::max(T, 1)) * H * 2);
        const auto& rt = routing[size_t(c.rank)];
        std::vector<uint16_t> hx(size_t(T) * H);
        std::mt19937 rng(unsigned(c.rank * 7 + T));
        for (auto& v : hx) v = uint16_t(0x3c00 + rng() % 0x400);  // BF16 in [0.0078, 0.0156) * 2^k-ish, finite
        std::vector<float> hw(size_t(T) * K, 1.f / float(K));
        if (T) {
          BENCH_CUDA(cudaMemcpy(x.get(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
          BENCH_CUDA(cudaMemcpy(ids.get(), rt.topkIdx.data(), rt.topkIdx.size() * 8, cudaMemcpyHostToDevice));
          BENCH_CUDA(cudaMemcpy(w.get(), hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
        }
        BENCH_CUDA(cudaMemset(combIn.get(), 0, combIn.bytes()));
        // The copies above run on the legacy stream, which the ranks' non-blocking streams do not wait
        // for (a pageable cudaMemcpy may even return before its DMA lands).
        BENCH_CUDA(cudaDeviceSynchronize());
        ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
        ncclEpHandle_t h = nullptr;
        BENCH_EP(ncclEpHandleCreate(groups[size_t(c.rank)], &hc, &h));
        ncclEpLowLatencyDispatchInputs_t din{x.get(), ids.get(), ncclInt64, T, fp8, 0};
        ncclEpLowLatencyDispatchOutputs_t dout{recvX.get(), fp8 ? recvScales.as<float>() : nullptr, count.as<int32_t>(), nullptr};
        ncclEpLowLatencyCombineInputs_t cin{combIn.get(), w.as<float>()};
        ncclEpLowLatencyCombineOutputs_t cout{out.get()};
        EventSeq ev(9);
        std::vector<double> disp, send, recv, comb, csend, crecv;
        const SyncStart syncStart(opt.syncStart);
        gin.start(c);
        for (int i = 0; i < opt.warmup + opt.iters; ++i) {
          syncStart(c.comm, c.stream);
          ev.record(0, c.stream);
          BENCH_EP(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream));
          ev.record(1, c.stream);
          BENCH_EP(ncclEpLowLatencyCombine(h, &cin, &cout, NCCL_EP_LL_SEND_RECV, c.stream));
          ev.record(2, c.stream);
          BENCH_EP(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND, c.stream));
          ev.record(3, c.stream);
          BENCH_EP(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_RECV, c.stream));
          ev.record(4, c.stream);
          BENCH_EP(ncclEpLowLatencyCombine(h, &cin, &cout, NCCL_EP_LL_SEND, c.stream));
          ev.record(5, c.stream);
          BENCH_EP(ncclEpLowLatencyCombine(h, &cin, &cout, NCCL_EP_LL_RECV, c.stream));
          ev.record(6, c.stream);
          BENCH_CUDA(cudaStreamSynchronize(c.stream));
          if (i < opt.warmup) continue;
          disp.push_back(ev.us(0, 1));
          comb.push_back(ev.us(1, 2));
          send.push_back(ev.us(2, 3));
          recv.push_back(ev.us(3, 4));
          csend.push_back(ev.us(4, 5));
          crecv.push_back(ev.us(5, 6));
        }
        Times& t = times[size_t(c.rank)];
        t = Times{median(disp), median(send), median(recv), median(comb), median(csend), median(crecv), true};
        gin.stop(c);
        if (opt.check) {
          epx::ref::LlShape sh;
          sh.nRanks = n;
          sh.maxTokens = maxT;
          sh.hidden = H;
          sh.topk = K;
          sh.numExperts = E;
          const auto want = epx::ref::llDispatchRows(sh, routing, c.rank);
          std::vector<int32_t> got(static_cast<size_t>(Le));
          BENCH_CUDA(cudaMemcpy(got.data(), count.get(), size_t(Le) * 4, cudaMemcpyDeviceToHost));
          for (int le = 0; le < Le; ++le) t.countsOk = t.countsOk && got[size_t(le)] == int(want.rows[size_t(le)].size());
        }
        BENCH_EP(ncclEpHandleDestroy(h));
      });
      auto gather = [&](double Times::*f) {
        std::vector<double> v(size_t(n), 0);
        for (int r = 0; r < n; ++r) v[size_t(r)] = times[size_t(r)].*f;
        return maxOf(mg.gatherPerRank(v));  // the slowest rank
      };
      const double disp = gather(&Times::disp), send = gather(&Times::send), recv = gather(&Times::recv),
                   comb = gather(&Times::comb), csend = gather(&Times::csend), crecv = gather(&Times::crecv);
      std::vector<double> bad(size_t(n), 0);
      for (int r = 0; r < n; ++r) bad[size_t(r)] = times[size_t(r)].countsOk ? 0 : 1;
      const bool ok = maxOf(mg.gatherPerRank(bad)) == 0;
      if (!ok) rc = 1;
      const double sel = double(T) * K;
      const double dispBytes = sel * (fp8 ? H + H / 32.0 : 2.0 * H), combBytes = sel * 2.0 * H;
      double floorD = 0, floorC = 0;
      if (opt.netGBps > 0) {
        const double rowsNet = maxNetRows(routing, K, E, n, ranksPerNode);
        if (rowsNet > 0) {
          floorD = rowsNet * msgBytes(H, fp8) / (opt.netGBps * 1e3) + opt.netLatencyUs;
          floorC = rowsNet * 2.0 * H / (opt.netGBps * 1e3) + opt.netLatencyUs;
        }
      }
      const GinOps ops = ginOps(routing, K, E, n, ranksPerNode);
      if (printer)
        std::printf("%7d %5s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %10.1f %10.1f %7.2f %10.1f %7.2f %6.0f %6.0f %6s\n",
                    T, fp8 ? "fp8" : "bf16", disp, send, recv, comb, csend, crecv, gbps(dispBytes, disp),
                    gbps(combBytes, comb), floorD, floorD > 0 ? disp / floorD : 0.0, floorC,
                    floorC > 0 ? comb / floorC : 0.0, ops.dispatch, ops.combine, opt.check ? (ok ? "ok" : "FAIL") : "-");
      char label[32];
      std::snprintf(label, sizeof(label), "%5d %5s", T, fp8 ? "fp8" : "bf16");
      gin.print(label);
      std::fflush(stdout);
      lines.push_back(Line{T, fp8, disp, comb, floorD, floorC});
    }
  if (printer) printOverFixedCost(lines);
  mg.run([&](const epx::testing::RankContext& c) { BENCH_EP(ncclEpGroupDestroy(groups[size_t(c.rank)])); });
  return rc;
}

}  // namespace epxbench
