#include "rig/copy_plan.h"

#include <cstdlib>

namespace epx::plugin::gin {

CopyMode parseCopyMode(const std::string& text, std::string* error) {
  if (text.empty() || text == "ce") return CopyMode::Ce;
  if (text == "staged") return CopyMode::Staged;
  if (text == "memcpy") return CopyMode::Memcpy;
  if (text == "kernel") return CopyMode::Kernel;
  if (text == "kernel-all") return CopyMode::KernelAll;
  if (error != nullptr) *error = "unknown EPX_GIN_COPY value '" + text + "' (ce, staged, memcpy, kernel, kernel-all)";
  return CopyMode::Ce;
}

SignalApply parseSignalApply(const std::string& text, std::string* error) {
  if (text == "readback") return SignalApply::Readback;
  if (text.empty() || text == "kernel") return SignalApply::Kernel;
  if (error != nullptr) *error = "unknown EPX_GIN_SIGNAL value '" + text + "' (readback, kernel)";
  return SignalApply::Kernel;
}

const char* signalApplyName(SignalApply apply) { return apply == SignalApply::Kernel ? "kernel" : "readback"; }

const char* copyModeName(CopyMode mode) {
  switch (mode) {
    case CopyMode::Ce: return "ce";
    case CopyMode::Staged: return "staged";
    case CopyMode::Memcpy: return "memcpy";
    case CopyMode::Kernel: return "kernel";
    case CopyMode::KernelAll: return "kernel-all";
  }
  return "?";
}

StreamPlan parseStreamPlan(const std::string& text, std::string* error, int* copyStreams) {
  if (copyStreams != nullptr) *copyStreams = 1;
  if (text.empty() || text == "peer") return StreamPlan::PerPeer;
  if (text == "process") return StreamPlan::PerProcess;
  const std::string prefix = "process:";
  if (text.compare(0, prefix.size(), prefix) == 0 && text.size() > prefix.size() && text.size() <= prefix.size() + 2 &&
      text.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
    const int k = std::atoi(text.c_str() + prefix.size());
    if (k >= 1 && k <= kMaxSharedCopyStreams) {
      if (copyStreams != nullptr) *copyStreams = k;
      return StreamPlan::PerProcess;
    }
  }
  if (error != nullptr)
    *error = "unknown EPX_GIN_STREAMS value '" + text + "' (peer, process, process:K with 1 <= K <= " +
             std::to_string(kMaxSharedCopyStreams) + ")";
  return StreamPlan::PerPeer;
}

StreamPriority parseStreamPriority(const std::string& text, std::string* error) {
  if (text.empty() || text == "default") return StreamPriority::Default;
  if (text == "high") return StreamPriority::High;
  if (error != nullptr) *error = "unknown EPX_GIN_STREAM_PRIORITY value '" + text + "' (default, high)";
  return StreamPriority::Default;
}

const char* streamPlanName(StreamPlan plan) { return plan == StreamPlan::PerProcess ? "process" : "peer"; }

int streamsAdded(StreamPlan plan, int peers, bool firstOfProcess, int copyStreams) {
  if (plan == StreamPlan::PerProcess) return firstOfProcess ? copyStreams + 1 : 0;
  return peers + 1;
}

std::string hardwareQueueWarning(int streams, const char* envValue) {
  int queues = 8;  // CUDA's default
  if (envValue != nullptr && *envValue != '\0') {
    char* end = nullptr;
    const long v = std::strtol(envValue, &end, 10);
    if (end != envValue && *end == '\0' && v >= 1 && v <= 32) queues = int(v);
  }
  if (streams <= queues) return {};
  return std::to_string(streams) + " streams (the GIN ipc backend's copy and signal streams and the caller's) share " +
         std::to_string(queues) + " hardware queues (CUDA_DEVICE_MAX_CONNECTIONS" +
         (envValue && *envValue ? std::string("=") + envValue : std::string(" unset, default 8")) +
         "): a copy or signal queued behind a GIN kernel that waits for it stalls until the kernel times out; "
         "set CUDA_DEVICE_MAX_CONNECTIONS=32 (scripts/fake-nodes.sh does)";
}

bool usesStaging(CopyMode mode, size_t bytes, size_t smallPutLimit) {
  return mode == CopyMode::Staged && bytes > 0 && bytes <= smallPutLimit;
}

bool usesCopyKernel(CopyMode mode, size_t bytes, size_t smallPutLimit) {
  return bytes > 0 && (mode == CopyMode::KernelAll || (mode == CopyMode::Kernel && bytes <= smallPutLimit));
}

size_t StagingRing::acquire(size_t bytes) {
  if (bytes == 0 || bytes > capacity_) return kNone;
  size_t rounded = (bytes + 7) & ~size_t(7);
  if (rounded > capacity_) rounded = bytes;
  if (blocks_.empty()) {
    head_ = 0;
    blocks_.push_back(Block{0, rounded});
    head_ = rounded;
    return 0;
  }
  size_t tail = blocks_.front().start;  // oldest held byte (of its span)
  if (head_ > tail) {
    // Free: [head_, capacity_) and [0, tail).
    if (capacity_ - head_ >= rounded) {
      blocks_.push_back(Block{head_, head_ + rounded});
      size_t at = head_;
      head_ += rounded;
      return at;
    }
    if (tail >= rounded) {  // wrap: the span covers the skipped end of the ring
      blocks_.push_back(Block{head_, rounded});
      head_ = rounded;
      return 0;
    }
    return kNone;
  }
  // Wrapped (head_ <= tail): free is [head_, tail).
  if (tail - head_ >= rounded) {
    blocks_.push_back(Block{head_, head_ + rounded});
    size_t at = head_;
    head_ += rounded;
    return at;
  }
  return kNone;
}

void StagingRing::releaseOldest() {
  if (blocks_.empty()) return;
  blocks_.pop_front();
  if (blocks_.empty()) head_ = 0;
}

size_t StagingRing::bytesHeld() const {
  if (blocks_.empty()) return 0;
  size_t tail = blocks_.front().start;
  return head_ > tail ? head_ - tail : capacity_ - tail + head_;
}

}  // namespace epx::plugin::gin
