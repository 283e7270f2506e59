// The case loop shared by the randomized GPU suites random_bucket, random_pp and random_ll (the
// EP suite `random` has its own, test_random.cc): which cases run (EPX_RANDOM_CASES, or the one
// EPX_RANDOM_CASE replays), the time cap (EPX_RANDOM_SECONDS, checked collectively at group
// boundaries so that every process stops at the same case), the replay command line of a case, and
// a tally of the features the cases covered, printed at the end.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "ep_harness.h"
#include "random_config.h"

namespace epx::test::rnd {

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
  return buf;
}

class RandomRun {
 public:
  // suite: the Boost.Test suite name; casesPerGroup: cases sharing one collectively created object
  // (bucket, channel, group).
  RandomRun(std::string suite, int casesPerGroup)
      : suite_(std::move(suite)), perGroup_(casesPerGroup), seed_(baseSeed()), R_(nRanks()), replay_(replayCase()) {
    first_ = replay_ >= 0 ? replay_ : 0;
    last_ = replay_ >= 0 ? replay_ + 1 : caseCount();
    limit_ = replay_ >= 0 ? 0 : timeLimitSeconds();
    t0_ = std::chrono::steady_clock::now();
    BOOST_TEST_MESSAGE(suite_ << ": cases [" << first_ << ", " << last_ << ") at " << R_ << " rank(s), seed " << hex(seed_)
                              << ", time limit " << limit_ << " s");
  }

  uint64_t seed() const { return seed_; }
  int ranks() const { return R_; }
  // Groups to visit: [firstGroup(), endGroup()); cases of group g: [caseBegin(g), caseEnd(g)).
  int firstGroup() const { return first_ / perGroup_; }
  int endGroup() const { return (last_ + perGroup_ - 1) / perGroup_; }
  int caseBegin(int g) const { return std::max(first_, g * perGroup_); }
  int caseEnd(int g) const { return std::min(last_, (g + 1) * perGroup_); }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  // Collective (every process calls it at the same group boundary): true when the time cap has passed
  // on any rank after at least one case ran.
  bool timeUp() {
    if (ran_ == 0 || limit_ <= 0) return false;
    if (!gpus().anyRank(elapsed() > limit_)) return false;
    BOOST_TEST_MESSAGE(suite_ << ": time limit " << limit_ << " s reached after " << ran_ << " cases");
    return true;
  }

  // The draws depend on the rank count too: replay with the same number of ranks.
  std::string replayLine(int index) const {
    return "replay (same rank count, " + std::to_string(R_) + "): EPX_TEST_SEED=" + hex(seed_) +
           " EPX_RANDOM_CASE=" + std::to_string(index) + " epx_ep_tests --run_test=" + suite_ + " --log_level=message";
  }

  void reportFailure(const std::string& what, int index, const std::string& why) const {
    std::printf("%s: FAILED %s (seed %s)%s%s\n  %s\n", suite_.c_str(), what.c_str(), hex(seed_).c_str(),
                why.empty() ? "" : ": ", why.c_str(), replayLine(index).c_str());
    std::fflush(stdout);
  }

  // One case ran; `features` names what it covered (counted in the tally).
  void count(bool ok, double seconds, const std::string& what) {
    ++ran_;
    failed_ += ok ? 0 : 1;
    if (seconds > slowestS_) slowestS_ = seconds, slowest_ = what;
  }
  void feature(const std::string& name, bool covered = true) {
    if (covered) ++features_[name];
    else features_.emplace(name, 0);
  }

  int ran() const { return ran_; }
  int failed() const { return failed_; }

  // The summary line and the tally; Boost.Test verdicts (at least one case, none failed).
  void finish() {
    std::printf("%s: %d cases in %.1f s at %d rank(s), seed %s: %d failed\n", suite_.c_str(), ran_, elapsed(), R_,
                hex(seed_).c_str(), failed_);
    std::string tally;
    for (const auto& [name, n] : features_) tally += (tally.empty() ? "" : ", ") + name + " " + std::to_string(n);
    std::printf("%s: covered: %s\n", suite_.c_str(), tally.c_str());
    if (ran_) std::printf("%s: slowest %.2f s: %s\n", suite_.c_str(), slowestS_, slowest_.c_str());
    std::fflush(stdout);
    BOOST_TEST(ran_ > 0);
    BOOST_TEST(failed_ == 0, failed_ << " of " << ran_ << " " << suite_ << " cases failed (seed " << hex(seed_) << "; the '"
                                     << suite_ << ": FAILED' lines give replay commands)");
  }

 private:
  std::string suite_;
  int perGroup_;
  uint64_t seed_;
  int R_;
  int replay_, first_ = 0, last_ = 0;
  double limit_ = 0;
  std::chrono::steady_clock::time_point t0_;
  int ran_ = 0, failed_ = 0;
  double slowestS_ = 0;
  std::string slowest_;
  std::map<std::string, int> features_;
};

}  // namespace epx::test::rnd
