// Harness of the GPU EP tests: see ep_harness.h.
#include "ep_harness.h"

#include "epx/testing/stack_dump.h"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "epx/ref/bf16.h"

namespace epx::test {

// ---- process-wide state ------------------------------------------------------------------------

namespace {
std::unique_ptr<MultiGpu> g_gpus;
std::map<GroupSpec, std::vector<ncclEpGroup_t>> g_groups;
std::atomic<uint64_t> g_seedCounter{0};

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

int wantedRanks() {
  if (epx::testing::multiProcessRequested()) return epx::testing::mpEnv().size;
  int n = epx::testing::localGpuCount();
  if (const char* v = std::getenv("EPX_TEST_GPUS"); v && *v) n = std::min(n, std::atoi(v));
  return std::min(n, 8);
}

MultiGpu& gpus() {
  if (!g_gpus) {
    const int n = wantedRanks();
    if (n < 1) throw std::runtime_error("the GPU EP tests need >= 1 GPU");
    g_gpus = MultiGpu::create(n);
  }
  return *g_gpus;
}

int nRanks() { return gpus().size(); }
bool multiProcess() { return epx::testing::multiProcessRequested(); }

boost::test_tools::assertion_result needsPeers(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(nRanks() >= 2);
  r.message() << "needs >= 2 ranks (have " << nRanks() << ")";
  return r;
}
bool isLocal(int rank) { return gpus().isLocal(rank); }
const std::vector<int>& localRanks() { return gpus().localRanks(); }

bool quick() {
  static const bool q = [] {
    const char* v = std::getenv("EPX_TEST_QUICK");
    return v && *v && std::string(v) != "0";
  }();
  return q;
}

void shutdownGpus() {
  if (!g_gpus) return;
  if (!g_gpus->aborted()) {
    for (auto& [spec, groups] : g_groups) {
      try {
        destroyGroups(groups);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "epx tests: destroying a group failed: %s\n", e.what());
      }
    }
  }
  g_groups.clear();
  g_gpus.reset();
}

void abandonGpus() {
  if (!g_gpus) return;
  g_groups.clear();  // leaked on purpose: destroying them may wait for the dead peer
  g_gpus->abortComms();
}

uint64_t baseSeed() {
  static uint64_t seed = [] {
    uint64_t s;
    const char* v = std::getenv("EPX_TEST_SEED");
    if (v && *v) {
      s = uint64_t(std::strtoull(v, nullptr, 0));
    } else {
      std::random_device rd;
      s = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    // One process per rank: everyone takes rank 0's seed (also when the launcher did not set a
    // common EPX_TEST_SEED), so that all processes generate the same routing and data.
    if (multiProcess()) {
      const uint64_t mine = s;
      s = gpus().broadcast(s);
      if (v && *v && s != mine)
        std::fprintf(stderr, "epx tests: EPX_TEST_SEED differs from rank 0's; using rank 0's 0x%llx\n",
                     (unsigned long long)s);
    }
    return s;
  }();
  return seed;
}

uint64_t nextSeed() {
  uint64_t x = baseSeed() + 0x1000 * (++g_seedCounter);
  return splitmix(x);
}

int smCap() {
  // Several processes on one GPU (fake nodes, MPS): the CTAs of all of them spin on each other and
  // must be resident together with whatever else runs (NCCL's and the harness's own kernels), so
  // each group gets at most its share of the SMs left after a reserve, and at most a typical
  // budget: 2 processes x 66 CTAs (all 132 SMs) stalled in combine. It replaces the analytic
  // default too (which knows nothing of the other processes). EPX_TEST_MAX_SMS overrides; 0 = none.
  // The reserve: 8 processes x 16 CTAs (4 SMs left on an H200) ran 2x slower than x 14 in every
  // build measured (docs/performance.md, "8 fake nodes at 16 SMs"); 16 SMs left keeps 8 processes at 14.
  static constexpr int kReservedSms = 16, kMaxSharedBudget = 24;
  static const int cap = [] {
    if (const char* v = std::getenv("EPX_TEST_MAX_SMS"); v && *v) return std::max(0, std::atoi(v));
    const char* p = std::getenv("EPX_MP_PROCS_PER_GPU");
    const int procs = p && *p ? std::atoi(p) : 1;
    if (procs <= 1) return 0;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    return std::max(1, std::min(kMaxSharedBudget, (sms - kReservedSms) / procs));
  }();
  return cap;
}

int testHybridNodeSize() {
  static const int n = [] {
    const char* v = std::getenv("EPX_TEST_HYBRID");
    return v && *v ? std::max(0, std::atoi(v)) : 0;
  }();
  return n;
}

void directForwarding(ncclEpConfig_t& c) {
  c.forwarding = NCCL_EP_UNDEF_INT;
  c.forwardNodeSize = NCCL_EP_UNDEF_INT;
}

ncclEpConfig_t makeConfig(const GroupSpec& g) {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.maxTokensPerRank = g.maxTokens;
  c.hidden = g.hidden;
  c.topk = g.topk;
  c.numExperts = g.numExperts;
  c.fp8Dispatch = g.fp8;
  if (g.smBudget > 0) c.smBudget = g.smBudget;
  if (const int cap = smCap(); cap > 0) c.smBudget = c.smBudget > 0 ? std::min(c.smBudget, cap) : cap;
  if (g.exactCombine) c.exactCombine = 1;
  if (const int n = testHybridNodeSize(); n > 0) {
    c.forwarding = ncclEpForwardHybrid;
    c.forwardNodeSize = n;
  }
  return c;
}

std::vector<ncclEpGroup_t> createGroups(const GroupSpec& g) {
  std::vector<ncclEpGroup_t> groups(nRanks(), nullptr);
  const ncclEpConfig_t cfg = makeConfig(g);
  epx::testing::setPhase("ncclEpGroupCreate");
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  epx::testing::setPhase("between calls");
  return groups;
}

void destroyGroups(std::vector<ncclEpGroup_t>& groups) {
  epx::testing::setPhase("ncclEpGroupDestroy");
  gpus().run([&](const RankContext& c) {
    if (groups[c.rank]) EPX_CHECK_EP(ncclEpGroupDestroy(groups[c.rank]));
    groups[c.rank] = nullptr;
  });
}

const std::vector<ncclEpGroup_t>& groupFor(const GroupSpec& g) {
  auto it = g_groups.find(g);
  if (it != g_groups.end()) return it->second;
  return g_groups.emplace(g, createGroups(g)).first->second;
}

void evictAllGroups() {
  std::vector<GroupSpec> specs;
  for (const auto& kv : g_groups) specs.push_back(kv.first);
  for (const GroupSpec& g : specs) evictGroup(g);
}

void evictGroup(const GroupSpec& g) {
  auto it = g_groups.find(g);
  if (it == g_groups.end()) return;
  try {
    destroyGroups(it->second);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epx tests: destroying a failed group: %s\n", e.what());
  }
  g_groups.erase(it);
}

std::string asyncErrors(const std::vector<ncclEpGroup_t>& groups) {
  std::string all;
  for (size_t r = 0; r < groups.size(); ++r) {
    if (!isLocal(int(r))) continue;
    ncclResult_t e = ncclSuccess;
    char msg[512] = {0};
    ncclResult_t rc = ncclEpGroupGetAsyncError(groups[r], &e, msg, sizeof(msg));
    if (rc != ncclSuccess)
      all += "rank " + std::to_string(r) + ": ncclEpGroupGetAsyncError failed: " + ncclEpGetLastError() + "; ";
    else if (e != ncclSuccess)
      all += "rank " + std::to_string(r) + ": async error " + std::to_string(int(e)) + ": " + msg + "; ";
  }
  return all;
}

bool anyRankAsyncError(const std::vector<ncclEpGroup_t>& groups) {
  return gpus().anyRank(!asyncErrors(groups).empty());
}

// ---- random data -------------------------------------------------------------------------------

Rng::Rng(uint64_t seed) {
  for (auto& v : s) v = splitmix(seed);
}

uint64_t Rng::next() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

int Rng::uniform(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
double Rng::unit() { return double(next() >> 11) * 0x1p-53; }

std::vector<uint16_t> randomBf16(size_t n, Rng& rng) {
  std::vector<uint16_t> v(n);
  size_t i = 0;
  while (i < n) {
    uint64_t b = rng.next();
    for (int j = 0; j < 4 && i < n; ++j, b >>= 16) {
      uint16_t sign = uint16_t(b & 0x8000);
      uint16_t mant = uint16_t(b & 0x7f);
      uint16_t ex = uint16_t(121 + ((b >> 7) & 7) % 7);  // 2^-6 .. 2^0
      v[i++] = uint16_t(sign | (ex << 7) | mant);
    }
  }
  return v;
}

std::vector<uint8_t> randomFp8(size_t n, Rng& rng) {
  std::vector<uint8_t> v(n);
  size_t i = 0;
  while (i < n) {
    uint64_t b = rng.next();
    for (int j = 0; j < 8 && i < n; ++j, b >>= 8) {
      uint8_t x = uint8_t(b);
      if ((x & 0x7f) == 0x7f) x ^= 1;  // e4m3 NaN -> 0x7e / 0xfe
      v[i++] = x;
    }
  }
  return v;
}

std::vector<ref::RankRouting> makeRouting(const GroupSpec& g, const std::vector<int>& tokens, const RouteSpec& rs,
                                          Rng& rng) {
  const int R = int(tokens.size()), K = g.topk, E = g.numExperts, Le = E / R;
  std::vector<ref::RankRouting> rt(R);
  std::vector<int64_t> perm;
  int lo = 0, hi = E;  // experts to draw from
  if (rs.kind == RouteKind::RankSkewed) lo = (R - 1) * Le, hi = E;
  for (int e = lo; e < hi; ++e) perm.push_back(e);
  const int n = int(perm.size());
  const int single = rs.singleExpert >= 0 ? rs.singleExpert : E - 1;
  for (int r = 0; r < R; ++r) {
    const int T = tokens[r];
    rt[r].numTokens = T;
    rt[r].topkIdx.assign(size_t(T) * K, -1);
    rt[r].topkWeights.resize(size_t(T) * K);
    for (auto& w : rt[r].topkWeights) w = float(rng.uniform(1, 1 << 20)) * 0x1p-20f;
    for (int t = 0; t < T; ++t) {
      int64_t* ids = &rt[r].topkIdx[size_t(t) * K];
      if (rs.kind == RouteKind::SingleExpert) {
        ids[rng.uniform(0, K - 1)] = single;
        continue;
      }
      for (int k = 0; k < K && k < n; ++k) {  // partial Fisher-Yates: K distinct experts
        int j = rng.uniform(k, n - 1);
        std::swap(perm[k], perm[j]);
        ids[k] = perm[k];
      }
      for (int k = 0; k < K; ++k)
        if (rs.maskProb > 0 && rng.unit() < rs.maskProb) ids[k] = -1;
      if (rs.fullyMaskedToken && t == 0)
        for (int k = 0; k < K; ++k) ids[k] = -1;
    }
  }
  return rt;
}

std::vector<int> randomTokens(int lo, int hi, Rng& rng) {
  std::vector<int> t(nRanks());
  for (auto& v : t) v = rng.uniform(lo, hi);
  return t;
}

int bf16UlpDiff(uint16_t a, uint16_t b) {
  auto nan = [](uint16_t v) { return (v & 0x7f80) == 0x7f80 && (v & 0x7f); };
  if (nan(a) || nan(b)) return 1 << 20;
  auto ord = [](uint16_t v) { return (v & 0x8000) ? -int(v & 0x7fff) : int(v); };
  return std::abs(ord(a) - ord(b));
}

// ---- device buffers ----------------------------------------------------------------------------

DevBuf::~DevBuf() { release(); }

void DevBuf::release() {
  if (!p_) return;
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != dev_) cudaSetDevice(dev_);
  cudaFree(p_);
  if (cur != dev_ && cur >= 0) cudaSetDevice(cur);
  p_ = nullptr;
  n_ = 0;
}

void DevBuf::reserve(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  if (p_ && n_ >= bytes) return;
  release();
  EPX_CHECK_CUDA(cudaGetDevice(&dev_));
  EPX_CHECK_CUDA(cudaMalloc(&p_, bytes));
  n_ = bytes;
}

// ---- CaseConfig --------------------------------------------------------------------------------

std::string CaseConfig::describe() const {
  std::ostringstream os;
  os << "H=" << g.hidden << " K=" << g.topk << " E=" << g.numExperts << " maxT=" << g.maxTokens
     << (g.smBudget ? " sms=" + std::to_string(g.smBudget) : std::string()) << " "
     << (layout == ncclEpLayoutExpanded ? "expanded" : "dedup") << " "
     << (mode == ncclEpModeExact ? "exact" : "capacity") << " align=" << alignment << " zeroGaps=" << zeroGaps
     << (fp8 ? " fp8" : " bf16") << (int64Ids ? " ids64" : " ids32") << " weights=" << dispatchWeights
     << " optOut=" << optionalOutputs << " bias=" << numBias << " combW=" << combineWeights
     << (zeroCopy ? " zeroCopy=" + std::to_string(zeroCopy) : std::string()) << (pullCombine ? " pull" : "")
     << (g.exactCombine ? " exactCombine" : "") << (combineFp32 ? " fp32comb" : "");
  return os.str();
}

// ---- RankState ---------------------------------------------------------------------------------

RankState::~RankState() {
  if (handle) ncclEpHandleDestroy(handle);
}

void RankState::createHandle(ncclEpGroup_t group) {
  EPX_CHECK_CUDA(cudaGetDevice(&dev_));
  const CaseConfig& cfg = s_.cfg();
  ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
  hc.layout = cfg.layout;
  hc.mode = cfg.mode;
  hc.expertAlignment = cfg.alignment;
  hc.zeroGaps = cfg.zeroGaps;
  hc.combinePrecision = cfg.combineFp32 ? ncclEpCombineFp32 : ncclEpCombineBf16Partials;
  EPX_CHECK_EP(ncclEpHandleCreate(group, &hc, &handle));
  EPX_CHECK_EP(ncclEpHandleGetCapacity(handle, &capacity));
  if (capacity < 1) throw std::runtime_error("ncclEpHandleGetCapacity returned " + std::to_string(capacity));
  if (cfg.zeroCopy || cfg.pullCombine) {
    EPX_CHECK_EP(ncclEpGroupGetBuffers(group, &win));
    if (!win.recvX || !win.combineX || !win.recvTopkIdx || !win.recvTopkWeights || !win.recvSrcInfo ||
        (cfg.fp8 && !win.recvScales) || win.rows < cfg.g.maxTokens * s_.shape().nRanks)
      throw std::runtime_error("ncclEpGroupGetBuffers returned incomplete buffers (rows " + std::to_string(win.rows) + ")");
  }
  if (cfg.mode == ncclEpModeCapacity) sizeOutputs(capacity);
  sizeTokens(cfg.g.maxTokens);
}

void RankState::destroyHandle() {
  if (handle) {
    ncclEpHandle_t h = handle;
    handle = nullptr;
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  }
  for (DevBuf* b : {&ids, &w, &x, &scales, &recvX, &recvScales, &recvW, &recvIdx, &srcInfo, &eCounts, &eOffsets,
                    &numRecv, &combIn, &combW, &bias0, &bias1, &out, &outW})
    b->release();
}

RankState::Region RankState::rX() const {
  if (s_.cfg().zeroCopy) return {win.recvX, size_t(win.rows) * s_.rowBytes()};
  return {recvX.ptr(), recvX.size()};
}
RankState::Region RankState::rScales() const {
  if (!s_.cfg().fp8) return {};
  if (s_.cfg().zeroCopy >= 2) return {win.recvScales, size_t(win.rows) * s_.scaleCols() * 4};
  return {recvScales.ptr(), recvScales.size()};
}
RankState::Region RankState::rIdx() const {
  if (s_.cfg().layout != ncclEpLayoutDeduplicated) return {};
  if (s_.cfg().zeroCopy >= 2) return {win.recvTopkIdx, size_t(win.rows) * s_.cfg().g.topk * 4};
  return {recvIdx.ptr(), recvIdx.size()};
}
RankState::Region RankState::rW() const {
  if (s_.cfg().zeroCopy >= 2) return {win.recvTopkWeights, size_t(win.rows) * s_.cfg().g.topk * 4};
  return {recvW.ptr(), recvW.size()};
}
RankState::Region RankState::rInfo() const {
  if (s_.cfg().zeroCopy >= 2) return {win.recvSrcInfo, size_t(win.rows) * 8};
  return {srcInfo.ptr(), srcInfo.size()};
}
RankState::Region RankState::rCombIn() const {
  if (s_.cfg().pullCombine) return {win.combineX, size_t(win.rows) * s_.cfg().g.hidden * 2};
  return {combIn.ptr(), combIn.size()};
}
RankState::Region RankState::rCombW() const {
  if (s_.cfg().pullCombine) return {win.recvTopkWeights, size_t(win.rows) * s_.cfg().g.topk * 4};
  return {combW.ptr(), combW.size()};
}

void RankState::sizeOutputs(int r) {
  const CaseConfig& cfg = s_.cfg();
  const size_t n = size_t(std::max(r, 1)), H = cfg.g.hidden, K = cfg.g.topk, Le = s_.shape().localExperts();
  const bool dedup = cfg.layout == ncclEpLayoutDeduplicated;
  rows = int(n);
  recvX.reserve(n * s_.rowBytes());
  if (cfg.fp8) recvScales.reserve(n * s_.scaleCols() * 4);
  recvW.reserve(n * (dedup ? K : 1) * 4);
  if (dedup) recvIdx.reserve(n * K * 4);
  srcInfo.reserve(n * 2 * 4);
  eCounts.reserve(Le * 4);
  eOffsets.reserve((Le + 1) * 4);
  numRecv.reserve(4);
  combIn.reserve(n * H * 2);
  combW.reserve(n * (dedup ? K : 1) * 4);
}

void RankState::sizeTokens(int T) {
  const CaseConfig& cfg = s_.cfg();
  const size_t n = size_t(std::max(T, 1)), H = cfg.g.hidden, K = cfg.g.topk;
  ids.reserve(n * K * 8);
  w.reserve(n * K * 4);
  x.reserve(n * s_.rowBytes());
  if (cfg.fp8) scales.reserve(n * s_.scaleCols() * 4);
  bias0.reserve(n * H * 2);
  bias1.reserve(n * H * 2);
  out.reserve(n * H * 2);
  outW.reserve(n * K * 4);
}

namespace {
template <class T>
void upload(DevBuf& d, const std::vector<T>& h, cudaStream_t s) {
  if (h.empty()) return;
  d.reserve(h.size() * sizeof(T));
  EPX_CHECK_CUDA(cudaMemcpyAsync(d.ptr(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}
template <class T>
void download(std::vector<T>& h, const RankState::Region& d, size_t count, cudaStream_t s) {
  h.resize(count);
  if (count == 0) return;
  if (!d.p || d.bytes < count * sizeof(T)) throw std::runtime_error("download larger than the device buffer");
  EPX_CHECK_CUDA(cudaMemcpyAsync(h.data(), d.p, count * sizeof(T), cudaMemcpyDeviceToHost, s));
}
template <class T>
void download(std::vector<T>& h, const DevBuf& d, size_t count, cudaStream_t s) {
  download(h, RankState::Region{d.ptr(), d.size()}, count, s);
}
void poison(const RankState::Region& d, int byte, size_t bytes, cudaStream_t s) {
  if (d.p && bytes) EPX_CHECK_CUDA(cudaMemsetAsync(d.p, byte, std::min(bytes, d.bytes), s));
}
void poison(DevBuf& d, int byte, size_t bytes, cudaStream_t s) { poison(RankState::Region{d.ptr(), d.size()}, byte, bytes, s); }
// Host staging must outlive the async copies: kept per thread until the next upload.
thread_local std::vector<int32_t> t_ids32;
thread_local std::vector<int64_t> t_ids64;
}  // namespace

void RankState::uploadRouting(const RankContext& c, const ref::RankRouting& rt) {
  sizeTokens(rt.numTokens);
  if (s_.cfg().int64Ids) {
    t_ids64 = rt.topkIdx;
    upload(ids, t_ids64, c.stream);
  } else {
    t_ids32.assign(rt.topkIdx.begin(), rt.topkIdx.end());
    upload(ids, t_ids32, c.stream);
  }
  upload(w, rt.topkWeights, c.stream);
}

void RankState::enqueueLayout(const RankContext& c, int T) {
  ncclEpRouting_t rt{};
  rt.topkIdx = ids.ptr();
  rt.topkIdxType = s_.cfg().int64Ids ? ncclInt64 : ncclInt32;
  rt.numTokens = T;
  EPX_CHECK_EP(ncclEpDispatchLayout(handle, &rt, c.stream));
  if (s_.cfg().mode == ncclEpModeExact) {
    EPX_CHECK_EP(ncclEpHandleGetCounts(handle, &counts));
    hostCounts.assign(counts.expertCounts, counts.expertCounts + std::max(counts.numLocalExperts, 0));
    sizeOutputs(counts.numRows);
  }
}

void RankState::uploadTokens(const RankContext& c, const RankInputs& in) {
  upload(x, in.x, c.stream);
  upload(scales, in.scales, c.stream);
}

void RankState::poisonDispatchOutputs(const RankContext& c) {
  const CaseConfig& cfg = s_.cfg();
  const size_t n = size_t(rows), K = cfg.g.topk, Le = s_.shape().localExperts();
  const bool dedup = cfg.layout == ncclEpLayoutDeduplicated;
  poison(rX(), 0xff, n * s_.rowBytes(), c.stream);  // BF16 0xffff and e4m3 0xff are NaN
  if (cfg.fp8) poison(rScales(), 0xff, n * s_.scaleCols() * 4, c.stream);
  poison(rW(), 0xff, n * (dedup ? K : 1) * 4, c.stream);
  if (dedup) poison(rIdx(), 0xab, n * K * 4, c.stream);  // 0xabababab: no valid id
  poison(rInfo(), 0xab, n * 8, c.stream);
  if (cfg.zeroCopy == 1) {  // the window's row arrays too (the copies come from there)
    poison(Region{win.recvTopkWeights, size_t(win.rows) * K * 4}, 0xff, n * K * 4, c.stream);
    poison(Region{win.recvTopkIdx, size_t(win.rows) * K * 4}, 0xab, n * K * 4, c.stream);
    poison(Region{win.recvSrcInfo, size_t(win.rows) * 8}, 0xab, n * 8, c.stream);
  }
  poison(eCounts, 0xab, Le * 4, c.stream);
  poison(eOffsets, 0xab, (Le + 1) * 4, c.stream);
  poison(numRecv, 0xab, 4, c.stream);
}

void RankState::enqueueDispatch(const RankContext& c, int T) {
  const CaseConfig& cfg = s_.cfg();
  const bool opt = cfg.mode == ncclEpModeCapacity || cfg.optionalOutputs;
  ncclEpDispatchInputs_t in{};
  in.x = x.ptr();
  in.xType = cfg.fp8 ? ncclFloat8e4m3 : ncclBfloat16;
  in.xScales = cfg.fp8 ? scales.as<float>() : nullptr;
  in.topkWeights = cfg.dispatchWeights ? w.as<float>() : nullptr;
  in.hidden = cfg.shapeChecks ? cfg.g.hidden : 0;
  const bool rowOut = cfg.zeroCopy != 3;  // zeroCopy 3: row outputs NULL, read from the window
  ncclEpDispatchOutputs_t o{};
  o.recvX = rX().p;
  o.recvScales = cfg.fp8 ? static_cast<float*>(rScales().p) : nullptr;
  o.recvTopkWeights = cfg.dispatchWeights && rowOut ? static_cast<float*>(rW().p) : nullptr;
  o.recvTopkIdx = cfg.layout == ncclEpLayoutDeduplicated && rowOut ? static_cast<int32_t*>(rIdx().p) : nullptr;
  o.recvSrcInfo = opt && rowOut ? static_cast<int32_t*>(rInfo().p) : nullptr;
  o.expertCounts = opt ? eCounts.as<int32_t>() : nullptr;
  o.expertOffsets = opt ? eOffsets.as<int32_t>() : nullptr;
  o.numRecvRows = opt ? numRecv.as<int32_t>() : nullptr;
  o.numRows = cfg.shapeChecks ? rows : 0;
  (void)T;
  EPX_CHECK_EP(ncclEpDispatch(handle, &in, &o, c.stream));
}

void RankState::uploadCombineInputs(const RankContext& c, const RankInputs& in) {
  const CaseConfig& cfg = s_.cfg();
  const size_t H = cfg.g.hidden, K = cfg.g.topk;
  const bool dedup = cfg.layout == ncclEpLayoutDeduplicated;
  // Rows the reference does not fill (beyond its row count) stay NaN: combine must not read them.
  const Region ci = rCombIn();
  poison(ci, 0xff, size_t(rows) * H * 2, c.stream);
  const size_t nIn = std::min(in.expertOut.size(), ci.bytes / 2);
  if (nIn) EPX_CHECK_CUDA(cudaMemcpyAsync(ci.p, in.expertOut.data(), nIn * 2, cudaMemcpyHostToDevice, c.stream));
  if (!cfg.pullCombine) {  // pull: the combine weights are the dispatched ones, in the window
    poison(combW, 0xff, size_t(rows) * (dedup ? K : 1) * 4, c.stream);
    const size_t nW = std::min(in.combW.size(), combW.size() / 4);
    if (nW) EPX_CHECK_CUDA(cudaMemcpyAsync(combW.ptr(), in.combW.data(), nW * 4, cudaMemcpyHostToDevice, c.stream));
  }
  upload(bias0, in.bias0, c.stream);
  upload(bias1, in.bias1, c.stream);
}

void RankState::poisonCombineOutputs(const RankContext& c) {
  const CaseConfig& cfg = s_.cfg();
  poison(out, 0xff, out.size(), c.stream);
  if (cfg.combineWeights) poison(outW, 0xff, outW.size(), c.stream);
}

void RankState::enqueueCombine(const RankContext& c, int T) {
  const CaseConfig& cfg = s_.cfg();
  ncclEpCombineInputs_t in{};
  in.x = rCombIn().p;
  in.xType = ncclBfloat16;
  in.bias0 = cfg.numBias >= 1 ? bias0.ptr() : nullptr;
  in.bias1 = cfg.numBias >= 2 ? bias1.ptr() : nullptr;
  in.topkWeights = cfg.combineWeights ? static_cast<float*>(rCombW().p) : nullptr;
  in.numRows = cfg.shapeChecks ? rows : 0;
  in.hidden = cfg.shapeChecks ? cfg.g.hidden : 0;
  ncclEpCombineOutputs_t o{};
  o.out = out.ptr();
  o.combinedTopkWeights = cfg.combineWeights ? outW.as<float>() : nullptr;
  o.numTokens = cfg.shapeChecks ? T : 0;
  EPX_CHECK_EP(ncclEpCombine(handle, &in, &o, c.stream));
}

void RankState::downloadDispatch(const RankContext& c, int checkRows, RankResult& res) {
  const CaseConfig& cfg = s_.cfg();
  const bool opt = cfg.mode == ncclEpModeCapacity || cfg.optionalOutputs;
  const bool dedup = cfg.layout == ncclEpLayoutDeduplicated;
  const size_t n = size_t(std::max(0, std::min(checkRows, rows))), K = cfg.g.topk, Le = s_.shape().localExperts();
  res.capacity = capacity;
  res.allocRows = rows;
  res.counts = counts;
  res.hostCounts = hostCounts;
  const bool fromWindow = cfg.zeroCopy == 3;
  auto w = [&](void* p, size_t bytes) { return Region{p, bytes}; };
  download(res.recvX, rX(), n * s_.rowBytes(), c.stream);
  if (cfg.fp8) download(res.recvScales, rScales(), n * s_.scaleCols(), c.stream);
  if (cfg.dispatchWeights)
    download(res.recvW, fromWindow ? w(win.recvTopkWeights, size_t(win.rows) * K * 4) : rW(), n * (dedup ? K : 1), c.stream);
  if (dedup) download(res.recvIdx, fromWindow ? w(win.recvTopkIdx, size_t(win.rows) * K * 4) : rIdx(), n * K, c.stream);
  if (opt) {
    download(res.srcInfo, fromWindow ? w(win.recvSrcInfo, size_t(win.rows) * 8) : rInfo(), n * 2, c.stream);
    download(res.eCounts, eCounts, Le, c.stream);
    download(res.eOffsets, eOffsets, Le + 1, c.stream);
    EPX_CHECK_CUDA(cudaMemcpyAsync(&res.numRecvRows, numRecv.ptr(), 4, cudaMemcpyDeviceToHost, c.stream));
  }
  EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
}

void RankState::downloadCombine(const RankContext& c, int T, RankResult& res) {
  const CaseConfig& cfg = s_.cfg();
  download(res.combOut, out, size_t(T) * cfg.g.hidden, c.stream);
  if (cfg.combineWeights) download(res.combOutW, outW, size_t(T) * cfg.g.topk, c.stream);
  EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
}

// ---- EpSession ---------------------------------------------------------------------------------

EpSession::EpSession(const CaseConfig& cfg, const std::vector<ncclEpGroup_t>* groups) : cfg_(cfg) {
  if (cfg.fp8 && !cfg.g.fp8) throw std::logic_error("FP8 dispatch needs GroupSpec::fp8 = 1");
  if ((cfg.zeroCopy || cfg.pullCombine) && cfg.layout != ncclEpLayoutDeduplicated)
    throw std::logic_error("zeroCopy / pullCombine need the deduplicated layout");
  if (cfg.pullCombine && cfg.combineWeights && !cfg.dispatchWeights)
    throw std::logic_error("pullCombine with combined weights needs dispatched weights");
  if (cfg.combineFp32 && !cfg.g.exactCombine) throw std::logic_error("combineFp32 needs GroupSpec::exactCombine = 1");
  groups_ = groups ? *groups : groupFor(cfg.g);
  const int R = nRanks();
  shape_.nRanks = R;
  shape_.hidden = cfg.g.hidden;
  shape_.topk = cfg.g.topk;
  shape_.numExperts = cfg.g.numExperts;
  shape_.expertAlignment = cfg.layout == ncclEpLayoutExpanded ? cfg.alignment : 1;
  shape_.expanded = cfg.layout == ncclEpLayoutExpanded;
  shape_.fp32Partials = cfg.combineFp32;
  for (int r = 0; r < R; ++r) ranks_.push_back(std::make_unique<RankState>(*this, r));
  results.resize(R);
  inputs.resize(R);
  epx::testing::setPhase("handle create");
  gpus().run([&](const RankContext& c) { ranks_[c.rank]->createHandle(groups_[c.rank]); });
  epx::testing::setPhase("between calls");
}

EpSession::~EpSession() {
  try {
    epx::testing::setPhase("handle destroy");
    gpus().run([&](const RankContext& c) { ranks_[c.rank]->destroyHandle(); });
    epx::testing::setPhase("between calls");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epx tests: destroying a session failed: %s\n", e.what());
  }
}

void EpSession::setRouting(std::vector<ref::RankRouting> rt) {
  routing = std::move(rt);
  for (const auto& r : routing) {
    std::string err = ref::validateRouting(shape_, r);
    if (!err.empty()) throw std::logic_error("test generated invalid routing: " + err);
  }
  expect = ref::dispatch(shape_, routing);
}

void EpSession::randomRouting(const std::vector<int>& tokens, const RouteSpec& rs, Rng& rng) {
  setRouting(makeRouting(cfg_.g, tokens, rs, rng));
}

void EpSession::randomData(Rng& rng) {
  const int R = nRanks();
  const size_t H = cfg_.g.hidden, K = cfg_.g.topk;
  for (int r = 0; r < R; ++r) {
    RankInputs& in = inputs[r];
    const size_t T = size_t(routing[r].numTokens);
    if (cfg_.fp8) {
      in.x = randomFp8(T * H, rng);
      in.scales.resize(T * scaleCols());
      for (auto& s : in.scales) s = float(rng.uniform(1, 1 << 16)) * 0x1p-12f;
    } else {
      auto b = randomBf16(T * H, rng);
      in.x.resize(b.size() * 2);
      if (!b.empty()) std::memcpy(in.x.data(), b.data(), b.size() * 2);
      in.scales.clear();
    }
    const ref::RankDispatch& e = expect[r];
    const size_t rows = size_t(e.numRows);
    in.expertOut = randomBf16(rows * H, rng);
    for (size_t row = 0; row < rows; ++row)
      if (e.srcRank[row] < 0) std::fill_n(&in.expertOut[row * H], H, uint16_t(0xffff));  // gap: NaN
    if (shape_.expanded) {
      in.combW.resize(rows);
      for (size_t row = 0; row < rows; ++row)
        in.combW[row] = e.srcRank[row] < 0 ? NAN : float(rng.uniform(1, 1 << 20)) * 0x1p-20f;
    } else {
      in.combW.resize(rows * K);
      for (size_t i = 0; i < rows * K; ++i)
        in.combW[i] = e.recvTopkIdx[i] < 0 ? NAN : float(rng.uniform(1, 1 << 20)) * 0x1p-20f;  // non-local: ignored
    }
    if (cfg_.pullCombine) in.combW = e.recvWeights;  // combine weights = the dispatched ones (window)
    in.bias0 = cfg_.numBias >= 1 ? randomBf16(T * H, rng) : std::vector<uint16_t>{};
    in.bias1 = cfg_.numBias >= 2 ? randomBf16(T * H, rng) : std::vector<uint16_t>{};
  }
}

void EpSession::layout() {
  epx::testing::setPhase("EpSession::layout (upload, enqueue, download)");
  gpus().run([&](const RankContext& c) {
    RankState& st = *ranks_[c.rank];
    st.uploadRouting(c, routing[c.rank]);
    st.enqueueLayout(c, routing[c.rank].numTokens);
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    results[c.rank].counts = st.counts;
    results[c.rank].hostCounts = st.hostCounts;
    results[c.rank].capacity = st.capacity;
  });
}

void EpSession::dispatch() {
  epx::testing::setPhase("EpSession::dispatch (upload, enqueue, download)");
  gpus().run([&](const RankContext& c) {
    RankState& st = *ranks_[c.rank];
    st.uploadTokens(c, inputs[c.rank]);
    st.poisonDispatchOutputs(c);
    st.enqueueDispatch(c, routing[c.rank].numTokens);
    st.downloadDispatch(c, expect[c.rank].numRows, results[c.rank]);
  });
}

void EpSession::combine() {
  epx::testing::setPhase("EpSession::combine (upload, enqueue, download)");
  gpus().run([&](const RankContext& c) {
    RankState& st = *ranks_[c.rank];
    st.uploadCombineInputs(c, inputs[c.rank]);
    st.poisonCombineOutputs(c);
    st.enqueueCombine(c, routing[c.rank].numTokens);
    st.downloadCombine(c, routing[c.rank].numTokens, results[c.rank]);
  });
}

std::vector<std::vector<uint16_t>> EpSession::expectedCombine() const {
  const int R = nRanks();
  std::vector<std::vector<uint16_t>> eo(R), b0, b1;
  for (int r = 0; r < R; ++r) eo[r] = inputs[r].expertOut;
  if (cfg_.numBias >= 1)
    for (int r = 0; r < R; ++r) b0.push_back(inputs[r].bias0);
  if (cfg_.numBias >= 2)
    for (int r = 0; r < R; ++r) b1.push_back(inputs[r].bias1);
  // Hybrid (EPX_TEST_HYBRID): every node's partials are summed at its forwarder first.
  return ref::combine(shape_, routing, expect, eo, b0, b1, ref::CombinePath{testHybridNodeSize()});
}

std::vector<std::vector<float>> EpSession::expectedCombinedWeights() const {
  std::vector<std::vector<float>> w;
  for (const auto& in : inputs) w.push_back(in.combW);
  return ref::combineWeights(shape_, routing, expect, w);
}

namespace {
struct Errors {
  std::ostringstream os;
  long count = 0;
  template <class... A>
  void add(A&&... a) {
    if (count++ < 8) {
      ((os << a), ...);
      os << "; ";
    }
  }
  std::string str() const {
    if (!count) return {};
    return std::to_string(count) + " mismatches: " + os.str();
  }
};
bool sameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
}  // namespace

std::string EpSession::checkDispatch() const {
  const int R = nRanks(), K = cfg_.g.topk, Le = shape_.localExperts();
  const size_t rb = size_t(rowBytes()), sc = size_t(scaleCols());
  const bool dedup = !shape_.expanded;
  const bool opt = cfg_.mode == ncclEpModeCapacity || cfg_.optionalOutputs;
  Errors err;
  for (int r = 0; r < R; ++r) {
    if (!isLocal(r)) continue;  // another process checks its own rank
    const ref::RankDispatch& e = expect[r];
    const RankResult& res = results[r];
    if (cfg_.mode == ncclEpModeExact) {
      if (res.counts.numRows != e.numRows) err.add("rank ", r, " counts.numRows ", res.counts.numRows, " != ", e.numRows);
      if (res.counts.numTokens != e.numTokens)
        err.add("rank ", r, " counts.numTokens ", res.counts.numTokens, " != ", e.numTokens);
      if (res.counts.numLocalExperts != Le)
        err.add("rank ", r, " counts.numLocalExperts ", res.counts.numLocalExperts, " != ", Le);
      if (res.hostCounts != std::vector<int>(e.expertCounts.begin(), e.expertCounts.end()))
        err.add("rank ", r, " counts.expertCounts differ");
    } else if (res.capacity < e.numRows) {
      err.add("rank ", r, " capacity ", res.capacity, " < rows needed ", e.numRows);
    }
    if (opt) {
      if (res.numRecvRows != e.numRows) err.add("rank ", r, " numRecvRows ", res.numRecvRows, " != ", e.numRows);
      for (int le = 0; le < Le && le < int(res.eCounts.size()); ++le)
        if (res.eCounts[le] != e.expertCounts[le])
          err.add("rank ", r, " expertCounts[", le, "] ", res.eCounts[le], " != ", e.expertCounts[le]);
      for (int le = 0; le <= Le && le < int(res.eOffsets.size()); ++le)
        if (res.eOffsets[le] != e.expertOffsets[le])
          err.add("rank ", r, " expertOffsets[", le, "] ", res.eOffsets[le], " != ", e.expertOffsets[le]);
    }
    const size_t rows = std::min(size_t(e.numRows), res.recvX.size() / std::max<size_t>(rb, 1));
    if (rows < size_t(e.numRows)) {
      err.add("rank ", r, " only ", rows, " rows available to check of ", e.numRows);
      continue;
    }
    for (size_t row = 0; row < rows; ++row) {
      const int src = e.srcRank[row], t = e.srcToken[row];
      const uint8_t* got = &res.recvX[row * rb];
      if (src < 0) {  // alignment gap
        if (cfg_.zeroGaps && std::any_of(got, got + rb, [](uint8_t b) { return b != 0; }))
          err.add("rank ", r, " gap row ", row, " not zeroed");
        continue;
      }
      if (std::memcmp(got, &inputs[src].x[size_t(t) * rb], rb) != 0)
        err.add("rank ", r, " row ", row, " recvX differs from rank ", src, " token ", t);
      if (cfg_.fp8 && std::memcmp(&res.recvScales[row * sc], &inputs[src].scales[size_t(t) * sc], sc * 4) != 0)
        err.add("rank ", r, " row ", row, " recvScales differ from rank ", src, " token ", t);
      if (cfg_.dispatchWeights) {
        if (dedup) {
          for (int k = 0; k < K; ++k)
            if (!sameBits(res.recvW[row * K + k], e.recvWeights[row * K + k]))
              err.add("rank ", r, " row ", row, " recvTopkWeights[", k, "] ", res.recvW[row * K + k],
                      " != ", e.recvWeights[row * K + k]);
        } else if (!sameBits(res.recvW[row], e.recvWeights[row])) {
          err.add("rank ", r, " row ", row, " recvTopkWeights ", res.recvW[row], " != ", e.recvWeights[row]);
        }
      }
      if (dedup)
        for (int k = 0; k < K; ++k)
          if (res.recvIdx[row * K + k] != e.recvTopkIdx[row * K + k])
            err.add("rank ", r, " row ", row, " recvTopkIdx[", k, "] ", res.recvIdx[row * K + k], " != ",
                    e.recvTopkIdx[row * K + k]);
      if (opt && (res.srcInfo[row * 2] != src || res.srcInfo[row * 2 + 1] != t))
        err.add("rank ", r, " row ", row, " recvSrcInfo (", res.srcInfo[row * 2], ",", res.srcInfo[row * 2 + 1],
                ") != (", src, ",", t, ")");
    }
  }
  return err.str();
}

std::string EpSession::checkCombine(int maxUlp, double* maxErrOut, int* maxUlpOut) const {
  const int R = nRanks(), H = cfg_.g.hidden, K = cfg_.g.topk;
  auto want = expectedCombine();
  Errors err;
  double maxErr = 0;
  int maxU = 0;
  for (int r = 0; r < R; ++r) {
    if (!isLocal(r)) continue;
    const size_t n = size_t(routing[r].numTokens) * H;
    if (results[r].combOut.size() != n) {
      err.add("rank ", r, " combine output has ", results[r].combOut.size(), " values, want ", n);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      int u = bf16UlpDiff(results[r].combOut[i], want[r][i]);
      maxU = std::max(maxU, u);
      double d = std::fabs(double(ref::bf16ToFloat(results[r].combOut[i])) - double(ref::bf16ToFloat(want[r][i])));
      if (!(d <= maxErr)) maxErr = std::isnan(d) ? INFINITY : std::max(maxErr, d);
      if (u > maxUlp)
        err.add("rank ", r, " token ", i / H, " ch ", i % H, ": got ", ref::bf16ToFloat(results[r].combOut[i]),
                " want ", ref::bf16ToFloat(want[r][i]), " (", u, " ulp)");
    }
  }
  if (cfg_.combineWeights) {
    auto ww = expectedCombinedWeights();
    for (int r = 0; r < R; ++r) {
      if (!isLocal(r)) continue;
      const size_t n = size_t(routing[r].numTokens) * K;
      if (results[r].combOutW.size() != n) {
        err.add("rank ", r, " combined weights missing");
        continue;
      }
      for (size_t i = 0; i < n; ++i)
        if (!(results[r].combOutW[i] == ww[r][i]))
          err.add("rank ", r, " token ", i / K, " slot ", i % K, ": combined weight ", results[r].combOutW[i],
                  " want ", ww[r][i]);
    }
  }
  if (maxErrOut) *maxErrOut = maxErr;
  if (maxUlpOut) *maxUlpOut = maxU;
  return err.str();
}

bool EpSession::expectAllCorrect(const std::string& what) const {
  std::string d = checkDispatch();
  BOOST_CHECK_MESSAGE(d.empty(), what << ": dispatch: " << d);
  double maxErr = 0;
  int maxU = 0;
  std::string c = checkCombine(1, &maxErr, &maxU);
  BOOST_CHECK_MESSAGE(c.empty(), what << ": combine: " << c);
  BOOST_TEST_MESSAGE(what << ": combine max error " << maxErr << " (" << maxU << " BF16 ulp)");
  std::string a = asyncErrors(groups_);
  BOOST_CHECK_MESSAGE(a.empty(), what << ": " << a);
  return d.empty() && c.empty() && a.empty();
}

bool runCaseOn(const CaseConfig& cfg, const std::vector<ncclEpGroup_t>& groups, const std::vector<int>& tokens,
               const RouteSpec& rs, int repeats, uint64_t seed, const std::string& name) {
  Rng rng(seed);
  EpSession s(cfg, &groups);
  s.randomRouting(tokens, rs, rng);
  s.layout();
  bool ok = true;
  for (int rep = 0; rep < repeats; ++rep) {
    s.randomData(rng);
    s.dispatch();
    s.combine();
    ok = s.expectAllCorrect(name + (repeats > 1 ? " (dispatch #" + std::to_string(rep) + ")" : "")) && ok;
  }
  return ok;
}

void runCase(const CaseConfig& cfg, const std::vector<int>& tokens, const RouteSpec& rs, int repeats) {
  const uint64_t seed = nextSeed();
  std::ostringstream name;
  name << cfg.describe() << " T=[";
  for (size_t i = 0; i < tokens.size(); ++i) name << (i ? "," : "") << tokens[i];
  name << "] mask=" << rs.maskProb << " seed=" << seed;
  BOOST_TEST_MESSAGE("case " << name.str());
  bool broken = false;
  try {
    const auto& groups = groupFor(cfg.g);
    runCaseOn(cfg, groups, tokens, rs, repeats, seed, name.str());
    broken = anyRankAsyncError(groups);  // every process evicts, or none
  } catch (...) {
    // A failed collective can leave the group with a device-side timeout: later cases get fresh
    // groups instead of failing in cascade.
    evictGroup(cfg.g);
    throw;
  }
  if (broken) evictGroup(cfg.g);
}

}  // namespace epx::test
