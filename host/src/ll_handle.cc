// Low-latency pieces of groups and handles: the group-owned LL device state (sequence numbers,
// CTA counters, running totals of the count words) and a handle's LL route, both sized by the
// group's maxima at creation so that LL calls allocate nothing (CUDA-graph capturable).
#include <cstdint>
#include <type_traits>

#include "epx/device/launch.h"
#include "internal.h"

namespace epx {

cudaError_t llGroupInit(ncclEpGroup* g) {
  const size_t seenBytes = sizeof(uint32_t) * dev::kLlBanks * g->cfg.numExperts;
  cudaError_t ce = dev::llPrepareKernels();
  if (ce == cudaSuccess) ce = cudaMalloc(&g->llState, sizeof(dev::LlState));
  if (ce == cudaSuccess) ce = cudaMemset(g->llState, 0, sizeof(dev::LlState));
  if (ce == cudaSuccess) ce = cudaMalloc(&g->llCountSeen, seenBytes);
  if (ce == cudaSuccess) ce = cudaMemset(g->llCountSeen, 0, seenBytes);
  return ce;
}

void llGroupRelease(ncclEpGroup* g) {
  if (g->llState) cudaFree(g->llState);
  if (g->llCountSeen) cudaFree(g->llCountSeen);
  g->llState = nullptr;
  g->llCountSeen = nullptr;
}

namespace {
// Carves the LL route out of one allocation; returns the bytes needed when base is null.
size_t carveLlRoute(char* base, const ncclEpGroup& g, dev::LlRoute* r) {
  const size_t T = g.cfg.maxTokensPerRank, K = g.cfg.topk, R = g.link.nRanks, Le = g.cfg.localExperts(g.link.nRanks);
  size_t off = 0;
  auto take = [&](auto** p, size_t count) {
    using Elem = std::remove_pointer_t<std::remove_reference_t<decltype(*p)>>;
    off = (off + 255) / 256 * 256;
    *p = base ? reinterpret_cast<Elem*>(base + off) : nullptr;
    off += count * sizeof(Elem);
  };
  take(&r->tokExpert, T * K);
  take(&r->tokSlot, T * K);
  take(&r->rowSrc, Le * R * T * 2);
  take(&r->srcStart, Le * (R + 1));
  take(&r->expertCount, Le);
  take(&r->stageStart, size_t(g.cfg.numExperts) + 1);
  take(&r->seq, size_t(dev::kLlNumOps));
  return off;
}
}  // namespace

cudaError_t llHandleInit(ncclEpHandle* h) {
  const ncclEpGroup& g = *h->group;
  const size_t bytes = carveLlRoute(nullptr, g, &h->llRoute);
  cudaError_t ce = cudaSetDevice(g.link.cudaDev);
  if (ce == cudaSuccess) ce = cudaMalloc(&h->llMem, bytes);
  if (ce == cudaSuccess) ce = cudaMemset(h->llMem, 0, bytes);
  if (ce == cudaSuccess) ce = cudaDeviceSynchronize();
  if (ce == cudaSuccess) carveLlRoute(static_cast<char*>(h->llMem), g, &h->llRoute);
  return ce;
}

void llHandleRelease(ncclEpHandle* h) {
  if (h->llMem) cudaFree(h->llMem);
  h->llMem = nullptr;
}

}  // namespace epx
