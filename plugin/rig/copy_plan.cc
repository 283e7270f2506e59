#include "rig/copy_plan.h"

#include <cstdlib>

namespace epx::plugin::gin {

StreamPlan parseStreamPlan(const std::string& text, std::string* error) {
  if (text.empty() || text == "peer") return StreamPlan::PerPeer;
  if (text == "process") return StreamPlan::PerProcess;
  if (error != nullptr) *error = "unknown EPX_GIN_STREAMS value '" + text + "' (peer, process)";
  return StreamPlan::PerPeer;
}

const char* streamPlanName(StreamPlan plan) { return plan == StreamPlan::PerProcess ? "process" : "peer"; }

int streamsAdded(StreamPlan plan, int peers, bool firstOfProcess) {
  if (plan == StreamPlan::PerProcess) return firstOfProcess ? 2 : 0;
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

}  // namespace epx::plugin::gin
