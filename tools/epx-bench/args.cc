// Command-line parsing of epx-bench.
#include "args.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

namespace epxbench {

std::string epxVersionText() {
  // Encoded as NCCL encodes its own: major * 10000 + minor * 100 + patch (100 = 0.1.0).
  return std::to_string(kEpxVersionCode / 10000) + "." + std::to_string(kEpxVersionCode / 100 % 100) + "." +
         std::to_string(kEpxVersionCode % 100);
}

namespace {

void usage(FILE* f) {
  std::fprintf(f,
      "usage: epx-bench [options]\n"
      "Times epx EP dispatch/combine on the local GPUs against a plain NCCL all-to-all dispatcher\n"
      "and the NVLink peer-copy ceiling, and checks the results against the CPU reference; with\n"
      "--algo bucket / pp / lb, the bucket collectives / PP send/recv / expert load balancing against\n"
      "NCCL's own calls; with --algo engram, the Engram fetch against its floor.\n"
      "  --gpus N            ranks, 1..64, default all local GPUs; one process drives one GPU per\n"
      "                      rank, at most 8; in multi-process mode (EPX_MP_SIZE/EPX_MP_RANK/\n"
      "                      EPX_MP_ID_FILE, scripts/fake-nodes.sh) the job has EPX_MP_SIZE ranks,\n"
      "                      one per process, up to 64, and --gpus must match\n"
      "  --tokens T          tokens per rank (default 4096)\n"
      "  --hidden H          channels per token (default 7168)\n"
      "  --topk K            experts per token (default 8)\n"
      "  --experts E         experts in total (default 256)\n"
      "  --sms LIST          SM budgets, comma separated; 0 = epx's analytic default (default 24,0)\n"
      "  --hybrid R          hybrid forwarding over nodes of R ranks, 1..64, R dividing the ranks into\n"
      "                      two nodes or more (virtual nodes of R fake nodes; the forward hop then runs\n"
      "                      over GIN too); default direct\n"
      "  --routing R         uniform | grouped | both (default both)\n"
      "                      grouped: DeepSeek-V3 group-limited, 8 groups, top-4 groups, Zipf(0.8)\n"
      "                      expert popularity over a seed-shuffled expert order\n"
      "  --layout L          dedup | expanded | both (default dedup)\n"
      "  --mode M            capacity | exact | both (default capacity)\n"
      "  --buffers B         window | user | both (default window): dedup outputs in the group's\n"
      "                      window (ncclEpGroupGetBuffers: zero-copy dispatch, pull combine) or in\n"
      "                      the benchmark's own buffers; the expanded layout always uses its own\n"
      "  --align N           expanded layout: expert segment alignment in rows (default 1)\n"
      "  --idx32             top-k ids as int32 (default int64)\n"
      "  --iters N           timed iterations (default 50)\n"
      "  --warmup N          untimed iterations first (default 10)\n"
      "  --seed S            routing/data seed (default 1; engram: tables and indices)\n"
      "  --no-check          skip the correctness check (engram: of the first fetch's rows)\n"
      "  --no-baseline       skip the NCCL all-to-all dispatcher\n"
      "  --no-ceiling        skip the NVLink peer-copy ceiling\n"
      "  --no-floor          skip the memory floor (copy engine and plain SM kernels moving each\n"
      "                      configuration's local rows with epx's CTA count)\n"
      "  --csv FILE          also write one CSV row per measurement to FILE (rank 0)\n"
      "  --net-gbps X        line rate of the NIC between nodes, GB/s per direction per rank, for\n"
      "                      the network floor (default EPX_GIN_EMU_GBPS; unset: no floor)\n"
      "  --net-latency-us L  one-way latency added to the floor (default EPX_GIN_EMU_LATENCY_US, or 0;\n"
      "                      engram: twice, one round trip per layer)\n"
      "  --ranks-per-node G  ranks per node for the floor (default EPX_MP_RANKS_PER_NODE, or 1 in\n"
      "                      multi-process mode; single process: all ranks on one node)\n"
      "  --algo A            high-throughput (default) | low-latency: ncclEpAlgoLowLatency dispatch\n"
      "                      (BF16 and FP8) and combine, whole calls and send/receive halves |\n"
      "                      bucket: all-gather, reduce-scatter (FP32, BF16 wire), all-reduce of one\n"
      "                      FP32 tensor | pp: PP send/recv in a ring; both in bus bandwidth against\n"
      "                      NCCL's own calls and, with a network rate, as %% of it | lb: expert load\n"
      "                      balancing, one DeepSeek-V3 expert (3 x 7168 x 2048) to a replica on the\n"
      "                      next rank: weight prefetch FP8 + scales and BF16, FP32 gradient reduction,\n"
      "                      against an NCCL send/recv ring of the same bytes | engram: the Engram\n"
      "                      fetch (ncclEpEngramFetch) of uniform random rows from tables sharded over\n"
      "                      the ranks, time per fetch and per layer (each layer's completion seen\n"
      "                      through ncclEpEngramWaitLayer) against the floor per layer: the network\n"
      "                      floor with ranks on other nodes, else the memory floor; rows checked once\n"
      "  --ll-tokens LIST    low-latency: tokens per rank, comma separated, each 0..4096 (default\n"
      "                      1,32,128,256); 0 times the fixed cost of a call (no rows)\n"
      "  --sync-start        an NCCL all-reduce of one value (not timed) before each timed op (high-\n"
      "                      throughput) or dispatch/combine sequence (low-latency), so that every rank\n"
      "                      starts it together (default: back to back, each where the last left it)\n"
      "  --coll-mib N        bucket: tensor size in MiB, 1..4096 (default 64)\n"
      "  --pp-mib N          pp: message size in MiB, 1..4096 (default 16)\n"
      "  --chunk-kib N       bucket, pp, lb, engram: the GIN chunk (the objects' config .chunkBytes) in\n"
      "                      KiB, 64..1048576 (default: the library's, 2 MiB bucket and LB, 8 MiB\n"
      "                      engram, 4 MiB PP)\n"
      "  --coll-ctas N       bucket, pp, lb, engram: CTAs per kernel, 1..32 (default: the library's, 4\n"
      "                      for buckets and PP, 8 for load balancing and engram)\n"
      "  --engram-layers N   engram: layers (tables) per fetch, 1..64 (default 4)\n"
      "  --engram-tokens T   engram: tokens per rank and fetch, 1..65536 (default 4096)\n"
      "  --engram-entries E  engram: rows per token and layer, 1..1024 (default 16); tokens x entries\n"
      "                      at most 2^24\n"
      "  --engram-row-bytes B\n"
      "                      engram: bytes per row, a multiple of 16, 16..16777216 (default 1024)\n"
      "  --engram-rows N     engram: rows of each layer's table, a multiple of the ranks (default\n"
      "                      1048576 rounded down to a multiple of the ranks)\n"
      "  --host-sync S       how host threads wait for the GPU: auto, spin, yield, blocking (cudaDeviceSchedule*;\n"
      "                      default EPX_HOST_SYNC, else CUDA's auto; yield frees host cores many ranks share)\n"
      "  --version           print epx's version and exit\n"
      "  -h, --help          this text\n");
}

// One line naming the option and its value; the usage text is for --help, not for every typo.
[[noreturn]] void bad(const std::string& msg) {
  std::fprintf(stderr, "epx-bench: %s (see epx-bench --help)\n", msg.c_str());
  std::exit(2);
}

long toInt(const char* opt, const char* v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno || end == v || *end != '\0' || x < lo || x > hi) {
    std::ostringstream os;
    os << opt << ": '" << v << "' is not an integer in [" << lo << ", " << hi << "]";
    bad(os.str());
  }
  return x;
}

double toDouble(const char* opt, const char* v, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v, &end);
  if (errno || end == v || *end != '\0' || !(x >= lo && x <= hi)) {
    std::ostringstream os;
    os << opt << ": '" << v << "' is not a number in [" << lo << ", " << hi << "]";
    bad(os.str());
  }
  return x;
}

std::vector<int> toIntList(const char* opt, const char* v, long lo, long hi) {
  std::vector<int> out;
  const std::string s(v);
  if (s.empty()) bad(std::string(opt) + ": empty list");
  size_t at = 0;
  for (;;) {  // every item, the empty ones too ("24," and ",24" name an empty item)
    const size_t comma = s.find(',', at);
    const std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) bad(std::string(opt) + ": '" + s + "' has an empty item");
    out.push_back(int(toInt(opt, item.c_str(), lo, hi)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// True when any EPX_MP_* variable is set: multi-process mode (epx/testing/multigpu.h,
// multiProcessRequested(); run() validates the variables).
bool multiProcessRequested() {
  for (const char* v : {"EPX_MP_SIZE", "EPX_MP_RANK", "EPX_MP_ID_FILE"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

// "" when `path` can be opened for writing (an existing writable file, or a new file in an
// existing writable directory), else why not. Creates nothing.
std::string csvProblem(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "is a directory";
    if (::access(path.c_str(), W_OK) != 0) return std::string("not writable: ") + std::strerror(errno);
    return "";
  }
  if (errno != ENOENT) return std::strerror(errno);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0) return "directory " + dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot create a file in " + dir + ": " + std::strerror(errno);
  return "";
}

// cudaDeviceSchedule* names that --host-sync and EPX_HOST_SYNC take (the test harness's setHostSync).
bool isHostSyncName(const std::string& v) { return v == "auto" || v == "spin" || v == "yield" || v == "blocking"; }

}  // namespace

const char* routingName(RoutingKind k) { return k == RoutingKind::Uniform ? "uniform" : "grouped"; }
const char* layoutName(int layout) { return layout == 0 ? "expanded" : "dedup"; }
const char* modeName(int mode) { return mode == 0 ? "exact" : "capacity"; }

// Options of one algorithm's benchmark only: given with the other, they would be ignored.
constexpr const char* kHighThroughputOnly[] = {"--tokens", "--routing",     "--layout",     "--mode",     "--buffers", "--align",
                                               "--idx32",  "--no-baseline", "--no-ceiling", "--no-floor", "--csv",
                                               "--hybrid"};
constexpr const char* kLowLatencyOnly[] = {"--ll-tokens"};
// EP options (either algorithm) that mean nothing to --algo bucket / pp, and theirs.
constexpr const char* kEpOnly[] = {"--hidden",   "--topk", "--experts",       "--sms",
                                   "--no-check", "--seed", "--ranks-per-node", "--net-latency-us",
                                   "--sync-start"};
constexpr const char* kBucketOnly[] = {"--coll-mib"};
constexpr const char* kPpOnly[] = {"--pp-mib"};
constexpr const char* kCollOnly[] = {"--coll-ctas", "--chunk-kib"};
constexpr const char* kEngramOnly[] = {"--engram-layers", "--engram-tokens", "--engram-entries", "--engram-row-bytes",
                                       "--engram-rows"};
// Of kEpOnly, the ones --algo engram takes too (its indices and check, its floor).
constexpr const char* kEngramAlso[] = {"--no-check", "--seed", "--ranks-per-node", "--net-latency-us"};

const char* algoName(Algo a) {
  switch (a) {
    case Algo::HighThroughput: return "high-throughput";
    case Algo::LowLatency: return "low-latency";
    case Algo::Bucket: return "bucket";
    case Algo::Pp: return "pp";
    case Algo::Lb: return "lb";
    case Algo::Engram: return "engram";
  }
  return "?";
}

Options parseArgs(int argc, char** argv) {
  Options o;
  std::vector<std::string> given;  // option names, in order
  for (int i = 1; i < argc; ++i) {
    // "--opt=value" is "--opt value".
    std::string name = argv[i];
    const char* inlineValue = nullptr;
    bool inlineUsed = false;
    if (const size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      inlineValue = argv[i] + eq + 1;
      name.resize(eq);
    }
    const char* a = name.c_str();
    given.push_back(a);
    auto val = [&]() -> const char* {
      if (inlineValue) {
        inlineUsed = true;
        return inlineValue;
      }
      if (i + 1 >= argc) bad(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (inlineValue && (!std::strcmp(a, "--help") || !std::strcmp(a, "--version")))
      bad(std::string(a) + " takes no value, got '" + argv[i] + "'");
    if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
      usage(stdout);
      std::exit(0);
    } else if (!std::strcmp(a, "--version")) {
      std::printf("epx-bench %s\n", epxVersionText().c_str());
      std::exit(0);
    } else if (!std::strcmp(a, "--gpus")) {
      o.gpus = int(toInt(a, val(), 1, kMaxJobRanks));
    } else if (!std::strcmp(a, "--tokens")) {
      o.tokens = int(toInt(a, val(), 1, 65536));
    } else if (!std::strcmp(a, "--hidden")) {
      o.hidden = int(toInt(a, val(), 8, 1 << 16));
    } else if (!std::strcmp(a, "--topk")) {
      o.topk = int(toInt(a, val(), 1, 32));
    } else if (!std::strcmp(a, "--experts")) {
      o.experts = int(toInt(a, val(), 1, 1024));
    } else if (!std::strcmp(a, "--hybrid")) {
      o.hybrid = int(toInt(a, val(), 1, 64));
    } else if (!std::strcmp(a, "--sms")) {
      o.sms = toIntList(a, val(), 0, kMaxSmBudget);
    } else if (!std::strcmp(a, "--routing")) {
      std::string v = val();
      if (v == "uniform") o.routings = {RoutingKind::Uniform};
      else if (v == "grouped") o.routings = {RoutingKind::Grouped};
      else if (v == "both") o.routings = {RoutingKind::Uniform, RoutingKind::Grouped};
      else bad("--routing: expected uniform, grouped or both, got '" + v + "'");
    } else if (!std::strcmp(a, "--layout")) {
      std::string v = val();
      if (v == "dedup") o.layouts = {1};
      else if (v == "expanded") o.layouts = {0};
      else if (v == "both") o.layouts = {1, 0};
      else bad("--layout: expected dedup, expanded or both, got '" + v + "'");
    } else if (!std::strcmp(a, "--mode")) {
      std::string v = val();
      if (v == "capacity") o.modes = {1};
      else if (v == "exact") o.modes = {0};
      else if (v == "both") o.modes = {1, 0};
      else bad("--mode: expected capacity, exact or both, got '" + v + "'");
    } else if (!std::strcmp(a, "--buffers")) {
      std::string v = val();
      if (v == "window") o.buffers = {1};
      else if (v == "user") o.buffers = {0};
      else if (v == "both") o.buffers = {1, 0};
      else bad("--buffers: expected window, user or both, got '" + v + "'");
    } else if (!std::strcmp(a, "--align")) {
      o.align = int(toInt(a, val(), 1, 1024));
    } else if (!std::strcmp(a, "--idx32")) {
      o.idx64 = false;
    } else if (!std::strcmp(a, "--iters")) {
      o.iters = int(toInt(a, val(), 1, 100000));
    } else if (!std::strcmp(a, "--warmup")) {
      o.warmup = int(toInt(a, val(), 0, 100000));
    } else if (!std::strcmp(a, "--seed")) {
      o.seed = (unsigned long long)toInt(a, val(), 0, 1L << 40);
    } else if (!std::strcmp(a, "--no-check")) {
      o.check = false;
    } else if (!std::strcmp(a, "--no-baseline")) {
      o.baseline = false;
    } else if (!std::strcmp(a, "--no-ceiling")) {
      o.ceiling = false;
    } else if (!std::strcmp(a, "--no-floor")) {
      o.memFloor = false;
    } else if (!std::strcmp(a, "--csv")) {
      o.csv = val();
      if (o.csv.empty()) bad("--csv needs a file name");
    } else if (!std::strcmp(a, "--net-gbps")) {
      o.netGBps = toDouble(a, val(), kNicMinGBps, kNicMaxGBps);  // the plugin's NIC range, as EPX_GIN_EMU_GBPS
    } else if (!std::strcmp(a, "--net-latency-us")) {
      o.netLatencyUs = toDouble(a, val(), 0, 1e6);  // the plugin's EPX_GIN_EMU_LATENCY_US range
    } else if (!std::strcmp(a, "--algo")) {
      std::string v = val();
      if (v == "low-latency") o.algo = Algo::LowLatency;
      else if (v == "high-throughput") o.algo = Algo::HighThroughput;
      else if (v == "bucket") o.algo = Algo::Bucket;
      else if (v == "pp") o.algo = Algo::Pp;
      else if (v == "lb") o.algo = Algo::Lb;
      else if (v == "engram") o.algo = Algo::Engram;
      else bad("--algo: expected high-throughput, low-latency, bucket, pp, lb or engram, got '" + v + "'");
    } else if (!std::strcmp(a, "--ll-tokens")) {
      o.llTokens = toIntList(a, val(), 0, 4096);
    } else if (!std::strcmp(a, "--sync-start")) {
      o.syncStart = true;
    } else if (!std::strcmp(a, "--coll-mib")) {
      o.collBytes = size_t(toInt(a, val(), 1, 4096)) << 20;
    } else if (!std::strcmp(a, "--pp-mib")) {
      o.ppBytes = size_t(toInt(a, val(), 1, 4096)) << 20;
    } else if (!std::strcmp(a, "--chunk-kib")) {
      o.chunkBytes = size_t(toInt(a, val(), 64, 1 << 20)) << 10;
    } else if (!std::strcmp(a, "--coll-ctas")) {
      o.collCtas = int(toInt(a, val(), 1, kMaxCollCtas));
    } else if (!std::strcmp(a, "--engram-layers")) {
      o.engramLayers = int(toInt(a, val(), 1, 64));  // NCCL_EP_ENGRAM_MAX_LAYERS
    } else if (!std::strcmp(a, "--engram-tokens")) {
      o.engramTokens = int(toInt(a, val(), 1, 65536));
    } else if (!std::strcmp(a, "--engram-entries")) {
      o.engramEntries = int(toInt(a, val(), 1, 1024));
    } else if (!std::strcmp(a, "--engram-row-bytes")) {
      const char* v = val();
      o.engramRowBytes = size_t(toInt(a, v, 16, 1L << 24));
      if (o.engramRowBytes % 16) bad(std::string(a) + ": '" + v + "' is not a multiple of 16");
    } else if (!std::strcmp(a, "--engram-rows")) {
      o.engramRows = toInt(a, val(), 1, 2147483647L);  // global row numbers are int32
    } else if (!std::strcmp(a, "--host-sync")) {
      std::string v = val();
      if (!isHostSyncName(v)) bad("--host-sync: expected auto, spin, yield or blocking, got '" + v + "'");
      o.hostSync = v;
    } else if (!std::strcmp(a, "--ranks-per-node")) {
      o.ranksPerNode = int(toInt(a, val(), 1, 1 << 20));
    } else if (a[0] != '-') {
      bad(std::string("unexpected argument '") + a + "' (epx-bench takes options only; --help lists them)");
    } else {
      bad(std::string("unknown option '") + a + "'");
    }
    if (inlineValue && !inlineUsed) bad(std::string(a) + " takes no value, got '" + argv[i] + "'");
  }
  // Network floor defaults from the GIN plugin's NIC emulation settings.
  // Same ranges as the plugin (docs/plugins.md): a rate of 0 is "off" (no floor), and a latency
  // without a rate is ignored, as the plugin does.
  if (o.netGBps < 0)
    if (const char* e = std::getenv("EPX_GIN_EMU_GBPS"); e && *e) {
      const double g = toDouble("EPX_GIN_EMU_GBPS", e, 0, kNicMaxGBps);
      if (g > 0 && g < kNicMinGBps) {
        std::ostringstream os;
        os << "EPX_GIN_EMU_GBPS: '" << e << "' is neither 0 (off) nor in " << kNicMinGBps << ".." << kNicMaxGBps
           << " GB/s, the GIN plugin's range";
        bad(os.str());
      }
      if (g > 0) o.netGBps = g;
    }
  // --ranks-per-node wins over EPX_MP_RANKS_PER_NODE (multi-process mode); checked here, so a typo
  // is an error on every machine (run() checks that it divides the rank count).
  if (!o.ranksPerNode && multiProcessRequested())
    if (const char* e = std::getenv("EPX_MP_RANKS_PER_NODE"); e && *e)
      o.ranksPerNode = int(toInt("EPX_MP_RANKS_PER_NODE", e, 1, 1 << 20));
  if (o.netLatencyUs < 0) {
    const char* e = std::getenv("EPX_GIN_EMU_LATENCY_US");
    o.netLatencyUs = o.netGBps > 0 && e && *e ? toDouble("EPX_GIN_EMU_LATENCY_US", e, 0, 1e6) : 0.0;
  }
  auto wasGiven = [&](const char* name) { return std::find(given.begin(), given.end(), name) != given.end(); };
  const std::string withAlgo = std::string(" has no effect with --algo ") + algoName(o.algo);
  for (const char* name : kHighThroughputOnly)
    if (o.algo != Algo::HighThroughput && wasGiven(name)) bad(name + withAlgo);
  for (const char* name : kLowLatencyOnly)
    if (!o.lowLatency() && wasGiven(name)) bad(std::string(name) + " applies to --algo low-latency only");
  auto engramAlso = [](const char* name) {
    return std::find_if(std::begin(kEngramAlso), std::end(kEngramAlso),
                        [&](const char* x) { return !std::strcmp(x, name); }) != std::end(kEngramAlso);
  };
  for (const char* name : kEpOnly)
    if (o.collectives() && wasGiven(name) && !(o.algo == Algo::Engram && engramAlso(name))) bad(name + withAlgo);
  for (const char* name : kBucketOnly)
    if (o.algo != Algo::Bucket && wasGiven(name)) bad(std::string(name) + " applies to --algo bucket only");
  for (const char* name : kPpOnly)
    if (o.algo != Algo::Pp && wasGiven(name)) bad(std::string(name) + " applies to --algo pp only");
  for (const char* name : kCollOnly)
    if (!o.collectives() && wasGiven(name))
      bad(std::string(name) + " applies to --algo bucket, pp, lb and engram only");
  for (const char* name : kEngramOnly)
    if (o.algo != Algo::Engram && wasGiven(name)) bad(std::string(name) + " applies to --algo engram only");
  if (int64_t(o.engramTokens) * o.engramEntries > (int64_t(1) << 24))
    bad("--engram-tokens " + std::to_string(o.engramTokens) + " x --engram-entries " + std::to_string(o.engramEntries) +
        " is more than 2^24 rows per layer (engram.h)");
  if (o.topk > o.experts)
    bad("--topk " + std::to_string(o.topk) + " must not exceed --experts " + std::to_string(o.experts));
  if (o.hidden % 8) bad("--hidden " + std::to_string(o.hidden) + " must be a multiple of 8");
  if (o.lowLatency() && o.hidden % 128)
    bad("--algo low-latency needs --hidden a multiple of 128, got " + std::to_string(o.hidden));
  if (o.gpus > kMaxRanks && !multiProcessRequested())
    bad("--gpus " + std::to_string(o.gpus) + ": one process drives 1.." + std::to_string(kMaxRanks) +
        " GPUs (more ranks: multi-process mode, EPX_MP_SIZE/EPX_MP_RANK/EPX_MP_ID_FILE)");
  if (o.lowLatency() && wasGiven("--sms") && o.sms.size() > 1)
    bad("--algo low-latency runs one SM budget: give --sms one value, got " + std::to_string(o.sms.size()));
  // Options of one layout or buffer kind only: refused when every run would ignore them.
  const bool expanded = std::find(o.layouts.begin(), o.layouts.end(), 0) != o.layouts.end();
  const bool dedup = std::find(o.layouts.begin(), o.layouts.end(), 1) != o.layouts.end();
  if (wasGiven("--align") && !expanded) bad("--align applies to the expanded layout only (--layout expanded or both)");
  if (wasGiven("--buffers") && !dedup)
    bad("--buffers applies to the deduplicated layout only (the expanded layout always uses its own buffers)");
  if (!o.collectives() && o.gpus > 0 && o.experts % o.gpus)
    bad("--experts " + std::to_string(o.experts) + " must be a multiple of --gpus " + std::to_string(o.gpus) +
        " (every rank holds the same number of experts)");
  // EPX_HOST_SYNC (the harness applies it once a GPU is found): checked here, so a typo is an error
  // on every machine, not only on one with GPUs.
  if (o.hostSync.empty())
    if (const char* e = std::getenv("EPX_HOST_SYNC"); e && *e && !isHostSyncName(e))
      bad("EPX_HOST_SYNC: expected auto, spin, yield or blocking, got '" + std::string(e) + "'");
  if (!o.csv.empty())
    if (const std::string why = csvProblem(o.csv); !why.empty()) bad("--csv " + o.csv + ": cannot write: " + why);
  return o;
}

}  // namespace epxbench
