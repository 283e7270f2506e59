// Messages between the ranks of a GIN context over unix sockets (registrations, signals, landing
// offers), peers lost when their socket closes, and the context's first error.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "rig/ipc_context.h"
#include "rig/readable.h"

namespace epx::plugin::gin::ipc {

ncclResult_t fail(Context* ctx, const std::string& what) {
  if (ctx->error.empty()) {
    ctx->error = what;
    EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: %s", ctx->rank, what.c_str());
  }
  return ncclInternalError;
}

// A peer's connection closed or broke (its process exited or died). Only that peer is lost: the
// ops to it complete without their signals, so the device waits on it time out naming it (epx's
// bounded waits), while the ranks still connected carry on. Making the whole context fail instead
// would stop every signal of this rank, and the live peers would time out naming each other.
// `inboundClosed`: its socket to us reached EOF (close it); after a failed send, what it sent
// before it went is still read (pump stops at EOF).
void lose(Context* ctx, int peer, const std::string& why, bool inboundClosed) {
  Peer& p = ctx->peers[static_cast<size_t>(peer)];
  if (inboundClosed && p.in >= 0) {
    close(p.in);
    p.in = -1;
  }
  if (p.lost) return;
  p.lost = true;
  EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: %s; rank %d is lost (its ops are dropped, the other peers carry on)",
           ctx->rank, why.c_str(), peer);
}

bool makeCurrent(Context* ctx) {
  CUcontext current = nullptr;
  cu->cuCtxGetCurrent(&current);
  if (current == ctx->cu) return true;
  return cu->cuCtxSetCurrent(ctx->cu) == CUDA_SUCCESS;
}

bool sendMsg(int fd, const Msg& m, int passFd, bool wait) {
  iovec iov{const_cast<Msg*>(&m), sizeof(Msg)};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  if (passFd >= 0) {
    h.msg_control = control;
    h.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &passFd, sizeof(int));
  }
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (true) {
    ssize_t n = sendmsg(fd, &h, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof(Msg))) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait && Clock::now() < deadline) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 10);
      continue;
    }
    return false;
  }
}

int recvMsg(int fd, Msg* m, int* passedFd) {
  iovec iov{m, sizeof(Msg)};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
  if (n != static_cast<ssize_t>(sizeof(Msg))) return -1;
  *passedFd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(passedFd, CMSG_DATA(c), sizeof(int));
  return 1;
}

// Drains the peer's messages: registrations are queued for regMrSym, signals for progress.
ncclResult_t pump(Context* ctx, int peer) {
  Peer& p = ctx->peers[static_cast<size_t>(peer)];
  if (p.in < 0) return ncclSuccess;
  while (true) {
    Msg m;
    int fd = -1;
    int r = recvMsg(p.in, &m, &fd);
    if (r == 0) return ncclSuccess;
    if (r < 0) {
      lose(ctx, peer, "connection from rank " + std::to_string(peer) + " closed", true);
      return ncclSuccess;
    }
    if (m.type == kRegister) {
      p.registrations.push_back(Received{m.reg, fd});
    } else if (m.type == kSignal) {
      ctx->incoming.push_back(m.signal);
      ctx->incomingFrom.emplace_back(peer, Clock::now());
      if (fd >= 0) close(fd);
    } else if (m.type == kLanding) {
      if (p.landingFd >= 0) close(p.landingFd);
      p.landingFd = fd;
      p.landingOffered = true;
    } else {
      if (fd >= 0) close(fd);
      return fail(ctx, "unexpected message type " + std::to_string(m.type) + " from rank " + std::to_string(peer));
    }
  }
}

// Progress's share of the peers' messages: every socket with something to read (one poll(), see
// readable.h).
ncclResult_t pumpPeers(Context* ctx) {
  ctx->inFds.resize(static_cast<size_t>(ctx->nRanks));
  for (int j = 0; j < ctx->nRanks; ++j) ctx->inFds[static_cast<size_t>(j)] = ctx->peers[static_cast<size_t>(j)].in;
  if (!readableSockets(ctx->inFds, &ctx->readable)) return fail(ctx, std::string("poll on the peers' sockets: ") + strerror(errno));
  for (int j : ctx->readable)
    if (ncclResult_t r = pump(ctx, j); r != ncclSuccess) return r;
  return ncclSuccess;
}

}  // namespace epx::plugin::gin::ipc
