// --export-nccl-topo content: the written file reloads with the same devices, paths and rails,
// and NIC dev numbers follow rail order.
#include <pugixml.hpp>

#include "epx/topology/nccl_export.h"
#include "fixtures.h"

using namespace epx::topo;
using namespace epx::topo::test;

BOOST_AUTO_TEST_SUITE(nccl_export)

BOOST_AUTO_TEST_CASE(round_trip_keeps_devices_paths_and_rails) {
  for (const char* f : {"ibmcloud_gx3d-h100x8_nccl-topo.xml", "aws-ofi-nccl_p4d-24xl-topo.xml", "mpibind_g4dnmetal.xml"}) {
    BOOST_TEST_CONTEXT(f) {
      std::string name = f;
      Topology t = name.rfind("mpibind", 0) == 0 ? loadHwloc(f) : loadNccl(f);
      RailPlan p = assignRails(t);
      std::string xml = renderNcclTopo(t, p);
      auto back = loadNcclXmlBuffer(xml, "export");
      BOOST_TEST_REQUIRE(back.ok(), back.error);
      const Topology& u = back.value;
      BOOST_TEST(u.gpus.size() == t.gpus.size());
      BOOST_TEST(u.nics.size() == t.nics.size());
      for (size_t g = 0; g < t.gpus.size(); ++g) {
        BOOST_TEST(formatBusId(u.gpus[g].address) == formatBusId(t.gpus[g].address));
        BOOST_TEST(u.nvlinkCount(g) == t.nvlinkCount(g));
        for (size_t n = 0; n < t.nics.size(); ++n) {
          PathType before = gpuNicPath(t, g, n), after = gpuNicPath(u, g, n);
          // hwloc's NODE has no NCCL element: it comes back as NCCL's PHB.
          BOOST_TEST((after == before || (before == PathType::NODE && after == PathType::PHB)));
        }
      }
      RailPlan q = assignRails(u);
      for (size_t g = 0; g < t.gpus.size(); ++g) BOOST_TEST(railNicNames(u, q, g) == railNicNames(t, p, g));
    }
  }
}

BOOST_AUTO_TEST_CASE(net_dev_numbers_follow_rails) {
  Topology t = loadNccl("ibmcloud_gx3d-h100x8_nccl-topo.xml");  // GPU0 <-> mlx5_7
  RailPlan p = assignRails(t);
  pugi::xml_document doc;
  std::string xml = renderNcclTopo(t, p);
  BOOST_TEST_REQUIRE(static_cast<bool>(doc.load_string(xml.c_str())));
  int seen = 0;
  for (auto net : doc.select_nodes("//net")) {
    std::string name = net.node().attribute("name").as_string();
    int dev = net.node().attribute("dev").as_int();
    BOOST_TEST(name == "mlx5_" + std::to_string(7 - dev));  // rail i = GPU i = mlx5_(7-i)
    ++seen;
  }
  BOOST_TEST(seen == 8);
  BOOST_TEST(doc.document_element().attribute("version").as_int() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
