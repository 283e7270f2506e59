#include "rig/stream_plan.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

namespace epx::plugin::gin {

namespace {

// EPX_GIN_STREAMS=process: one copy and one signal stream per CUDA context of the process, shared
// by every GIN context. Created by the first user, destroyed by the last.
struct SharedStreams {
  CUstream copy = nullptr;  // every peer's ops
  CUstream signal = nullptr;
  int users = 0;
};
std::mutex gSharedStreamsMutex;
std::map<CUcontext, SharedStreams>& sharedStreams() {
  static std::map<CUcontext, SharedStreams> m;
  return m;
}

CUresult createStream(const CudaDriver* cu, CUstream* s) {
  return cu->cuStreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING, 0);
}

}  // namespace

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

CUresult openStreams(const CudaDriver* cu, CUcontext cuCtx, StreamPlan plan, int peers, ContextStreams* out,
                     bool* firstOfProcess) {
  *firstOfProcess = true;
  out->copy.assign(static_cast<size_t>(peers), nullptr);
  out->signal = nullptr;
  if (plan == StreamPlan::PerProcess) {
    std::lock_guard<std::mutex> g(gSharedStreamsMutex);
    SharedStreams& sh = sharedStreams()[cuCtx];
    *firstOfProcess = sh.users == 0;
    if (*firstOfProcess) {
      if (CUresult r = createStream(cu, &sh.copy); r != CUDA_SUCCESS) return r;
      if (CUresult r = createStream(cu, &sh.signal); r != CUDA_SUCCESS) return r;
    }
    ++sh.users;  // a later context uses the first one's streams
    for (CUstream& s : out->copy) s = sh.copy;
    out->signal = sh.signal;
    return CUDA_SUCCESS;
  }
  for (CUstream& s : out->copy)
    if (CUresult r = createStream(cu, &s); r != CUDA_SUCCESS) return r;
  return createStream(cu, &out->signal);
}

std::string countStreams(StreamPlan plan, int peers, bool firstOfProcess) {
  // Streams of this backend in the process so far, plus the caller's two (the kernels' stream and
  // one more): warn once when they outnumber the hardware queues.
  static std::atomic<int> streamsSoFar{0};
  static std::atomic<bool> warned{false};
  const int streams = (streamsSoFar += streamsAdded(plan, peers, firstOfProcess)) + 2;
  std::string w = hardwareQueueWarning(streams, std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  if (w.empty() || warned.exchange(true)) return {};
  return w;
}

void closeStreams(const CudaDriver* cu, CUcontext cuCtx, StreamPlan plan, const ContextStreams& streams) {
  const bool shared = plan == StreamPlan::PerProcess && streams.signal != nullptr;
  for (CUstream s : streams.copy) {
    if (s == nullptr) continue;
    cu->cuStreamSynchronize(s);
    if (!shared) cu->cuStreamDestroy(s);
  }
  if (streams.signal != nullptr) {
    cu->cuStreamSynchronize(streams.signal);
    if (!shared) cu->cuStreamDestroy(streams.signal);
  }
  if (shared) {  // the last GIN context of this CUDA context destroys the shared pair
    std::lock_guard<std::mutex> g(gSharedStreamsMutex);
    auto it = sharedStreams().find(cuCtx);
    if (it != sharedStreams().end() && --it->second.users == 0) {
      cu->cuStreamDestroy(it->second.copy);
      cu->cuStreamDestroy(it->second.signal);
      sharedStreams().erase(it);
    }
  }
}

}  // namespace epx::plugin::gin
