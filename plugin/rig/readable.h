// Which of a set of sockets have something to read (data, a hang-up or an error), in one poll()
// system call. The GIN ipc backend's progress is called by NCCL 2.28.9's GIN proxy thread once per
// (context, target rank) of every loop, so draining every peer's socket on every call costs
// contexts x ranks x ranks recvmsg() calls per loop (256 at 8 ranks and 4 contexts, ~200 us); with
// this, one poll() per call and a recvmsg() only where there is something to read.
#pragma once

#include <vector>

namespace epx::plugin::gin {

// Indices into `fds` (negative entries are skipped) whose socket is readable or hung up, in order;
// empty when none. Returns false (errno set) when poll() itself fails other than by EINTR.
bool readableSockets(const std::vector<int>& fds, std::vector<int>* ready);

}  // namespace epx::plugin::gin
