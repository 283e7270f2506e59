/*
 * epx bucket collectives: all-gather, reduce-scatter and all-reduce over the tensors of a bucket
 * (data- and context-parallel gradients and parameters of MoE training), device-initiated over
 * NVLink (LSA loads/stores, no multicast) and the network (GIN), mixed in one communicator.
 *
 *   plan   the bucket's tensors (element count and dtype each, at most 32), the same on every rank
 *   ncclEpBucketCreate(comm, tensors, n, &cfg, &bucket)   collective; a region of the window (window.h)
 *   ncclEpBucketGetTensor(bucket, i, &ptr)                the tensor's device memory (whole tensor)
 *   ncclEpBucketAllGather / ReduceScatter / AllReduce(bucket, items, n, ..., session, stream)
 *
 * Shapes: tensor i holds count_i elements (count_i a multiple of nRanks); rank r's shard is
 * elements [r * count_i / nRanks, (r + 1) * count_i / nRanks). Every call is collective and
 * stream-ordered, in the same order on every rank, over the same items.
 *  - all-gather (any dtype, byte-exact): each rank's shard, in its own tensor, lands in every rank's
 *    tensor at that rank's shard (in place, as ncclAllGather with sendbuff = recvbuff + r * shard).
 *  - reduce-scatter (FP32 tensors): this rank's shard of the tensor becomes the sum over ranks of
 *    their tensors' elements of that shard (in place); optionally every contribution is rounded to
 *    BF16 for the wire (half the traffic) and the sum multiplied by a scale (e.g. 1 / nRanks).
 *  - all-reduce (FP32 or BF16 tensors, in place): reduce-scatter then all-gather; BF16 sums are
 *    accumulated in FP32 and rounded once.
 * Reductions sum in rank order 0, 1, ..., nRanks - 1 starting from +0.0 with FP32 additions
 * (round to nearest): results are bit-identical from run to run and across ranks, and equal to a CPU
 * sum in the same order (host/ref/include/epx/ref/bucket_ref.h).
 * Several tensors go in one call (batched: one kernel). A tensor living outside the bucket is
 * passed as item.external with a session: it is copied into the bucket tensor before the
 * collective and the result copied back after it, both on the stream (graph-capturable).
 * CUDA graphs: no call allocates or synchronizes with the host.
 * Errors before launch (ncclInvalidArgument, reason in ncclEpGetLastError): unknown tensor index,
 * a tensor twice in one call, count or dtype not the plan's, a reduction on a dtype it does not
 * take, an external pointer without a session, NULL or not 16-byte aligned. Device waits are
 * bounded by cfg.timeoutMs: a peer that never arrives becomes ncclEpBucketGetAsyncError's timeout
 * naming it.
 */
#ifndef EPX_BUCKET_H_
#define EPX_BUCKET_H_

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>

#include "epx/ep.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_EP_BUCKET_CONFIG_MAGIC 0x45505842u /* "EPXB" */
#define NCCL_EP_BUCKET_MAX_TENSORS 32

typedef struct ncclEpBucket* ncclEpBucket_t;
typedef struct ncclEpBucketSession* ncclEpBucketSession_t;

/* One planned tensor. */
typedef struct {
  size_t count;         /* elements of the whole tensor, > 0, a multiple of the communicator's size */
  ncclDataType_t dtype; /* any NCCL dtype (reductions: ncclFloat32, and ncclBfloat16 for all-reduce) */
} ncclEpBucketTensor_t;

typedef struct {
  size_t size;          /* sizeof(ncclEpBucketConfig_t) */
  unsigned int magic;   /* NCCL_EP_BUCKET_CONFIG_MAGIC */
  unsigned int version; /* EPX_VERSION_CODE */
  int numCtas;          /* CTAs (SMs) per collective kernel, 1 .. 32; default 4 */
  int timeoutMs;        /* device wait bound, >= 1; default 10000 */
  size_t chunkBytes;    /* network (GIN) peers: each transfer is put in chunks of at most this many
                         * bytes, each counted on arrival (reduce-scatter reduces a chunk as soon as
                         * it arrived from every source); 64 KiB .. 1 GiB, a multiple of 16;
                         * 0 = default 2 MiB. Larger chunks: fewer GIN operations, a longer drain. */
} ncclEpBucketConfig_t;

#define NCCL_EP_BUCKET_CONFIG_INITIALIZER                                                                \
  { sizeof(ncclEpBucketConfig_t), NCCL_EP_BUCKET_CONFIG_MAGIC, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, \
    0 }

/* One tensor of a collective call. count and dtype must be the plan's (checked). */
typedef struct {
  int tensor;           /* index in the plan */
  size_t count;         /* the plan's count */
  ncclDataType_t dtype; /* the plan's dtype */
  void* external;       /* NULL (or the bucket tensor itself): in place in the bucket; else a device
                           tensor of the same shape outside the bucket, 16-byte aligned (needs a
                           session) */
} ncclEpBucketItem_t;

/* Reduction options (NULL: defaults). */
typedef struct {
  ncclDataType_t wireType; /* reduce-scatter of FP32: ncclFloat32 (default) or ncclBfloat16 */
  int hasScale;            /* 1: multiply each sum by scale (after the rank-order sum) */
  float scale;
} ncclEpBucketReduceOpts_t;

/* Window bytes per rank for this plan (upper bound: network peers add BF16 staging for FP32
 * tensors): the tensors (256-byte aligned) plus a receive area as large as every FP32/BF16 tensor. */
ncclResult_t ncclEpBucketGetBufferSizeHint(const ncclEpBucketTensor_t* tensors, int numTensors, int nRanks,
                                           size_t* bytes);

/* Collective over comm: checks the plan, agrees on it and the config between ranks, takes a region
 * of the communicator's planned epx window (window.h) or, without a plan, allocates and registers a
 * window of its own. Tensors start zeroed. Errors: ncclInvalidArgument (plan/config),
 * ncclInvalidUsage (ranks differ, a runtime NCCL that cannot run this build (ep.h,
 * ncclEpGetNcclVersions), no symmetric memory, no GIN for network peers, no room in the planned
 * window, ranks took different regions). */
ncclResult_t ncclEpBucketCreate(ncclComm_t comm, const ncclEpBucketTensor_t* tensors, int numTensors,
                                const ncclEpBucketConfig_t* config, ncclEpBucket_t* bucket);
/* Collective over comm, with the same drain of in-flight GIN signals and the same errors as
 * ncclEpGroupDestroy (ep.h). NULL is ignored. */
ncclResult_t ncclEpBucketDestroy(ncclEpBucket_t bucket);

/* Device pointer of tensor `index` (the whole tensor; valid for the bucket's lifetime). */
ncclResult_t ncclEpBucketGetTensor(ncclEpBucket_t bucket, int index, void** ptr);

/* A session lets calls name tensors outside the bucket (item.external): staged into the bucket
 * tensor before the collective and copied back after it. Not collective. */
ncclResult_t ncclEpBucketSessionCreate(ncclEpBucket_t bucket, ncclEpBucketSession_t* session);
ncclResult_t ncclEpBucketSessionDestroy(ncclEpBucketSession_t session);
/* Bytes the session's calls have staged in and out so far (host counter). */
ncclResult_t ncclEpBucketSessionGetStagedBytes(ncclEpBucketSession_t session, size_t* bytes);

/* session may be NULL when no item is external; it must belong to bucket. */
ncclResult_t ncclEpBucketAllGather(ncclEpBucket_t bucket, const ncclEpBucketItem_t* items, int numItems,
                                   ncclEpBucketSession_t session, cudaStream_t stream);
ncclResult_t ncclEpBucketReduceScatter(ncclEpBucket_t bucket, const ncclEpBucketItem_t* items, int numItems,
                                       const ncclEpBucketReduceOpts_t* opts, ncclEpBucketSession_t session,
                                       cudaStream_t stream);
/* Reduce-scatter, then all-gather of the sums. opts->wireType applies to the reduce-scatter half of
 * FP32 tensors (ncclBfloat16: every contribution rounded to BF16, half the bytes on the wire); the
 * gather half moves the FP32 sums as they are. BF16 tensors travel BF16. */
ncclResult_t ncclEpBucketAllReduce(ncclEpBucket_t bucket, const ncclEpBucketItem_t* items, int numItems,
                                   const ncclEpBucketReduceOpts_t* opts, ncclEpBucketSession_t session,
                                   cudaStream_t stream);

/* Device-side error of the bucket (see ncclEpGroupGetAsyncError). Does not synchronize. */
ncclResult_t ncclEpBucketGetAsyncError(ncclEpBucket_t bucket, ncclResult_t* asyncError, char* msg, size_t msgLen);

#ifdef __cplusplus
}
#endif

#endif /* EPX_BUCKET_H_ */
