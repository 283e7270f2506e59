// Reading EPX_* environment variables with defaults.
#pragma once

#include <cstdint>
#include <string>

namespace epx::plugin {

int64_t envInt(const char* name, int64_t defaultValue);
// envInt for a value that must lie in [lo, hi]: an out-of-range value is clamped with a WARN naming
// the variable, the value, the range and the value used (an INFO line reports the value used).
int64_t envIntInRange(const char* name, int64_t defaultValue, int64_t lo, int64_t hi);
std::string envString(const char* name, const char* defaultValue = "");

}  // namespace epx::plugin
