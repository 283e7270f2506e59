// Launch wrappers of the bucket-collective, PP, load-balancing and Engram kernels (host-callable;
// device/src/bucket.cu, pp.cu, lb.cu, engram.cu).
#pragma once
#include <cuda_runtime.h>

#include "epx/device/bucket_layout.h"
#include "epx/device/engram_layout.h"
#include "epx/device/lb_layout.h"
#include "epx/device/pp_layout.h"

namespace epx::dev {

// nCtas CTAs (co-resident): one all-gather or reduce-scatter over a.numTensors tensors.
cudaError_t launchBucket(const BucketArgs& a, int nCtas, cudaStream_t stream);

// nCtas CTAs (co-resident): one message to / from a.peer.
cudaError_t launchPpSend(const PpArgs& a, int nCtas, cudaStream_t stream);
cudaError_t launchPpRecv(const PpArgs& a, int nCtas, cudaStream_t stream);
// One CTA that waits (bounded) until every GIN put of the channel left its stage: before the
// channel's window is released (a send returns once its puts are posted).
cudaError_t launchPpFlush(const PpArgs& a, cudaStream_t stream);

// nCtas CTAs (co-resident): one weight prefetch or gradient reduction (a.op).
cudaError_t launchLb(const LbArgs& a, int nCtas, cudaStream_t stream);

// nCtas CTAs (co-resident): one layer of an Engram fetch.
cudaError_t launchEngram(const EngramArgs& a, int nCtas, cudaStream_t stream);

// Loads the kernels now (creation time): under CUDA lazy loading, the first launch of a kernel
// waits for the device, which never idles while another of these kernels spins on a peer.
cudaError_t preloadBucketKernels();
cudaError_t preloadPpKernels();
cudaError_t preloadLbKernels();
cudaError_t preloadEngramKernels();

// Threads per CTA of the bucket, PP, load-balancing and Engram kernels.
constexpr int kCollThreads = 512;

}  // namespace epx::dev
