// A peer that never arrives: the device waits are bounded (timeoutMs), the host reads an error
// naming the stalled peer, nothing hangs, and the group refuses further work until recreated.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "ep_harness.h"

using namespace epx::testing;
using namespace epx::test;

namespace {

struct DeviceIds {
  int32_t* ids = nullptr;
  explicit DeviceIds(int n) { EPX_CHECK_CUDA(cudaMalloc(&ids, size_t(n) * sizeof(int32_t))); }
  ~DeviceIds() { cudaFree(ids); }
};

// Only rank 0 starts a layout; the others never arrive.
void runLonelyLayout(int mode) {
  GroupSpec gs{128, 2048, 4, 16};
  ncclEpConfig_t cfg = makeConfig(gs);
  cfg.timeoutMs = 300;
  std::vector<ncclEpGroup_t> groups(nRanks(), nullptr);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  gpus().run([&](const RankContext& c) {
    if (c.rank != 0) return;
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.layout = ncclEpLayoutDeduplicated;
    hc.mode = mode;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[0], &hc, &h));
    DeviceIds ids(64 * 4);
    std::vector<int32_t> host(64 * 4);
    for (int t = 0; t < 64; ++t)
      for (int k = 0; k < 4; ++k) host[t * 4 + k] = (t + 4 * k) % 16;
    EPX_CHECK_CUDA(cudaMemcpyAsync(ids.ids, host.data(), host.size() * 4, cudaMemcpyHostToDevice, c.stream));
    ncclEpRouting_t rt{ids.ids, ncclInt32, 64};
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclEpDispatchLayout(h, &rt, c.stream);
    const std::string lastErr = ncclEpGetLastError();
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST_MESSAGE("lonely layout (mode " << mode << ") returned " << int(r) << " after " << secs
                                              << " s: '" << lastErr << "'");
    BOOST_CHECK_LT(secs, 5.0);  // bounded by timeoutMs (0.3 s), not a hang
    ncclResult_t async = ncclSuccess;
    char msg[512] = {};
    EPX_CHECK_EP(ncclEpGroupGetAsyncError(groups[0], &async, msg, sizeof(msg)));
    BOOST_TEST_MESSAGE("async error: " << msg);
    BOOST_CHECK_EQUAL(int(async), int(ncclRemoteError));
    BOOST_CHECK(std::string(msg).find("peer rank") != std::string::npos);
    BOOST_CHECK(std::string(msg).find("peer rank 0") == std::string::npos);  // names a missing peer
    if (mode == ncclEpModeExact) {
      BOOST_CHECK_EQUAL(int(r), int(ncclRemoteError));  // exact mode waits, so the call itself fails
      BOOST_CHECK(lastErr.find("peer rank") != std::string::npos);
    } else {
      BOOST_CHECK_EQUAL(int(r), int(ncclSuccess));  // capacity mode never waits on the host
    }
    // The group refuses new work after a timeout instead of running out of step with its peers.
    BOOST_CHECK_EQUAL(int(ncclEpDispatchLayout(h, &rt, c.stream)), int(ncclRemoteError));
    BOOST_CHECK(std::string(ncclEpGetLastError()).find("destroy") != std::string::npos);
    EPX_CHECK_EP(ncclEpHandleDestroy(h));
  });
  destroyGroups(groups);
}

}  // namespace

// In multi-process mode the other ranks wait in MultiGpu::run's agreement step while rank 0 times
// out, then everyone destroys the groups together.
BOOST_AUTO_TEST_SUITE(timeout, *boost::unit_test::precondition(needsPeers))

BOOST_AUTO_TEST_CASE(capacity_mode_peer_never_arrives) { runLonelyLayout(ncclEpModeCapacity); }

BOOST_AUTO_TEST_CASE(exact_mode_peer_never_arrives) { runLonelyLayout(ncclEpModeExact); }

BOOST_AUTO_TEST_SUITE_END()
