// NVML -> model: bus-id normalization (hwloc "0000:00:06.0" vs NVML "00000000:00:06.0"), GPU
// matching and NVLink far-end attribution, without NVML (pure functions in topology/src).
#include <boost/test/unit_test.hpp>

#include "epx/topology/busid.h"
#include "epx/topology/model.h"
#include "nvml_links.h"

using namespace epx::topo;
using namespace epx::topo::detail;

namespace {
PciAddress A(const char* s) { return *parseBusId(s); }

NvmlDevice dev(const char* bus, std::vector<NvmlLink> links, std::vector<int> p2p = {}) {
  NvmlDevice d;
  d.addressKnown = true;
  d.address = A(bus);
  d.links = std::move(links);
  d.nvlinkP2pPeers = std::move(p2p);
  return d;
}

std::vector<NvmlLink> linksTo(const char* bus, int n, int type = 0) {
  std::vector<NvmlLink> v;
  for (int i = 0; i < n; ++i) {
    NvmlLink l;
    l.link = i;
    if (bus) {
      l.remoteKnown = true;
      l.remote = A(bus);
    }
    l.remoteType = type;
    v.push_back(l);
  }
  return v;
}

Topology twoGpus(const char* a, const char* b, const NvlinkResolution& r) {
  Topology t;
  t.gpus.resize(2);
  t.gpus[0].index = 0;
  t.gpus[0].address = A(a);
  t.gpus[1].index = 1;
  t.gpus[1].address = A(b);
  t.gpus[0].nvlinks = r.edges[0];
  t.gpus[1].nvlinks = r.edges[1];
  return t;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(nvml_resolve)

BOOST_AUTO_TEST_CASE(bus_id_spellings_normalize) {
  BOOST_TEST(sameBusId("0000:00:06.0", "00000000:00:06.0"));
  BOOST_TEST(sameBusId("00:06.0", "00000000:00:06.0"));
  BOOST_TEST(sameBusId("0000:1A:00.0", "00000000:1a:00.0"));
  BOOST_TEST(!sameBusId("0000:00:06.0", "0000:00:07.0"));
  BOOST_TEST(!sameBusId("0001:00:06.0", "00000000:00:06.0"));
  BOOST_TEST(!sameBusId("garbage", "garbage"));
  BOOST_TEST(formatBusId(A("00000000:00:06.0")) == "0000:00:06.0");
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  BOOST_TEST(findAddress(gpus, A("00000000:00:07.0")) == 1);
  BOOST_TEST(findAddress(gpus, A("00000000:00:08.0")) == -1);
}

BOOST_AUTO_TEST_CASE(hidden_far_end_spellings) {
  BOOST_TEST(isHiddenNvlinkPeer("FFFFFFFF:FF:FF.0"));  // NVML in a VM guest
  BOOST_TEST(isHiddenNvlinkPeer("fffffff:ffff:ff"));   // NCCL's spelling in its XML
  BOOST_TEST(isHiddenNvlinkPeer(kHiddenNvlinkPeer));
  BOOST_TEST(!isHiddenNvlinkPeer("0000:00:06.0"));
  BOOST_TEST(!isHiddenNvlinkPeer("ffffffff:ff:1f.7"));
  BOOST_TEST(!isHiddenNvlinkPeer(""));
  BOOST_TEST(!parseBusId("FFFFFFFF:FF:FF.0"));  // why the old code dropped every link
}

BOOST_AUTO_TEST_CASE(two_h200_vm_hidden_nvswitch_gives_nv18) {
  // What NVML 580 reports on the 2xH200 VM: 18 active links per GPU, far end "FFFFFFFF:FF:FF.0",
  // remote type 2 (NVSwitch), P2P over NVLink OK both ways.
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  auto hidden = [] {
    std::vector<NvmlLink> v(18);
    for (int i = 0; i < 18; ++i) {
      v[i].link = i;
      v[i].hidden = true;
      v[i].remoteType = 2;
    }
    return v;
  };
  std::vector<NvmlDevice> devs{dev("00000000:00:06.0", hidden(), {1}), dev("00000000:00:07.0", hidden(), {0})};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.notes.empty());
  BOOST_TEST_REQUIRE(r.edges[0].size() == 1u);
  BOOST_TEST(r.edges[0][0].toSwitch);
  BOOST_TEST(r.edges[0][0].target == kHiddenNvlinkPeer);
  BOOST_TEST(r.edges[0][0].count == 18);
  Topology t = twoGpus("0000:00:06.0", "0000:00:07.0", r);
  BOOST_TEST(t.nvlinkBetween(0, 1) == 18);
  BOOST_TEST(t.nvlinkCount(1) == 18);
}

BOOST_AUTO_TEST_CASE(two_h200_nv18_with_8_digit_nvml_domains) {
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:00:06.0", linksTo("00000000:00:07.0", 18)),
                               dev("00000000:00:07.0", linksTo("00000000:00:06.0", 18))};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.notes.empty());
  BOOST_TEST(r.nvmlOf[0] == 0);
  BOOST_TEST(r.nvmlOf[1] == 1);
  BOOST_TEST_REQUIRE(r.edges[0].size() == 1u);
  BOOST_TEST(r.edges[0][0].target == "0000:00:07.0");
  BOOST_TEST(r.edges[0][0].count == 18);
  BOOST_TEST(!r.edges[0][0].toSwitch);
  Topology t = twoGpus("0000:00:06.0", "0000:00:07.0", r);
  BOOST_TEST(t.nvlinkBetween(0, 1) == 18);
  BOOST_TEST(t.nvlinkCount(0) == 18);
}

BOOST_AUTO_TEST_CASE(nvml_order_differs_from_hwloc_order) {
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:00:07.0", linksTo("00000000:00:06.0", 18)),
                               dev("00000000:00:06.0", linksTo("00000000:00:07.0", 18))};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.nvmlOf[0] == 1);
  BOOST_TEST(r.nvmlOf[1] == 0);
  BOOST_TEST(twoGpus("0000:00:06.0", "0000:00:07.0", r).nvlinkBetween(0, 1) == 18);
}

BOOST_AUTO_TEST_CASE(vm_with_host_bus_ids_pairs_by_order) {
  // NVML reports host bus ids (18:00.0, 2a:00.0), hwloc the guest's (00:06.0, 00:07.0).
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:18:00.0", linksTo("00000000:2a:00.0", 18)),
                               dev("00000000:2a:00.0", linksTo("00000000:18:00.0", 18))};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.notes.size() == 1u);
  Topology t = twoGpus("0000:00:06.0", "0000:00:07.0", r);
  BOOST_TEST(t.nvlinkBetween(0, 1) == 18);
  BOOST_TEST(!r.edges[0][0].toSwitch);
}

BOOST_AUTO_TEST_CASE(far_end_unreported_uses_the_single_p2p_peer) {
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:00:06.0", linksTo(nullptr, 18), {1}),
                               dev("00000000:00:07.0", linksTo(nullptr, 18), {0})};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.edges[0].size() == 1u);
  BOOST_TEST(r.edges[0][0].target == "0000:00:07.0");
  BOOST_TEST(twoGpus("0000:00:06.0", "0000:00:07.0", r).nvlinkBetween(0, 1) == 18);
  BOOST_TEST(!r.notes.empty());
}

BOOST_AUTO_TEST_CASE(nvswitch_links_stay_switch_links) {
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:00:06.0", linksTo("00000008:00:00.0", 18, 2)),
                               dev("00000000:00:07.0", linksTo("00000008:00:00.0", 18, 2))};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.edges[0][0].toSwitch);
  BOOST_TEST(r.edges[0][0].target == "0008:00:00.0");
  BOOST_TEST(twoGpus("0000:00:06.0", "0000:00:07.0", r).nvlinkBetween(0, 1) == 18);
}

BOOST_AUTO_TEST_CASE(no_active_links_means_no_edges) {
  std::vector<PciAddress> gpus{A("0000:00:06.0"), A("0000:00:07.0")};
  std::vector<NvmlDevice> devs{dev("00000000:00:06.0", {}), dev("00000000:00:07.0", {})};
  auto r = resolveNvlinks(gpus, devs);
  BOOST_TEST(r.edges[0].empty());
  BOOST_TEST(r.notes.empty());
}

BOOST_AUTO_TEST_SUITE_END()
