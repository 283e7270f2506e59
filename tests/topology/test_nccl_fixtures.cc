// NCCL topology XML fixtures (tests/fixtures/topology/README.md). Expected values were read off
// each file by hand: bus ids, switches, classes, <nvlink> counts.
#include <set>

#include "fixtures.h"

using namespace epx::topo;
using namespace epx::topo::test;

BOOST_AUTO_TEST_SUITE(nccl_fixtures)

BOOST_AUTO_TEST_CASE(ibmcloud_h100x8_one_roce_nic_per_gpu_reversed_names) {
  Topology t = loadNccl("ibmcloud_gx3d-h100x8_nccl-topo.xml");
  BOOST_TEST(t.gpus.size() == 8u);
  for (const Gpu& g : t.gpus) BOOST_TEST(g.nvlinkKnown);  // <gpu> elements with <nvlink> children
  BOOST_TEST(t.nics.size() == 8u);
  BOOST_TEST(t.numCards == 8);
  BOOST_TEST(t.numa.size() == 2u);
  // Switch a1 holds GPU a4 + mlx5_7, ab holds ae + mlx5_6, … e7 holds ea + mlx5_0.
  const char* gpuBus[8] = {"0000:a4:00.0", "0000:ae:00.0", "0000:b8:00.0", "0000:c2:00.0",
                           "0000:cc:00.0", "0000:d6:00.0", "0000:e0:00.0", "0000:ea:00.0"};
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "one-per-gpu");
  BOOST_TEST(p.rails.size() == 8u);
  for (int i = 0; i < 8; ++i) {
    int g = gpuByBus(t, gpuBus[i]);
    BOOST_TEST(g == i);
    int nic = nicByName(t, "mlx5_" + std::to_string(7 - i));
    BOOST_TEST(gpuNicPath(t, g, nic) == PathType::PIX);
    BOOST_TEST(railNicNames(t, p, g) == std::vector<std::string>{"mlx5_" + std::to_string(7 - i) + ":1"});
    BOOST_TEST(p.gpus[g].rail == i);  // rails follow GPU order, whatever the NIC names
    BOOST_TEST(t.gpus[g].numa == (i < 4 ? 0 : 1));
    // 4 <nvlink> to NVSwitches with counts 5/5/4/4 = 18.
    BOOST_TEST(t.nvlinkCount(g) == 18);
    for (int o = 0; o < 8; ++o)
      if (o != g) BOOST_TEST(t.nvlinkBetween(g, o) == 18);
  }
  for (const Nic& n : t.nics) {
    BOOST_TEST(n.transport == Transport::RoCE);  // class 0x020000, Mellanox
    BOOST_TEST(n.speedGbps == 200.0);
  }
  // A NIC on the other socket is SYS, on the same socket but another switch PHB.
  BOOST_TEST(gpuNicPath(t, 0, nicByName(t, "mlx5_0")) == PathType::SYS);
  BOOST_TEST(gpuNicPath(t, 0, nicByName(t, "mlx5_6")) == PathType::PHB);
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(azure_ndv5_synthetic_switches_ib) {
  Topology t = loadNccl("azhpc_ndv5-topo.xml");
  BOOST_TEST(t.gpus.size() == 8u);
  for (const Gpu& g : t.gpus) BOOST_TEST(!g.nvlinkKnown);  // PCI nodes only: NVLink not recorded
  BOOST_TEST(t.nics.size() == 8u);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "one-per-gpu");
  // Switch ffff:ff:0N.0 holds one GPU and IB NIC 010N:00:00.0 (GPU bus ids 0001-0003, 0008-000c).
  const char* gpus[8] = {"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0008:00:00.0",
                         "0009:00:00.0", "000a:00:00.0", "000b:00:00.0", "000c:00:00.0"};
  for (int i = 0; i < 8; ++i) {
    int g = gpuByBus(t, gpus[i]);
    std::string nic = "pci:010" + std::to_string(i + 1) + ":00:00.0";
    BOOST_TEST(railNicNames(t, p, g) == std::vector<std::string>{nic + ":1"});
    BOOST_TEST(gpuNicPath(t, g, nicByName(t, nic)) == PathType::PIX);
    BOOST_TEST(p.gpus[g].path == PathType::PIX);
  }
  for (const Nic& n : t.nics) BOOST_TEST(n.transport == Transport::InfiniBand);  // class 0x020700
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(azure_ndv2_single_nic_shared_by_all) {
  Topology t = loadNccl("azhpc_ndv2-topo.xml");
  BOOST_TEST(t.gpus.size() == 8u);  // class 0x030200 without a vendor attribute
  BOOST_TEST(t.nics.size() == 1u);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "shared");
  BOOST_TEST(p.rails.size() == 1u);
  BOOST_TEST(p.rails[0].gpus.size() == 8u);
  // GPUs 0001-0004 share NUMA 0 with the NIC (PHB), 0005-0008 are on NUMA 1 (SYS).
  for (int g = 0; g < 8; ++g) BOOST_TEST(gpuNicPath(t, g, 0) == (g < 4 ? PathType::PHB : PathType::SYS));
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(azure_ncv4_nic_without_pci_and_self_nvlink) {
  Topology t = loadNccl("azhpc_ncv4-topo.xml");
  BOOST_TEST(t.gpus.size() == 4u);
  for (const Gpu& g : t.gpus) BOOST_TEST(g.nvlinkKnown);  // <gpu> present, its only <nvlink> is to itself
  BOOST_TEST(t.numa.size() == 4u);
  BOOST_TEST_REQUIRE(t.nics.size() == 1u);
  BOOST_TEST(t.nics[0].name == "eth0");
  BOOST_TEST(!t.nics[0].hasAddress);
  BOOST_TEST(t.nics[0].speedGbps == 100.0);
  for (int g = 0; g < 4; ++g) {
    BOOST_TEST(t.nvlinkCount(g) == 0);  // each <nvlink> targets the GPU itself: dropped
    BOOST_TEST(gpuNicPath(t, g, 0) == (g == 0 ? PathType::PHB : PathType::SYS));
  }
  int selfWarnings = 0;
  for (const auto& w : t.warnings) selfWarnings += w.find("itself") != std::string::npos;
  BOOST_TEST(selfWarnings == 4);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.rails.size() == 1u);
  BOOST_TEST(p.rails[0].gpus.size() == 4u);
}

BOOST_AUTO_TEST_CASE(aws_p4d_two_gpus_per_efa) {
  Topology t = loadNccl("aws-ofi-nccl_p4d-24xl-topo.xml");
  BOOST_TEST(t.gpus.size() == 8u);
  BOOST_TEST(t.nics.size() == 4u);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "shared");
  BOOST_TEST(p.rails.size() == 4u);
  // Switch k holds GPUs <bus>:1c.0, <bus>:1d.0 and EFA <bus>:1b.0, bus = 10, 20, 90, a0.
  const char* bus[4] = {"10", "20", "90", "a0"};
  for (int k = 0; k < 4; ++k) {
    std::string nic = std::string("pci:0000:") + bus[k] + ":1b.0";
    for (const char* fn : {":1c.0", ":1d.0"}) {
      int g = gpuByBus(t, std::string("0000:") + bus[k] + fn);
      BOOST_TEST(railNicNames(t, p, g) == std::vector<std::string>{nic + ":1"});
      BOOST_TEST(gpuNicPath(t, g, nicByName(t, nic)) == PathType::PIX);
      BOOST_TEST(p.gpus[g].rail == k);
    }
    BOOST_TEST(t.nics[nicByName(t, nic)].transport == Transport::EFA);
  }
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(aws_p5_partial_file_has_no_classified_devices) {
  Topology t = loadNccl("aws-ofi-nccl_p5.48xl-topo.xml");
  // 2 NUMA × 4 switches × 4 NIC bus ids, none with a class: nothing can be called GPU or NIC.
  BOOST_TEST(t.gpus.size() == 0u);
  BOOST_TEST(t.nics.size() == 0u);
  BOOST_TEST(t.otherPciDevices == 32);
  BOOST_TEST(t.numa.size() == 2u);
  int switches = 0;
  for (const Node& n : t.nodes) switches += n.kind == NodeKind::Switch;
  BOOST_TEST(switches == 8);
  BOOST_TEST(assignRails(t).policy == "none");
  // One warning for all 32, not one each.
  BOOST_TEST_REQUIRE(t.warnings.size() == 1u);
  BOOST_TEST(t.warnings[0] == "32 PCI function(s) (0000:4f:00.0, 0000:50:00.0, 0000:51:00.0 and 29 more) have no class "
                              "and no known GPU or NIC id: not classified; the file names no GPU and no NIC "
                              "(NCCL_TOPO_DUMP_FILE from a run on the machine records them)");
}

BOOST_AUTO_TEST_CASE(aws_g5_busids_only) {
  Topology t = loadNccl("aws-ofi-nccl_g5.48xl-topo.xml");
  BOOST_TEST(t.gpus.size() == 0u);
  BOOST_TEST(t.nics.size() == 0u);
  BOOST_TEST(t.otherPciDevices == 9);  // 4 on NUMA 0, 5 on NUMA 1
  BOOST_TEST(t.numa.size() == 2u);
}

BOOST_AUTO_TEST_CASE(ncv4_graph_file_is_rejected) {
  auto r = loadNcclXml(fixture("azhpc_ncv4-graph.xml"));
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.error.find("graph") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
