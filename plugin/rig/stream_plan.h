// Which CUDA streams carry the ipc backend's copies and signal updates, and how many hardware
// queues they need. Puts are copy-engine copies: cuMemcpyBatchAsync with
// CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE (as NCCL's own CE collectives do), so that a put does
// not compete with kernels for SMs; plain cuMemcpyAsync when the driver lacks it. The streams are
// non-blocking, at the default priority.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "gin/cuda_driver.h"

namespace epx::plugin::gin {

// Hardware queues. CUDA maps a process's streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues
// (default 8), round robin; work in one queue runs in order. When one of the backend's copy or
// signal streams shares a queue with a stream on which an epx kernel spins waiting for that very
// copy or signal, the copy waits behind the kernel and the kernel times out: on one H200 under MPS,
// 2 fake nodes failed every back-to-back run (epx-bench, 100 unsynchronized iterations) with the
// default 8 and passed with 32 (docs/fake-nodes.md). Returns the warning to print once per process
// when `streams` (the backend's streams so far plus the caller's 2) exceed the queues that
// `envValue` (CUDA_DEVICE_MAX_CONNECTIONS, null = unset) gives; empty when they fit.
std::string hardwareQueueWarning(int streams, const char* envValue);

// Which CUDA streams carry the backend's copies and signal updates (EPX_GIN_STREAMS):
//   peer    (default) one copy stream per (GIN context, peer) and one signal stream per context:
//           4 contexts x (nRanks + 1) streams per process;
//   process one copy and one signal stream per CUDA context of the process, shared by every GIN
//           context; ops to one peer still complete in posting order: 2 streams, so that 8
//           processes per GPU fit CUDA's hardware queues (scripts/fake-nodes.sh picks it above 2
//           processes per GPU).
enum class StreamPlan { PerPeer, PerProcess };
// Parses EPX_GIN_STREAMS ("peer", "process"; empty = peer). Unknown text: PerPeer and *error set.
StreamPlan parseStreamPlan(const std::string& text, std::string* error);
const char* streamPlanName(StreamPlan plan);
// Streams a GIN context with `peers` peers (self included) adds to the process under `plan`;
// `firstOfProcess`: no other context of this CUDA context created the shared streams yet.
int streamsAdded(StreamPlan plan, int peers, bool firstOfProcess);

// The streams of one GIN context: copy[p] carries the ops to peer p, signal the signal updates.
struct ContextStreams {
  std::vector<CUstream> copy;
  CUstream signal = nullptr;
};
// Creates a context's streams for `peers` peers under `plan` in CUDA context `cuCtx` (current):
// its own (PerPeer), or the pair of `cuCtx` shared by its GIN contexts (PerProcess: created by the
// first, *firstOfProcess set). Returns the first failing call's result; the streams created before
// it are in *out.
CUresult openStreams(const CudaDriver* cu, CUcontext cuCtx, StreamPlan plan, int peers, ContextStreams* out,
                     bool* firstOfProcess);
// Adds a context's streams (streamsAdded) to the process's count; returns the hardware-queue
// warning (hardwareQueueWarning, with the caller's 2 streams) the first time they do not fit, else "".
std::string countStreams(StreamPlan plan, int peers, bool firstOfProcess);
// Waits for a context's streams, then destroys its own (PerPeer) or, for the last GIN context of
// `cuCtx`, the shared pair (PerProcess).
void closeStreams(const CudaDriver* cu, CUcontext cuCtx, StreamPlan plan, const ContextStreams& streams);

}  // namespace epx::plugin::gin
