// CPU half of the randomized bucket, PP and low-latency tests (suites random_bucket_sampler,
// random_pp_sampler, random_ll_sampler; no GPU needed): each sampler draws only configurations that
// the library's own checks accept (the size hints validate plans and configs) and that the suites'
// harness can run, within its budgets; the draws are deterministic in the seed and equal when a
// case is drawn alone (replay); and the default run (300 cases) covers both ends of every documented
// range and every notable feature, for several seeds and rank counts.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "epx/bucket.h"
#include "epx/ref/ll_ref.h"
#include "random_bucket_config.h"
#include "random_ll_config.h"
#include "random_pp_config.h"

using namespace epx::test;
namespace rb = epx::test::rnd::bucket;
namespace rp = epx::test::rnd::pp;
namespace rl = epx::test::rnd::ll;

namespace {

constexpr int kDefaultCases = 300;
const int kRankCounts[] = {1, 2, 3, 8};
const uint64_t kSeeds[] = {1ull, 0xdeadbeefull, 0x123456789abcdefull};

uint64_t seedOf(int s) { return uint64_t(s) * 0x9e3779b97f4a7c15ull; }

void printCounts(const char* what, int R, const std::map<std::string, int>& seen) {
  std::string counts;
  for (const auto& [name, n] : seen) counts += name + " " + std::to_string(n) + ", ";
  BOOST_TEST_MESSAGE(what << " R=" << R << ", " << kDefaultCases << " cases: " << counts);
}

// ---- buckets -----------------------------------------------------------------------------------

struct BucketDraw {
  rb::BucketSpec spec;
  rb::BucketCase c;
};

std::vector<BucketDraw> drawBucketRun(uint64_t seed, int R, int n) {
  std::vector<BucketDraw> out;
  rb::BucketSpec s;
  for (int i = 0; i < n; ++i) {
    if (i % rb::kCasesPerBucket == 0) s = rb::drawBucket(seed, rb::groupOf(i), R);
    out.push_back({s, rb::drawCase(seed, i, s, R)});
  }
  return out;
}

std::string bucketInvalid(const BucketDraw& d, int R) {
  const rb::BucketSpec& s = d.spec;
  const int n = int(s.plan.size());
  if (n < 1 || n > NCCL_EP_BUCKET_MAX_TENSORS) return "tensor count";
  size_t hint = 0;
  if (ncclEpBucketGetBufferSizeHint(s.plan.data(), n, R, &hint) != ncclSuccess)
    return std::string("plan rejected: ") + ncclEpGetLastError();
  double bytes = 0;
  for (const ncclEpBucketTensor_t& t : s.plan) {
    if (t.count == 0 || t.count % uint64_t(R)) return "count not a positive multiple of nRanks";
    if (std::find(rb::planDtypes().begin(), rb::planDtypes().end(), t.dtype) == rb::planDtypes().end()) return "dtype";
    bytes += double(t.count) * rb::dtypeBytes(t.dtype);
  }
  // Past the budget only one-element shards are drawn.
  if (bytes > rb::kTensorBytesBudget + double(n) * 8 * R) return "tensor bytes over budget";
  if (s.numCtas < 0 || s.numCtas > 32) return "numCtas";
  if (s.chunkBytes && (s.chunkBytes < (uint64_t(64) << 10) || s.chunkBytes > (uint64_t(1) << 30) || s.chunkBytes % 16))
    return "chunkBytes";
  const rb::BucketCase& c = d.c;
  if (c.calls.empty() || c.calls.size() > 3) return "call count";
  std::set<int> named;
  bool external = false;
  for (const rb::BucketCall& call : c.calls) {
    if (call.tensors.empty() || call.where.size() != call.tensors.size()) return "items";
    for (size_t i = 0; i < call.tensors.size(); ++i) {
      const int t = call.tensors[i];
      if (t < 0 || t >= n) return "tensor index";
      if (!named.insert(t).second) return "a tensor named twice in a case";
      if (!rb::opTakes(call.op, s.plan[size_t(t)].dtype)) return std::string(rb::opName(call.op)) + " of a dtype it does not take";
      external |= call.where[i] == rb::kExternal;
    }
    if (call.op == rb::kAllGather && (call.passOpts || call.bf16Wire || call.hasScale)) return "all-gather with options";
    if (!call.passOpts && (call.bf16Wire || call.hasScale)) return "options without opts";
    if (call.hasScale && !(std::isfinite(call.scale) && call.scale > 0)) return "scale";
  }
  if (external && !c.session) return "external items without a session";
  if (c.externalOffset < 0 || c.externalOffset > 3) return "external offset";
  return {};
}

// ---- PP ----------------------------------------------------------------------------------------

struct PpDraw {
  rp::PpSpec spec;
  rp::PpCase c;
};

std::vector<PpDraw> drawPpRun(uint64_t seed, int R, int n) {
  std::vector<PpDraw> out;
  rp::PpSpec s;
  for (int i = 0; i < n; ++i) {
    if (i % rp::kCasesPerChannel == 0) s = rp::drawChannel(seed, rp::groupOf(i), R);
    out.push_back({s, rp::drawCase(seed, i, s, R)});
  }
  return out;
}

std::string ppInvalid(const PpDraw& d, int R) {
  const rp::PpSpec& s = d.spec;
  const ncclEpPpConfig_t cfg = rp::makePpConfig(s);
  size_t hint = 0;
  if (ncclEpPpGetBufferSizeHint(&cfg, R, &hint) != ncclSuccess) return std::string("config rejected: ") + ncclEpGetLastError();
  if (double(hint) * R > rp::kWindowBytesBudget && s.maxBytes > 1) return "window over budget";
  if (s.slots < 0 || s.slots > 64 || s.numCtas < 0 || s.numCtas > 32) return "slots / numCtas";
  const rp::PpCase& c = d.c;
  if (c.msgs.empty()) return "no message";
  std::set<std::pair<int, int>> pairs;
  double bytes = 0;
  for (const rp::PpMsg& m : c.msgs) {
    if (m.src < 0 || m.src >= R || m.dst < 0 || m.dst >= R) return "rank out of range";
    if (m.bytes > s.maxBytes) return "message larger than maxMessageBytes";
    if (m.capacity < m.bytes) return "capacity below the message size (the message would be dropped)";
    if (m.nullSend && m.bytes) return "NULL send buffer for a message with bytes";
    if (m.nullRecv && m.capacity) return "NULL receive buffer with a capacity";
    pairs.insert({m.src, m.dst});
    bytes += double(rp::recvRegionBytes(m));
  }
  int self = 0;
  for (const auto& p : pairs) self += p.first == p.second;
  if (R > 1 && self > 1) return "more than one self pair";
  if (int(c.msgs.size()) > rp::kMaxMessages + int(pairs.size())) return "too many messages";
  if (bytes > rp::kMessageBytesBudget + double(c.msgs.size()) * (4097 + 32)) return "message bytes over budget";
  if (c.lagNs > rp::kMaxLagNs || (c.lagNs && !c.twoStreams)) return "receive delay";
  return {};
}

// ---- low latency -------------------------------------------------------------------------------

struct LlDraw {
  rl::LlGroup g;
  rl::LlCase c;
};

std::vector<LlDraw> drawLlRun(uint64_t seed, int R, int n) {
  std::vector<LlDraw> out;
  rl::LlGroup g;
  for (int i = 0; i < n; ++i) {
    if (i % rl::kCasesPerGroup == 0) g = rl::drawGroup(seed, rl::groupOf(i), R);
    out.push_back({g, rl::drawCase(seed, i, g, R)});
  }
  return out;
}

std::string llInvalid(const LlDraw& d, int R) {
  const rl::LlGroup& g = d.g;
  const ncclEpConfig_t cfg = rl::makeLlConfig(g);
  size_t hint = 0;
  if (ncclEpGetBufferSizeHint(&cfg, R, &hint) != ncclSuccess) return std::string("config rejected: ") + ncclEpGetLastError();
  if (!rl::withinBudget(g, R) && !(g.maxTokens == 1 && g.hidden == 128 && g.numExperts == R)) return "over budget";
  if (g.maxTokens < 1 || g.maxTokens > 4096) return "maxTokens";
  if (g.hidden < 128 || g.hidden > 65536 || g.hidden % 128) return "hidden";
  if (g.topk < 1 || g.topk > 32) return "topk";
  if (g.numExperts < R || g.numExperts > 1024 || g.numExperts % R) return "numExperts";
  if (g.smBudget < 0 || g.smBudget > 16) return "smBudget";
  const rl::LlCase& c = d.c;
  if (int(c.tokens.size()) != R) return "tokens per rank";
  for (int t : c.tokens)
    if (t < 0 || t > g.maxTokens) return "tokens out of [0, maxTokensPerRank]";
  if (c.fp8 && !g.fp8) return "FP8 in a group without fp8Dispatch";
  if (c.roundScale && !c.fp8) return "UE8M0 without FP8";
  if (c.singleExpert >= g.numExperts) return "single expert";
  if (c.maskProb < 0 || c.maskProb > 0.75) return "mask fraction";
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_bucket_sampler)

BOOST_AUTO_TEST_CASE(draws_are_valid_and_within_budget) {
  for (int R : kRankCounts)
    for (uint64_t seed : kSeeds)
      for (const BucketDraw& d : drawBucketRun(seed, R, 600)) {
        const std::string why = bucketInvalid(d, R);
        BOOST_TEST(why.empty(), "R=" << R << " seed " << seed << " " << rb::describe(d.c, d.spec, R) << ": " << why);
      }
}

BOOST_AUTO_TEST_CASE(draws_are_deterministic) {
  for (int R : kRankCounts) {
    const auto a = drawBucketRun(42, R, 60), b = drawBucketRun(42, R, 60), other = drawBucketRun(43, R, 60);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      BOOST_TEST(rb::describe(a[i].c, a[i].spec, R) == rb::describe(b[i].c, b[i].spec, R));
      same += rb::describe(a[i].c, a[i].spec, R) == rb::describe(other[i].c, other[i].spec, R);
    }
    BOOST_TEST(same < 3, same << " of 60 cases equal under another seed");
    const int i = 37;  // replay: case i alone from its bucket's draw
    const rb::BucketSpec s = rb::drawBucket(42, rb::groupOf(i), R);
    BOOST_TEST(rb::describe(rb::drawCase(42, i, s, R), s, R) == rb::describe(a[size_t(i)].c, a[size_t(i)].spec, R));
  }
}

BOOST_AUTO_TEST_CASE(default_run_covers_the_range) {
  for (int R : {1, 2, 8})
    for (int seedIndex = 1; seedIndex <= 8; ++seedIndex) {
      std::map<std::string, int> seen;
      for (ncclDataType_t t : rb::planDtypes()) seen[std::string("all-gather ") + rb::dtypeName(t)] = 0;
      for (const BucketDraw& d : drawBucketRun(seedOf(seedIndex), R, kDefaultCases)) {
        const rb::BucketSpec& s = d.spec;
        seen["32 tensors"] += s.plan.size() == 32;
        seen["1 tensor"] += s.plan.size() == 1;
        seen["numCtas default"] += s.numCtas == 0;
        seen["numCtas 1"] += s.numCtas == 1;
        seen["numCtas 32"] += s.numCtas == 32;
        seen["chunk default"] += s.chunkBytes == 0;
        seen["chunk 64 KiB"] += s.chunkBytes == (uint64_t(64) << 10);
        seen["chunk 1 GiB"] += s.chunkBytes == (uint64_t(1) << 30);
        seen["chunk not a multiple of 256"] += s.chunkBytes % 256 != 0;
        seen["2+ calls"] += d.c.calls.size() > 1;
        seen["3 calls"] += d.c.calls.size() == 3;
        bool external = false;
        for (const rb::BucketCall& call : d.c.calls)
          external |= std::count(call.where.begin(), call.where.end(), int(rb::kExternal)) > 0;
        seen["session without external items"] += d.c.session && !external;
        const uint64_t chunk = s.chunkBytes ? s.chunkBytes : uint64_t(2) << 20;
        for (const rb::BucketCall& call : d.c.calls) {
          seen[rb::opName(call.op)]++;
          seen["several items in one call"] += call.tensors.size() > 1;
          seen["opts NULL"] += call.op != rb::kAllGather && !call.passOpts;
          seen["scale"] += call.hasScale;
          seen["scale 1/nRanks"] += call.hasScale && call.scale == 1.0f / float(R);
          seen["all-reduce with the wire type set to BF16 (ignored)"] += call.op == rb::kAllReduce && call.bf16Wire;
          for (size_t i = 0; i < call.tensors.size(); ++i) {
            const ncclEpBucketTensor_t& p = s.plan[size_t(call.tensors[i])];
            const uint64_t shard = p.count / uint64_t(R);
            const bool wire = call.op == rb::kReduceScatter && call.bf16Wire;
            if (call.op == rb::kAllGather) seen[std::string("all-gather ") + rb::dtypeName(p.dtype)]++;
            seen["external item"] += call.where[i] == rb::kExternal;
            seen["own-pointer item"] += call.where[i] == rb::kOwnPointer;
            seen["shard 1"] += shard == 1;
            seen["shard 3"] += shard == 3;
            seen["shard 4097"] += shard == 4097;
            seen["BF16 wire"] += wire;
            seen["BF16 wire, odd shard"] += wire && shard % 2 == 1;
            seen["BF16 wire, shard 1007"] += wire && shard == 1007;
            seen["reduce-scatter FP32 wire, odd shard"] += call.op == rb::kReduceScatter && !wire && shard % 2 == 1;
            seen["all-reduce BF16, odd shard"] += call.op == rb::kAllReduce && p.dtype == ncclBfloat16 && shard % 2 == 1;
            seen["all-reduce FP32, shard a multiple of 8"] += call.op == rb::kAllReduce && p.dtype == ncclFloat32 && shard % 8 == 0;
            seen["transfer of several GIN chunks"] += shard * uint64_t(rb::dtypeBytes(p.dtype)) > 2 * chunk;
            seen["reduced transfer >= 256 KiB (tapered tail)"] +=
                call.op != rb::kAllGather && shard * 4 >= (uint64_t(256) << 10);
          }
        }
      }
      for (const auto& [what, n] : seen) BOOST_TEST(n > 0, "R=" << R << " seed " << seedIndex << ": never drew " << what);
      if (seedIndex == 1) printCounts("random_bucket", R, seen);
    }
}

// The suites' fast host check of device byte patterns agrees with patternByte, from any start.
BOOST_AUTO_TEST_CASE(pattern_check_finds_the_first_wrong_byte) {
  std::vector<uint8_t> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = patternByte(77, i);
  for (size_t b : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(13)}) {
    BOOST_TEST(firstPatternMismatch(v.data(), b, v.size(), 77) == v.size());
    BOOST_TEST(firstPatternMismatch(v.data(), b, v.size(), 78) < v.size());
    for (size_t bad : {b, b + 5, size_t(999)}) {
      v[bad] ^= 0x10;
      BOOST_TEST(firstPatternMismatch(v.data(), b, v.size(), 77) == bad);
      v[bad] ^= 0x10;
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(random_pp_sampler)

BOOST_AUTO_TEST_CASE(draws_are_valid_and_within_budget) {
  for (int R : kRankCounts)
    for (uint64_t seed : kSeeds)
      for (const PpDraw& d : drawPpRun(seed, R, 600)) {
        const std::string why = ppInvalid(d, R);
        BOOST_TEST(why.empty(), "R=" << R << " seed " << seed << " " << rp::describe(d.c, d.spec) << ": " << why);
      }
}

BOOST_AUTO_TEST_CASE(draws_are_deterministic) {
  for (int R : kRankCounts) {
    const auto a = drawPpRun(42, R, 60), b = drawPpRun(42, R, 60), other = drawPpRun(43, R, 60);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      BOOST_TEST(rp::describe(a[i].c, a[i].spec) == rp::describe(b[i].c, b[i].spec));
      same += rp::describe(a[i].c, a[i].spec) == rp::describe(other[i].c, other[i].spec);
    }
    BOOST_TEST(same < 3, same << " of 60 cases equal under another seed");
    const int i = 37;
    const rp::PpSpec s = rp::drawChannel(42, rp::groupOf(i), R);
    BOOST_TEST(rp::describe(rp::drawCase(42, i, s, R), s) == rp::describe(a[size_t(i)].c, a[size_t(i)].spec));
  }
}

BOOST_AUTO_TEST_CASE(default_run_covers_the_range) {
  for (int R : {1, 2, 8})
    for (int seedIndex = 1; seedIndex <= 8; ++seedIndex) {
      std::map<std::string, int> seen;
      for (const PpDraw& d : drawPpRun(seedOf(seedIndex), R, kDefaultCases)) {
        const rp::PpSpec& s = d.spec;
        const int S = s.effectiveSlots();
        seen["slots 1"] += S == 1;
        seen["slots 64"] += S == 64;
        seen["slots default"] += s.slots == 0;
        seen["numCtas 1"] += s.numCtas == 1;
        seen["numCtas 32"] += s.numCtas == 32;
        seen["chunk default"] += s.chunkBytes == 0;
        seen["chunk 64 KiB"] += s.chunkBytes == (uint64_t(64) << 10);
        seen["chunk 1 GiB"] += s.chunkBytes == (uint64_t(1) << 30);
        seen["maxMessageBytes 1"] += s.maxBytes == 1;
        seen["maxMessageBytes odd, > 16"] += s.maxBytes > 16 && s.maxBytes % 2 == 1;
        seen["maxMessageBytes >= 1 MiB"] += s.maxBytes >= (uint64_t(1) << 20);
        seen["one stream"] += !d.c.twoStreams;
        seen["late receiver"] += d.c.lagNs > 0;
        std::map<std::pair<int, int>, int> perPair;
        for (const rp::PpMsg& m : d.c.msgs) {
          ++perPair[{m.src, m.dst}];
          seen["0 bytes"] += m.bytes == 0;
          seen["1 byte"] += m.bytes == 1;
          seen["maxMessageBytes"] += m.bytes == s.maxBytes && s.maxBytes > 1;
          seen["maxMessageBytes - 1"] += s.maxBytes > 2 && m.bytes == s.maxBytes - 1;
          seen["odd size > 16"] += m.bytes > 16 && m.bytes % 2 == 1;
          seen["size 16k + 1..15"] += m.bytes > 16 && m.bytes % 16 != 0;
          seen["more than 8 chunks (8 rounds of more than chunkBytes)"] +=
              m.bytes > 8 * (s.chunkBytes ? s.chunkBytes : uint64_t(1) << 20);
          seen["2..7 chunks"] += m.bytes > (s.chunkBytes ? s.chunkBytes : uint64_t(1) << 20) &&
                                 m.bytes <= 7 * (s.chunkBytes ? s.chunkBytes : uint64_t(1) << 20);
          seen["capacity above the size"] += m.capacity > m.bytes;
          seen["NULL send buffer"] += m.nullSend;
          seen["NULL receive buffer"] += m.nullRecv;
          seen["no recvBytes"] += !m.recvBytes;
        }
        int over = 0, self = 0;
        for (const auto& [p, n] : perPair) over += n > S, self += p.first == p.second;
        seen["a pair with more messages than slots"] += over > 0;
        seen["more messages than 64 slots"] += over > 0 && S == 64;
        if (R > 1) {
          seen["several pairs"] += perPair.size() > 1;
          seen["every ordered pair"] += perPair.size() >= size_t(R * (R - 1));
          seen["a self pair among others"] += self > 0;
          seen["pairs between distinct ranks only"] += self == 0;
        }
      }
      for (const auto& [what, n] : seen) BOOST_TEST(n > 0, "R=" << R << " seed " << seedIndex << ": never drew " << what);
      if (seedIndex == 1) printCounts("random_pp", R, seen);
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(random_ll_sampler)

BOOST_AUTO_TEST_CASE(draws_are_valid_and_within_budget) {
  for (int R : kRankCounts)
    for (uint64_t seed : kSeeds)
      for (const LlDraw& d : drawLlRun(seed, R, 600)) {
        const std::string why = llInvalid(d, R);
        BOOST_TEST(why.empty(), "R=" << R << " seed " << seed << " " << rl::describe(d.c, d.g) << ": " << why);
      }
}

BOOST_AUTO_TEST_CASE(draws_are_deterministic) {
  for (int R : kRankCounts) {
    const auto a = drawLlRun(42, R, 60), b = drawLlRun(42, R, 60), other = drawLlRun(43, R, 60);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      BOOST_TEST(rl::describe(a[i].c, a[i].g) == rl::describe(b[i].c, b[i].g));
      same += rl::describe(a[i].c, a[i].g) == rl::describe(other[i].c, other[i].g);
    }
    BOOST_TEST(same < 3, same << " of 60 cases equal under another seed");
    const int i = 37;
    const rl::LlGroup g = rl::drawGroup(42, rl::groupOf(i), R);
    BOOST_TEST(rl::describe(rl::drawCase(42, i, g, R), g) == rl::describe(a[size_t(i)].c, a[size_t(i)].g));
  }
}

BOOST_AUTO_TEST_CASE(default_run_covers_the_range) {
  for (int R : {1, 2, 8})
    for (int seedIndex = 1; seedIndex <= 8; ++seedIndex) {
      std::map<std::string, int> seen;
      const auto run = drawLlRun(seedOf(seedIndex), R, kDefaultCases);
      for (const LlDraw& d : run) {
        const rl::LlGroup& g = d.g;
        const rl::LlCase& c = d.c;
        seen["topk 32"] += g.topk == 32;
        seen["topk 31"] += g.topk == 31;
        seen["topk 1"] += g.topk == 1;
        seen["topk 2..30"] += g.topk >= 2 && g.topk <= 30;
        seen["fewer experts than topk"] += g.numExperts < g.topk;
        seen["1 expert per rank"] += g.numExperts == R;
        seen["experts max"] += g.numExperts == 1024 / R * R;
        seen["hidden 128"] += g.hidden == 128;
        seen["hidden 65536"] += g.hidden == 65536;
        seen["hidden 7168"] += g.hidden == 7168;
        seen["maxTokens 1"] += g.maxTokens == 1;
        seen["maxTokens 4096"] += g.maxTokens == 4096;
        seen["smBudget"] += g.smBudget > 0;
        seen["BF16 in an FP8 group"] += g.fp8 && !c.fp8;
        seen["FP8"] += c.fp8;
        seen["FP8 UE8M0"] += c.roundScale;
        seen["ids32"] += c.int32Ids;
        seen["ids64"] += !c.int32Ids;
        seen["masked >= 50%"] += c.maskProb >= 0.5;
        seen["token 0 fully masked"] += c.fullyMaskedToken;
        seen["one expert for all"] += c.singleExpert >= 0;
        seen["zero blocks"] += c.zeroBlocks;
        seen["split halves"] += c.split;
        seen["zero-copy combine"] += c.zeroCopy;
        seen["no recvSrcInfo"] += !c.srcInfo;
        seen["a rank with 0 tokens"] += std::count(c.tokens.begin(), c.tokens.end(), 0) > 0;
        seen["a rank at maxTokens"] += std::count(c.tokens.begin(), c.tokens.end(), g.maxTokens) > 0;
        seen["4096 tokens on a rank"] += std::count(c.tokens.begin(), c.tokens.end(), 4096) > 0;
        if (R > 1) seen["uneven tokens"] += std::set<int>(c.tokens.begin(), c.tokens.end()).size() > 1;
      }
      for (const auto& [what, n] : seen) BOOST_TEST(n > 0, "R=" << R << " seed " << seedIndex << ": never drew " << what);
      // The ends of top-k in at least 10% of the cases.
      BOOST_TEST(seen["topk 31"] + seen["topk 32"] >= kDefaultCases / 10, "R=" << R << " seed " << seedIndex);
      if (seedIndex == 1) printCounts("random_ll", R, seen);
    }
}

// The generated inputs are what the case says: every slot -1 or a valid expert id, distinct within
// a token (the reference drops nothing), masking and single-expert routes as drawn, data of the
// right shapes; the reference routes them without error.
BOOST_AUTO_TEST_CASE(drawn_inputs_are_valid) {
  int checked = 0, singles = 0, masked = 0;
  for (int R : {1, 2, 3})
    for (const LlDraw& d : drawLlRun(7, R, 240)) {
      const rl::LlGroup& g = d.g;
      const rl::LlCase& c = d.c;
      long elems = 0;
      for (int t : c.tokens) elems += long(t) * (g.hidden + g.topk);
      if (elems > (1L << 20)) continue;  // keep the CPU test fast
      const rl::LlInputs in = rl::makeInputs(g, c, R);
      epx::ref::LlShape sh;
      sh.nRanks = R;
      sh.maxTokens = g.maxTokens;
      sh.hidden = g.hidden;
      sh.topk = g.topk;
      sh.numExperts = g.numExperts;
      std::string why;  // the first problem (one assertion per case: Boost.Test's are slow)
      auto expect = [&](bool ok, const std::string& what) {
        if (!ok && why.empty()) why = what;
      };
      expect(int(in.routing.size()) == R && int(in.x.size()) == R && int(in.weights.size()) == R, "ranks");
      long valid = 0;
      for (int r = 0; r < R && why.empty(); ++r) {
        const epx::ref::LlRouting& rt = in.routing[size_t(r)];
        const int T = c.tokens[size_t(r)];
        expect(rt.numTokens == T && rt.topkIdx.size() == size_t(T) * g.topk, "routing shape");
        expect(in.x[size_t(r)].size() == size_t(T) * g.hidden && in.weights[size_t(r)].size() == size_t(T) * g.topk,
               "data shape");
        for (int t = 0; t < T && why.empty(); ++t) {
          int inToken = 0;
          const std::string at = "rank " + std::to_string(r) + " token " + std::to_string(t) + ": ";
          for (int k = 0; k < g.topk; ++k) {
            const int64_t id = rt.topkIdx[size_t(t) * g.topk + k];
            expect(id >= -1 && id < g.numExperts, at + "id " + std::to_string(id) + " out of range");
            expect(!epx::ref::llSlotInvalid(sh, rt, t, k), at + "slot " + std::to_string(k) + " invalid (repeated id)");
            if (id >= 0) ++inToken, ++valid;
            if (c.singleExpert >= 0 && id >= 0) expect(id == c.singleExpert, at + "not the single expert");
          }
          if (c.singleExpert >= 0) expect(inToken == 1, at + "not exactly one expert");
          if (c.fullyMaskedToken && t == 0) expect(inToken == 0, at + "token 0 not fully masked");
          if (c.maskProb == 0 && c.singleExpert < 0 && !(c.fullyMaskedToken && t == 0))
            expect(inToken == std::min(g.topk, g.numExperts), at + "slots masked without a mask fraction");
        }
      }
      // The reference delivers every valid slot exactly once across the ranks.
      long delivered = 0;
      for (int r = 0; r < R && why.empty(); ++r)
        for (const auto& rows : epx::ref::llDispatchRows(sh, in.routing, r).rows) delivered += long(rows.size());
      expect(delivered == valid, "the reference delivered " + std::to_string(delivered) + " of " + std::to_string(valid) + " slots");
      BOOST_TEST(why.empty(), "R=" << R << " " << rl::describe(c, g) << ": " << why);
      singles += c.singleExpert >= 0;
      masked += c.maskProb > 0;
      ++checked;
    }
  BOOST_TEST(checked > 100, checked << " cases checked");
  BOOST_TEST(singles > 0);
  BOOST_TEST(masked > 0);
}

BOOST_AUTO_TEST_SUITE_END()
