// Bad input fails cleanly: one line, no crash, no hang. Also PCI bus id parsing.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "fixtures.h"
#include "generate.h"

using namespace epx::topo;
using namespace epx::topo::test;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
void expectOneLineError(const Result<Topology>& r, const std::string& needle) {
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.error.find('\n') == std::string::npos);
  BOOST_TEST(r.error.find(needle) != std::string::npos, r.error << " lacks " << needle);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_AUTO_TEST_CASE(missing_empty_and_directory) {
  expectOneLineError(loadNcclXml("/nonexistent/topo.xml"), "No such file");
  expectOneLineError(loadHwlocXml("/nonexistent/topo.xml"), "No such file");
  expectOneLineError(loadNcclXml(EPX_TOPO_FIXTURE_DIR), "directory");
  expectOneLineError(loadNcclXmlBuffer("", "empty"), "empty");
  expectOneLineError(loadHwlocXmlBuffer("", "empty"), "empty");
}

BOOST_AUTO_TEST_CASE(two_devices_with_one_bus_id) {
  // A GPU and a NIC at 0000:19:00.0: the model tells devices (and NVLink targets) apart by bus id.
  const std::string xml =
      "<system version=\"1\"><cpu numaid=\"0\">"
      "<pci busid=\"0000:19:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\"><gpu dev=\"0\"/></pci>"
      "<pci busid=\"0000:19:00.0\" class=\"0x020700\" vendor=\"0x15b3\"><nic><net name=\"mlx5_0\"/></nic></pci>"
      "</cpu></system>";
  expectOneLineError(loadNcclXmlBuffer(xml, "dup"), "dup: two <pci> elements with bus id 0000:19:00.0");
  // The same in an hwloc XML file (found by the fuzzer: it loaded, and its NCCL export did not load
  // back); live discovery only warns.
  const std::string hw =
      "<?xml version=\"1.0\"?>\n<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
      "complete_cpuset=\"0x1\" allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\">"
      "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" "
      "complete_nodeset=\"0x1\" local_memory=\"1000\"/><object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" "
      "complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\"/>"
      "<object type=\"Bridge\" bridge_type=\"1-1\" depth=\"0\" bridge_pci=\"0000:[00-02]\">"
      "<object type=\"PCIDev\" pci_busid=\"0000:02:00.0\" pci_type=\"0302 [10de:2335] [10de:0000] a1\" pci_link_speed=\"31.5\"/>"
      "<object type=\"PCIDev\" pci_busid=\"0000:02:00.0\" pci_type=\"0207 [15b3:1021] [15b3:0000] 00\" pci_link_speed=\"31.5\">"
      "<object type=\"OSDev\" name=\"mlx5_0\" osdev_type=\"3\"><info name=\"Port1State\" value=\"4\"/></object>"
      "</object></object></object></topology>";
  expectOneLineError(loadHwlocXmlBuffer(hw, "dup-hwloc"), "dup-hwloc: two PCI devices with bus id 0000:02:00.0");
}

BOOST_AUTO_TEST_CASE(negative_or_bad_nic_speed_warns) {
  auto nic = [](const std::string& speed) {
    return "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:19:00.0\" class=\"0x020700\">"
           "<nic><net name=\"mlx5_0\" speed=\"" + speed + "\"/></nic></pci></cpu></system>";
  };
  for (const char* bad : {"-100000", "fast"}) {
    Topology t = loadNcclText(nic(bad));
    BOOST_TEST(t.nics.at(0).speedGbps == 0.0);  // unknown, not negative
    BOOST_TEST_REQUIRE(t.warnings.size() == 1u);
    BOOST_TEST(t.warnings[0] == "NIC mlx5_0: ignored speed \"" + std::string(bad) +
                                    "\" (not a non-negative number of Mb/s); rate unknown");
  }
  Topology ok = loadNcclText(nic("400000"));
  BOOST_TEST(ok.nics.at(0).speedGbps == 400.0);
  BOOST_TEST(ok.warnings.empty());
  BOOST_TEST(loadNcclText(nic("0")).warnings.empty());  // 0: unknown, as NCCL writes it
}

BOOST_AUTO_TEST_CASE(more_devices_than_the_limit_is_over_limit) {
  // Both loaders count GPUs + RDMA NIC ports against kMaxTopologyDevices and set overLimit.
  const int gpus = static_cast<int>(kMaxTopologyDevices) + 1;
  auto nccl = loadNcclXmlBuffer(generatedNcclXml(gpus, 0, false), "big");
  expectOneLineError(nccl, "big: " + std::to_string(gpus) + " GPUs and 0 RDMA NIC ports, more than epx's limit of " +
                               std::to_string(kMaxTopologyDevices) + " devices per topology");
  BOOST_TEST(nccl.overLimit);
  // hwloc: the 2-GPU, 1-NIC fixture with GPUs added under its first host bridge.
  std::string hw = slurp(fixture("mpibind_cts1-pascal.xml"));
  const std::string anchor = "bridge_pci=\"0000:[00-0c]\">";
  const size_t at = hw.find(anchor);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  std::string extra;
  const int added = static_cast<int>(kMaxTopologyDevices) - 2;  // 2 + 1 fixture devices: one over
  for (int i = 0; i < added; ++i) {
    char obj[200];
    std::snprintf(obj, sizeof obj, "<object type=\"PCIDev\" gp_index=\"%d\" pci_busid=\"%04x:%02x:00.0\" "
                  "pci_type=\"0302 [10de:2335] [0000:0000] a1\"/>\n", 100000 + i, 1 + i / 256, i % 256);
    extra += obj;
  }
  auto big = loadHwlocXmlBuffer(hw.substr(0, at + anchor.size()) + "\n" + extra + hw.substr(at + anchor.size()), "bighw");
  expectOneLineError(big, "bighw: " + std::to_string(added + 2) + " GPUs and 1 RDMA NIC ports, more than epx's limit");
  BOOST_TEST(big.overLimit);
  // One device fewer loads.
  extra.resize(extra.rfind("<object"));
  auto fits = loadHwlocXmlBuffer(hw.substr(0, at + anchor.size()) + "\n" + extra + hw.substr(at + anchor.size()), "fits");
  BOOST_TEST_REQUIRE(fits.ok(), fits.error);
  BOOST_TEST(fits.value.gpus.size() + fits.value.nics.size() == kMaxTopologyDevices);
}

BOOST_AUTO_TEST_CASE(truncated_files) {
  std::string nccl = slurp(fixture("ibmcloud_gx3d-h100x8_nccl-topo.xml"));
  std::string hw = slurp(fixture("mpibind_cts1-pascal.xml"));
  for (double frac : {0.1, 0.5, 0.99}) {
    expectOneLineError(loadNcclXmlBuffer(nccl.substr(0, nccl.size() * frac), "cut"), "malformed");
    expectOneLineError(loadHwlocXmlBuffer(hw.substr(0, hw.size() * frac), "cut"), "malformed");
  }
}

BOOST_AUTO_TEST_CASE(wrong_versions_and_wrong_formats) {
  expectOneLineError(loadNcclXmlBuffer("<system version=\"2\"><cpu numaid=\"0\"/></system>", "v2"), "version");
  expectOneLineError(loadNcclXmlBuffer("<system><cpu numaid=\"0\"/></system>", "nov"), "version");
  expectOneLineError(loadHwlocXmlBuffer("<topology version=\"3.0\"><object type=\"Machine\"/></topology>", "v3"),
                     "version");
  expectOneLineError(loadNcclXml(fixture("mpibind_cts1-pascal.xml")), "hwloc");
  expectOneLineError(loadHwlocXml(fixture("azhpc_ndv5-topo.xml")), "NCCL");
  expectOneLineError(loadNcclXmlBuffer("<foo/>", "foo"), "not an NCCL topology");
  expectOneLineError(loadNcclXmlBuffer("<system version=\"1\"></system>", "nocpu"), "no <cpu>");
}

BOOST_AUTO_TEST_CASE(malformed_content) {
  expectOneLineError(loadNcclXmlBuffer("\x01\x02garbage<<>>", "junk"), "malformed");
  expectOneLineError(loadHwlocXmlBuffer("not xml at all", "junk"), "malformed");
  expectOneLineError(loadNcclXmlBuffer("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"zz\"/></cpu></system>", "b"),
                     "busid");
  expectOneLineError(loadNcclXmlBuffer("<system version=\"1\"><cpu numaid=\"x\"/></system>", "n"), "numaid");
  // hwloc XML that is well-formed but not a topology hwloc accepts.
  auto r = loadHwlocXmlBuffer("<topology version=\"2.0\"><object type=\"Banana\"/></topology>", "banana");
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.error.find('\n') == std::string::npos);
}

// Affinity masks outside NCCL's syntax stay as written (hwloc_bitmap_sscanf asserted on ",ff", an
// empty word: a fuzzer input). The well-formed one becomes a CPU list.
BOOST_AUTO_TEST_CASE(malformed_affinity_masks) {
  for (const std::string mask : {",0000000,000fffff", "ff,,ff", "ff,", ",", "0xff", "123456789", "fg", " ff"}) {
    const auto r = loadNcclXmlBuffer("<system version=\"1\"><cpu numaid=\"0\" affinity=\"" + mask + "\"/></system>",
                                     "mask");
    BOOST_TEST_REQUIRE(r.ok(), mask << ": " << r.error);
    BOOST_TEST_REQUIRE(r.value.numa.size() == 1u, mask);
    BOOST_TEST(r.value.numa[0].cpus == mask);
    BOOST_TEST(r.value.numa[0].affinity == mask);
  }
  const auto r = loadNcclXmlBuffer("<system version=\"1\"><cpu numaid=\"0\" affinity=\"0000ffff,ffffffff\"/></system>",
                                   "mask");
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  BOOST_TEST(r.value.numa[0].cpus == "0-47");
}

BOOST_AUTO_TEST_CASE(pci_function_out_of_range) {
  // hwloc itself takes "00.9" (found by fuzzing: the NCCL export of it could not be read back).
  std::ifstream in(fixture("mpibind_g4dnmetal.xml"));
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_REQUIRE(loadHwlocXmlBuffer(xml, "as is").ok());
  const std::string::size_type at = xml.find("pci_busid=\"");
  BOOST_REQUIRE(at != std::string::npos);
  const std::string::size_type dot = xml.find('.', at);
  BOOST_REQUIRE(dot != std::string::npos);
  xml[dot + 1] = '9';
  expectOneLineError(loadHwlocXmlBuffer(xml, "fn"), "pci_busid");
}

BOOST_AUTO_TEST_CASE(deep_nesting_is_bounded) {
  std::string open, close;
  for (int i = 0; i < 200; ++i) {
    open += "<pci busid=\"0000:10:00.0\">";
    close += "</pci>";
  }
  expectOneLineError(loadNcclXmlBuffer("<system version=\"1\"><cpu numaid=\"0\">" + open + close + "</cpu></system>", "deep"),
                     "deeper");
}

BOOST_AUTO_TEST_CASE(bus_ids) {
  auto a = parseBusId("0000:19:00.0");
  BOOST_TEST_REQUIRE(a.has_value());
  BOOST_TEST(formatBusId(*a) == "0000:19:00.0");
  auto nvml = parseBusId("00000000:AB:1F.7");  // NVML's 8-digit domain, upper case
  BOOST_TEST_REQUIRE(nvml.has_value());
  BOOST_TEST(formatBusId(*nvml) == "0000:ab:1f.7");
  BOOST_TEST(formatBusId(*parseBusId("19:00.1")) == "0000:19:00.1");
  BOOST_TEST(parseBusId("0000:19:20.0").has_value() == false);  // device > 0x1f
  BOOST_TEST(parseBusId("0000:19:00.8").has_value() == false);  // function > 7
  BOOST_TEST(parseBusId("").has_value() == false);
  BOOST_TEST(parseBusId("0000:19:00").has_value() == false);
  BOOST_TEST(parseBusId("g000:19:00.0").has_value() == false);
  BOOST_TEST(parseBusId("0000:19:00.0")->sameDevice(*parseBusId("0000:19:00.1")));
}

BOOST_AUTO_TEST_SUITE_END()
