#include "rig/ipc_backend.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/fnv.h"
#include "common/log.h"
#include "rig/copy_plan.h"
#include "gin/cuda_driver.h"
#include "rig/gin_kernels.h"
#include "rig/ipc_stats.h"
#include "rig/nic_pacer.h"
#include "rig/readable.h"
#include "gin/registry.h"
#include "gin/signals.h"
#include "socket/transport.h"

namespace epx::plugin::gin {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kHandleMagic = 0x45504749;  // "EPGI"
constexpr int kGinMaxRecvs = 8;
constexpr size_t kSignalSlots = 256;            // pinned slots for reading signals in applySignals

// EPX_GIN_STREAMS=process: one copy and one signal stream per CUDA context of the process, shared
// by every GIN context (copy_plan.h, StreamPlan). Created by the first user, destroyed by the last.
struct SharedStreams {
  CUstream copy = nullptr;  // every peer's ops
  CUstream signal = nullptr;
  int users = 0;
};
std::mutex gSharedStreamsMutex;
std::map<CUcontext, SharedStreams>& sharedStreams() {
  static std::map<CUcontext, SharedStreams> m;
  return m;
}
constexpr auto kSlowCall = std::chrono::milliseconds(200);
constexpr auto kStuckRequest = std::chrono::seconds(2);
// How long a window's registration waits for the GIN progress thread's warm-up (ipcRegMrSym).
constexpr auto kWarmWaitLimit = std::chrono::milliseconds(5000);

struct IpcHandle {
  uint32_t magic;
  uint32_t pid;
  char bootId[40];
  char path[80];  // abstract unix socket name, without the leading NUL
};
static_assert(sizeof(IpcHandle) <= NCCL_NET_HANDLE_MAXSIZE);

// kLanding carries (as an fd) a small exportable device buffer that peers may write into: the
// warm-up copies at connect and registration write there, never into a user's window.
enum MsgType : uint32_t { kHello = 1, kRegister = 2, kSignal = 3, kLanding = 4 };
constexpr uint32_t kNoRegistration = 0xffffffffu;  // Mapping of a landing buffer

struct RegisterInfo {
  uint32_t index;
  uint32_t mappable;
  uint64_t allocSize;
  uint64_t offset;  // of the region inside the allocation
  uint64_t size;
};

struct Msg {
  uint32_t type;
  uint32_t from;
  union {
    RegisterInfo reg;
    SignalUpdate signal;
  };
};

struct Received {
  RegisterInfo info;
  int fd;
};

struct Mapping {
  uint32_t registration;
  CUdeviceptr va;
  size_t size;
};

struct Context;

struct Request {
  int peer = 0;
  // Emulated NIC (EPX_GIN_EMU_GBPS): the op may leave `pending` (report done, send its signal) only
  // from this time on: its departure for a put, its arrival at the peer for an op with a signal.
  // Default (epoch): not paced.
  Clock::time_point notBefore{};
  uint64_t seq = 0;
  size_t bytes = 0;
  bool copied = false;
  bool reportedStuck = false;
  Clock::time_point posted;
  Clock::time_point issued;    // when NCCL's proxy handed the op to ipcPut (latency accounting)
  Clock::time_point copiedAt;  // when advance() saw its copy complete
  bool withSignal = false;
  SignalUpdate signal{};
  bool done = false;
};

struct Peer {
  int out = -1;  // we send to the peer on this socket
  int in = -1;   // the peer sends to us on this one
  bool lost = false;  // its connection closed or broke (the process died): its ops are dropped
  CUstream stream = nullptr;
  PeerOrder order;
  // Completion word (pinned host memory): after each op the stream writes the op's sequence
  // number here with cuStreamWriteValue64. No CUDA events: cuEventRecord stalled the progress
  // thread for as long as a GIN kernel ran, on an event's first records (see docs/plugins.md).
  uint64_t* done = nullptr;
  CUdeviceptr doneDev = 0;
  std::deque<Request*> pending;  // posted, not yet done, in order
  std::deque<Received> registrations;
  int landingFd = -1;        // the peer's landing buffer, as received (-1: none yet / none offered)
  bool landingOffered = false;
  CUdeviceptr landing = 0;   // the peer's landing buffer mapped here (0: not mapped)
};

struct Context {
  int rank = 0;
  int nRanks = 0;
  int index = 0;  // GIN context index within the communicator (connect order per GIN instance)
  uint64_t commHash = 0;
  std::shared_ptr<ContextStats> stats;  // per-peer counters, listed for epxGinIpcStatsSnapshot
  NicPacer* nic = nullptr;              // this device's emulated NIC (stats keeps it); null: off
  CUcontext cu = nullptr;
  CUdevice device = 0;
  Registry registry{1, 0};
  std::vector<Peer> peers;
  std::vector<Mapping> mappings;
  std::vector<SignalUpdate> incoming;
  // Parallel to `incoming`: the peer each signal came from and when its message was received.
  std::vector<std::pair<int, Clock::time_point>> incomingFrom;
  uint64_t* doneWords = nullptr;  // pinned, one per peer (Peer::done points here)
  CUstream signalStream = nullptr;
  CUdeviceptr scratch = 0;  // for warm-up copies
  uint64_t* signalHost = nullptr;  // pinned, kSignalSlots: current values read in applySignals
  CUdeviceptr warmWord = 0;        // device address of a pinned word for warm-up stream writes
  size_t landingSize = 0;
  // Set once the GIN progress thread has run every CUDA call of the put path (see warmUp).
  std::atomic<bool> progressWarm{false};
  std::atomic<bool> warmWaitGaveUp{false};
  StreamPlan streamPlan = StreamPlan::PerPeer;  // PerProcess: the streams belong to sharedStreams()
  // Received signals are added by the signal kernel; by read-back only when the kernel is missing
  // (a build without CUDA device code) or does not load.
  bool signalKernel = true;
  GinKernels kernels;
  std::vector<int> inFds, readable;              // progress: the peers' receive sockets, and which have data
  std::recursive_mutex mutex;
  std::string error;
};

struct ListenComm {
  int fd = -1;
  std::string path;
  uint64_t commHash = 0;
  int context = 0;
};

// What GIN init hands NCCL as its context: NCCL passes the per-communicator one back to listen,
// which numbers the communicator's GIN contexts. Kept for the life of the process (a few bytes per
// init; NCCL may pass a context to finalize more than once, or never).
struct Instance {
  uint64_t commHash = 0;
  std::atomic<int> nextContext{0};
};
std::mutex gInstancesMutex;
std::deque<std::unique_ptr<Instance>> gInstances;
std::atomic<int> gUnknownInstanceContexts{0};

// Settings from the environment (EPX_GIN_EMU_*, EPX_GIN_STREAMS), read at every init (a bad value
// refuses init); connect uses them.
std::mutex gEmulationMutex;
NicEmulation gEmulation;
StreamPlan gStreamPlan = StreamPlan::PerPeer;

const CudaDriver* cu = nullptr;

uint64_t toNs(Clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
Clock::time_point fromNs(uint64_t ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

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

#define EPX_CU(ctx, call)                                                               \
  do {                                                                                  \
    CUresult _r = (call);                                                               \
    if (_r != CUDA_SUCCESS) {                                                           \
      fail((ctx), std::string(#call) + ": " + cuErrorText(_r));                         \
      return ncclUnhandledCudaError;                                                    \
    }                                                                                   \
  } while (0)

bool makeCurrent(Context* ctx) {
  CUcontext current = nullptr;
  cu->cuCtxGetCurrent(&current);
  if (current == ctx->cu) return true;
  return cu->cuCtxSetCurrent(ctx->cu) == CUDA_SUCCESS;
}

sockaddr_un abstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 2);
  memcpy(a.sun_path + 1, name.data(), n);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
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

// Non-blocking receive of one message; returns 1 got, 0 nothing, -1 error/closed.
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

// Waits for a stream by polling it from this thread. cuStreamSynchronize follows the context's
// scheduling flags, which belong to the application: with cudaDeviceScheduleBlockingSync (what a
// host with more GPU processes than cores wants for its own waits) the progress thread would sleep
// on an interrupt for every signal read-back (64-337 us measured at 8 fake nodes, against 19-54 us
// spinning). The read-back is a few bytes and short, so the progress thread keeps spinning.
CUresult spinSynchronize(CUstream stream) {
  for (;;) {
    CUresult r = cu->cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY) return r;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

uint64_t elapsedNs(Clock::time_point from, Clock::time_point to) {
  return to > from ? static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count()) : 0;
}

using DeviceSignalAdds = std::vector<std::pair<CUdeviceptr, uint64_t>>;  // (address, delta)

// The backend's signal kernel adds the deltas with device atomics, in
// batches of SignalAddBatch::kMax; nothing is waited for.
ncclResult_t addByKernel(Context* ctx, const DeviceSignalAdds& device) {
  const auto start = Clock::now();
  for (size_t first = 0; first < device.size(); first += SignalAddBatch::kMax) {
    SignalAddBatch batch;
    batch.count = static_cast<uint32_t>(std::min<size_t>(SignalAddBatch::kMax, device.size() - first));
    for (uint32_t i = 0; i < batch.count; ++i) {
      batch.address[i] = device[first + i].first;
      batch.delta[i] = device[first + i].second;
    }
    EPX_CU(ctx, ctx->kernels.signalAdd(ctx->signalStream, batch));
  }
  ctx->stats->applyBatch(elapsedNs(start, Clock::now()));
  return ncclSuccess;
}

// Without the signal kernel (a build without CUDA device code, or a module that does not load on
// this GPU): read back, add, write. The owner's progress thread is the only remote writer of its
// signals, and NCCL forbids a device reset racing with updates, so a read-modify-write through the
// copy engine is safe. The reads land in pinned memory (a pageable destination would make CUDA stage
// the copy and block); one synchronisation per batch of kSignalSlots signals.
ncclResult_t addByReadback(Context* ctx, const DeviceSignalAdds& device) {
  for (size_t first = 0; first < device.size(); first += kSignalSlots) {
    size_t n = std::min(kSignalSlots, device.size() - first);
    auto start = Clock::now();
    for (size_t i = 0; i < n; ++i)
      EPX_CU(ctx, cu->cuMemcpyDtoHAsync(&ctx->signalHost[i], device[first + i].first, sizeof(uint64_t),
                                        ctx->signalStream));
    EPX_CU(ctx, spinSynchronize(ctx->signalStream));
    for (size_t i = 0; i < n; ++i)
      EPX_CU(ctx, cu->cuStreamWriteValue64(ctx->signalStream, device[first + i].first,
                                           ctx->signalHost[i] + device[first + i].second, 0));
    auto took = Clock::now() - start;
    ctx->stats->applyBatch(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
    if (took > kSlowCall)
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: applying %zu signal(s) took %lld ms", ctx->rank, n,
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  }
  return ncclSuccess;
}

ncclResult_t applySignals(Context* ctx) {
  if (ctx->incoming.empty()) return ncclSuccess;
  std::vector<SignalUpdate> updates;
  updates.swap(ctx->incoming);
  std::vector<std::pair<int, Clock::time_point>> from;
  from.swap(ctx->incomingFrom);
  for (const SignalUpdate& u : updates) {
    Registration* r = ctx->registry.byIndex(u.registration);
    if (r == nullptr) return fail(ctx, "signal for unknown registration " + std::to_string(u.registration));
    std::string bad = validateSignal(u, r->size);
    if (!bad.empty()) return fail(ctx, bad);
  }
  DeviceSignalAdds device;
  for (const auto& [key, delta] : coalesce(updates)) {
    Registration* r = ctx->registry.byIndex(key.first);
    CUdeviceptr address = static_cast<CUdeviceptr>(r->base + key.second);
    if (r->placement == Placement::Host) {
      __atomic_fetch_add(reinterpret_cast<uint64_t*>(address), delta, __ATOMIC_SEQ_CST);
      continue;
    }
    device.emplace_back(address, delta);
  }
  if (!device.empty()) {
    const ncclResult_t r =
        ctx->signalKernel ? addByKernel(ctx, device) : addByReadback(ctx, device);
    if (r != ncclSuccess) return r;
  }
  const auto applied = Clock::now();
  for (const auto& [peer, received] : from)
    ctx->stats->signalApplied(peer, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(applied - received).count()));
  return ncclSuccess;
}

ncclResult_t advance(Context* ctx) {
  const auto now = Clock::now();
  for (int peer = 0; peer < ctx->nRanks; ++peer) {
    Peer& p = ctx->peers[static_cast<size_t>(peer)];
    uint64_t doneSeq = __atomic_load_n(p.done, __ATOMIC_ACQUIRE);
    for (Request* r : p.pending) {
      if (r->copied) continue;
      if (r->seq > doneSeq) break;  // the stream runs ops in order
      r->copied = true;
      r->copiedAt = now;
      p.order.complete(r->seq);
    }
    p.order.release();
    if (!p.pending.empty()) {  // diagnostics: the oldest op of this peer should not take seconds
      Request* oldest = p.pending.front();
      // Counted from when the emulated NIC let it go (if later than posting): a slow emulated rate
      // is not a stuck op.
      auto age = Clock::now() - std::max(oldest->posted, oldest->notBefore);
      if (!oldest->reportedStuck && age > kStuckRequest) {
        oldest->reportedStuck = true;
        EPX_WARN(NCCL_NET,
                 "GIN/EPX-ipc rank %d: op %llu to rank %d (%zu bytes, %s) pending for %lld ms: "
                 "copy %s (stream completed op %llu), %s",
                 ctx->rank, static_cast<unsigned long long>(oldest->seq), peer, oldest->bytes,
                 oldest->withSignal ? "with signal" : "no signal",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(age).count()),
                 oldest->copied ? "done" : "not done", static_cast<unsigned long long>(__atomic_load_n(p.done, __ATOMIC_ACQUIRE)),
                 p.order.isReleased(oldest->seq) ? "released, signal not yet sent" : "not released");
      }
    }
    // Ops leave `pending` in posting order, once their copy and every earlier one to this peer are
    // complete (released). This is where an op is reported done and its signal is sent, so the
    // emulated NIC gates it here too: not before its departure (a put) or its arrival (an op with
    // a signal), see ipcPut. A later op waits behind an earlier one, so a later signal never
    // overtakes an earlier arrival.
    while (!p.pending.empty() && p.order.isReleased(p.pending.front()->seq)) {
      Request* r = p.pending.front();
      if (r->notBefore != Clock::time_point{} && Clock::now() < r->notBefore) break;  // still on the emulated wire
      if (r->withSignal) {
        if (peer == ctx->rank) {
          ctx->incoming.push_back(r->signal);
          ctx->incomingFrom.emplace_back(peer, now);
        } else if (!p.lost) {
          Msg m{};
          m.type = kSignal;
          m.from = static_cast<uint32_t>(ctx->rank);
          m.signal = r->signal;
          if (!sendMsg(p.out, m, -1, false)) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // retry at the next progress
            lose(ctx, peer, "sending a signal to rank " + std::to_string(peer) + ": " + strerror(errno), false);
          }
        }
      }
      r->done = true;
      ctx->stats->opDone(peer, r->bytes > 0, elapsedNs(r->issued, r->copiedAt), elapsedNs(r->issued, now));
      p.pending.pop_front();
    }
  }
  return ncclSuccess;
}

// Issues a put's copy on the peer's stream, on a copy engine (see copy_plan.h).
ncclResult_t issueCopy(Context* ctx, Peer& p, CUdeviceptr dst, CUdeviceptr src, size_t size) {
  if (cu->memcpyBatchAsync13 != nullptr || cu->memcpyBatchAsync128 != nullptr) {
    CUmemcpyAttributes attr{};
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    size_t attrIndex = 0, bytes = size, failIdx = 0;
    if (cu->memcpyBatchAsync13 != nullptr)
      EPX_CU(ctx, cu->memcpyBatchAsync13(&dst, &src, &bytes, 1, &attr, &attrIndex, 1, p.stream));
    else
      EPX_CU(ctx, cu->memcpyBatchAsync128(&dst, &src, &bytes, 1, &attr, &attrIndex, 1, &failIdx, p.stream));
    return ncclSuccess;
  }
  EPX_CU(ctx, cu->cuMemcpyAsync(dst, src, size, p.stream));
  return ncclSuccess;
}

// One warm-up copy through the put path (issueCopy), waited for.
ncclResult_t warmCopy(Context* ctx, Peer& p, CUdeviceptr dst, CUdeviceptr src, size_t size) {
  if (ncclResult_t r = issueCopy(ctx, p, dst, src, size); r != ncclSuccess) return r;
  EPX_CU(ctx, cu->cuStreamSynchronize(p.stream));
  return ncclSuccess;
}

constexpr size_t kWarmSizes[] = {8, 4096, 65536};

// Anything the driver does lazily on a first call (per process, per thread, per stream or per
// memory mapping: loading internal copy kernels, thread-local state, first use of
// cuMemcpyBatchAsync, peer mappings) may wait for running kernels, and a GIN kernel spins until
// the plugin's copy lands. So every call of the put and signal paths runs here once, with the
// same API and stream as a real op, on the calling thread, while no GIN kernel can run.
// Copies read from `src` (when given) and write only into scratch and the peers' landing buffers.
ncclResult_t warmUp(Context* ctx, CUdeviceptr src, size_t srcSize) {
  for (Peer& p : ctx->peers) {
    for (size_t bytes : kWarmSizes) {
      if (ncclResult_t r = warmCopy(ctx, p, ctx->scratch + 65536, ctx->scratch, bytes); r != ncclSuccess) return r;
      if (p.landing != 0 && bytes <= ctx->landingSize)
        if (ncclResult_t r = warmCopy(ctx, p, p.landing, ctx->scratch, bytes); r != ncclSuccess) return r;
      if (src != 0 && bytes <= srcSize)
        if (ncclResult_t r = warmCopy(ctx, p, ctx->scratch, src, bytes); r != ncclSuccess) return r;
    }
    EPX_CU(ctx, cu->cuStreamWriteValue64(p.stream, ctx->warmWord, 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    EPX_CU(ctx, cu->cuStreamSynchronize(p.stream));
  }
  if (ctx->signalKernel) {
    SignalAddBatch batch;
    batch.count = 1;
    batch.address[0] = ctx->scratch;  // adds 0
    EPX_CU(ctx, ctx->kernels.signalAdd(ctx->signalStream, batch));
    EPX_CU(ctx, cu->cuStreamSynchronize(ctx->signalStream));
    return ncclSuccess;
  }
  EPX_CU(ctx, cu->cuMemcpyDtoHAsync(ctx->signalHost, ctx->scratch, sizeof(uint64_t), ctx->signalStream));
  EPX_CU(ctx, cu->cuStreamSynchronize(ctx->signalStream));
  EPX_CU(ctx, cu->cuStreamWriteValue64(ctx->signalStream, ctx->scratch, ctx->signalHost[0], 0));
  EPX_CU(ctx, cu->cuStreamSynchronize(ctx->signalStream));
  return ncclSuccess;
}

// Maps a peer's exported allocation of `size` bytes (fd consumed) for this device.
CUresult mapPeer(Context* ctx, int fd, size_t size, CUdeviceptr* va) {
  *va = 0;
  CUmemGenericAllocationHandle h;
  CUresult r = cu->cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  if (r != CUDA_SUCCESS) return r;
  CUdeviceptr at = 0;
  r = cu->cuMemAddressReserve(&at, size, 0, 0, 0);
  if (r == CUDA_SUCCESS) {
    r = cu->cuMemMap(at, size, 0, h, 0);
    if (r != CUDA_SUCCESS) cu->cuMemAddressFree(at, size);
  }
  cu->cuMemRelease(h);  // the mapping keeps the allocation alive
  if (r != CUDA_SUCCESS) return r;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = static_cast<int>(ctx->device);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = cu->cuMemSetAccess(at, size, &access, 1);
  if (r != CUDA_SUCCESS) {
    cu->cuMemUnmap(at, size);
    cu->cuMemAddressFree(at, size);
    return r;
  }
  *va = at;
  return CUDA_SUCCESS;
}

// Creates this rank's landing buffer (exportable device memory), returning its fd or -1 when the
// device cannot export (then peers' warm-ups skip the peer-write copies).
int createLanding(Context* ctx) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(ctx->device);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  if (cu->cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granularity == 0)
    return -1;
  size_t size = (65536 + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle h;
  if (cu->cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS) return -1;
  int fd = -1;
  CUdeviceptr va = 0;
  bool ok = cu->cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS &&
            cu->cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS;
  if (ok && cu->cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS) {
    cu->cuMemAddressFree(va, size);
    ok = false;
  }
  cu->cuMemRelease(h);
  if (!ok) {
    if (fd >= 0) close(fd);
    return -1;
  }
  ctx->mappings.push_back(Mapping{kNoRegistration, va, size});  // unmapped at closeColl
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = static_cast<int>(ctx->device);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cu->cuMemSetAccess(va, size, &access, 1) != CUDA_SUCCESS) {
    close(fd);
    return -1;
  }
  ctx->landingSize = size;
  return fd;
}

// Called on the GIN progress thread: the first time, runs warmUp there (per-thread first-use
// work of the driver). regMrSym of a window waits for this (see ipcRegMrSym).
ncclResult_t warmProgressThread(Context* ctx) {
  if (ctx->progressWarm.load(std::memory_order_acquire)) return ncclSuccess;
  auto start = Clock::now();
  if (ncclResult_t r = warmUp(ctx, 0, 0); r != ncclSuccess) return r;
  ctx->progressWarm.store(true, std::memory_order_release);
  EPX_INFO(NCCL_NET, "GIN/EPX-ipc rank %d: progress thread warmed up in %lld us", ctx->rank,
           static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count()));
  return ncclSuccess;
}

}  // namespace

ncclResult_t ipcInit(uint64_t commHash, ncclDebugLogger_t logger, void** instance) {
  *instance = nullptr;
  setLogger(logger);
  // NIC emulation settings first: a bad value refuses GIN (NCCL then disables the GIN plugin and
  // device communicators that need GIN fail), rather than measuring without the emulation.
  NicEmulation emulation;
  std::string note;
  std::string bad = parseNicEmulation(envString("EPX_GIN_EMU_GBPS").c_str(), envString("EPX_GIN_EMU_LATENCY_US").c_str(),
                                      &emulation, &note);
  if (!bad.empty()) {
    EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX-ipc: %s; GIN init refused (fix or unset it; see docs/plugins.md)",
             bad.c_str());
    return ncclInvalidUsage;
  }
  if (!note.empty()) EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX-ipc: %s", note.c_str());
  // The stream plan likewise.
  std::string planBad;
  const StreamPlan streamPlan = parseStreamPlan(envString("EPX_GIN_STREAMS", ""), &planBad);
  if (!planBad.empty()) {
    EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX-ipc: %s; GIN init refused (see docs/plugins.md)", planBad.c_str());
    return ncclInvalidUsage;
  }
  {
    std::lock_guard<std::mutex> lock(gEmulationMutex);
    gEmulation = emulation;
    gStreamPlan = streamPlan;
  }
  std::string why;
  cu = cudaDriver(&why);
  if (cu == nullptr) {
    EPX_INFO(NCCL_INIT | NCCL_NET, "GIN/EPX-ipc disabled: %s", why.c_str());
    return ncclSystemError;
  }
  if (ncclResult_t r = socket::init(logger); r != ncclSuccess) return r;
  auto made = std::make_unique<Instance>();
  made->commHash = commHash;
  std::lock_guard<std::mutex> lock(gInstancesMutex);
  *instance = made.get();
  gInstances.push_back(std::move(made));
  return ncclSuccess;
}

ncclResult_t ipcDevices(int* count) { return socket::devices(count); }

ncclResult_t ipcGetProperties(int dev, ncclNetProperties_v11_t* props) {
  ncclResult_t r = socket::getProperties(dev, props);
  if (r != ncclSuccess) return r;
  props->ptrSupport = NCCL_PTR_HOST | NCCL_PTR_CUDA;  // no DMABUF: NCCL hands over virtual addresses
  props->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->maxRecvs = kGinMaxRecvs;  // power of 2: NCCL's GFD queue is 32 * maxRecvs per peer
  return ncclSuccess;
}

constexpr const char* kIpcPathFormat = "epx-gin-%d-%016llx";

bool ipcDigestHandle(const void* handle, IpcHandleDigest* out) {
  const auto* h = static_cast<const IpcHandle*>(handle);
  if (h->magic != kHandleMagic) return false;
  int pid = 0;
  unsigned long long nonce = 0;
  if (sscanf(h->path, "epx-gin-%d-%16llx", &pid, &nonce) != 2 || static_cast<uint32_t>(pid) != h->pid) return false;
  char again[sizeof(h->path)];
  snprintf(again, sizeof(again), kIpcPathFormat, pid, nonce);
  if (strncmp(again, h->path, sizeof(again)) != 0) return false;
  *out = IpcHandleDigest{h->pid, 0, nonce};
  return true;
}

void ipcExpandHandle(const IpcHandleDigest& d, void* handle) {
  auto* h = static_cast<IpcHandle*>(handle);
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  h->magic = kHandleMagic;
  h->pid = d.pid;
  snprintf(h->bootId, sizeof(h->bootId), "%s", bootId().c_str());
  snprintf(h->path, sizeof(h->path), kIpcPathFormat, static_cast<int>(d.pid), static_cast<unsigned long long>(d.nonce));
}

uint64_t ipcHostHash() {
  const std::string id = bootId();
  const uint32_t low = fnv1a(id.data(), id.size());
  const uint32_t high = fnv1a(id.data(), id.size(), low ^ kFnv1aOffset);
  return (static_cast<uint64_t>(high) << 32) | low;
}

ncclResult_t ipcListen(void* instance, int dev, void* handle, void** listenComm) {
  (void)dev;
  *listenComm = nullptr;
  static std::mt19937_64 rng(std::random_device{}());
  auto* lc = new ListenComm();
  {
    // NCCL listens once per GIN context, in context order, with the communicator's instance.
    std::lock_guard<std::mutex> lock(gInstancesMutex);
    Instance* known = nullptr;
    for (const auto& i : gInstances)
      if (i.get() == instance) known = i.get();
    if (known != nullptr) {
      lc->commHash = known->commHash;
      lc->context = known->nextContext++;
    } else {
      lc->context = gUnknownInstanceContexts++;
    }
  }
  char name[80];
  snprintf(name, sizeof(name), kIpcPathFormat, static_cast<int>(getpid()),
           static_cast<unsigned long long>(rng()));
  lc->path = name;
  lc->fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  socklen_t length = 0;
  sockaddr_un a = abstractAddress(lc->path, &length);
  if (lc->fd < 0 || bind(lc->fd, reinterpret_cast<sockaddr*>(&a), length) != 0 || ::listen(lc->fd, 1024) != 0) {
    EPX_WARN(NCCL_NET, "GIN/EPX-ipc: cannot listen on @%s: %s", name, strerror(errno));
    if (lc->fd >= 0) close(lc->fd);
    delete lc;
    return ncclSystemError;
  }
  auto* h = static_cast<IpcHandle*>(handle);
  memset(h, 0, sizeof(IpcHandle));
  h->magic = kHandleMagic;
  h->pid = static_cast<uint32_t>(getpid());
  snprintf(h->bootId, sizeof(h->bootId), "%s", bootId().c_str());
  snprintf(h->path, sizeof(h->path), "%s", name);
  *listenComm = lc;
  return ncclSuccess;
}

ncclResult_t ipcConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm) {
  *collComm = nullptr;
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr || nRanks < 1 || rank < 0 || rank >= nRanks) return ncclInternalError;
  std::string myBoot = bootId();
  for (int j = 0; j < nRanks; ++j) {
    auto* h = static_cast<const IpcHandle*>(handles[j]);
    if (h->magic != kHandleMagic) {
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d's handle is not an epx ipc handle", j);
      return ncclInternalError;
    }
    if (strncmp(h->bootId, myBoot.c_str(), sizeof(h->bootId)) != 0) {
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d runs on another host; the ipc backend needs all ranks on one host", j);
      return ncclInvalidUsage;
    }
  }
  auto* ctx = new Context();
  ctx->rank = rank;
  ctx->nRanks = nRanks;
  ctx->index = lc->context;
  ctx->commHash = lc->commHash;
  ctx->registry = Registry(nRanks, rank);
  ctx->peers.resize(static_cast<size_t>(nRanks));
  auto cleanup = [&](ncclResult_t r) {
    ipcCloseColl(ctx);
    return r;
  };
  if (cu->cuCtxGetCurrent(&ctx->cu) != CUDA_SUCCESS || ctx->cu == nullptr) {
    EPX_WARN(NCCL_NET, "GIN/EPX-ipc: no CUDA context is current at connect");
    return cleanup(ncclInternalError);
  }
  cu->cuCtxGetDevice(&ctx->device);
  int timeoutMs = static_cast<int>(envInt("EPX_GIN_CONNECT_TIMEOUT_MS", 60000));
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (int j = 0; j < nRanks; ++j) {
    if (j == rank) continue;
    auto* h = static_cast<const IpcHandle*>(handles[j]);
    socklen_t length = 0;
    sockaddr_un a = abstractAddress(h->path, &length);
    int fd = -1;
    while (true) {
      fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), length) == 0) break;
      int err = errno;
      if (fd >= 0) close(fd);
      fd = -1;
      if (Clock::now() > deadline) {
        EPX_WARN(NCCL_NET, "GIN/EPX-ipc: cannot reach rank %d at @%s: %s", j, h->path, strerror(err));
        return cleanup(ncclSystemError);
      }
      usleep(1000);
    }
    ctx->peers[static_cast<size_t>(j)].out = fd;
    Msg hello{};
    hello.type = kHello;
    hello.from = static_cast<uint32_t>(rank);
    if (!sendMsg(fd, hello, -1, true)) {
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc: hello to rank %d: %s", j, strerror(errno));
      return cleanup(ncclSystemError);
    }
  }
  int accepted = 0;
  while (accepted < nRanks - 1) {
    int fd = accept4(lc->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (Clock::now() > deadline) {
        EPX_WARN(NCCL_NET, "GIN/EPX-ipc: only %d of %d peers connected in %d ms", accepted, nRanks - 1, timeoutMs);
        return cleanup(ncclSystemError);
      }
      pollfd p{lc->fd, POLLIN, 0};
      poll(&p, 1, 10);
      continue;
    }
    Msg m{};
    int passed = -1, r = 0;
    while ((r = recvMsg(fd, &m, &passed)) == 0 && Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 10);
    }
    if (r != 1 || m.type != kHello || m.from >= static_cast<uint32_t>(nRanks) ||
        static_cast<int>(m.from) == rank || ctx->peers[m.from].in >= 0) {
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc: bad hello on @%s", lc->path.c_str());
      close(fd);
      return cleanup(ncclSystemError);
    }
    ctx->peers[m.from].in = fd;
    ++accepted;
  }
  {
    std::lock_guard<std::mutex> lock(gEmulationMutex);
    ctx->streamPlan = gStreamPlan;  // as read by init
  }
  bool firstOfProcess = true;
  // The backend's streams, at the default priority (copy_plan.h).
  auto createStream = [&](CUstream* s) { return cu->cuStreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING, 0); };
  if (ctx->streamPlan == StreamPlan::PerProcess) {
    std::lock_guard<std::mutex> g(gSharedStreamsMutex);
    SharedStreams& sh = sharedStreams()[ctx->cu];
    firstOfProcess = sh.users == 0;
    if (firstOfProcess) {
      EPX_CU(ctx, createStream(&sh.copy));
      EPX_CU(ctx, createStream(&sh.signal));
    }
    ++sh.users;  // a later context uses the first one's streams
    for (Peer& p : ctx->peers) p.stream = sh.copy;
    ctx->signalStream = sh.signal;
  } else {
    for (Peer& p : ctx->peers) EPX_CU(ctx, createStream(&p.stream));
    EPX_CU(ctx, createStream(&ctx->signalStream));
  }
  {
    // Streams of this backend in the process so far, plus the caller's two (the kernels' stream
    // and one more): warn once when they outnumber the hardware queues.
    static std::atomic<int> streamsSoFar{0};
    static std::atomic<bool> warned{false};
    const int streams =
        (streamsSoFar += streamsAdded(ctx->streamPlan, static_cast<int>(ctx->peers.size()), firstOfProcess)) + 2;
    const std::string w = hardwareQueueWarning(streams, std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    if (!w.empty() && !warned.exchange(true)) EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: %s", rank, w.c_str());
  }
  EPX_CU(ctx, cu->cuMemAlloc(&ctx->scratch, 2 * 65536));
  {
    void* host = nullptr;
    EPX_CU(ctx, cu->cuMemAllocHost(&host, kSignalSlots * sizeof(uint64_t)));
    ctx->signalHost = static_cast<uint64_t*>(host);
  }
  {
    void* host = nullptr;
    EPX_CU(ctx, cu->cuMemAllocHost(&host, static_cast<size_t>(nRanks + 1) * sizeof(uint64_t)));
    ctx->doneWords = static_cast<uint64_t*>(host);
    memset(host, 0, static_cast<size_t>(nRanks + 1) * sizeof(uint64_t));
    CUdeviceptr dev = 0;
    EPX_CU(ctx, cu->cuMemHostGetDevicePointer(&dev, host, 0));
    ctx->warmWord = dev + static_cast<CUdeviceptr>(nRanks) * sizeof(uint64_t);  // the extra word
    for (int j = 0; j < nRanks; ++j) {
      Peer& p = ctx->peers[static_cast<size_t>(j)];
      p.done = ctx->doneWords + j;
      p.doneDev = dev + static_cast<CUdeviceptr>(j) * sizeof(uint64_t);
    }
  }
  if (std::string why = ctx->kernels.load(cu); !why.empty()) {
    // The signal kernel is missing: apply by read-back instead. Expected in a build without CUDA
    // (INFO); a module that does not load on this GPU is worth a WARN.
    if (kGinKernelsFatbinSize == 0)
      EPX_INFO(NCCL_NET, "GIN/EPX-ipc rank %d: no signal kernel (%s); signals applied by read-back", rank, why.c_str());
    else
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: the signal kernel did not load (%s); signals applied by read-back",
               rank, why.c_str());
    ctx->signalKernel = false;
  }
  // Landing buffers: each rank offers one (or none) to every peer and maps the peers' ones, so
  // that warm-up copies can write to a peer exactly as a put does.
  {
    int landingFd = createLanding(ctx);
    for (int j = 0; j < nRanks; ++j) {
      if (j == rank) continue;
      Msg m{};
      m.type = kLanding;
      m.from = static_cast<uint32_t>(rank);
      if (!sendMsg(ctx->peers[static_cast<size_t>(j)].out, m, landingFd, true)) {
        if (landingFd >= 0) close(landingFd);
        EPX_WARN(NCCL_NET, "GIN/EPX-ipc: landing offer to rank %d: %s", j, strerror(errno));
        return cleanup(ncclSystemError);
      }
    }
    if (landingFd >= 0) close(landingFd);
    for (int j = 0; j < nRanks; ++j) {
      if (j == rank) continue;
      Peer& p = ctx->peers[static_cast<size_t>(j)];
      while (!p.landingOffered) {
        if (pump(ctx, j) != ncclSuccess) return cleanup(ncclSystemError);
        if (p.landingOffered) break;
        if (p.lost) {  // a peer that exits during connect cannot offer (pump saw EOF)
          EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d closed its connection before its landing offer", j);
          return cleanup(ncclSystemError);
        }
        if (Clock::now() > deadline) {
          EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d sent no landing offer in %d ms", j, timeoutMs);
          return cleanup(ncclSystemError);
        }
        pollfd pf{p.in, POLLIN, 0};
        poll(&pf, 1, 5);
      }
      if (p.landingFd < 0) continue;
      int fd = p.landingFd;
      p.landingFd = -1;
      CUdeviceptr va = 0;
      // Every peer's landing buffer has the same size as ours (same granularity, one host).
      CUresult r = ctx->landingSize > 0 ? mapPeer(ctx, fd, ctx->landingSize, &va) : (close(fd), CUDA_ERROR_NOT_SUPPORTED);
      if (r != CUDA_SUCCESS) {
        EPX_INFO(NCCL_NET, "GIN/EPX-ipc rank %d: cannot map rank %d's landing buffer (%s): no peer-write warm-up",
                 rank, j, cuErrorText(r).c_str());
        continue;
      }
      ctx->mappings.push_back(Mapping{kNoRegistration, va, ctx->landingSize});
      p.landing = va;
    }
  }
  // Every call of the put and signal paths runs here once, while no GIN kernel can be running.
  if (ncclResult_t w = warmUp(ctx, 0, 0); w != ncclSuccess) return cleanup(w);
  {
    NicEmulation emulation;
    {
      std::lock_guard<std::mutex> lock(gEmulationMutex);
      emulation = gEmulation;
    }
    std::string note;
    std::shared_ptr<NicPacer> nic = sharedNic(static_cast<int>(ctx->device), emulation, &note);
    if (!note.empty()) EPX_WARN(NCCL_INIT | NCCL_NET, "GIN/EPX-ipc rank %d: %s", rank, note.c_str());
    ctx->stats = openContextStats(
        ContextStats::Identity{ctx->commHash, rank, nRanks, ctx->index, static_cast<int>(ctx->device)}, nic);
    ctx->nic = ctx->stats->nic();
  }
  char nicText[128] = "no NIC emulation";
  if (ctx->nic != nullptr)
    snprintf(nicText, sizeof(nicText), "emulated NIC %g GB/s + %g us (one per device, shared by its contexts)",
             ctx->nic->emulation().gbps(), ctx->nic->emulation().latencyUs());
  EPX_INFO(NCCL_INIT | NCCL_NET,
           "GIN/EPX-ipc: rank %d context %d connected to %d rank(s) on this host (device %d), copies by %s, signals "
           "by %s, streams %s, %s",
           rank, ctx->index, nRanks, static_cast<int>(ctx->device),
           cu->memcpyBatchAsync13 == nullptr && cu->memcpyBatchAsync128 == nullptr
               ? "cuMemcpyAsync (the driver has no cuMemcpyBatchAsync)"
               : "cuMemcpyBatchAsync",
           ctx->signalKernel ? "kernel" : "read-back", streamPlanName(ctx->streamPlan), nicText);
  *collComm = ctx;
  return ncclSuccess;
}

ncclResult_t ipcRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                         void** mhandle, void** ginHandle) {
  *mhandle = *ginHandle = nullptr;
  auto* ctx = static_cast<Context*>(collComm);
  // NCCL starts its GIN progress thread after connect and the registrations of its own signal
  // (FORCE_SO) and inline (host) buffers, and before it registers any window. So at a window's
  // registration, before any GIN kernel can run, wait (bounded) until that thread has run the put
  // path once (ipcProgress -> warmProgressThread), without holding the lock it needs.
  if (type == NCCL_PTR_CUDA && (mrFlags & NCCL_NET_MR_FLAG_FORCE_SO) == 0 &&
      !ctx->progressWarm.load(std::memory_order_acquire) && !ctx->warmWaitGaveUp.load()) {
    auto start = Clock::now();
    const auto limit = kWarmWaitLimit;
    while (!ctx->progressWarm.load(std::memory_order_acquire) && Clock::now() - start < limit) usleep(200);
    if (!ctx->progressWarm.load(std::memory_order_acquire)) {
      ctx->warmWaitGaveUp.store(true);
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: the GIN progress thread did not warm up within %lld ms; the first "
               "GIN op may stall until its kernel ends", ctx->rank, static_cast<long long>(limit.count()));
    }
  }
  std::lock_guard<std::recursive_mutex> lock(ctx->mutex);
  if (!makeCurrent(ctx)) return fail(ctx, "cannot make the CUDA context current in regMrSym");
  Placement placement = type == NCCL_PTR_CUDA ? Placement::Device : Placement::Host;
  RegisterInfo mine{};
  int exportFd = -1;
  if (placement == Placement::Device) {
    CUmemGenericAllocationHandle h;
    CUdeviceptr allocBase = 0;
    size_t allocSize = 0;
    auto address = reinterpret_cast<CUdeviceptr>(data);
    if (cu->cuMemRetainAllocationHandle(&h, data) == CUDA_SUCCESS) {
      if (cu->cuMemGetAddressRange(&allocBase, &allocSize, address) == CUDA_SUCCESS &&
          address >= allocBase && address + size <= allocBase + allocSize &&
          cu->cuMemExportToShareableHandle(&exportFd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
              CUDA_SUCCESS) {
        mine.mappable = 1;
        mine.allocSize = allocSize;
        mine.offset = address - allocBase;
      } else {
        exportFd = -1;
      }
      cu->cuMemRelease(h);
    }
  }
  Registration* reg = ctx->registry.add(reinterpret_cast<uintptr_t>(data), size, placement);
  mine.index = reg->index;
  mine.size = size;
  reg->ownerApplied = placement == Placement::Device && !mine.mappable;
  for (int j = 0; j < ctx->nRanks; ++j) {
    if (j == ctx->rank) continue;
    Msg m{};
    m.type = kRegister;
    m.from = static_cast<uint32_t>(ctx->rank);
    m.reg = mine;
    if (!sendMsg(ctx->peers[static_cast<size_t>(j)].out, m, exportFd, true)) {
      if (exportFd >= 0) close(exportFd);
      return fail(ctx, "sending registration " + std::to_string(reg->index) + " to rank " + std::to_string(j));
    }
  }
  if (exportFd >= 0) close(exportFd);
  auto deadline = Clock::now() + std::chrono::milliseconds(envInt("EPX_GIN_CONNECT_TIMEOUT_MS", 60000));
  for (int j = 0; j < ctx->nRanks; ++j) {
    if (j == ctx->rank) continue;
    Peer& p = ctx->peers[static_cast<size_t>(j)];
    while (p.registrations.empty()) {
      if (ncclResult_t r = pump(ctx, j); r != ncclSuccess) return r;
      if (!p.registrations.empty()) break;
      if (p.lost) return fail(ctx, "rank " + std::to_string(j) + " closed its connection before registering region " +
                                       std::to_string(reg->index));
      if (Clock::now() > deadline)
        return fail(ctx, "rank " + std::to_string(j) + " did not register region " + std::to_string(reg->index));
      pollfd pf{p.in, POLLIN, 0};
      poll(&pf, 1, 5);
    }
    Received got = p.registrations.front();
    p.registrations.pop_front();
    if (got.info.index != reg->index) {
      if (got.fd >= 0) close(got.fd);
      return fail(ctx, "registration order differs: rank " + std::to_string(j) + " sent region " +
                           std::to_string(got.info.index) + ", expected " + std::to_string(reg->index));
    }
    if (!got.info.mappable || got.fd < 0) {
      if (got.fd >= 0) close(got.fd);
      continue;
    }
    CUdeviceptr va = 0;
    CUresult r = mapPeer(ctx, got.fd, got.info.allocSize, &va);
    if (r != CUDA_SUCCESS) return fail(ctx, "mapping rank " + std::to_string(j) + "'s region: " + cuErrorText(r));
    ctx->mappings.push_back(Mapping{reg->index, va, got.info.allocSize});
    reg->peerBase[static_cast<size_t>(j)] = static_cast<uintptr_t>(va + got.info.offset);
    reg->peerSize[static_cast<size_t>(j)] = got.info.size;
    // Reads only: the peer's window is never written by a warm-up.
    if (ncclResult_t w = warmUp(ctx, va + got.info.offset, got.info.size); w != ncclSuccess) return w;
  }
  if (placement == Placement::Device && size > 0)  // reads only, from this rank's region
    if (ncclResult_t w = warmUp(ctx, reinterpret_cast<CUdeviceptr>(data), size); w != ncclSuccess) return w;
  EPX_INFO(NCCL_NET, "GIN/EPX-ipc rank %d: registered region %u (%s, %zu bytes, %s)", ctx->rank, reg->index,
           placement == Placement::Device ? "device" : "host", size,
           mine.mappable ? "shared with peers" : "owner-applied/local only");
  *mhandle = *ginHandle = reg;  // the same pointer: NCCL passes either back
  return ncclSuccess;
}

ncclResult_t ipcDeregMrSym(void* collComm, void* mhandle) {
  auto* ctx = static_cast<Context*>(collComm);
  std::lock_guard<std::recursive_mutex> lock(ctx->mutex);
  auto* reg = ctx->registry.find(mhandle);
  if (reg == nullptr) {
    EPX_WARN(NCCL_NET, "GIN/EPX-ipc: deregMrSym of an unknown handle");
    return ncclInternalError;
  }
  makeCurrent(ctx);
  for (auto it = ctx->mappings.begin(); it != ctx->mappings.end();) {
    if (it->registration == reg->index) {
      cu->cuMemUnmap(it->va, it->size);
      cu->cuMemAddressFree(it->va, it->size);
      it = ctx->mappings.erase(it);
    } else {
      ++it;
    }
  }
  ctx->registry.remove(mhandle);
  return ncclSuccess;
}

ncclResult_t ipcCloseColl(void* collComm) {
  auto* ctx = static_cast<Context*>(collComm);
  if (ctx == nullptr) return ncclSuccess;
  if (ctx->stats != nullptr) {  // a connected context: its counters, one line (NCCL_DEBUG=INFO)
    EPX_INFO(NCCL_INIT | NCCL_NET, "%s", ctx->stats->summary().c_str());
    ctx->stats->close();  // stays listed for epxGinIpcStatsSnapshot until epxGinIpcStatsReset
  }
  if (cu != nullptr && ctx->cu != nullptr && makeCurrent(ctx)) {
    const bool shared = ctx->streamPlan == StreamPlan::PerProcess && ctx->signalStream != nullptr;
    for (Peer& p : ctx->peers) {
      if (p.stream != nullptr) {
        cu->cuStreamSynchronize(p.stream);
        if (!shared) cu->cuStreamDestroy(p.stream);
      }
      for (Request* r : p.pending) delete r;
    }
    if (ctx->signalStream != nullptr) {
      cu->cuStreamSynchronize(ctx->signalStream);
      if (!shared) cu->cuStreamDestroy(ctx->signalStream);
    }
    if (shared) {  // the last GIN context of this CUDA context destroys the shared pair
      std::lock_guard<std::mutex> g(gSharedStreamsMutex);
      auto it = sharedStreams().find(ctx->cu);
      if (it != sharedStreams().end() && --it->second.users == 0) {
        cu->cuStreamDestroy(it->second.copy);
        cu->cuStreamDestroy(it->second.signal);
        sharedStreams().erase(it);
      }
    }
    ctx->kernels.unload();  // after the streams above are synchronized
    if (ctx->doneWords != nullptr) cu->cuMemFreeHost(ctx->doneWords);
    if (ctx->scratch != 0) cu->cuMemFree(ctx->scratch);
    if (ctx->signalHost != nullptr) cu->cuMemFreeHost(ctx->signalHost);
    for (const Mapping& m : ctx->mappings) {
      cu->cuMemUnmap(m.va, m.size);
      cu->cuMemAddressFree(m.va, m.size);
    }
  }
  for (Peer& p : ctx->peers) {
    if (p.out >= 0) close(p.out);
    if (p.in >= 0) close(p.in);
    for (Received& r : p.registrations)
      if (r.fd >= 0) close(r.fd);
    if (p.landingFd >= 0) close(p.landingFd);
  }
  delete ctx;
  return ncclSuccess;
}

ncclResult_t ipcCloseListen(void* listenComm) {
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr) return ncclSuccess;
  if (lc->fd >= 0) close(lc->fd);
  delete lc;
  return ncclSuccess;
}

ncclResult_t ipcPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                    void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff,
                    void* signalMhandle, uint64_t signalValue, uint32_t signalOp, void** request) {
  *request = nullptr;
  auto issued = Clock::now();  // when NCCL's proxy issued the op: the emulated NIC's input time
  auto* ctx = static_cast<Context*>(collComm);
  std::lock_guard<std::recursive_mutex> lock(ctx->mutex);
  if (!ctx->error.empty()) return ncclInternalError;
  if (rank >= static_cast<uint32_t>(ctx->nRanks)) return fail(ctx, "put to rank " + std::to_string(rank) + " out of range");
  if (!makeCurrent(ctx)) return fail(ctx, "cannot make the CUDA context current on the GIN progress thread");
  if (ncclResult_t w = warmProgressThread(ctx); w != ncclSuccess) return w;  // normally done already
  auto req = std::make_unique<Request>();
  req->peer = static_cast<int>(rank);
  Peer& p = ctx->peers[rank];
  if (size > 0) {
    uintptr_t src = 0, dst = 0;
    std::string bad = translateSource(ctx->registry, srcMhandle, srcOff, size, &src);
    if (bad.empty()) {
      const Registration* s = ctx->registry.find(srcMhandle);
      if (s->placement == Placement::Host)
        bad = "put from host registration " + std::to_string(s->index) +
              " (inline putValue is not supported with NCCL 2.28 PROXY; put from a window)";
    }
    if (bad.empty()) bad = translateDestination(ctx->registry, dstMhandle, dstOff, size, static_cast<int>(rank), &dst);
    if (!bad.empty()) return fail(ctx, "GIN put of " + std::to_string(size) + " bytes to rank " + std::to_string(rank) + ": " + bad);
    auto start = Clock::now();
    if (ncclResult_t c = issueCopy(ctx, p, static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), size);
        c != ncclSuccess)
      return c;
    auto took = Clock::now() - start;
    if (took > kSlowCall)
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: issuing a %zu-byte put to rank %u took %lld ms", ctx->rank, size, rank,
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  }
  req->bytes = size;
  req->issued = issued;
  req->posted = Clock::now();
  if (withSignal) {
    const Registration* s = ctx->registry.find(signalMhandle);
    if (s == nullptr) return fail(ctx, "GIN signal on an unregistered region");
    req->withSignal = true;
    req->signal = SignalUpdate{s->index, signalOff, signalValue, signalOp};
    std::string bad = validateSignal(req->signal, s->size);
    if (!bad.empty()) return fail(ctx, "GIN signal to rank " + std::to_string(rank) + ": " + bad);
  }
  req->seq = p.order.post();
  // Written even for signal-only ops: the write then covers every earlier put to this peer.
  auto start = Clock::now();
  EPX_CU(ctx, cu->cuStreamWriteValue64(p.stream, p.doneDev, req->seq, CU_STREAM_WRITE_VALUE_DEFAULT));
  auto took = Clock::now() - start;
  if (took > kSlowCall)
    EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: the completion write for an op to rank %u took %lld ms", ctx->rank, rank,
             static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  ctx->stats->count(static_cast<int>(rank), size, withSignal);
  ctx->stats->opIssued(static_cast<int>(rank), elapsedNs(issued, Clock::now()));
  if (ctx->nic != nullptr) {
    // The copy is already queued and may finish at once; advance() holds the op until the
    // emulated NIC has sent it (no signal) or delivered it (with a signal).
    NicPacer::Slot slot = ctx->nic->schedule(toNs(issued), size);
    req->notBefore = fromNs(slot.notBeforeNs(withSignal));
  }
  p.pending.push_back(req.get());
  *request = req.release();
  return ncclSuccess;
}

ncclResult_t ipcTest(void* collComm, void* request, int* done) {
  *done = 0;
  auto* ctx = static_cast<Context*>(collComm);
  auto* req = static_cast<Request*>(request);
  std::lock_guard<std::recursive_mutex> lock(ctx->mutex);
  if (req == nullptr) return fail(ctx, "test of a null request");
  if (!makeCurrent(ctx)) return fail(ctx, "cannot make the CUDA context current on the GIN progress thread");
  if (ncclResult_t r = advance(ctx); r != ncclSuccess) return r;
  if (!req->done) return ncclSuccess;
  *done = 1;
  delete req;
  return ncclSuccess;
}

ncclResult_t ipcProgress(void* collComm) {
  auto* ctx = static_cast<Context*>(collComm);
  std::unique_lock<std::recursive_mutex> lock(ctx->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return ncclSuccess;  // regMrSym is running; come back next time
  if (!ctx->error.empty()) return ncclInternalError;
  ctx->stats->progressCall(toNs(Clock::now()));
  if (!makeCurrent(ctx)) return fail(ctx, "cannot make the CUDA context current on the GIN progress thread");
  if (ncclResult_t w = warmProgressThread(ctx); w != ncclSuccess) return w;
  if (ncclResult_t r = advance(ctx); r != ncclSuccess) return r;
  if (ncclResult_t r = pumpPeers(ctx); r != ncclSuccess) return r;
  return applySignals(ctx);
}

}  // namespace epx::plugin::gin
