// libepx's analytic SM count (smBudget = 0) and epx-topo's estimate are one model: for every
// reference topology, the CTA count libepx resolves for the group epx-topo assumes equals the SM
// count epx-topo prints.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "epx/device/ep_args.h"
#include "epx/topology/estimate.h"

using namespace epx;

// epx-topo accepts only group shapes libepx accepts: its CUDA-free copies of the limits must agree.
static_assert(topo::kEpMaxTopk == dev::kMaxTopk);
static_assert(topo::kEpMaxExperts == dev::kMaxExperts);
static_assert(topo::kEpMaxRanks == dev::kMaxRanks);

namespace {

std::string runTopo(const std::string& args) {
  std::string cmd = std::string(EPX_TOPO_BIN) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  BOOST_TEST_REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  BOOST_TEST_REQUIRE(rc == 0, cmd);
  return out;
}

// The 2×H200 NV18 machine as NCCL would dump it (shared with the epx-topo CLI test).
std::string h200Pair() { return std::string(EPX_TOPO_TEST_DATA) + "/2xh200-nv18-nccl.xml"; }

// libepx's count for the group epx-topo's estimate describes.
int libepxCount(const nlohmann::json& e, int numSMs, LinkRates rates) {
  GroupConfig cfg;
  cfg.numExperts = e["experts"].get<int>();
  cfg.topk = e["topk"].get<int>();
  cfg.smBudget = 0;
  const int U = e["scaleup_ranks"].get<int>(), S = e["scaleout_ranks"].get<int>();
  return resolveCtaCount(cfg, numSMs, U * S, U, rates);
}

struct Case {
  std::string args;
  int sms;  // what epx-topo must print; -1 = not pinned here
};

}  // namespace

BOOST_AUTO_TEST_SUITE(sm_agreement)

BOOST_AUTO_TEST_CASE(libepx_default_rates_are_the_h200_pair_epx_topo_sees) {
  // No environment: libepx assumes an H100/H200 SXM (18 NVLink4 links), the bandwidth epx-topo
  // computes from NV18, and no RDMA.
  const LinkRates d = parseLinkRates(nullptr, nullptr, nullptr);
  auto j = nlohmann::json::parse(runTopo("--json --nccl-xml " + h200Pair()));
  const auto& e = j["estimate"];
  BOOST_TEST(d.nvlinkGBps == e["nvlink_gbytes_per_s"].get<double>());
  BOOST_TEST(d.rdmaGBps == 0.0);
  BOOST_TEST(e["sms"].get<int>() == 28);
  // An EP2 group on this machine: ncclEpGroupGetSmCount reports resolveCtaCount's value.
  GroupConfig cfg;
  cfg.numExperts = 256;
  cfg.topk = 8;
  BOOST_TEST(resolveCtaCount(cfg, 132, 2, 2, d) == 28);
  BOOST_TEST(libepxCount(e, 132, d) == 28);
}

BOOST_AUTO_TEST_CASE(every_reference_topology_gives_one_count) {
  const std::string fx = EPX_TOPO_FIXTURE_DIR;
  const std::vector<Case> cases = {
      {"--nccl-xml " + h200Pair(), 28},
      {"--nccl-xml " + fx + "/ibmcloud_gx3d-h100x8_nccl-topo.xml", -1},
      {"--nccl-xml " + fx + "/azhpc_ndv5-topo.xml", -1},
      {"--nccl-xml " + fx + "/azhpc_ndv2-topo.xml", -1},
      {"--nccl-xml " + fx + "/azhpc_ncv4-topo.xml", -1},
      {"--nccl-xml " + fx + "/aws-ofi-nccl_p4d-24xl-topo.xml", -1},
      {"--nccl-xml " + fx + "/aws-ofi-nccl_p5.48xl-topo.xml", -1},
      {"--nccl-xml " + fx + "/aws-ofi-nccl_g5.48xl-topo.xml", -1},
      {"--hwloc-xml " + fx + "/mpibind_cts1-pascal.xml", -1},
      {"--hwloc-xml " + fx + "/mpibind_g4dnmetal.xml", -1},
  };
  int withRdma = 0;
  for (const Case& c : cases)
    for (const std::string extra : {"", " --nodes 4 --experts 64 --topk 6", " --num-sms 78"}) {
      BOOST_TEST_CONTEXT(c.args + extra) {
        auto j = nlohmann::json::parse(runTopo("--json " + c.args + extra));
        const auto& e = j["estimate"];
        // A file without GPUs (the aws-ofi-nccl p5/g5 PCI dumps) has no EP to size: nothing to compare.
        if (j["counts"]["gpus"] == 0) {
          BOOST_TEST(e.is_null());
          continue;
        }
        const int numSMs = extra.find("--num-sms 78") != std::string::npos ? 78 : 132;
        // libepx fed the bandwidths epx-topo derived (EPX_NVLINK_GBPS / EPX_RDMA_GBPS on that machine).
        LinkRates r;
        r.nvlinkGBps = e["nvlink_gbytes_per_s"].get<double>();
        r.rdmaGBps = e["nic_gbytes_per_s"].get<double>();
        if (r.rdmaGBps > 0) ++withRdma;
        BOOST_TEST(libepxCount(e, numSMs, r) == e["sms"].get<int>());
        if (c.sms >= 0 && extra.empty()) BOOST_TEST(e["sms"].get<int>() == c.sms);
      }
    }
  BOOST_TEST(withRdma > 0);  // the RDMA-bound direct branch is among the compared cases
}

BOOST_AUTO_TEST_CASE(rate_variables_parse_or_warn) {
  std::string w;
  LinkRates r = parseLinkRates("300", "50", &w);
  BOOST_TEST(r.nvlinkGBps == 300.0);
  BOOST_TEST(r.rdmaGBps == 50.0);
  BOOST_TEST(w.empty());
  r = parseLinkRates("0", "-1", &w);
  BOOST_TEST(r.nvlinkGBps == topo::epxNvlinkGBps(topo::kNvlinkSxmLinks));
  BOOST_TEST(r.rdmaGBps == 0.0);
  BOOST_TEST(w.find("ignoring EPX_NVLINK_GBPS=\"0\"") != std::string::npos, w);
  BOOST_TEST(w.find("ignoring EPX_RDMA_GBPS=\"-1\"") != std::string::npos, w);
  w.clear();
  r = parseLinkRates("fast", "0", &w);
  BOOST_TEST(r.rdmaGBps == 0.0);
  BOOST_TEST(w.find("EPX_NVLINK_GBPS=\"fast\"") != std::string::npos, w);
  BOOST_TEST(w.find("EPX_RDMA_GBPS") == std::string::npos, w);
}

BOOST_AUTO_TEST_SUITE_END()
