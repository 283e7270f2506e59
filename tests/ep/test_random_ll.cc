// Randomized differential test of the low-latency dispatch and combine (suite `random_ll`): groups
// and cases drawn from the whole documented range (random_ll_config.h), checked against the CPU
// reference (epx/ref/ll_ref.h) on poisoned outputs: per local expert the row count, the rows' sources
// (when recvSrcInfo is given), BF16 payloads byte for byte, FP8 bytes and scales bit for bit, and
// every row past the count untouched (ep_ll.h: not written); then the combine of a host "expert"
// (row * (1 + e/64), rounded to BF16; FP8 rows dequantized first) weighted at the source, bit-exact.
// Cases come in groups of kCasesPerGroup that share one collectively created LL group; one handle
// per case. Every process generates every rank's routing and data from the case's seed and checks
// its own ranks.
//
// Environment: EPX_TEST_SEED, EPX_RANDOM_CASES (default 300, 100 with EPX_TEST_QUICK),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed and rank count),
// EPX_RANDOM_SECONDS (no new group after this many seconds, default 150, 0 = unlimited). A failing
// case prints its index, the seed, its full configuration and the command line that replays it.
#include <cuda_runtime.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/ep_ll.h"
#include "epx/ref/bf16.h"
#include "epx/ref/ll_ref.h"
#include "random_ll_config.h"
#include "random_run.h"

using namespace epx::test;
namespace rl = epx::test::rnd::ll;

namespace {

constexpr uint8_t kPoison = 0xff, kIntPoison = 0xf7;
constexpr uint16_t kNanBf16 = 0x7fc0;  // combine input rows past the counts (never read)

std::vector<ncclEpGroup_t> createLlGroups(const rl::LlGroup& g) {
  GroupSpec gs;
  gs.maxTokens = g.maxTokens;
  gs.hidden = g.hidden;
  gs.topk = g.topk;
  gs.numExperts = g.numExperts;
  gs.fp8 = g.fp8;
  gs.smBudget = g.smBudget;
  ncclEpConfig_t cfg = makeConfig(gs);  // the SM cap of processes sharing a GPU
  cfg.algorithm = ncclEpAlgoLowLatency;
  directForwarding(cfg);  // EPX_TEST_HYBRID applies to high-throughput groups only
  std::vector<ncclEpGroup_t> groups(size_t(nRanks()), nullptr);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[size_t(c.rank)])); });
  return groups;
}

epx::ref::LlShape refShape(const rl::LlGroup& g) {
  epx::ref::LlShape s;
  s.nRanks = nRanks();
  s.maxTokens = g.maxTokens;
  s.hidden = g.hidden;
  s.topk = g.topk;
  s.numExperts = g.numExperts;
  return s;
}

float expertFactor(int e) { return 1.f + float(e) / 64.f; }

// The host expert's BF16 output for token t of rank src at expert e (what combine receives back).
void expertRow(const rl::LlGroup& g, const rl::LlCase& c, const rl::LlInputs& in, int src, int t, int e, uint16_t* y) {
  const int H = g.hidden;
  const uint16_t* x = in.x[size_t(src)].data() + size_t(t) * H;
  if (!c.fp8) {
    for (int ch = 0; ch < H; ++ch) y[ch] = epx::ref::floatToBf16(epx::ref::bf16ToFloat(x[ch]) * expertFactor(e));
    return;
  }
  std::vector<uint8_t> q(static_cast<size_t>(H));
  std::vector<float> sc(size_t(H / 128));
  epx::ref::llCastRowFp8(x, H, c.roundScale, q.data(), sc.data());
  for (int ch = 0; ch < H; ++ch)
    y[ch] = epx::ref::floatToBf16(epx::ref::fp8E4m3ToFloat(q[size_t(ch)]) * sc[size_t(ch / 128)] * expertFactor(e));
}

template <class T>
void poisonCheck(const std::vector<T>& v, size_t begin, size_t end, uint8_t poison, const char* what, int le, int row,
                 std::ostringstream& err) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(v.data());
  for (size_t i = begin * sizeof(T); i < end * sizeof(T); ++i)
    if (b[i] != poison) {
      err << "expert " << le << " row " << row << " (past the count): " << what << " was written";
      return;
    }
}

struct Outputs {
  std::vector<int32_t> count, srcInfo;
  std::vector<uint8_t> recvX;
  std::vector<float> scales;
  std::vector<uint16_t> out;
};

// Rank `rank`'s dispatch outputs against the reference; "" when they match.
std::string checkDispatch(const rl::LlGroup& g, const rl::LlCase& c, const rl::LlInputs& in, int rank,
                          const epx::ref::LlReceived& want, const Outputs& o) {
  const epx::ref::LlShape sh = refShape(g);
  const int Le = sh.localExperts(), rowsPer = sh.rowsPerExpert(), H = g.hidden, rowBytes = H * (c.fp8 ? 1 : 2);
  const int scaleCols = H / 128;
  std::ostringstream err;
  std::vector<uint8_t> q(static_cast<size_t>(H));
  std::vector<float> sc(static_cast<size_t>(scaleCols));
  for (int le = 0; le < Le && err.str().empty(); ++le) {
    const int n = int(want.rows[size_t(le)].size());
    if (o.count[size_t(le)] != n) {
      err << "expert " << le << ": count " << o.count[size_t(le)] << ", expected " << n;
      break;
    }
    for (int j = 0; j < n && err.str().empty(); ++j) {
      const size_t row = size_t(le) * rowsPer + size_t(j);
      const epx::ref::LlRow& w = want.rows[size_t(le)][size_t(j)];
      if (c.srcInfo && (o.srcInfo[row * 3] != w.srcRank || o.srcInfo[row * 3 + 1] != w.token ||
                        o.srcInfo[row * 3 + 2] != w.slot)) {
        err << "expert " << le << " row " << j << ": source (" << o.srcInfo[row * 3] << "," << o.srcInfo[row * 3 + 1]
            << "," << o.srcInfo[row * 3 + 2] << "), expected (" << w.srcRank << "," << w.token << "," << w.slot << ")";
        break;
      }
      const uint16_t* x = in.x[size_t(w.srcRank)].data() + size_t(w.token) * H;
      const uint8_t* got = o.recvX.data() + row * size_t(rowBytes);
      if (!c.fp8) {
        if (std::memcmp(got, x, size_t(rowBytes)) != 0)
          err << "expert " << le << " row " << j << " (rank " << w.srcRank << " token " << w.token << "): BF16 payload differs";
        continue;
      }
      epx::ref::llCastRowFp8(x, H, c.roundScale, q.data(), sc.data());
      if (std::memcmp(got, q.data(), size_t(H)) != 0)
        err << "expert " << le << " row " << j << " (rank " << w.srcRank << " token " << w.token << "): FP8 bytes differ";
      else if (std::memcmp(o.scales.data() + row * size_t(scaleCols), sc.data(), sc.size() * 4) != 0)
        err << "expert " << le << " row " << j << " (rank " << w.srcRank << " token " << w.token << "): FP8 scales differ";
    }
    // Rows past the count are not written (ep_ll.h).
    if (err.str().empty() && n < rowsPer) {
      const size_t b = size_t(le) * rowsPer + size_t(n), e = size_t(le + 1) * rowsPer;
      poisonCheck(o.recvX, b * size_t(rowBytes), e * size_t(rowBytes), kPoison, "recvX", le, n, err);
      if (err.str().empty() && c.fp8) poisonCheck(o.scales, b * size_t(scaleCols), e * size_t(scaleCols), kPoison, "recvScales", le, n, err);
      if (err.str().empty() && c.srcInfo) poisonCheck(o.srcInfo, b * 3, e * 3, kIntPoison, "recvSrcInfo", le, n, err);
    }
  }
  return err.str();
}

std::string checkCombine(const rl::LlGroup& g, const rl::LlCase& c, const rl::LlInputs& in, int rank, const Outputs& o) {
  const epx::ref::LlShape sh = refShape(g);
  const epx::ref::LlRouting& rt = in.routing[size_t(rank)];
  const int H = g.hidden, K = g.topk;
  std::vector<std::vector<uint16_t>> rows(size_t(rt.numTokens) * K);
  auto row = [&](int t, int k) -> const uint16_t* {
    auto& r = rows[size_t(t) * K + k];
    if (r.empty()) {
      r.resize(size_t(H));
      expertRow(g, c, in, rank, t, epx::ref::llSlotExpert(sh, rt, t, k), r.data());
    }
    return r.data();
  };
  const std::vector<uint16_t> want = epx::ref::llCombine(sh, rt, in.weights[size_t(rank)], row);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != o.out[i]) {
      std::ostringstream err;
      err << "combine token " << i / size_t(H) << " channel " << i % size_t(H) << ": 0x" << std::hex << o.out[i]
          << ", expected 0x" << want[i];
      return err.str();
    }
  return {};
}

// Both halves at once, or the send half, other work on the stream, the receive half on a second
// stream ordered after it by an event.
template <class Call>
void runHalves(bool split, cudaStream_t st, DevBuf& scratch, Call call) {
  if (!split) {
    EPX_CHECK_EP(call(NCCL_EP_LL_SEND_RECV, st));
    return;
  }
  EPX_CHECK_EP(call(NCCL_EP_LL_SEND, st));
  EPX_CHECK_CUDA(cudaMemsetAsync(scratch.ptr(), 0x5a, scratch.size(), st));
  cudaStream_t other = nullptr;
  cudaEvent_t ev = nullptr;
  EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  EPX_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  EPX_CHECK_CUDA(cudaEventRecord(ev, st));
  EPX_CHECK_CUDA(cudaStreamWaitEvent(other, ev, 0));
  const ncclResult_t r = call(NCCL_EP_LL_RECV, other);
  const std::string why = r == ncclSuccess ? std::string() : ncclEpGetLastError();
  cudaEventRecord(ev, other);
  cudaStreamWaitEvent(st, ev, 0);
  cudaStreamSynchronize(other);
  cudaEventDestroy(ev);
  cudaStreamDestroy(other);
  if (r != ncclSuccess)
    throw std::runtime_error(std::string("receive half -> ") + ncclGetErrorString(r) + ": " + why);
}

// One case on every local rank; "" when every local rank's outputs matched.
std::string runLlCase(const rl::LlGroup& g, const rl::LlCase& c, const std::vector<ncclEpGroup_t>& groups) {
  const rl::LlInputs in = rl::makeInputs(g, c, nRanks());
  const epx::ref::LlShape sh = refShape(g);
  const int R = nRanks(), Le = sh.localExperts(), rowsPer = sh.rowsPerExpert(), H = g.hidden, K = g.topk;
  const size_t rows = size_t(Le) * size_t(rowsPer), scaleCols = size_t(H / 128);
  std::vector<std::string> fails(static_cast<size_t>(R));
  gpus().run([&](const RankContext& ctx) {
    const int r = ctx.rank, T = c.tokens[size_t(r)];
    std::string& fail = fails[size_t(r)];
    DevBuf x, ids, w, recvX, recvScales, recvCount, srcInfo, combIn, out, scratch;
    x.reserve(size_t(g.maxTokens) * H * 2);
    ids.reserve(size_t(g.maxTokens) * K * 8);
    w.reserve(size_t(g.maxTokens) * K * 4);
    recvX.reserve(rows * H * (c.fp8 ? 1 : 2));
    recvScales.reserve(rows * scaleCols * 4);
    recvCount.reserve(size_t(Le) * 4);
    srcInfo.reserve(rows * 3 * 4);
    if (!c.zeroCopy) combIn.reserve(rows * H * 2);
    out.reserve(size_t(g.maxTokens) * H * 2);
    if (c.split) scratch.reserve(size_t(4) << 20);
    // Inputs and poisoned outputs, all on the op's stream (non-blocking: a plain cudaMemcpy would not
    // be ordered before the kernels).
    if (T > 0) {
      EPX_CHECK_CUDA(cudaMemcpyAsync(x.ptr(), in.x[size_t(r)].data(), size_t(T) * H * 2, cudaMemcpyHostToDevice, ctx.stream));
      std::vector<int32_t> ids32;
      if (c.int32Ids) {
        ids32.assign(in.routing[size_t(r)].topkIdx.begin(), in.routing[size_t(r)].topkIdx.end());
        EPX_CHECK_CUDA(cudaMemcpyAsync(ids.ptr(), ids32.data(), ids32.size() * 4, cudaMemcpyHostToDevice, ctx.stream));
      } else {
        EPX_CHECK_CUDA(cudaMemcpyAsync(ids.ptr(), in.routing[size_t(r)].topkIdx.data(), size_t(T) * K * 8,
                                       cudaMemcpyHostToDevice, ctx.stream));
      }
      EPX_CHECK_CUDA(cudaMemcpyAsync(w.ptr(), in.weights[size_t(r)].data(), size_t(T) * K * 4, cudaMemcpyHostToDevice,
                                     ctx.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));  // ids32 and the pageable sources
    }
    EPX_CHECK_CUDA(cudaMemsetAsync(recvX.ptr(), kPoison, recvX.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(recvScales.ptr(), kPoison, recvScales.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(recvCount.ptr(), kIntPoison, recvCount.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(srcInfo.ptr(), kIntPoison, srcInfo.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(out.ptr(), kPoison, out.size(), ctx.stream));
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[size_t(r)], &hc, &h));
    struct HandleGuard {
      ncclEpHandle_t h;
      ~HandleGuard() { ncclEpHandleDestroy(h); }
    } guard{h};
    ncclEpLowLatencyDispatchInputs_t din{};
    din.x = x.ptr();
    din.topkIdx = ids.ptr();
    din.topkIdxType = c.int32Ids ? ncclInt32 : ncclInt64;
    din.numTokens = T;
    din.useFp8 = c.fp8 ? 1 : 0;
    din.roundScale = c.roundScale ? 1 : 0;
    ncclEpLowLatencyDispatchOutputs_t dout{};
    dout.recvX = recvX.ptr();
    dout.recvScales = c.fp8 ? recvScales.as<float>() : nullptr;
    dout.recvCount = recvCount.as<int32_t>();
    dout.recvSrcInfo = c.srcInfo ? srcInfo.as<int32_t>() : nullptr;
    runHalves(c.split, ctx.stream, scratch,
              [&](int f, cudaStream_t st) { return ncclEpLowLatencyDispatch(h, &din, &dout, f, st); });
    EPX_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    Outputs o;
    o.count.resize(size_t(Le));
    o.recvX.resize(rows * H * (c.fp8 ? 1 : 2));
    EPX_CHECK_CUDA(cudaMemcpy(o.count.data(), recvCount.ptr(), size_t(Le) * 4, cudaMemcpyDeviceToHost));
    EPX_CHECK_CUDA(cudaMemcpy(o.recvX.data(), recvX.ptr(), o.recvX.size(), cudaMemcpyDeviceToHost));
    if (c.srcInfo) {
      o.srcInfo.resize(rows * 3);
      EPX_CHECK_CUDA(cudaMemcpy(o.srcInfo.data(), srcInfo.ptr(), o.srcInfo.size() * 4, cudaMemcpyDeviceToHost));
    }
    if (c.fp8) {
      o.scales.resize(rows * scaleCols);
      EPX_CHECK_CUDA(cudaMemcpy(o.scales.data(), recvScales.ptr(), o.scales.size() * 4, cudaMemcpyDeviceToHost));
    }
    const epx::ref::LlReceived want = epx::ref::llDispatchRows(sh, in.routing, r);
    fail = checkDispatch(g, c, in, r, want, o);
    // The host expert on the rows the reference says this rank received (every rank runs the
    // combine, whatever its dispatch check found: it is collective).
    std::vector<uint16_t> y(rows * size_t(H), kNanBf16);
    for (int le = 0; le < Le; ++le)
      for (size_t j = 0; j < want.rows[size_t(le)].size(); ++j) {
        const epx::ref::LlRow& wr = want.rows[size_t(le)][j];
        expertRow(g, c, in, wr.srcRank, wr.token, r * Le + le, y.data() + (size_t(le) * rowsPer + j) * size_t(H));
      }
    void* combX = combIn.ptr();
    if (c.zeroCopy) EPX_CHECK_EP(ncclEpLowLatencyGetCombineBuffer(groups[size_t(r)], &combX));
    EPX_CHECK_CUDA(cudaMemcpyAsync(combX, y.data(), y.size() * 2, cudaMemcpyHostToDevice, ctx.stream));
    ncclEpLowLatencyCombineInputs_t cin{combX, w.as<float>()};
    ncclEpLowLatencyCombineOutputs_t cout{out.ptr()};
    runHalves(c.split, ctx.stream, scratch,
              [&](int f, cudaStream_t st) { return ncclEpLowLatencyCombine(h, &cin, &cout, f, st); });
    EPX_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    o.out.resize(size_t(T) * H);
    if (T > 0) EPX_CHECK_CUDA(cudaMemcpy(o.out.data(), out.ptr(), o.out.size() * 2, cudaMemcpyDeviceToHost));
    if (fail.empty()) fail = checkCombine(g, c, in, r, o);
    if (!fail.empty()) fail = "rank " + std::to_string(r) + ": " + fail;
  });
  std::string all;
  for (int r : localRanks())
    if (!fails[size_t(r)].empty()) all += (all.empty() ? "" : "; ") + fails[size_t(r)];
  if (all.empty()) all = asyncErrors(groups);
  return all;
}

void tally(rnd::RandomRun& run, const rl::LlGroup& g, const rl::LlCase& c) {
  const int maxT = *std::max_element(c.tokens.begin(), c.tokens.end());
  const int minT = *std::min_element(c.tokens.begin(), c.tokens.end());
  run.feature("top-k 32", g.topk == 32);
  run.feature("top-k 31", g.topk == 31);
  run.feature("top-k 1", g.topk == 1);
  run.feature("fewer experts than top-k", g.numExperts < g.topk);
  run.feature("experts 1024/R max", g.numExperts == 1024 / nRanks() * nRanks());
  run.feature("hidden 128", g.hidden == 128);
  run.feature("hidden 65536", g.hidden == 65536);
  run.feature("maxTokens 4096", g.maxTokens == 4096);
  run.feature("a rank with 0 tokens", minT == 0);
  run.feature("a rank at maxTokens", maxT == g.maxTokens);
  run.feature("uneven tokens", minT != maxT);
  run.feature("FP8", c.fp8);
  run.feature("FP8 UE8M0", c.roundScale);
  run.feature("int32 ids", c.int32Ids);
  run.feature("masked slots", c.maskProb > 0 || c.fullyMaskedToken);
  run.feature("one expert for all", c.singleExpert >= 0);
  run.feature("zero blocks", c.zeroBlocks);
  run.feature("split halves", c.split);
  run.feature("zero-copy combine", c.zeroCopy);
  run.feature("no recvSrcInfo", !c.srcInfo);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_ll)

BOOST_AUTO_TEST_CASE(differential) {
  rnd::RandomRun run("random_ll", rl::kCasesPerGroup);
  const uint64_t seed = run.seed();
  const int R = run.ranks();
  for (int grp = run.firstGroup(); grp < run.endGroup(); ++grp) {
    if (run.timeUp()) break;
    const rl::LlGroup g = rl::drawGroup(seed, grp, R);
    std::vector<ncclEpGroup_t> groups;
    try {
      groups = createLlGroups(g);
    } catch (const std::exception& e) {
      run.reportFailure("to create group " + std::to_string(grp) + " {" + rl::describe(g) + "}", run.caseBegin(grp),
                        e.what());
      throw;
    }
    for (int i = run.caseBegin(grp); i < run.caseEnd(grp); ++i) {
      const rl::LlCase c = rl::drawCase(seed, i, g, R);
      const std::string name = rl::describe(c, g);
      BOOST_TEST_MESSAGE("random_ll " << name);
      const double start = run.elapsed();
      std::string why;
      try {
        why = runLlCase(g, c, groups);
      } catch (const std::exception& e) {
        run.reportFailure(name, i, e.what());
        destroyGroups(groups);
        throw;  // an ncclEp call failed: the collective sequence may be out of step; stop here
      }
      if (!why.empty()) run.reportFailure(name, i, why);
      BOOST_TEST(why.empty(), name << ": " << why);
      run.count(why.empty(), run.elapsed() - start, name);
      tally(run, g, c);
      if (anyRankAsyncError(groups)) {  // a device-side error leaves the group unusable
        destroyGroups(groups);
        groups = createLlGroups(g);
      }
    }
    destroyGroups(groups);
  }
  run.finish();
}

BOOST_AUTO_TEST_SUITE_END()
