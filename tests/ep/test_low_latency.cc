// GPU suite low_latency: ncclEpLowLatencyDispatch / ncclEpLowLatencyCombine (ep_ll.h) on every rank
// of the job (1 rank, all local GPUs, or fake nodes), against the CPU reference (host/ref ll_ref.h)
// with poisoned outputs: received rows (BF16 bit-exact, FP8 bytes and scales bit-exact), counts and
// sources; the combine of a host "expert" (row * (1 + e/64), rounded to BF16) bit-exact.
// EPX_TEST_QUICK=1 trims the lists (fewer shapes, 50 graph replays instead of 1000).
#include <cuda_runtime.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/ep_ll.h"
#include "epx/window.h"
#include "epx/ref/bf16.h"
#include "epx/ref/ll_ref.h"

using namespace epx::testing;
using namespace epx::test;

namespace {

struct LlSpec {
  int maxTokens = 128, hidden = 2048, topk = 8, experts = 16, fp8 = 1;
};

struct LlCase {
  int tokens = 32;           // every rank
  bool fp8 = false, roundScale = false, int32Ids = false;
  double maskProb = 0.1;
  int singleExpert = -1;     // >= 0: every token of every rank to this expert only
  bool invalidIds = false;   // some slots out of range or repeated (dropped and reported)
  bool split = false;        // send half, other work on the stream, receive half on another stream
  bool zeroCopy = false;     // combine input written into the group's buffer (ncclEpLowLatencyGetCombineBuffer)
  std::string describe() const {
    std::ostringstream os;
    os << "T=" << tokens << (fp8 ? (roundScale ? " fp8/ue8m0" : " fp8") : " bf16") << " mask=" << maskProb
       << (singleExpert >= 0 ? " one-expert" : "") << (invalidIds ? " bad-ids" : "") << (split ? " split" : "") << (zeroCopy ? " zero-copy" : "");
    return os.str();
  }
};

// Experts for the job's ranks: at least perRank per rank and at least topk in total.
int expertsFor(int perRank, int topk) {
  const int R = nRanks();
  return R * std::max(perRank, (topk + R - 1) / R);
}

// The low-latency group config of this spec.
ncclEpConfig_t llConfig(const LlSpec& s) {
  GroupSpec gs;
  gs.maxTokens = s.maxTokens;
  gs.hidden = s.hidden;
  gs.topk = s.topk;
  gs.numExperts = s.experts;
  gs.fp8 = s.fp8;
  ncclEpConfig_t cfg = makeConfig(gs);
  cfg.algorithm = ncclEpAlgoLowLatency;
  directForwarding(cfg);  // EPX_TEST_HYBRID applies to high-throughput groups only
  return cfg;
}

std::vector<ncclEpGroup_t> createLlGroups(const LlSpec& s) {
  const ncclEpConfig_t cfg = llConfig(s);
  std::vector<ncclEpGroup_t> groups(nRanks(), nullptr);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  return groups;
}

epx::ref::LlShape refShape(const LlSpec& s) {
  epx::ref::LlShape r;
  r.nRanks = nRanks();
  r.maxTokens = s.maxTokens;
  r.hidden = s.hidden;
  r.topk = s.topk;
  r.numExperts = s.experts;
  return r;
}

// Inputs of every rank (identical in every process).
struct LlInputs {
  std::vector<epx::ref::LlRouting> routing;
  std::vector<std::vector<uint16_t>> x;     // [T, H]
  std::vector<std::vector<float>> weights;  // [T, K]
};

LlInputs makeInputs(const LlSpec& s, const LlCase& cs, Rng& rng) {
  LlInputs in;
  const int R = nRanks(), K = s.topk, E = s.experts;
  for (int r = 0; r < R; ++r) {
    epx::ref::LlRouting rt;
    rt.numTokens = cs.tokens;
    rt.topkIdx.assign(size_t(cs.tokens) * K, -1);
    for (int t = 0; t < cs.tokens; ++t) {
      if (cs.singleExpert >= 0) {
        rt.topkIdx[size_t(t) * K + rng.uniform(0, K - 1)] = cs.singleExpert;
        continue;
      }
      std::vector<int> perm(E);
      for (int e = 0; e < E; ++e) perm[e] = e;
      for (int k = 0; k < K; ++k) {
        std::swap(perm[k], perm[rng.uniform(k, E - 1)]);
        if (rng.unit() >= cs.maskProb) rt.topkIdx[size_t(t) * K + k] = perm[k];
      }
      if (cs.invalidIds && t % 5 == 1) rt.topkIdx[size_t(t) * K + rng.uniform(0, K - 1)] = t % 2 ? E + t : -5;
      if (cs.invalidIds && t % 7 == 2 && K > 1) rt.topkIdx[size_t(t) * K + K - 1] = rt.topkIdx[size_t(t) * K];
    }
    in.routing.push_back(rt);
    in.x.push_back(randomBf16(size_t(cs.tokens) * s.hidden, rng));
    std::vector<float> w(size_t(cs.tokens) * K);
    for (float& v : w) v = float(rng.uniform(-64, 64)) / 32.f;
    in.weights.push_back(w);
  }
  return in;
}

// The host "expert": expert e's output for an input channel value v.
float expertFactor(int e) { return 1.f + float(e) / 64.f; }

// Expected BF16 expert output of token t of rank src for expert e (what combine returns).
std::vector<uint16_t> expertRow(const LlSpec& s, const LlCase& cs, const LlInputs& in, int src, int t, int e) {
  const int H = s.hidden;
  const uint16_t* x = in.x[src].data() + size_t(t) * H;
  std::vector<uint16_t> y(H);
  if (!cs.fp8) {
    for (int c = 0; c < H; ++c) y[c] = epx::ref::floatToBf16(epx::ref::bf16ToFloat(x[c]) * expertFactor(e));
    return y;
  }
  std::vector<uint8_t> q(H);
  std::vector<float> sc(H / 128);
  epx::ref::llCastRowFp8(x, H, cs.roundScale, q.data(), sc.data());
  for (int c = 0; c < H; ++c) {
    const float v = epx::ref::fp8E4m3ToFloat(q[c]) * sc[c / 128];
    y[c] = epx::ref::floatToBf16(v * expertFactor(e));
  }
  return y;
}

// Device buffers of one rank.
struct LlBuffers {
  DevBuf x, ids, w, recvX, recvScales, recvCount, srcInfo, combIn, out;
  void size(const LlSpec& s, int Le, int rowsPer, int maxT) {
    const size_t rows = size_t(Le) * rowsPer;
    x.reserve(size_t(maxT) * s.hidden * 2);
    ids.reserve(size_t(maxT) * s.topk * 8);
    w.reserve(size_t(maxT) * s.topk * 4);
    recvX.reserve(rows * s.hidden * 2);
    recvScales.reserve(rows * (s.hidden / 128) * 4);
    recvCount.reserve(size_t(Le) * 4);
    srcInfo.reserve(rows * 3 * 4);
    combIn.reserve(rows * s.hidden * 2);
    out.reserve(size_t(maxT) * s.hidden * 2);
  }
};

struct RankOut {
  std::vector<int32_t> count, srcInfo;
  std::vector<uint8_t> recvX;
  std::vector<float> recvScales;
  std::vector<uint16_t> out;
};

void uploadInputs(const LlCase& cs, const LlSpec& s, const LlInputs& in, int r, LlBuffers& b, cudaStream_t st) {
  const int T = cs.tokens, K = s.topk;
  if (T == 0) return;
  EPX_CHECK_CUDA(cudaMemcpyAsync(b.x.ptr(), in.x[r].data(), size_t(T) * s.hidden * 2, cudaMemcpyHostToDevice, st));
  if (cs.int32Ids) {
    std::vector<int32_t> ids(in.routing[r].topkIdx.begin(), in.routing[r].topkIdx.end());
    EPX_CHECK_CUDA(cudaMemcpyAsync(b.ids.ptr(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, st));
    EPX_CHECK_CUDA(cudaStreamSynchronize(st));
  } else {
    EPX_CHECK_CUDA(cudaMemcpyAsync(b.ids.ptr(), in.routing[r].topkIdx.data(), size_t(T) * K * 8, cudaMemcpyHostToDevice, st));
  }
  EPX_CHECK_CUDA(cudaMemcpyAsync(b.w.ptr(), in.weights[r].data(), size_t(T) * K * 4, cudaMemcpyHostToDevice, st));
}

ncclEpLowLatencyDispatchInputs_t dispatchIn(const LlCase& cs, LlBuffers& b) {
  ncclEpLowLatencyDispatchInputs_t d{};
  d.x = b.x.ptr();
  d.topkIdx = b.ids.ptr();
  d.topkIdxType = cs.int32Ids ? ncclInt32 : ncclInt64;
  d.numTokens = cs.tokens;
  d.useFp8 = cs.fp8;
  d.roundScale = cs.roundScale;
  return d;
}

ncclEpLowLatencyDispatchOutputs_t dispatchOut(const LlCase& cs, LlBuffers& b) {
  ncclEpLowLatencyDispatchOutputs_t o{};
  o.recvX = b.recvX.ptr();
  o.recvScales = cs.fp8 ? b.recvScales.as<float>() : nullptr;
  o.recvCount = b.recvCount.as<int32_t>();
  o.recvSrcInfo = b.srcInfo.as<int32_t>();
  return o;
}

// Runs `halves` of an op: both at once, or send, other work, receive on a second stream.
template <class Call>
void runHalves(bool split, cudaStream_t st, DevBuf& scratch, Call call) {
  if (!split) {
    EPX_CHECK_EP(call(NCCL_EP_LL_SEND_RECV, st));
    return;
  }
  EPX_CHECK_EP(call(NCCL_EP_LL_SEND, st));
  // Other work between the halves: a memset kernel over a scratch buffer.
  EPX_CHECK_CUDA(cudaMemsetAsync(scratch.ptr(), 0x5a, scratch.size(), st));
  cudaStream_t other;
  cudaEvent_t ev;
  EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  EPX_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  EPX_CHECK_CUDA(cudaEventRecord(ev, st));
  EPX_CHECK_CUDA(cudaStreamWaitEvent(other, ev, 0));
  EPX_CHECK_EP(call(NCCL_EP_LL_RECV, other));
  EPX_CHECK_CUDA(cudaEventRecord(ev, other));
  EPX_CHECK_CUDA(cudaStreamWaitEvent(st, ev, 0));
  EPX_CHECK_CUDA(cudaStreamSynchronize(other));
  cudaEventDestroy(ev);
  cudaStreamDestroy(other);
}

// Checks one rank's dispatch output against the reference; "" when it matches.
std::string checkDispatch(const LlSpec& s, const LlCase& cs, const LlInputs& in, int rank, const RankOut& o) {
  const epx::ref::LlShape sh = refShape(s);
  const epx::ref::LlReceived want = epx::ref::llDispatchRows(sh, in.routing, rank);
  const int Le = sh.localExperts(), rowsPer = sh.rowsPerExpert(), H = s.hidden, rowBytes = H * (cs.fp8 ? 1 : 2);
  std::ostringstream err;
  for (int le = 0; le < Le && err.str().empty(); ++le) {
    if (o.count[le] != int(want.rows[le].size())) {
      err << "rank " << rank << " expert " << le << ": count " << o.count[le] << ", expected " << want.rows[le].size();
      break;
    }
    for (int j = 0; j < o.count[le]; ++j) {
      const size_t row = size_t(le) * rowsPer + j;
      const epx::ref::LlRow& w = want.rows[le][j];
      if (o.srcInfo[row * 3] != w.srcRank || o.srcInfo[row * 3 + 1] != w.token || o.srcInfo[row * 3 + 2] != w.slot) {
        err << "rank " << rank << " expert " << le << " row " << j << ": source (" << o.srcInfo[row * 3] << ","
            << o.srcInfo[row * 3 + 1] << "," << o.srcInfo[row * 3 + 2] << "), expected (" << w.srcRank << ","
            << w.token << "," << w.slot << ")";
        break;
      }
      const uint16_t* x = in.x[w.srcRank].data() + size_t(w.token) * H;
      const uint8_t* got = o.recvX.data() + row * rowBytes;
      if (!cs.fp8) {
        if (std::memcmp(got, x, rowBytes) != 0) {
          err << "rank " << rank << " expert " << le << " row " << j << ": BF16 payload differs";
          break;
        }
        continue;
      }
      std::vector<uint8_t> q(H);
      std::vector<float> sc(H / 128);
      epx::ref::llCastRowFp8(x, H, cs.roundScale, q.data(), sc.data());
      if (std::memcmp(got, q.data(), H) != 0 ||
          std::memcmp(o.recvScales.data() + row * (H / 128), sc.data(), sc.size() * 4) != 0) {
        err << "rank " << rank << " expert " << le << " row " << j << ": FP8 bytes or scales differ";
        break;
      }
    }
  }
  return err.str();
}

// Expert outputs of one rank in the dispatch layout (rows past the counts: NaN, never read).
std::vector<uint16_t> expertOutputs(const LlSpec& s, const LlCase& cs, const LlInputs& in, int rank, const RankOut& o) {
  const epx::ref::LlShape sh = refShape(s);
  const int Le = sh.localExperts(), rowsPer = sh.rowsPerExpert(), H = s.hidden;
  std::vector<uint16_t> y(size_t(Le) * rowsPer * H, 0x7fc0);
  for (int le = 0; le < Le; ++le)
    for (int j = 0; j < o.count[le]; ++j) {
      const size_t row = size_t(le) * rowsPer + j;
      const auto r = expertRow(s, cs, in, o.srcInfo[row * 3], o.srcInfo[row * 3 + 1], rank * Le + le);
      std::memcpy(y.data() + row * H, r.data(), size_t(H) * 2);
    }
  return y;
}

std::string checkCombine(const LlSpec& s, const LlCase& cs, const LlInputs& in, int rank, const RankOut& o) {
  const epx::ref::LlShape sh = refShape(s);
  const auto& rt = in.routing[rank];
  std::vector<std::vector<uint16_t>> rows(size_t(rt.numTokens) * s.topk);
  auto row = [&](int t, int k) -> const uint16_t* {
    auto& r = rows[size_t(t) * s.topk + k];
    if (r.empty()) r = expertRow(s, cs, in, rank, t, epx::ref::llSlotExpert(sh, rt, t, k));
    return r.data();
  };
  const std::vector<uint16_t> want = epx::ref::llCombine(sh, rt, in.weights[rank], row);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != o.out[i]) {
      std::ostringstream err;
      err << "rank " << rank << " combine token " << i / s.hidden << " channel " << i % s.hidden << ": 0x" << std::hex
          << o.out[i] << ", expected 0x" << want[i];
      return err.str();
    }
  return {};
}

void downloadDispatch(const LlSpec& s, const LlCase& cs, int Le, int rowsPer, LlBuffers& b, cudaStream_t st, RankOut& o) {
  const size_t rows = size_t(Le) * rowsPer;
  o.count.resize(Le);
  o.srcInfo.resize(rows * 3);
  o.recvX.resize(rows * s.hidden * (cs.fp8 ? 1 : 2));
  o.recvScales.resize(cs.fp8 ? rows * (s.hidden / 128) : 0);
  EPX_CHECK_CUDA(cudaStreamSynchronize(st));
  EPX_CHECK_CUDA(cudaMemcpy(o.count.data(), b.recvCount.ptr(), size_t(Le) * 4, cudaMemcpyDeviceToHost));
  EPX_CHECK_CUDA(cudaMemcpy(o.srcInfo.data(), b.srcInfo.ptr(), o.srcInfo.size() * 4, cudaMemcpyDeviceToHost));
  EPX_CHECK_CUDA(cudaMemcpy(o.recvX.data(), b.recvX.ptr(), o.recvX.size(), cudaMemcpyDeviceToHost));
  if (cs.fp8)
    EPX_CHECK_CUDA(cudaMemcpy(o.recvScales.data(), b.recvScales.ptr(), o.recvScales.size() * 4, cudaMemcpyDeviceToHost));
}

void poison(LlBuffers& b, cudaStream_t st) {
  EPX_CHECK_CUDA(cudaMemsetAsync(b.recvX.ptr(), 0xff, b.recvX.size(), st));
  EPX_CHECK_CUDA(cudaMemsetAsync(b.recvScales.ptr(), 0xff, b.recvScales.size(), st));
  EPX_CHECK_CUDA(cudaMemsetAsync(b.recvCount.ptr(), 0xf7, b.recvCount.size(), st));
  EPX_CHECK_CUDA(cudaMemsetAsync(b.srcInfo.ptr(), 0xf7, b.srcInfo.size(), st));
  EPX_CHECK_CUDA(cudaMemsetAsync(b.out.ptr(), 0xff, b.out.size(), st));
}

// One case on the given groups: dispatch, host expert, combine; both checked on every local rank.
// Returns "" or the first mismatch.
std::string runLlCase(const LlSpec& s, const std::vector<ncclEpGroup_t>& groups, const LlCase& cs) {
  Rng rng(nextSeed());
  const LlInputs in = makeInputs(s, cs, rng);
  const int R = nRanks(), Le = s.experts / R, rowsPer = R * s.maxTokens;
  std::vector<std::string> errs(R);
  gpus().run([&](const RankContext& c) {
    LlBuffers b;
    DevBuf scratch;
    scratch.reserve(size_t(64) << 20);
    b.size(s, Le, rowsPer, s.maxTokens);
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &h));
    uploadInputs(cs, s, in, c.rank, b, c.stream);
    poison(b, c.stream);
    ncclEpLowLatencyDispatchInputs_t din = dispatchIn(cs, b);
    ncclEpLowLatencyDispatchOutputs_t dout = dispatchOut(cs, b);
    runHalves(cs.split, c.stream, scratch, [&](int f, cudaStream_t st) { return ncclEpLowLatencyDispatch(h, &din, &dout, f, st); });
    RankOut o;
    downloadDispatch(s, cs, Le, rowsPer, b, c.stream, o);
    errs[c.rank] = checkDispatch(s, cs, in, c.rank, o);
    const std::vector<uint16_t> y = expertOutputs(s, cs, in, c.rank, o);
    void* combX = b.combIn.ptr();
    if (cs.zeroCopy) EPX_CHECK_EP(ncclEpLowLatencyGetCombineBuffer(groups[c.rank], &combX));
    // On the op's stream: a blocking cudaMemcpy from pageable memory may return before its DMA
    // lands, and c.stream does not wait for the legacy stream (it is non-blocking).
    EPX_CHECK_CUDA(cudaMemcpyAsync(combX, y.data(), y.size() * 2, cudaMemcpyHostToDevice, c.stream));
    ncclEpLowLatencyCombineInputs_t cin{combX, b.w.as<float>()};
    ncclEpLowLatencyCombineOutputs_t cout{b.out.ptr()};
    runHalves(cs.split, c.stream, scratch, [&](int f, cudaStream_t st) { return ncclEpLowLatencyCombine(h, &cin, &cout, f, st); });
    o.out.resize(size_t(cs.tokens) * s.hidden);
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    if (!o.out.empty()) EPX_CHECK_CUDA(cudaMemcpy(o.out.data(), b.out.ptr(), o.out.size() * 2, cudaMemcpyDeviceToHost));
    if (errs[c.rank].empty()) errs[c.rank] = checkCombine(s, cs, in, c.rank, o);
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  for (const auto& e : errs)
    if (!e.empty()) return e;
  return {};
}

void expectCase(const LlSpec& s, const std::vector<ncclEpGroup_t>& groups, const LlCase& cs) {
  const std::string err = runLlCase(s, groups, cs);
  BOOST_TEST_INFO("H=" << s.hidden << " K=" << s.topk << " E=" << s.experts << " " << cs.describe());
  BOOST_TEST(err == "");
  if (!cs.invalidIds) BOOST_TEST(asyncErrors(groups) == "");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(low_latency)

BOOST_AUTO_TEST_CASE(token_counts_dtypes_and_masks) {
  LlSpec s;
  s.experts = expertsFor(nRanks() < 8 ? 8 : 4, s.topk);
  auto groups = createLlGroups(s);
  std::vector<int> tokens = {0, 1, 7, 128};
  if (quick()) tokens = {0, 7, 128};
  for (int T : tokens)
    for (int fp8 : {0, 1}) {
      LlCase cs;
      cs.tokens = T;
      cs.fp8 = fp8;
      expectCase(s, groups, cs);
    }
  LlCase cs;
  cs.fp8 = true;
  cs.roundScale = true;
  expectCase(s, groups, cs);
  cs = LlCase{};
  cs.maskProb = 0.5;
  cs.int32Ids = true;
  expectCase(s, groups, cs);
  cs = LlCase{};
  cs.tokens = 100;
  cs.singleExpert = s.experts - 1;  // all tokens of all ranks to one expert
  expectCase(s, groups, cs);
  cs.singleExpert = 0;
  cs.fp8 = true;
  expectCase(s, groups, cs);
  destroyGroups(groups);
}

BOOST_AUTO_TEST_CASE(hidden_sizes_and_topk) {
  struct Shape {
    int hidden, topk, experts, tokens;
  };
  const int R = nRanks();
  const int e32 = (32 + R - 1) / R * R;  // >= 22 experts for top-22, a multiple of the EP size
  std::vector<Shape> shapes = {{4096, 8, 8 * R, 32}, {7168, 8, 4 * R, 64}, {8192, 1, 2 * R, 16}, {2048, 22, e32, 40}};
  if (quick()) shapes = {{7168, 8, 4 * R, 32}, {2048, 22, e32, 16}};
  for (const Shape& sh : shapes) {
    LlSpec s;
    s.hidden = sh.hidden;
    s.topk = sh.topk;
    s.experts = std::max(sh.experts, expertsFor(1, sh.topk));
    s.maxTokens = 64;
    auto groups = createLlGroups(s);
    for (int fp8 : {0, 1}) {
      LlCase cs;
      cs.tokens = sh.tokens;
      cs.fp8 = fp8;
      expectCase(s, groups, cs);
    }
    destroyGroups(groups);
  }
}

BOOST_AUTO_TEST_CASE(max_tokens_per_rank) {
  LlSpec s;
  s.maxTokens = quick() ? 256 : 1024;
  s.topk = 4;
  s.experts = expertsFor(2, s.topk);
  auto groups = createLlGroups(s);
  LlCase cs;
  cs.tokens = s.maxTokens;
  expectCase(s, groups, cs);
  cs.fp8 = true;
  expectCase(s, groups, cs);
  destroyGroups(groups);
}

// Groups created and destroyed back to back, one checked call each: a signal still in flight from
// a destroyed group (e.g. the last receive half's bank frees) must not count for the next group,
// which may get the same NCCL signal ids (destroy drains them: host/src/link.cc linkDrain).
BOOST_AUTO_TEST_CASE(group_churn) {
  LlSpec s;
  s.experts = expertsFor(4, s.topk);
  const int groupsInARow = quick() ? 10 : 40;
  for (int i = 0; i < groupsInARow; ++i) {
    auto groups = createLlGroups(s);
    LlCase cs;
    cs.fp8 = i % 2 == 1;
    BOOST_TEST_CONTEXT("group " << i) { expectCase(s, groups, cs); }
    destroyGroups(groups);
  }
}

BOOST_AUTO_TEST_CASE(send_receive_split) {
  LlSpec s;
  s.experts = expertsFor(4, s.topk);
  auto groups = createLlGroups(s);
  for (int fp8 : {0, 1}) {
    LlCase cs;
    cs.split = true;
    cs.fp8 = fp8;
    expectCase(s, groups, cs);
  }
  // Zero-copy combine input (the group's buffer), whole calls and split.
  for (int split : {0, 1}) {
    LlCase cs;
    cs.zeroCopy = true;
    cs.split = split;
    expectCase(s, groups, cs);
  }
  destroyGroups(groups);
}

// Slots with ids out of range or repeated are dropped (the reference drops them too) and reported.
BOOST_AUTO_TEST_CASE(invalid_ids_dropped_and_reported) {
  LlSpec s;
  s.experts = expertsFor(4, s.topk);
  auto groups = createLlGroups(s);
  LlCase cs;
  cs.invalidIds = true;
  cs.maskProb = 0;
  expectCase(s, groups, cs);
  std::vector<std::string> msgs(nRanks());
  gpus().run([&](const RankContext& c) {
    ncclResult_t a = ncclSuccess;
    char msg[512] = {};
    EPX_CHECK_EP(ncclEpGroupGetAsyncError(groups[c.rank], &a, msg, sizeof(msg)));
    msgs[c.rank] = std::to_string(int(a)) + ": " + msg;
  });
  for (int r : localRanks()) {
    BOOST_TEST_INFO("rank " << r << ": " << msgs[r]);
    BOOST_TEST(msgs[r].rfind(std::to_string(int(ncclInvalidArgument)) + ":", 0) == 0);
    BOOST_TEST(msgs[r].find("expert id") != std::string::npos);
  }
  destroyGroups(groups);
}

// Two handles used alternately on one group (two micro-batches): send A, send B, receive A,
// receive B, then the combines the same way; banks alternate, nothing is shared (the bank comes
// from the group's sequence, not the handle).
BOOST_AUTO_TEST_CASE(two_handles_alternating) {
  LlSpec s;
  s.experts = expertsFor(4, s.topk);
  s.maxTokens = 64;
  auto groups = createLlGroups(s);
  const int rounds = quick() ? 3 : 10;
  for (int round = 0; round < rounds; ++round) {
    Rng rng(nextSeed());
    LlCase ca, cb;
    ca.tokens = 48;
    cb.tokens = 17;
    cb.fp8 = round % 2;
    const LlInputs ia = makeInputs(s, ca, rng), ib = makeInputs(s, cb, rng);
    const int R = nRanks(), Le = s.experts / R, rowsPer = R * s.maxTokens;
    std::vector<std::string> errs(R);
    gpus().run([&](const RankContext& c) {
      LlBuffers ba, bb;
      ba.size(s, Le, rowsPer, s.maxTokens);
      bb.size(s, Le, rowsPer, s.maxTokens);
      ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
      ncclEpHandle_t ha = nullptr, hb = nullptr;
      EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &ha));
      EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &hb));
      uploadInputs(ca, s, ia, c.rank, ba, c.stream);
      uploadInputs(cb, s, ib, c.rank, bb, c.stream);
      poison(ba, c.stream);
      poison(bb, c.stream);
      auto dina = dispatchIn(ca, ba), dinb = dispatchIn(cb, bb);
      auto douta = dispatchOut(ca, ba), doutb = dispatchOut(cb, bb);
      EPX_CHECK_EP(ncclEpLowLatencyDispatch(ha, &dina, &douta, NCCL_EP_LL_SEND, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyDispatch(hb, &dinb, &doutb, NCCL_EP_LL_SEND, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyDispatch(ha, &dina, &douta, NCCL_EP_LL_RECV, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyDispatch(hb, &dinb, &doutb, NCCL_EP_LL_RECV, c.stream));
      RankOut oa, ob;
      downloadDispatch(s, ca, Le, rowsPer, ba, c.stream, oa);
      downloadDispatch(s, cb, Le, rowsPer, bb, c.stream, ob);
      errs[c.rank] = checkDispatch(s, ca, ia, c.rank, oa);
      if (errs[c.rank].empty()) errs[c.rank] = checkDispatch(s, cb, ib, c.rank, ob);
      const auto ya = expertOutputs(s, ca, ia, c.rank, oa), yb = expertOutputs(s, cb, ib, c.rank, ob);
      EPX_CHECK_CUDA(cudaMemcpyAsync(ba.combIn.ptr(), ya.data(), ya.size() * 2, cudaMemcpyHostToDevice, c.stream));
      EPX_CHECK_CUDA(cudaMemcpyAsync(bb.combIn.ptr(), yb.data(), yb.size() * 2, cudaMemcpyHostToDevice, c.stream));
      ncclEpLowLatencyCombineInputs_t cina{ba.combIn.ptr(), ba.w.as<float>()}, cinb{bb.combIn.ptr(), bb.w.as<float>()};
      ncclEpLowLatencyCombineOutputs_t couta{ba.out.ptr()}, coutb{bb.out.ptr()};
      EPX_CHECK_EP(ncclEpLowLatencyCombine(ha, &cina, &couta, NCCL_EP_LL_SEND, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyCombine(hb, &cinb, &coutb, NCCL_EP_LL_SEND, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyCombine(ha, &cina, &couta, NCCL_EP_LL_RECV, c.stream));
      EPX_CHECK_EP(ncclEpLowLatencyCombine(hb, &cinb, &coutb, NCCL_EP_LL_RECV, c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      oa.out.resize(size_t(ca.tokens) * s.hidden);
      ob.out.resize(size_t(cb.tokens) * s.hidden);
      EPX_CHECK_CUDA(cudaMemcpy(oa.out.data(), ba.out.ptr(), oa.out.size() * 2, cudaMemcpyDeviceToHost));
      EPX_CHECK_CUDA(cudaMemcpy(ob.out.data(), bb.out.ptr(), ob.out.size() * 2, cudaMemcpyDeviceToHost));
      if (errs[c.rank].empty()) errs[c.rank] = checkCombine(s, ca, ia, c.rank, oa);
      if (errs[c.rank].empty()) errs[c.rank] = checkCombine(s, cb, ib, c.rank, ob);
      EPX_CHECK_EP(ncclEpHandleDestroy(ha));
      EPX_CHECK_EP(ncclEpHandleDestroy(hb));
    });
    for (int r : localRanks()) {
      BOOST_TEST_INFO("round " << round << " rank " << r);
      BOOST_TEST(errs[r] == "");
    }
  }
  BOOST_TEST(asyncErrors(groups) == "");
  destroyGroups(groups);
}

// dispatch -> (identity expert: combine reads the dispatch output) -> combine captured once per
// rank as a CUDA graph (split halves inside), replayed with new routing and data each time.
BOOST_AUTO_TEST_CASE(graph_replays_with_changing_routing) {
  LlSpec s;
  s.maxTokens = 32;
  s.hidden = 1024;
  s.topk = 4;
  s.experts = expertsFor(4, s.topk);
  auto groups = createLlGroups(s);
  const int replays = quick() ? 50 : 1000;
  const int R = nRanks(), Le = s.experts / R, rowsPer = R * s.maxTokens;
  LlCase cs;
  cs.tokens = 24;
  cs.maskProb = 0.2;
  std::vector<std::unique_ptr<LlBuffers>> bufs(R);
  std::vector<ncclEpHandle_t> handles(R, nullptr);
  std::vector<cudaGraphExec_t> execs(R, nullptr);
  gpus().run([&](const RankContext& c) {
    bufs[c.rank] = std::make_unique<LlBuffers>();
    LlBuffers& b = *bufs[c.rank];
    b.size(s, Le, rowsPer, s.maxTokens);
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &handles[c.rank]));
    auto din = dispatchIn(cs, b);
    auto dout = dispatchOut(cs, b);
    ncclEpLowLatencyCombineInputs_t cin{b.recvX.ptr(), b.w.as<float>()};
    ncclEpLowLatencyCombineOutputs_t cout{b.out.ptr()};
    cudaGraph_t graph;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    EPX_CHECK_EP(ncclEpLowLatencyDispatch(handles[c.rank], &din, &dout, NCCL_EP_LL_SEND, c.stream));
    EPX_CHECK_EP(ncclEpLowLatencyDispatch(handles[c.rank], &din, &dout, NCCL_EP_LL_RECV, c.stream));
    EPX_CHECK_EP(ncclEpLowLatencyCombine(handles[c.rank], &cin, &cout, NCCL_EP_LL_SEND_RECV, c.stream));
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &graph));
    EPX_CHECK_CUDA(cudaGraphInstantiate(&execs[c.rank], graph, 0));
    EPX_CHECK_CUDA(cudaGraphDestroy(graph));
  });
  // The identity expert returns each token's own row: combine gives sum_k w_k * x_t (FP32, slot order).
  const epx::ref::LlShape sh = refShape(s);
  int failures = 0;
  for (int i = 0; i < replays && failures < 3; ++i) {
    Rng rng(nextSeed());
    const LlInputs in = makeInputs(s, cs, rng);
    std::vector<std::string> errs(R);
    gpus().run([&](const RankContext& c) {
      LlBuffers& b = *bufs[c.rank];
      uploadInputs(cs, s, in, c.rank, b, c.stream);
      EPX_CHECK_CUDA(cudaMemsetAsync(b.out.ptr(), 0xff, b.out.size(), c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(execs[c.rank], c.stream));
      RankOut o;
      downloadDispatch(s, cs, Le, rowsPer, b, c.stream, o);
      errs[c.rank] = checkDispatch(s, cs, in, c.rank, o);
      o.out.resize(size_t(cs.tokens) * s.hidden);
      EPX_CHECK_CUDA(cudaMemcpy(o.out.data(), b.out.ptr(), o.out.size() * 2, cudaMemcpyDeviceToHost));
      const auto& rt = in.routing[c.rank];
      auto row = [&](int t, int) { return in.x[c.rank].data() + size_t(t) * s.hidden; };
      if (errs[c.rank].empty() && epx::ref::llCombine(sh, rt, in.weights[c.rank], row) != o.out)
        errs[c.rank] = "rank " + std::to_string(c.rank) + ": combine output differs";
    });
    for (int r : localRanks())
      if (!errs[r].empty()) {
        ++failures;
        BOOST_TEST_INFO("replay " << i);
        BOOST_TEST(errs[r] == "");
      }
  }
  BOOST_TEST_MESSAGE("low_latency graph: " << replays << " replays checked, " << failures << " failed");
  BOOST_TEST(asyncErrors(groups) == "");
  gpus().run([&](const RankContext& c) {
    cudaGraphExecDestroy(execs[c.rank]);
    EPX_CHECK_EP(ncclEpHandleDestroy(handles[c.rank]));
    bufs[c.rank].reset();
  });
  destroyGroups(groups);
}

// A low-latency group and a high-throughput group in one planned window (epx/window.h): one
// registration, two regions; each group's traffic checked while the other holds its region.
BOOST_AUTO_TEST_CASE(planned_window_beside_a_high_throughput_group) {
  evictAllGroups();  // the cached groups of other suites hold windows of their own
  LlSpec s;
  s.maxTokens = 64;
  s.experts = expertsFor(4, s.topk);
  GroupSpec ht;
  ht.maxTokens = 64;
  ht.hidden = 1024;
  ht.topk = 4;
  ht.numExperts = 8 * nRanks();
  const ncclEpConfig_t htCfg = makeConfig(ht);
  const ncclEpConfig_t llCfg = llConfig(s);  // what createLlGroups creates
  std::vector<std::string> errs(static_cast<size_t>(nRanks()));
  gpus().run([&](const RankContext& c) {
    ncclEpWindowPlan_t p = NCCL_EP_WINDOW_PLAN_INITIALIZER;
    EPX_CHECK_EP(ncclEpWindowPlanAddGroup(c.comm, &llCfg, &p));
    EPX_CHECK_EP(ncclEpWindowPlanAddGroup(c.comm, &htCfg, &p));
    EPX_CHECK_EP(ncclEpWindowCreate(c.comm, &p));
  });
  auto llGroups = createLlGroups(s);
  auto htGroups = createGroups(ht);
  gpus().run([&](const RankContext& c) {
    ncclEpWindowInfo_t i{};
    EPX_CHECK_EP(ncclEpWindowGetInfo(c.comm, &i));
    if (i.windows != 1 || !i.planned || i.objects != 2 || i.bytesUsed > i.bytes)
      errs[size_t(c.rank)] = "two groups in the planned window: windows " + std::to_string(i.windows) + ", objects " +
                             std::to_string(i.objects) + ", bytes " + std::to_string(i.bytesUsed) + " of " +
                             std::to_string(i.bytes);
  });
  for (int r : localRanks()) BOOST_TEST(errs[size_t(r)] == "", errs[size_t(r)]);
  CaseConfig hc;
  hc.g = ht;
  for (int round = 0; round < 2; ++round) {
    for (int fp8 : {0, 1}) {
      LlCase cs;
      cs.fp8 = fp8;
      expectCase(s, llGroups, cs);
    }
    BOOST_TEST(runCaseOn(hc, htGroups, allTokens(48), {}, 1, nextSeed(), "HT beside an LL group in one window"));
  }
  destroyGroups(htGroups);
  destroyGroups(llGroups);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpWindowDestroy(c.comm)); });
}

// Host-side refusals before anything is launched (no communication: every rank fails alike).
BOOST_AUTO_TEST_CASE(host_side_errors) {
  LlSpec s;
  s.experts = expertsFor(2, s.topk);
  s.fp8 = 0;
  // hidden 2880 is not a multiple of 128: ncclEpGroupCreate refuses before any exchange.
  std::vector<int> created(nRanks(), -1);
  gpus().run([&](const RankContext& c) {
    GroupSpec gs;
    gs.hidden = 2880;
    gs.numExperts = s.experts;
    ncclEpConfig_t cfg = makeConfig(gs);
    cfg.algorithm = ncclEpAlgoLowLatency;
    directForwarding(cfg);  // EPX_TEST_HYBRID applies to high-throughput groups only
    ncclEpGroup_t g = nullptr;
    created[c.rank] = int(ncclEpGroupCreate(c.comm, &cfg, &g));
    BOOST_TEST_MESSAGE("hidden 2880: " << ncclEpGetLastError());
  });
  for (int r : localRanks()) BOOST_TEST(created[r] == int(ncclInvalidArgument));
  auto groups = createLlGroups(s);
  const int R = nRanks(), Le = s.experts / R, rowsPer = R * s.maxTokens;
  std::vector<std::vector<int>> codes(R);
  gpus().run([&](const RankContext& c) {
    LlBuffers b;
    b.size(s, Le, rowsPer, s.maxTokens);
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &h));
    LlCase cs;
    auto din = dispatchIn(cs, b);
    auto dout = dispatchOut(cs, b);
    auto& out = codes[c.rank];
    din.numTokens = s.maxTokens + 1;
    out.push_back(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream));  // tokens > max
    din.numTokens = 8;
    din.useFp8 = 1;
    out.push_back(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream));  // FP8 without fp8Dispatch
    din.useFp8 = 0;
    out.push_back(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_RECV, c.stream));  // receive without send
    ncclEpLowLatencyCombineInputs_t cin{b.combIn.ptr(), b.w.as<float>()};
    ncclEpLowLatencyCombineOutputs_t cout{b.out.ptr()};
    out.push_back(ncclEpLowLatencyCombine(h, &cin, &cout, NCCL_EP_LL_SEND_RECV, c.stream));  // no dispatch yet
    out.push_back(ncclEpDispatchLayout(h, nullptr, c.stream));  // high-throughput call on an LL handle
    // Tokens above the maximum are refused during graph capture too (nothing captured).
    din.numTokens = s.maxTokens + 1;
    cudaGraph_t graph;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    out.push_back(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND, c.stream));
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &graph));
    EPX_CHECK_CUDA(cudaGraphDestroy(graph));
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  const std::vector<int> want = {ncclInvalidArgument, ncclInvalidArgument, ncclInvalidUsage, ncclInvalidUsage,
                                 ncclInvalidUsage, ncclInvalidArgument};
  for (int r : localRanks()) BOOST_TEST(codes[r] == want, boost::test_tools::per_element());
  destroyGroups(groups);
  // A handle of a high-throughput group passed to the low-latency calls.
  GroupSpec ht;
  ht.numExperts = s.experts;
  const auto& htGroups = groupFor(ht);
  std::vector<int> htCodes(nRanks(), -1);
  gpus().run([&](const RankContext& c) {
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(htGroups[c.rank], &hc, &h));
    ncclEpLowLatencyDispatchInputs_t din{};
    ncclEpLowLatencyDispatchOutputs_t dout{};
    htCodes[c.rank] = ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream);
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  for (int r : localRanks()) BOOST_TEST(htCodes[r] == int(ncclInvalidUsage));
}

// Only rank 0 dispatches: its receive half waits for counts that never come, and gives up after
// timeoutMs with an async error naming a missing peer and the phase; the group then refuses work.
BOOST_AUTO_TEST_CASE(peer_never_arrives_times_out, *boost::unit_test::precondition(needsPeers)) {
  LlSpec s;
  s.experts = expertsFor(2, s.topk);
  GroupSpec gs;
  gs.maxTokens = s.maxTokens;
  gs.hidden = s.hidden;
  gs.topk = s.topk;
  gs.numExperts = s.experts;
  ncclEpConfig_t cfg = makeConfig(gs);
  cfg.algorithm = ncclEpAlgoLowLatency;
  directForwarding(cfg);  // EPX_TEST_HYBRID applies to high-throughput groups only
  cfg.timeoutMs = 300;
  std::vector<ncclEpGroup_t> groups(nRanks(), nullptr);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  Rng rng(nextSeed());
  LlCase cs;
  const LlInputs in = makeInputs(s, cs, rng);
  gpus().run([&](const RankContext& c) {
    if (c.rank != 0) return;
    LlBuffers b;
    b.size(s, s.experts / nRanks(), nRanks() * s.maxTokens, s.maxTokens);
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[0], &hc, &h));
    uploadInputs(cs, s, in, 0, b, c.stream);
    auto din = dispatchIn(cs, b);
    auto dout = dispatchOut(cs, b);
    const auto start = std::chrono::steady_clock::now();
    EPX_CHECK_EP(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_CHECK_LT(secs, 5.0);  // bounded by timeoutMs, not a hang
    ncclResult_t async = ncclSuccess;
    char msg[512] = {};
    EPX_CHECK_EP(ncclEpGroupGetAsyncError(groups[0], &async, msg, sizeof(msg)));
    BOOST_TEST_MESSAGE("async error: " << msg);
    BOOST_CHECK_EQUAL(int(async), int(ncclRemoteError));
    BOOST_CHECK(std::string(msg).find("low-latency dispatch data") != std::string::npos);
    BOOST_CHECK(std::string(msg).find("peer rank") != std::string::npos);
    BOOST_CHECK(std::string(msg).find("peer rank 0 ") == std::string::npos);  // names a missing peer
    BOOST_CHECK_EQUAL(int(ncclEpLowLatencyDispatch(h, &din, &dout, NCCL_EP_LL_SEND_RECV, c.stream)), int(ncclRemoteError));
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  destroyGroups(groups);
}

BOOST_AUTO_TEST_SUITE_END()
