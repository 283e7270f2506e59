// epx-topo on generated NCCL topologies of every size up to the device limit: each run, every
// output mode included, stays under 2 s, and a larger file is refused at once with exit 2 and one
// line naming the limit. Time is the child's CPU time (user + system), so a busy
// CI machine does not fail the test; the generated files live only in the build tree.
#define BOOST_TEST_MODULE epx_topo_scale
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "epx/topology/load.h"
#include "generate.h"

namespace {

constexpr double kTimeLimitS = 2.0;  // every run, for files up to the limit
constexpr int kLimit = static_cast<int>(epx::topo::kMaxTopologyDevices);

struct Run {
  int code = -1;
  double cpuS = 0;
  std::string out, err;  // out: its first 4 KiB (the outputs at the limit are large)
};

std::string tmpPath(const std::string& tag) {
  return std::string(EPX_TOPO_TEST_TMP) + "/scale-" + std::to_string(::getpid()) + "-" + tag;
}

std::string head(const std::string& path, size_t bytes) {
  std::ifstream f(path, std::ios::binary);
  std::string s(bytes, '\0');
  f.read(s.data(), static_cast<std::streamsize>(bytes));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

/// Runs epx-topo with `args`, stdout and stderr to files; measures the child's CPU time.
Run run(const std::vector<std::string>& args) {
  const std::string out = tmpPath("out"), err = tmpPath("err");
  pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(127);
    ::setenv("EPX_TOPO_NO_NVML", "1", 1);
    std::vector<char*> argv{const_cast<char*>(EPX_TOPO_BIN)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(EPX_TOPO_BIN, argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  BOOST_TEST_REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.cpuS = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  r.out = head(out, 4096);
  r.err = head(err, 4096);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

/// The run with the least CPU time of up to kTries: on a loaded 2-core CI machine (ctest -j2 beside
/// the fuzzer) one run's CPU time can double (caches, frequency), which is noise, not the code.
constexpr int kTries = 3;
Run bestRun(const std::vector<std::string>& args) {
  Run best = run(args);
  for (int i = 1; i < kTries && best.cpuS >= kTimeLimitS; ++i) {
    Run r = run(args);
    if (r.cpuS < best.cpuS) best = r;
  }
  return best;
}

/// Writes a generated topology to the build tree; removed when the guard goes.
struct GeneratedFile {
  std::string path;
  GeneratedFile(int gpus, int nics, bool nvswitch = true) : path(tmpPath(std::to_string(gpus) + "x" + std::to_string(nics) + ".xml")) {
    std::ofstream(path) << epx::topo::test::generatedNcclXml(gpus, nics, nvswitch);
  }
  ~GeneratedFile() { std::remove(path.c_str()); }
};

std::string counts(int gpus, int nics) {
  return std::to_string(gpus) + " GPU, " + std::to_string(nics) + " RDMA NIC port(s)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_output_mode_at_the_limit_is_under_2s) {
  // GPUs only (every pair NVLinked: the largest matrix and peer lists), a GPU/NIC split (the rail
  // assignment's largest problem), all GPUs sharing one NIC (the most ties in the assignment), and
  // NICs only.
  for (auto [gpus, nics] : {std::pair{kLimit, 0}, std::pair{kLimit / 2, kLimit / 2}, std::pair{kLimit - 1, 1},
                            std::pair{0, kLimit}}) {
    GeneratedFile f(gpus, nics);
    const std::string exported = tmpPath("export.xml");
    for (const std::vector<std::string>& mode : std::vector<std::vector<std::string>>{
             {}, {"--json"}, {"--matrix"}, {"--export-nccl-topo", exported}}) {
      std::vector<std::string> args = mode;
      args.push_back("--nccl-xml");
      args.push_back(f.path);
      std::string what = counts(gpus, nics) + (mode.empty() ? "" : " " + mode[0]);
      BOOST_TEST_CONTEXT(what) {
        Run r = bestRun(args);
        BOOST_TEST(r.code == 0, r.err);
        BOOST_TEST(r.cpuS < kTimeLimitS);
        BOOST_TEST_MESSAGE(what << ": " << r.cpuS << " s CPU");
        if (mode.empty()) BOOST_TEST(r.out.find(counts(gpus, nics)) != std::string::npos, r.out.substr(0, 200));
      }
    }
    std::remove(exported.c_str());
  }
}

BOOST_AUTO_TEST_CASE(larger_files_are_refused_fast_with_exit_2) {
  // One device over the limit, the new-user files (2,000 GPUs + 2,000 NICs ran over 300 s, 20,000
  // GPUs 265 s), and a file over the XML element limit (30,000 GPUs with an NVLink each).
  struct Case { int gpus, nics; bool nvswitch; std::string says; };
  const std::string devices = "more than epx's limit of " + std::to_string(kLimit) + " devices per topology";
  for (const Case& c : {Case{kLimit / 2 + 1, kLimit / 2, true, devices}, Case{2000, 2000, true, devices},
                        Case{20000, 0, false, devices}, Case{30000, 0, true, "more than 65536 XML elements"}}) {
    GeneratedFile f(c.gpus, c.nics, c.nvswitch);
    BOOST_TEST_CONTEXT(counts(c.gpus, c.nics)) {
      Run r = bestRun({"--nccl-xml", f.path});
      BOOST_TEST(r.code == 2);
      BOOST_TEST(r.cpuS < kTimeLimitS);
      BOOST_TEST(r.out.empty());
      BOOST_TEST(r.err.rfind("epx-topo: ", 0) == 0u, r.err);
      BOOST_TEST(r.err.find('\n') == r.err.size() - 1, r.err);  // one line
      BOOST_TEST(r.err.find(c.says) != std::string::npos, r.err);
      BOOST_TEST_MESSAGE(counts(c.gpus, c.nics) << ": refused in " << r.cpuS << " s CPU");
    }
  }
}
