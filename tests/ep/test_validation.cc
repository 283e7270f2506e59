// Argument validation: every bad input returns its ncclResult_t and a readable
// ncclEpGetLastError() before anything launches; the handle stays usable afterwards. Expert ids
// out of range or repeated: ncclInvalidArgument from an exact-mode ncclEpDispatchLayout, an async
// error in capacity mode.
//
// host_api (no GPU needed): ncclEpGetBufferSizeHint and its config checks.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ep_harness.h"

using namespace epx::test;

namespace {

struct Outcome {
  std::string what;
  ncclResult_t got;
  std::vector<ncclResult_t> allowed;
  std::string msg;
};

// Per-rank record of bad calls, asserted on the main thread.
class Recorder {
 public:
  explicit Recorder(int n) : rec_(n) {}
  void expect(int rank, const std::string& what, ncclResult_t got, std::vector<ncclResult_t> allowed) {
    rec_[rank].push_back({what, got, std::move(allowed), got == ncclSuccess ? "" : ncclEpGetLastError()});
  }
  void check() const {
    for (size_t r = 0; r < rec_.size(); ++r)
      for (const Outcome& o : rec_[r]) {
        const bool codeOk = std::find(o.allowed.begin(), o.allowed.end(), o.got) != o.allowed.end();
        std::string want;
        for (auto a : o.allowed) want += std::string(want.empty() ? "" : " or ") + ncclGetErrorString(a);
        BOOST_CHECK_MESSAGE(codeOk, "rank " << r << ": " << o.what << ": got " << ncclGetErrorString(o.got) << " ("
                                            << int(o.got) << "), want " << want << "; message: '" << o.msg << "'");
        BOOST_CHECK_MESSAGE(o.got == ncclSuccess || !o.msg.empty(),
                            "rank " << r << ": " << o.what << ": ncclEpGetLastError() is empty");
        if (codeOk && o.got != ncclSuccess) BOOST_TEST_MESSAGE("rank " << r << ": " << o.what << " -> " << o.msg);
      }
  }

 private:
  std::vector<std::vector<Outcome>> rec_;
};

const std::vector<ncclResult_t> kArg = {ncclInvalidArgument};
const std::vector<ncclResult_t> kArgOrUsage = {ncclInvalidArgument, ncclInvalidUsage};

ncclEpConfig_t goodConfig() {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.maxTokensPerRank = 256;
  c.hidden = 2048;
  c.topk = 8;
  c.numExperts = 16;
  return c;
}

template <class T>
T* offsetPtr(void* p, size_t bytes) {
  return reinterpret_cast<T*>(static_cast<char*>(p) + bytes);
}

}  // namespace

// ---- no GPU needed --------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(host_api)

BOOST_AUTO_TEST_CASE(buffer_size_hint) {
  ncclEpConfig_t c = goodConfig();
  size_t small = 0, big = 0, fp8 = 0;
  BOOST_TEST(ncclEpGetBufferSizeHint(&c, 2, &small) == ncclSuccess, ncclEpGetLastError());
  BOOST_TEST(small > size_t(2) * 256 * 2048 * 2);  // at least the tokens of all ranks in BF16
  c.maxTokensPerRank = 4096;
  c.hidden = 7168;
  c.numExperts = 256;
  BOOST_TEST(ncclEpGetBufferSizeHint(&c, 8, &big) == ncclSuccess, ncclEpGetLastError());
  BOOST_TEST(big > small);
  BOOST_TEST(big >= size_t(8) * 4096 * 7168 * 2);
  c.fp8Dispatch = 1;
  BOOST_TEST(ncclEpGetBufferSizeHint(&c, 8, &fp8) == ncclSuccess, ncclEpGetLastError());
  BOOST_TEST(fp8 > 0u);
  BOOST_TEST_MESSAGE("size hints: " << small << " B (2 ranks, T 256, H 2048), " << big
                                    << " B (8 ranks, DeepSeek-V3 shape), fp8 group " << fp8 << " B");
}

BOOST_AUTO_TEST_CASE(buffer_size_hint_rejects_bad_configs) {
  struct Bad {
    const char* what;
    void (*edit)(ncclEpConfig_t&);
    int nRanks;
  };
  const Bad bad[] = {
      {"uninitialized config (no magic)", [](ncclEpConfig_t& c) { c.magic = 0; }, 2},
      {"wrong size field", [](ncclEpConfig_t& c) { c.size -= 4; }, 2},
      {"maxTokensPerRank undefined", [](ncclEpConfig_t& c) { c.maxTokensPerRank = NCCL_EP_UNDEF_INT; }, 2},
      {"maxTokensPerRank 0", [](ncclEpConfig_t& c) { c.maxTokensPerRank = 0; }, 2},
      {"maxTokensPerRank 65537", [](ncclEpConfig_t& c) { c.maxTokensPerRank = 65537; }, 2},
      {"hidden undefined", [](ncclEpConfig_t& c) { c.hidden = NCCL_EP_UNDEF_INT; }, 2},
      {"hidden not a multiple of 8", [](ncclEpConfig_t& c) { c.hidden = 2052; }, 2},
      {"hidden not a multiple of 128 with fp8Dispatch", [](ncclEpConfig_t& c) { c.hidden = 2056, c.fp8Dispatch = 1; }, 2},
      {"topk 0", [](ncclEpConfig_t& c) { c.topk = 0; }, 2},
      {"topk 33", [](ncclEpConfig_t& c) { c.topk = 33; }, 2},
      {"numExperts not a multiple of nRanks", [](ncclEpConfig_t& c) { c.numExperts = 17; }, 2},
      {"numExperts 2048", [](ncclEpConfig_t& c) { c.numExperts = 2048; }, 2},
      {"numExperts undefined", [](ncclEpConfig_t& c) { c.numExperts = NCCL_EP_UNDEF_INT; }, 2},
      {"fp8Dispatch 2", [](ncclEpConfig_t& c) { c.fp8Dispatch = 2; }, 2},
      {"algorithm 7", [](ncclEpConfig_t& c) { c.algorithm = 7; }, 2},
      {"smBudget -1", [](ncclEpConfig_t& c) { c.smBudget = -1; }, 2},
      {"timeoutMs 0", [](ncclEpConfig_t& c) { c.timeoutMs = 0; }, 2},
      {"nRanks 0", [](ncclEpConfig_t&) {}, 0},
      {"nRanks 9 (above one NVLink domain)", [](ncclEpConfig_t&) {}, 9},
  };
  for (const Bad& b : bad) {
    ncclEpConfig_t c = goodConfig();
    b.edit(c);
    size_t bytes = 12345;
    ncclResult_t r = ncclEpGetBufferSizeHint(&c, b.nRanks, &bytes);
    std::string msg = ncclEpGetLastError();
    BOOST_CHECK_MESSAGE(r == ncclInvalidArgument, b.what << ": got " << ncclGetErrorString(r) << ", message '" << msg << "'");
    BOOST_CHECK_MESSAGE(!msg.empty(), b.what << ": empty ncclEpGetLastError()");
    BOOST_TEST_MESSAGE(b.what << " -> " << msg);
  }
  ncclEpConfig_t c = goodConfig();
  BOOST_TEST(ncclEpGetBufferSizeHint(nullptr, 2, nullptr) == ncclInvalidArgument);
  size_t bytes = 0;
  BOOST_TEST(ncclEpGetBufferSizeHint(nullptr, 2, &bytes) == ncclInvalidArgument);
  BOOST_TEST(ncclEpGetBufferSizeHint(&c, 2, nullptr) == ncclInvalidArgument);
  BOOST_TEST(std::string(ncclEpGetLastError()).size() > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- with GPUs ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(group_create_rejects_bad_configs) {
  const int R = nRanks();
  Recorder rec(R);
  gpus().run([&](const RankContext& c) {
    auto tryCreate = [&](const std::string& what, ncclEpConfig_t cfg, std::vector<ncclResult_t> allowed) {
      ncclEpGroup_t g = reinterpret_cast<ncclEpGroup_t>(0x1);
      ncclResult_t r = ncclEpGroupCreate(c.comm, &cfg, &g);
      rec.expect(c.rank, what, r, std::move(allowed));
      if (r == ncclSuccess) {
        ncclEpGroupDestroy(g);
      } else if (g != nullptr) {
        rec.expect(c.rank, what + ": *group not set to NULL on failure", ncclInternalError, {ncclSuccess});
      }
    };
    ncclEpConfig_t cfg = goodConfig();
    cfg.fp8Dispatch = 1;
    cfg.hidden = 2056;
    tryCreate("GroupCreate: FP8 with hidden 2056 (not a multiple of 128)", cfg, kArg);
    if (R > 1) {  // at 1 rank every expert count is a multiple of the EP size
      cfg = goodConfig();
      cfg.numExperts = 8 * R + 1;
      tryCreate("GroupCreate: numExperts not a multiple of the EP size", cfg, kArg);
    }
    cfg = goodConfig();
    cfg.maxTokensPerRank = 0;
    tryCreate("GroupCreate: maxTokensPerRank 0", cfg, kArg);
    cfg = goodConfig();
    cfg.topk = 33;
    tryCreate("GroupCreate: topk 33", cfg, kArg);
    cfg = goodConfig();
    cfg.magic = 0;
    tryCreate("GroupCreate: config without NCCL_EP_CONFIG_INITIALIZER", cfg, kArg);
    cfg = goodConfig();
    cfg.algorithm = ncclEpAlgoLowLatency;  // ep_ll.h: hidden must be a multiple of 128
    cfg.hidden = 2888;
    tryCreate("GroupCreate: ncclEpAlgoLowLatency with hidden 2888", cfg, kArg);
    cfg = goodConfig();
    ncclEpGroup_t g = nullptr;
    rec.expect(c.rank, "GroupCreate: NULL comm", ncclEpGroupCreate(nullptr, &cfg, &g), kArg);
    rec.expect(c.rank, "GroupCreate: NULL config", ncclEpGroupCreate(c.comm, nullptr, &g), kArg);
    rec.expect(c.rank, "GroupCreate: NULL group pointer", ncclEpGroupCreate(c.comm, &cfg, nullptr), kArg);
  });
  rec.check();
}

// A config that differs between ranks (each value valid on its own) fails ncclEpGroupCreate on every
// rank with ncclInvalidUsage and the same message, naming the field, both values and both ranks;
// no rank goes on to allocate and register a window the others do not match.
BOOST_AUTO_TEST_CASE(group_create_requires_the_same_config_on_every_rank, *boost::unit_test::precondition(needsPeers)) {
  const int R = nRanks();
  struct Case {
    const char* field;
    void (*edit)(ncclEpConfig_t&, int rank, int nRanks);
    int oddRank;  // the first rank whose config differs from rank 0's (-1: the last rank)
    const char* mine;
    const char* rank0;
  };
  const Case cases[] = {
      {"smBudget", [](ncclEpConfig_t& c, int r, int) { c.smBudget = r == 0 ? 24 : 16; }, 1, "smBudget 16 (16 CTAs)",
       "24 (24 CTAs)"},
      {"timeoutMs", [](ncclEpConfig_t& c, int r, int n) { c.timeoutMs = r == n - 1 ? 5000 : 10000; }, -1,
       "timeoutMs 5000", "10000"},
      {"hidden", [](ncclEpConfig_t& c, int r, int n) { c.hidden = r == n - 1 ? 4096 : 2048; }, -1, "hidden 4096", "2048"},
      {"maxTokensPerRank", [](ncclEpConfig_t& c, int r, int n) { c.maxTokensPerRank = r == n - 1 ? 512 : 256; }, -1,
       "maxTokensPerRank 512", "256"},
      {"topk", [](ncclEpConfig_t& c, int r, int n) { c.topk = r == n - 1 ? 4 : 8; }, -1, "topk 4", "8"},
      {"numExperts", [](ncclEpConfig_t& c, int r, int n) { c.numExperts = (r == n - 1 ? 16 : 8) * n; }, -1,
       "numExperts", nullptr},
      {"fp8Dispatch", [](ncclEpConfig_t& c, int r, int n) { c.fp8Dispatch = r == n - 1; }, -1, "fp8Dispatch 1", "0"},
      {"algorithm", [](ncclEpConfig_t& c, int r, int n) {
         c.algorithm = r == n - 1 ? ncclEpAlgoHighThroughput : ncclEpAlgoAuto;
       }, -1, "algorithm 1 (ncclEpAlgoHighThroughput)", "0 (ncclEpAlgoAuto)"},
  };
  const size_t nCases = sizeof(cases) / sizeof(cases[0]);
  std::vector<std::vector<std::string>> msgs(R, std::vector<std::string>(nCases));
  Recorder rec(R);
  gpus().run([&](const RankContext& c) {
    for (size_t i = 0; i < nCases; ++i) {
      ncclEpConfig_t cfg = goodConfig();
      cases[i].edit(cfg, c.rank, R);
      ncclEpGroup_t g = reinterpret_cast<ncclEpGroup_t>(0x1);
      const ncclResult_t r = ncclEpGroupCreate(c.comm, &cfg, &g);
      const std::string what = std::string("GroupCreate with ") + cases[i].field + " differing between ranks";
      rec.expect(c.rank, what, r, {ncclInvalidUsage});
      msgs[c.rank][i] = r == ncclSuccess ? "" : ncclEpGetLastError();
      if (r == ncclSuccess)
        ncclEpGroupDestroy(g);
      else if (g != nullptr)
        rec.expect(c.rank, what + ": *group not set to NULL on failure", ncclInternalError, {ncclSuccess});
    }
    // The same non-default values on every rank are fine.
    ncclEpConfig_t cfg = goodConfig();
    cfg.smBudget = 16;
    cfg.timeoutMs = 5000;
    ncclEpGroup_t g = nullptr;
    const ncclResult_t r = ncclEpGroupCreate(c.comm, &cfg, &g);
    rec.expect(c.rank, "GroupCreate with smBudget 16 and timeoutMs 5000 on every rank", r, {ncclSuccess});
    if (r == ncclSuccess) EPX_CHECK_EP(ncclEpGroupDestroy(g));
  });
  rec.check();
  // Only this process's ranks recorded a message (one process per rank across fake nodes); the full
  // expected text is checked on each, so equal messages on every rank follow from it.
  int firstLocal = -1;
  for (int r = 0; r < R && firstLocal < 0; ++r)
    if (gpus().isLocal(r)) firstLocal = r;
  BOOST_REQUIRE(firstLocal >= 0);
  for (size_t i = 0; i < nCases; ++i) {
    const Case& cs = cases[i];
    const int odd = cs.oddRank < 0 ? R - 1 : cs.oddRank;
    const std::string want = "rank " + std::to_string(odd) + " has " + cs.mine + (cs.rank0 ? " but rank 0 has " : "") +
                             (cs.rank0 ? cs.rank0 : "");
    for (int r = 0; r < R; ++r) {
      if (!gpus().isLocal(r)) continue;
      const std::string& m = msgs[r][i];
      BOOST_CHECK_MESSAGE(m.rfind("ncclEpGroupCreate: ", 0) == 0 && m.find(want) != std::string::npos &&
                              m.find("; every rank must create the group with the same config") != std::string::npos,
                          cs.field << ": rank " << r << ": expected '" << want << "' in '" << m << "'");
      BOOST_CHECK_MESSAGE(m == msgs[firstLocal][i], cs.field << ": rank " << r << " says '" << m << "' but rank "
                                                             << firstLocal << " says '" << msgs[firstLocal][i] << "'");
    }
  }
}

BOOST_AUTO_TEST_CASE(handle_create_rejects_bad_configs) {
  GroupSpec gs{256, 2048, 8, 16};
  const auto& groups = groupFor(gs);
  Recorder rec(nRanks());
  gpus().run([&](const RankContext& c) {
    auto tryCreate = [&](const std::string& what, ncclEpHandleConfig_t hc) {
      ncclEpHandle_t h = nullptr;
      ncclResult_t r = ncclEpHandleCreate(groups[c.rank], &hc, &h);
      rec.expect(c.rank, what, r, kArg);
      if (r == ncclSuccess) ncclEpHandleDestroy(h);
    };
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.layout = 7;
    tryCreate("HandleCreate: layout 7", hc);
    hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.mode = 3;
    tryCreate("HandleCreate: mode 3", hc);
    hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.expertAlignment = 0;
    tryCreate("HandleCreate: expertAlignment 0", hc);
    hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.expertAlignment = -4;
    tryCreate("HandleCreate: expertAlignment -4", hc);
    hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.magic = 0;
    tryCreate("HandleCreate: config without NCCL_EP_HANDLE_CONFIG_INITIALIZER", hc);
    hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    ncclEpHandle_t h = nullptr;
    rec.expect(c.rank, "HandleCreate: NULL group", ncclEpHandleCreate(nullptr, &hc, &h), kArg);
    rec.expect(c.rank, "HandleCreate: NULL config", ncclEpHandleCreate(groups[c.rank], nullptr, &h), kArg);
    rec.expect(c.rank, "HandleCreate: NULL handle pointer", ncclEpHandleCreate(groups[c.rank], &hc, nullptr), kArg);
    // Counts: exact mode only, after a layout.
    hc.mode = ncclEpModeCapacity;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &h));
    ncclEpCounts_t counts{};
    rec.expect(c.rank, "GetCounts on a capacity-mode handle", ncclEpHandleGetCounts(h, &counts), kArgOrUsage);
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
    hc.mode = ncclEpModeExact;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &h));
    rec.expect(c.rank, "GetCounts before any layout", ncclEpHandleGetCounts(h, &counts), kArgOrUsage);
    rec.expect(c.rank, "GetCounts with NULL counts", ncclEpHandleGetCounts(h, nullptr), kArg);
    int rows = 0;
    rec.expect(c.rank, "GetCapacity with NULL handle", ncclEpHandleGetCapacity(nullptr, &rows), kArg);
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  rec.check();
}

// Bad layout, dispatch and combine arguments on a live handle, then a correct dispatch/combine on
// the same handle.
BOOST_AUTO_TEST_CASE(layout_dispatch_combine_reject_bad_arguments) {
  for (auto layout : {ncclEpLayoutExpanded, ncclEpLayoutDeduplicated}) {
    CaseConfig cfg;
    cfg.g = {256, 2048, 8, 16};
    cfg.layout = layout;
    cfg.numBias = 1;
    cfg.combineWeights = true;
    Rng rng(nextSeed());
    EpSession s(cfg);
    s.randomRouting(allTokens(200), RouteSpec{RouteKind::Uniform, 0.1}, rng);
    s.randomData(rng);
    Recorder rec(nRanks());
    const int maxT = cfg.g.maxTokens;
    // Dispatch/combine before any layout.
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      st.sizeOutputs(16);
      ncclEpDispatchInputs_t in{};
      in.x = st.x.ptr();
      in.xType = ncclBfloat16;
      ncclEpDispatchOutputs_t o{};
      o.recvX = st.recvX.ptr();
      rec.expect(c.rank, "Dispatch before any layout", ncclEpDispatch(st.handle, &in, &o, c.stream), kArgOrUsage);
      ncclEpCombineInputs_t ci{};
      ci.x = st.combIn.ptr();
      ci.xType = ncclBfloat16;
      ncclEpCombineOutputs_t co{};
      co.out = st.out.ptr();
      rec.expect(c.rank, "Combine before any layout", ncclEpCombine(st.handle, &ci, &co, c.stream), kArgOrUsage);
    });
    // Bad layouts.
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      st.uploadRouting(c, s.routing[c.rank]);
      ncclEpRouting_t rt{};
      rt.topkIdx = st.ids.ptr();
      rt.topkIdxType = ncclInt64;
      rt.numTokens = maxT + 1;
      rec.expect(c.rank, "Layout: numTokens > maxTokensPerRank", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.numTokens = -1;
      rec.expect(c.rank, "Layout: numTokens -1", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.numTokens = 200;
      rt.topkIdx = nullptr;
      rec.expect(c.rank, "Layout: NULL topkIdx", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.topkIdx = offsetPtr<char>(st.ids.ptr(), 4);
      rec.expect(c.rank, "Layout: int64 topkIdx misaligned by 4 bytes", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.topkIdx = offsetPtr<char>(st.ids.ptr(), 1);
      rt.topkIdxType = ncclInt32;
      rec.expect(c.rank, "Layout: int32 topkIdx misaligned by 1 byte", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.topkIdx = st.ids.ptr();
      rt.topkIdxType = ncclFloat32;
      rec.expect(c.rank, "Layout: topkIdxType ncclFloat32", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rt.topkIdxType = ncclUint8;
      rec.expect(c.rank, "Layout: topkIdxType ncclUint8", ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
      rec.expect(c.rank, "Layout: NULL routing", ncclEpDispatchLayout(st.handle, nullptr, c.stream), kArg);
      rt.topkIdxType = ncclInt64;
      rec.expect(c.rank, "Layout: NULL handle", ncclEpDispatchLayout(nullptr, &rt, c.stream), kArg);
    });
    // A valid layout, then bad dispatches and combines.
    s.layout();
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      const int T = s.routing[c.rank].numTokens;
      st.uploadTokens(c, s.inputs[c.rank]);
      const bool dedup = layout == ncclEpLayoutDeduplicated;
      auto goodIn = [&] {
        ncclEpDispatchInputs_t in{};
        in.x = st.x.ptr();
        in.xType = ncclBfloat16;
        in.topkWeights = st.w.as<float>();
        in.hidden = 2048;
        return in;
      };
      auto goodOut = [&] {
        ncclEpDispatchOutputs_t o{};
        o.recvX = st.recvX.ptr();
        o.recvTopkWeights = st.recvW.as<float>();
        o.recvTopkIdx = dedup ? st.recvIdx.as<int32_t>() : nullptr;
        o.recvSrcInfo = st.srcInfo.as<int32_t>();
        o.numRows = st.rows;
        return o;
      };
      auto tryD = [&](const std::string& what, ncclEpDispatchInputs_t in, ncclEpDispatchOutputs_t o,
                      std::vector<ncclResult_t> allowed = kArg) {
        rec.expect(c.rank, "Dispatch: " + what, ncclEpDispatch(st.handle, &in, &o, c.stream), std::move(allowed));
      };
      auto in = goodIn();
      auto o = goodOut();
      in.x = nullptr;
      tryD("NULL x", in, o);
      in = goodIn();
      in.x = offsetPtr<char>(st.x.ptr(), 8);
      tryD("x misaligned (8 bytes off 16)", in, o);
      in = goodIn();
      in.xType = ncclFloat32;
      tryD("xType ncclFloat32", in, o);
      in = goodIn();
      in.xType = ncclFloat8e4m3;
      in.xScales = st.w.as<float>();
      tryD("FP8 x on a group created with fp8Dispatch = 0", in, o);
      in = goodIn();
      in.hidden = 4096;
      tryD("inputs hidden 4096 on a hidden-2048 group", in, o);
      in = goodIn();
      o.recvX = nullptr;
      tryD("NULL recvX", in, o);
      o = goodOut();
      o.recvX = offsetPtr<char>(st.recvX.ptr(), 2);
      tryD("recvX misaligned", in, o);
      o = goodOut();
      o.recvSrcInfo = offsetPtr<int32_t>(st.srcInfo.ptr(), 2);
      tryD("recvSrcInfo misaligned", in, o);
      o = goodOut();
      o.numRows = std::max(1, st.rows) - (st.rows > 1 ? 1 : 0);
      if (st.rows > 1) tryD("outputs with fewer rows than the layout needs", in, o);
      o = goodOut();
      in.topkWeights = nullptr;
      tryD("recvTopkWeights requested without topkWeights", in, o);
      in = goodIn();
      o = goodOut();
      if (!dedup) {
        o.recvTopkIdx = st.recvW.as<int32_t>();
        tryD("recvTopkIdx with the expanded layout", in, o, kArgOrUsage);
        o = goodOut();
      }
      rec.expect(c.rank, "Dispatch: NULL inputs", ncclEpDispatch(st.handle, nullptr, &o, c.stream), kArg);
      rec.expect(c.rank, "Dispatch: NULL outputs", ncclEpDispatch(st.handle, &in, nullptr, c.stream), kArg);
      rec.expect(c.rank, "Dispatch: NULL handle", ncclEpDispatch(nullptr, &in, &o, c.stream), kArg);

      // The valid dispatch.
      st.poisonDispatchOutputs(c);
      st.enqueueDispatch(c, T);
      st.downloadDispatch(c, s.expect[c.rank].numRows, s.results[c.rank]);

      st.uploadCombineInputs(c, s.inputs[c.rank]);
      auto goodCi = [&] {
        ncclEpCombineInputs_t ci{};
        ci.x = st.combIn.ptr();
        ci.xType = ncclBfloat16;
        ci.bias0 = st.bias0.ptr();
        ci.topkWeights = st.combW.as<float>();
        ci.numRows = st.rows;
        ci.hidden = 2048;
        return ci;
      };
      auto goodCo = [&] {
        ncclEpCombineOutputs_t co{};
        co.out = st.out.ptr();
        co.combinedTopkWeights = st.outW.as<float>();
        co.numTokens = T;
        return co;
      };
      auto tryC = [&](const std::string& what, ncclEpCombineInputs_t ci, ncclEpCombineOutputs_t co) {
        rec.expect(c.rank, "Combine: " + what, ncclEpCombine(st.handle, &ci, &co, c.stream), kArg);
      };
      auto ci = goodCi();
      auto co = goodCo();
      ci.xType = ncclFloat8e4m3;
      tryC("xType ncclFloat8e4m3 (combine is BF16)", ci, co);
      ci = goodCi();
      ci.xType = ncclFloat32;
      tryC("xType ncclFloat32", ci, co);
      ci = goodCi();
      ci.x = nullptr;
      tryC("NULL x", ci, co);
      ci = goodCi();
      ci.x = offsetPtr<char>(st.combIn.ptr(), 2);
      tryC("x misaligned", ci, co);
      ci = goodCi();
      ci.hidden = 1024;
      tryC("hidden 1024, not the handle's 2048", ci, co);
      ci = goodCi();
      if (st.rows > 1) {
        ci.numRows = st.rows - 1;
        tryC("fewer input rows than the handle's layout", ci, co);
        ci = goodCi();
      }
      co.numTokens = T + 1;
      tryC("out rows != the layout's numTokens", ci, co);
      co = goodCo();
      ci.bias0 = offsetPtr<char>(st.bias0.ptr(), 2);
      tryC("bias0 misaligned", ci, co);
      ci = goodCi();
      ci.topkWeights = nullptr;
      tryC("combinedTopkWeights requested without topkWeights", ci, co);
      ci = goodCi();
      if (T > 0) {
        co.out = nullptr;
        tryC("NULL out", ci, co);
        co = goodCo();
      }
      co.out = offsetPtr<char>(st.out.ptr(), 2);
      tryC("out misaligned", ci, co);
      co = goodCo();
      rec.expect(c.rank, "Combine: NULL inputs", ncclEpCombine(st.handle, nullptr, &co, c.stream), kArg);
      rec.expect(c.rank, "Combine: NULL handle", ncclEpCombine(nullptr, &ci, &co, c.stream), kArg);

      // The valid combine.
      st.poisonCombineOutputs(c);
      st.enqueueCombine(c, T);
      st.downloadCombine(c, T, s.results[c.rank]);
    });
    rec.check();
    s.expectAllCorrect(std::string("after rejected calls, ") + cfg.describe());
  }
}

// Combine needs a dispatch of the handle's current route: after a layout without a dispatch it
// returns ncclInvalidUsage on every rank (and launches nothing); dispatching again on the same layout
// (cached dispatch) and combining several times after one dispatch stay allowed.
BOOST_AUTO_TEST_CASE(combine_needs_a_dispatch_since_the_layout) {
  for (auto mode : {ncclEpModeExact, ncclEpModeCapacity}) {
    CaseConfig cfg;
    cfg.g = {256, 2048, 8, 16};
    cfg.mode = mode;
    cfg.layout = mode == ncclEpModeExact ? ncclEpLayoutExpanded : ncclEpLayoutDeduplicated;
    Rng rng(nextSeed());
    EpSession s(cfg);
    Recorder rec(nRanks());
    auto combineRefused = [&](const std::string& when) {
      gpus().run([&](const RankContext& c) {
        RankState& st = s.rank(c.rank);
        ncclEpCombineInputs_t ci{};
        ci.x = st.rCombIn().p;
        ci.xType = ncclBfloat16;
        ci.numRows = st.rows;
        ci.hidden = cfg.g.hidden;
        ncclEpCombineOutputs_t co{};
        co.out = st.out.ptr();
        co.numTokens = s.routing[c.rank].numTokens;
        rec.expect(c.rank, "Combine " + when, ncclEpCombine(st.handle, &ci, &co, c.stream), {ncclInvalidUsage});
        EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      });
    };
    const std::string what = cfg.describe();
    s.randomRouting(allTokens(200), RouteSpec{RouteKind::Uniform, 0.1}, rng);
    s.randomData(rng);
    s.layout();
    combineRefused("after a layout, before any dispatch (" + what + ")");
    s.dispatch();
    s.combine();
    s.expectAllCorrect("combine after refusing one, " + what);
    s.randomData(rng);  // new expert outputs (and tokens): combine again on the one dispatch
    s.combine();
    const std::string again = s.checkCombine();
    BOOST_CHECK_MESSAGE(again.empty(), "second combine after one dispatch, " << what << ": " << again);
    s.dispatch();  // cached dispatch: the same layout again
    s.combine();
    s.expectAllCorrect("combine after a cached dispatch, " + what);
    // A new layout invalidates the dispatch.
    s.randomRouting(allTokens(150), RouteSpec{}, rng);
    s.randomData(rng);
    s.layout();
    combineRefused("after a new layout, before its dispatch (" + what + ")");
    s.dispatch();
    s.combine();
    s.expectAllCorrect("combine after the new layout's dispatch, " + what);
    rec.check();
  }
}

BOOST_AUTO_TEST_CASE(fp8_dispatch_needs_scales) {
  CaseConfig cfg;
  cfg.g = {256, 2048, 8, 16, 1};
  cfg.fp8 = true;
  Rng rng(nextSeed());
  EpSession s(cfg);
  s.randomRouting(allTokens(64), RouteSpec{}, rng);
  s.randomData(rng);
  s.layout();
  Recorder rec(nRanks());
  gpus().run([&](const RankContext& c) {
    RankState& st = s.rank(c.rank);
    st.uploadTokens(c, s.inputs[c.rank]);
    ncclEpDispatchInputs_t in{};
    in.x = st.x.ptr();
    in.xType = ncclFloat8e4m3;
    in.xScales = nullptr;
    ncclEpDispatchOutputs_t o{};
    o.recvX = st.recvX.ptr();
    o.recvScales = st.recvScales.as<float>();
    rec.expect(c.rank, "FP8 dispatch without xScales", ncclEpDispatch(st.handle, &in, &o, c.stream), kArg);
    in.xScales = st.scales.as<float>();
    o.recvScales = nullptr;
    rec.expect(c.rank, "FP8 dispatch without recvScales", ncclEpDispatch(st.handle, &in, &o, c.stream), kArg);
    in.xScales = offsetPtr<float>(st.scales.ptr(), 2);
    o.recvScales = st.recvScales.as<float>();
    rec.expect(c.rank, "FP8 dispatch with misaligned xScales", ncclEpDispatch(st.handle, &in, &o, c.stream), kArg);
  });
  rec.check();
  s.dispatch();
  s.combine();
  s.expectAllCorrect("FP8 dispatch after rejected calls");
}

namespace {
// Exact-mode layout with a bad id in token 3 of every rank -> ncclInvalidArgument with a message;
// then the group still works.
void badIdsExact(const char* what, void (*corrupt)(epx::ref::RankRouting&, int numExperts)) {
  GroupSpec gs{128, 2048, 4, 16};
  auto groups = createGroups(gs);  // own group: nothing else shares its state
  {
    CaseConfig cfg;
    cfg.g = gs;
    Rng rng(nextSeed());
    EpSession s(cfg, &groups);
    s.randomRouting(allTokens(100), RouteSpec{}, rng);
    auto bad = s.routing;
    for (auto& r : bad) corrupt(r, gs.numExperts);
    Recorder rec(nRanks());
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      st.uploadRouting(c, bad[c.rank]);
      ncclEpRouting_t rt{};
      rt.topkIdx = st.ids.ptr();
      rt.topkIdxType = ncclInt64;
      rt.numTokens = bad[c.rank].numTokens;
      rec.expect(c.rank, std::string("exact-mode Layout: ") + what, ncclEpDispatchLayout(st.handle, &rt, c.stream), kArg);
    });
    rec.check();
    // The same handle and group with valid routing afterwards.
    s.randomData(rng);
    s.runAll();
    s.expectAllCorrect(std::string("valid layout after '") + what + "'");
  }
  destroyGroups(groups);
}
}  // namespace

BOOST_AUTO_TEST_CASE(exact_layout_rejects_out_of_range_id) {
  badIdsExact("expert id == numExperts", [](epx::ref::RankRouting& r, int E) { r.topkIdx[3 * 4 + 1] = E; });
}

BOOST_AUTO_TEST_CASE(exact_layout_rejects_negative_id) {
  badIdsExact("expert id -5", [](epx::ref::RankRouting& r, int) { r.topkIdx[3 * 4 + 2] = -5; });
}

BOOST_AUTO_TEST_CASE(exact_layout_rejects_repeated_id) {
  badIdsExact("expert id repeated within a token", [](epx::ref::RankRouting& r, int E) {
    r.topkIdx[3 * 4 + 0] = 5 % E;
    r.topkIdx[3 * 4 + 3] = 5 % E;
    if (r.topkIdx[3 * 4 + 1] == 5 % E) r.topkIdx[3 * 4 + 1] = -1;
    if (r.topkIdx[3 * 4 + 2] == 5 % E) r.topkIdx[3 * 4 + 2] = -1;
  });
}

// Capacity mode never synchronizes: the layout returns success and the bad id shows up as an
// async error of the group.
BOOST_AUTO_TEST_CASE(capacity_layout_reports_bad_id_asynchronously) {
  GroupSpec gs{128, 2048, 4, 16};
  auto groups = createGroups(gs);
  {
    CaseConfig cfg;
    cfg.g = gs;
    cfg.mode = ncclEpModeCapacity;
    Rng rng(nextSeed());
    EpSession s(cfg, &groups);
    s.randomRouting(allTokens(100), RouteSpec{}, rng);
    auto bad = s.routing;
    for (auto& r : bad) r.topkIdx[7 * 4 + 1] = 1000;
    Recorder rec(nRanks());
    gpus().run([&](const RankContext& c) {
      RankState& st = s.rank(c.rank);
      st.uploadRouting(c, bad[c.rank]);
      st.enqueueLayout(c, bad[c.rank].numTokens);
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    });
    std::string a = asyncErrors(groups);
    BOOST_CHECK_MESSAGE(!a.empty(), "capacity-mode layout with expert id 1000: no async error reported");
    BOOST_TEST_MESSAGE("async error: " << a);
  }
  destroyGroups(groups);
}

BOOST_AUTO_TEST_SUITE_END()
