// GIN traffic of one call, read from the counters of epx's ipc GIN backend
// (plugin/include/epx/gin_stats.h) when NCCL loaded libnccl-net-epx.so (NCCL_NET_PLUGIN=epx or a
// path to it). Counts are this process's outgoing operations; epx-bench reads them only when a
// process holds one rank (fake nodes), so they are that rank's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "epx/gin_stats.h"

namespace epxbench {

struct GinTraffic {
  double ops = 0;         // puts + putSignals + signalOnly
  double puts = 0;        // puts without a signal
  double putSignals = 0;  // puts with a signal
  double signalOnly = 0;  // signals without payload
  double bytes = 0;       // payload bytes
  double wireBytes = 0;   // bytes charged to the (emulated) NIC: payload, or 64 per op without one
};

// Sums the entries whose peer is another rank (puts to self never reach a NIC).
GinTraffic sumGinTraffic(const epxGinIpcStats* entries, int count);

// Where a GIN operation's time goes in the ipc backend (epxGinIpcStats version 3), averaged over
// this process's ops to and signals from other ranks since the last reset, in microseconds.
struct GinLatency {
  double completed = 0;     // ops reported done
  double copyUs = 0;        // mean: op issued by NCCL's proxy -> its copy seen complete
  double issueUs = 0;       // mean: op issued -> its CUDA work queued (the put call's own time)
  double doneUs = 0;        // mean: issued -> reported done (signal sent; includes the emulated NIC)
  double signalsIn = 0;     // signals received
  double signalInUs = 0;    // mean: signal message received -> applied (write queued on the GPU)
  double applyBatches = 0;  // signal read-backs (device-to-host copy + synchronisation)
  double applyUs = 0;       // mean time of one
  double gapMaxUs = 0;      // longest gap between two progress calls of one context
  double gaps1ms = 0;       // progress gaps over 1 ms, all contexts
  double progressCalls = 0; // progress calls per context (mean over the contexts)
  double gapMeanUs = 0;     // mean gap between them: set by setWindow from the counters' wall time
  // The counters covered spanUs microseconds: the mean time between two progress calls of a context
  // (0 without calls), how long an op's completion may wait to be seen, on average.
  void setWindow(double spanUs) { gapMeanUs = progressCalls > 0 ? spanUs / progressCalls : 0.0; }
};
GinLatency ginLatency(const epxGinIpcStats* entries, int count);

// The file NCCL loads for NCCL_NET_PLUGIN=`value`: the value itself when it names a file (contains
// '/' or ends in ".so"), else "libnccl-net-<value>.so"; empty for an unset value or "none".
std::string netPluginLibrary(const char* value);

// Reads the counters of the plugin copy NCCL loaded (dlopen RTLD_NOLOAD, after NCCL has loaded it).
class GinStatsReader {
 public:
  GinStatsReader();
  ~GinStatsReader();
  GinStatsReader(const GinStatsReader&) = delete;
  GinStatsReader& operator=(const GinStatsReader&) = delete;
  bool available() const { return snapshot_ != nullptr; }
  const std::string& why() const { return why_; }  // why not available
  void reset() const;
  GinTraffic total() const;  // sum over this process's contexts and peers since the last reset
  GinLatency latency() const;

 private:
  void* lib_ = nullptr;
  epxGinIpcStatsSnapshotFn snapshot_ = nullptr;
  epxGinIpcStatsResetFn reset_ = nullptr;
  std::vector<epxGinIpcStats> snapshot() const;
  std::string why_;
};

}  // namespace epxbench
