// The one epx window of a communicator (public API: epx/window.h): a registered symmetric allocation
// and its NCCL device communicator, carved into the regions of the objects that use it (link.h:
// each WindowLink holds one region). Windows are kept per communicator in a process-wide registry;
// the objects of one communicator are created and destroyed by the thread that drives it.
#pragma once
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/window_plan.h"
#include "epx/window.h"

namespace epx {

struct WindowLink;  // link.h

struct CommWindow {
  ncclComm_t comm = nullptr;
  bool planned = false;         // made by ncclEpWindowCreate (else by an object, for itself)
  void* buffer = nullptr;       // ncclMemAlloc, zeroed at creation
  uint64_t bytes = 0;
  ncclWindow_t window = nullptr;
  void* devComm = nullptr;      // ncclDevComm (devcomm.h)
  int ginContexts = 0;          // 0: no GIN (every peer is an NVLink peer)
  RangeAllocator regions, signals, counters;
  int objects = 0;              // regions held
  bool fits(const WindowNeed& n) const;
  std::string freeText() const;  // what is free, in describeNeed's words
};

// Collective over comm: allocates, zeroes and registers a window of size.bytes and creates its
// device communicator (GIN with size.ginSignals signals and size.ginCounters counters per context
// when `network`), and records it as comm's. On failure nothing is left and the reason is recorded
// (ncclEpGetLastError, prefixed with `who`).
ncclResult_t windowOpen(ncclComm_t comm, bool network, int nRanks, int lsaSize, const WindowNeed& size,
                        bool planned, const char* who, CommWindow** out);
// Releases w (device communicator, registration, memory) and forgets it. Collective.
void windowClose(CommWindow* w);
// comm's windows, oldest first (empty: none).
std::vector<CommWindow*> windowsOf(ncclComm_t comm);
// The start of every ncclEpWindowPlanAdd* call: comm and plan are not NULL, and comm as linkQuery
// reads it (size, device, LSA team) into *l. ncclInvalidArgument (recorded, prefixed with who).
ncclResult_t planQuery(ncclComm_t comm, const ncclEpWindowPlan_t* plan, const char* who, WindowLink* l);
// plan += n (the ncclEpWindowPlanAdd* calls).
void addToPlan(const WindowNeed& n, ncclEpWindowPlan_t* plan);

}  // namespace epx
