// Words for a group's device-side errors (ncclEpGroupGetAsyncError). Pure C++, CPU-tested.
#pragma once
#include <nccl.h>

#include <string>

#include "epx/device/link_args.h"

namespace epx {

// The error to report from a snapshot of the record: a timeout takes precedence over a bad expert
// id (a timeout leaves the group unusable; a bad id in capacity mode only drops a slot). Returns
// ncclSuccess and "no error" when neither was recorded. timeoutMs is the group's timeout.
ncclResult_t describeAsyncError(const dev::AsyncError& e, int timeoutMs, std::string* message);

// Whether the group must refuse new work (a timeout was recorded).
inline bool groupBroken(const dev::AsyncError& e) { return e.timeout.code != 0; }

}  // namespace epx
