// Memory of a GIN context: its own buffers, the landing buffers that warm-ups write to, and the
// windows NCCL registers. A device window is exported as a CUDA VMM POSIX fd, passed to every peer
// over its socket (SCM_RIGHTS) and mapped there, so that a put is a copy into the peer's mapping.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/env.h"
#include "common/log.h"
#include "rig/ipc_backend.h"
#include "rig/ipc_context.h"

namespace epx::plugin::gin {

namespace ipc {

namespace {

// How long a window's registration waits for the GIN progress thread's warm-up (ipcRegMrSym).
constexpr auto kWarmWaitLimit = std::chrono::milliseconds(5000);

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

}  // namespace

ncclResult_t allocateBuffers(Context* ctx) {
  EPX_CU(ctx, cu->cuMemAlloc(&ctx->scratch, 2 * 65536));
  {
    void* host = nullptr;
    EPX_CU(ctx, cu->cuMemAllocHost(&host, kSignalSlots * sizeof(uint64_t)));
    ctx->signalHost = static_cast<uint64_t*>(host);
  }
  {
    void* host = nullptr;
    EPX_CU(ctx, cu->cuMemAllocHost(&host, static_cast<size_t>(ctx->nRanks + 1) * sizeof(uint64_t)));
    ctx->doneWords = static_cast<uint64_t*>(host);
    memset(host, 0, static_cast<size_t>(ctx->nRanks + 1) * sizeof(uint64_t));
    CUdeviceptr dev = 0;
    EPX_CU(ctx, cu->cuMemHostGetDevicePointer(&dev, host, 0));
    ctx->warmWord = dev + static_cast<CUdeviceptr>(ctx->nRanks) * sizeof(uint64_t);  // the extra word
    for (int j = 0; j < ctx->nRanks; ++j) {
      Peer& p = ctx->peers[static_cast<size_t>(j)];
      p.done = ctx->doneWords + j;
      p.doneDev = dev + static_cast<CUdeviceptr>(j) * sizeof(uint64_t);
    }
  }
  return ncclSuccess;
}

// Landing buffers: each rank offers one (or none) to every peer and maps the peers' ones, so that
// warm-up copies can write to a peer exactly as a put does.
ncclResult_t exchangeLandings(Context* ctx, Clock::time_point deadline, int timeoutMs) {
  int landingFd = createLanding(ctx);
  for (int j = 0; j < ctx->nRanks; ++j) {
    if (j == ctx->rank) continue;
    Msg m{};
    m.type = kLanding;
    m.from = static_cast<uint32_t>(ctx->rank);
    if (!sendMsg(ctx->peers[static_cast<size_t>(j)].out, m, landingFd, true)) {
      if (landingFd >= 0) close(landingFd);
      EPX_WARN(NCCL_NET, "GIN/EPX-ipc: landing offer to rank %d: %s", j, strerror(errno));
      return ncclSystemError;
    }
  }
  if (landingFd >= 0) close(landingFd);
  for (int j = 0; j < ctx->nRanks; ++j) {
    if (j == ctx->rank) continue;
    Peer& p = ctx->peers[static_cast<size_t>(j)];
    while (!p.landingOffered) {
      if (pump(ctx, j) != ncclSuccess) return ncclSystemError;
      if (p.landingOffered) break;
      if (p.lost) {  // a peer that exits during connect cannot offer (pump saw EOF)
        EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d closed its connection before its landing offer", j);
        return ncclSystemError;
      }
      if (Clock::now() > deadline) {
        EPX_WARN(NCCL_NET, "GIN/EPX-ipc: rank %d sent no landing offer in %d ms", j, timeoutMs);
        return ncclSystemError;
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
               ctx->rank, j, cuErrorText(r).c_str());
      continue;
    }
    ctx->mappings.push_back(Mapping{kNoRegistration, va, ctx->landingSize});
    p.landing = va;
  }
  return ncclSuccess;
}

}  // namespace ipc

using namespace ipc;

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

}  // namespace epx::plugin::gin
