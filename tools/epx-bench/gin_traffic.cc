// GIN traffic counters (see gin_traffic.h).
#include "gin_traffic.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace epxbench {

GinTraffic sumGinTraffic(const epxGinIpcStats* entries, int count) {
  GinTraffic t;
  for (int i = 0; i < count; ++i) {
    const epxGinIpcStats& e = entries[i];
    if (e.peer == e.rank) continue;
    t.ops += double(e.ops);
    t.puts += double(e.puts);
    t.putSignals += double(e.putSignals);
    t.signalOnly += double(e.signalOnly);
    t.bytes += double(e.bytes);
    t.wireBytes += double(e.wireBytes);
  }
  return t;
}

GinLatency ginLatency(const epxGinIpcStats* entries, int count) {
  GinLatency l;
  double copied = 0, copyNs = 0, doneNs = 0, inNs = 0, applyNs = 0, contexts = 0, ops = 0, issueNs = 0;
  for (int i = 0; i < count; ++i) {
    const epxGinIpcStats& e = entries[i];
    if (e.peer == e.rank) {  // one entry per context: its progress counters
      ++contexts;
      l.progressCalls += double(e.progressCalls);
      l.applyBatches += double(e.applyBatches);
      applyNs += double(e.applyNs);
      l.gapMaxUs = std::max(l.gapMaxUs, double(e.progressGapMaxNs) / 1e3);
      l.gaps1ms += double(e.progressGaps1ms);
      continue;
    }
    l.completed += double(e.completed);
    ops += double(e.ops);
    issueNs += double(e.issueNs);
    copied += double(e.copied);
    copyNs += double(e.copyNs);
    doneNs += double(e.doneNs);
    l.signalsIn += double(e.signalsIn);
    inNs += double(e.signalInNs);
  }
  auto mean = [](double ns, double n) { return n > 0 ? ns / n / 1e3 : 0.0; };
  l.copyUs = mean(copyNs, copied);
  l.issueUs = mean(issueNs, ops);
  l.doneUs = mean(doneNs, l.completed);
  l.signalInUs = mean(inNs, l.signalsIn);
  l.applyUs = mean(applyNs, l.applyBatches);
  l.progressCalls = contexts > 0 ? l.progressCalls / contexts : 0.0;
  return l;
}

std::string netPluginLibrary(const char* value) {
  if (!value || !*value || std::strcmp(value, "none") == 0) return {};
  const std::string v(value);
  const bool isFile = v.find('/') != std::string::npos ||
                      (v.size() > 3 && v.compare(v.size() - 3, 3, ".so") == 0) || v.find(".so.") != std::string::npos;
  return isFile ? v : "libnccl-net-" + v + ".so";
}

GinStatsReader::GinStatsReader() {
  const std::string lib = netPluginLibrary(std::getenv("NCCL_NET_PLUGIN"));
  if (lib.empty()) {
    why_ = "NCCL_NET_PLUGIN is not set to epx's plugin";
    return;
  }
  lib_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib_) {
    why_ = "NCCL has not loaded " + lib;
    return;
  }
  auto version = reinterpret_cast<epxGinIpcStatsVersionFn>(dlsym(lib_, "epxGinIpcStatsVersion"));
  if (!version || version() != EPX_GIN_IPC_STATS_VERSION) {
    why_ = lib + " has no epxGinIpcStats v" + std::to_string(EPX_GIN_IPC_STATS_VERSION) + " counters";
    return;
  }
  snapshot_ = reinterpret_cast<epxGinIpcStatsSnapshotFn>(dlsym(lib_, "epxGinIpcStatsSnapshot"));
  reset_ = reinterpret_cast<epxGinIpcStatsResetFn>(dlsym(lib_, "epxGinIpcStatsReset"));
  if (!snapshot_ || !reset_) {
    snapshot_ = nullptr;
    why_ = lib + " lacks epxGinIpcStatsSnapshot/Reset";
  }
}

GinStatsReader::~GinStatsReader() {
  if (lib_) dlclose(lib_);
}

void GinStatsReader::reset() const {
  if (reset_) reset_();
}

std::vector<epxGinIpcStats> GinStatsReader::snapshot() const {
  if (!snapshot_) return {};
  std::vector<epxGinIpcStats> v(size_t(snapshot_(nullptr, 0)) + 8);
  const int n = snapshot_(v.data(), int(v.size()));
  v.resize(size_t(std::min<int>(n, int(v.size()))));
  return v;
}

GinTraffic GinStatsReader::total() const {
  const auto v = snapshot();
  return sumGinTraffic(v.data(), int(v.size()));
}

GinLatency GinStatsReader::latency() const {
  const auto v = snapshot();
  return ginLatency(v.data(), int(v.size()));
}

}  // namespace epxbench
