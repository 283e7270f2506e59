#include "transport.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../common/env.h"
#include "../common/log.h"
#include "../common/net_props.h"
#include "interfaces.h"
#include "wire.h"

namespace epx::plugin::socket {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMinPartBytes = 4096;
constexpr int64_t kMaxTimeoutMs = 3600000;
constexpr int64_t kMaxConnectRetries = 100000;

int envIntIn(const char* name, int64_t def, int64_t lo, int64_t hi) {
  return static_cast<int>(envIntInRange(name, def, lo, hi));
}

Settings readSettings() {
  Settings s;
  s.nStreams = envIntIn("EPX_SOCKET_NSTREAMS", 2, 1, kMaxStreams);
  s.minPartBytes = static_cast<size_t>(envIntInRange("EPX_SOCKET_MIN_PART", 64 << 10, kMinPartBytes, INT64_MAX));
  s.connectTimeoutMs = envIntIn("EPX_SOCKET_CONNECT_TIMEOUT_MS", 20000, 1, kMaxTimeoutMs);
  s.connectRetries = envIntIn("EPX_SOCKET_CONNECT_RETRIES", 20, 0, kMaxConnectRetries);
  s.handshakeTimeoutMs = envIntIn("EPX_SOCKET_HANDSHAKE_TIMEOUT_MS", 10000, 1, kMaxTimeoutMs);
  const int asked = envIntIn("EPX_SOCKET_MAX_RECVS", 1, 1, kMaxGroupedRecvs);
  int maxRecvs = asked;
  while (maxRecvs & (maxRecvs - 1)) maxRecvs &= maxRecvs - 1;  // round down to a power of 2
  if (maxRecvs != asked)
    EPX_WARN(NCCL_ENV, "EPX: EPX_SOCKET_MAX_RECVS=%d is not a power of 2; using %d", asked, maxRecvs);
  s.maxRecvs = maxRecvs;
  return s;
}

std::vector<Interface> gDevices;
std::vector<std::string> gNames;  // stable storage for props->name / pciPath
std::vector<std::string> gPciPaths;

// ---------------------------------------------------------------------------------------------
// Data path

struct Comm;
struct Request;

enum class OpKind { Data, Header };

struct Op {
  char* buffer;
  size_t length;
  size_t done;
  Request* request;  // null for the receiver's header reads
  OpKind kind;
};

struct Stream {
  int fd = -1;
  std::deque<Op> queue;
};

struct Slot {
  char* buffer;
  size_t capacity;
  int tag;
  size_t size;
  bool matched;
};

struct Request {
  Comm* comm = nullptr;
  bool inUse = false;
  int nSlots = 0;
  Slot slots[kMaxGroupedRecvs];
  int headersPending = 0;
  int opsPending = 0;
  size_t sendSize = 0;
  MessageHeader header{};  // sender's header, kept alive until written
};

struct Comm {
  bool isSend = false;
  std::vector<Stream> streams;
  std::string peer;
  std::vector<std::unique_ptr<Request>> requests;  // pool, grown up to kMaxInFlight
  int inFlight = 0;
  std::deque<Request*> expecting;  // receiver: one entry per message whose header is awaited
  bool headerQueued = false;
  MessageHeader headerBuffer{};
  std::string error;
};

constexpr int kMaxInFlight = NCCL_NET_MAX_REQUESTS * kMaxGroupedRecvs;

std::string errnoText(int err) { return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")"; }

ncclResult_t fail(Comm* comm, const std::string& what) {
  if (comm->error.empty()) {
    comm->error = what;
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: %s connection to %s failed: %s",
             comm->isSend ? "send" : "receive", comm->peer.c_str(), what.c_str());
  }
  return ncclSystemError;
}

Request* allocateRequest(Comm* comm) {
  if (comm->inFlight >= kMaxInFlight) return nullptr;
  for (auto& r : comm->requests) {
    if (!r->inUse) {
      *r = Request{};
      r->comm = comm;
      r->inUse = true;
      ++comm->inFlight;
      return r.get();
    }
  }
  comm->requests.push_back(std::make_unique<Request>());
  Request* r = comm->requests.back().get();
  r->comm = comm;
  r->inUse = true;
  ++comm->inFlight;
  return r;
}

void releaseRequest(Request* r) {
  r->inUse = false;
  --r->comm->inFlight;
}

bool requestDone(const Request* r) { return r->headersPending == 0 && r->opsPending == 0; }

ncclResult_t onHeader(Comm* comm) {
  const MessageHeader& h = comm->headerBuffer;
  std::string bad = validateHeader(h, static_cast<int>(comm->streams.size()));
  if (!bad.empty()) return fail(comm, bad);
  Request* r = comm->expecting.front();
  comm->expecting.pop_front();
  Slot* slot = nullptr;
  for (int i = 0; i < r->nSlots; ++i) {
    if (!r->slots[i].matched && r->slots[i].tag == h.tag) {
      slot = &r->slots[i];
      break;
    }
  }
  if (slot == nullptr)
    return fail(comm, "message with tag " + std::to_string(h.tag) +
                          " matches no posted receive of its group");
  if (h.size > slot->capacity)
    return fail(comm, "message of " + std::to_string(h.size) + " bytes (tag " +
                          std::to_string(h.tag) + ") does not fit the " +
                          std::to_string(slot->capacity) + "-byte receive buffer");
  slot->matched = true;
  slot->size = h.size;
  --r->headersPending;
  for (uint32_t p = 0; p < h.nParts; ++p) {
    size_t offset = p * h.partSize;
    size_t length = std::min<size_t>(h.partSize, h.size - offset);
    comm->streams[p].queue.push_back(Op{slot->buffer + offset, length, 0, r, OpKind::Data});
    ++r->opsPending;
  }
  return ncclSuccess;
}

ncclResult_t progress(Comm* comm) {
  if (!comm->error.empty()) return ncclSystemError;
  bool moved = true;
  while (moved) {
    moved = false;
    for (size_t s = 0; s < comm->streams.size(); ++s) {
      Stream& stream = comm->streams[s];
      while (true) {
        if (!comm->isSend && s == 0 && stream.queue.empty() && !comm->headerQueued &&
            !comm->expecting.empty()) {
          stream.queue.push_back(Op{reinterpret_cast<char*>(&comm->headerBuffer),
                                    sizeof(MessageHeader), 0, nullptr, OpKind::Header});
          comm->headerQueued = true;
        }
        if (stream.queue.empty()) break;
        Op& op = stream.queue.front();
        if (op.done < op.length) {
          ssize_t n = comm->isSend
                          ? ::send(stream.fd, op.buffer + op.done, op.length - op.done,
                                   MSG_NOSIGNAL | MSG_DONTWAIT)
                          : ::recv(stream.fd, op.buffer + op.done, op.length - op.done, MSG_DONTWAIT);
          if (n > 0) {
            op.done += static_cast<size_t>(n);
            moved = true;
          } else if (n == 0) {
            return fail(comm, "peer closed the connection on stream " + std::to_string(s) +
                                  " mid-message (" + std::to_string(op.done) + " of " +
                                  std::to_string(op.length) + " bytes)");
          } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            break;
          } else if (errno == EINTR) {
            continue;
          } else {
            return fail(comm, (comm->isSend ? "send: " : "recv: ") + errnoText(errno) +
                                  " on stream " + std::to_string(s));
          }
        }
        if (op.done < op.length) continue;
        Op finished = op;
        stream.queue.pop_front();
        moved = true;
        if (finished.kind == OpKind::Header && !comm->isSend) {
          comm->headerQueued = false;
          if (ncclResult_t r = onHeader(comm); r != ncclSuccess) return r;
        } else {
          --finished.request->opsPending;
        }
      }
    }
  }
  return ncclSuccess;
}

// ---------------------------------------------------------------------------------------------
// Connection establishment

void setSocketOptions(int fd, int family, int trafficClass) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (trafficClass >= 0 && trafficClass < 256) {
    if (family == AF_INET)
      setsockopt(fd, IPPROTO_IP, IP_TOS, &trafficClass, sizeof(trafficClass));
    else
      setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &trafficClass, sizeof(trafficClass));
  }
}

// Blocking write of a few bytes on a non-blocking socket, bounded by timeoutMs.
bool sendAll(int fd, const void* data, size_t length, int timeoutMs, std::string* error) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  size_t done = 0;
  while (done < length) {
    ssize_t n = ::send(fd, static_cast<const char*>(data) + done, length - done,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *error = errnoText(errno);
      return false;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      *error = "timed out";
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>(left.count()));
  }
  return true;
}

struct ConnectState {
  Handle target{};
  int trafficClass = -1;
  uint64_t connectionId = 0;
  std::vector<int> fds;
  std::vector<bool> connected;
  std::vector<int> refusals;
  std::vector<Clock::time_point> retryAt;
  Clock::time_point deadline;
};

std::mutex gConnectMutex;
std::set<ConnectState*> gConnectStates;  // live states; a handle's pointer is trusted only if listed

uint64_t randomId() {
  static std::mutex m;
  static std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32) ^
                             static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  std::lock_guard<std::mutex> lock(m);
  return rng();
}

const sockaddr* targetAddress(const Handle& h) { return reinterpret_cast<const sockaddr*>(&h.address); }

// Starts a non-blocking connect for stream i. Returns false on an immediate hard error.
bool startConnect(ConnectState* st, int i, std::string* error) {
  int family = targetAddress(st->target)->sa_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = "socket(): " + errnoText(errno);
    return false;
  }
  setSocketOptions(fd, family, st->trafficClass);
  st->fds[i] = fd;
  int rc = ::connect(fd, targetAddress(st->target), st->target.addressLength);
  if (rc == 0 || errno == EINPROGRESS || errno == ECONNREFUSED) return true;  // refusal seen later
  *error = "connect(): " + errnoText(errno);
  return false;
}

void destroyConnectState(ConnectState* st, Handle* handle) {
  {
    std::lock_guard<std::mutex> lock(gConnectMutex);
    gConnectStates.erase(st);
  }
  for (int fd : st->fds)
    if (fd >= 0) ::close(fd);
  handle->connectState = 0;
  delete st;
}

// One step of stream i: returns 1 when connected (hello sent), 0 when still pending, -1 on error.
int stepConnect(ConnectState* st, int i, std::string* error) {
  auto now = Clock::now();
  if (st->fds[i] < 0) {
    if (now < st->retryAt[i]) return 0;
    if (!startConnect(st, i, error)) return -1;
  }
  pollfd p{st->fds[i], POLLOUT, 0};
  if (poll(&p, 1, 0) <= 0) return 0;
  int soError = 0;
  socklen_t len = sizeof(soError);
  getsockopt(st->fds[i], SOL_SOCKET, SO_ERROR, &soError, &len);
  if (soError == 0 && !(p.revents & (POLLERR | POLLHUP))) {
    Hello hello{kHelloMagic, kWireVersion, static_cast<uint16_t>(i), st->target.nStreams, 0, 0,
                st->connectionId};
    std::string sendError;
    if (!sendAll(st->fds[i], &hello, sizeof(hello), settings().handshakeTimeoutMs, &sendError)) {
      *error = "sending hello: " + sendError;
      return -1;
    }
    return 1;
  }
  if (soError == 0) soError = ECONNREFUSED;
  ::close(st->fds[i]);
  st->fds[i] = -1;
  if (soError == ECONNREFUSED || soError == ETIMEDOUT || soError == ECONNRESET) {
    if (++st->refusals[i] > settings().connectRetries) {
      *error = errnoText(soError) + " after " + std::to_string(st->refusals[i]) + " attempts";
      return -1;
    }
    st->retryAt[i] = now + std::chrono::milliseconds(std::min(10 * st->refusals[i], 200));
    return 0;
  }
  *error = errnoText(soError);
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Listening and accepting

struct Incoming {
  int fd;
  Hello hello;
  size_t received;
  Clock::time_point deadline;
  std::string peer;
};

struct Group {
  uint64_t connectionId;
  std::vector<int> fds;  // by stream index, -1 until arrived
  int arrived;
  Clock::time_point deadline;
  std::string peer;
};

struct ListenComm {
  int fd = -1;
  int dev = 0;
  int nStreams = 1;
  std::string address;
  std::vector<Incoming> incoming;
  std::vector<Group> groups;
};

Comm* makeComm(bool isSend, std::vector<int> fds, std::string peer) {
  auto* comm = new Comm();
  comm->isSend = isSend;
  comm->peer = std::move(peer);
  for (int fd : fds) {
    Stream s;
    s.fd = fd;
    comm->streams.push_back(std::move(s));
  }
  return comm;
}

void closeComm(Comm* comm) {
  for (Stream& s : comm->streams)
    if (s.fd >= 0) ::close(s.fd);
  delete comm;
}

}  // namespace

const Settings& settings() {
  static const Settings values = readSettings();
  return values;
}

ncclResult_t init(ncclDebugLogger_t logger) {
  setLogger(logger);
  static std::once_flag once;
  std::call_once(once, [] {
    std::string filter = envString("EPX_SOCKET_IFNAME");
    gDevices = discoverInterfaces(filter);
    for (const Interface& itf : gDevices) {
      gNames.push_back(itf.name);
      gPciPaths.push_back(itf.pciPath);
    }
    std::string list;
    for (size_t i = 0; i < gDevices.size(); ++i) {
      list += " [" + std::to_string(i) + "]" + gDevices[i].name + ":" +
              formatAddress(reinterpret_cast<const sockaddr*>(&gDevices[i].address));
    }
    if (gDevices.empty()) {
      EPX_WARN(NCCL_INIT | NCCL_NET, "NET/EPX-Socket: no usable interface%s%s",
               filter.empty() ? "" : " matches EPX_SOCKET_IFNAME=", filter.c_str());
    } else {
      EPX_INFO(NCCL_INIT | NCCL_NET, "NET/EPX-Socket: using%s; %d stream(s) per connection",
               list.c_str(), settings().nStreams);
    }
  });
  return gDevices.empty() ? ncclSystemError : ncclSuccess;
}

ncclResult_t devices(int* count) {
  *count = static_cast<int>(gDevices.size());
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  if (dev < 0 || dev >= static_cast<int>(gDevices.size())) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: getProperties for device %d of %zu", dev, gDevices.size());
    return ncclInvalidUsage;
  }
  const Interface& itf = gDevices[dev];
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(gNames[dev].c_str());
  props->pciPath = gPciPaths[dev].empty() ? nullptr : const_cast<char*>(gPciPaths[dev].c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;
  props->forceFlush = 0;
  props->speed = itf.speedMbps > 0 ? itf.speedMbps : 10000;
  props->port = 0;
  fillHostNetDefaults(props, dev, settings().maxRecvs);
  return ncclSuccess;
}

ncclResult_t listen(int dev, void* opaqueHandle, void** listenComm) {
  *listenComm = nullptr;
  if (dev < 0 || dev >= static_cast<int>(gDevices.size())) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: listen on device %d of %zu", dev, gDevices.size());
    return ncclInvalidUsage;
  }
  const Interface& itf = gDevices[dev];
  int family = itf.address.ss_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: socket(): %s", errnoText(errno).c_str());
    return ncclSystemError;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage address = itf.address;
  socklen_t length = itf.addressLength;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd, 512) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: cannot listen on %s: %s", itf.name.c_str(),
             errnoText(errno).c_str());
    ::close(fd);
    return ncclSystemError;
  }
  auto* handle = static_cast<Handle*>(opaqueHandle);
  memset(handle, 0, sizeof(Handle));
  handle->magic = kHandleMagic;
  handle->version = kWireVersion;
  handle->nStreams = static_cast<uint16_t>(settings().nStreams);
  handle->addressLength = length;
  memcpy(&handle->address, &address, length);
  sealHandle(*handle);

  auto* lc = new ListenComm();
  lc->fd = fd;
  lc->dev = dev;
  lc->nStreams = settings().nStreams;
  lc->address = formatAddress(reinterpret_cast<sockaddr*>(&address));
  EPX_INFO(NCCL_NET, "NET/EPX-Socket: listening on %s (%s)", lc->address.c_str(), itf.name.c_str());
  *listenComm = lc;
  return ncclSuccess;
}

ncclResult_t connect(const NetContext* ctx, int dev, void* opaqueHandle, void** sendComm) {
  *sendComm = nullptr;
  (void)dev;
  auto* handle = static_cast<Handle*>(opaqueHandle);
  ConnectState* st = nullptr;
  {
    std::lock_guard<std::mutex> lock(gConnectMutex);
    auto* candidate = reinterpret_cast<ConnectState*>(handle->connectState);
    if (candidate != nullptr && gConnectStates.count(candidate)) st = candidate;
  }
  if (st == nullptr) {
    std::string bad = validateHandle(*handle);
    if (!bad.empty()) {
      EPX_WARN(NCCL_NET, "NET/EPX-Socket: connect: malformed handle: %s", bad.c_str());
      return ncclInternalError;
    }
    st = new ConnectState();
    st->target = *handle;
    st->trafficClass = ctx != nullptr ? ctx->trafficClass : -1;
    st->connectionId = randomId();
    int n = handle->nStreams;
    st->fds.assign(n, -1);
    st->connected.assign(n, false);
    st->refusals.assign(n, 0);
    st->retryAt.assign(n, Clock::now());
    st->deadline = Clock::now() + std::chrono::milliseconds(settings().connectTimeoutMs);
    {
      std::lock_guard<std::mutex> lock(gConnectMutex);
      gConnectStates.insert(st);
    }
    handle->connectState = reinterpret_cast<uint64_t>(st);
  }
  std::string peer = formatAddress(targetAddress(st->target));
  bool all = true;
  for (size_t i = 0; i < st->fds.size(); ++i) {
    if (st->connected[i]) continue;
    std::string error;
    int r = stepConnect(st, static_cast<int>(i), &error);
    if (r < 0) {
      EPX_WARN(NCCL_NET, "NET/EPX-Socket: connect to %s (stream %zu) failed: %s", peer.c_str(), i,
               error.c_str());
      destroyConnectState(st, handle);
      return ncclSystemError;
    }
    if (r == 1)
      st->connected[i] = true;
    else
      all = false;
  }
  if (!all) {
    if (Clock::now() > st->deadline) {
      EPX_WARN(NCCL_NET, "NET/EPX-Socket: connect to %s timed out after %d ms", peer.c_str(),
               settings().connectTimeoutMs);
      destroyConnectState(st, handle);
      return ncclSystemError;
    }
    return ncclSuccess;
  }
  Comm* comm = makeComm(true, st->fds, peer);
  std::fill(st->fds.begin(), st->fds.end(), -1);
  destroyConnectState(st, handle);
  EPX_INFO(NCCL_NET, "NET/EPX-Socket: connected to %s with %zu stream(s)", peer.c_str(),
           comm->streams.size());
  *sendComm = comm;
  return ncclSuccess;
}

ncclResult_t accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr) return ncclInternalError;
  auto now = Clock::now();
  auto handshake = std::chrono::milliseconds(settings().handshakeTimeoutMs);
  while (true) {
    sockaddr_storage from{};
    socklen_t length = sizeof(from);
    int fd = ::accept4(lc->fd, reinterpret_cast<sockaddr*>(&from), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        EPX_WARN(NCCL_NET, "NET/EPX-Socket: accept on %s: %s", lc->address.c_str(),
                 errnoText(errno).c_str());
        return ncclSystemError;
      }
      break;
    }
    setSocketOptions(fd, from.ss_family, -1);
    lc->incoming.push_back(Incoming{fd, Hello{}, 0, now + handshake,
                                    formatAddress(reinterpret_cast<sockaddr*>(&from))});
  }
  for (size_t i = 0; i < lc->incoming.size();) {
    Incoming& in = lc->incoming[i];
    std::string drop;
    while (in.received < sizeof(Hello)) {
      ssize_t n = ::recv(in.fd, reinterpret_cast<char*>(&in.hello) + in.received,
                         sizeof(Hello) - in.received, MSG_DONTWAIT);
      if (n > 0) {
        in.received += static_cast<size_t>(n);
      } else if (n == 0) {
        drop = "closed before its hello";
        break;
      } else if (errno == EINTR) {
        continue;
      } else {
        if (errno != EAGAIN && errno != EWOULDBLOCK) drop = errnoText(errno);
        break;
      }
    }
    if (drop.empty() && in.received < sizeof(Hello)) {
      if (now > in.deadline) drop = "sent no hello in time";
      else {
        ++i;
        continue;
      }
    }
    if (drop.empty()) drop = validateHello(in.hello);
    if (drop.empty() && in.hello.nStreams != lc->nStreams)
      drop = "announces " + std::to_string(in.hello.nStreams) + " streams, listener has " +
             std::to_string(lc->nStreams);
    Group* group = nullptr;
    if (drop.empty()) {
      for (Group& g : lc->groups)
        if (g.connectionId == in.hello.connectionId) group = &g;
      if (group == nullptr) {
        lc->groups.push_back(Group{in.hello.connectionId, std::vector<int>(lc->nStreams, -1), 0,
                                   now + handshake, in.peer});
        group = &lc->groups.back();
      }
      if (group->fds[in.hello.streamIndex] >= 0) drop = "duplicate stream";
    }
    if (!drop.empty()) {
      EPX_WARN(NCCL_NET, "NET/EPX-Socket: dropping incoming connection from %s on %s: %s",
               in.peer.c_str(), lc->address.c_str(), drop.c_str());
      ::close(in.fd);
    } else {
      group->fds[in.hello.streamIndex] = in.fd;
      ++group->arrived;
    }
    lc->incoming.erase(lc->incoming.begin() + static_cast<long>(i));
  }
  for (size_t g = 0; g < lc->groups.size(); ++g) {
    Group& group = lc->groups[g];
    if (group.arrived == lc->nStreams) {
      Comm* comm = makeComm(false, group.fds, group.peer);
      EPX_INFO(NCCL_NET, "NET/EPX-Socket: accepted %s on %s with %d stream(s)", group.peer.c_str(),
               lc->address.c_str(), lc->nStreams);
      lc->groups.erase(lc->groups.begin() + static_cast<long>(g));
      *recvComm = comm;
      return ncclSuccess;
    }
    if (now > group.deadline) {
      EPX_WARN(NCCL_NET, "NET/EPX-Socket: connection from %s on %s: only %d of %d streams arrived",
               group.peer.c_str(), lc->address.c_str(), group.arrived, lc->nStreams);
      for (int fd : group.fds)
        if (fd >= 0) ::close(fd);
      lc->groups.erase(lc->groups.begin() + static_cast<long>(g));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)data;
  (void)size;
  *mhandle = nullptr;
  if (comm == nullptr) return ncclInternalError;
  if (type != NCCL_PTR_HOST) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: cannot register memory of type %d (host memory only)", type);
    return ncclInternalError;
  }
  *mhandle = comm;  // any non-null value; host memory needs no registration
  return ncclSuccess;
}

ncclResult_t deregMr(void* comm, void* mhandle) {
  (void)mhandle;
  return comm == nullptr ? ncclInternalError : ncclSuccess;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  auto* comm = static_cast<Comm*>(sendComm);
  if (comm == nullptr || !comm->isSend) return ncclInternalError;
  if (!comm->error.empty()) return ncclSystemError;
  if (size > 0 && data == nullptr) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: isend of %zu bytes from a null buffer", size);
    return ncclInvalidUsage;
  }
  Request* r = allocateRequest(comm);
  if (r == nullptr) return ncclSuccess;  // too many in flight: NCCL retries later
  Split split = splitMessage(size, static_cast<int>(comm->streams.size()), settings().minPartBytes);
  r->sendSize = size;
  r->header = MessageHeader{kHeaderMagic, tag, size, static_cast<uint32_t>(split.nParts), 0,
                            split.partSize};
  comm->streams[0].queue.push_back(
      Op{reinterpret_cast<char*>(&r->header), sizeof(MessageHeader), 0, r, OpKind::Header});
  r->opsPending = 1;
  for (int p = 0; p < split.nParts; ++p) {
    comm->streams[p].queue.push_back(
        Op{static_cast<char*>(data) + split.offset(p), split.length(p, size), 0, r, OpKind::Data});
    ++r->opsPending;
  }
  *request = r;
  (void)progress(comm);  // a failure is recorded in the comm and reported by test()
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** request) {
  *request = nullptr;
  auto* comm = static_cast<Comm*>(recvComm);
  if (comm == nullptr || comm->isSend) return ncclInternalError;
  if (!comm->error.empty()) return ncclSystemError;
  if (n < 1 || n > kMaxGroupedRecvs) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: irecv of %d grouped receives (1..%d)", n, kMaxGroupedRecvs);
    return ncclInvalidUsage;
  }
  Request* r = allocateRequest(comm);
  if (r == nullptr) return ncclSuccess;
  r->nSlots = n;
  r->headersPending = n;
  for (int i = 0; i < n; ++i) {
    r->slots[i] = Slot{static_cast<char*>(data[i]), sizes[i], tags[i], 0, false};
    comm->expecting.push_back(r);
  }
  *request = r;
  (void)progress(comm);  // a failure is recorded in the comm and reported by test()
  return ncclSuccess;
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = nullptr;  // host memory only: nothing to flush
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  *done = 0;
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || !r->inUse) {
    EPX_WARN(NCCL_NET, "NET/EPX-Socket: test of an unknown request");
    return ncclInternalError;
  }
  Comm* comm = r->comm;
  if (ncclResult_t res = progress(comm); res != ncclSuccess) return res;
  if (!requestDone(r)) return ncclSuccess;
  *done = 1;
  if (sizes != nullptr) {
    if (comm->isSend) {
      sizes[0] = static_cast<int>(r->sendSize);
    } else {
      for (int i = 0; i < r->nSlots; ++i) sizes[i] = static_cast<int>(r->slots[i].size);
    }
  }
  releaseRequest(r);
  return ncclSuccess;
}

ncclResult_t closeSend(void* sendComm) {
  if (sendComm != nullptr) closeComm(static_cast<Comm*>(sendComm));
  return ncclSuccess;
}

ncclResult_t closeRecv(void* recvComm) {
  if (recvComm != nullptr) closeComm(static_cast<Comm*>(recvComm));
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr) return ncclSuccess;
  if (lc->fd >= 0) ::close(lc->fd);
  for (Incoming& in : lc->incoming) ::close(in.fd);
  for (Group& g : lc->groups)
    for (int fd : g.fds)
      if (fd >= 0) ::close(fd);
  delete lc;
  return ncclSuccess;
}

}  // namespace epx::plugin::socket
