// CPU tests of low-latency dispatch/combine (suite low_latency_cpu): the LL window region and its
// synchronization words (device/include/epx/device/ll_layout.h), LL configs and sizing, the host
// argument/call-order checks (host/src/core/ll_checks.h), and the CPU reference (host/ref ll_ref.h):
// routing rows, FP8 e4m3 cast with bit-exact scales, weighted combine.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/config.h"
#include "core/ll_checks.h"
#include "epx/device/ll_layout.h"
#include "epx/ref/bf16.h"
#include "epx/ref/ll_ref.h"

using namespace epx;

namespace {

ncclEpConfig_t llConfig(int maxTokens = 128, int hidden = 7168, int topk = 8, int experts = 256) {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.algorithm = ncclEpAlgoLowLatency;
  c.maxTokensPerRank = maxTokens;
  c.hidden = hidden;
  c.topk = topk;
  c.numExperts = experts;
  c.fp8Dispatch = 1;
  return c;
}

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(low_latency_cpu)

BOOST_AUTO_TEST_CASE(config_accepts_decode_shapes_and_refuses_bad_hidden) {
  GroupConfig g;
  ncclEpConfig_t c = llConfig(1024, 16384, 32, 256);
  BOOST_TEST(normalizeConfig(&c, 8, &g) == "");
  BOOST_TEST(g.lowLatency());
  for (int h : {128, 2048, 4096, 7168, 8192, 16384, 6016}) {  // any multiple of 128, no list
    c = llConfig(128, h);
    BOOST_TEST(normalizeConfig(&c, 8, &g) == "", "hidden " << h);
  }
  c = llConfig(128, 2880);
  BOOST_TEST(normalizeConfig(&c, 8, &g).find("multiple of 128") != std::string::npos);
  c = llConfig(dev::kLlMaxTokens + 1);
  BOOST_TEST(normalizeConfig(&c, 8, &g).find("maxTokensPerRank") != std::string::npos);
  c = llConfig(128, 7168, 33);
  BOOST_TEST(normalizeConfig(&c, 8, &g).find("topk") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ll_region_is_disjoint_and_sized) {
  GroupConfig g;
  ncclEpConfig_t c = llConfig(128, 7168, 8, 256);
  BOOST_REQUIRE(normalizeConfig(&c, 8, &g) == "");
  const dev::WindowLayout wl = computeWindowLayout(g, 8, 4);
  const dev::LlLayout l = computeLlLayout(g, 8, 4);
  // Synchronization words: high-throughput ones, then the LL ones, all in the zeroed flags region.
  BOOST_TEST(l.wordBase == uint32_t(dev::kNumFlagKinds) * 8);
  BOOST_TEST(dev::windowZeroedPrefix(wl) >= wl.flags + uint64_t(dev::llTotalWords(8, 256)) * 4);
  // High-throughput regions are empty; the LL region follows them inside the window.
  BOOST_TEST(wl.rows == 0u);
  BOOST_TEST(l.dispatchRecv >= wl.stagePos);
  BOOST_TEST(l.endBytes <= wl.totalBytes);
  const uint64_t T = 128, E = 256, msg = 2 * 7168 + 16;
  BOOST_TEST(l.msgBytes(false) == msg);
  BOOST_TEST(l.msgBytes(true) == 7168 + 224 + 16);  // 56 scales (224 bytes, 16-aligned) + meta
  BOOST_TEST(l.hdrBytes() == 32u * 4u);
  BOOST_TEST(l.srcBytes == 32 * 4 + 32 * T * msg);
  BOOST_TEST(l.dispatchStage >= l.dispatchRecv + 2 * 8 * l.srcBytes);
  BOOST_TEST(l.combineRecv >= l.dispatchStage + 8 * 32 * 4 + T * 8 * msg);
  BOOST_TEST(l.combineSend >= l.combineRecv + 2 * E * T * 7168 * 2);
  BOOST_TEST(l.endBytes >= l.combineSend + E * T * 7168 * 2);
  // Last message of each bank / last row lies inside its region.
  BOOST_TEST(l.recvMsg(1, 31, 7, 127, false) + msg <= l.dispatchStage);
  BOOST_TEST(l.hdr(1, 0) == l.dispatchRecv + 8 * l.srcBytes);
  BOOST_TEST(l.recvMsg(1, 0, 0, 0, false) == l.hdr(1, 0) + 32 * 4);
  // Source-major: a source's header and messages of a bank are contiguous (a GIN source's landing
  // area: one put), and the next source's area follows.
  BOOST_TEST(l.hdr(0, 1) == l.recvMsg(0, 31, 0, 127, false) + msg);
  BOOST_TEST(l.ginRecvMsg(1, 7, 32 * 128 - 1, true) + l.msgBytes(true) <= l.dispatchStage);
  BOOST_TEST(l.ginRecvMsg(0, 3, 5 * 128 + 2, false) == l.recvMsg(0, 5, 3, 2, false));
  BOOST_TEST(l.ginRecvMsg(0, 3, 0, true) == l.hdr(0, 3) + l.hdrBytes());
  // Staging: destination d's header right before its first row, after d - 1's rows.
  for (bool fp8 : {false, true}) {
    BOOST_TEST(l.hdrStage(0, 0, fp8) == l.dispatchStage);
    BOOST_TEST(l.hdrStage(3, 100, fp8) + l.hdrBytes() == l.stageMsg(100, 3, fp8));
    BOOST_TEST(l.hdrStage(3, 100, fp8) == l.stageMsg(99, 2, fp8) + l.msgBytes(fp8));
    BOOST_TEST(l.stageMsg(int(T) * 8 - 1, 7, fp8) + l.msgBytes(fp8) <= l.combineRecv);
  }
  // A GIN expert rank's landing area in combineRecv is its experts' rows; the packed staging fits.
  BOOST_TEST(l.ginCombineRecvRow(1, 7, 32 * 128 - 1) == l.combineRecvRow(1, 255, 127));
  BOOST_TEST(l.ginCombineRecvRow(0, 2, 0) == l.combineRecvRow(0, 64, 0));
  BOOST_TEST(l.combineStageRow(int(E * T) - 1) + 7168 * 2 <= l.endBytes);
  BOOST_TEST(l.combineRecvRow(1, 255, 127) + 7168 * 2 <= l.combineSend);
  BOOST_TEST(l.combineSendRow(31, 8 * 128 - 1) + 7168 * 2 <= l.endBytes);
  BOOST_TEST(l.rowsPerExpert() == 8 * 128);
}

BOOST_AUTO_TEST_CASE(ll_words_are_unique_and_banks_alternate) {
  for (int R : {1, 2, 8}) {
    GroupConfig g;
    ncclEpConfig_t c = llConfig(16, 128, 4, 8 * R);
    BOOST_REQUIRE(normalizeConfig(&c, R, &g) == "");
    const dev::LlLayout l = computeLlLayout(g, R, 1);
    std::set<uint32_t> ids;
    const int Le = l.localExperts;
    for (int b = 0; b < dev::kLlBanks; ++b)
      for (int src = 0; src < R; ++src) {
        for (int le = 0; le < Le; ++le) BOOST_TEST(ids.insert(l.countWord(b, le, src)).second);
        BOOST_TEST(ids.insert(l.combineArriveWord(b, src)).second);
        BOOST_TEST(ids.insert(l.dispatchArriveWord(b, src)).second);
      }
    for (int op = 0; op < dev::kLlNumOps; ++op)
      for (int src = 0; src < R; ++src) BOOST_TEST(ids.insert(l.freeWord(op, src)).second);
    BOOST_TEST(*ids.begin() == l.wordBase);
    BOOST_TEST(*ids.rbegin() == dev::llTotalWords(R, 8 * R) - 1);
    BOOST_TEST(ids.size() == size_t(l.wordCount()));
    // GIN headers: one 16-byte aligned slot per (bank, source) and per destination, disjoint.
    BOOST_TEST(l.hdrBytes() % 16 == 0u);
    BOOST_TEST(l.hdrBytes() >= uint32_t(Le) * 4u);
    BOOST_TEST(l.srcBytes % 16 == 0u);
    BOOST_TEST(l.recvMsg(1, Le - 1, R - 1, 15, false) + l.msgBytes(false) <= l.dispatchStage);
  }
  // Consecutive ops alternate banks; the arrival word of a bank counts that bank's ops.
  BOOST_TEST(dev::llBankOf(1) != dev::llBankOf(2));
  BOOST_TEST(dev::llBankOf(1) == dev::llBankOf(3));
  uint32_t perBank[2] = {0, 0};
  for (uint32_t seq = 1; seq < 50; ++seq) {
    ++perBank[dev::llBankOf(seq)];
    BOOST_TEST(dev::llArriveTarget(seq) == perBank[dev::llBankOf(seq)]);
  }
  // The free gate: op #seq may go once the receiver consumed op seq - 2 (first two: at once).
  const uint32_t banks = uint32_t(dev::kLlBanks);
  BOOST_TEST(dev::mayWrite(1, banks, 0));
  BOOST_TEST(dev::mayWrite(2, banks, 0));
  BOOST_TEST(!dev::mayWrite(3, banks, 0));
  BOOST_TEST(dev::mayWrite(3, banks, 1));
  BOOST_TEST(dev::mayWrite(0, banks, 0xfffffffeu));  // across wraparound
}

BOOST_AUTO_TEST_CASE(gin_counters_per_op_kind_are_disjoint) {
  for (int nCtas : {1, 8, 24, 132}) {
    BOOST_TEST(epx::dev::llGinCounterCount(nCtas) == epx::dev::kLlNumOps * nCtas);
    // CTA b of dispatch and of combine never share a counter, and every one is inside the count.
    std::vector<int> owner(size_t(epx::dev::llGinCounterCount(nCtas)), -1);
    for (int op : {epx::dev::kLlDispatch, epx::dev::kLlCombine})
      for (int b = 0; b < nCtas; ++b) {
        const int id = epx::dev::llGinCounterBase(op, nCtas) + b;
        BOOST_TEST_REQUIRE(id >= 0);
        BOOST_TEST_REQUIRE(id < int(owner.size()));
        BOOST_TEST(owner[size_t(id)] == -1);
        owner[size_t(id)] = op;
      }
  }
}

BOOST_AUTO_TEST_CASE(host_checks_name_the_problem) {
  GroupConfig g;
  ncclEpConfig_t c = llConfig(128, 2048, 8, 16);
  c.fp8Dispatch = 0;
  BOOST_REQUIRE(normalizeConfig(&c, 2, &g) == "");
  LlCallState st;
  LlGroupCalls calls;
  const LlHandleView h{&g, 2, &st, &calls};
  alignas(16) static char buf[256];
  ncclEpLowLatencyDispatchInputs_t in{};
  in.x = buf;
  in.topkIdx = buf;
  in.topkIdxType = ncclInt64;
  in.numTokens = 7;
  ncclEpLowLatencyDispatchOutputs_t out{};
  out.recvX = buf;
  out.recvCount = reinterpret_cast<int32_t*>(buf);
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND_RECV) == "");
  BOOST_TEST(checkLlDispatch(h, &in, &out, 0).find("flags") != std::string::npos);
  BOOST_TEST(checkLlDispatch(h, &in, &out, 4).find("flags") != std::string::npos);
  in.numTokens = 129;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND).find("maxTokensPerRank = 128") != std::string::npos);
  in.numTokens = 7;
  in.useFp8 = 1;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND).find("fp8Dispatch") != std::string::npos);
  in.useFp8 = 0;
  in.roundScale = 1;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND).find("roundScale") != std::string::npos);
  in.roundScale = 0;
  in.x = buf + 4;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND).find("x must be 16-byte aligned") != std::string::npos);
  in.x = buf;
  in.topkIdxType = ncclFloat32;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND).find("topkIdxType") != std::string::npos);
  in.topkIdxType = ncclInt32;
  out.recvCount = nullptr;
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_RECV).find("recvCount is NULL") != std::string::npos);
  BOOST_TEST(checkLlDispatch(h, &in, &out, NCCL_EP_LL_SEND) == "");  // outputs belong to the receive half
  out.recvCount = reinterpret_cast<int32_t*>(buf);
  // Call order: receive without send, send twice, combine before a received dispatch.
  BOOST_TEST(checkLlDispatchOrder(h, NCCL_EP_LL_RECV).find("without a pending send") != std::string::npos);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_SEND_RECV).find("needs a dispatch") != std::string::npos);
  BOOST_TEST(checkLlDispatchOrder(h, NCCL_EP_LL_SEND) == "");
  advanceLlDispatch(&st, &calls, in, NCCL_EP_LL_SEND);
  BOOST_TEST(st.numTokens == 7);
  BOOST_TEST(checkLlDispatchOrder(h, NCCL_EP_LL_SEND).find("not been received") != std::string::npos);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_SEND).find("needs a dispatch") != std::string::npos);
  BOOST_TEST(checkLlDispatchOrder(h, NCCL_EP_LL_RECV) == "");
  advanceLlDispatch(&st, &calls, in, NCCL_EP_LL_RECV);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_RECV).find("without a pending send") != std::string::npos);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_SEND) == "");
  advanceLlCombine(&st, &calls, NCCL_EP_LL_SEND);
  BOOST_TEST(checkLlDispatchOrder(h, NCCL_EP_LL_SEND).find("combine send half") != std::string::npos);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_RECV) == "");
  advanceLlCombine(&st, &calls, NCCL_EP_LL_RECV);
  BOOST_TEST(checkLlCombineOrder(h, NCCL_EP_LL_SEND_RECV) == "");  // combine again on the same dispatch
  ncclEpLowLatencyCombineInputs_t cin{};
  ncclEpLowLatencyCombineOutputs_t cout{};
  cin.x = buf;
  BOOST_TEST(checkLlCombine(h, &cin, &cout, NCCL_EP_LL_RECV).find("topkWeights is NULL") != std::string::npos);
  cin.topkWeights = reinterpret_cast<const float*>(buf);
  cout.out = buf + 8;
  BOOST_TEST(checkLlCombine(h, &cin, &cout, NCCL_EP_LL_SEND_RECV).find("out must be 16-byte aligned") != std::string::npos);
}

// Several handles of one group: receive halves in send order, at most two sends pending.
BOOST_AUTO_TEST_CASE(group_call_order_across_handles) {
  GroupConfig g;
  ncclEpConfig_t c = llConfig(128, 2048, 8, 16);
  BOOST_REQUIRE(normalizeConfig(&c, 2, &g) == "");
  LlGroupCalls calls;
  LlCallState a, b, d;
  const LlHandleView ha{&g, 2, &a, &calls}, hb{&g, 2, &b, &calls}, hd{&g, 2, &d, &calls};
  ncclEpLowLatencyDispatchInputs_t in{};
  BOOST_TEST(checkLlDispatchOrder(ha, NCCL_EP_LL_SEND) == "");
  advanceLlDispatch(&a, &calls, in, NCCL_EP_LL_SEND);
  BOOST_TEST(checkLlDispatchOrder(hb, NCCL_EP_LL_SEND_RECV).find("pending on this group") != std::string::npos);
  BOOST_TEST(checkLlDispatchOrder(hb, NCCL_EP_LL_SEND) == "");
  advanceLlDispatch(&b, &calls, in, NCCL_EP_LL_SEND);
  BOOST_TEST(checkLlDispatchOrder(hd, NCCL_EP_LL_SEND).find("at most 2") != std::string::npos);
  BOOST_TEST(checkLlDispatchOrder(hb, NCCL_EP_LL_RECV).find("order of their send halves") != std::string::npos);
  BOOST_TEST(checkLlDispatchOrder(ha, NCCL_EP_LL_RECV) == "");
  advanceLlDispatch(&a, &calls, in, NCCL_EP_LL_RECV);
  BOOST_TEST(checkLlDispatchOrder(hd, NCCL_EP_LL_SEND) == "");  // one pending again
  BOOST_TEST(checkLlDispatchOrder(hb, NCCL_EP_LL_RECV) == "");
  advanceLlDispatch(&b, &calls, in, NCCL_EP_LL_RECV);
  BOOST_TEST(calls.sent[0] == 2u);
  BOOST_TEST(calls.received[0] == 2u);
  // Combines of both handles in the same pattern.
  advanceLlCombine(&a, &calls, NCCL_EP_LL_SEND);
  advanceLlCombine(&b, &calls, NCCL_EP_LL_SEND);
  BOOST_TEST(checkLlCombineOrder(hb, NCCL_EP_LL_RECV).find("order of their send halves") != std::string::npos);
  BOOST_TEST(checkLlCombineOrder(ha, NCCL_EP_LL_RECV) == "");
}

BOOST_AUTO_TEST_CASE(reference_rows_follow_source_then_token_order) {
  ref::LlShape s;
  s.nRanks = 2;
  s.maxTokens = 4;
  s.topk = 3;
  s.numExperts = 4;  // Le = 2: experts 0,1 on rank 0; 2,3 on rank 1
  std::vector<ref::LlRouting> all(2);
  all[0].numTokens = 3;
  all[0].topkIdx = {1, 2, -1,   // token 0
                    0, 1, 1,    // token 1: slot 2 repeats expert 1 (dropped)
                    3, 9, 0};   // token 2: 9 is out of range (dropped)
  all[1].numTokens = 2;
  all[1].topkIdx = {1, -1, -1, 2, 3, 1};
  BOOST_TEST(ref::llSlotExpert(s, all[0], 1, 2) == -1);
  BOOST_TEST(ref::llSlotInvalid(s, all[0], 1, 2));
  BOOST_TEST(ref::llSlotInvalid(s, all[0], 2, 1));
  BOOST_TEST(!ref::llSlotInvalid(s, all[0], 0, 2));  // -1 is a masked slot, not an error
  const ref::LlReceived r0 = ref::llDispatchRows(s, all, 0);
  BOOST_REQUIRE(r0.rows.size() == 2u);
  const std::vector<ref::LlRow> e0 = {{0, 1, 0}, {0, 2, 2}};
  const std::vector<ref::LlRow> e1 = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0}, {1, 1, 2}};
  BOOST_TEST((r0.rows[0] == e0));
  BOOST_TEST((r0.rows[1] == e1));
  const ref::LlReceived r1 = ref::llDispatchRows(s, all, 1);
  const std::vector<ref::LlRow> e2 = {{0, 0, 1}, {1, 1, 0}};
  const std::vector<ref::LlRow> e3 = {{0, 2, 0}, {1, 1, 1}};
  BOOST_TEST((r1.rows[0] == e2));
  BOOST_TEST((r1.rows[1] == e3));
}

// The GIN path's arithmetic (ll_dispatch.cu / ll_combine.cu) replayed on the layout with every
// peer a network peer: each source stages its rows in global expert order (destination d's header
// right before d's rows), one put per destination moves header + rows into the source's area of the
// bank, and the receiver, walking the header's prefix, finds the reference's rows in output order.
// Combine: the expert rank's packed return (local expert, then slot) lands where the source looks
// (its staging prefix), inside the expert rank's rows of combineRecv.
BOOST_AUTO_TEST_CASE(ll_gin_landing_matches_reference) {
  const int R = 4, T = 9, K = 3, E = 16, Le = E / R, H = 256;
  GroupConfig g;
  ncclEpConfig_t c = llConfig(T, H, K, E);
  BOOST_REQUIRE(normalizeConfig(&c, R, &g) == "");
  const dev::LlLayout l = computeLlLayout(g, R, 1);
  ref::LlShape s;
  s.nRanks = R;
  s.maxTokens = T;
  s.hidden = H;
  s.topk = K;
  s.numExperts = E;
  std::mt19937 rng(11);
  std::vector<ref::LlRouting> all(R);
  for (int r = 0; r < R; ++r) {
    all[r].numTokens = T - r;  // 9, 8, 7, 6 tokens; ids in [-1, E] (repeats, masked and invalid too)
    for (int i = 0; i < all[r].numTokens * K; ++i) all[r].topkIdx.push_back(int64_t(rng() % (E + 2)) - 1);
  }
  struct Msg {
    int src, token, k;
  };
  for (bool fp8 : {false, true})
    for (int bank = 0; bank < dev::kLlBanks; ++bank) {
      std::vector<std::map<uint64_t, Msg>> win(R);                       // [dst] landed message offsets
      std::vector<std::vector<int>> hdr(R, std::vector<int>(size_t(R) * Le));  // [dst][src * Le + le]
      std::vector<std::vector<int>> stage(R, std::vector<int>(E + 1, 0));      // [src] stageStart
      std::vector<std::vector<int>> slotOf(R);                                 // [src][t * K + k]
      for (int src = 0; src < R; ++src) {
        const ref::LlRouting& rt = all[src];
        std::vector<int> count(E, 0);
        slotOf[src].assign(size_t(rt.numTokens) * K, -1);
        for (int t = 0; t < rt.numTokens; ++t)
          for (int k = 0; k < K; ++k) {
            const int e = ref::llSlotExpert(s, rt, t, k);
            if (e >= 0) slotOf[src][size_t(t) * K + k] = count[e]++;
          }
        for (int e = 0; e < E; ++e) stage[src][e + 1] = stage[src][e] + count[e];
        std::map<uint64_t, Msg> staged;
        for (int t = 0; t < rt.numTokens; ++t)
          for (int k = 0; k < K; ++k) {
            const int e = ref::llSlotExpert(s, rt, t, k);
            if (e < 0) continue;
            const uint64_t off = l.stageMsg(stage[src][e] + slotOf[src][size_t(t) * K + k], e / Le, fp8);
            BOOST_TEST(off + l.msgBytes(fp8) <= l.combineRecv);
            BOOST_TEST(staged.emplace(off, Msg{src, t, k}).second);
          }
        for (int d = 0; d < R; ++d) {
          const int first = stage[src][d * Le], rows = stage[src][(d + 1) * Le] - first;
          const uint64_t from = l.hdrStage(d, first, fp8), bytes = l.hdrBytes() + uint64_t(rows) * l.msgBytes(fp8);
          BOOST_TEST(from >= l.dispatchStage);
          BOOST_TEST(l.hdr(bank, src) + bytes <= (src + 1 < R ? l.hdr(bank, src + 1) : l.hdr(bank, 0) + R * l.srcBytes));
          for (int le = 0; le < Le; ++le) hdr[d][size_t(src) * Le + le] = count[d * Le + le];
          int moved = 0;
          for (auto it = staged.lower_bound(from + l.hdrBytes()); it != staged.end() && it->first < from + bytes; ++it, ++moved)
            win[d][l.hdr(bank, src) + (it->first - from)] = it->second;
          BOOST_TEST(moved == rows);
        }
      }
      for (int r = 0; r < R; ++r) {
        const ref::LlReceived want = ref::llDispatchRows(s, all, r);
        for (int le = 0; le < Le; ++le) {
          std::vector<ref::LlRow> got;
          for (int src = 0; src < R; ++src) {
            int off = 0;
            for (int j = 0; j < le; ++j) off += hdr[r][size_t(src) * Le + j];
            for (int slot = 0; slot < hdr[r][size_t(src) * Le + le]; ++slot) {
              const auto it = win[r].find(l.ginRecvMsg(bank, src, off + slot, fp8));
              BOOST_REQUIRE(it != win[r].end());
              got.push_back({it->second.src, it->second.token, it->second.k});
              // Combine: the expert rank packs (le, slot) for src at `off + slot`; src looks it up
              // by its staging prefix.
              const int e = r * Le + le;
              BOOST_TEST(stage[src][e] - stage[src][r * Le] + slot == off + slot);
              BOOST_TEST(l.ginCombineRecvRow(bank, r, off + slot) + l.rowBytes <= l.combineRecvRow(bank, (r + 1) * Le - 1, T - 1) + l.rowBytes);
            }
          }
          BOOST_TEST((got == want.rows[size_t(le)]));
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(fp8_e4m3_cast_is_round_to_nearest_even_and_saturating) {
  BOOST_TEST(int(ref::fp8E4m3FromFloat(1.f)) == 0x38);
  BOOST_TEST(int(ref::fp8E4m3FromFloat(-2.f)) == 0xc0);
  BOOST_TEST(int(ref::fp8E4m3FromFloat(0.5f)) == 0x30);
  BOOST_TEST(int(ref::fp8E4m3FromFloat(448.f)) == 0x7e);
  BOOST_TEST(int(ref::fp8E4m3FromFloat(1000.f)) == 0x7e);   // saturates
  BOOST_TEST(int(ref::fp8E4m3FromFloat(-1000.f)) == 0xfe);
  BOOST_TEST(int(ref::fp8E4m3FromFloat(std::ldexp(1.f, -9))) == 0x01);  // smallest subnormal
  BOOST_TEST(int(ref::fp8E4m3FromFloat(std::ldexp(1.f, -6))) == 0x08);  // smallest normal
  BOOST_TEST(int(ref::fp8E4m3FromFloat(1.0625f)) == 0x38);  // tie between 1 and 1.125: even (1)
  BOOST_TEST(int(ref::fp8E4m3FromFloat(1.1875f)) == 0x3a);  // tie between 1.125 and 1.25: even (1.25)
  BOOST_TEST(int(ref::fp8E4m3FromFloat(1.07f)) == 0x39);    // nearest: 1.125
  BOOST_TEST(int(ref::fp8E4m3FromFloat(std::ldexp(1.f, -11))) == 0x00);  // below half the smallest subnormal
  // Every finite code survives a round trip.
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;
    BOOST_TEST(int(ref::fp8E4m3FromFloat(ref::fp8E4m3ToFloat(uint8_t(v)))) == v, "code " << v);
  }
}

BOOST_AUTO_TEST_CASE(fp8_scales_are_bit_exact) {
  BOOST_TEST(ref::llFp8Scale(448.f, false) == 1.f);
  BOOST_TEST(ref::llFp8Scale(896.f, false) == 2.f);
  BOOST_TEST(floatBits(ref::llFp8Scale(1344.f, false)) == floatBits(3.f));
  BOOST_TEST(ref::llFp8Scale(1344.f, true) == 4.f);  // UE8M0: rounded up to a power of two
  BOOST_TEST(ref::llFp8Scale(896.f, true) == 2.f);   // already a power of two
  BOOST_TEST(floatBits(ref::llFp8Scale(0.f, false)) == floatBits(1e-4f / 448.f));  // all-zero block: floor
  BOOST_TEST(floatBits(ref::llFp8Scale(1.f, false)) == floatBits(1.f / 448.f));
  const float p = ref::llFp8Scale(1.f, true);  // 1/448 rounded up: 2^-8
  BOOST_TEST(p == std::ldexp(1.f, -8));
  // A row of two blocks: block 0 max 896 (scale 2), block 1 all zero.
  std::vector<uint16_t> x(256, ref::floatToBf16(0.f));
  x[0] = ref::floatToBf16(896.f);
  x[1] = ref::floatToBf16(3.f);
  x[2] = ref::floatToBf16(-1.f);
  std::vector<uint8_t> q(256);
  float scales[2];
  ref::llCastRowFp8(x.data(), 256, false, q.data(), scales);
  BOOST_TEST(scales[0] == 2.f);
  BOOST_TEST(int(q[0]) == 0x7e);  // 448
  BOOST_TEST(int(q[1]) == 0x3c);  // 1.5
  BOOST_TEST(int(q[2]) == 0xb0);  // -0.5
  BOOST_TEST(int(q[3]) == 0x00);
  BOOST_TEST(floatBits(scales[1]) == floatBits(1e-4f / 448.f));
  BOOST_TEST(int(q[200]) == 0x00);
}

BOOST_AUTO_TEST_CASE(weighted_combine_sums_slots_in_order_and_skips_masked) {
  ref::LlShape s;
  s.nRanks = 1;
  s.maxTokens = 2;
  s.hidden = 8;
  s.topk = 3;
  s.numExperts = 4;
  ref::LlRouting r;
  r.numTokens = 2;
  r.topkIdx = {0, -1, 2,   // token 0: slot 1 masked
               3, 3, 1};   // token 1: slot 1 repeats 3 (dropped)
  const std::vector<float> w = {0.5f, 100.f, 0.25f, 1.f, 100.f, -1.f};
  // Expert e's output for a token: every channel 1 + e (exact in BF16); token 1 adds 256.
  std::vector<std::vector<uint16_t>> rows(8, std::vector<uint16_t>(8));
  for (int t = 0; t < 2; ++t)
    for (int e = 0; e < 4; ++e)
      for (int c = 0; c < 8; ++c) rows[t * 4 + e][c] = ref::floatToBf16(float(1 + e + 256 * t));
  auto row = [&](int t, int k) { return rows[t * 4 + ref::llSlotExpert(s, r, t, k)].data(); };
  const std::vector<uint16_t> out = ref::llCombine(s, r, w, row);
  BOOST_TEST(ref::bf16ToFloat(out[0]) == 0.5f * 1 + 0.25f * 3);  // 1.25; masked slot's weight unused
  // token 1: 1 * 260 + (-1) * 258 = 2 (FP32 in slot order, then BF16)
  BOOST_TEST(ref::bf16ToFloat(out[8]) == 2.f);
  BOOST_TEST(ref::bf16ToFloat(out[15]) == 2.f);
}

BOOST_AUTO_TEST_SUITE_END()
