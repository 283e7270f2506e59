/*
 * epx expert load balancing (EPLB): redundant copies of hot experts on other ranks, over NVLink
 * (LSA) and across nodes (GIN) alike.
 *
 *   plan    numExperts original experts split evenly over the ranks (rank r owns experts
 *           [r * L, (r + 1) * L), L = numExperts / nRanks), numSlots redundant slots per rank, the
 *           weight tensors of one expert (rowBytes each: weights, quantization scales; any dtype,
 *           moved as bytes) and its gradient tensors (rowElems FP32 each); the same on every rank
 *   ncclEpLbCreate(comm, &plan, &cfg, &lb)             collective; a region of the window (window.h)
 *   ncclEpLbGetSlots(lb, t, &ptr)                      weight tensor t of this rank's slots:
 *                                                      [numSlots][rowBytes], in the region
 *   ncclEpLbGetSlotGrads(lb, t, &ptr)                  gradient tensor t of this rank's slots:
 *                                                      [numSlots][rowElems] FP32, in the region
 *   ncclEpLbPrefetchWeights(lb, mapping, weights, stream)
 *   ncclEpLbReduceGrads(lb, mapping, grads, stream)
 *
 * Mapping: a device array of nRanks * numSlots int32, the same on every rank: entry
 * d * numSlots + s names the original expert that slot s of rank d holds, or -1 (unused). It lives
 * in device memory so a balancer may change it between steps without the host (and a captured
 * graph replays with the mapping's current contents). An entry outside [-1, numExperts) is never
 * used as an index: the call skips that slot on every rank and reports ncclInvalidArgument naming
 * the rank, slot and value through ncclEpLbGetAsyncError.
 *  - Prefetch: every used slot of every rank becomes a byte copy of its expert's rows of each
 *    weight tensor, read from the owner's weights[t] ([L][rowBytes], device memory, 16-byte
 *    aligned; not modified); unused slots keep their bytes. The owner writes (pushes) the rows
 *    into the holders' slots: over NVLink straight from weights[t], over the network staged
 *    through the owner's region in chunks and put.
 *  - Gradient reduction: grads[t] ([L][rowElems] FP32, this rank's original experts, in place)
 *    becomes, for every expert, its value plus its replicas' slot gradients added one by one in
 *    (rank, slot) ascending order with FP32 round-to-nearest additions: bit-identical from run to
 *    run and equal to host/ref's lbReduceGrads. The owner reads (pulls) its replicas' rows: NVLink
 *    loads, or one-sided GIN get from network peers (NCCL 2.30.3 or newer: with network peers and
 *    an older NCCL, a plan with gradient tensors is refused at creation).
 * Both calls are collective and stream-ordered, in the same order on every rank; they end when
 * every rank's part of the transfer is done (the caller may overwrite weights / slot gradients
 * after the call on its stream). No call allocates or synchronizes with the host: graph-capturable.
 * Device waits are bounded by cfg.timeoutMs and name the peer (ncclEpLbGetAsyncError).
 * Reference: host/ref/include/epx/ref/lb_ref.h.
 */
#ifndef EPX_LB_H_
#define EPX_LB_H_

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "epx/ep.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_EP_LB_CONFIG_MAGIC 0x4550584cu /* "EPXL" */
#define NCCL_EP_LB_MAX_TENSORS 8

typedef struct ncclEpLb* ncclEpLb_t;

typedef struct {
  int numExperts;                               /* original experts, a positive multiple of nRanks */
  int numSlots;                                 /* redundant slots per rank, 1 .. 256 */
  int numWeightTensors;                         /* 0 .. NCCL_EP_LB_MAX_TENSORS */
  size_t weightRowBytes[NCCL_EP_LB_MAX_TENSORS];  /* bytes per expert, > 0, a multiple of 16 */
  int numGradTensors;                           /* 0 .. NCCL_EP_LB_MAX_TENSORS (not both 0) */
  size_t gradRowElems[NCCL_EP_LB_MAX_TENSORS];    /* FP32 elements per expert, > 0, a multiple of 4 */
} ncclEpLbPlan_t;

typedef struct {
  size_t size;          /* sizeof(ncclEpLbConfig_t) */
  unsigned int magic;   /* NCCL_EP_LB_CONFIG_MAGIC */
  unsigned int version; /* EPX_VERSION_CODE */
  int numCtas;          /* CTAs (SMs) per call, 1 .. 32; default 8 */
  int timeoutMs;        /* device wait bound, >= 1; default 10000 */
  size_t chunkBytes;    /* network peers: rows move in chunks of at most this many bytes (prefetch:
                         * staged and put; reduction: got and added), 64 KiB .. 1 GiB, a multiple
                         * of 16; 0 = default 2 MiB */
} ncclEpLbConfig_t;

#define NCCL_EP_LB_CONFIG_INITIALIZER \
  { sizeof(ncclEpLbConfig_t), NCCL_EP_LB_CONFIG_MAGIC, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, 0 }

/* Window bytes per rank for this plan on comm (the slots, the slot gradients and the network
 * staging): what ncclEpLbCreate takes; ncclEpWindowPlanAddLb adds it to a window plan. */
ncclResult_t ncclEpLbGetBufferSizeHint(ncclComm_t comm, const ncclEpLbPlan_t* plan, const ncclEpLbConfig_t* config,
                                       size_t* bytes);

/* Collective over comm (config NULL: every default): checks the plan and config, agrees on them between ranks, takes a region of
 * the communicator's epx window (window.h). Slots and slot gradients start zeroed. Errors:
 * ncclInvalidArgument (plan/config, with the reason in ncclEpGetLastError), ncclInvalidUsage
 * (ranks differ; a runtime NCCL that cannot run this build; no symmetric memory; gradient tensors
 * with network peers on NCCL older than 2.30.3; no room in a planned window). */
ncclResult_t ncclEpLbCreate(ncclComm_t comm, const ncclEpLbPlan_t* plan, const ncclEpLbConfig_t* config,
                            ncclEpLb_t* lb);
/* Collective; as ncclEpBucketDestroy. NULL is ignored. */
ncclResult_t ncclEpLbDestroy(ncclEpLb_t lb);

ncclResult_t ncclEpLbGetSlots(ncclEpLb_t lb, int weightTensor, void** ptr);
ncclResult_t ncclEpLbGetSlotGrads(ncclEpLb_t lb, int gradTensor, float** ptr);

/* weights: numWeightTensors device pointers, [L][weightRowBytes[t]] each. */
ncclResult_t ncclEpLbPrefetchWeights(ncclEpLb_t lb, const int32_t* mapping, const void* const* weights,
                                     cudaStream_t stream);
/* grads: numGradTensors device pointers, [L][gradRowElems[t]] FP32 each, reduced in place. */
ncclResult_t ncclEpLbReduceGrads(ncclEpLb_t lb, const int32_t* mapping, float* const* grads, cudaStream_t stream);

/* Device-side error of lb (see ncclEpGroupGetAsyncError): timeouts naming the peer, bad mapping
 * entries. Does not synchronize. */
ncclResult_t ncclEpLbGetAsyncError(ncclEpLb_t lb, ncclResult_t* asyncError, char* msg, size_t msgLen);

#ifdef __cplusplus
}
#endif

#endif /* EPX_LB_H_ */
