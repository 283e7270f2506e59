// Internal state behind the opaque ncclEpGroup_t / ncclEpHandle_t handles.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

#include "beacons.h"
#include "core/config.h"
#include "core/ll_checks.h"
#include "epx/device/ep_args.h"
#include "epx/device/ll_args.h"
#include "epx/ep.h"
#include "link.h"

struct ncclEpGroup {
  // The communicator, this rank's place in it and its NVLink (LSA) team (other peers are reached
  // over GIN), the window (ncclMemAlloc, registered), the device communicator, the GIN counters'
  // posted totals and the async error record (link.h).
  epx::WindowLink link;
  int numSMs = 0, nCtas = 0;
  epx::GroupConfig cfg;
  epx::dev::WindowLayout wl{};
  int nodeSize = 0;                         // hybrid forwarding: ranks per node; 0 direct (checkForwarding)
  epx::SessionState ses;                    // the protocol session's device state (link.h)
  epx::Beacons beacons;                     // debugging: EPX_DEBUG_BEACONS (beacons.h)
  // Low-latency groups (cfg.lowLatency()): the LL region and the group-owned LL device state.
  epx::dev::LlLayout ll{};
  epx::dev::LlState* llState = nullptr;     // device memory
  uint32_t* llCountSeen = nullptr;          // device memory [kLlBanks][numExperts]
  epx::LlGroupCalls llCalls;                // host mirror of the LL call order (ll_checks.h)
  epx::dev::EpCommon common() const;
  epx::dev::EpShape shape() const;
  epx::dev::LinkArgs linkArgs() const;  // the link's, with the group's beacons
  char* buffer() const { return static_cast<char*>(link.buffer); }
  epx::dev::LlGroupDev llDev() const { return {ll, llState, llCountSeen}; }
};

struct ncclEpHandle {
  ncclEpGroup_t group = nullptr;
  epx::HandleConfig cfg;
  void* devMem = nullptr;
  epx::dev::Route route{};
  epx::dev::LayoutSummary* summary = nullptr;     // mapped pinned (exact mode)
  epx::dev::LayoutSummary* summaryDev = nullptr;
  long long capacityRows = 0;
  bool laidOut = false;
  bool dispatched = false;           // an ncclEpDispatch launched since the last layout (combine needs one)
  int numTokens = 0;                 // T of the last layout
  int numRows = 0, numRecvTokens = 0;  // exact mode
  std::vector<int> expertCounts;     // exact mode
  size_t routeBytes = 0;             // devMem bytes (the Route's arrays)
  int rowsNeeded() const { return cfg.capacity ? int(capacityRows) : numRows; }
  // Low-latency handles (of a low-latency group): their route and call state (ll_handle.cc).
  bool ll = false;
  void* llMem = nullptr;
  epx::dev::LlRoute llRoute{};
  epx::LlCallState llState;
};

namespace epx {
// Low-latency pieces of groups and handles (ll_handle.cc).
cudaError_t llGroupInit(ncclEpGroup* g);  // after the window layout: device state
void llGroupRelease(ncclEpGroup* g);
cudaError_t llHandleInit(ncclEpHandle* h);  // h->group set
void llHandleRelease(ncclEpHandle* h);
}  // namespace epx
