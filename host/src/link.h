// What every epx object (EP group, bucket, PP channel) sets up the same way: its region of the
// communicator's one window (window.h: registered symmetric memory and an NCCL device communicator,
// GIN when some peer is outside this rank's NVLink domain), its GIN counters' posted totals, its
// mapped async-error record, the drain at destroy, and the two collective helpers used at creation
// time (barrier, gather of a small record).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/window_plan.h"
#include "epx/device/link_args.h"
#include "epx/device/session_args.h"

namespace epx {

// Every rank has finished its preceding local setup (an all-reduce of one int on a private stream,
// synchronized). Collective over comm.
ncclResult_t linkBarrier(ncclComm_t comm);

// Gathers every rank's `bytes`-byte record `mine` into `all` (nRanks * bytes, rank order) with one
// ncclAllGather on a private stream (synchronized). Collective over comm. `who` prefixes the error
// text (e.g. "ncclEpGroupCreate").
ncclResult_t linkGather(ncclComm_t comm, int rank, int nRanks, const void* mine, size_t bytes, void* all,
                        const char* who);

// What a window user asks for.
struct LinkRequest {
  uint64_t bytes = 0;         // window size (ncclMemAlloc)
  uint64_t zeroedPrefix = 0;  // bytes zeroed before registration (flags any peer may write)
  int ginSignals = 0;         // GIN signals of the user's protocol when some peer is a network peer
                              // (else none are requested); the link adds nRanks drain signals after them
  int ginCounters = 0;        // GIN counters per context (one per CTA of the window's kernels; at
                              // least 1 with network peers: the drain counts its puts on counter 0)
  int timeoutMs = 10000;
  const char* who = "epx";    // API call named in errors
};

struct CommWindow;  // window.h

// One object's region of its communicator's epx window (window.h), with the object's own GIN
// counters' posted totals and async-error record (host/src/link.cc).
struct WindowLink {
  ncclComm_t comm = nullptr;
  int rank = 0, nRanks = 0, cudaDev = -1;
  int clockKhz = 0;          // the device's peak SM clock (LinkArgs::timeoutCycles)
  int lsaRank = 0, lsaSize = 1;
  int ginContexts = 0, ginCounters = 0, ginSignals = 0;  // ginSignals: the user's and the drain signals
  uint32_t drainSignal = 0;  // first drain signal id (source rank r: + r), in the object's numbering
  uint64_t bytes = 0;        // region bytes: the user's, then (network links) the drain pad
  uint64_t drainPad = 0;     // region offset of the drain pad (dev::kLinkPadBytes; network links only)
  int timeoutMs = 10000;
  CommWindow* home = nullptr;  // the window that holds the region
  uint64_t region = 0;         // the region's window offset
  uint32_t firstSignal = 0, firstCounter = 0;  // the object's GIN signal and counter ranges in home's
  void* buffer = nullptr;      // the region's first byte (home's memory + region)
  ncclWindow_t window = nullptr;  // home's
  void* devComm = nullptr;        // home's
  uint64_t* ginPosted = nullptr;          // device [ginContexts][ginCounters]
  dev::AsyncError* error = nullptr;       // mapped pinned host memory
  dev::AsyncError* errorDev = nullptr;
  bool network() const { return lsaSize < nRanks; }
};

// The first step of every object's create: the loaded NCCL can run this build (ncclInvalidUsage
// naming both versions) and comm described into *l (ncclInternalError when NCCL cannot). Errors
// read "<who>: <reason>".
ncclResult_t linkStart(ncclComm_t comm, const char* who, WindowLink* l);

// Collective over l.comm, after the object's local checks: gathers every rank's `mine` and hands
// them to agree(all), "" or why the ranks differ (then ncclInvalidUsage "<who>: <reason>").
template <class Agreed, class Agree>
ncclResult_t linkAgree(const WindowLink& l, const Agreed& mine, Agree agree, const char* who);

// Queries comm (rank, size, device, LSA team) into `l` without allocating: what a caller needs to
// size its window. "" or the reason.
std::string linkQuery(ncclComm_t comm, WindowLink* l);

// The region a request takes of the communicator's window (window_plan.h), for comm as queried into l.
WindowNeed linkNeed(const LinkRequest& req, const WindowLink& l);

// Collective over l->comm (after linkQuery): takes the request's region of the communicator's
// window (the first window with room; without one, registers a window sized for this object unless
// the communicator's window was planned, which refuses), zeroes the region's prefix, zeroes its GIN
// signals and counters, and checks that every rank took the same region. On failure everything is
// released again and the reason is in ncclEpGetLastError().
ncclResult_t linkOpen(const LinkRequest& req, WindowLink* l);
// Gives the region back; the last object of a window that no plan made releases the window.
void linkClose(WindowLink* l);

// Collective over l->comm, at destroy, before linkClose: waits until this rank's work on the device
// has finished (cudaDeviceSynchronize; `pending`: an error of work the caller just queued), then
// drains (linkDrain): waits until no GIN signal of an earlier kernel is still in flight between
// this rank and any network peer (dev::launchDrainGin), bounded by the link's timeout. Signals that land after ncclDevCommDestroy would add to the ids that NCCL's pool
// hands the next device communicator of the communicator (a low-latency bank freed twice, a count
// one ahead). Nothing to do without network peers. After the link recorded a timeout this rank
// still posts its drain signals and waits for its peers' (a live peer's signal that lands after the
// window is deregistered fails that peer's GIN proxy), but quietly and at most the link's timeout
// in all: a peer that stalled or died cannot drain, and the communicator is to be aborted. Errors: ncclUnhandledCudaError "<who>: pending
// work failed: ..." when the work failed (no drain then); a drain that times out, ncclRemoteError
// naming the peer. The caller still closes the link.
ncclResult_t linkQuiesce(WindowLink* l, const char* who, cudaError_t pending = cudaSuccess);

// The transport's arguments of l (every kernel's LinkArgs): synchronization words at `flagsOffset`
// of the window; no beacons.
dev::LinkArgs linkArgs(const WindowLink& l, uint64_t flagsOffset);

// The link's async-error record (mapped host memory the kernels write), copied.
dev::AsyncError linkErrorSnapshot(const WindowLink& l);

// Words for the link's async error ("" and ncclSuccess when none).
ncclResult_t linkAsyncError(const WindowLink& l, std::string* text);

// The public ncclEp*GetAsyncError of an object on l: NULL checks (naming `who`), then the code and
// its words (msg may be NULL).
ncclResult_t linkGetAsyncError(const WindowLink* l, ncclResult_t* asyncError, char* msg, size_t msgLen, const char* who);

// ncclRemoteError "<who>: the <what> had a device-side timeout (<getter>); destroy it" once a device
// wait of l timed out (the object refuses new work), else ncclSuccess.
ncclResult_t linkCheckUsable(const WindowLink& l, const char* who, const char* what, const char* getter);

// The protocol session's device state of an object that runs its ops through the session
// (session.cuh: buckets, load balancing): sequence numbers and the GIN arrivals expected so far
// from each source, zeroed.
struct SessionState {
  dev::GroupState* state = nullptr;
  uint32_t* arrived = nullptr;  // [kNumArrivedKinds][nRanks]
  cudaError_t alloc(int nRanks);
  void release();
  dev::SessionArgs args(int nCtas) const { return {state, arrived, nCtas}; }
};

template <class Agreed, class Agree>
ncclResult_t linkAgree(const WindowLink& l, const Agreed& mine, Agree agree, const char* who) {
  std::vector<Agreed> all(size_t(l.nRanks), mine);
  if (ncclResult_t r = linkGather(l.comm, l.rank, l.nRanks, &mine, sizeof(mine), all.data(), who); r != ncclSuccess)
    return r;
  if (std::string e = agree(all); !e.empty()) return fail(ncclInvalidUsage, std::string(who) + ": " + e);
  return ncclSuccess;
}

}  // namespace epx
