// Harness of the GPU EP tests (tests/ep): the process-wide communicators and groups, random
// routing/token generation, device buffers, one "session" that drives layout -> dispatch -> combine
// on every local rank, poisons every output first, and compares against epx::ref.
//
// Ranks: single process, one thread per GPU (epx::testing::MultiGpu), or one process per rank
// (EPX_MP_SIZE / EPX_MP_RANK / EPX_MP_ID_FILE, e.g. under scripts/fake-nodes.sh): then every process
// generates the same routing and data for all ranks (the seed is rank 0's, broadcast at start),
// runs its own rank, and checks only its own rank's outputs against the reference computed from
// everyone's inputs. Single-process mode is the case where every rank is local.
//
// Threads: ncclEp* calls and CUDA work run inside MultiGpu::run (rank threads, or the main thread
// in multi-process mode); all Boost.Test assertions run on the main thread, on results copied back
// to the host.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "epx/ep.h"
#include "epx/ref/ep_ref.h"
#include "epx/testing/multigpu.h"

namespace epx::test {

using epx::testing::MultiGpu;
using epx::testing::RankContext;

// Throws with the call, the ncclResult_t and ncclEpGetLastError() of this thread.
#define EPX_CHECK_EP(cmd)                                                                                  \
  do {                                                                                                     \
    ncclResult_t r_ = (cmd);                                                                               \
    if (r_ != ncclSuccess)                                                                                 \
      throw std::runtime_error(std::string(#cmd) + " -> " + ncclGetErrorString(r_) + " (" +              \
                               std::to_string(int(r_)) + "): " + ncclEpGetLastError() + " at " + __FILE__ + \
                               ":" + std::to_string(__LINE__));                                            \
  } while (0)

// ---- process-wide state ------------------------------------------------------------------------

// Ranks of the job: multi-process mode EPX_MP_SIZE; else all local GPUs, or EPX_TEST_GPUS if set
// (at most 8). 0 when there is no GPU.
int wantedRanks();
// The job's communicators (all ranks local, or this process's rank), created on first use and
// kept for the whole process.
MultiGpu& gpus();
int nRanks();
bool multiProcess();  // EPX_MP_* set (does not create the communicators)
bool isLocal(int rank);  // this process runs `rank`
const std::vector<int>& localRanks();
// EPX_TEST_QUICK=1: shorter case lists for slow configurations (many ranks on one GPU); each
// suite says what it leaves out.
bool quick();
// SM budget cap when several processes share a GPU (EPX_MP_PROCS_PER_GPU, EPX_TEST_MAX_SMS); 0 = none.
int smCap();
// Boost.Test precondition of cases that need a peer rank (a 1-rank group has none).
boost::test_tools::assertion_result needsPeers(boost::unit_test::test_unit_id);
// Destroys cached groups, then the communicators (end of the test module). After
// abandonGpus() (a peer died, communicators aborted) it only forgets them.
void shutdownGpus();
// Forgets the cached groups without destroying them (they may wait for a dead peer) and aborts
// the communicators; nothing collective works afterwards.
void abandonGpus();
// Base seed of the job: rank 0's EPX_TEST_SEED, or a random one; broadcast to every process in
// multi-process mode, so that all of them generate the same routing and data. Printed at start.
uint64_t baseSeed();
// A fresh seed for each call (baseSeed mixed with a counter).
uint64_t nextSeed();

struct GroupSpec {
  int maxTokens = 256;
  int hidden = 2048;
  int topk = 8;
  int numExperts = 16;
  int fp8 = 0;
  int smBudget = 0;  // 0 = analytic
  int exactCombine = 0;  // 1: FP32 combine buffers (handles may use ncclEpCombineFp32)
  auto key() const { return std::make_tuple(maxTokens, hidden, topk, numExperts, fp8, smBudget, exactCombine); }
  bool operator<(const GroupSpec& o) const { return key() < o.key(); }
};
// The group config of a spec. With the test option EPX_TEST_HYBRID=R (R >= 1) high-throughput
// groups forward in hybrid mode over virtual nodes of R consecutive ranks (forwardNodeSize = R): the
// EP suites and the randomized test then check hybrid mode on fake nodes, against the combine
// reference with node-reduced partials (ref::CombinePath).
ncclEpConfig_t makeConfig(const GroupSpec& g);
// R of EPX_TEST_HYBRID, or 0 (direct mode) when unset.
int testHybridNodeSize();
// Undoes EPX_TEST_HYBRID in a config (low-latency groups always send directly).
void directForwarding(ncclEpConfig_t& c);
// One group per rank for this spec; created collectively on first request, kept until shutdown.
const std::vector<ncclEpGroup_t>& groupFor(const GroupSpec& g);
// Destroys and forgets the cached groups of this spec (after a failure left them unusable, e.g. a
// device-side timeout); the next groupFor creates fresh ones.
void evictGroup(const GroupSpec& g);
// Destroys every cached group (a test that needs the communicators without epx objects).
void evictAllGroups();
// Creates groups collectively that the caller owns (destroyGroups when done).
std::vector<ncclEpGroup_t> createGroups(const GroupSpec& g);
void destroyGroups(std::vector<ncclEpGroup_t>& groups);
// "" when no local rank's group reports an async error, else the messages. (Only local ranks'
// groups are readable; see anyRankAsyncError for a verdict shared by all processes.)
std::string asyncErrors(const std::vector<ncclEpGroup_t>& groups);
// True in every process when any rank's group reports an async error (collective).
bool anyRankAsyncError(const std::vector<ncclEpGroup_t>& groups);

// ---- random data -------------------------------------------------------------------------------

struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed);
  uint64_t next();
  int uniform(int lo, int hi);  // [lo, hi]
  double unit();                // [0, 1)
};

// Random BF16 bits with magnitude in [2^-6, 2) and random sign (never NaN/inf/zero).
std::vector<uint16_t> randomBf16(size_t n, Rng& rng);
// Random FP8 e4m3 bytes, NaN encodings (0x7f, 0xff) excluded.
std::vector<uint8_t> randomFp8(size_t n, Rng& rng);

enum class RouteKind {
  Uniform,       // top-k distinct experts per token, uniformly, slots masked with maskProb
  SingleExpert,  // every token of every rank to one expert (singleExpert), all other slots -1
  RankSkewed,    // like Uniform, but experts of the last rank only (other ranks receive nothing)
};

struct RouteSpec {
  RouteKind kind = RouteKind::Uniform;
  double maskProb = 0.0;
  int singleExpert = -1;     // SingleExpert: the expert (default: numExperts - 1)
  bool fullyMaskedToken = false;  // Uniform: token 0 of every rank gets no expert at all
};

// tokens[r] = T of rank r.
std::vector<ref::RankRouting> makeRouting(const GroupSpec& g, const std::vector<int>& tokens, const RouteSpec& rs,
                                          Rng& rng);

// ---- device buffers ----------------------------------------------------------------------------

// cudaMalloc'd bytes on the current device of the creating thread; freed on that device.
class DevBuf {
 public:
  DevBuf() = default;
  ~DevBuf();
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  // (Re)allocates at least `bytes` (min 256) when the current size is smaller.
  void reserve(size_t bytes);
  void release();
  void* ptr() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
  int dev_ = -1;
};

// ---- one dispatch/combine session over all ranks -----------------------------------------------

struct CaseConfig {
  GroupSpec g;
  ncclEpLayout_t layout = ncclEpLayoutExpanded;
  ncclEpMode_t mode = ncclEpModeExact;
  int alignment = 1;
  int zeroGaps = 0;
  bool fp8 = false;              // dispatch FP8 e4m3 + scales (needs g.fp8 = 1)
  bool int64Ids = true;          // topk ids as ncclInt64 (else ncclInt32)
  bool dispatchWeights = true;   // pass topkWeights and get recvTopkWeights
  bool optionalOutputs = true;   // exact mode: pass recvSrcInfo/expertCounts/expertOffsets/numRecvRows
  bool shapeChecks = true;       // fill the optional shape fields (hidden, numRows, numTokens)
  int numBias = 0;               // 0, 1 or 2 combine biases
  bool combineWeights = false;   // combine topkWeights -> combinedTopkWeights
  // Deduplicated layout only: dispatch into the group's window (ncclEpGroupGetBuffers).
  //  0: own buffers; 1: recvX in the window, the other outputs own buffers (copied there);
  //  2: recvX and every row output in the window; 3: recvX in the window, the optional row outputs
  //  NULL (they are read back from the window, where they live anyway).
  int zeroCopy = 0;
  // Deduplicated layout only: combine input x = the window's combineX (expert outputs written
  // there), and combine topkWeights = the window's recvTopkWeights: the "pull" combine.
  bool pullCombine = false;
  // combinePrecision = ncclEpCombineFp32 (needs g.exactCombine = 1); the reference then keeps the
  // per-rank partial sums in FP32.
  bool combineFp32 = false;
  std::string describe() const;
};

// Host copy of everything one rank's dispatch and combine wrote.
struct RankResult {
  int capacity = 0;
  int allocRows = 0;  // rows of the output buffers
  ncclEpCounts_t counts{};
  std::vector<int> hostCounts;  // copy of counts.expertCounts (exact mode)
  std::vector<uint8_t> recvX;   // [checkedRows, rowBytes]
  std::vector<float> recvScales, recvW, combOutW;
  std::vector<int32_t> recvIdx, srcInfo, eCounts, eOffsets;
  int32_t numRecvRows = -12345;
  std::vector<uint16_t> combOut;
};

struct RankInputs {
  std::vector<uint8_t> x;           // [T, rowBytes]
  std::vector<float> scales;        // FP8: [T, H/128]
  std::vector<uint16_t> expertOut;  // [refRows, H] combine input (gap rows NaN)
  std::vector<float> combW;         // combine topkWeights: expanded [refRows], dedup [refRows, K]
  std::vector<uint16_t> bias0, bias1;
};

class RankState;

class EpSession {
 public:
  // Uses the cached groups of cfg.g unless `groups` is given.
  explicit EpSession(const CaseConfig& cfg, const std::vector<ncclEpGroup_t>* groups = nullptr);
  ~EpSession();
  EpSession(const EpSession&) = delete;
  EpSession& operator=(const EpSession&) = delete;

  const CaseConfig& cfg() const { return cfg_; }
  const ref::EpShape& shape() const { return shape_; }
  int rowBytes() const { return cfg_.g.hidden * (cfg_.fp8 ? 1 : 2); }
  int scaleCols() const { return cfg_.g.hidden / 128; }

  // New routing (host), and its reference dispatch.
  void setRouting(std::vector<ref::RankRouting> routing);
  // Random routing of the given token counts.
  void randomRouting(const std::vector<int>& tokens, const RouteSpec& rs, Rng& rng);
  // New tokens (x, scales) and combine inputs (expert outputs, weights, biases) for every rank.
  void randomData(Rng& rng);

  // Collective steps, each on all local ranks; results land in results[local rank].
  void layout();
  void dispatch();
  void combine();
  // layout + dispatch + combine
  void runAll() {
    layout();
    dispatch();
    combine();
  }

  // Compare the local ranks' results with the reference; "" when all match. Combine: at most
  // maxUlp BF16 ulps.
  std::string checkDispatch() const;
  std::string checkCombine(int maxUlp = 1, double* maxErr = nullptr, int* maxUlpSeen = nullptr) const;
  // Checks both with Boost.Test assertions (main thread) and reports the combine error; true when
  // dispatch, combine and the groups' async errors were all clean (lets a caller add replay info).
  bool expectAllCorrect(const std::string& what) const;

  std::vector<ref::RankRouting> routing;    // every rank's (same in every process)
  std::vector<ref::RankDispatch> expect;    // every rank's
  std::vector<RankInputs> inputs;           // every rank's
  std::vector<RankResult> results;          // filled for local ranks only

  // Direct access for tests that script their own sequence (graph capture, stress).
  RankState& rank(int r) { return *ranks_[r]; }
  const std::vector<ncclEpGroup_t>& groups() const { return groups_; }
  // Expected combine output per rank (recomputed from inputs by the reference).
  std::vector<std::vector<uint16_t>> expectedCombine() const;
  std::vector<std::vector<float>> expectedCombinedWeights() const;

 private:
  CaseConfig cfg_;
  ref::EpShape shape_;
  std::vector<ncclEpGroup_t> groups_;
  std::vector<std::unique_ptr<RankState>> ranks_;
};

// Device-side state of one rank of a session (only local ranks' are used). Methods run on that
// rank's thread.
class RankState {
 public:
  RankState(const EpSession& s, int rank) : s_(s), rank_(rank) {}
  ~RankState();
  void createHandle(ncclEpGroup_t group);
  void destroyHandle();

  // Upload this rank's topk ids into the routing buffer (stream-ordered).
  void uploadRouting(const RankContext& c, const ref::RankRouting& rt);
  // ncclEpDispatchLayout on the uploaded ids; exact mode reads the counts and sizes the outputs
  // exactly (capacity mode sized them at capacity in createHandle: nothing here allocates).
  void enqueueLayout(const RankContext& c, int numTokens);
  // (Re)sizes the dispatch outputs and combine inputs for `rows` rows (at least 1).
  void sizeOutputs(int rows);
  // Sizes the per-token buffers (inputs, biases, combine outputs) for T tokens (at least 1).
  void sizeTokens(int numTokens);
  void uploadTokens(const RankContext& c, const RankInputs& in);
  void poisonDispatchOutputs(const RankContext& c);
  void enqueueDispatch(const RankContext& c, int numTokens);
  void uploadCombineInputs(const RankContext& c, const RankInputs& in);
  void poisonCombineOutputs(const RankContext& c);
  void enqueueCombine(const RankContext& c, int numTokens);
  // Copies outputs to the host (rows [0, checkRows) of the dispatch outputs) and synchronizes.
  void downloadDispatch(const RankContext& c, int checkRows, RankResult& out);
  void downloadCombine(const RankContext& c, int numTokens, RankResult& out);

  // Device memory of one output/input: own DevBuf or the group's window.
  struct Region {
    void* p = nullptr;
    size_t bytes = 0;
  };
  Region rX() const;        // dispatch recvX
  Region rScales() const;   // dispatch recvScales
  Region rIdx() const;      // dispatch recvTopkIdx (dedup)
  Region rW() const;        // dispatch recvTopkWeights
  Region rInfo() const;     // dispatch recvSrcInfo
  Region rCombIn() const;   // combine x
  Region rCombW() const;    // combine topkWeights

  ncclEpHandle_t handle = nullptr;
  ncclEpBuffers_t win{};  // the group's window buffers (zeroCopy / pullCombine)
  int capacity = 0;
  int rows = 0;  // rows of the output buffers
  ncclEpCounts_t counts{};
  std::vector<int> hostCounts;
  // Inputs.
  DevBuf ids, w, x, scales;
  // Dispatch outputs.
  DevBuf recvX, recvScales, recvW, recvIdx, srcInfo, eCounts, eOffsets, numRecv;
  // Combine inputs / outputs.
  DevBuf combIn, combW, bias0, bias1, out, outW;

 private:
  const EpSession& s_;
  int rank_;
  int dev_ = -1;
};

// BF16 ulp distance (NaN vs anything: a large number).
int bf16UlpDiff(uint16_t a, uint16_t b);

// Standard token counts: every rank `t`.
inline std::vector<int> allTokens(int t) { return std::vector<int>(nRanks(), t); }
// Random T per rank in [lo, hi].
std::vector<int> randomTokens(int lo, int hi, Rng& rng);

// One full case: new random routing and data, layout/dispatch/combine `repeats` times (repeats > 1:
// cached dispatch, the same route dispatched and combined again with new data), checked each time.
void runCase(const CaseConfig& cfg, const std::vector<int>& tokens, const RouteSpec& rs = {}, int repeats = 1);
// The same on the given groups, with routing and data from `seed`, checks named `name`: true when
// every check passed. Exceptions of the ncclEp/CUDA calls pass through (the caller owns the groups).
bool runCaseOn(const CaseConfig& cfg, const std::vector<ncclEpGroup_t>& groups, const std::vector<int>& tokens,
               const RouteSpec& rs, int repeats, uint64_t seed, const std::string& name);

}  // namespace epx::test
