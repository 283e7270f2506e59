// Entry point of epx_ep_tests (GPU suites, CTest label "gpu"). Boost.Test header-only (the GPU
// machine has no Boost installed). Without >= 2 GPUs the binary prints "SKIPPED" and exits 77,
// which CTest reports as skipped; the host_api suite needs no GPU and runs anywhere.
#define BOOST_TEST_MODULE epx_ep_tests
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/included/unit_test.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "ep_harness.h"

namespace {
// Comms and groups live for the whole module; torn down after the last test.
struct GpuTeardown {
  GpuTeardown() = default;
  ~GpuTeardown() { epx::test::shutdownGpus(); }
};
}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(GpuTeardown);

int main(int argc, char** argv) {
  // Only the host_api suite selected (e.g. --run_test=host_api): no GPU needed.
  bool hostOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--run_test=host_api" || a == "-t=host_api" || (a == "-t" && i + 1 < argc && std::string(argv[i + 1]) == "host_api") ||
        (a == "--run_test" && i + 1 < argc && std::string(argv[i + 1]) == "host_api"))
      hostOnly = true;
    if (a.rfind("--list_content", 0) == 0 || a == "--help" || a == "-?") hostOnly = true;  // no test runs
  }
  if (!hostOnly) {
    const int n = epx::test::wantedRanks();
    if (n < 2) {
      std::printf("SKIPPED: needs >= 2 GPUs (found %d); the epx GPU EP tests did not run\n", n);
      std::fflush(stdout);
      return 77;
    }
    std::printf("epx_ep_tests: %d GPUs, seed 0x%llx (set EPX_TEST_SEED to repeat)\n", n,
                (unsigned long long)epx::test::baseSeed());
    std::fflush(stdout);
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
