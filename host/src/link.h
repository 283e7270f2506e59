// The setup window users of epx share: a registered window of symmetric memory, an NCCL device communicator (GIN when some peer is outside this
// rank's NVLink domain), the per-CTA GIN counters' posted totals, the mapped async-error record,
// and the two collective helpers used at creation time (barrier, gather of a small record).
// EP groups, buckets and PP channels use all of it.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "epx/device/link_args.h"

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

// One registered window with its device communicator (host/src/link.cc).
struct WindowLink {
  ncclComm_t comm = nullptr;
  int rank = 0, nRanks = 0, cudaDev = -1;
  int lsaRank = 0, lsaSize = 1;
  int ginContexts = 0, ginCounters = 0, ginSignals = 0;  // ginSignals: the user's and the drain signals
  uint32_t drainSignal = 0;                              // first drain signal id (source rank r: + r)
  uint64_t bytes = 0;       // registered bytes: the user's, then (network links) the drain pad
  uint64_t drainPad = 0;    // offset of the drain pad (dev::kLinkPadBytes; network links only)
  int timeoutMs = 10000;
  void* buffer = nullptr;
  ncclWindow_t window = nullptr;
  void* devComm = nullptr;
  uint64_t* ginPosted = nullptr;          // device [ginContexts][ginCounters]
  dev::AsyncError* error = nullptr;       // mapped pinned host memory
  dev::AsyncError* errorDev = nullptr;
  bool network() const { return lsaSize < nRanks; }
};

// Queries comm (rank, size, device, LSA team) into `l` without allocating: what a caller needs to
// size its window. "" or the reason.
std::string linkQuery(ncclComm_t comm, WindowLink* l);

// Collective over l->comm (after linkQuery): allocates and registers the window, creates the
// device communicator, zeroes the GIN signals, ends with a barrier. On failure everything is
// released again and the reason is in ncclEpGetLastError().
ncclResult_t linkOpen(const LinkRequest& req, WindowLink* l);
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

}  // namespace epx
