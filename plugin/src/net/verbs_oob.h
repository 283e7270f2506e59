// Out-of-band TCP for the verbs connection handshake: a listening socket whose address travels in
// NCCL's handle, and non-blocking exact-size transfers progressed from connect()/accept().
// Runs in the CPU tests over loopback (tests/plugin/test_verbs_logic.cc, suite oob).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "net/verbs_wire.h"

namespace epx::plugin::verbs {

// Opens a non-blocking listening socket on the first interface that NCCL_SOCKET_IFNAME (or the
// socket transport's default choice) selects, and writes its address into *handle (sealed).
// Returns the fd, or -1 with *why.
int oobListen(Handle* handle, std::string* why);
// Starts a non-blocking connect to the handle's address; -1 with *why.
int oobConnect(const Handle& handle, std::string* why);
// 1: connected, 0: still connecting, -1: failed (*why).
int oobConnected(int fd, std::string* why);
// Accepts one pending connection (non-blocking); -1 when none yet (*why empty) or on error.
int oobAccept(int listenFd, std::string* why);

// Moves bytes [*done, size) without blocking. 1: all moved, 0: try again, -1: error or the peer
// closed the socket (*why).
int oobSend(int fd, const void* data, size_t size, size_t* done, std::string* why);
int oobRecv(int fd, void* data, size_t size, size_t* done, std::string* why);

}  // namespace epx::plugin::verbs
