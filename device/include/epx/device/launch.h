// Launch wrappers of the EP kernels (host-callable; implemented in device/src/*.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "epx/device/ep_args.h"
#include "epx/device/ll_args.h"

namespace epx::dev {

// ceil(T / 512) CTAs: validates top-k ids, computes the route; the last CTA exchanges counts.
cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream);
// Dynamic shared memory of the layout kernel (must fit the device's opt-in limit).
size_t layoutSmem(int numExperts, int nRanks, int localExperts);

// Hybrid forwarding (args.c.nodeSize > 0), after launchLayout on the same stream: one CTA per node
// numbers this rank's tokens bound for that node (Route::tokNodeSlot, nodeCount).
cudaError_t launchHybridRoute(const LayoutArgs& args, cudaStream_t stream);

// nCtas CTAs (co-resident): send rows to peers, then copy received rows to the outputs.
cudaError_t launchDispatch(const DispatchArgs& args, int nCtas, cudaStream_t stream);

// nCtas CTAs (co-resident): send expert outputs back, then reduce per source token.
cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream);

// CTAs of each kernel that fit on one SM (for the co-residency check at group creation).
cudaError_t dispatchMaxCtasPerSm(int* ctas);
cudaError_t combineMaxCtasPerSm(int* ctas);

// Low-latency dispatch / combine (ll_dispatch.cu, ll_combine.cu): nCtas CTAs, co-resident; args.halves
// selects the send half, the receive half or both.
cudaError_t launchLlDispatch(const LlDispatchArgs& args, int nCtas, cudaStream_t stream);
cudaError_t launchLlCombine(const LlCombineArgs& args, int nCtas, cudaStream_t stream);
// Dynamic shared memory of the LL dispatch kernel (must fit the device's opt-in limit), and the
// one-time kernel attributes it needs (called at LL group creation, on the group's device).
size_t llDispatchSmem(int numExperts, int nRanks);
cudaError_t llPrepareKernels();

// Zeroes the group's GIN signals on every context (group creation, before any peer can signal:
// signal ids come from NCCL's pool and may hold a destroyed group's values).
cudaError_t launchResetGinSignals(const LinkArgs& l, cudaStream_t stream);
// Drains the GIN traffic between this rank and every network peer before the window's device
// communicator is destroyed (collective, like the window deregistration that follows): on every
// context, this rank adds 1 to its drain signal (drainBase + rank) at each network peer with a put
// of the link's pad (kLinkPadBytes at padOffset), waits until those puts are consumed (GIN counter
// 0: they have left this rank's GIN proxy), then waits until every network peer's drain signal has
// arrived here on every context; both waits are bounded by l.timeoutNs, a timeout is recorded as
// kPhaseGinCompletion or kPhaseLinkDrain naming the peer. Signals are applied in order per
// (context, peer), so afterwards no signal posted by a peer's earlier kernels is still in flight
// towards this rank: none can land on the signal ids NCCL hands the next device communicator
// (ncclDevCommDestroy returns them to its pool), and none lands on this rank's window after it is
// deregistered (which fails the sender's GIN proxy). quiet = true after a timeout: the same waits,
// at most l.timeoutNs in all, recording nothing (a peer that stalled or died sends no drain
// signal; the live ones still get and give theirs). One CTA; l.ginCounters >= 1.
cudaError_t launchDrainGin(const LinkArgs& l, uint32_t drainBase, uint64_t padOffset, bool quiet,
                           cudaStream_t stream);

}  // namespace epx::dev
