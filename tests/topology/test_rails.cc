// Rail assignment on small NCCL topology files written for each case; expected rails follow from
// the placement drawn in each file.
#include <map>

#include "fixtures.h"
#include "generate.h"

using namespace epx::topo;
using namespace epx::topo::test;

namespace {

std::string gpu(const std::string& bus) {
  return "<pci busid=\"" + bus + "\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\"/>";
}
std::string nic(const std::string& bus, const std::string& nets) {
  return "<pci busid=\"" + bus + "\" class=\"0x020700\" vendor=\"0x15b3\" device=\"0x1021\"><nic>" + nets + "</nic></pci>";
}
std::string net(const std::string& name, int port = 1, int speedMbps = 400000, const std::string& guid = "") {
  return "<net name=\"" + name + "\" dev=\"0\" speed=\"" + std::to_string(speedMbps) + "\" port=\"" +
         std::to_string(port) + "\"" + (guid.empty() ? "" : " guid=\"" + guid + "\"") + "/>";
}
std::string sw(const std::string& bus, const std::string& body) {
  return "<pci busid=\"" + bus + "\" class=\"0x060400\">" + body + "</pci>";
}
std::string sys(const std::string& cpus) { return "<system version=\"1\">" + cpus + "</system>"; }
std::string cpu(int numa, const std::string& body) {
  return "<cpu numaid=\"" + std::to_string(numa) + "\">" + body + "</cpu>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rails)

BOOST_AUTO_TEST_CASE(multi_function_nic_goes_to_one_gpu) {
  // Each switch: a GPU and a dual-function card (functions .0 and .1 = two verbs devices).
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("mlx5_0")) +
                                                             nic("0000:12:00.1", net("mlx5_1"))) +
                                           sw("0000:20:00.0", gpu("0000:21:00.0") + nic("0000:22:00.0", net("mlx5_2")) +
                                                             nic("0000:22:00.1", net("mlx5_3"))))));
  BOOST_TEST(t.nics.size() == 4u);
  BOOST_TEST(t.numCards == 2);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "one-per-gpu");
  BOOST_TEST(railNicNames(t, p, 0) == std::vector<std::string>({"mlx5_0:1", "mlx5_1:1"}));
  BOOST_TEST(railNicNames(t, p, 1) == std::vector<std::string>({"mlx5_2:1", "mlx5_3:1"}));
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(dual_plane_nic_keeps_both_planes_on_its_gpu) {
  // One card per GPU exposing two planes as ports 1 and 2 of one GUID.
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") +
                                                             nic("0000:12:00.0", net("mlx5_0", 1, 200000, "0xa1") +
                                                                                     net("mlx5_0", 2, 200000, "0xa1"))) +
                                           sw("0000:20:00.0", gpu("0000:21:00.0") +
                                                             nic("0000:22:00.0", net("mlx5_1", 1, 200000, "0xb1") +
                                                                                     net("mlx5_1", 2, 200000, "0xb1"))))));
  BOOST_TEST(t.nics.size() == 4u);
  BOOST_TEST(t.numCards == 2);
  RailPlan p = assignRails(t);
  BOOST_TEST(railNicNames(t, p, 0) == std::vector<std::string>({"mlx5_0:1", "mlx5_0:2"}));
  BOOST_TEST(railNicNames(t, p, 1) == std::vector<std::string>({"mlx5_1:1", "mlx5_1:2"}));
  BOOST_TEST(p.rails.size() == 2u);
}

BOOST_AUTO_TEST_CASE(more_nics_than_gpus_two_local_nics_each) {
  // GPU0's switch holds mlx5_2/mlx5_3 and GPU1's holds mlx5_0/mlx5_1: names do not follow order.
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("mlx5_2")) +
                                                             nic("0000:13:00.0", net("mlx5_3"))) +
                                           sw("0000:20:00.0", gpu("0000:21:00.0") + nic("0000:22:00.0", net("mlx5_0")) +
                                                             nic("0000:23:00.0", net("mlx5_1"))))));
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "multi-per-gpu");
  BOOST_TEST(railNicNames(t, p, 0) == std::vector<std::string>({"mlx5_2:1", "mlx5_3:1"}));
  BOOST_TEST(railNicNames(t, p, 1) == std::vector<std::string>({"mlx5_0:1", "mlx5_1:1"}));
  BOOST_TEST(p.gpus[0].path == PathType::PIX);
  BOOST_TEST(p.gpus[1].path == PathType::PIX);
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(uneven_sharing_differs_by_one) {
  // 3 GPUs, 2 NICs on one host bridge: loads 2 and 1.
  Topology t = loadNcclText(sys(cpu(0, gpu("0000:11:00.0") + gpu("0000:21:00.0") + gpu("0000:31:00.0") +
                                           nic("0000:12:00.0", net("mlx5_0")) + nic("0000:22:00.0", net("mlx5_1")))));
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "shared");
  BOOST_TEST_REQUIRE(p.rails.size() == 2u);
  BOOST_TEST(p.rails[0].gpus.size() + p.rails[1].gpus.size() == 3u);
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(far_front_end_nic_is_not_chosen) {
  // Two GPUs with a PIX NIC each; a front-end NIC of the same speed hangs off the CPU of NUMA 1.
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("mlx5_0"))) +
                                           sw("0000:20:00.0", gpu("0000:21:00.0") + nic("0000:22:00.0", net("mlx5_1")))) +
                                cpu(1, nic("0000:80:00.0", net("mlx5_fe")))));
  RailPlan p = assignRails(t);
  BOOST_TEST(p.rails.size() == 2u);
  BOOST_TEST(railNicNames(t, p, 0) == std::vector<std::string>({"mlx5_0:1"}));
  BOOST_TEST(railNicNames(t, p, 1) == std::vector<std::string>({"mlx5_1:1"}));
  bool excluded = false;
  for (const auto& e : p.excluded) excluded |= e.rfind("mlx5_fe", 0) == 0;
  BOOST_TEST(excluded);
}

BOOST_AUTO_TEST_CASE(slow_front_end_nic_is_not_chosen_even_when_close) {
  // A 25 Gb/s NIC shares GPU0's switch; the 400 Gb/s NIC is PHB. Speed filter wins.
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("eth_fe", 1, 25000))) +
                                           nic("0000:30:00.0", net("mlx5_0")))));
  RailPlan p = assignRails(t);
  BOOST_TEST(railNicNames(t, p, 0) == std::vector<std::string>({"mlx5_0:1"}));
  BOOST_TEST(p.gpus[0].path == PathType::PHB);
}

BOOST_AUTO_TEST_CASE(same_rail_for_same_local_gpu_on_every_node) {
  // Node A and node B have the same shape; B's NIC bus numbers and names run the other way.
  std::string a = sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("mlx5_0"))) +
                                 sw("0000:20:00.0", gpu("0000:21:00.0") + nic("0000:22:00.0", net("mlx5_1")))));
  std::string b = sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:1f:00.0", net("mlx5_1"))) +
                                 sw("0000:20:00.0", gpu("0000:21:00.0") + nic("0000:0f:00.0", net("mlx5_0")))));
  Topology ta = loadNcclText(a), tb = loadNcclText(b);
  RailPlan pa = assignRails(ta), pb = assignRails(tb);
  for (int g = 0; g < 2; ++g) {
    BOOST_TEST(pa.gpus[g].rail == g);
    BOOST_TEST(pb.gpus[g].rail == pa.gpus[g].rail);
    BOOST_TEST(pb.gpus[g].path == PathType::PIX);
  }
  // Deterministic: the same input gives the same plan.
  RailPlan again = assignRails(tb);
  for (int g = 0; g < 2; ++g) BOOST_TEST(again.gpus[g].nics == pb.gpus[g].nics);
}

BOOST_AUTO_TEST_CASE(nested_switches_are_pxb) {
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", sw("0000:11:00.0", gpu("0000:12:00.0")) +
                                                             nic("0000:13:00.0", net("mlx5_0"))))));
  BOOST_TEST(gpuNicPath(t, 0, 0) == PathType::PXB);
}

BOOST_AUTO_TEST_CASE(down_port_is_not_a_rail) {
  Topology t = loadNcclText(sys(cpu(0, sw("0000:10:00.0", gpu("0000:11:00.0") + nic("0000:12:00.0", net("mlx5_0"))))));
  t.nics[0].state = "DOWN";
  RailPlan p = assignRails(t);
  BOOST_TEST(p.rails.empty());
  BOOST_TEST(p.gpus[0].rail == -1);
}

BOOST_AUTO_TEST_CASE(every_fixture_is_balanced) {
  int checked = 0;
  for (const char* f : {"ibmcloud_gx3d-h100x8_nccl-topo.xml", "azhpc_ndv5-topo.xml", "azhpc_ndv2-topo.xml",
                        "azhpc_ncv4-topo.xml", "aws-ofi-nccl_p4d-24xl-topo.xml"}) {
    Topology t = loadNccl(f);
    RailPlan p = assignRails(t);
    BOOST_TEST_CONTEXT(f) {
      BOOST_TEST(!p.rails.empty());
      checkBalanced(t, p);
    }
    ++checked;
  }
  BOOST_TEST(checked == 5);
}

BOOST_AUTO_TEST_CASE(generated_large_topologies_are_balanced_and_local) {
  // GPU i and NIC i share PCIe switch i (tests/topology/generate.h): every GPU that has a NIC of its
  // own keeps it, also where the order tie-break (up to G·C) exceeds 100000, the fixed path weight
  // epx used before the weights scaled with G and C.
  for (auto [gpus, nics] : {std::pair{512, 512}, std::pair{300, 700}, std::pair{700, 300}}) {
    BOOST_TEST_CONTEXT(gpus << " GPUs, " << nics << " NICs") {
      Topology t = loadNcclText(generatedNcclXml(gpus, nics));
      RailPlan p = assignRails(t);
      checkBalanced(t, p);
      // The NICs without a GPU on their switch are farther from every GPU than its own: excluded.
      BOOST_TEST(p.policy == (gpus <= nics ? "one-per-gpu" : "shared"));
      BOOST_TEST(p.excluded.size() == static_cast<size_t>(std::max(0, nics - gpus)));
      std::map<int, std::string> nicUnderSwitch;  // switch node → the NIC port on it
      for (const Nic& n : t.nics) nicUnderSwitch[t.nodes[n.node].parent] = n.name + ":" + std::to_string(n.port);
      int own = 0;
      for (const Gpu& g : t.gpus) {
        auto it = nicUnderSwitch.find(t.nodes[g.node].parent);
        if (it == nicUnderSwitch.end()) continue;
        const std::vector<std::string> names = railNicNames(t, p, g.index);
        own += std::count(names.begin(), names.end(), it->second) == 1;
      }
      BOOST_TEST(own == std::min(gpus, nics));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
