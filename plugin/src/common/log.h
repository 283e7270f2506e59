// Logging through NCCL's logger (NCCL_DEBUG); stderr for warnings when no logger is installed.
#pragma once

#include "nccl.h"
#include "nccl_common.h"

namespace epx::plugin {

void setLogger(ncclDebugLogger_t logger);
void logMessage(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line,
                const char* fmt, ...) __attribute__((format(printf, 5, 6)));

}  // namespace epx::plugin

#define EPX_WARN(subsys, ...) \
  ::epx::plugin::logMessage(NCCL_LOG_WARN, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define EPX_INFO(subsys, ...) \
  ::epx::plugin::logMessage(NCCL_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define EPX_TRACE(subsys, ...) \
  ::epx::plugin::logMessage(NCCL_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__)
