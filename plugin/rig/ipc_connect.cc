// Setting up a GIN context of the ipc backend: init (settings, the CUDA driver), listen handles
// (an abstract unix socket per GIN context), connect (a socket to and from every peer, a hello,
// the streams and buffers, landing buffers, warm-up) and close.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "common/env.h"
#include "common/fnv.h"
#include "common/log.h"
#include "rig/ipc_backend.h"
#include "rig/ipc_context.h"
#include "socket/transport.h"

namespace epx::plugin::gin {

namespace ipc {

const CudaDriver* cu = nullptr;

}  // namespace ipc

using namespace ipc;

namespace {

constexpr uint32_t kHandleMagic = 0x45504749;  // "EPGI"
constexpr int kGinMaxRecvs = 8;

struct IpcHandle {
  uint32_t magic;
  uint32_t pid;
  char bootId[40];
  char path[80];  // abstract unix socket name, without the leading NUL
};
static_assert(sizeof(IpcHandle) <= NCCL_NET_HANDLE_MAXSIZE);

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

std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
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
  {
    ContextStreams streams;
    bool firstOfProcess = true;
    const CUresult r = openStreams(cu, ctx->cu, ctx->streamPlan, nRanks, &streams, &firstOfProcess);
    for (int j = 0; j < nRanks; ++j) ctx->peers[static_cast<size_t>(j)].stream = streams.copy[static_cast<size_t>(j)];
    ctx->signalStream = streams.signal;
    if (r != CUDA_SUCCESS) {
      fail(ctx, "creating the backend's streams: " + cuErrorText(r));
      return ncclUnhandledCudaError;
    }
    const std::string w = countStreams(ctx->streamPlan, nRanks, firstOfProcess);
    if (!w.empty()) EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: %s", rank, w.c_str());
  }
  if (ncclResult_t r = allocateBuffers(ctx); r != ncclSuccess) return r;
  chooseSignalApply(ctx);
  if (ncclResult_t r = exchangeLandings(ctx, deadline, timeoutMs); r != ncclSuccess) return cleanup(r);
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

ncclResult_t ipcCloseColl(void* collComm) {
  auto* ctx = static_cast<Context*>(collComm);
  if (ctx == nullptr) return ncclSuccess;
  if (ctx->stats != nullptr) {  // a connected context: its counters, one line (NCCL_DEBUG=INFO)
    EPX_INFO(NCCL_INIT | NCCL_NET, "%s", ctx->stats->summary().c_str());
    ctx->stats->close();  // stays listed for epxGinIpcStatsSnapshot until epxGinIpcStatsReset
  }
  if (cu != nullptr && ctx->cu != nullptr && makeCurrent(ctx)) {
    ContextStreams streams;
    for (Peer& p : ctx->peers) streams.copy.push_back(p.stream);
    streams.signal = ctx->signalStream;
    closeStreams(cu, ctx->cu, ctx->streamPlan, streams);
    for (Peer& p : ctx->peers)
      for (Request* r : p.pending) delete r;
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

}  // namespace epx::plugin::gin
