#include "core/errors.h"

#include <cstdio>
#include <cstdlib>

namespace epx {

namespace {
thread_local std::string tlsLastError;

bool debugEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("EPX_DEBUG");
    return v && *v && *v != '0';
  }();
  return on;
}
}  // namespace

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  tlsLastError = message;
  if (debugEnabled()) std::fprintf(stderr, "epx: error %d: %s\n", int(code), message.c_str());
  return code;
}

void clearLastError() { tlsLastError.clear(); }
const char* lastError() { return tlsLastError.c_str(); }

}  // namespace epx

extern "C" const char* ncclEpGetLastError(void) { return epx::lastError(); }
