// Progress of a GIN context: ops complete in posting order per peer once their copy is done and
// the emulated NIC has let them go; their signals then travel to the owning rank, which applies
// the signals it receives (the signal kernel's device atomics, or a read-back without it).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "common/log.h"
#include "rig/ipc_backend.h"
#include "rig/ipc_context.h"

namespace epx::plugin::gin {

namespace ipc {

namespace {

constexpr auto kStuckRequest = std::chrono::seconds(2);

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

}  // namespace

void chooseSignalApply(Context* ctx) {
  if (std::string why = ctx->kernels.load(cu); !why.empty()) {
    // The signal kernel is missing: apply by read-back instead. Expected in a build without CUDA
    // (INFO); a module that does not load on this GPU is worth a WARN.
    if (kGinKernelsFatbinSize == 0)
      EPX_INFO(NCCL_NET, "GIN/EPX-ipc rank %d: no signal kernel (%s); signals applied by read-back", ctx->rank,
               why.c_str());
    else
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc rank %d: the signal kernel did not load (%s); signals applied by read-back",
               ctx->rank, why.c_str());
    ctx->signalKernel = false;
  }
}

}  // namespace ipc

using namespace ipc;

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
