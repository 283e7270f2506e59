// Randomized differential test (suite `random`): configurations drawn from the whole documented
// range (random_config.h), every output compared with the CPU reference on poisoned buffers by the
// harness (runCaseOn -> EpSession::expectAllCorrect). Cases come in groups of kCasesPerGroup that
// share one collectively created EP group.
//
// Environment: EPX_TEST_SEED (base seed, printed at start), EPX_RANDOM_CASES (default 300),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed), EPX_RANDOM_SECONDS (no new
// group after this many seconds, default 150, 0 = unlimited), EPX_TEST_HYBRID (every group forwards
// in hybrid mode over virtual nodes, ep_harness.h). A failing case prints its index, the seed, its
// full configuration, the test options it ran under (EPX_TEST_HYBRID) and the command line that
// replays it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "ep_harness.h"
#include "random_config.h"

using namespace epx::test;

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
  return buf;
}

// Test options a case depends on besides the seed: hybrid forwarding over virtual nodes
// (EPX_TEST_HYBRID, ep_harness.h) changes every group's forwarding, so a replay needs it too.
std::string replayEnv() {
  const int n = testHybridNodeSize();
  return n > 0 ? "EPX_TEST_HYBRID=" + std::to_string(n) + " " : std::string();
}

// The draws depend on the rank count too: replay with the same number of ranks.
std::string replayLine(uint64_t seed, int index) {
  return "replay (same rank count, " + std::to_string(nRanks()) + "): " + replayEnv() + "EPX_TEST_SEED=" + hex(seed) +
         " EPX_RANDOM_CASE=" + std::to_string(index) + " epx_ep_tests --run_test=random";
}

std::string describeGroup(const GroupSpec& g) {
  return "H=" + std::to_string(g.hidden) + " K=" + std::to_string(g.topk) + " E=" + std::to_string(g.numExperts) +
         " maxT=" + std::to_string(g.maxTokens) + " fp8Group=" + std::to_string(g.fp8) +
         " sms=" + std::to_string(g.smBudget) + " exactCombine=" + std::to_string(g.exactCombine);
}

void reportFailure(uint64_t seed, const rnd::RandomCase& rc, const std::string& why) {
  std::printf("random: FAILED %s (%sseed %s)%s%s\n  %s\n", rnd::describe(rc).c_str(), replayEnv().c_str(),
              hex(seed).c_str(), why.empty() ? "" : ": ", why.c_str(), replayLine(seed, rc.index).c_str());
  std::fflush(stdout);
}

struct Tally {
  int ran = 0, failed = 0, topkEnds = 0, fp8 = 0, expanded = 0, capacity = 0;
  double slowestS = 0;
  std::string slowest;
  void count(const rnd::RandomCase& rc, bool ok, double seconds) {
    if (seconds > slowestS) slowestS = seconds, slowest = rnd::describe(rc);
    ++ran;
    failed += ok ? 0 : 1;
    topkEnds += rc.cfg.g.topk >= 31;
    fp8 += rc.cfg.fp8;
    expanded += rc.cfg.layout == ncclEpLayoutExpanded;
    capacity += rc.cfg.mode == ncclEpModeCapacity;
  }
};

}  // namespace

// BOOST_AUTO_TEST_SUITE(random) would open `namespace random`, which collides with ::random() of
// <stdlib.h>: the same registration under another namespace name.
namespace random_suite {
BOOST_AUTO_TU_REGISTRAR(random_suite)("random", __FILE__, __LINE__, boost::unit_test::decorator::collector_t::instance());

BOOST_AUTO_TEST_CASE(differential) {
  const uint64_t seed = baseSeed();
  const int R = nRanks();
  const int replay = rnd::replayCase();
  const int first = replay >= 0 ? replay : 0, last = replay >= 0 ? replay + 1 : rnd::caseCount();
  const double limit = replay >= 0 ? 0 : rnd::timeLimitSeconds();
  BOOST_TEST_MESSAGE("random: cases [" << first << ", " << last << ") at " << R << " rank(s), " << replayEnv() << "seed "
                                       << hex(seed) << ", time limit " << limit << " s");
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Tally tally;
  for (int grp = rnd::groupOf(first); grp * rnd::kCasesPerGroup < last; ++grp) {
    // Every process stops at the same group boundary (anyRank is collective).
    if (tally.ran > 0 && limit > 0 && gpus().anyRank(elapsed() > limit)) {
      BOOST_TEST_MESSAGE("random: time limit " << limit << " s reached after " << tally.ran << " cases");
      break;
    }
    const GroupSpec g = rnd::drawGroup(seed, grp, R);
    std::vector<ncclEpGroup_t> groups;
    try {
      groups = createGroups(g);
    } catch (const std::exception& e) {
      std::printf("random: FAILED to create group %d (%s, %sseed %s): %s\n  %s\n", grp, describeGroup(g).c_str(),
                  replayEnv().c_str(), hex(seed).c_str(), e.what(),
                  replayLine(seed, std::max(first, grp * rnd::kCasesPerGroup)).c_str());
      std::fflush(stdout);
      throw;
    }
    const int lo = std::max(first, grp * rnd::kCasesPerGroup), hi = std::min(last, (grp + 1) * rnd::kCasesPerGroup);
    for (int i = lo; i < hi; ++i) {
      const rnd::RandomCase rc = rnd::drawCase(seed, i, g, R);
      const std::string name = rnd::describe(rc) + " (" + replayEnv() + "seed " + hex(seed) + ")";
      BOOST_TEST_MESSAGE("random " << name);
      bool ok = false;
      const double start = elapsed();
      try {
        ok = runCaseOn(rc.cfg, groups, rc.tokens, rc.route, rc.repeats, rc.dataSeed, name);
      } catch (const std::exception& e) {
        // A refused call after a device-side timeout says only that there was one: add what the
        // group recorded (phase, peer, transport) so the failure line names the wait.
        const std::string recorded = asyncErrors(groups);
        reportFailure(seed, rc, e.what() + (recorded.empty() ? std::string() : "; recorded: " + recorded));
        destroyGroups(groups);
        throw;  // an ncclEp call failed: the collective sequence may be out of step; stop here
      }
      if (!ok) reportFailure(seed, rc, "");
      tally.count(rc, ok, elapsed() - start);
      if (anyRankAsyncError(groups)) {  // a device-side timeout leaves the group unusable
        destroyGroups(groups);
        groups = createGroups(g);
      }
    }
    destroyGroups(groups);
  }
  std::printf("random: %d cases in %.1f s at %d rank(s), seed %s: %d failed; top-k 31/32 in %d, FP8 %d, expanded %d, "
              "capacity mode %d\n",
              tally.ran, elapsed(), R, hex(seed).c_str(), tally.failed, tally.topkEnds, tally.fp8, tally.expanded,
              tally.capacity);
  if (tally.ran) std::printf("random: slowest %.2f s: %s\n", tally.slowestS, tally.slowest.c_str());
  std::fflush(stdout);
  BOOST_TEST(tally.ran > 0);
  BOOST_TEST(tally.failed == 0, tally.failed << " of " << tally.ran << " random cases failed (seed " << hex(seed)
                                             << "; the 'random: FAILED' lines give replay commands)");
}

BOOST_AUTO_TEST_SUITE_END()
