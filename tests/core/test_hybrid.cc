// CPU tests of hybrid forwarding's host-side pieces: the forwarding option and its validation, the
// window regions it adds, and the protocol arithmetic the kernels use (rail peers, deliverers,
// record numbering, combine order) against the CPU routing plan (ref hybrid_ref.h), and the
// batched forward hop's runs and segments (protocol.h "Batching") on a model of the kernels.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/agree.h"
#include "core/config.h"
#include "epx/device/protocol.h"
#include "epx/device/window_layout.h"
#include "epx/ref/hybrid_ref.h"

using namespace epx;

namespace {
ncclEpConfig_t base() {
  ncclEpConfig_t c = NCCL_EP_CONFIG_INITIALIZER;
  c.maxTokensPerRank = 128;
  c.hidden = 256;
  c.topk = 4;
  c.numExperts = 16;
  return c;
}
bool mentions(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Random valid routing of every rank (distinct experts per token, some unused slots).
std::vector<ref::RankRouting> randomRouting(const ref::EpShape& s, int T, std::mt19937& rng) {
  std::vector<ref::RankRouting> all(s.nRanks);
  std::vector<int> experts(s.numExperts);
  for (int i = 0; i < s.numExperts; ++i) experts[i] = i;
  for (auto& r : all) {
    r.numTokens = T;
    r.topkIdx.assign(size_t(T) * s.topk, -1);
    r.topkWeights.assign(size_t(T) * s.topk, 0.f);
    for (int t = 0; t < T; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int k = 0; k < s.topk; ++k)
        if (rng() % 5 != 0) r.topkIdx[size_t(t) * s.topk + k] = experts[k];
    }
  }
  return all;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(hybrid_logic)

BOOST_AUTO_TEST_CASE(forwarding_option_defaults_and_values) {
  GroupConfig c;
  ncclEpConfig_t in = base();
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.forwarding == ncclEpForwardDirect);  // auto is direct for now (ep.h)
  BOOST_TEST(c.forwardNodeSize == 0);
  in.forwarding = ncclEpForwardAuto;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(!c.hybrid());
  in.forwarding = ncclEpForwardHybrid;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.hybrid());
  in.forwardNodeSize = 2;
  BOOST_TEST(normalizeConfig(&in, 4, &c) == "");
  BOOST_TEST(c.forwardNodeSize == 2);
}

BOOST_AUTO_TEST_CASE(forwarding_option_refusals_name_the_field) {
  struct Case {
    const char* what;
    void (*edit)(ncclEpConfig_t&);
    const char* needle;
  };
  const Case cases[] = {
      {"unknown value", [](ncclEpConfig_t& c) { c.forwarding = 3; }, "forwarding must be"},
      {"negative node size", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardHybrid, c.forwardNodeSize = -1; },
       "forwardNodeSize must be >= 0"},
      {"node size with direct", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardDirect, c.forwardNodeSize = 2; },
       "applies to forwarding = ncclEpForwardHybrid only"},
      {"node size with auto", [](ncclEpConfig_t& c) { c.forwardNodeSize = 2; }, "with forwarding = ncclEpForwardAuto (direct)"},
      {"low latency", [](ncclEpConfig_t& c) { c.forwarding = ncclEpForwardHybrid, c.algorithm = ncclEpAlgoLowLatency; },
       "high-throughput"},
  };
  for (const Case& k : cases) {
    ncclEpConfig_t in = base();
    k.edit(in);
    GroupConfig c;
    const std::string msg = normalizeConfig(&in, 4, &c);
    BOOST_TEST_INFO(k.what << ": " << msg);
    BOOST_TEST(mentions(msg, k.needle));
  }
}

BOOST_AUTO_TEST_CASE(check_forwarding_nodes) {
  GroupConfig c;
  c.forwarding = ncclEpForwardHybrid;
  int n = -1;
  // Direct: no nodes.
  GroupConfig d;
  BOOST_TEST(checkForwarding(d, 8, 1, &n) == "");
  BOOST_TEST(n == 0);
  // Node = the NVLink team.
  BOOST_TEST(checkForwarding(c, 64, 8, &n) == "");
  BOOST_TEST(n == 8);
  // Virtual nodes of fake nodes: 4 as 2 x 2, 8 as 2 x 4 and 4 x 2.
  for (auto [ranks, size] : {std::pair{4, 2}, {8, 4}, {8, 2}}) {
    c.forwardNodeSize = size;
    BOOST_TEST(checkForwarding(c, ranks, 1, &n) == "");
    BOOST_TEST(n == size);
  }
  struct Bad {
    int ranks, lsa, size;
    const char* needle;
  };
  const Bad bad[] = {
      {6, 1, 4, "must divide the EP size 6"},
      {8, 8, 0, "all 8 ranks are one node"},
      {4, 1, 4, "all 4 ranks are one node"},
      {16, 4, 2, "whole NVLink teams (of 4 ranks)"},
      {256, 1, 128, "at most 64 ranks per node"},
  };
  for (const Bad& b : bad) {
    c.forwardNodeSize = b.size;
    const std::string msg = checkForwarding(c, b.ranks, b.lsa, &n);
    BOOST_TEST_INFO(b.ranks << " ranks, LSA " << b.lsa << ", node " << b.size << ": " << msg);
    BOOST_TEST(mentions(msg, b.needle));
    BOOST_TEST(mentions(msg, "ncclEpForwardHybrid"));
    BOOST_TEST(n == 0);
  }
}

BOOST_AUTO_TEST_CASE(agreement_compares_forwarding) {
  GroupConfig c;
  c.maxTokensPerRank = 128, c.hidden = 256, c.topk = 4, c.numExperts = 16;
  std::vector<AgreedConfig> all(4, makeAgreedConfig(c, 8));
  BOOST_TEST(checkAgreement(all) == "");
  c.forwarding = ncclEpForwardHybrid;
  c.forwardNodeSize = 2;
  all[2] = makeAgreedConfig(c, 8);
  const std::string msg = checkAgreement(all);
  BOOST_TEST(mentions(msg, "rank 2 has forwarding 2 but rank 0 has 1"));
}

BOOST_AUTO_TEST_CASE(window_regions_of_hybrid) {
  GroupConfig c;
  c.maxTokensPerRank = 100, c.hidden = 256, c.topk = 4, c.numExperts = 16, c.fp8Dispatch = true;
  const dev::WindowLayout direct = computeWindowLayout(c, 8, 1);
  BOOST_TEST(direct.fwdRows == 0u);
  BOOST_TEST(direct.nodeSize == 0u);
  // Direct mode adds no bytes: every hybrid region starts where the last direct one ended.
  BOOST_TEST(direct.fwdNodeW == direct.fwdSendX);
  c.forwarding = ncclEpForwardHybrid;
  c.forwardNodeSize = 2;
  const dev::WindowLayout h = computeWindowLayout(c, 8, 1);
  BOOST_TEST(h.nodeSize == 2u);
  BOOST_TEST(h.fwdRows == 4u * 100u);  // 4 nodes x maxTokens
  BOOST_TEST(h.totalBytes > direct.totalBytes);
  BOOST_TEST(h.totalBytes % dev::kWindowTotalAlign == 0u);
  // The direct regions are where they were; the hybrid ones follow, in order, without overlap.
  BOOST_TEST(h.stagePos == direct.stagePos);
  const uint64_t K = 4, H = 256, fwd = h.fwdRows, N = 2, RI = dev::fwdRecordInts(4), WI = dev::fwdRowInts(4);
  const std::vector<std::pair<uint64_t, uint64_t>> regions = {
      {h.fwdSendX, fwd * H * 2},           {h.fwdSendScales, fwd * (H / 128) * 4}, {h.fwdSendMeta, fwd * RI * 4},
      {h.fwdRecvX, fwd * H * 2},           {h.fwdRecvScales, fwd * (H / 128) * 4}, {h.fwdRecvMeta, fwd * RI * 4},
      {h.fwdOutX, fwd * N * H * 2},        {h.fwdOutScales, fwd * N * (H / 128) * 4},
      {h.fwdMetaStage, fwd * N * WI * 4},  {h.recvFwdMeta, uint64_t(h.rows) * WI * 4},
      {h.fwdPartX, fwd * N * h.combineRowBytes}, {h.fwdPartW, fwd * N * K * 4},
      {h.fwdNodeX, fwd * h.combineRowBytes}, {h.fwdNodeW, fwd * K * 4}};
  uint64_t end = h.stagePos;
  for (const auto& [at, bytes] : regions) {
    BOOST_TEST(at >= end);
    BOOST_TEST(at % dev::kWindowRegionAlign == 0u);
    end = at + bytes;
  }
  BOOST_TEST(end <= h.totalBytes);
  // Packed metadata: whole 16-byte vectors holding what window_layout.h lists.
  for (int k : {1, 4, 8, 32}) {
    BOOST_TEST(dev::fwdRecordInts(k) % 4 == 0u);
    BOOST_TEST(dev::fwdRecordInts(k) >= uint32_t(4 * k + 1));
    BOOST_TEST(dev::fwdRowInts(k) % 4 == 0u);
    BOOST_TEST(dev::fwdRowInts(k) >= uint32_t(3 * k + 3));
  }
  // Nodes that are NVLink teams store forwarded rows in place: no forwarding stage.
  c.forwardNodeSize = 4;
  const dev::WindowLayout nv = computeWindowLayout(c, 8, 4);
  BOOST_TEST(nv.fwdRows == 2u * 100u);
  BOOST_TEST(nv.fwdMetaStage == nv.fwdOutX);
  BOOST_TEST(nv.recvFwdMeta == nv.fwdOutX);  // fwdOutX, fwdOutScales, fwdMetaStage: 0 bytes
  // An invalid hybrid config (refused at creation) lays out like direct mode.
  c.forwardNodeSize = 3;
  BOOST_TEST(computeWindowLayout(c, 8, 1).fwdRows == 0u);
}

// The first GPU run's failing case (4 fake nodes as 2 x 2, maxT 22795, H 8, K 13, E 4, exact
// combine with FP32 rows): every region in order and inside the window, the segments (rows of
// the last one) inside theirs, no 32-bit offset arithmetic past its range.
BOOST_AUTO_TEST_CASE(window_regions_at_the_failing_case) {
  GroupConfig c;
  c.maxTokensPerRank = 22795, c.hidden = 8, c.topk = 13, c.numExperts = 4, c.exactCombine = true;
  c.forwarding = ncclEpForwardHybrid;
  c.forwardNodeSize = 2;
  const dev::WindowLayout h = computeWindowLayout(c, 4, 1);
  const uint64_t T = 22795, K = 13, H = 8, N = 2, nodes = 2, fwd = nodes * T, rows = 4 * T;
  BOOST_TEST(h.fwdRows == fwd);
  BOOST_TEST(h.combineRowBytes == H * 4);
  const uint64_t WI = dev::fwdRowInts(13), RI = dev::fwdRecordInts(13);
  const std::vector<std::pair<uint64_t, uint64_t>> regions = {
      {h.combineX, rows * H * 4},       {h.combineRecv, rows * H * 4},   {h.combineRecvW, rows * K * 4},
      {h.combineStageW, rows * K * 4},  {h.fwdSendX, fwd * H * 2},       {h.fwdSendMeta, fwd * RI * 4},
      {h.fwdRecvX, fwd * H * 2},        {h.fwdRecvMeta, fwd * RI * 4},   {h.fwdOutX, fwd * N * H * 2},
      {h.fwdMetaStage, fwd * N * WI * 4}, {h.recvFwdMeta, rows * WI * 4}, {h.fwdPartX, fwd * N * H * 4},
      {h.fwdPartW, fwd * N * K * 4},    {h.fwdNodeX, fwd * H * 4},       {h.fwdNodeW, fwd * K * 4}};
  uint64_t end = 0;
  for (const auto& [at, bytes] : regions) {
    BOOST_TEST(at >= end);
    end = at + bytes;
  }
  BOOST_TEST(end <= h.totalBytes);
  // The last segment row (last source node, last rank, a run of maxTokens rows) is inside.
  const uint64_t last = dev::fwdSegmentRow(int(nodes) - 1, int(N) - 1, int(T) - 1, int(N), int(T));
  BOOST_TEST(last == fwd * N - 1);
  BOOST_TEST(h.fwdPartX + (last + 1) * H * 4 <= h.fwdPartW);
  BOOST_TEST(h.fwdMetaStage + (last + 1) * WI * 4 <= h.recvFwdMeta);
  // Row indices stay far below 2^31 (int arithmetic in the kernels): rows * K and fwd * N * K.
  BOOST_TEST(rows * K < (uint64_t(1) << 31));
  BOOST_TEST(fwd * N * K < (uint64_t(1) << 31));
}

BOOST_AUTO_TEST_CASE(rail_peers_and_deliverers) {
  const int N = 4, R = 16;
  for (int s = 0; s < R; ++s)
    for (int d = 0; d < R; ++d) {
      const int f = dev::delivererOf(s, d, N);
      if (dev::nodeOfRank(s, N) == dev::nodeOfRank(d, N)) {
        BOOST_TEST(!dev::isForwarded(s, d, N));
        BOOST_TEST(f == s);
      } else {
        BOOST_TEST(dev::isForwarded(s, d, N));
        BOOST_TEST(dev::nodeOfRank(f, N) == dev::nodeOfRank(d, N));  // the forwarder is in d's node
        BOOST_TEST(f % N == s % N);                                   // on s's rail
      }
      BOOST_TEST(dev::delivererOf(s, d, 0) == s);  // direct mode
      BOOST_TEST(!dev::isForwarded(s, d, 0));
    }
  // Records: one area of maxTokens rows per node.
  BOOST_TEST(dev::fwdRecordRow(0, 5, 100) == 5);
  BOOST_TEST(dev::fwdRecordRow(3, 0, 100) == 300);
}

BOOST_AUTO_TEST_CASE(kernel_arithmetic_matches_the_routing_plan) {
  std::mt19937 rng(34);
  for (auto [R, N] : {std::pair{4, 2}, {8, 4}, {8, 2}, {16, 4}}) {
    ref::EpShape s;
    s.nRanks = R, s.hidden = 8, s.topk = 4, s.numExperts = 4 * R;
    const int T = 40, K = s.topk, Le = s.localExperts();
    const auto routing = randomRouting(s, T, rng);
    const ref::HybridPlan plan = ref::hybridPlan(s, ref::NodeGeometry{R, N}, routing);
    for (int src = 0; src < R; ++src) {
      const auto& idx = routing[src].topkIdx;
      std::vector<int32_t> e(idx.begin(), idx.end());
      // Records (first slot per other node) = the plan's network copies of hybrid mode.
      int64_t records = 0;
      for (int t = 0; t < T; ++t)
        for (int node = 0; node < R / N; ++node) {
          if (node == dev::nodeOfRank(src, N)) continue;
          int firsts = 0;
          for (int k = 0; k < K; ++k) firsts += dev::firstSlotOfNode(e.data() + size_t(t) * K, k, Le, N, node) ? 1 : 0;
          BOOST_TEST(firsts <= 1);
          records += firsts;
        }
      BOOST_TEST(records == plan.hybridNetworkTokens[src]);
    }
    // Every delivery's forwarder is the kernels' deliverer.
    for (int d = 0; d < R; ++d)
      for (const ref::HybridDelivery& del : plan.deliveries[d]) BOOST_TEST(del.forwarder == dev::delivererOf(del.srcRank, d, N));
    // Combine order: one key per own-node rank and per other node, ordered like the reference's
    // ascending nodes (CombinePath), and equal to the rank itself in direct mode.
    for (int src = 0; src < R; ++src) {
      std::set<int> keys;
      for (int d = 0; d < R; ++d) {
        const int key = dev::combineOrderKey(src, d, N);
        BOOST_TEST(dev::combineOrderKey(src, d, 0) == d);
        if (dev::isForwarded(src, d, N)) BOOST_TEST(key == dev::nodeOfRank(d, N) * N);
        else BOOST_TEST(key == d);
        keys.insert(key);
        for (int d2 = 0; d2 < R; ++d2)
          if (dev::nodeOfRank(d, N) < dev::nodeOfRank(d2, N)) BOOST_TEST(key < dev::combineOrderKey(src, d2, N));
      }
      BOOST_TEST(int(keys.size()) == (R / N - 1) + N);
    }
  }
}

namespace {
// A model of what the layout and the hybrid kernels compute for one dispatch (distinct experts per
// token, slots unused with probability `unused`): the count matrix, each token's index among its
// source's rows to each rank (tokSlot, global), the records, and the forward hop as batched.
struct ForwardModel {
  int R, N, K, Le, maxT;
  std::vector<int> T;
  std::vector<std::vector<int32_t>> ids;    // [s][t * K + k]
  std::vector<std::vector<int>> counts;     // [s][d] rows s sends d
  std::vector<std::vector<int>> slot;       // [s][t * R + d] index among s's rows to d, or -1
  ForwardModel(int nRanks, int nodeSize, int topk, int experts, std::vector<int> tokens, double unused, std::mt19937& rng)
      : R(nRanks), N(nodeSize), K(topk), Le(experts / nRanks), T(std::move(tokens)) {
    maxT = *std::max_element(T.begin(), T.end());
    std::vector<int> e(experts);
    for (int i = 0; i < experts; ++i) e[i] = i;
    std::uniform_real_distribution<double> u(0, 1);
    counts.assign(R, std::vector<int>(R, 0));
    for (int s = 0; s < R; ++s) {
      ids.emplace_back(size_t(T[s]) * K, -1);
      slot.emplace_back(size_t(T[s]) * R, -1);
      for (int t = 0; t < T[s]; ++t) {
        std::shuffle(e.begin(), e.end(), rng);
        for (int k = 0; k < K && k < experts; ++k)
          if (u(rng) >= unused) ids[s][size_t(t) * K + k] = e[k];
        for (int d = 0; d < R; ++d) {
          bool to = false;
          for (int k = 0; k < K; ++k) to = to || dev::destOf(ids[s][size_t(t) * K + k], Le) == d;
          if (to) slot[s][size_t(t) * R + d] = counts[s][d]++;
        }
      }
    }
  }
  int sendBase(int s, int d) const {  // first row of s's rows at d (the layout's sendBase / recvBase)
    int b = 0;
    for (int p = 0; p < s; ++p) b += counts[p][d];
    return b;
  }
  // Tokens of s with a slot on `node` in token order: the records (tokNodeSlot numbering).
  std::vector<int> records(int s, int node) const {
    std::vector<int> out;
    for (int t = 0; t < T[s]; ++t)
      for (int k = 0; k < K; ++k)
        if (dev::firstSlotOfNode(ids[s].data() + size_t(t) * K, k, Le, N, node)) out.push_back(t);
    return out;
  }
};

struct OpCounts {
  int64_t perRow = 0, batched = 0;  // GIN operations of the previous per-row hop and of the batched one
};

// Checks the batched forward hop of model m (virtual nodes: every other rank is a network rank)
// and returns the GIN operations both ways, dispatch and combine, over all ranks.
std::pair<OpCounts, OpCounts> checkForwardHop(const ForwardModel& m) {
  const int R = m.R, N = m.N, nodes = R / N, T = m.maxT;
  const auto counts = [&](int s, int d) { return m.counts[s][d]; };
  OpCounts dispatch, combine;
  std::set<uint64_t> segments;
  for (int f = 0; f < R; ++f) {
    const int myNode = dev::nodeOfRank(f, N);
    for (int n = 0; n < nodes; ++n) {
      if (n == myNode) continue;
      const int s = dev::railPeerOf(f, n, N);
      const std::vector<int> rec = m.records(s, myNode);
      BOOST_TEST(int(rec.size()) <= T);  // records of one source node fit its area
      for (int dLocal = 0; dLocal < N; ++dLocal) {
        const int d = myNode * N + dLocal;
        const dev::ForwardedRun run = dev::forwardedRun(counts, R, f, n, d, N);
        // The run is where d expects s's rows (recvBase) and as long as it expects (its signal).
        BOOST_TEST(run.base == m.sendBase(s, d));
        BOOST_TEST(run.rows == m.counts[s][d]);
        std::vector<int> seen(size_t(run.rows), 0);
        for (int t : rec) {
          const int gslot = m.slot[s][size_t(t) * R + d];
          if (gslot < 0) continue;                     // not in d's mask
          const int row = m.sendBase(s, d) + gslot;    // the record's row at d (SendPlan::fwdRow)
          const int j = row - run.base;                // forwardRecord's index in the run
          BOOST_TEST_REQUIRE((j >= 0 && j < run.rows));
          ++seen[size_t(j)];
          // Combine: d's partial of received row i = recvBase[s] + gslot is at i - recvBase[s] = j.
          BOOST_TEST(j == gslot);
          const uint64_t seg = dev::fwdSegmentRow(n, dLocal, j, N, T);
          BOOST_TEST(seg < uint64_t(nodes) * N * T);
          BOOST_TEST(segments.insert(uint64_t(f) * nodes * N * T + seg).second);  // per forwarder, once
        }
        // Every row of the run comes from exactly one record: the run is contiguous and complete.
        BOOST_TEST(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        if (d == f) continue;  // this rank's own rows are stored in place
        dispatch.perRow += 3 * int64_t(run.rows);
        dispatch.batched += run.rows > 0 ? 2 : 0;        // rows, metadata + signal (BF16)
        combine.perRow += 2 * int64_t(run.rows);
        combine.batched += run.rows > 0 ? 2 : 0;         // weights, rows + signal
      }
    }
    BOOST_TEST(dispatch.batched <= int64_t(2) * (f + 1) * (nodes - 1) * (N - 1));
  }
  return {dispatch, combine};
}
}  // namespace

BOOST_AUTO_TEST_CASE(batched_forward_hop_runs_and_segments) {
  std::mt19937 rng(0x6da5c07e);
  // A large uneven case: 4 fake nodes as 2 x 2, K 13 over 4 experts, 63 % unused, 22795 tokens on
  // one rank (per-row forwarding put ~49,000 GIN operations here; runs put at most 8).
  {
    const ForwardModel m(4, 2, 13, 4, {22795, 2123, 13398, 6110}, 0.6317, rng);
    const auto [dispatch, combine] = checkForwardHop(m);
    BOOST_TEST_MESSAGE("large uneven case: dispatch GIN ops per row " << dispatch.perRow << ", batched " << dispatch.batched
                       << "; combine per row " << combine.perRow << ", batched " << combine.batched);
    BOOST_TEST(dispatch.batched <= 4 * 2);  // 4 forwarders x 1 other node x 1 network rank x 2 puts
    BOOST_TEST(combine.batched <= 4 * 2);
    BOOST_TEST(dispatch.perRow > 1000 * dispatch.batched);
  }
  // Other geometries, with ranks that have no tokens (runs of 0 rows post nothing).
  for (auto [R, N] : {std::pair{8, 4}, {8, 2}, {16, 4}}) {
    std::vector<int> T(R);
    for (int& t : T) t = int(rng() % 300);
    T[1] = 0;
    const ForwardModel m(R, N, 6, 4 * R, T, 0.3, rng);
    const auto [dispatch, combine] = checkForwardHop(m);
    BOOST_TEST(dispatch.batched <= int64_t(2) * R * (R / N - 1) * (N - 1));
    BOOST_TEST(combine.batched <= int64_t(2) * R * (R / N - 1) * (N - 1));
  }
}

BOOST_AUTO_TEST_SUITE_END()
