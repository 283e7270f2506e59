// Internals of the GIN test rig's ipc backend (ipc_backend.h), shared by its files:
//   ipc_connect.cc   init, listen handles, connect (sockets to every peer, hello) and close
//   ipc_messages.cc  messages between ranks over unix sockets (registrations, signals, landing
//                    offers), lost peers, a context's first error
//   ipc_memory.cc    memory: the context's buffers, landing buffers, window registration (peers'
//                    regions mapped through CUDA VMM POSIX fds), deregistration
//   ipc_copy.cc      the put path: copies on the peers' streams, warm-up, ipcPut
//   ipc_progress.cc  progress: completions, the emulated NIC's gate, signals sent and applied
//   stream_plan.cc   which streams carry the copies and signal updates
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gin/cuda_driver.h"
#include "gin/registry.h"
#include "gin/signals.h"
#include "nccl_net.h"
#include "rig/gin_kernels.h"
#include "rig/ipc_stats.h"
#include "rig/nic_pacer.h"
#include "rig/stream_plan.h"

namespace epx::plugin::gin::ipc {

using Clock = std::chrono::steady_clock;
constexpr size_t kSignalSlots = 256;  // pinned slots for reading signals in applySignals
constexpr auto kSlowCall = std::chrono::milliseconds(200);

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
  StreamPlan streamPlan = StreamPlan::PerPeer;  // PerProcess: the streams are the process's (stream_plan.h)
  // Received signals are added by the signal kernel; by read-back only when the kernel is missing
  // (a build without CUDA device code) or does not load.
  bool signalKernel = true;
  GinKernels kernels;
  std::vector<int> inFds, readable;              // progress: the peers' receive sockets, and which have data
  std::recursive_mutex mutex;
  std::string error;
};

// The CUDA driver, opened by ipcInit.
extern const CudaDriver* cu;

inline uint64_t toNs(Clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
inline Clock::time_point fromNs(uint64_t ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

inline uint64_t elapsedNs(Clock::time_point from, Clock::time_point to) {
  return to > from ? static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count()) : 0;
}

// ipc_messages.cc
// Records the context's first error (WARN) and returns ncclInternalError.
ncclResult_t fail(Context* ctx, const std::string& what);
void lose(Context* ctx, int peer, const std::string& why, bool inboundClosed);
bool makeCurrent(Context* ctx);
// Sends one message (and `passFd`, when >= 0); `wait`: retry a full socket for up to 30 s.
bool sendMsg(int fd, const Msg& m, int passFd, bool wait);
// Non-blocking receive of one message; returns 1 got, 0 nothing, -1 error/closed.
int recvMsg(int fd, Msg* m, int* passedFd);
ncclResult_t pump(Context* ctx, int peer);
ncclResult_t pumpPeers(Context* ctx);

// ipc_memory.cc
// Scratch for warm-ups, the pinned signal slots and the completion words (one per peer + one).
ncclResult_t allocateBuffers(Context* ctx);
// Offers this rank's landing buffer to every peer and maps theirs (ncclSystemError after a WARN
// when a peer does not answer by `deadline`).
ncclResult_t exchangeLandings(Context* ctx, Clock::time_point deadline, int timeoutMs);

// ipc_copy.cc
ncclResult_t warmUp(Context* ctx, CUdeviceptr src, size_t srcSize);
ncclResult_t warmProgressThread(Context* ctx);

// ipc_progress.cc
// Loads the signal kernel, or falls back to read-back (Context::signalKernel) when it is missing.
void chooseSignalApply(Context* ctx);

}  // namespace epx::plugin::gin::ipc

// Returns ncclUnhandledCudaError from the calling function, after fail(), when `call` fails.
#define EPX_CU(ctx, call)                                                               \
  do {                                                                                  \
    CUresult _r = (call);                                                               \
    if (_r != CUDA_SUCCESS) {                                                           \
      fail((ctx), std::string(#call) + ": " + cuErrorText(_r));                         \
      return ncclUnhandledCudaError;                                                    \
    }                                                                                   \
  } while (0)
