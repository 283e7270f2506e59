// Exported C functions of plugin/include/epx/gin_stats.h (counters of the GIN ipc backend).
#include "epx/gin_stats.h"

#include "rig/ipc_stats.h"

#define EPX_EXPORT extern "C" __attribute__((visibility("default")))

EPX_EXPORT int epxGinIpcStatsVersion(void) { return EPX_GIN_IPC_STATS_VERSION; }

EPX_EXPORT int epxGinIpcStatsSnapshot(epxGinIpcStats* out, int maxEntries) {
  return epx::plugin::gin::statsSnapshot(out, maxEntries);
}

EPX_EXPORT void epxGinIpcStatsReset(void) { epx::plugin::gin::statsReset(); }
