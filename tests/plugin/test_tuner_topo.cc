// Tuner topology policy: facts of the reference topologies (tests/fixtures/topology), the pure
// decision on NCCL's float[7][3] cost table, and the built plugin's ncclTunerPlugin_v5 with
// EPX_TUNER_TOPO (rules-file precedence, missing and invalid topologies, INFO explanations).
#define BOOST_TEST_MODULE plugin_tuner_topo
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "net_harness.h"
#include "nccl_tuner.h"
#include "tuner/topo_facts.h"
#include "tuner/topo_policy.h"

using namespace epx::plugin::tuner;
using epx::test::captureLog;
using epx::test::infoed;

namespace {

std::string fixture(const char* name) { return std::string(EPX_TOPO_FIXTURE_DIR) + "/" + name; }

TopoFacts facts(const char* name) {
  TopoFacts f = loadFacts(fixture(name));
  BOOST_TEST_MESSAGE(name << ": " << describeFacts(f));
  return f;
}

// A one-node all-reduce table as NCCL could fill it for a bandwidth-bound size: tree/simple is the
// cheapest, ring and tree allowed with every protocol, the rest disabled.
struct Table {
  float cost[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  Table() {
    for (auto& row : cost)
      for (float& c : row) c = NCCL_ALGO_PROTO_IGNORE;
    cost[NCCL_ALGO_TREE][NCCL_PROTO_LL] = 90.0f;
    cost[NCCL_ALGO_TREE][NCCL_PROTO_LL128] = 70.0f;
    cost[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 50.0f;
    cost[NCCL_ALGO_RING][NCCL_PROTO_LL] = 95.0f;
    cost[NCCL_ALGO_RING][NCCL_PROTO_LL128] = 75.0f;
    cost[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 55.0f;
  }
  float* data() { return &cost[0][0]; }
  float** raw() { return reinterpret_cast<float**>(cost); }
  Entry chosen() const { return cheapestEntry(&cost[0][0], NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS); }
  bool same(const Table& o) const { return std::memcmp(cost, o.cost, sizeof cost) == 0; }
};

bool is(Entry e, int a, int p) { return e.algorithm == a && e.protocol == p; }

std::string writeFile(const std::string& text) {
  char path[] = "/tmp/epx_tuner_topoXXXXXX";
  int fd = mkstemp(path);
  BOOST_TEST_REQUIRE(fd >= 0);
  BOOST_TEST_REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

}  // namespace

BOOST_AUTO_TEST_CASE(facts_of_reference_topologies) {
  // IBM gx3d-h100x8 (NCCL dump): 8 H100 SXM, each with 18 NVLinks to NVSwitches; 8 RoCE VFs of
  // 200 Gb/s, one per GPU.
  TopoFacts h100 = facts("ibmcloud_gx3d-h100x8_nccl-topo.xml");
  BOOST_TEST_REQUIRE(h100.valid);
  BOOST_TEST(h100.gpus == 8);
  BOOST_TEST((h100.links == GpuLinks::NvLink));
  BOOST_TEST(h100.nicCards == 8);
  BOOST_TEST(h100.railPolicy == "one-per-gpu");
  BOOST_TEST(h100.minNicsPerGpu == 1);
  BOOST_TEST(h100.maxGpusPerNic == 1);
  BOOST_TEST(h100.minGbpsPerGpu == 200.0);

  // Azure NC A100 v4 (NCCL dump): 4 A100 PCIe, one per NUMA node; its only <nvlink> per GPU
  // targets the GPU itself (a VM artifact, ignored), so NCCL describes no NVLink: PCIe only.
  TopoFacts ncv4 = facts("azhpc_ncv4-topo.xml");
  BOOST_TEST_REQUIRE(ncv4.valid);
  BOOST_TEST(ncv4.gpus == 4);
  BOOST_TEST((ncv4.links == GpuLinks::PcieOnly));
  BOOST_TEST(ncv4.worstPcie == "SYS");

  // Azure ND H100 v5 file: PCI nodes only (no <gpu> element), NCCL fills NVLink at run time. The
  // file does not say, so the policy must not guess "PCIe only".
  TopoFacts ndv5 = facts("azhpc_ndv5-topo.xml");
  BOOST_TEST_REQUIRE(ndv5.valid);
  BOOST_TEST(ndv5.gpus == 8);
  BOOST_TEST((ndv5.links == GpuLinks::Unknown));
  // No NIC rates in the file: 400 Gb/s assumed from class 0x0207, and said so.
  BOOST_TEST(ndv5.minGbpsPerGpu == 400.0);
  BOOST_TEST(ndv5.gbpsAssumed);
  BOOST_TEST(describeFacts(ndv5).find(">= 400 Gb/s per GPU (assumed from PCI ids)") != std::string::npos);

  // AWS g4dn.metal (hwloc XML, which has no NVLink data): 8 T4 and one EFA: unknown links, 8 GPUs
  // share one NIC card.
  TopoFacts g4dn = facts("mpibind_g4dnmetal.xml");
  BOOST_TEST_REQUIRE(g4dn.valid);
  BOOST_TEST(g4dn.gpus == 8);
  BOOST_TEST((g4dn.links == GpuLinks::Unknown));
  BOOST_TEST(g4dn.nicCards == 1);
  BOOST_TEST(g4dn.railPolicy == "shared");
  BOOST_TEST(g4dn.maxGpusPerNic == 8);

  // AWS p4d.24xlarge file: 8 A100 and 4 EFA, 2 GPUs per NIC behind each switch.
  TopoFacts p4d = facts("aws-ofi-nccl_p4d-24xl-topo.xml");
  BOOST_TEST_REQUIRE(p4d.valid);
  BOOST_TEST(p4d.gpus == 8);
  BOOST_TEST(p4d.nicCards == 4);
  BOOST_TEST(p4d.maxGpusPerNic == 2);
  BOOST_TEST(p4d.minNicsPerGpu == 1);
}

BOOST_AUTO_TEST_CASE(pcie_only_and_nvlink_machines_decide_differently) {
  TopoFacts pcie = facts("azhpc_ncv4-topo.xml");
  TopoFacts nvl = facts("ibmcloud_gx3d-h100x8_nccl-topo.xml");

  // PCIe only, one node, 4 ranks: NCCL's tree/simple all-reduce becomes ring/simple, with reason.
  Table t;
  TopoDecision d = applyTopoPolicy(pcie, 4, 1, ncclFuncAllReduce, t.data(), 7, 3);
  BOOST_TEST((d.rule == TopoRule::PcieRing));
  BOOST_TEST(is(d.from, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE));
  BOOST_TEST(is(d.to, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
  BOOST_TEST(is(t.chosen(), NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
  const std::string reason = explainTopoDecision(d, pcie, 4);
  BOOST_TEST(reason.find("pcie-ring") != std::string::npos);
  BOOST_TEST(reason.find("PCIe only") != std::string::npos);
  BOOST_TEST(reason.find("SYS") != std::string::npos);
  BOOST_TEST(reason.find("2(n-1)/n") != std::string::npos);
  BOOST_TEST(t.cost[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] == NCCL_ALGO_PROTO_IGNORE);  // never enabled

  // NVLink everywhere, same call: NCCL's table untouched.
  Table n, before;
  TopoDecision dn = applyTopoPolicy(nvl, 8, 1, ncclFuncAllReduce, n.data(), 7, 3);
  BOOST_TEST((dn.rule == TopoRule::None));
  BOOST_TEST(explainTopoDecision(dn, nvl, 8).empty());
  BOOST_TEST(n.same(before));
  BOOST_TEST(is(n.chosen(), NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE));

  // The init notes explain both.
  auto pn = topoPolicyNotes(pcie, 4, 1);
  auto nn = topoPolicyNotes(nvl, 8, 1);
  BOOST_TEST_REQUIRE(!pn.empty());
  BOOST_TEST_REQUIRE(!nn.empty());
  BOOST_TEST(pn[0].find("rule pcie-ring armed") != std::string::npos);
  BOOST_TEST(nn[0].find("NVLink between every GPU pair") != std::string::npos);

  // Unknown links (a file without NVLink data) must not be read as PCIe only.
  Table u;
  BOOST_TEST((applyTopoPolicy(facts("azhpc_ndv5-topo.xml"), 8, 1, ncclFuncAllReduce, u.data(), 7, 3).rule ==
              TopoRule::None));
  BOOST_TEST(u.same(before));
  BOOST_TEST(topoPolicyNotes(facts("mpibind_g4dnmetal.xml"), 8, 1)[0].find("NVLink status not recorded") != std::string::npos);
  BOOST_TEST(topoPolicyNotes(TopoFacts{true, "empty", 0}, 8, 1)[0].find("0 GPU(s) in the topology") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(pcie_ring_conditions) {
  TopoFacts pcie = facts("azhpc_ncv4-topo.xml");
  Table before;
  // Two nodes: trees span nodes there; left to NCCL.
  Table t1;
  BOOST_TEST((applyTopoPolicy(pcie, 8, 2, ncclFuncAllReduce, t1.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t1.same(before));
  // Two ranks: ring and chain move the same bytes.
  Table t2;
  BOOST_TEST((applyTopoPolicy(pcie, 2, 1, ncclFuncAllReduce, t2.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t2.same(before));
  // Not an all-reduce.
  Table t3;
  BOOST_TEST((applyTopoPolicy(pcie, 4, 1, ncclFuncAllGather, t3.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t3.same(before));
  // NCCL chose LL (latency-bound size): left to NCCL.
  Table t4;
  t4.cost[NCCL_ALGO_TREE][NCCL_PROTO_LL] = 1.0f;
  Table t4before = t4;
  BOOST_TEST((applyTopoPolicy(pcie, 4, 1, ncclFuncAllReduce, t4.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t4.same(t4before));
  // Ring/simple disabled by NCCL (e.g. NCCL_ALGO): never enabled by the policy.
  Table t5;
  t5.cost[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
  Table t5before = t5;
  BOOST_TEST((applyTopoPolicy(pcie, 4, 1, ncclFuncAllReduce, t5.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t5.same(t5before));
  // No snapshot: nothing changes.
  Table t6;
  BOOST_TEST((applyTopoPolicy(TopoFacts{}, 4, 1, ncclFuncAllReduce, t6.data(), 7, 3).rule == TopoRule::None));
  BOOST_TEST(t6.same(before));
}

BOOST_AUTO_TEST_CASE(multi_node_notes_on_nics) {
  auto shared = topoPolicyNotes(facts("mpibind_g4dnmetal.xml"), 16, 2);
  bool railNote = false;
  for (const auto& n : shared) railNote = railNote || n.find("rail sharing, up to 8 GPUs per NIC card") != std::string::npos;
  BOOST_TEST(railNote);
  // The EFA of that file has no speed: said so, not printed as 0.
  BOOST_TEST(describeFacts(facts("mpibind_g4dnmetal.xml")).find("NIC speed unknown") != std::string::npos);
  BOOST_TEST(describeFacts(facts("ibmcloud_gx3d-h100x8_nccl-topo.xml")).find(">= 200 Gb/s per GPU") != std::string::npos);
  auto oneToOne = topoPolicyNotes(facts("ibmcloud_gx3d-h100x8_nccl-topo.xml"), 16, 2);
  for (const auto& n : oneToOne) BOOST_TEST(n.find("rail sharing") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(missing_and_invalid_topologies_fall_back) {
  TopoFacts missing = loadFacts("/nonexistent/topo.xml");
  BOOST_TEST(!missing.valid);
  BOOST_TEST(missing.source.find("cannot open /nonexistent/topo.xml") != std::string::npos);
  TopoFacts graph = loadFacts(fixture("azhpc_ncv4-graph.xml"));  // a graph file, not a topology
  BOOST_TEST(!graph.valid);
  BOOST_TEST(!graph.source.empty());
  std::string garbage = writeFile("this is not XML\n");
  TopoFacts bad = loadFacts(garbage);
  BOOST_TEST(!bad.valid);
  remove(garbage.c_str());
  TopoFacts off = loadFacts("off");
  BOOST_TEST(!off.valid);
  BOOST_TEST(topoPolicyNotes(off, 4, 1)[0].find("topology policy off: EPX_TUNER_TOPO=off") == 0u);
  for (const TopoFacts* f : {&missing, &graph, &bad}) {
    BOOST_TEST(topoPolicyNotes(*f, 4, 1)[0].find("topology policy off") == 0u);
    Table t, before;
    BOOST_TEST((applyTopoPolicy(*f, 4, 1, ncclFuncAllReduce, t.data(), 7, 3).rule == TopoRule::None));
    BOOST_TEST(t.same(before));
  }
}

BOOST_AUTO_TEST_CASE(plugin_symbol_topology_policy_and_rules_precedence) {
  const auto* tuner = epx::test::pluginSymbol<ncclTuner_v5_t>("ncclTunerPlugin_v5");
  BOOST_TEST_REQUIRE(tuner != nullptr);
  ncclNvlDomainInfo_v5_t nvl{4, 1, 1};
  ncclTunerConstants_v5_t constants{};
  void* ctx = nullptr;

  // PCIe-only topology, no rules: the policy decides and says why at INFO.
  setenv("EPX_TUNER_TOPO", fixture("azhpc_ncv4-topo.xml").c_str(), 1);
  unsetenv("EPX_TUNER_RULES");
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 1, 4, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(infoed("EPX tuner: topology "));
  BOOST_TEST(infoed("4 GPU(s), PCIe only (no NVLink)"));
  BOOST_TEST(infoed("rule pcie-ring armed"));
  Table t;
  int ch = 0;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 1, t.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(is(t.chosen(), NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
  BOOST_TEST(ch == 0);
  BOOST_TEST(infoed("allreduce 67108864 bytes: tree/simple -> ring/simple by rule pcie-ring"));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);

  // Same topology with a rules file: a matching rule wins over the topology policy.
  std::string rules = writeFile("allreduce 1M- * * tree simple\n");
  setenv("EPX_TUNER_RULES", rules.c_str(), 1);
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 2, 4, 1, captureLog, &nvl, &constants) == ncclSuccess);
  Table r;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 1, r.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(is(r.chosen(), NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE));
  BOOST_TEST(r.cost[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] == 0.0f);  // forced by the rule
  BOOST_TEST(infoed("takes precedence over the topology policy"));
  // Below the rule's range the topology policy still decides.
  Table s;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 512 << 10, 1, s.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(is(s.chosen(), NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);
  unsetenv("EPX_TUNER_RULES");
  remove(rules.c_str());

  // NVLink topology: NCCL's choice stands, and the log says why.
  setenv("EPX_TUNER_TOPO", fixture("ibmcloud_gx3d-h100x8_nccl-topo.xml").c_str(), 1);
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 3, 8, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(infoed("no change: NVLink between every GPU pair"));
  Table v, before;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 1, v.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(v.same(before));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);

  // A missing topology file: init succeeds, the reason is logged, NCCL's defaults stand.
  setenv("EPX_TUNER_TOPO", "/nonexistent/topo.xml", 1);
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 4, 4, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(infoed("topology policy off: cannot open /nonexistent/topo.xml"));
  Table m;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 1, m.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(m.same(before));
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);

  // Unset: live discovery of this host (whatever it holds), described at INFO; never fails.
  unsetenv("EPX_TUNER_TOPO");
  BOOST_TEST_REQUIRE(tuner->init(&ctx, 5, 4, 1, captureLog, &nvl, &constants) == ncclSuccess);
  BOOST_TEST(infoed("EPX tuner: topology live"));
  Table l;
  BOOST_TEST(tuner->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 1, l.raw(), 7, 3, 0, &ch) == ncclSuccess);
  BOOST_TEST(l.chosen().algorithm >= 0);  // some allowed entry is still chosen
  BOOST_TEST(tuner->finalize(ctx) == ncclSuccess);
}
