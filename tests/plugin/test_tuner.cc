// Tuner rules: parsing, matching, and the built plugin's ncclTunerPlugin_v5 on NCCL's real
// cost-table layout (a contiguous float[7][3] passed as float**).
#define BOOST_TEST_MODULE plugin_tuner
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>

#include "net_harness.h"
#include "nccl_tuner.h"
#include "tuner/rules.h"

using namespace epx::plugin::tuner;
using epx::test::captureLog;
using epx::test::warned;

namespace {

struct Table {
  float cost[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  Table() {
    for (auto& row : cost)
      for (float& c : row) c = NCCL_ALGO_PROTO_IGNORE;
    // What NCCL allows for a typical 2-node all-reduce: tree and ring with all protocols.
    for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING})
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) cost[a][p] = 10.0f + a * 3 + p;
  }
  float** raw() { return reinterpret_cast<float**>(cost); }
  // NCCL's selection: the smallest non-negative entry, first one on ties.
  std::pair<int, int> chosen() const {
    int ba = -1, bp = -1;
    float best = 1e30f;
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p)
        if (cost[a][p] >= 0 && cost[a][p] < best) best = cost[a][p], ba = a, bp = p;
    return {ba, bp};
  }
};

std::string writeRules(const std::string& text) {
  char path[] = "/tmp/epx_tuner_rulesXXXXXX";
  int fd = mkstemp(path);
  BOOST_TEST_REQUIRE(fd >= 0);
  BOOST_TEST_REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

const char* kRules =
    "# collective bytes ranks nodes algorithm protocol [channels]\n"
    "allreduce   0-64K    *    2-   tree  ll            # small, multi-node\n"
    "allreduce   64K-1M   *    *    nvls  simple        # not allowed in the test table\n"
    "allreduce   64K-1M   *    *    ring  ll128   4\n"
    "allgather   *        2    2    ring  simple\n"
    "*           1G-      *    *    ring  simple  16\n";

}  // namespace

BOOST_AUTO_TEST_CASE(parses_the_documented_format) {
  ParseResult r = parseRules(kRules);
  BOOST_TEST(r.errors.empty());
  BOOST_TEST_REQUIRE(r.rules.size() == 5u);
  BOOST_TEST(r.rules[0].collective == 4);
  BOOST_TEST(r.rules[0].bytes.lo == 0u);
  BOOST_TEST(r.rules[0].bytes.hi == 65536u);
  BOOST_TEST(r.rules[0].nodes.lo == 2u);
  BOOST_TEST(r.rules[0].nodes.hi == UINT64_MAX);
  BOOST_TEST(r.rules[0].algorithm == NCCL_ALGO_TREE);
  BOOST_TEST(r.rules[0].protocol == NCCL_PROTO_LL);
  BOOST_TEST(r.rules[0].channels == 0);
  BOOST_TEST(r.rules[0].line == 2);
  BOOST_TEST(r.rules[2].channels == 4);
  BOOST_TEST(r.rules[3].ranks.lo == 2u);
  BOOST_TEST(r.rules[3].ranks.hi == 2u);
  BOOST_TEST(r.rules[4].collective == -1);
  BOOST_TEST(r.rules[4].bytes.lo == (1ull << 30));
}

BOOST_AUTO_TEST_CASE(reports_bad_lines_and_keeps_good_ones) {
  ParseResult r = parseRules(
      "allreduce 0-1K * * ring simple\n"
      "allreduce 0-1K * * ring\n"           // too few fields
      "alltoall 0-1K * * ring simple\n"     // not a tunable collective
      "allreduce 1K-0 * * ring simple\n"    // empty range
      "allreduce 0-1X * * ring simple\n"    // bad suffix
      "allreduce * * * warp simple\n"       // bad algorithm
      "allreduce * * * ring fast\n"         // bad protocol
      "allreduce * * * ring simple lots\n"  // bad channels
      "allreduce * a-b * ring simple\n");   // bad ranks
  BOOST_TEST(r.rules.size() == 1u);
  BOOST_TEST_REQUIRE(r.errors.size() == 8u);
  BOOST_TEST(r.errors[0].find("line 2") == 0u);
  BOOST_TEST(r.errors[1].find("unknown collective") != std::string::npos);
  BOOST_TEST(r.errors[4].find("unknown algorithm") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(first_allowed_match_wins) {
  ParseResult r = parseRules(kRules);
  // 1 KiB all-reduce on 2 nodes -> rule 0 (tree/LL).
  Table t;
  int ch = 0;
  BOOST_TEST(applyRules(r.rules, 4, 1024, 16, 2, &t.cost[0][0], 7, 3, &ch) == 0);
  BOOST_TEST((t.chosen() == std::pair<int, int>{NCCL_ALGO_TREE, NCCL_PROTO_LL}));
  BOOST_TEST(ch == 0);
  // 1 KiB on one node: rule 0 needs >= 2 nodes, nothing else matches: NCCL's choice stands.
  Table t1;
  ch = 0;
  BOOST_TEST(applyRules(r.rules, 4, 1024, 8, 1, &t1.cost[0][0], 7, 3, &ch) == -1);
  BOOST_TEST((t1.chosen() == std::pair<int, int>{NCCL_ALGO_TREE, NCCL_PROTO_LL}));
  BOOST_TEST(t1.cost[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 10.0f);  // untouched
  // 256 KiB: NVLS is IGNORE in this table, so the next rule (ring/LL128, 4 channels) applies.
  Table t2;
  ch = 0;
  BOOST_TEST(applyRules(r.rules, 4, 256 << 10, 16, 2, &t2.cost[0][0], 7, 3, &ch) == 2);
  BOOST_TEST((t2.chosen() == std::pair<int, int>{NCCL_ALGO_RING, NCCL_PROTO_LL128}));
  BOOST_TEST(t2.cost[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] == NCCL_ALGO_PROTO_IGNORE);  // never enabled
  BOOST_TEST(ch == 4);
  // Wildcard collective with a channel count.
  Table t3;
  ch = 0;
  BOOST_TEST(applyRules(r.rules, 0, 2ull << 30, 16, 2, &t3.cost[0][0], 7, 3, &ch) == 4);
  BOOST_TEST((t3.chosen() == std::pair<int, int>{NCCL_ALGO_RING, NCCL_PROTO_SIMPLE}));
  BOOST_TEST(ch == 16);
  // Boundaries are inclusive: 64 KiB matches rule 0 first.
  BOOST_TEST(matchingRules(r.rules, 4, 65536, 16, 2).front() == 0u);
  BOOST_TEST(matchingRules(r.rules, 2, 100, 2, 2).front() == 3u);
  BOOST_TEST(matchingRules(r.rules, 2, 100, 4, 2).empty());
}

BOOST_AUTO_TEST_CASE(plugin_symbol_applies_rules_and_never_fails) {
  std::string path = writeRules(std::string(kRules) + "this line is broken\n");
  setenv("EPX_TUNER_RULES", path.c_str(), 1);
  const auto* tuner = epx::test::pluginSymbol<ncclTuner_v5_t>("ncclTunerPlugin_v5");
  BOOST_TEST_REQUIRE(tuner != nullptr);
  BOOST_TEST(std::string(tuner->name) == "EPX");
  ncclNvlDomainInfo_v5_t nvl{2, 1, 1};
  ncclTunerConstants_v5_t constants{};
  void* ctx = nullptr;
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 1, 2, 2, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(warned("line 7"));  // the broken line is reported, the rest is used

  Table t;
  int ch = 0;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, t.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST((t.chosen() == std::pair<int, int>{NCCL_ALGO_TREE, NCCL_PROTO_LL}));
  BOOST_TEST(ch == 0);  // no channel count in that rule: NCCL keeps its own

  Table t2;
  ch = 0;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllGather, 1 << 20, 1, t2.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST((t2.chosen() == std::pair<int, int>{NCCL_ALGO_RING, NCCL_PROTO_SIMPLE}));

  // Nothing matches: table and channels untouched, still success.
  Table t3, before;
  ch = 0;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncBroadcast, 100, 1, t3.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(memcmp(t3.cost, before.cost, sizeof(before.cost)) == 0);
  BOOST_TEST(ch == 0);
  // A table where every entry is disabled: still success, nothing enabled.
  Table none;
  for (auto& row : none.cost)
    for (float& c : row) c = NCCL_ALGO_PROTO_IGNORE;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, none.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST((none.chosen() == std::pair<int, int>{-1, -1}));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);

  // A missing file is reported and the tuner still initialises with no rules.
  setenv("EPX_TUNER_RULES", "/nonexistent/epx.rules", 1);
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 2, 8, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(warned("cannot open rules file"));
  Table t4;
  ch = 0;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, t4.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(memcmp(t4.cost, before.cost, sizeof(before.cost)) == 0);
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);
  // A directory is reported the same way (an ifstream opens one and reads nothing).
  setenv("EPX_TUNER_RULES", "/tmp", 1);
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 2, 8, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(warned("rules file /tmp is a directory"));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);
  unsetenv("EPX_TUNER_RULES");
  remove(path.c_str());
}
