#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace epx::plugin {

namespace {
std::atomic<ncclDebugLogger_t> gLogger{nullptr};
}

void setLogger(ncclDebugLogger_t logger) {
  if (logger != nullptr) gLogger.store(logger);
}

void logMessage(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line,
                const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  ncclDebugLogger_t logger = gLogger.load();
  if (logger != nullptr) {
    logger(level, subsys, file, line, "%s", text);
  } else if (level == NCCL_LOG_WARN) {
    fprintf(stderr, "EPX WARN %s\n", text);
  }
}

}  // namespace epx::plugin
