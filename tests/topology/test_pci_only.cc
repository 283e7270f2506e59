// PCI-only NCCL topology files (what cloud images ship as NCCL_TOPO_FILE): GPUs and NICs known
// from PCI class / vendor / device ids, NIC rates assumed from the part or class and said so.
#include "epx/topology/estimate.h"
#include "epx/topology/pci_ids.h"
#include "fixtures.h"

using namespace epx::topo;
using namespace epx::topo::test;

namespace {

Topology loadData(const std::string& name) {
  auto r = loadNcclXml(std::string(EPX_TOPO_TEST_DATA) + "/" + name);
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  return r.value;
}

const Assumption* assumption(const Topology& t, const std::string& what) {
  for (const Assumption& a : t.assumptions)
    if (a.what == what) return &a;
  return nullptr;
}

bool warned(const Topology& t, const std::string& text) {
  for (const std::string& w : t.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pci_only)

BOOST_AUTO_TEST_CASE(rate_table) {
  auto r = assumedNicRate(0x15b3, 0x1021, 0x0207);
  BOOST_TEST_REQUIRE(r.has_value());
  BOOST_TEST(r->gbps == 400.0);
  BOOST_TEST(r->basis == "PCI id 15b3:1021 (ConnectX-7)");
  BOOST_TEST(assumedNicRate(0x15b3, 0x101b, 0)->gbps == 200.0);     // ConnectX-6, no class
  BOOST_TEST(assumedNicRate(0x15b3, 0x1023, 0x0200)->gbps == 800.0);  // ConnectX-8
  BOOST_TEST(assumedNicRate(0x1d0f, 0xefa0, 0x0200)->gbps == 100.0);  // EFA (p4d)
  // The part wins over the class; the class alone gives InfiniBand NDR.
  BOOST_TEST(assumedNicRate(0x15b3, 0x1017, 0x0207)->gbps == 100.0);
  auto ib = assumedNicRate(0, 0, 0x0207);
  BOOST_TEST_REQUIRE(ib.has_value());
  BOOST_TEST(ib->gbps == 400.0);
  BOOST_TEST(ib->basis.find("class 0x0207") != std::string::npos);
  // A generation-less VF or an Ethernet function of an unknown part: nothing assumed.
  BOOST_TEST(!assumedNicRate(0x15b3, 0x101e, 0x0200).has_value());
  BOOST_TEST(!assumedNicRate(0x8086, 0x1521, 0x0200).has_value());
  BOOST_TEST(isKnownNvidiaGpuDevice(0x2330));
  BOOST_TEST(!isKnownNvidiaGpuDevice(0x22a3));  // an NVSwitch
  BOOST_TEST(isKnownRdmaNicDevice(0x15b3, 0x101e));
}

BOOST_AUTO_TEST_CASE(azure_ndv5_classes_only) {
  // Azure ND H100 v5 as shipped: class 0x030200 GPUs and 0x020700 NICs, no vendor/device ids.
  Topology t = loadNccl("azhpc_ndv5-topo.xml");
  BOOST_TEST(t.gpus.size() == 8u);
  BOOST_TEST(t.nics.size() == 8u);
  BOOST_TEST(t.numCards == 8);
  for (const Nic& n : t.nics) {
    BOOST_TEST(n.transport == Transport::InfiniBand);
    BOOST_TEST(n.speedGbps == 400.0);
    BOOST_TEST(n.speedAssumed);
  }
  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "one-per-gpu");
  BOOST_TEST(p.rails.size() == 8u);
  for (const GpuRail& g : p.gpus) BOOST_TEST(g.path == PathType::PIX);

  const Assumption* rate = assumption(t, "nic_speed");
  BOOST_TEST_REQUIRE(rate);
  BOOST_TEST(rate->gbps == 400.0);
  BOOST_TEST(rate->devices.size() == 8u);
  BOOST_TEST(rate->basis.find("class 0x0207") != std::string::npos);
  const Assumption* nv = assumption(t, "gpu_nvlink");
  BOOST_TEST_REQUIRE(nv);
  BOOST_TEST(nv->devices.size() == 8u);
  BOOST_TEST(!assumption(t, "nic_speed_unknown"));
  BOOST_TEST(warned(t, "ASSUMED NIC rate 400 Gb/s for 8 port(s)"));
  BOOST_TEST(warned(t, "NVLink unknown for 8 GPU(s)"));

  // The affinity masks become CPU lists; the masks are kept for the export.
  BOOST_TEST_REQUIRE(t.numa.size() == 2u);
  BOOST_TEST(t.numa[0].cpus == "0-47");
  BOOST_TEST(t.numa[1].cpus == "48-95");
  BOOST_TEST(t.numa[0].affinity == "00000000,0000ffff,ffffffff");

  // What epx-topo estimates from it: NVLink unknown (0), 400 Gb/s per GPU, 2 ranks x 2 nodes,
  // the RDMA-bound cases of docs/topology.md: direct 4 SMs, 4 QPs; hybrid 12 SMs, 129 QPs (without
  // the assumed rate: 4 SMs, 0 QPs).
  EpxEpShape shape;
  shape.numScaleupRanks = 2;
  shape.numScaleoutRanks = 2;
  EpxResourceEstimate e = epxEstimateEpResources(0.0, epxNicGBps(t.nics[0].speedGbps), 132, shape);
  BOOST_TEST(e.sms == 4);
  BOOST_TEST(e.qps == 4);
  shape.forwarding = EpxForwarding::kHybrid;
  e = epxEstimateEpResources(0.0, epxNicGBps(t.nics[0].speedGbps), 132, shape);
  BOOST_TEST(e.sms == 12);
  BOOST_TEST(e.qps == 129);
}

BOOST_AUTO_TEST_CASE(vendor_and_device_ids) {
  Topology t = loadData("pci-only-ids-nccl.xml");
  BOOST_TEST(t.gpus.size() == 4u);  // 0003:00:00.0 has no class: 10de:2330 is an H100
  gpuByBus(t, "0003:00:00.0");
  BOOST_TEST(t.nics.size() == 4u);  // 0102:00:00.0 has no class: 15b3:101b is a ConnectX-6
  const Nic& cx7 = t.nics.at(nicByName(t, "pci:0101:00:00.0"));
  BOOST_TEST(cx7.speedGbps == 400.0);
  BOOST_TEST(cx7.speedBasis == "PCI id 15b3:1021 (ConnectX-7)");
  const Nic& cx6 = t.nics.at(nicByName(t, "pci:0102:00:00.0"));
  BOOST_TEST(cx6.speedGbps == 200.0);
  BOOST_TEST(cx6.speedAssumed);
  const Nic& vf = t.nics.at(nicByName(t, "pci:0104:00:00.0"));
  BOOST_TEST(vf.speedGbps == 0.0);
  BOOST_TEST(!vf.speedAssumed);
  BOOST_TEST(vf.transport == Transport::RoCE);

  int assumedRates = 0;
  for (const Assumption& a : t.assumptions) assumedRates += a.what == "nic_speed";
  BOOST_TEST(assumedRates == 2);  // 400 Gb/s from ConnectX-7 (2 ports), 200 from ConnectX-6
  const Assumption* unknown = assumption(t, "nic_speed_unknown");
  BOOST_TEST_REQUIRE(unknown);
  BOOST_TEST(unknown->devices == std::vector<std::string>{"pci:0104:00:00.0"});
  BOOST_TEST(warned(t, "NIC rate unknown for 1 port(s) (pci:0104:00:00.0)"));
  BOOST_TEST(warned(t, "ASSUMED NIC rate 400 Gb/s for 2 port(s) (pci:0101:00:00.0, pci:0103:00:00.0) from PCI id "
                       "15b3:1021 (ConnectX-7)"));

  RailPlan p = assignRails(t);
  BOOST_TEST(p.policy == "one-per-gpu");
  for (int g = 0; g < 4; ++g)
    BOOST_TEST(railNicNames(t, p, g) == std::vector<std::string>{"pci:010" + std::to_string(g + 1) + ":00:00.0:1"});
}

BOOST_AUTO_TEST_CASE(files_with_net_elements_assume_nothing) {
  // A dump (NCCL_TOPO_DUMP_FILE) has <gpu> and <net speed>: no assumption, no warning.
  Topology t = loadNccl("ibmcloud_gx3d-h100x8_nccl-topo.xml");
  BOOST_TEST(t.assumptions.empty());
  BOOST_TEST(t.warnings.empty());
  for (const Nic& n : t.nics) BOOST_TEST(!n.speedAssumed);
  // A <net> without a rate stays unknown: the file describes the port, epx does not guess.
  Topology u = loadNcclText(
      "<system version=\"1\"><cpu numaid=\"0\" affinity=\"ff\"><pci busid=\"0000:19:00.0\" class=\"0x020700\" "
      "vendor=\"0x15b3\" device=\"0x1021\"><nic><net name=\"mlx5_0\"/></nic></pci></cpu></system>");
  BOOST_TEST(u.nics.at(0).speedGbps == 0.0);
  BOOST_TEST(u.assumptions.empty());
  BOOST_TEST(u.numa.at(0).cpus == "0-7");
}

BOOST_AUTO_TEST_SUITE_END()
