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

GinTraffic GinStatsReader::total() const {
  if (!snapshot_) return {};
  std::vector<epxGinIpcStats> v(size_t(snapshot_(nullptr, 0)) + 8);
  const int n = snapshot_(v.data(), int(v.size()));
  return sumGinTraffic(v.data(), std::min<int>(n, int(v.size())));
}

}  // namespace epxbench
