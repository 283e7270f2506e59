#include "env.h"

#include <cerrno>
#include <cstdlib>

#include "log.h"

namespace epx::plugin {

namespace {

// The integer in `name`; false when unset or empty, or (with a WARN) when not an integer.
bool parseEnvInt(const char* name, int64_t defaultValue, long long* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  *value = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0') {
    EPX_WARN(NCCL_ENV, "EPX: ignoring %s=%s (not an integer), using %lld", name, text,
             static_cast<long long>(defaultValue));
    return false;
  }
  return true;
}

}  // namespace

int64_t envInt(const char* name, int64_t defaultValue) {
  long long value = 0;
  if (!parseEnvInt(name, defaultValue, &value)) return defaultValue;
  EPX_INFO(NCCL_ENV, "EPX: %s set to %lld", name, value);
  return value;
}

int64_t envIntInRange(const char* name, int64_t defaultValue, int64_t lo, int64_t hi) {
  long long value = 0;
  if (!parseEnvInt(name, defaultValue, &value)) return defaultValue;
  const long long used = value < lo ? lo : (value > hi ? hi : value);
  if (used != value)
    EPX_WARN(NCCL_ENV, "EPX: %s=%lld is outside %lld..%lld; using %lld", name, value, static_cast<long long>(lo),
             static_cast<long long>(hi), used);
  else
    EPX_INFO(NCCL_ENV, "EPX: %s set to %lld", name, value);
  return used;
}

std::string envString(const char* name, const char* defaultValue) {
  const char* text = getenv(name);
  return text != nullptr ? std::string(text) : std::string(defaultValue);
}

}  // namespace epx::plugin
