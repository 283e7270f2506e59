// How the ipc backend moves a put's bytes, and the pinned staging ring used for small puts.
//
// Default: cuMemcpyBatchAsync with CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE (as NCCL's own CE
// collectives do), so that a put does not compete with kernels for SMs. "staged" sends small puts
// device -> pinned host -> peer; "memcpy" is plain cuMemcpyAsync. On the 2xH200 run all three
// behaved the same (the first-rounds stall was in CUDA events, not in the copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace epx::plugin::gin {

enum class CopyMode {
  Ce,      // cuMemcpyBatchAsync + PREFER_OVERLAP_WITH_COMPUTE (default); cuMemcpyAsync if absent
  Staged,  // puts below the small-put limit through a pinned host ring (two CE copies); others as Ce
  Memcpy,  // plain cuMemcpyAsync (the driver picks the engine): for comparison only
  Kernel,     // puts below the small-put limit by the backend's copy kernel (gin_kernels.cu); others as Ce
  KernelAll,  // every put by the copy kernel (no copy-engine work: with many processes per GPU under
              // MPS a copy-engine op costs tens to hundreds of µs, docs/performance.md)
};

// Parses EPX_GIN_COPY ("ce", "staged", "memcpy", "kernel", "kernel-all"; empty = ce). Unknown text: Ce and
// *error set.
CopyMode parseCopyMode(const std::string& text, std::string* error);
const char* copyModeName(CopyMode mode);
// Whether a put of `bytes` goes through the staging ring in `mode`.
bool usesStaging(CopyMode mode, size_t bytes, size_t smallPutLimit);
// Whether a put of `bytes` is copied by the backend's copy kernel in `mode`.
bool usesCopyKernel(CopyMode mode, size_t bytes, size_t smallPutLimit);

// How received signal updates reach device memory (EPX_GIN_SIGNAL):
//   kernel   (default) one launch of the backend's signal kernel per batch: a device atomic add
//            per signal, no read-back and no wait;
//   readback copy the current values to pinned host memory, wait, write value + delta with
//            cuStreamWriteValue64 (one round trip per batch; the default until 2026-12-03).
enum class SignalApply { Readback, Kernel };
// Parses EPX_GIN_SIGNAL ("readback", "kernel"; empty = kernel, the default since 2026-12-03: faster
// on every measured path, docs/performance.md). Unknown: Kernel and *error set.
SignalApply parseSignalApply(const std::string& text, std::string* error);
const char* signalApplyName(SignalApply apply);

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
//           4 contexts x (nRanks + 1) streams per process — the plan every GPU run so far used;
//   process one signal stream and K copy streams (process:K, 1 <= K <= kMaxSharedCopyStreams;
//           plain "process" = 1) per CUDA context of the process, shared by every GIN context; the
//           ops to peer p go on copy stream p % K, so ops to one peer still complete in posting
//           order: K + 1 streams, so that 8 processes per GPU fit CUDA's hardware queues.
enum class StreamPlan { PerPeer, PerProcess };
constexpr int kMaxSharedCopyStreams = 16;
// Parses EPX_GIN_STREAMS ("peer", "process", "process:K"; empty = peer); *copyStreams (if given)
// gets K (1 unless process:K). Unknown text or a bad K: PerPeer and *error set.
StreamPlan parseStreamPlan(const std::string& text, std::string* error, int* copyStreams = nullptr);
const char* streamPlanName(StreamPlan plan);
// Streams a GIN context with `peers` peers (self included) adds to the process under `plan` with
// `copyStreams` shared copy streams; `firstOfProcess`: no other context of this CUDA context
// created the shared streams yet.
int streamsAdded(StreamPlan plan, int peers, bool firstOfProcess, int copyStreams = 1);

// Priority of the backend's copy and signal streams (EPX_GIN_STREAM_PRIORITY): `default`, or
// `high` (the context's greatest stream priority), a test-rig setting: with several processes on
// one GPU (fake nodes, MPS) the caller's streams and the backend's share CUDA's hardware queues, and
// a backend copy queued behind a caller's kernel that waits for a peer waits with it.
enum class StreamPriority { Default, High };
// Parses EPX_GIN_STREAM_PRIORITY ("" or "default", "high"); unknown text: Default and *error set.
StreamPriority parseStreamPriority(const std::string& text, std::string* error);

// FIFO allocator of contiguous blocks in a ring of `capacity` bytes. Blocks are released in the
// order they were acquired (copies on one stream complete in order).
class StagingRing {
 public:
  static constexpr size_t kNone = ~size_t(0);
  explicit StagingRing(size_t capacity = 0) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }
  // Offset of `bytes` (> 0) contiguous free bytes, 8-byte aligned, or kNone when they do not fit now.
  size_t acquire(size_t bytes);
  // Frees the oldest block still held. No-op when none is held.
  void releaseOldest();
  size_t blocksHeld() const { return blocks_.size(); }
  // Bytes not available to acquire (held blocks plus padding skipped at a wrap).
  size_t bytesHeld() const;

 private:
  struct Block {
    size_t start;  // where the block's span starts (the skipped tail of the ring, if it wrapped)
    size_t end;    // one past its last byte
  };
  size_t capacity_;
  size_t head_ = 0;  // next free byte
  std::deque<Block> blocks_;
};

}  // namespace epx::plugin::gin
