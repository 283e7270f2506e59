#include "env.h"

#include <cerrno>
#include <cstdlib>

#include "log.h"

namespace epx::plugin {

int64_t envInt(const char* name, int64_t defaultValue) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return defaultValue;
  errno = 0;
  char* end = nullptr;
  long long value = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') {
    EPX_WARN(NCCL_ENV, "EPX: ignoring %s=%s (not an integer), using %lld", name, text,
             static_cast<long long>(defaultValue));
    return defaultValue;
  }
  EPX_INFO(NCCL_ENV, "EPX: %s set to %lld", name, value);
  return value;
}

std::string envString(const char* name, const char* defaultValue) {
  const char* text = getenv(name);
  return text != nullptr ? std::string(text) : std::string(defaultValue);
}

}  // namespace epx::plugin
