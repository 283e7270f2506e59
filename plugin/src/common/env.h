// Reading EPX_* environment variables with defaults.
#pragma once

#include <cstdint>
#include <string>

namespace epx::plugin {

int64_t envInt(const char* name, int64_t defaultValue);
std::string envString(const char* name, const char* defaultValue = "");

}  // namespace epx::plugin
