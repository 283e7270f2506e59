// A peer that never arrives: the device waits are bounded (timeoutMs), the host reads an error
// naming the stalled peer, nothing hangs, and the group refuses further work until recreated.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
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

// Every rank's layout completes; then the last rank never dispatches. Every other rank's dispatch
// must end within the bound with an error naming a peer that waits on the missing one: the last
// rank itself, or in hybrid mode (EPX_TEST_HYBRID) the forwarder of its rows into this rank's node,
// which never got its records.
void runMissingDispatch() {
  GroupSpec gs{128, 2048, 4, 16};
  ncclEpConfig_t cfg = makeConfig(gs);
  cfg.timeoutMs = 300;
  const int R = nRanks(), missing = R - 1, N = testHybridNodeSize();
  std::vector<ncclEpGroup_t> groups(R, nullptr);
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  std::vector<ncclEpHandle_t> handles(R, nullptr);
  const int T = 64, K = gs.topk, E = gs.numExperts;
  std::vector<int32_t> host(size_t(T) * K);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) host[size_t(t) * K + k] = (t + 4 * k) % E;  // every rank to every rank
  gpus().run([&](const RankContext& c) {
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.layout = ncclEpLayoutDeduplicated;
    hc.mode = ncclEpModeExact;
    EPX_CHECK_EP(ncclEpHandleCreate(groups[c.rank], &hc, &handles[c.rank]));
    DeviceIds ids(T * K);
    EPX_CHECK_CUDA(cudaMemcpyAsync(ids.ids, host.data(), host.size() * 4, cudaMemcpyHostToDevice, c.stream));
    ncclEpRouting_t rt{ids.ids, ncclInt32, T};
    EPX_CHECK_EP(ncclEpDispatchLayout(handles[c.rank], &rt, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  gpus().run([&](const RankContext& c) {
    if (c.rank == missing) return;
    int rows = 0;
    EPX_CHECK_EP(ncclEpHandleGetCapacity(handles[c.rank], &rows));
    DevBuf x, recvX, recvIdx;
    x.reserve(size_t(T) * gs.hidden * 2);
    recvX.reserve(size_t(std::max(rows, 1)) * gs.hidden * 2);
    recvIdx.reserve(size_t(std::max(rows, 1)) * K * 4);
    EPX_CHECK_CUDA(cudaMemsetAsync(x.ptr(), 0, x.size(), c.stream));
    ncclEpDispatchInputs_t in{};
    in.x = x.ptr();
    in.xType = ncclBfloat16;
    ncclEpDispatchOutputs_t o{};
    o.recvX = recvX.ptr();
    o.recvTopkIdx = recvIdx.as<int32_t>();
    const auto start = std::chrono::steady_clock::now();
    EPX_CHECK_EP(ncclEpDispatch(handles[c.rank], &in, &o, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ncclResult_t async = ncclSuccess;
    char msg[512] = {};
    EPX_CHECK_EP(ncclEpGroupGetAsyncError(groups[c.rank], &async, msg, sizeof(msg)));
    BOOST_TEST_MESSAGE("rank " << c.rank << ": dispatch without rank " << missing << " ended after " << secs << " s: '"
                               << msg << "'");
    BOOST_CHECK_LT(secs, 5.0);  // bounded by timeoutMs (0.3 s), not a hang
    BOOST_CHECK_EQUAL(int(async), int(ncclRemoteError));
    const std::string m(msg);
    const size_t at = m.find("peer rank ");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "rank " << c.rank << ": no peer named: " << m);
    const int named = std::atoi(m.c_str() + at + 10);
    // The missing rank, or (hybrid) the rank on its rail in this rank's node.
    const int forwarder = N > 0 ? (c.rank / N) * N + missing % N : missing;
    BOOST_CHECK_MESSAGE(named == missing || named == forwarder,
                        "rank " << c.rank << " names rank " << named << ", not " << missing << " or " << forwarder);
    BOOST_CHECK(m.find("dispatch") != std::string::npos);  // the phase
  });
  gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpHandleDestroy(handles[c.rank])); });
  destroyGroups(groups);
}

}  // namespace

// In multi-process mode the other ranks wait in MultiGpu::run's agreement step while rank 0 times
// out, then everyone destroys the groups together.
BOOST_AUTO_TEST_SUITE(timeout, *boost::unit_test::precondition(needsPeers))

BOOST_AUTO_TEST_CASE(capacity_mode_peer_never_arrives) { runLonelyLayout(ncclEpModeCapacity); }

BOOST_AUTO_TEST_CASE(exact_mode_peer_never_arrives) { runLonelyLayout(ncclEpModeExact); }

BOOST_AUTO_TEST_CASE(dispatch_source_never_arrives) { runMissingDispatch(); }

BOOST_AUTO_TEST_SUITE_END()
