// Command-line options of epx-bench.
#pragma once
#include <string>
#include <vector>

namespace epxbench {

enum class RoutingKind { Uniform, Grouped };

// Ranks one process drives, one per GPU (--gpus outside multi-process mode): one NVLink domain in
// this release.
constexpr int kMaxRanks = 8;
// Ranks of a job (--gpus, or EPX_MP_SIZE in multi-process mode).
constexpr int kMaxJobRanks = 64;
// Accepted EPX_GIN_EMU_GBPS rates other than 0 (off), in GB/s: a mirror of kNicMinGBps/kNicMaxGBps
// in plugin/rig/nic_pacer.h (plugin-private, not on epx-bench's include path);
// tests/unit/test_bench_args.cc checks that they agree.
constexpr double kNicMinGBps = 0.001;
constexpr double kNicMaxGBps = 10000.0;

enum class Algo { HighThroughput, LowLatency, Bucket, Pp, Lb, Engram };
// Largest numCtas of a bucket or PP channel (bucket.h / pp.h; device kBucketMaxCtas, kPpMaxCtas).
constexpr int kMaxCollCtas = 32;

struct Options {
  int gpus = 0;              // 0: all local GPUs
  int tokens = 4096;         // tokens per rank
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
  std::vector<int> sms = {24, 0};  // SM budgets; 0 = epx's analytic default
  std::vector<RoutingKind> routings = {RoutingKind::Uniform, RoutingKind::Grouped};
  std::vector<int> layouts = {1};  // ncclEpLayout_t values (default: deduplicated)
  std::vector<int> modes = {1};    // ncclEpMode_t values (default: capacity)
  std::vector<int> buffers = {1};  // deduplicated layout: 1 = window (zero-copy), 0 = user buffers
  int align = 1;             // expanded layout: expert segment alignment
  int iters = 50;
  int warmup = 10;
  bool idx64 = true;         // top-k ids as int64 (else int32)
  bool check = true;         // correctness check against the CPU reference
  bool baseline = true;      // NCCL all-to-all dispatcher
  bool ceiling = true;       // NVLink peer-copy ceiling
  bool memFloor = true;      // memory floor of each configuration's local rows (memory_floor.h)
  unsigned long long seed = 1;
  std::string csv;           // CSV output file, empty = none
  // Network floor (ranks on different NCCL nodes, e.g. fake nodes): the line rate and one-way
  // latency of the emulated NIC; < 0 = from EPX_GIN_EMU_GBPS / EPX_GIN_EMU_LATENCY_US (unset: no
  // floor). ranksPerNode: ranks per node; 0 = EPX_MP_RANKS_PER_NODE in multi-process mode (else 1),
  // all ranks in single-process mode.
  double netGBps = -1;
  double netLatencyUs = -1;
  int ranksPerNode = 0;
  // --hybrid R: the EP groups forward in hybrid mode over nodes of R ranks (forwardNodeSize = R;
  // on fake nodes, virtual nodes whose forward hop runs over GIN); 0 = direct mode.
  int hybrid = 0;
  // --algo: EP dispatch/combine high-throughput (default) or low-latency (ncclEpAlgoLowLatency,
  // ep_ll.h, at llTokens per rank: ll_bench.h), or the bucket collectives / PP send/recv
  // (coll_bench.h: a collBytes FP32 tensor, ppBytes messages, collCtas CTAs per kernel), or expert
  // load balancing (lb.h: one DeepSeek-V3 expert's weights and gradients to a replica on the next rank),
  // or the Engram fetch (engram.h, engram_bench.h: engram* below, collCtas and chunkBytes).
  Algo algo = Algo::HighThroughput;
  bool lowLatency() const { return algo == Algo::LowLatency; }
  bool collectives() const {
    return algo == Algo::Bucket || algo == Algo::Pp || algo == Algo::Lb || algo == Algo::Engram;
  }
  std::vector<int> llTokens = {1, 32, 128, 256};
  // An NCCL all-reduce of one value (not timed) before each timed op (high-throughput) or each
  // dispatch/combine sequence (low-latency), so that the ranks start it together instead of where
  // the previous one left them (--sync-start).
  bool syncStart = false;
  size_t collBytes = size_t(64) << 20;
  size_t ppBytes = size_t(16) << 20;
  size_t chunkBytes = 0;  // bucket, PP, LB and Engram GIN chunk; 0: the library's default
  int collCtas = 0;  // 0: the object's library default (bucket and PP 4, load balancing and Engram 8)
  // --algo engram (ncclEpEngramPlan_t): layers, rows of each layer's table (0: 2^20 rounded down to
  // a multiple of the ranks), row bytes, and per rank tokens x entries rows per layer and fetch.
  int engramLayers = 4;
  long long engramRows = 0;
  size_t engramRowBytes = 1024;
  int engramTokens = 4096;
  int engramEntries = 16;
  // How host threads wait for the GPU (cudaSetDeviceFlags before any context exists): auto
  // (CUDA's default), spin, yield or blocking; empty = EPX_HOST_SYNC or CUDA's default
  // (epx/testing/multigpu.h, setHostSync).
  std::string hostSync;
};

// Parses argv; on --help prints usage and exits 0, on a bad option prints one line naming the
// option and value (plus "see epx-bench --help") and exits 2. Checks
// everything that does not need a GPU, so that a bad command line is an error on any machine:
// --gpus above kMaxRanks outside multi-process mode, --algo low-latency with --hidden not a
// multiple of 128, a --csv file that cannot be created, an EPX_GIN_EMU_GBPS outside the plugin's
// range.
Options parseArgs(int argc, char** argv);

const char* routingName(RoutingKind k);
const char* layoutName(int layout);
// epx's version: EPX_VERSION_CODE of epx/ep.h, mirrored here so that the argument parser builds
// without CUDA/NCCL headers (the unit tests); report.cc checks that both agree.
constexpr int kEpxVersionCode = 100;
// NCCL_EP_MAX_SM_BUDGET of epx/ep.h (the largest smBudget), mirrored the same way.
constexpr int kMaxSmBudget = 160;
std::string epxVersionText();  // "0.1.0"

const char* modeName(int mode);

}  // namespace epxbench
