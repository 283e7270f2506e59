// Launch wrappers of the EP kernels (host-callable; implemented in device/src/*.cu).
#pragma once
#include <cuda_runtime.h>

#include "epx/device/ep_args.h"

namespace epx::dev {

// One CTA per rank: validates top-k ids, computes the route, exchanges counts with all ranks.
cudaError_t launchLayout(const LayoutArgs& args, cudaStream_t stream);

// nCtas CTAs (co-resident): send rows to peers' windows, then copy received rows to the outputs.
cudaError_t launchDispatch(const DispatchArgs& args, int nCtas, cudaStream_t stream);

// nCtas CTAs (co-resident): send expert outputs back, then reduce per source token.
cudaError_t launchCombine(const CombineArgs& args, int nCtas, cudaStream_t stream);

}  // namespace epx::dev
