// epx-bench output (see report.h).
#include "report.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "common.h"

namespace epxbench {

namespace {

const char* checkText(bool checked, bool ok) { return !checked ? "-" : ok ? "OK" : "FAILED"; }

std::string ncclVersionText(int code) {
  // NCCL >= 2.9: code = major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

double ratio(double base, double ours) { return ours > 0 && base > 0 ? base / ours : 0.0; }

// dedup-win (window, zero-copy), dedup-usr (own buffers), exp-a<alignment>.
std::string layoutLabel(const EpxRow& row) {
  if (row.layout == 0) return "exp-a" + std::to_string(row.align);
  return row.window ? "dedup-win" : "dedup-usr";
}

}  // namespace

double CeilingSummary::ceGBps() const { return gbps(bytesPerRank, ceUs); }
double CeilingSummary::smFewGBps() const { return gbps(bytesPerRank, smFewUs); }
double CeilingSummary::smAllGBps() const { return gbps(bytesPerRank, smAllUs); }
double CeilingSummary::bestGBps() const { return std::max({ceGBps(), smFewGBps(), smAllGBps()}); }

Report::Report(const Options& opt, bool printer) : opt_(opt), printer_(printer) {
  floorCols_ = opt.netGBps > 0;
  if (printer && !opt.csv.empty()) {
    csv_ = std::fopen(opt.csv.c_str(), "w");
    if (!csv_) {
      std::fprintf(stderr, "epx-bench: cannot write %s\n", opt.csv.c_str());
      std::exit(2);
    }
    std::fprintf(csv_,
                 "section,routing,layout,mode,sms_req,sms_used,op,time_us,logical_GBps,nvlink_GBps,"
                 "baseline_us,speedup,check,net_floor_us,time_over_floor\n");
  }
}

Report::~Report() {
  if (csv_) std::fclose(csv_);
}

void Report::note(const std::string& line) {
  if (printer_) std::printf("# %s\n", line.c_str());
}

static_assert(kEpxVersionCode == EPX_VERSION_CODE, "args.h kEpxVersionCode must mirror epx/ep.h");
static_assert(kMaxSmBudget == NCCL_EP_MAX_SM_BUDGET, "args.h kMaxSmBudget must mirror epx/ep.h");

void Report::printSystem(const Placement& pl) {
  if (!printer_) return;
  int rt = 0;
  BENCH_NCCL(ncclGetVersion(&rt));
  std::printf("# epx-bench: epx %s: ncclEp against NCCL's own calls and the floor of the mode run (docs/bench.md)\n",
              epxVersionText().c_str());
  std::printf("# NCCL: headers %s, runtime %s\n", ncclVersionText(NCCL_VERSION_CODE).c_str(),
              ncclVersionText(rt).c_str());
  if (pl.multiProcess)
    std::printf("# ranks: %d, one process and one NCCL communicator each, %d rank(s) per NCCL node (%d node(s)); "
                "rank r on GPU r %% %d\n",
                pl.nRanks, pl.ranksPerNode, (pl.nRanks + pl.ranksPerNode - 1) / pl.ranksPerNode, pl.nDev);
  else
    std::printf("# GPUs: %d rank(s), one thread and one NCCL communicator each\n", pl.nRanks);
  const int shown = pl.multiProcess ? std::min(pl.nRanks, pl.nDev) : pl.nRanks;
  for (int d = 0; d < shown; ++d) {
    cudaDeviceProp p{};
    BENCH_CUDA(cudaGetDeviceProperties(&p, d));
    char bus[32] = {0};
    BENCH_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), d));
    std::string who = "rank " + std::to_string(d);
    if (pl.multiProcess && pl.nRanks > pl.nDev) {
      const int k = (pl.nRanks - d + pl.nDev - 1) / pl.nDev;
      who = "ranks " + std::to_string(d) + (k > 1 ? ", " + std::to_string(d + pl.nDev) : std::string()) +
            (k > 2 ? ", ..." : "") + " (" + std::to_string(k) + ")";
    }
    std::printf("#   %s: GPU %d %s, %d SMs, %.0f GiB, PCI %s\n", who.c_str(), d, p.name, p.multiProcessorCount,
                double(p.totalGlobalMem) / (1024.0 * 1024 * 1024), bus);
  }
}

void Report::printNetFloor(const std::vector<RoutingInfo>& routings, int ranksPerNode) {
  if (!printer_ || !floorCols_) return;
  std::printf("# network floor: NIC %.1f GB/s per direction per rank, %.1f us one-way latency (EPX_GIN_EMU_GBPS /\n"
              "#   EPX_GIN_EMU_LATENCY_US or --net-gbps / --net-latency-us); rows between ranks on different nodes\n"
              "#   (%d rank(s) per node), max over ranks of max(bytes out, bytes in), payload only; floor = bytes /\n"
              "#   rate + latency. The epx table's last columns are time / floor (x).%s\n",
              opt_.netGBps, opt_.netLatencyUs, ranksPerNode,
              opt_.hybrid > 0 ? "\n#   --hybrid: the rows of both hops, source -> the rank on its rail of each other node (once\n"
                                "#   per token), that rank -> the other ranks of its node needing it, and the own node's rows"
                              : "");
  for (const auto& r : routings) {
    auto part = [&](const char* op, double bytes, double us) {
      std::printf("#   %-8s %-13s %9.2f MB -> floor %9.1f us\n", routingName(r.kind), op, bytes / 1e6, us);
    };
    part("BF16 dispatch", r.net.bytes16, r.net.us16);
    if (opt_.hidden % 128 == 0) part("FP8 dispatch", r.net.bytes8, r.net.us8);
    part("BF16 combine", r.net.bytesComb, r.net.usComb);
  }
  // What crossing the network once per destination node (hybrid mode) would save on this routing.
  std::printf("# network copies per token (tokens with an expert, all ranks): direct mode = distinct destination\n"
              "#   ranks on other nodes; once per node (hybrid mode) = distinct other destination nodes%s; the\n"
              "#   analytic ones are epxExpectedNetworkRows (uniform routing). Bytes per call: copies x row bytes x\n"
              "#   routed tokens; the GIN lines below count what the run put (hybrid on virtual nodes: the forward\n"
              "#   hop's puts too)\n",
              opt_.hybrid > 0 ? (" (--hybrid: nodes of " + std::to_string(opt_.hybrid) + (opt_.hybrid == 1 ? " rank)" : " ranks)")).c_str() : "");
  for (const auto& r : routings) {
    const NetCopies& c = r.copies;
    const std::string ratio = c.direct > 0 ? std::to_string(int(std::lround(100.0 * c.hybrid / c.direct))) + " %" : "none cross";
    std::printf("#   %-8s direct %.2f, once per node %.2f (%s); uniform routing, analytic: %.2f, %.2f\n", routingName(r.kind),
                c.direct, c.hybrid, ratio.c_str(), c.uniformDirect, c.uniformHybrid);
  }
  std::fflush(stdout);
}

void Report::printConditions(const BenchShape& s, const std::vector<RoutingInfo>& routings) {
  if (!printer_) return;
  std::printf("# shape: %d tokens per rank, hidden %d, top-%d, %d experts (%d per rank), top-k ids %s, FP32 gate weights\n",
              s.tokens, s.hidden, s.topk, s.experts, s.expertsPerRank(), opt_.idx64 ? "int64" : "int32");
  for (const auto& r : routings) {
    std::printf("# routing %s\n", r.description.c_str());
    int64_t maxRecv = 0, sumRecv = 0, sumRemote = 0;
    for (int d = 0; d < r.traffic.n; ++d) {
      maxRecv = std::max(maxRecv, r.traffic.recvRows(d));
      sumRecv += r.traffic.recvRows(d);
      sumRemote += r.traffic.remoteRecvRows(d);
    }
    const double meanRecv = double(sumRecv) / r.traffic.n;
    std::printf("#   received rows per rank (token, rank pairs): mean %.0f (%.1f%% from other ranks), max %lld (%.3fx mean)\n",
                meanRecv, sumRecv ? 100.0 * double(sumRemote) / double(sumRecv) : 0.0, (long long)maxRecv,
                meanRecv > 0 ? double(maxRecv) / meanRecv : 0.0);
    std::printf("#   BF16 dispatch bytes per rank: logical %.1f MB, over NVLink %.1f MB (max over ranks, in or out: %.1f MB)\n",
                r.bf16.logical / 1e6, r.bf16.nvlink / 1e6, r.maxRemoteBytes16 / 1e6);
  }
  std::printf("# timing: %d warm-up + %d timed iterations of [layout, BF16 dispatch, BF16 combine, FP8 dispatch];\n"
              "#   each op timed with CUDA events on the rank's stream, median over iterations per rank, then max over ranks%s\n",
              opt_.warmup, opt_.iters,
              opt_.syncStart ? ";\n#   --sync-start: each op starts after an untimed all-reduce of one value (ranks start together)" : "");
  std::printf("# logical GB/s: received (token, rank) rows incl. the rank's own tokens x bytes per row (BF16 %d B,\n"
              "#   FP8 %d B = H + H/128*4) / time; combine counts the BF16 dispatch bytes. NVLink GB/s: only rows\n"
              "#   from/to other ranks. Bytes are averaged over ranks; 1 GB = 1e9 B.\n",
              s.hidden * 2, s.hidden % 128 ? 0 : s.hidden + s.hidden / 128 * 4);
  std::fflush(stdout);
}

void Report::printCeiling(const CeilingSummary& c, const std::vector<RoutingInfo>& routings) {
  if (!printer_) return;
  std::printf("#\n# NVLink peer-copy ceiling: each rank copies the remote part of its BF16 dispatch (%s routing, %.1f MB\n"
              "#   per rank) to its peers, all ranks at once (both directions loaded); time per round, max over ranks\n",
              routings.empty() ? "-" : routingName(routings[0].kind), c.bytesPerRank / 1e6);
  std::printf("# %-22s %6s %10s %12s\n", "method", "CTAs", "time(us)", "GB/s/dir");
  std::printf("  %-22s %6s %10.1f %12.1f\n", "copy engine", "-", c.ceUs, c.ceGBps());
  if (c.p2p) {
    std::printf("  %-22s %6d %10.1f %12.1f\n", "SM stores", c.smFew, c.smFewUs, c.smFewGBps());
    std::printf("  %-22s %6d %10.1f %12.1f\n", "SM stores", c.smAll, c.smAllUs, c.smAllGBps());
  } else {
    std::printf("  SM stores: not measured (no peer access between all GPUs)\n");
  }
  for (const auto& r : routings)
    std::printf("# lower bound for BF16 dispatch, %s routing: %.1f MB at %.1f GB/s = %.1f us\n", routingName(r.kind),
                r.maxRemoteBytes16 / 1e6, c.bestGBps(), r.lowerBoundUs);
  if (csv_) {
    std::fprintf(csv_, "ceiling,,,,,,copy_engine,%.2f,,%.2f,,,,,\n", c.ceUs, c.ceGBps());
    if (c.p2p) {
      std::fprintf(csv_, "ceiling,,,,%d,%d,sm_stores,%.2f,,%.2f,,,,,\n", c.smFew, c.smFew, c.smFewUs, c.smFewGBps());
      std::fprintf(csv_, "ceiling,,,,%d,%d,sm_stores,%.2f,,%.2f,,,,,\n", c.smAll, c.smAll, c.smAllUs, c.smAllGBps());
    }
  }
  std::fflush(stdout);
}

void Report::printBaselineHeader() {
  if (!printer_) return;
  std::printf("#\n# NCCL all-to-all dispatcher: route + permute kernels, count exchange (grouped ncclSend/ncclRecv of\n"
              "#   ints) + stream sync, grouped ncclSend/ncclRecv of deduplicated rows; combine: grouped\n"
              "#   ncclSend/ncclRecv back + weighted unpermute (FP32 accumulation, BF16 out); identity expert\n");
  std::printf("# %-8s | %-29s | %-29s | %-29s |\n", "", "BF16 dispatch", "FP8 dispatch", "BF16 combine");
  std::printf("# %-8s | %9s %9s %9s | %9s %9s %9s | %9s %9s %9s | %s\n", "routing", "time(us)", "logic", "nvlink",
              "time(us)", "logic", "nvlink", "time(us)", "logic", "nvlink", "check");
  std::printf("# %-8s | %9s %9s %9s | %9s %9s %9s | %9s %9s %9s |\n", "", "", "(GB/s)", "(GB/s)", "", "(GB/s)",
              "(GB/s)", "", "(GB/s)", "(GB/s)");
}

void Report::printBaseline(const RoutingInfo& r, const BaselineSummary& b) {
  if (!printer_) return;
  auto cols = [&](double us, const OpBytes& by) {
    if (us <= 0) {
      std::printf(" %9s %9s %9s |", "n/a", "n/a", "n/a");
      return;
    }
    std::printf(" %9.1f %9.1f %9.1f |", us, gbps(by.logical, us), gbps(by.nvlink, us));
  };
  std::printf("  %-8s |", routingName(r.kind));
  cols(b.dispUs, r.bf16);
  cols(b.fp8Us, r.fp8);
  cols(b.combUs, r.combine);
  std::printf(" %s\n", checkText(b.checked, b.ok));
  if (b.checked && !b.ok) std::printf("#   baseline check FAILED: %s\n", b.msg.c_str());
  const char* chk = checkText(b.checked, b.ok);
  csvRow("nccl_a2a", routingName(r.kind), nullptr, "dispatch_bf16", b.dispUs, r.bf16, 0, chk);
  if (b.fp8Us > 0) csvRow("nccl_a2a", routingName(r.kind), nullptr, "dispatch_fp8", b.fp8Us, r.fp8, 0, chk);
  csvRow("nccl_a2a", routingName(r.kind), nullptr, "combine_bf16", b.combUs, r.combine, 0, chk);
  std::fflush(stdout);
}

void Report::printEpxHeader() {
  if (!printer_) return;
  std::printf("#\n# epx (speedup = NCCL all-to-all time / epx time, same routing; LB%% = lower bound / BF16 dispatch time;\n"
              "#   dedup-win: outputs in the group's window (zero-copy dispatch, pull combine), dedup-usr: own buffers)\n");
  if (floorCols_)
    std::printf("#   time / net floor: each op's time over its network floor (see above); check is the last column\n");
  std::printf("# %-8s %-9s %-8s %7s %8s | %-24s | %-24s | %-24s | %-20s | %5s |", "routing", "layout", "mode", "SMs",
              "layout", "BF16 dispatch", "FP8 dispatch", "BF16 combine", "speedup vs NCCL a2a", "");
  if (floorCols_) std::printf(" %-20s |", "time / net floor");
  std::printf("\n# %-8s %-9s %-8s %7s %8s | %8s %7s %7s | %8s %7s %7s | %8s %7s %7s | %6s %6s %6s | %5s |", "", "", "",
              "req/use", "time(us)", "time(us)", "logic", "nvlink", "time(us)", "logic", "nvlink", "time(us)", "logic",
              "nvlink", "bf16", "fp8", "comb", "LB%");
  if (floorCols_) std::printf(" %6s %6s %6s |", "bf16", "fp8", "comb");
  std::printf(" %s\n", "check");
  std::printf("# %-8s %-9s %-8s %7s %8s | %8s %7s %7s | %8s %7s %7s | %8s %7s %7s | %6s %6s %6s | %5s |", "", "", "", "",
              "", "", "(GB/s)", "(GB/s)", "", "(GB/s)", "(GB/s)", "", "(GB/s)", "(GB/s)", "(x)", "(x)", "(x)", "");
  if (floorCols_) std::printf(" %6s %6s %6s |", "(x)", "(x)", "(x)");
  std::printf("\n");
  std::fflush(stdout);
}

void Report::printEpx(const EpxRow& row, const RoutingInfo& r, const BaselineSummary* b) {
  if (!printer_) return;
  char sms[32];
  std::snprintf(sms, sizeof(sms), "%d/%d", row.smsReq, row.smsUsed);
  std::printf("  %-8s %-9s %-8s %7s %8.1f |", routingName(row.kind), layoutLabel(row).c_str(), modeName(row.mode), sms,
              row.layoutUs);
  auto cols = [&](double us, const OpBytes& by, bool have) {
    if (!have || us <= 0) {
      std::printf(" %8s %7s %7s |", "n/a", "n/a", "n/a");
      return;
    }
    std::printf(" %8.1f %7.1f %7.1f |", us, gbps(by.logical, us), gbps(by.nvlink, us));
  };
  cols(row.bf16Us, r.bf16, true);
  cols(row.fp8Us, r.fp8, row.fp8);
  cols(row.combUs, r.combine, true);
  auto sp = [&](double base, double ours) {
    const double x = ratio(base, ours);
    if (x > 0) std::printf(" %6.2f", x);
    else std::printf(" %6s", "-");
  };
  const bool hb = b && b->measured;
  sp(hb ? b->dispUs : 0, row.bf16Us);
  sp(hb ? b->fp8Us : 0, row.fp8 ? row.fp8Us : 0);
  sp(hb ? b->combUs : 0, row.combUs);
  if (r.lowerBoundUs > 0 && row.bf16Us > 0) std::printf(" | %5.0f |", 100.0 * r.lowerBoundUs / row.bf16Us);
  else std::printf(" | %5s |", "-");
  if (floorCols_) {
    auto fl = [](double us, double floorUs) {
      const double x = us / floorUs;
      if (us > 0 && floorUs > 0) std::printf(x < 100 ? " %6.2f" : x < 1000 ? " %6.1f" : " %6.0f", x);
      else std::printf(" %6s", "-");
    };
    fl(row.bf16Us, r.net.us16);
    fl(row.fp8 ? row.fp8Us : 0, r.net.us8);
    fl(row.combUs, r.net.usComb);
    std::printf(" |");
  }
  std::printf(" %s\n", checkText(row.checked, row.ok));
  if (row.checked && !row.ok) std::printf("#   check FAILED: %s\n", row.msg.c_str());

  const char* chk = checkText(row.checked, row.ok);
  const char* rn = routingName(row.kind);
  csvRow("epx", rn, &row, "layout", row.layoutUs, OpBytes{}, 0, chk);
  csvRow("epx", rn, &row, "dispatch_bf16", row.bf16Us, r.bf16, hb ? b->dispUs : 0, chk, r.net.us16);
  if (row.fp8) csvRow("epx", rn, &row, "dispatch_fp8", row.fp8Us, r.fp8, hb ? b->fp8Us : 0, chk, r.net.us8);
  csvRow("epx", rn, &row, "combine_bf16", row.combUs, r.combine, hb ? b->combUs : 0, chk, r.net.usComb);
  std::fflush(stdout);
}

void Report::printMemFloor(const EpxRow& row, const MemFloorSummary& f) {
  if (!printer_ || !f.measured) return;
  auto x = [](double us, double floorUs) { return us > 0 && floorUs > 0 ? us / floorUs : 0.0; };
  const MemFloorTimes& t = f.t;
  std::printf("#   memory floor, each rank's local rows (%d CTAs; MB: mean over ranks, time(us): slowest rank; epx / floor):\n",
              t.ctas);
  std::printf("#     dispatch writes %8.1f MB: copy engine %8.1f us (%5.2f x), SM copy       %8.1f us (%5.2f x)\n",
              t.bytes / 1e6, t.ceUs, x(row.bf16Us, t.ceUs), t.copySmUs, x(row.bf16Us, t.copySmUs));
  std::printf("#     combine reads   %8.1f MB: copy engine %8.1f us (%5.2f x), SM read-and-sum %8.1f us (%5.2f x)\n",
              t.bytes / 1e6, t.ceUs, x(row.combUs, t.ceUs), t.sumSmUs, x(row.combUs, t.sumSmUs));
  const char* rn = routingName(row.kind);
  const OpBytes bytes{t.bytes, 0};
  csvRow("floor", rn, &row, "dispatch_bf16_ce", t.ceUs, bytes, 0, "-");
  csvRow("floor", rn, &row, "dispatch_bf16_sm", t.copySmUs, bytes, 0, "-");
  csvRow("floor", rn, &row, "combine_bf16_ce", t.ceUs, bytes, 0, "-");
  csvRow("floor", rn, &row, "combine_bf16_sm", t.sumSmUs, bytes, 0, "-");
  std::fflush(stdout);
}

void Report::printGin(const std::vector<GinOpSummary>& ops) {
  if (!printer_) return;
  std::printf("#   GIN per call (mean over ranks; overhead = wire bytes beyond the token rows that cross nodes, --hybrid: of\n"
              "#     both hops, max over ranks):\n");
  std::printf("#     %-13s %8s %8s %8s %8s %11s %11s %9s %9s\n", "op", "ops", "puts", "put+sig", "sig-only",
              "wire(MiB)", "rows(MiB)", "ovh(%)", "net(GB/s)");
  for (const GinOpSummary& g : ops)
    std::printf("#     %-13s %8.0f %8.0f %8.0f %8.0f %11.3f %11.3f %9.2f %9.1f\n", g.op, g.opsMean, g.putsMean,
                g.putSignalsMean, g.signalOnlyMean, g.wireMeanBytes / 1048576.0, g.rowMeanBytes / 1048576.0,
                g.overheadMaxPct, g.netGBpsMean);
  std::fflush(stdout);
}

void Report::csvRow(const std::string& section, const char* routing, const EpxRow* row, const char* op,
                    double us, const OpBytes& bytes, double baselineUs, const char* check, double floorUs) {
  if (!csv_) return;
  std::fprintf(csv_, "%s,%s,", section.c_str(), routing);
  if (row) std::fprintf(csv_, "%s,%s,%d,%d,", layoutLabel(*row).c_str(), modeName(row->mode), row->smsReq, row->smsUsed);
  else std::fprintf(csv_, ",,,,");
  std::fprintf(csv_, "%s,%.2f,", op, us);
  if (bytes.logical > 0) std::fprintf(csv_, "%.2f,%.2f,", gbps(bytes.logical, us), gbps(bytes.nvlink, us));
  else std::fprintf(csv_, ",,");
  if (baselineUs > 0) std::fprintf(csv_, "%.2f,%.3f,", baselineUs, ratio(baselineUs, us));
  else std::fprintf(csv_, ",,");
  std::fprintf(csv_, "%s,", check);
  if (floorUs > 0 && us > 0) std::fprintf(csv_, "%.2f,%.3f\n", floorUs, us / floorUs);
  else std::fprintf(csv_, ",\n");
  std::fflush(csv_);
}

}  // namespace epxbench
