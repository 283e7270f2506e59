// The put and get paths of a GIN context: a put is one copy-engine copy on the peer's stream, followed by a
// stream write of the op's sequence number (its completion word); a get is the same copy in the
// other direction (the peer's mapped window into this rank's), on the same stream; the emulated
// NIC decides when the op may complete (ipc_progress.cc). Every call of this path runs once at connect and at each
// registration (warm-up), while no GIN kernel can be running.
#include <chrono>
#include <memory>
#include <string>

#include "common/log.h"
#include "rig/ipc_backend.h"
#include "rig/ipc_context.h"

namespace epx::plugin::gin {

namespace ipc {

namespace {

// Issues a put's copy on the peer's stream, on a copy engine (see stream_plan.h).
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

}  // namespace

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

}  // namespace ipc

using namespace ipc;

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

ncclResult_t ipcGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                    void* localMhandle, uint32_t rank, void** request) {
  *request = nullptr;
  auto issued = Clock::now();
  auto* ctx = static_cast<Context*>(collComm);
  std::lock_guard<std::recursive_mutex> lock(ctx->mutex);
  if (!ctx->error.empty()) return ncclInternalError;
  if (rank >= static_cast<uint32_t>(ctx->nRanks)) return fail(ctx, "get from rank " + std::to_string(rank) + " out of range");
  if (!makeCurrent(ctx)) return fail(ctx, "cannot make the CUDA context current on the GIN progress thread");
  if (ncclResult_t w = warmProgressThread(ctx); w != ncclSuccess) return w;
  auto req = std::make_unique<Request>();
  req->peer = static_cast<int>(rank);
  Peer& p = ctx->peers[rank];
  if (size > 0) {
    uintptr_t local = 0, remote = 0;
    std::string bad = translateSource(ctx->registry, localMhandle, localOff, size, &local);
    if (bad.empty()) {
      const Registration* l = ctx->registry.find(localMhandle);
      if (l->placement == Placement::Host) bad = "get into host registration " + std::to_string(l->index);
    }
    if (bad.empty()) bad = translateDestination(ctx->registry, remoteMhandle, remoteOff, size, static_cast<int>(rank), &remote);
    if (!bad.empty()) return fail(ctx, "GIN get of " + std::to_string(size) + " bytes from rank " + std::to_string(rank) + ": " + bad);
    if (ncclResult_t c = issueCopy(ctx, p, static_cast<CUdeviceptr>(local), static_cast<CUdeviceptr>(remote), size);
        c != ncclSuccess)
      return c;
  }
  req->bytes = size;
  req->issued = issued;
  req->posted = Clock::now();
  req->seq = p.order.post();
  EPX_CU(ctx, cu->cuStreamWriteValue64(p.stream, p.doneDev, req->seq, CU_STREAM_WRITE_VALUE_DEFAULT));
  ctx->stats->count(static_cast<int>(rank), size, false);
  ctx->stats->opIssued(static_cast<int>(rank), elapsedNs(issued, Clock::now()));
  if (ctx->nic != nullptr) {
    // A read: the request crosses to the peer (one latency), the data comes back (its
    // serialization, charged to this rank's emulated NIC, and one more latency).
    NicPacer::Slot slot = ctx->nic->schedule(toNs(issued), size);
    req->notBefore = fromNs(slot.arriveNs + ctx->nic->emulation().latencyNs);
  }
  p.pending.push_back(req.get());
  *request = req.release();
  return ncclSuccess;
}

}  // namespace epx::plugin::gin
