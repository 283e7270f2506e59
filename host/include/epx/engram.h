/*
 * epx Engram: embedding-like tables sharded over the ranks, several layers, and a fetch that
 * gathers the rows a batch of tokens names from whichever rank holds them, one completion per
 * layer (layer i's computation may start while later layers are still arriving).
 *
 *   plan    numLayers tables of numRows rows of rowBytes bytes; rank r holds rows
 *           [r * R, (r + 1) * R) of every layer (R = numRows / nRanks); a fetch names up to
 *           maxTokens tokens x entriesPerToken rows per layer on each rank
 *   ncclEpEngramCreate(comm, &plan, &cfg, &engram)         collective; a region of the window (window.h)
 *   ncclEpEngramSetTable(engram, layer, shard)             local: where this rank's R rows of a layer live
 *   ncclEpEngramFetch(engram, indices, numTokens, output, stream)          collective
 *   ncclEpEngramWaitLayer(engram, layer, stream)           `stream` waits for that layer of the last fetch
 *
 * Tables stay where the caller keeps them: device memory, or pinned host memory mapped into the
 * device's address space (cudaHostAlloc with cudaHostAllocMapped, or cudaHostRegister): only the
 * owner's kernel reads its shard, so tables need not fit the window.
 *
 * Fetch: indices is a device array of int32 [numLayers][numTokens][entriesPerToken] (global row
 * numbers); output a device array [numLayers][numTokens][entriesPerToken][rowBytes] that receives
 * each named row's bytes. Index -1 means "no row": its output row is zeroed. An index outside
 * [-1, numRows) is never used to address memory: its output row is zeroed too and one such index
 * (of the first layer that has one; the first report stays until the object is destroyed) is
 * reported by ncclEpEngramGetAsyncError (ncclInvalidArgument, naming the layer, token, entry and
 * value). Collective and stream-ordered: every rank fetches (0 tokens is allowed;
 * indices and output may then be NULL), since the owners serve the rows; numTokens may differ
 * between ranks.
 * How the rows move: per layer, one kernel on `stream`. Each rank sends each owner the list of
 * the rows it wants (NVLink owners read the list in place; network owners get it with one put);
 * the owner gathers the rows asked of it from its table: NVLink requesters get them stored
 * straight into their window, network requesters get them gathered into chunks of chunkBytes and
 * put (one GIN operation per chunk, not per row); the requester then copies every row into output
 * order. This uses GIN puts only, so every supported NCCL (2.28.9 too) serves network peers; the
 * owner's kernel takes part, which is why the fetch is collective.
 * Layers: layer l's kernel runs after layer l - 1's on `stream`; ncclEpEngramWaitLayer(l, s) makes
 * stream s wait for layer l only (an event recorded after its kernel), so layer l's consumers run
 * while layers > l are on the wire. A stream that waits on a layer before any fetch does not wait.
 * Under stream capture, wait on the layers inside the same capture: the events then join the graph;
 * a replayed graph's fetch is waited for by waiting on the graph's stream.
 * No call after ncclEpEngramCreate allocates or synchronizes with the host: graph-capturable (the
 * waits of ncclEpEngramWaitLayer join the streams into the capture, as any event wait does).
 * Device waits are bounded by cfg.timeoutMs and name the peer (ncclEpEngramGetAsyncError).
 * Communicators of up to 1024 ranks.
 * Reference: host/ref/include/epx/ref/engram_ref.h.
 */
#ifndef EPX_ENGRAM_H_
#define EPX_ENGRAM_H_

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "epx/ep.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_EP_ENGRAM_CONFIG_MAGIC 0x45505845u /* "EPXE" */
#define NCCL_EP_ENGRAM_MAX_LAYERS 64

typedef struct ncclEpEngram* ncclEpEngram_t;

typedef struct {
  int numLayers;       /* 1 .. NCCL_EP_ENGRAM_MAX_LAYERS */
  int64_t numRows;     /* rows of every layer's table, a positive multiple of the rank count, < 2^31 */
  size_t rowBytes;     /* > 0, a multiple of 16, at most 1 GiB */
  int maxTokens;       /* tokens per fetch on any rank, >= 1 */
  int entriesPerToken; /* rows per token and layer, >= 1; maxTokens * entriesPerToken <= 2^24 */
} ncclEpEngramPlan_t;

typedef struct {
  size_t size;          /* sizeof(ncclEpEngramConfig_t) */
  unsigned int magic;   /* NCCL_EP_ENGRAM_CONFIG_MAGIC */
  unsigned int version; /* EPX_VERSION_CODE */
  int numCtas;          /* CTAs (SMs) of the fetch kernel, 1 .. 32; default 8 */
  int timeoutMs;        /* device wait bound, >= 1; default 10000 */
  size_t chunkBytes;    /* network requesters: rows are gathered and put in chunks of at most this
                         * many bytes (whole rows, at least one), 64 KiB .. 1 GiB, a multiple of 16;
                         * 0 = default 8 MiB */
} ncclEpEngramConfig_t;

#define NCCL_EP_ENGRAM_CONFIG_INITIALIZER \
  { sizeof(ncclEpEngramConfig_t), NCCL_EP_ENGRAM_CONFIG_MAGIC, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, 0 }

/* Window bytes per rank for this plan on comm (request lists, the receive rows of one layer, the
 * network staging): what ncclEpEngramCreate takes; ncclEpWindowPlanAddEngram (window.h) adds it
 * to a window plan. */
ncclResult_t ncclEpEngramGetBufferSizeHint(ncclComm_t comm, const ncclEpEngramPlan_t* plan,
                                           const ncclEpEngramConfig_t* config, size_t* bytes);

/* Collective over comm (config NULL: every default): checks the plan and config, agrees on them
 * between ranks, takes a region of the communicator's epx window. Errors: ncclInvalidArgument
 * (plan/config, the reason in ncclEpGetLastError), ncclInvalidUsage (ranks differ; a runtime NCCL
 * that cannot run this build; no symmetric memory; no room in a planned window). */
ncclResult_t ncclEpEngramCreate(ncclComm_t comm, const ncclEpEngramPlan_t* plan, const ncclEpEngramConfig_t* config,
                                ncclEpEngram_t* engram);
/* Collective; as ncclEpBucketDestroy. NULL is ignored. */
ncclResult_t ncclEpEngramDestroy(ncclEpEngram_t engram);

/* Local: this rank's shard of table `layer`, [numRows / nRanks][rowBytes], 16-byte aligned, in
 * device memory or mapped pinned host memory (anything else: ncclInvalidArgument). epx reads it
 * in every later fetch; the caller keeps it alive and may change its contents between fetches
 * (stream-ordered with them) or point the layer elsewhere with another call (not while a fetch is
 * queued). Every layer needs a table before the first fetch. */
ncclResult_t ncclEpEngramSetTable(ncclEpEngram_t engram, int layer, const void* shard);

/* See above. indices: [numLayers][numTokens][entriesPerToken] int32 device memory (4-byte aligned);
 * output: [numLayers][numTokens][entriesPerToken][rowBytes] device memory (16-byte aligned);
 * 0 <= numTokens <= maxTokens. */
ncclResult_t ncclEpEngramFetch(ncclEpEngram_t engram, const int32_t* indices, int numTokens, void* output,
                               cudaStream_t stream);
/* `stream` waits until layer `layer` of the last fetch enqueued before this call is in output. */
ncclResult_t ncclEpEngramWaitLayer(ncclEpEngram_t engram, int layer, cudaStream_t stream);

/* Device-side error (see ncclEpGroupGetAsyncError): timeouts naming the peer, bad indices. Does
 * not synchronize. */
ncclResult_t ncclEpEngramGetAsyncError(ncclEpEngram_t engram, ncclResult_t* asyncError, char* msg, size_t msgLen);

#ifdef __cplusplus
}
#endif

#endif /* EPX_ENGRAM_H_ */
