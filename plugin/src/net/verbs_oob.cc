#include "net/verbs_oob.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/env.h"
#include "socket/interfaces.h"

namespace epx::plugin::verbs {

namespace {
std::string err(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

int oobListen(Handle* handle, std::string* why) {
  const auto itfs = socket::discoverInterfaces(envString("NCCL_SOCKET_IFNAME"));
  if (itfs.empty()) {
    *why = "no network interface for the out-of-band handshake (NCCL_SOCKET_IFNAME)";
    return -1;
  }
  sockaddr_storage addr = itfs[0].address;
  socklen_t len = itfs[0].addressLength;
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return *why = err("socket"), -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 512) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = err(("listen on " + itfs[0].name).c_str());
    ::close(fd);
    return -1;
  }
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(&handle->address, &addr, len);
  handle->addressLength = len;
  sealHandle(*handle);
  return fd;
}

int oobConnect(const Handle& handle, std::string* why) {
  const sockaddr* addr = reinterpret_cast<const sockaddr*>(&handle.address);
  int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return *why = err("socket"), -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, addr, handle.addressLength) != 0 && errno != EINPROGRESS) {
    *why = err("connect");
    ::close(fd);
    return -1;
  }
  return fd;
}

int oobConnected(int fd, std::string* why) {
  sockaddr_storage peer;
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0) return 1;
  if (errno != ENOTCONN) return *why = err("getpeername"), -1;
  int soErr = 0;
  len = sizeof soErr;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &len);
  if (soErr == 0 || soErr == EINPROGRESS || soErr == EALREADY) return 0;
  *why = std::string("connect: ") + std::strerror(soErr);
  return -1;
}

int oobAccept(int listenFd, std::string* why) {
  int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) why->clear();
  else *why = err("accept");
  return -1;
}

int oobSend(int fd, const void* data, size_t size, size_t* done, std::string* why) {
  while (*done < size) {
    ssize_t n = ::send(fd, static_cast<const char*>(data) + *done, size - *done, MSG_NOSIGNAL);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    *why = err("send to peer");
    return -1;
  }
  return 1;
}

int oobRecv(int fd, void* data, size_t size, size_t* done, std::string* why) {
  while (*done < size) {
    ssize_t n = ::recv(fd, static_cast<char*>(data) + *done, size - *done, 0);
    if (n > 0) {
      *done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      *why = "peer closed the connection during the handshake";
      return -1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    *why = err("recv from peer");
    return -1;
  }
  return 1;
}

}  // namespace epx::plugin::verbs
