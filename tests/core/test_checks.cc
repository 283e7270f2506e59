#include <boost/test/unit_test.hpp>

#include <cstdint>

#include "core/checks.h"

using namespace epx;

namespace {
struct Fixture {
  GroupConfig g;
  HandleConfig hc;
  HandleView view;
  alignas(16) char buf[4096];
  Fixture() {
    g.maxTokensPerRank = 128;
    g.hidden = 256;
    g.topk = 4;
    g.numExperts = 8;
    g.fp8Dispatch = true;
    view = HandleView{&g, &hc, 2, true, 100, 400, true};
  }
  ncclEpDispatchInputs_t din() {
    ncclEpDispatchInputs_t in{};
    in.x = buf;
    in.xType = ncclBfloat16;
    return in;
  }
  ncclEpDispatchOutputs_t dout() {
    ncclEpDispatchOutputs_t out{};
    out.recvX = buf;
    return out;
  }
};
bool mentions(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }
}  // namespace

BOOST_FIXTURE_TEST_SUITE(checks, Fixture)

BOOST_AUTO_TEST_CASE(routing) {
  ncclEpRouting_t r{buf, ncclInt64, 128};
  BOOST_TEST(checkRouting(g, &r) == "");
  r.numTokens = 129;
  BOOST_TEST(mentions(checkRouting(g, &r), "maxTokensPerRank"));
  r.numTokens = 0;
  r.topkIdx = nullptr;
  BOOST_TEST(checkRouting(g, &r) == "");  // zero tokens need no ids
  r.numTokens = 1;
  BOOST_TEST(mentions(checkRouting(g, &r), "topkIdx is NULL"));
  r.topkIdx = buf + 4;
  BOOST_TEST(mentions(checkRouting(g, &r), "8-byte aligned"));
  r.topkIdxType = ncclInt32;
  BOOST_TEST(checkRouting(g, &r) == "");
  r.topkIdxType = ncclFloat32;
  BOOST_TEST(mentions(checkRouting(g, &r), "topkIdxType"));
  BOOST_TEST(mentions(checkRouting(g, nullptr), "NULL"));
}

BOOST_AUTO_TEST_CASE(dispatch_valid_bf16_and_fp8) {
  auto in = din();
  auto out = dout();
  BOOST_TEST(checkDispatch(view, &in, &out) == "");
  in.xType = ncclFloat8e4m3;
  in.xScales = reinterpret_cast<const float*>(buf);
  out.recvScales = reinterpret_cast<float*>(buf);
  BOOST_TEST(checkDispatch(view, &in, &out) == "");
}

BOOST_AUTO_TEST_CASE(dispatch_errors) {
  struct Case {
    void (*mutate)(Fixture&, ncclEpDispatchInputs_t&, ncclEpDispatchOutputs_t&);
    const char* needle;
  } cases[] = {
      {[](Fixture& f, auto&, auto&) { f.view.laidOut = false; }, "ncclEpDispatchLayout first"},
      {[](Fixture&, auto& in, auto&) { in.x = nullptr; }, "x is NULL"},
      {[](Fixture& f, auto& in, auto&) { in.x = f.buf + 8; }, "x must be 16-byte aligned"},
      {[](Fixture&, auto& in, auto&) { in.xType = ncclFloat32; }, "xType"},
      {[](Fixture& f, auto& in, auto&) { f.g.fp8Dispatch = false; in.xType = ncclFloat8e4m3; }, "fp8Dispatch = 1"},
      {[](Fixture&, auto& in, auto&) { in.xType = ncclFloat8e4m3; }, "xScales"},
      {[](Fixture& f, auto& in, auto&) { in.xScales = reinterpret_cast<const float*>(f.buf); }, "FP8 e4m3 only"},
      {[](Fixture&, auto& in, auto&) { in.hidden = 512; }, "hidden 512"},
      {[](Fixture&, auto&, auto& out) { out.recvX = nullptr; }, "recvX is NULL"},
      {[](Fixture& f, auto&, auto& out) { out.recvTopkIdx = reinterpret_cast<int32_t*>(f.buf); }, "deduplicated layout only"},
      {[](Fixture& f, auto&, auto& out) { out.recvTopkWeights = reinterpret_cast<float*>(f.buf); }, "topkWeights input is NULL"},
      {[](Fixture& f, auto&, auto& out) { out.expertCounts = reinterpret_cast<int32_t*>(f.buf + 2); }, "4-byte aligned"},
      {[](Fixture&, auto&, auto& out) { out.numRows = 399; }, "needs 400"},
  };
  for (const auto& cs : cases) {
    Fixture f;
    auto in = f.din();
    auto out = f.dout();
    cs.mutate(f, in, out);
    std::string err = checkDispatch(f.view, &in, &out);
    BOOST_TEST_INFO("expected '" << cs.needle << "' in '" << err << "'");
    BOOST_TEST(mentions(err, cs.needle));
  }
}

BOOST_AUTO_TEST_CASE(combine_checks) {
  ncclEpCombineInputs_t in{};
  in.x = buf;
  in.xType = ncclBfloat16;
  ncclEpCombineOutputs_t out{};
  out.out = buf;
  BOOST_TEST(checkCombine(view, &in, &out) == "");
  in.numRows = 400;
  in.hidden = 256;
  out.numTokens = 100;
  BOOST_TEST(checkCombine(view, &in, &out) == "");
  in.xType = ncclFloat8e4m3;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "ncclBfloat16"));
  in.xType = ncclBfloat16;
  in.numRows = 10;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "dispatch layout has 400"));
  in.numRows = 0;
  in.hidden = 128;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "hidden"));
  in.hidden = 0;
  out.numTokens = 99;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "100 tokens"));
  out.numTokens = 0;
  out.combinedTopkWeights = reinterpret_cast<float*>(buf);
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "topkWeights is NULL"));
  in.topkWeights = reinterpret_cast<const float*>(buf);
  BOOST_TEST(checkCombine(view, &in, &out) == "");
  in.bias0 = buf + 4;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "bias0 must be 16-byte aligned"));
  view.laidOut = false;
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "ncclEpDispatchLayout"));
}

BOOST_AUTO_TEST_CASE(combine_needs_a_dispatch_since_the_layout) {
  // The handle's life: created (no layout), laid out, dispatched (maybe several times: cached
  // dispatch), combined (maybe several times), laid out again.
  ncclEpCombineInputs_t in{};
  in.x = buf;
  in.xType = ncclBfloat16;
  ncclEpCombineOutputs_t out{};
  out.out = buf;
  view.laidOut = false;
  view.dispatched = false;
  BOOST_TEST(checkCombineAfterDispatch(view) == "");  // no layout at all: checkCombine's error
  BOOST_TEST(mentions(checkCombine(view, &in, &out), "ncclEpDispatchLayout"));
  view.laidOut = true;  // layout: laid out, not dispatched
  const std::string err = checkCombineAfterDispatch(view);
  BOOST_TEST(mentions(err, "no ncclEpDispatch on this handle since its last ncclEpDispatchLayout"), err);
  BOOST_TEST(checkCombine(view, &in, &out) == "");  // the arguments themselves are fine
  view.dispatched = true;  // dispatch
  BOOST_TEST(checkCombineAfterDispatch(view) == "");
  BOOST_TEST(checkCombineAfterDispatch(view) == "");  // combining again after one dispatch
  view.dispatched = false;  // a new layout
  BOOST_TEST(checkCombineAfterDispatch(view) != "");
  // Dispatch itself does not care whether the route was dispatched before (cached dispatch).
  auto din_ = din();
  auto dout_ = dout();
  BOOST_TEST(checkDispatch(view, &din_, &dout_) == "");
  view.dispatched = true;
  BOOST_TEST(checkDispatch(view, &din_, &dout_) == "");
}

BOOST_AUTO_TEST_SUITE_END()
