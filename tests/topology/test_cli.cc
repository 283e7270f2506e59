// epx-topo end to end: every flag, exit codes (0 ok, 1 bad input, 2 bad usage), one-line errors,
// and JSON that parses and matches tools/epx-topo/epx-topo.schema.json.
#define BOOST_TEST_MODULE epx_topo_cli
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json_schema.h"

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tmpPath(const std::string& tag) {
  return std::string(EPX_TOPO_TEST_TMP) + "/cli-" + std::to_string(::getpid()) + "-" + tag;
}

/// Runs epx-topo with `args` (shell words) under extra environment `env` ("A=1 B=2").
Run run(const std::string& args, const std::string& env = "") {
  std::string out = tmpPath("out"), err = tmpPath("err");
  std::string cmd = "env EPX_TOPO_NO_NVML=1 " + env + " timeout 60 " + EPX_TOPO_BIN + " " + args + " >" + out + " 2>" + err;
  int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

std::string fx(const std::string& f) { return std::string(EPX_TOPO_FIXTURE_DIR) + "/" + f; }

nlohmann::json jsonOf(const Run& r) {
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails the test) when not JSON
  static const nlohmann::json schema = nlohmann::json::parse(slurp(EPX_TOPO_SCHEMA));
  std::string e = epx::topo::test::validate(j, schema);
  BOOST_TEST(e.empty(), e);
  return j;
}

bool oneLine(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

BOOST_AUTO_TEST_CASE(nccl_xml_text_has_tree_matrix_rails_sl_estimate) {
  Run r = run("--nccl-xml " + fx("ibmcloud_gx3d-h100x8_nccl-topo.xml"));
  BOOST_TEST(r.code == 0);
  for (const char* s : {"PCIe switch 0000:a1:00.0", "GPU0", "NV18", "PIX", "mlx5_7", "Rails (one-per-gpu)",
                        "SL policy", "RoCE TC", "EP resource estimate", "SMs "})
    BOOST_TEST(r.out.find(s) != std::string::npos, "missing " << s);
}

BOOST_AUTO_TEST_CASE(hwloc_xml_json_matches_schema_and_file) {
  auto j = jsonOf(run("--json --hwloc-xml " + fx("mpibind_cts1-pascal.xml")));
  BOOST_TEST(j["source"]["kind"] == "hwloc-xml");
  BOOST_TEST(j["gpus"].size() == 2u);
  BOOST_TEST(j["nics"].size() == 1u);
  BOOST_TEST(j["numa"].size() == 2u);
  BOOST_TEST(j["nics"][0]["name"] == "mlx5_0");
  BOOST_TEST(j["nics"][0]["sl_field"] == "sl");
  BOOST_TEST(j["matrix"]["gpu_nic"][0][0] == "PIX");
  BOOST_TEST(j["rails"]["count"] == 1);
}

BOOST_AUTO_TEST_CASE(json_for_every_fixture_matches_schema) {
  for (const char* f : {"ibmcloud_gx3d-h100x8_nccl-topo.xml", "azhpc_ndv5-topo.xml", "azhpc_ndv2-topo.xml",
                        "azhpc_ncv4-topo.xml", "aws-ofi-nccl_p4d-24xl-topo.xml", "aws-ofi-nccl_p5.48xl-topo.xml",
                        "aws-ofi-nccl_g5.48xl-topo.xml"}) {
    BOOST_TEST_CONTEXT(f) {
      auto j = jsonOf(run(std::string("--json --nccl-xml ") + fx(f)));
      BOOST_TEST(j["counts"]["gpus"] == j["gpus"].size());
    }
  }
  auto g4 = jsonOf(run("--json --hwloc-xml " + fx("mpibind_g4dnmetal.xml")));
  BOOST_TEST(g4["nics"][0]["transport"] == "EFA");
  BOOST_TEST(g4["nics"][0]["sl_field"] == "none");
}

BOOST_AUTO_TEST_CASE(nics_of_unknown_rate_are_said_and_left_out) {
  // PCI-only file: three NICs with a rate assumed from their ids, one (a VF) with none. GPU3 reaches
  // only that one: the estimate sizes for the other GPUs' smallest share (200 Gb/s) and says so,
  // instead of letting one unknown port zero the whole estimate.
  Run p = run("--nccl-xml " + std::string(EPX_TOPO_TEST_DATA) + "/pci-only-ids-nccl.xml");
  BOOST_TEST(p.code == 0);
  BOOST_TEST(p.out.find("RDMA 200.0 Gb/s per GPU (ASSUMED) -> 25.0 GB/s") != std::string::npos, p.out);
  BOOST_TEST(p.out.find("QPs 0") == std::string::npos, p.out);
  BOOST_TEST(p.out.find("warning: 1 GPU(s) (GPU3) reach only NICs of unknown rate (pci:0104:00:00.0): the estimate "
                        "leaves them out and sizes for the others\n") != std::string::npos, p.out);
  // hwloc file: one GPU, no NVLink, an active InfiniBand port without a rate. Not "NVLink-only EP".
  Run h = run("--hwloc-xml " + fx("mpibind_cts1-pascal.xml"));
  BOOST_TEST(h.code == 0);
  BOOST_TEST(h.out.find("NVLink-only") == std::string::npos, h.out);
  BOOST_TEST(h.out.find("QPs 0 (RDMA NICs of unknown rate: see the warnings)") != std::string::npos, h.out);
  BOOST_TEST(h.out.find("reach only NICs of unknown rate (mlx5_0): the estimate counts no RDMA") != std::string::npos,
             h.out);
}

BOOST_AUTO_TEST_CASE(live_from_sysfs_snapshot) {
  auto j = jsonOf(run("--json", std::string("HWLOC_FSROOT=") + EPX_TOPO_SYSFS_ROOT));
  BOOST_TEST(j["source"]["kind"] == "live");
  BOOST_TEST(j["gpus"].size() == 0u);
  BOOST_TEST(j["nics"][0]["name"] == "mlx4_0");
  BOOST_TEST(j["nics"][0]["speed_gbps"] == 56.0);
  BOOST_TEST(j["nics"][0]["link_layer"] == "InfiniBand");
  // No GPU: no EP to size, and not "NVLink-only EP".
  BOOST_TEST(j["estimate"].is_null());
  Run t = run("", std::string("HWLOC_FSROOT=") + EPX_TOPO_SYSFS_ROOT);
  BOOST_TEST(t.code == 0);
  BOOST_TEST(t.out.find("none: no GPU, so no EP to size") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("NVLink-only") == std::string::npos, t.out);
  BOOST_TEST(t.out.find("SMs ") == std::string::npos, t.out);
}

BOOST_AUTO_TEST_CASE(hwloc_fsroot_that_is_not_a_sysfs_tree_is_an_error) {
  // hwloc would silently fall back to an empty machine.
  const std::string file = fx("azhpc_ndv2-topo.xml");
  for (const auto& [root, says] : std::vector<std::pair<std::string, std::string>>{
           {"/nonexistent", "HWLOC_FSROOT=/nonexistent: No such file or directory"},
           {EPX_TOPO_FIXTURE_DIR, "no sys/ directory"},
           {file, "not a directory"}}) {
    Run r = run("", "HWLOC_FSROOT=" + root);
    BOOST_TEST_CONTEXT(root) {
      BOOST_TEST(r.code == 1);
      BOOST_TEST(oneLine(r.err), r.err);
      BOOST_TEST(r.err.find(says) != std::string::npos, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(exporting_an_empty_topology_warns) {
  std::string path = tmpPath("empty-export.xml");
  Run r = run("--export-nccl-topo " + path, std::string("HWLOC_FSROOT=") + EPX_TOPO_SYSFS_ROOT);
  BOOST_TEST(r.code == 0);  // the snapshot has an RDMA NIC: no warning
  BOOST_TEST(r.err.empty(), r.err);
  std::string xml = tmpPath("cpu-only.xml");
  std::ofstream(xml) << "<system version=\"1\"><cpu numaid=\"0\" affinity=\"ff\"/></system>\n";
  r = run("--nccl-xml " + xml + " --export-nccl-topo " + path);
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.err == "epx-topo: warning: " + path + ": the topology has no GPU and no RDMA NIC; the export lists only CPUs\n");
  std::remove(path.c_str());
  std::remove(xml.c_str());
}

BOOST_AUTO_TEST_CASE(tree_and_matrix_flags_select_sections) {
  Run tree = run("--tree --nccl-xml " + fx("aws-ofi-nccl_p4d-24xl-topo.xml"));
  BOOST_TEST(tree.code == 0);
  BOOST_TEST(tree.out.find("PCIe switch ffff:ff:01.0") != std::string::npos);
  BOOST_TEST(tree.out.find("Legend") == std::string::npos);
  Run m = run("--matrix --nccl-xml " + fx("aws-ofi-nccl_p4d-24xl-topo.xml"));
  BOOST_TEST(m.code == 0);
  BOOST_TEST(m.out.find("Legend") != std::string::npos);
  BOOST_TEST(m.out.find("Machine") == std::string::npos);
  // A file without GPUs (the p5 PCI dump) has no matrix rows: one line says so, no empty header.
  Run none = run("--matrix --nccl-xml " + fx("aws-ofi-nccl_p5.48xl-topo.xml"));
  BOOST_TEST(none.code == 0);
  BOOST_TEST(none.out.find("GPU matrix: no GPU (") != std::string::npos, none.out);
  BOOST_TEST(none.out.find("Legend") == std::string::npos, none.out);
  BOOST_TEST(none.out.find("NUMA\n") == std::string::npos, none.out);
}

BOOST_AUTO_TEST_CASE(export_nccl_topo_writes_a_loadable_file) {
  std::string path = tmpPath("export.xml");
  Run r = run("--export-nccl-topo " + path + " --nccl-xml " + fx("aws-ofi-nccl_p4d-24xl-topo.xml"));
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  auto j = jsonOf(run("--json --nccl-xml " + path));
  BOOST_TEST(j["gpus"].size() == 8u);
  BOOST_TEST(j["nics"].size() == 4u);
  BOOST_TEST(j["gpus"][3]["rail"] == 1);  // GPUs 2 and 3 share the second EFA
  std::remove(path.c_str());
  Run bad = run("--export-nccl-topo /nonexistent/dir/x.xml --nccl-xml " + fx("azhpc_ndv2-topo.xml"));
  BOOST_TEST(bad.code == 1);
  BOOST_TEST(oneLine(bad.err));
}

BOOST_AUTO_TEST_CASE(sl_sources_and_group_flags) {
  std::string f = " --json --nccl-xml " + fx("azhpc_ndv5-topo.xml");
  auto j = jsonOf(run(f, "NCCL_IB_SL=2"));
  BOOST_TEST(j["sl"]["sl"]["value"] == 2);
  BOOST_TEST(j["sl"]["sl"]["origin"] == "NCCL_IB_SL");
  j = jsonOf(run("--group-sl 7" + f, "NCCL_IB_SL=2 EPX_DEFAULT_SL=5"));
  BOOST_TEST(j["sl"]["sl"]["value"] == 7);
  BOOST_TEST(j["sl"]["sl"]["source"] == "group");
  j = jsonOf(run("--group-sl 7 --group-tc 96" + f, "EPX_OVERRIDE_SL=1"));
  BOOST_TEST(j["sl"]["sl"]["value"] == 1);
  BOOST_TEST(j["sl"]["sl"]["origin"] == "EPX_OVERRIDE_SL");
  BOOST_TEST(j["sl"]["tc"]["value"] == 96);
  BOOST_TEST(j["sl"]["sl_nics"].size() == 8u);  // IB NICs take the SL
  Run bad = run(f, "EPX_DEFAULT_SL=16");
  BOOST_TEST(bad.code == 1);
  BOOST_TEST(oneLine(bad.err));
  BOOST_TEST(bad.err.find("EPX_DEFAULT_SL") != std::string::npos);
  // A group value out of range is an option error (exit 2), like the other ranges.
  Run badGroup = run("--group-sl 16" + f);
  BOOST_TEST(badGroup.code == 2);
  BOOST_TEST(badGroup.err == "epx-topo: --group-sl 16: an InfiniBand SL is 0..15\n");
  Run badTc = run("--group-tc 256" + f);
  BOOST_TEST(badTc.code == 2);
  BOOST_TEST(badTc.err == "epx-topo: --group-tc 256: a RoCE traffic class is 0..255\n");
  BOOST_TEST(run("--group-sl -1" + f).code == 2);
}

BOOST_AUTO_TEST_CASE(estimate_flags) {
  std::string f = " --json --nccl-xml " + fx("ibmcloud_gx3d-h100x8_nccl-topo.xml");
  auto j = jsonOf(run(f));
  BOOST_TEST(j["estimate"]["nvlink_links"] == 18);
  BOOST_TEST(j["estimate"]["scaleup_ranks"] == 8);
  BOOST_TEST(j["estimate"]["scaleout_ranks"] == 2);  // a 200 Gb/s rail per GPU: assume 2 nodes
  BOOST_TEST(j["estimate"]["nic_gbytes_per_s"] == 25.0);
  auto capped = jsonOf(run("--num-sms 8 --experts 64 --topk 4 --nodes 4" + f));
  BOOST_TEST(capped["estimate"]["sms"].get<int>() <= 8);
  BOOST_TEST(capped["estimate"]["experts"] == 64);
  BOOST_TEST(capped["estimate"]["topk"] == 4);
  BOOST_TEST(capped["estimate"]["scaleout_ranks"] == 4);
}

BOOST_AUTO_TEST_CASE(bad_files_exit_1_with_one_line) {
  std::string trunc = tmpPath("trunc.xml");
  {
    std::string whole = slurp(fx("ibmcloud_gx3d-h100x8_nccl-topo.xml"));
    std::ofstream(trunc) << whole.substr(0, whole.size() / 2);
  }
  std::string v3 = tmpPath("v3.xml");
  std::ofstream(v3) << "<topology version=\"3.0\"><object type=\"Machine\"/></topology>\n";
  for (const std::string& args : std::vector<std::string>{
       "--nccl-xml /nonexistent.xml", "--hwloc-xml /nonexistent.xml", "--nccl-xml " + trunc, "--hwloc-xml " + v3,
        "--nccl-xml " + fx("azhpc_ncv4-graph.xml"), "--hwloc-xml " + fx("azhpc_ndv5-topo.xml"),
        "--nccl-xml /dev/null", "--nccl-xml " + std::string(EPX_TOPO_FIXTURE_DIR)}) {
    Run r = run(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.code == 1);
      BOOST_TEST(oneLine(r.err), r.err);
      BOOST_TEST(r.err.rfind("epx-topo: ", 0) == 0u);
      BOOST_TEST(r.out.empty());
    }
  }
  std::remove(trunc.c_str());
  std::remove(v3.c_str());
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
  for (const std::string& args : {"--bogus", "--nccl-xml a.xml --hwloc-xml b.xml", "--json --tree",
                                  "--num-sms 0", "--topk 300 --experts 8", "--nccl-xml", "--nccl-xml \"\"",
                                  "--hwloc-xml \"\"", "--export-nccl-topo \"\"", "--group-sl 16", "--group-tc 256"}) {
    Run r = run(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(!r.err.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(unexpected_arguments_named_in_order) {
  Run r = run("first --json second");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "epx-topo: unexpected argument(s): first second (epx-topo takes options only; --help lists them)\n");
  BOOST_TEST(r.out.empty());
  r = run("--bogus");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err.find("--bogus") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(integer_options_need_decimal_integers) {
  // An empty value (an unset shell variable) must not leave the option silently unset.
  for (const std::string& args : {"--group-sl \"\"", "--group-tc=", "--num-sms \"\"", "--experts 1.5", "--topk abc",
                                  "--nodes 0x10", "--group-sl -", "--num-sms 99999999999"}) {
    Run r = run(args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(oneLine(r.err), r.err);
      BOOST_TEST(r.err.find("needs a decimal integer") != std::string::npos, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
  BOOST_TEST(run("--group-sl -1").err == "epx-topo: --group-sl -1: an InfiniBand SL is 0..15\n");
}

BOOST_AUTO_TEST_CASE(estimate_shapes_are_libepx_shapes) {
  // ep.h: topk 1..32, numExperts <= 1024, EP size (NVLink ranks x nodes) <= 1024.
  const std::string f = " --json --nccl-xml " + fx("ibmcloud_gx3d-h100x8_nccl-topo.xml");
  BOOST_TEST(jsonOf(run("--topk 32 --experts 1024 --nodes 128" + f))["estimate"]["scaleout_ranks"] == 128);
  for (const std::string& bad : {"--topk 33", "--experts 1025", "--nodes 1025", "--nodes 129"}) {
    Run r = run(bad + f);
    BOOST_TEST_CONTEXT(bad) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(oneLine(r.err), r.err);
      BOOST_TEST(r.err.find(bad.substr(0, bad.find(' '))) != std::string::npos, r.err);
    }
  }
  Run r = run("--nodes 129" + f);  // 8 NVLink ranks x 129 nodes
  BOOST_TEST(r.err == "epx-topo: --nodes 129 with 8 NVLink ranks per node is 1032 ranks; libepx runs at most 1024\n");
  // numExperts must be a multiple of the EP size: an error for --experts, a note for the default.
  r = run("--experts 100" + f);
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err ==
             "epx-topo: --experts 100 is not a multiple of the EP size 16 (8 NVLink ranks x 2 nodes), as libepx needs\n");
  Run t = run("--nodes 3 --nccl-xml " + fx("ibmcloud_gx3d-h100x8_nccl-topo.xml"));
  BOOST_TEST(t.code == 0);
  BOOST_TEST(t.out.find("note: libepx needs the experts a multiple of the EP size (24 ranks)") != std::string::npos);
  BOOST_TEST(run("--nodes 3 --experts 96" + f).code == 0);
}

BOOST_AUTO_TEST_CASE(help_and_version) {
  Run h = run("--help");
  BOOST_TEST(h.code == 0);
  for (const char* flag : {"--hwloc-xml", "--nccl-xml", "--json", "--tree", "--matrix", "--export-nccl-topo",
                           "--group-sl", "--group-tc", "--num-sms", "--experts", "--topk", "--nodes", "--version"})
    BOOST_TEST(h.out.find(flag) != std::string::npos, "help lacks " << flag);
  Run v = run("--version");
  BOOST_TEST(v.code == 0);
  BOOST_TEST(v.out.find("epx-topo") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(two_h200_nv18_no_nic_gives_28_sms_0_qps) {
  // The 2×H200 machine as NCCL would dump it: two GPUs on one host bridge, 18 NVLinks each way.
  const std::string xml = std::string(EPX_TOPO_TEST_DATA) + "/2xh200-nv18-nccl.xml";
  auto j = jsonOf(run("--json --nccl-xml " + xml));
  BOOST_TEST(j["matrix"]["gpu_gpu"][0][1] == "NV18");
  BOOST_TEST(j["gpus"][0]["nvlinks"] == 18);
  BOOST_TEST(j["rails"]["policy"] == "none");
  BOOST_TEST(j["estimate"]["nvlink_links"] == 18);
  BOOST_TEST(j["estimate"]["scaleup_ranks"] == 2);
  BOOST_TEST(j["estimate"]["sms"] == 28);
  BOOST_TEST(j["estimate"]["qps"] == 0);
  BOOST_TEST(j["estimate"]["hybrid"].is_null());  // one node: nothing to forward
  BOOST_TEST(j["estimate"]["network_rows_per_token"] == 0.0);
  Run t = run("--nccl-xml " + xml);
  BOOST_TEST(t.out.find("SMs 28, QPs 0 (no RDMA: NVLink-only EP)") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("hybrid") == std::string::npos, t.out);
}

BOOST_AUTO_TEST_CASE(nccl_vm_dump_with_hidden_nvswitch_target_keeps_nvlinks) {
  // NCCL inside a VM writes the invisible NVSwitch as target "fffffff:ffff:ff"; the export writes
  // epx's spelling, and both read back as 18 links through a switch.
  std::string xml = tmpPath("2xh200-vm.xml"), exported = tmpPath("2xh200-vm-export.xml");
  {
    std::ofstream f(xml);
    f << "<system version=\"1\">\n"
         "  <cpu numaid=\"0\" affinity=\"ffffffff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n"
         "    <pci busid=\"0000:00:06.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
         "      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"0\"><nvlink target=\"fffffff:ffff:ff\" count=\"18\" tclass=\"0x068000\"/></gpu>\n"
         "    </pci>\n"
         "    <pci busid=\"0000:00:07.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
         "      <gpu dev=\"1\" sm=\"90\" rank=\"1\" gdr=\"0\"><nvlink target=\"fffffff:ffff:ff\" count=\"18\" tclass=\"0x068000\"/></gpu>\n"
         "    </pci>\n"
         "  </cpu>\n"
         "</system>\n";
  }
  auto j = jsonOf(run("--json --nccl-xml " + xml + " --export-nccl-topo " + exported));
  BOOST_TEST(j["matrix"]["gpu_gpu"][0][1] == "NV18");
  BOOST_TEST(j["warnings"].empty());
  BOOST_TEST(j["estimate"]["sms"] == 28);
  auto k = jsonOf(run("--json --nccl-xml " + exported));
  BOOST_TEST(k["matrix"]["gpu_gpu"][0][1] == "NV18");
  BOOST_TEST(k["warnings"].empty());
  std::remove(xml.c_str());
  std::remove(exported.c_str());
}

BOOST_AUTO_TEST_CASE(gpus_without_nvlink_say_the_sm_count_is_the_floor) {
  // The same machine with NVLink unknown: the estimate is the floor and says why.
  std::string xml = tmpPath("2xh200-nonv.xml");
  {
    std::ofstream f(xml);
    f << "<system version=\"1\">\n"
         "  <cpu numaid=\"0\" affinity=\"ffffffff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n"
         "    <pci busid=\"0000:00:06.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"0\"/></pci>\n"
         "    <pci busid=\"0000:00:07.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"1\" sm=\"90\" rank=\"1\" gdr=\"0\"/></pci>\n"
         "  </cpu>\n"
         "</system>\n";
  }
  Run t = run("--nccl-xml " + xml);
  BOOST_TEST(t.code == 0);
  BOOST_TEST(t.out.find("PHB") != std::string::npos);
  BOOST_TEST(t.out.find("SMs 4, QPs 0 (no RDMA)\n") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("the SM count is the floor") != std::string::npos);
  std::remove(xml.c_str());
}

BOOST_AUTO_TEST_CASE(pci_only_file_says_what_it_assumed) {
  // Azure ND H100 v5's NCCL_TOPO_FILE: PCI nodes only. The NIC rate is assumed (and said so), the
  // estimate is RDMA-bound instead of the 4-SM floor with "QPs 0 (no RDMA)".
  const std::string f = "--nccl-xml " + fx("azhpc_ndv5-topo.xml");
  Run t = run(f);
  BOOST_TEST(t.code == 0);
  BOOST_TEST(t.out.find("NUMA 0  cpus 0-47\n") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("  NIC    name ") != std::string::npos, t.out);  // the NIC table's header
  BOOST_TEST(t.out.find("400 Gb/s (assumed)") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("RDMA 400.0 Gb/s per GPU (ASSUMED) -> 50.0 GB/s") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("SMs 4, QPs 4 (direct)\n  SMs 12, QPs 129 (hybrid: through rail peers, then NVLink)\n"
                        "  network rows per token (uniform routing): direct 1.81, hybrid 1.00 (45 % fewer)\n") !=
                 std::string::npos,
             t.out);
  BOOST_TEST(t.out.find("QPs 0") == std::string::npos, t.out);
  BOOST_TEST(t.out.find("warning: ASSUMED NIC rate 400 Gb/s for 8 port(s)") != std::string::npos, t.out);
  BOOST_TEST(t.out.find("warning: NVLink unknown for 8 GPU(s)") != std::string::npos, t.out);
  auto j = jsonOf(run("--json " + f));
  BOOST_TEST(j["numa"][1]["cpus"] == "48-95");
  BOOST_TEST(j["numa"][1]["affinity"] == "ffffffff,ffff0000,00000000");
  BOOST_TEST(j["nics"][0]["speed_gbps"] == 400.0);
  BOOST_TEST(j["nics"][0]["speed_assumed"] == true);
  BOOST_TEST(j["assumptions"].size() == 2u);
  BOOST_TEST(j["assumptions"][0]["what"] == "nic_speed");
  BOOST_TEST(j["assumptions"][0]["gbps"] == 400.0);
  BOOST_TEST(j["assumptions"][0]["devices"].size() == 8u);
  BOOST_TEST(j["assumptions"][1]["what"] == "gpu_nvlink");
  BOOST_TEST(j["warnings"].size() == 2u);
  BOOST_TEST(j["estimate"]["sms"] == 4);
  BOOST_TEST(j["estimate"]["qps"] == 4);
  BOOST_TEST(j["estimate"]["forwarding"] == "direct");
  BOOST_TEST(j["estimate"]["hybrid"]["sms"] == 12);
  BOOST_TEST(j["estimate"]["hybrid"]["qps"] == 129);
  BOOST_TEST(j["estimate"]["network_rows_per_token"].get<double>() == 1.807, boost::test_tools::tolerance(0.001));
  BOOST_TEST(j["estimate"]["hybrid"]["network_rows_per_token"].get<double>() == 0.9965, boost::test_tools::tolerance(0.001));
  BOOST_TEST(j["estimate"]["scaleout_ranks"] == 2);
  // A dump with real rates assumes nothing.
  auto d = jsonOf(run("--json --nccl-xml " + fx("ibmcloud_gx3d-h100x8_nccl-topo.xml")));
  BOOST_TEST(d["assumptions"].empty());
  BOOST_TEST(d["nics"][0]["speed_assumed"] == false);
  // The export does not write an assumed rate as if it were read, and keeps the affinity mask.
  const std::string exported = tmpPath("ndv5-export.xml");
  BOOST_TEST(run("--tree --export-nccl-topo " + exported + " " + f).code == 0);
  const std::string x = slurp(exported);
  BOOST_TEST(x.find(" speed=") == std::string::npos, x);
  BOOST_TEST(x.find("affinity=\"00000000,0000ffff,ffffffff\"") != std::string::npos, x);
  std::remove(exported.c_str());
}
