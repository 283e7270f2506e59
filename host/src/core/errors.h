// Thread-local "last error" text behind ncclEpGetLastError().
#pragma once
#include <nccl.h>

#include <string>

namespace epx {

// Stores the message for the calling thread and returns `code` (for `return fail(...)`).
ncclResult_t fail(ncclResult_t code, const std::string& message);
void clearLastError();
const char* lastError();

}  // namespace epx
