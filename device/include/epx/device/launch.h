// Launch wrappers of the EP kernels (host-callable; implemented in device/src/*.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "epx/device/ep_args.h"

namespace epx::dev {

// ceil(T / 512) CTAs: validates top-k ids, computes the route; the last CTA exchanges counts.
cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream);
// Dynamic shared memory of the layout kernel (must fit the device's opt-in limit).
size_t layoutSmem(int numExperts, int nRanks, int localExperts);

// nCtas CTAs (co-resident): send rows to peers, then copy received rows to the outputs.
cudaError_t launchDispatch(const DispatchArgs& args, int nCtas, cudaStream_t stream);

// nCtas CTAs (co-resident): send expert outputs back, then reduce per source token.
cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream);

// CTAs of each kernel that fit on one SM (for the co-residency check at group creation).
cudaError_t dispatchMaxCtasPerSm(int* ctas);
cudaError_t combineMaxCtasPerSm(int* ctas);

// Zeroes the group's GIN signals on every context (group creation, before any peer can signal:
// signal ids come from NCCL's pool and may hold a destroyed group's values).
cudaError_t launchResetGinSignals(const Common& c, cudaStream_t stream);

}  // namespace epx::dev
