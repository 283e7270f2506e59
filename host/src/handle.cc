// ncclEpHandle: the device arrays of one route (sized for the group's maxima at creation, so that
// later calls allocate nothing and can be captured in a CUDA graph).
#include <cstdint>
#include <cstring>

#include "core/config.h"
#include "core/errors.h"
#include "internal.h"

using epx::fail;

namespace {

// Carves the route's arrays out of one allocation; returns the bytes needed when base is null.
size_t carveRoute(char* base, const ncclEpGroup& g, epx::dev::Route* r) {
  const size_t T = g.cfg.maxTokensPerRank, K = g.cfg.topk, R = g.link.nRanks, Le = g.cfg.localExperts(g.link.nRanks);
  size_t off = 0;
  auto take = [&](auto** p, size_t count) {
    using Elem = std::remove_pointer_t<std::remove_reference_t<decltype(*p)>>;
    off = (off + 255) / 256 * 256;
    *p = base ? reinterpret_cast<Elem*>(base + off) : nullptr;
    off += count * sizeof(Elem);
  };
  const size_t chunks = (T + epx::dev::kLayoutChunk - 1) / epx::dev::kLayoutChunk;
  take(&r->tokExpert, T * K);
  take(&r->tokExpertPos, T * K);
  take(&r->tokSlot, T * K);
  take(&r->chunkExpertBase, chunks * size_t(g.cfg.numExperts));
  take(&r->chunkRankBase, chunks * R);
  take(&r->sendCount, R);
  take(&r->sendBase, R);
  take(&r->stageBase, R);
  take(&r->recvBase, R + 1);
  take(&r->recvGinBase, R + 1);
  take(&r->expertCount, Le);
  take(&r->expertStart, Le + 1);
  take(&r->srcExpertOff, R * Le);
  take(&r->totals, 1);
  take(&r->recvExpRows, R * T * K);
  if (g.nodeSize > 0) {  // hybrid forwarding (protocol.h); null arrays in direct mode
    const size_t nodes = R / size_t(g.nodeSize);
    take(&r->tokNodeSlot, T * K);
    take(&r->nodeCount, nodes);
    take(&r->chunkNodeBase, chunks * nodes);
    take(&r->fwdCount, nodes);
    take(&r->fwdMask, nodes * T);
    take(&r->fwdRowsTo, nodes * size_t(g.nodeSize));
    take(&r->fwdRowsBase, nodes * size_t(g.nodeSize));
    take(&r->fwdSlot, nodes * T * size_t(g.nodeSize));
    take(&r->fwdExperts, nodes * T * K);
  }
  return off;
}

}  // namespace

extern "C" ncclResult_t ncclEpHandleCreate(ncclEpGroup_t g, const ncclEpHandleConfig_t* config, ncclEpHandle_t* out) {
  if (!out) return fail(ncclInvalidArgument, "ncclEpHandleCreate: handle is NULL");
  *out = nullptr;
  if (!g) return fail(ncclInvalidArgument, "ncclEpHandleCreate: group is NULL");
  auto* h = new ncclEpHandle;
  h->group = g;
  std::string err = epx::normalizeHandleConfig(config, &h->cfg);
  if (!err.empty()) {
    delete h;
    return fail(ncclInvalidArgument, "ncclEpHandleCreate: " + err);
  }
  if (g->cfg.lowLatency()) {  // the handle config's layout/mode do not apply
    h->ll = true;
    if (cudaError_t ce = epx::llHandleInit(h); ce != cudaSuccess) {
      epx::llHandleRelease(h);
      delete h;
      return fail(ncclUnhandledCudaError, std::string("ncclEpHandleCreate: ") + cudaGetErrorString(ce));
    }
    *out = h;
    return ncclSuccess;
  }
  if (h->cfg.fp32Combine && !g->cfg.exactCombine) {
    delete h;
    return fail(ncclInvalidUsage, "ncclEpHandleCreate: combinePrecision ncclEpCombineFp32 needs a group created with "
                                  "exactCombine = 1 (FP32 combine buffers)");
  }
  h->capacityRows = epx::capacityRows(g->cfg, g->link.nRanks, h->cfg);
  if (h->capacityRows > INT32_MAX) {
    delete h;
    return fail(ncclInvalidArgument, "ncclEpHandleCreate: capacity of " + std::to_string(h->capacityRows) +
                                         " rows exceeds 2^31; lower maxTokensPerRank or alignment");
  }
  cudaError_t ce = cudaSetDevice(g->link.cudaDev);
  const size_t bytes = carveRoute(nullptr, *g, &h->route);
  if (ce == cudaSuccess) ce = cudaMalloc(&h->devMem, bytes);
  if (ce == cudaSuccess) ce = cudaMemset(h->devMem, 0, bytes);
  if (ce == cudaSuccess) ce = cudaHostAlloc(reinterpret_cast<void**>(&h->summary), sizeof(epx::dev::LayoutSummary), cudaHostAllocMapped);
  if (ce == cudaSuccess) ce = cudaHostGetDevicePointer(reinterpret_cast<void**>(&h->summaryDev), h->summary, 0);
  if (ce == cudaSuccess) ce = cudaDeviceSynchronize();
  if (ce != cudaSuccess) {
    if (h->devMem) cudaFree(h->devMem);
    if (h->summary) cudaFreeHost(h->summary);
    delete h;
    return fail(ncclUnhandledCudaError, std::string("ncclEpHandleCreate: ") + cudaGetErrorString(ce));
  }
  carveRoute(static_cast<char*>(h->devMem), *g, &h->route);
  epx::dev::RouteTotals totals{};
  totals.firstBadKey = INT32_MAX;  // no invalid (token, slot) seen yet
  ce = cudaMemcpy(h->route.totals, &totals, sizeof(totals), cudaMemcpyHostToDevice);
  if (ce != cudaSuccess) {
    cudaFree(h->devMem);
    cudaFreeHost(h->summary);
    delete h;
    return fail(ncclUnhandledCudaError, std::string("ncclEpHandleCreate: ") + cudaGetErrorString(ce));
  }
  h->route.expanded = h->cfg.expanded;
  h->route.alignment = h->cfg.alignment;
  std::memset(h->summary, 0, sizeof(*h->summary));
  *out = h;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpHandleDestroy(ncclEpHandle_t h) {
  if (!h) return ncclSuccess;
  cudaSetDevice(h->group->link.cudaDev);
  cudaError_t ce = cudaDeviceSynchronize();
  if (h->devMem) cudaFree(h->devMem);
  if (h->summary) cudaFreeHost(h->summary);
  epx::llHandleRelease(h);
  delete h;
  if (ce != cudaSuccess) return fail(ncclUnhandledCudaError, std::string("ncclEpHandleDestroy: ") + cudaGetErrorString(ce));
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpHandleGetCapacity(ncclEpHandle_t h, int* rows) {
  if (!h || !rows) return fail(ncclInvalidArgument, "ncclEpHandleGetCapacity: NULL argument");
  if (h->ll) return fail(ncclInvalidUsage, "ncclEpHandleGetCapacity: a low-latency handle's outputs are sized by ncclEpLowLatencyGetShape");
  *rows = int(h->capacityRows);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpHandleGetCounts(ncclEpHandle_t h, ncclEpCounts_t* counts) {
  if (!h || !counts) return fail(ncclInvalidArgument, "ncclEpHandleGetCounts: NULL argument");
  if (h->ll) return fail(ncclInvalidUsage, "ncclEpHandleGetCounts: a low-latency handle keeps its counts on the device (recvCount)");
  if (h->cfg.capacity)
    return fail(ncclInvalidUsage, "ncclEpHandleGetCounts: capacity-mode handles keep counts on the device "
                                  "(ncclEpDispatchOutputs_t expertCounts / numRecvRows)");
  if (!h->laidOut) return fail(ncclInvalidUsage, "ncclEpHandleGetCounts: call ncclEpDispatchLayout first");
  counts->numRows = h->numRows;
  counts->numTokens = h->numRecvTokens;
  counts->numLocalExperts = int(h->expertCounts.size());
  counts->expertCounts = h->expertCounts.data();
  return ncclSuccess;
}
