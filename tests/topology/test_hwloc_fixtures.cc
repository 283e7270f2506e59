// hwloc XML fixtures and a captured sysfs tree replayed through HWLOC_FSROOT.
#include <cstdlib>

#include "fixtures.h"

using namespace epx::topo;
using namespace epx::topo::test;

BOOST_AUTO_TEST_SUITE(hwloc_fixtures)

BOOST_AUTO_TEST_CASE(cts1_pascal_gpus_and_ib_nic_behind_one_switch) {
  Topology t = loadHwloc("mpibind_cts1-pascal.xml");
  BOOST_TEST(t.numa.size() == 2u);
  BOOST_TEST_REQUIRE(t.gpus.size() == 2u);
  BOOST_TEST(formatBusId(t.gpus[0].address) == "0000:04:00.0");
  BOOST_TEST(formatBusId(t.gpus[1].address) == "0000:07:00.0");
  BOOST_TEST(t.gpus[0].name == "Tesla P100-PCIE-16GB");  // hwloc GPUModel info of nvml0
  BOOST_TEST(!t.gpus[0].nvlinkKnown);  // hwloc XML carries no NVLink data
  // The two I350 Ethernet ports have no OpenFabrics device: not RDMA NICs.
  BOOST_TEST_REQUIRE(t.nics.size() == 1u);
  BOOST_TEST(t.nics[0].name == "mlx5_0");
  BOOST_TEST(t.nics[0].netdev == "hsi0");
  BOOST_TEST(t.nics[0].transport == Transport::InfiniBand);
  BOOST_TEST(gpuNicPath(t, 0, 0) == PathType::PIX);
  BOOST_TEST(gpuNicPath(t, 1, 0) == PathType::PIX);
  BOOST_TEST(gpuGpuPath(t, 0, 1) == PathType::PIX);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.rails.size() == 1u);
  BOOST_TEST(p.rails[0].gpus == std::vector<int>({0, 1}));
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(g4dn_efa_class_0200_on_second_socket) {
  Topology t = loadHwloc("mpibind_g4dnmetal.xml");
  BOOST_TEST(t.numa.size() == 2u);
  BOOST_TEST(t.gpus.size() == 8u);
  BOOST_TEST_REQUIRE(t.nics.size() == 1u);  // EFA counts (OpenFabrics child); ENA does not
  const Nic& efa = t.nics[0];
  BOOST_TEST(efa.name == "rdmap197s0");
  BOOST_TEST(efa.classCode == 0x0200u);
  BOOST_TEST(efa.transport == Transport::EFA);
  BOOST_TEST(efa.numa == 1);
  // GPUs 0-3 on socket 0 (SYS to the EFA), 4-7 on socket 1 under other host bridges (NODE).
  for (int g = 0; g < 8; ++g) {
    BOOST_TEST(t.gpus[g].numa == (g < 4 ? 0 : 1));
    BOOST_TEST(gpuNicPath(t, g, 0) == (g < 4 ? PathType::SYS : PathType::NODE));
  }
  // Pairs share a host bridge: GPU0-GPU1 PHB, GPU0-GPU2 NODE, GPU0-GPU4 SYS.
  BOOST_TEST(gpuGpuPath(t, 0, 1) == PathType::PHB);
  BOOST_TEST(gpuGpuPath(t, 0, 2) == PathType::NODE);
  BOOST_TEST(gpuGpuPath(t, 0, 4) == PathType::SYS);
  RailPlan p = assignRails(t);
  BOOST_TEST(p.rails.size() == 1u);
  BOOST_TEST(p.rails[0].gpus.size() == 8u);
  checkBalanced(t, p);
}

BOOST_AUTO_TEST_CASE(sysfs_snapshot_through_hwloc_fsroot) {
  ::setenv("HWLOC_FSROOT", EPX_TOPO_SYSFS_ROOT, 1);
  auto r = loadLive();
  ::unsetenv("HWLOC_FSROOT");
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  const Topology& t = r.value;
  BOOST_TEST(t.source == SourceKind::Live);
  BOOST_TEST(t.numa.size() == 2u);
  BOOST_TEST(t.gpus.size() == 0u);  // the ASPEED BMC VGA 1a03:2000 is not a GPU
  BOOST_TEST_REQUIRE(t.nics.size() == 1u);
  const Nic& n = t.nics[0];
  BOOST_TEST(n.name == "mlx4_0");
  BOOST_TEST(n.netdev == "ib0");
  BOOST_TEST(n.classCode == 0x0280u);  // "Network controller": RDMA found by OpenFabrics, not class
  BOOST_TEST(formatBusId(n.address) == "0000:82:00.0");
  BOOST_TEST(n.speedGbps == 56.0);     // ports/1/rate "56 Gb/sec (4X FDR)"
  BOOST_TEST(n.linkLayer == LinkLayer::InfiniBand);
  BOOST_TEST(n.transport == Transport::InfiniBand);
  BOOST_TEST(n.state == "ACTIVE");
  BOOST_TEST(n.numa == 1);
  BOOST_TEST(n.guid == 0x0002c90300f9bfa3ull);  // SysImageGUID
  BOOST_TEST(assignRails(t).policy == "none");
}

BOOST_AUTO_TEST_SUITE_END()
