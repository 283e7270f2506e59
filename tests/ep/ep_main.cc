// Entry point of epx_ep_tests (GPU suites, CTest label "gpu"). Boost.Test header-only (the GPU
// machine has no Boost installed). Without a GPU the binary prints "SKIPPED" and exits 77, which
// CTest reports as skipped; the host_api suite needs no GPU and runs anywhere.
// Ranks: one per local GPU in this process (1 GPU = a 1-rank EP group, all experts local), or one
// rank per process when EPX_MP_SIZE / EPX_MP_RANK / EPX_MP_ID_FILE are set (scripts/fake-nodes.sh).
#define BOOST_TEST_MODULE epx_ep_tests
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/included/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ep_harness.h"
#include "epx/testing/stack_dump.h"

namespace {
// Comms and groups live for the whole module; torn down after the last test.
struct GpuTeardown {
  GpuTeardown() = default;
  ~GpuTeardown() { epx::test::shutdownGpus(); }
};
}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(GpuTeardown);

int main(int argc, char** argv) {
  epx::testing::installStackDump();  // SIGUSR1: main-thread stack to stderr (fake-nodes.sh at its time limit)
  // Only suites that need no GPU selected (e.g. --run_test=host_api): host_api and the samplers of
  // the randomized suites.
  auto noGpuSuite = [](const std::string& s) {
    return s == "host_api" || s == "random_sampler" || s == "random_bucket_sampler" || s == "random_pp_sampler" ||
           s == "random_ll_sampler" || s == "random_engram_sampler";
  };
  bool hostOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const bool next = (a == "-t" || a == "--run_test") && i + 1 < argc;
    if ((a.rfind("--run_test=", 0) == 0 && noGpuSuite(a.substr(11))) || (a.rfind("-t=", 0) == 0 && noGpuSuite(a.substr(3))) ||
        (next && noGpuSuite(argv[i + 1])))
      hostOnly = true;
    if (a.rfind("--list_content", 0) == 0 || a == "--help" || a == "-?") hostOnly = true;  // no test runs
  }
  if (!hostOnly) {
    const int nDev = epx::testing::localGpuCount();
    if (nDev < 1 || (!epx::testing::multiProcessRequested() && epx::test::wantedRanks() < 1)) {
      std::printf("SKIPPED: needs >= 1 GPU (found %d, EPX_TEST_GPUS=%s); the epx GPU EP tests did not run\n", nDev,
                  std::getenv("EPX_TEST_GPUS") ? std::getenv("EPX_TEST_GPUS") : "unset");
      std::fflush(stdout);
      return 77;
    }
    try {
      const int n = epx::test::nRanks();  // creates the communicators
      const uint64_t seed = epx::test::baseSeed();
      auto& mg = epx::test::gpus();
      if (mg.multiProcess()) {
        const int r = mg.localRanks()[0];
        std::printf("epx_ep_tests: rank %d of %d (one process per rank), GPU %d of %d, seed 0x%llx%s, SM cap %d\n", r, n,
                    mg.device(r), nDev, (unsigned long long)seed, epx::test::quick() ? ", quick" : "", epx::test::smCap());
      } else {
        std::printf("epx_ep_tests: %d rank(s) on %d GPU(s) in this process, seed 0x%llx (set EPX_TEST_SEED to repeat)%s\n",
                    n, n, (unsigned long long)seed, epx::test::quick() ? ", quick" : "");
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "epx_ep_tests: cannot set up the ranks: %s\n", e.what());
      return 1;
    }
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
