// A peer process that dies (multi-process mode only, e.g. scripts/fake-nodes.sh): every rank
// creates the group, then the last rank leaves with _exit(0) before any dispatch (by design, so
// its exit status is 0). The survivors start a layout (exact mode: the host call waits; capacity
// mode: layout + dispatch enqueued) and must get, within the group's timeoutMs (plus a slack for
// scheduling), an async error from ncclEpGroupGetAsyncError naming the dead rank and the phase.
// Then they clean up what can be cleaned up without the dead peer (handle, group; bounded by a
// watchdog), abort the NCCL communicator instead of destroying it, and exit normally.
//
// The suite is disabled by default (it ends a rank): run it alone, by name:
//   scripts/fake-nodes.sh -n 2 -- epx_ep_tests --run_test=dead_peer
// Environment: EPX_DEAD_PEER_MODE=exact|capacity (default exact), EPX_DEAD_PEER_TIMEOUT_MS (the
// group's timeoutMs, default 2000), EPX_DEAD_PEER_SLACK_MS (lateness allowed on top, default 3000).
// Single-process mode: skipped (a thread cannot die alone; see the timeout suite).
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ep_harness.h"

using namespace epx::testing;
using namespace epx::test;

namespace {

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Ends the process (exit 3) when not disarmed in time: a call that waits for the dead peer
// forever must not hang the job until the launcher's timeout.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what) : what_(std::move(what)) {
    t_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fflush(stdout);
        std::cout.flush();
        std::fprintf(stderr, "dead_peer: FAILED: %s did not return within %.0f s (waits for the dead peer?); exit 3\n",
                     what_.c_str(), seconds);
        std::fflush(stderr);
        _exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

std::string lower(std::string s) {
  for (auto& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

boost::test_tools::assertion_result mpWithPeers(boost::unit_test::test_unit_id) {
  const bool mp = multiProcess();
  boost::test_tools::assertion_result r(mp && nRanks() >= 2);
  if (!mp)
    r.message() << "multi-process mode only (EPX_MP_SIZE etc.; scripts/fake-nodes.sh)";
  else
    r.message() << "needs >= 2 ranks (have " << nRanks() << ")";
  return r;
}

struct Seen {
  ncclResult_t callResult = ncclSuccess;  // exact mode: ncclEpDispatchLayout's
  std::string callError;
  ncclResult_t async = ncclSuccess;
  std::string msg;
  double errorAfterMs = -1;   // when the async error was first seen (from the layout call)
  double streamDoneMs = -1;   // when the stream drained
  bool streamError = false;
  std::string streamErrorText;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(dead_peer, *boost::unit_test::disabled())

BOOST_AUTO_TEST_CASE(last_rank_exits_before_dispatch, *boost::unit_test::precondition(mpWithPeers)) {
  MultiGpu& mg = gpus();
  const int R = mg.size(), dead = R - 1, me = localRanks()[0];
  const std::string mode = std::getenv("EPX_DEAD_PEER_MODE") ? std::getenv("EPX_DEAD_PEER_MODE") : "exact";
  BOOST_TEST_REQUIRE((mode == "exact" || mode == "capacity"), "EPX_DEAD_PEER_MODE must be exact or capacity");
  const bool exact = mode == "exact";
  const int timeoutMs = std::max(1, envInt("EPX_DEAD_PEER_TIMEOUT_MS", 2000));
  const int slackMs = std::max(0, envInt("EPX_DEAD_PEER_SLACK_MS", 3000));
  BOOST_TEST_MESSAGE("dead_peer: " << R << " ranks, rank " << dead << " dies; " << mode << " mode, timeoutMs "
                                   << timeoutMs << " (+" << slackMs << " ms slack)");

  const int E = 4 * R, K = 4, T = 64;
  GroupSpec gs{128, 2048, K, E};
  ncclEpConfig_t cfg = makeConfig(gs);
  cfg.timeoutMs = timeoutMs;
  std::vector<ncclEpGroup_t> groups(R, nullptr);
  mg.run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpGroupCreate(c.comm, &cfg, &groups[c.rank])); });
  mg.barrier();  // every rank has its group

  if (mg.isLocal(dead)) {
    std::cout.flush();
    std::printf("dead_peer: rank %d exits now, abruptly, by design (_exit(0)) after group creation\n", dead);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }

  // Every token to one expert on every rank (the dead one included).
  std::vector<int32_t> host(size_t(T) * K);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) host[size_t(t) * K + k] = (t + k * R) % E;
  Seen seen;
  const double budgetS = (timeoutMs + slackMs) / 1e3 + 30;
  mg.runLocal([&](const RankContext& c) {
    ncclEpGroup_t g = groups[c.rank];
    ncclEpHandleConfig_t hc = NCCL_EP_HANDLE_CONFIG_INITIALIZER;
    hc.layout = ncclEpLayoutDeduplicated;
    hc.mode = exact ? ncclEpModeExact : ncclEpModeCapacity;
    ncclEpHandle_t h = nullptr;
    EPX_CHECK_EP(ncclEpHandleCreate(g, &hc, &h));
    int cap = 0;
    EPX_CHECK_EP(ncclEpHandleGetCapacity(h, &cap));
    DevBuf ids, x, recvX, recvIdx, recvW;
    ids.reserve(host.size() * 4);
    x.reserve(size_t(T) * gs.hidden * 2);
    recvX.reserve(size_t(std::max(cap, 1)) * gs.hidden * 2);
    recvIdx.reserve(size_t(std::max(cap, 1)) * K * 4);
    // On the op's stream (non-blocking: it does not wait for the legacy stream's copies).
    EPX_CHECK_CUDA(cudaMemcpyAsync(ids.ptr(), host.data(), host.size() * 4, cudaMemcpyHostToDevice, c.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(x.ptr(), 0, x.size(), c.stream));
    ncclEpRouting_t rt{ids.ptr(), ncclInt32, T};

    const auto t0 = std::chrono::steady_clock::now();
    {
      Watchdog wd(budgetS, "ncclEpDispatchLayout with a dead peer");
      seen.callResult = ncclEpDispatchLayout(h, &rt, c.stream);
      if (seen.callResult != ncclSuccess) seen.callError = ncclEpGetLastError();
    }
    if (!exact && seen.callResult == ncclSuccess) {  // capacity mode: the dispatch goes in behind it
      ncclEpDispatchInputs_t in{};
      in.x = x.ptr();
      in.xType = ncclBfloat16;
      ncclEpDispatchOutputs_t o{};
      o.recvX = recvX.ptr();
      o.recvTopkIdx = recvIdx.as<int32_t>();
      const ncclResult_t r = ncclEpDispatch(h, &in, &o, c.stream);
      if (r != ncclSuccess) BOOST_TEST_MESSAGE("dispatch enqueue returned " << int(r) << ": " << ncclEpGetLastError());
    }
    // Poll the async error (it does not synchronize) and the stream, both bounded.
    const double deadlineMs = budgetS * 1e3;
    for (;;) {
      if (seen.errorAfterMs < 0) {
        ncclResult_t e = ncclSuccess;
        char msg[512] = {0};
        EPX_CHECK_EP(ncclEpGroupGetAsyncError(g, &e, msg, sizeof(msg)));
        if (e != ncclSuccess) {
          seen.async = e;
          seen.msg = msg;
          seen.errorAfterMs = msSince(t0);
        }
      }
      if (seen.streamDoneMs < 0) {
        const cudaError_t q = cudaStreamQuery(c.stream);
        if (q != cudaErrorNotReady) {
          seen.streamDoneMs = msSince(t0);
          if (q != cudaSuccess) {
            seen.streamError = true;
            seen.streamErrorText = cudaGetErrorString(q);
          }
        }
      }
      if (seen.errorAfterMs >= 0 && seen.streamDoneMs >= 0) break;
      if (msSince(t0) > deadlineMs) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (seen.streamDoneMs < 0) {
      // The kernels still wait for the dead peer: nothing can be freed safely.
      std::fprintf(stderr, "dead_peer: rank %d: stream still busy %.0f ms after the layout; exit 4\n", c.rank,
                   msSince(t0));
      std::fflush(stderr);
      _exit(4);
    }
    // Clean up what does not need the dead peer.
    {
      Watchdog wd(30, "ncclEpHandleDestroy after a dead peer");
      const ncclResult_t r = ncclEpHandleDestroy(h);
      BOOST_CHECK_MESSAGE(r == ncclSuccess, "rank " << c.rank << ": ncclEpHandleDestroy: " << ncclEpGetLastError());
    }
    {
      Watchdog wd(30, "ncclEpGroupDestroy after a dead peer");
      const ncclResult_t r = ncclEpGroupDestroy(g);
      BOOST_CHECK_MESSAGE(r == ncclSuccess, "rank " << c.rank << ": ncclEpGroupDestroy: " << ncclEpGetLastError());
      groups[c.rank] = nullptr;
    }
  });

  BOOST_TEST_MESSAGE("dead_peer: rank " << me << ": layout returned " << int(seen.callResult) << " '" << seen.callError
                                        << "'; async error " << int(seen.async) << " after " << seen.errorAfterMs
                                        << " ms: '" << seen.msg << "'; stream drained after " << seen.streamDoneMs
                                        << " ms" << (seen.streamError ? " with " + seen.streamErrorText : ""));
  BOOST_CHECK_MESSAGE(seen.async == ncclRemoteError,
                      "rank " << me << ": async error " << int(seen.async) << ", want ncclRemoteError (" << int(ncclRemoteError)
                              << "); message '" << seen.msg << "'");
  BOOST_CHECK_MESSAGE(seen.errorAfterMs >= 0 && seen.errorAfterMs <= timeoutMs + slackMs,
                      "rank " << me << ": async error seen after " << seen.errorAfterMs << " ms, want within timeoutMs "
                              << timeoutMs << " + " << slackMs << " ms");
  const std::string m = lower(seen.msg);
  BOOST_CHECK_MESSAGE(m.find("peer rank " + std::to_string(dead)) != std::string::npos ||
                          m.find("rank " + std::to_string(dead) + " ") != std::string::npos,
                      "rank " << me << ": the async error does not name the dead rank " << dead << ": '" << seen.msg << "'");
  bool phase = false;
  for (const char* p : {"layout", "count exchange", "dispatch", "combine"}) phase = phase || m.find(p) != std::string::npos;
  BOOST_CHECK_MESSAGE(phase, "rank " << me << ": the async error names no phase (layout/dispatch/combine): '" << seen.msg << "'");
  if (exact) {
    BOOST_CHECK_MESSAGE(seen.callResult == ncclRemoteError,
                        "rank " << me << ": exact-mode layout returned " << int(seen.callResult) << ", want ncclRemoteError");
  } else {
    BOOST_CHECK_MESSAGE(seen.callResult == ncclSuccess,
                        "rank " << me << ": capacity-mode layout returned " << int(seen.callResult) << " (it never waits)");
  }
  BOOST_CHECK_MESSAGE(!seen.streamError, "rank " << me << ": the stream failed: " << seen.streamErrorText);

  // The communicator cannot be destroyed without the dead peer: abort it (and forget any cached
  // groups). Nothing collective runs after this in this process.
  abandonGpus();
  BOOST_TEST_MESSAGE("dead_peer: rank " << me << ": communicator aborted, exiting");
}

BOOST_AUTO_TEST_SUITE_END()
