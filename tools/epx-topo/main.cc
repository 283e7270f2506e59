// epx-topo: show the machine as epx sees it — GPUs, RDMA NICs, PCIe paths, NVLink, rails, SL
// policy and the EP SM/QP estimate — from live discovery, hwloc XML, NCCL topology XML, or a sysfs
// snapshot (HWLOC_FSROOT). Exit status: 0 success, 1 bad input, 2 bad usage (an option out of range,
// or a topology with more devices than kMaxTopologyDevices).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "epx/topology/estimate.h"
#include "epx/topology/load.h"
#include "epx/topology/nccl_export.h"
#include "report.h"

namespace {

constexpr int kExitBadInput = 1;
constexpr int kExitUsage = 2;

int fail(const std::string& msg, int code) {
  std::fprintf(stderr, "epx-topo: %s\n", msg.c_str());
  return code;
}

// The integer options' values as typed, checked before CLI11 parses them: an empty value (an unset
// shell variable) would otherwise leave an optional option unset without a word, and CLI11's own
// messages for "1.5" or "" do not say what was expected. "" when every value is a decimal integer.
std::string badIntegerValue(int argc, char** argv) {
  static const char* const kIntegerOptions[] = {"--group-sl", "--group-tc", "--num-sms", "--experts", "--topk", "--nodes"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const char* name : kIntegerOptions) {
      const std::string n = name;
      std::string value;
      if (arg == n && i + 1 < argc)
        value = argv[i + 1];
      else if (arg.rfind(n + "=", 0) == 0)
        value = arg.substr(n.size() + 1);
      else
        continue;
      const size_t digits = value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0);
      const bool integer = !value.empty() && value != "-" && digits == std::string::npos && value.size() <= 9;
      if (!integer) return n + " '" + value + "': needs a decimal integer";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace epx::topo;
  CLI::App app{"epx-topo: GPUs, RDMA NICs, PCIe paths, NVLink, rails, SL policy and EP SM/QP estimate"};
  std::string hwlocXml, ncclXml, exportPath;
  bool json = false, treeOnly = false, matrixOnly = false;
  std::optional<int> groupSl, groupTc;
  cli::EstimateInputs est;
  auto* hx = app.add_option("--hwloc-xml", hwlocXml, "read an hwloc 2.x XML file instead of the live machine");
  auto* nx = app.add_option("--nccl-xml", ncclXml, "read an NCCL topology XML file (NCCL_TOPO_FILE format)");
  hx->excludes(nx);
  app.add_flag("--json", json, "print JSON (schema in docs/topology.md)");
  app.add_flag("--tree", treeOnly, "print only the tree");
  app.add_flag("--matrix", matrixOnly, "print only the GPU x GPU / GPU x NIC matrix");
  auto* ex = app.add_option("--export-nccl-topo", exportPath, "write an NCCL topology XML reflecting the rails to FILE");
  app.add_option("--group-sl", groupSl, "a group's own InfiniBand SL (0..15), as libepx passes it");
  app.add_option("--group-tc", groupTc, "a group's own RoCE traffic class (0..255)");
  app.add_option("--num-sms", est.numSMs, "SMs per GPU for the estimate cap (default 132, H100/H200 SXM)")
      ->check(CLI::Range(1, 1024));
  // The group shape ranges are libepx's (ep.h), so the estimate is for a group libepx can create.
  const std::string inLibepx = " as in libepx)";
  auto* expertsOpt = app.add_option("--experts", est.experts,
                                    "experts for the estimate (default 256, a multiple of the EP size, at most " +
                                        std::to_string(kEpMaxExperts) + inLibepx)
                         ->check(CLI::Range(1, kEpMaxExperts));
  app.add_option("--topk", est.topk, "top-k for the estimate (default 8, at most " + std::to_string(kEpMaxTopk) + inLibepx)
      ->check(CLI::Range(1, kEpMaxTopk));
  app.add_option("--nodes", est.nodes, "nodes in the EP group (default: 2 when the rails' NIC rate is known, else 1; NVLink ranks x nodes at most " +
                                           std::to_string(kEpMaxRanks) + inLibepx)
      ->check(CLI::Range(1, kEpMaxRanks));
  app.set_version_flag("--version", "epx-topo 0.1.0");
  app.allow_extras();  // refused below, named in the order given (CLI11's own message reverses them)
  if (const std::string bad = badIntegerValue(argc, argv); !bad.empty()) return fail(bad, kExitUsage);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), kExitUsage);
  }
  if (const std::vector<std::string> extra = app.remaining(); !extra.empty()) {
    std::string list;
    for (const std::string& a : extra) list += (list.empty() ? "" : " ") + a;
    return fail("unexpected argument(s): " + list + " (epx-topo takes options only; --help lists them)", kExitUsage);
  }
  if (est.topk > est.experts)
    return fail("--topk " + std::to_string(est.topk) + " must not exceed --experts " + std::to_string(est.experts),
                kExitUsage);
  // Checked here, not by resolveSlPolicy (exit 1): a bad option value is bad usage.
  if (groupSl && (*groupSl < 0 || *groupSl > kMaxIbSl))
    return fail("--group-sl " + std::to_string(*groupSl) + ": an InfiniBand SL is 0.." + std::to_string(kMaxIbSl),
                kExitUsage);
  if (groupTc && (*groupTc < 0 || *groupTc > kMaxTrafficClass))
    return fail("--group-tc " + std::to_string(*groupTc) + ": a RoCE traffic class is 0.." +
                    std::to_string(kMaxTrafficClass), kExitUsage);
  if (json && (treeOnly || matrixOnly)) return fail("--json cannot be combined with --tree or --matrix", kExitUsage);

  // An empty file name is a mistake (e.g. an unset shell variable), not a request for live discovery.
  if ((hx->count() && hwlocXml.empty()) || (nx->count() && ncclXml.empty()))
    return fail("--hwloc-xml / --nccl-xml need a file name", kExitUsage);
  if (ex->count() && exportPath.empty()) return fail("--export-nccl-topo needs a file name", kExitUsage);
  Result<Topology> loaded = hx->count() ? loadHwlocXml(hwlocXml) : nx->count() ? loadNcclXml(ncclXml) : loadLive();
  // A topology beyond kMaxTopologyDevices is refused like an out-of-range option.
  if (!loaded.ok()) return fail(loaded.error, loaded.overLimit ? kExitUsage : kExitBadInput);

  SlInputs slIn;
  slIn.groupSl = groupSl;
  slIn.groupTc = groupTc;
  Result<SlPolicy> sl = resolveSlPolicy(slIn);
  if (!sl.ok()) return fail(sl.error, kExitBadInput);

  cli::Report report = cli::buildReport(std::move(loaded.value), sl.value, est);
  if (est.nodes > 0 && report.shape.numScaleupRanks * est.nodes > kEpMaxRanks)
    return fail("--nodes " + std::to_string(est.nodes) + " with " + std::to_string(report.shape.numScaleupRanks) +
                    " NVLink ranks per node is " + std::to_string(report.shape.numScaleupRanks * est.nodes) +
                    " ranks; libepx runs at most " + std::to_string(kEpMaxRanks), kExitUsage);
  // libepx needs numExperts a multiple of the EP size; the default 256 only gets a note (printDetails).
  if (const int ranks = report.shape.numScaleupRanks * report.shape.numScaleoutRanks;
      report.estimated && expertsOpt->count() && est.experts % ranks != 0)
    return fail("--experts " + std::to_string(est.experts) + " is not a multiple of the EP size " + std::to_string(ranks) +
                    " (" + std::to_string(report.shape.numScaleupRanks) + " NVLink ranks x " +
                    std::to_string(report.shape.numScaleoutRanks) +
                    (report.shape.numScaleoutRanks == 1 ? " node), as libepx needs" : " nodes), as libepx needs"), kExitUsage);

  if (!exportPath.empty()) {
    std::string err = writeNcclTopo(report.topo, report.rails, exportPath);
    if (!err.empty()) return fail(err, kExitBadInput);
    if (report.topo.gpus.empty() && report.topo.nics.empty())
      std::fprintf(stderr, "epx-topo: warning: %s: the topology has no GPU and no RDMA NIC; the export lists only CPUs\n",
                   exportPath.c_str());
  }

  std::string out;
  if (json) {
    out = cli::toJson(report);
  } else if (treeOnly || matrixOnly) {
    if (treeOnly) cli::printTree(report, out);
    if (matrixOnly) cli::printMatrix(report, out);
  } else {
    cli::printTree(report, out);
    cli::printMatrix(report, out);
    cli::printDetails(report, out);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : kExitBadInput;
}
