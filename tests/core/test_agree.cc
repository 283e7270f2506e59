// checkAgreement: the comparison behind ncclEpGroupCreate's config agreement (host/src/agree.cc
// gathers one AgreedConfig per rank; every rank runs this on the same records).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "core/agree.h"

using namespace epx;

namespace {
AgreedConfig base() {
  GroupConfig g;
  g.maxTokensPerRank = 4096;
  g.hidden = 7168;
  g.topk = 8;
  g.numExperts = 256;
  g.smBudget = 24;
  return makeAgreedConfig(g, 24);
}
bool mentions(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_SUITE(agree)

BOOST_AUTO_TEST_CASE(record_is_fixed_size_and_carries_the_versions) {
  const AgreedConfig a = base();
  BOOST_TEST(sizeof(AgreedConfig) == 64u);
  BOOST_TEST(a.magic == kAgreedConfigMagic);
  BOOST_TEST(a.epxVersion == unsigned(EPX_VERSION_CODE));
  BOOST_TEST(a.ncclVersion == unsigned(NCCL_VERSION_CODE));
  BOOST_TEST(a.nCtas == 24);
  BOOST_TEST(a.timeoutMs == 10000);
  for (int32_t w : a.reserved) BOOST_TEST(w == 0);
}

BOOST_AUTO_TEST_CASE(equal_configs_agree) {
  for (int n : {1, 2, 8}) BOOST_TEST(checkAgreement(std::vector<AgreedConfig>(n, base())) == "");
  BOOST_TEST(checkAgreement({}) != "");
}

BOOST_AUTO_TEST_CASE(one_rank_always_agrees) {
  AgreedConfig odd = base();
  odd.smBudget = 0;
  odd.nCtas = 7;
  BOOST_TEST(checkAgreement({odd}) == "");
}

BOOST_AUTO_TEST_CASE(each_field_differing_is_named_with_both_values_and_ranks) {
  struct Case {
    const char* what;
    void (*edit)(AgreedConfig&);
    std::vector<std::string> needles;
  } cases[] = {
      {"maxTokensPerRank", [](AgreedConfig& a) { a.maxTokensPerRank = 2048; },
       {"rank 1 has maxTokensPerRank 2048 but rank 0 has 4096", "same config"}},
      {"hidden", [](AgreedConfig& a) { a.hidden = 4096; }, {"rank 1 has hidden 4096 but rank 0 has 7168"}},
      {"topk", [](AgreedConfig& a) { a.topk = 6; }, {"rank 1 has topk 6 but rank 0 has 8"}},
      {"numExperts", [](AgreedConfig& a) { a.numExperts = 128; }, {"rank 1 has numExperts 128 but rank 0 has 256"}},
      {"fp8Dispatch", [](AgreedConfig& a) { a.fp8Dispatch = 1; }, {"rank 1 has fp8Dispatch 1 but rank 0 has 0"}},
      {"algorithm", [](AgreedConfig& a) { a.algorithm = ncclEpAlgoHighThroughput; },
       {"rank 1 has algorithm 1 (ncclEpAlgoHighThroughput) but rank 0 has 0 (ncclEpAlgoAuto)"}},
      {"smBudget", [](AgreedConfig& a) { a.smBudget = 16, a.nCtas = 16; },
       {"rank 1 has smBudget 16 (16 CTAs) but rank 0 has 24 (24 CTAs); every rank must create the group with the "
        "same config"}},
      {"smBudget analytic", [](AgreedConfig& a) { a.smBudget = 0, a.nCtas = 20; },
       {"rank 1 has smBudget 0 (analytic, 20 CTAs) but rank 0 has 24 (24 CTAs)"}},
      {"same smBudget, other CTA count", [](AgreedConfig& a) { a.nCtas = 20; },
       {"rank 1 has smBudget 24 (20 CTAs) but rank 0 has 24 (24 CTAs)", "different SM counts"}},
      {"timeoutMs", [](AgreedConfig& a) { a.timeoutMs = 5000; }, {"rank 1 has timeoutMs 5000 but rank 0 has 10000"}},
      {"epx version", [](AgreedConfig& a) { a.epxVersion = 200; },
       {"rank 1 has epx 0.2.0 built against NCCL", "but rank 0 has epx 0.1.0", "same epx build"}},
      {"NCCL version", [](AgreedConfig& a) { a.ncclVersion = 22803; },
       {"built against NCCL 2.28.3 but rank 0 has epx", "same epx build"}},
      {"record magic", [](AgreedConfig& a) { a.magic = 0x45504131u; },
       {"rank 1 has config record magic 0x45504131 but rank 0 has 0x45504132", "same epx build"}},
      {"forwarding", [](AgreedConfig& a) { a.forwarding = ncclEpForwardHybrid; },
       {"rank 1 has forwarding 2 but rank 0 has 1"}},
      {"forwardNodeSize", [](AgreedConfig& a) { a.forwardNodeSize = 2; },
       {"rank 1 has forwardNodeSize 2 but rank 0 has 0"}},
  };
  for (const Case& c : cases) {
    std::vector<AgreedConfig> all(4, base());
    c.edit(all[1]);
    const std::string msg = checkAgreement(all);
    for (const std::string& n : c.needles) {
      BOOST_TEST_INFO(c.what << ": expected '" << n << "' in '" << msg << "'");
      BOOST_TEST(mentions(msg, n));
    }
    BOOST_TEST_INFO(c.what << ": " << msg);
    BOOST_TEST(!mentions(msg, "ranks differ"));  // only one rank differs
    // Rank 0 itself being the odd one: every other rank is reported against it, the lowest first.
    std::vector<AgreedConfig> flipped(4, all[1]);
    flipped[0] = base();
    const std::string f = checkAgreement(flipped);
    BOOST_TEST_INFO(c.what << ": " << f);
    BOOST_TEST(mentions(f, "rank 1 has"));
    BOOST_TEST(mentions(f, "(3 of 4 ranks differ from rank 0)"));
  }
}

BOOST_AUTO_TEST_CASE(first_differing_rank_and_field_are_reported) {
  std::vector<AgreedConfig> all(8, base());
  all[5].timeoutMs = 1;
  all[3].hidden = 1024;
  all[3].timeoutMs = 2;  // rank 3's first differing field (in record order) is hidden
  all[6].topk = 2;
  const std::string msg = checkAgreement(all);
  BOOST_TEST(mentions(msg, "rank 3 has hidden 1024 but rank 0 has 7168"), msg);
  BOOST_TEST(mentions(msg, "(3 of 8 ranks differ from rank 0)"), msg);
  BOOST_TEST(!mentions(msg, "timeoutMs"), msg);
  // The version word is compared before the config: a different build is reported as such.
  all[3].epxVersion = 300;
  BOOST_TEST(mentions(checkAgreement(all), "rank 3 has epx 0.3.0"));
}

BOOST_AUTO_TEST_CASE(many_ranks) {
  std::vector<AgreedConfig> all(1024, base());
  BOOST_TEST(checkAgreement(all) == "");
  all[1023].smBudget = 16;
  all[1023].nCtas = 16;
  BOOST_TEST(checkAgreement(all) ==
             "rank 1023 has smBudget 16 (16 CTAs) but rank 0 has 24 (24 CTAs); every rank must create the group "
             "with the same config");
  all[777].fp8Dispatch = 1;
  const std::string msg = checkAgreement(all);
  BOOST_TEST(mentions(msg, "rank 777 has fp8Dispatch 1"), msg);
  BOOST_TEST(mentions(msg, "(2 of 1024 ranks differ from rank 0)"), msg);
}

BOOST_AUTO_TEST_CASE(records_survive_a_byte_copy) {
  // The exchange moves raw bytes: a copied record compares equal, a record of zeros does not.
  const AgreedConfig a = base();
  unsigned char bytes[sizeof(AgreedConfig)];
  std::memcpy(bytes, &a, sizeof(a));
  AgreedConfig b;
  std::memcpy(&b, bytes, sizeof(b));
  BOOST_TEST(checkAgreement({a, b}) == "");
  AgreedConfig zero{};
  BOOST_TEST(mentions(checkAgreement({a, zero}), "config record magic 0x00000000"));
}

BOOST_AUTO_TEST_SUITE_END()
