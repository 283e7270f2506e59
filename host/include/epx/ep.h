/*
 * epx expert-parallel (EP) dispatch and combine, layered beside an existing ncclComm_t.
 *
 * Model (as in DeepEP / NCCL EP "high-throughput" mode): every rank holds T tokens of `hidden`
 * channels and a router decision top-k ids [T, K]. Dispatch sends each token once to every rank
 * that owns at least one of its experts (expert e lives on rank e / (numExperts / nRanks)); combine
 * sends the expert outputs back and sums them per source token in FP32.
 *
 * Transports ("direct mode": every row goes straight to its destination rank): a peer in this
 * rank's NCCL LSA team (same NVLink domain) is written through NVLink loads/stores into its
 * registered window; every other peer is reached with GIN puts and signals (NCCL's InfiniBand GIN,
 * proxy or GDAKI, or NCCL_NET_PLUGIN=epx's ipc backend between processes of one host). One group
 * may mix both. Results are bit-identical whichever transport carries a row.
 *
 * Call sequence (stream-ordered, collective over the group's ranks, same order on every rank):
 *
 *   ncclEpGroupCreate(comm, &cfg, &group)              once; a region of the window (window.h)
 *   ncclEpHandleCreate(group, &hcfg, &handle)          once per route slot (not capturable: allocates)
 *   ncclEpDispatchLayout(handle, &routing, stream)     route: count exchange (exact mode: host sync)
 *   ncclEpDispatch(handle, &din, &dout, stream)        tokens -> expert ranks
 *   ... user expert kernels ...
 *   ncclEpCombine(handle, &cin, &cout, stream)         expert outputs -> source tokens
 *
 * A handle can be dispatched/combined again without a new layout (cached dispatch, e.g. backward);
 * after a new layout it must be dispatched before it is combined (ncclInvalidUsage otherwise).
 * In capacity mode nothing synchronizes with the host, so Layout -> Dispatch -> user -> Combine can
 * be captured in a CUDA graph and replayed with new routing written into the same input buffers.
 *
 * Errors: every call returns ncclResult_t; ncclEpGetLastError() gives the reason in words for the
 * calling thread. Device-side problems (a peer that never arrives, bad expert ids found on the
 * device in capacity mode) are reported by ncclEpGroupGetAsyncError().
 */
#ifndef EPX_EP_H_
#define EPX_EP_H_

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EPX_VERSION_CODE 100 /* 0.1.0 */
#define NCCL_EP_CONFIG_MAGIC 0x45505831u /* "EPX1" */
#define NCCL_EP_UNDEF_INT (-2147483647 - 1)
#define NCCL_EP_MAX_SM_BUDGET 160 /* largest ncclEpConfig_t.smBudget */

/* Opaque objects. */
typedef struct ncclEpGroup* ncclEpGroup_t;
typedef struct ncclEpHandle* ncclEpHandle_t;

typedef enum {
  ncclEpAlgoAuto = 0,
  ncclEpAlgoHighThroughput = 1,
  ncclEpAlgoLowLatency = 2 /* decode: the calls of epx/ep_ll.h (hidden a multiple of 128, maxTokensPerRank <= 4096) */
} ncclEpAlgo_t;

/*
 * How high-throughput dispatch and combine reach ranks of other nodes (a node: one NVLink domain).
 *  - Direct: every row goes straight to its destination rank over the network (a token bound for
 *    k ranks of another node crosses the network k times).
 *  - Hybrid: a token crosses the network once per destination node, to the rank of that node on the
 *    source's rail (same index in its node), which forwards it over NVLink to the ranks of its node
 *    that need it; combine sums each node's partials at that rank and returns one row per node.
 *    Results are those of direct mode, except that combine sums a node's partials first (in
 *    ascending rank order, then the nodes in ascending order: bit-identical to epx's CPU reference
 *    of that order, host/ref ep_ref.h CombinePath).
 *  - Auto (default): direct for now. The forward hop over real NVLink has not run yet (hybrid is
 *    built and tested with virtual nodes of fake nodes, docs/hybrid.md); auto will choose from the
 *    topology once it has been measured.
 */
typedef enum {
  ncclEpForwardAuto = 0,
  ncclEpForwardDirect = 1,
  ncclEpForwardHybrid = 2
} ncclEpForwarding_t;

/* Output layout of dispatch (and input layout of combine). */
typedef enum {
  /* One row per (token, local expert), rows grouped by local expert in expert order; inside an
   * expert, rows are ordered by (source rank, source token). Each expert's segment starts at a
   * multiple of expertAlignment rows. Received weights are 1-D (one per row). */
  ncclEpLayoutExpanded = 0,
  /* One row per (token, destination rank), ordered by (source rank, source token), with the
   * token's top-k ids (local expert index, or -1 for experts on other ranks) and weights. */
  ncclEpLayoutDeduplicated = 1
} ncclEpLayout_t;

typedef enum {
  /* ncclEpDispatchLayout waits for the receive counts and returns them to the host; outputs are
   * sized exactly (ncclEpHandleGetCounts). Not capturable in a CUDA graph. */
  ncclEpModeExact = 0,
  /* No host synchronization: outputs are sized at capacity (ncclEpHandleGetCapacity); valid counts
   * and per-expert prefix sums are written to device memory. Capturable in a CUDA graph. */
  ncclEpModeCapacity = 1
} ncclEpMode_t;

/*
 * Group configuration. Initialize with NCCL_EP_CONFIG_INITIALIZER, then set fields; fields left
 * undefined take the defaults given here. All ranks must pass the same values: ncclEpGroupCreate
 * exchanges maxTokensPerRank, hidden, topk, numExperts, fp8Dispatch, exactCombine, algorithm,
 * forwarding, forwardNodeSize, smBudget (and the CTA count it resolves to), timeoutMs and the epx/NCCL
 * versions between the ranks and fails on every rank when any differ (qpBudget and slIndex are not
 * compared: ignored intranode).
 */
typedef struct {
  size_t size;          /* sizeof(ncclEpConfig_t) */
  unsigned int magic;   /* NCCL_EP_CONFIG_MAGIC */
  unsigned int version; /* EPX_VERSION_CODE */
  int maxTokensPerRank; /* required: largest T any rank passes (1 .. 65536) */
  int hidden;           /* required: channels per token H, 8 .. 65536, a multiple of 8 (of 128 when
                           fp8Dispatch: one FP32 scale per 128 channels) */
  int topk;             /* required: K, 1 .. 32 */
  int numExperts;       /* required: E, a multiple of nRanks, at most 1024 (so nRanks <= 1024) */
  int fp8Dispatch;      /* 0 (default): dispatch BF16 only; 1: also allow FP8 e4m3 + FP32 scales */
  int algorithm;        /* ncclEpAlgo_t, default ncclEpAlgoAuto */
  int smBudget;         /* CTAs (one per SM) per kernel, 0 .. NCCL_EP_MAX_SM_BUDGET; 0 or undefined: analytic estimate
                           (host/src/core/config.cc); never more than the GPU's SMs. Every CTA of a
                           kernel must be resident at once: leave SMs free of long-running kernels
                           (checked against the kernels' occupancy at creation; with several ranks
                           on one GPU, e.g. under MPS, their CTAs together must fit the GPU).
                           Not a per-rank choice: the kernels' waits count the CTAs of their peers,
                           so the budget, and the CTA count it resolves to, must be the same on every
                           rank (GPUs with fewer SMs than the budget, or a different analytic estimate,
                           fail ncclEpGroupCreate; set the same explicit budget everywhere) */
  int qpBudget;         /* GIN QPs per rank; reserved for scale-out, ignored intranode */
  int slIndex;          /* InfiniBand SL for scale-out; -1 or undefined: policy; ignored intranode */
  int timeoutMs;        /* device wait bound in ms (>= 1) before an async error; default 10000. Must be
                           the same on every rank (the waits on peers' CTAs must give up together) */
  int exactCombine;     /* 0 (default) or 1: reserve FP32 combine buffers so handles may choose
                           ncclEpCombineFp32 (combineRecv and combineX grow from 2 to 4 bytes per
                           channel: + 2 * nRanks * maxTokensPerRank * hidden bytes of window) */
  int forwarding;       /* ncclEpForwarding_t, default ncclEpForwardAuto (= direct for now). Hybrid needs
                           the high-throughput algorithm and at least two nodes */
  int forwardNodeSize;  /* hybrid: ranks per node, 0 or undefined = the NVLink (LSA) team. Another value
                           groups consecutive ranks into virtual nodes (a multiple of the NVLink team,
                           dividing the EP size, at most 64) whose forward hop runs over whichever
                           transport reaches the peer: how hybrid is tested on fake nodes of one GPU.
                           Must be unset or 0 unless forwarding is ncclEpForwardHybrid */
} ncclEpConfig_t;

#define NCCL_EP_CONFIG_INITIALIZER                                                              \
  {                                                                                             \
    sizeof(ncclEpConfig_t), NCCL_EP_CONFIG_MAGIC, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT,          \
        NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT,              \
        NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT,              \
        NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT              \
  }

/*
 * Precision of combine's partial sums (expanded layout, where a rank first sums a token's rows of
 * its local experts and returns one row per token):
 *  - ncclEpCombineBf16Partials (default): the per-rank partial sum (FP32 accumulation) is rounded
 *    to BF16 for the wire, and the source sums the partials in FP32: 2 bytes per channel on the
 *    wire, two roundings (contributions 256 and 1 on one rank and -256 on another give 0, since
 *    257 rounds to 256 in BF16).
 *  - ncclEpCombineFp32: partial sums travel as FP32 and every contribution is summed once in FP32,
 *    rounded once to the BF16 output (the same example gives exactly 1): 4 bytes per channel on
 *    the wire (twice the combine traffic and receive-buffer reads); needs a group created with
 *    exactCombine = 1. The deduplicated layout returns the caller's BF16 rows as they are (no
 *    partial sums are formed), so the option changes nothing there.
 */
typedef enum { ncclEpCombineBf16Partials = 0, ncclEpCombineFp32 = 1 } ncclEpCombinePrecision_t;

/* Per-handle options. Initialize with NCCL_EP_HANDLE_CONFIG_INITIALIZER. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int layout;          /* ncclEpLayout_t, default ncclEpLayoutExpanded */
  int mode;            /* ncclEpMode_t, default ncclEpModeExact */
  int expertAlignment; /* expanded layout: segment alignment in rows, 1 .. 1024, default 1; must be
                          1 for the deduplicated layout (ncclInvalidArgument otherwise) */
  int zeroGaps;        /* expanded layout: 1 = write zeros into alignment gap rows, default 0 */
  int combinePrecision; /* ncclEpCombinePrecision_t, default ncclEpCombineBf16Partials */
} ncclEpHandleConfig_t;

#define NCCL_EP_HANDLE_CONFIG_INITIALIZER                                               \
  {                                                                                     \
    sizeof(ncclEpHandleConfig_t), NCCL_EP_CONFIG_MAGIC, EPX_VERSION_CODE, NCCL_EP_UNDEF_INT, \
        NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT      \
  }

/* Router decision of this rank. Device pointers. */
typedef struct {
  const void* topkIdx;        /* [numTokens, topk], ncclInt32 or ncclInt64; -1 = unused slot */
  ncclDataType_t topkIdxType; /* ncclInt32 or ncclInt64 */
  int numTokens;              /* T on this rank, 0 .. maxTokensPerRank */
} ncclEpRouting_t;

/* Dispatch inputs. Device pointers; x 16-byte aligned, others 4-byte aligned; rows contiguous. */
typedef struct {
  const void* x;             /* [T, hidden]: ncclBfloat16, or ncclFloat8e4m3 (fp8Dispatch groups) */
  ncclDataType_t xType;      /* ncclBfloat16 or ncclFloat8e4m3 */
  const float* xScales;      /* FP8 only: [T, hidden/128] FP32 dequantization scales; else NULL */
  const float* topkWeights;  /* [T, topk] FP32 gate weights, or NULL (no received weights) */
  int hidden;                /* optional shape check: channels of x; 0 = not checked */
} ncclEpDispatchInputs_t;

/*
 * Dispatch outputs (device pointers; recvX 16-byte aligned, others 4-byte aligned). R = rows of the
 * handle: exact mode ncclEpHandleGetCounts's numRows, capacity mode ncclEpHandleGetCapacity's rows.
 * Le = numExperts / nRanks. Rows past the valid count (capacity mode) are left untouched.
 */
typedef struct {
  void* recvX;              /* [R, hidden], same dtype as x */
  float* recvScales;        /* FP8: [R, hidden/128]; else NULL */
  float* recvTopkWeights;   /* expanded: [R] (weight of this row's expert); dedup: [R, topk]; or NULL */
  int32_t* recvTopkIdx;     /* dedup only: [R, topk] local expert index (0..Le-1) or -1; or NULL */
  int32_t* recvSrcInfo;     /* optional [R, 2]: (source rank, source token index) of each row; or NULL */
  int32_t* expertCounts;    /* optional [Le]: valid rows per local expert (unaligned); or NULL */
  int32_t* expertOffsets;   /* optional [Le + 1]: expanded: aligned segment starts, last = total rows
                               incl. gaps; dedup: exclusive prefix of expertCounts; or NULL */
  int32_t* numRecvRows;     /* optional [1]: rows written (expanded: incl. gaps); or NULL */
  int numRows;              /* optional shape check: rows allocated in the outputs (must be >= the
                               rows the handle needs); 0 = not checked */
} ncclEpDispatchOutputs_t;

/* Combine inputs: expert outputs in the dispatch output layout of the same handle. x, bias0 and
 * bias1 16-byte aligned; topkWeights 4-byte aligned. */
typedef struct {
  const void* x;               /* [R, hidden] ncclBfloat16 (gate weights already applied) */
  ncclDataType_t xType;        /* ncclBfloat16 */
  const void* bias0;           /* optional [T, hidden] BF16 added in the epilogue, or NULL */
  const void* bias1;           /* optional second [T, hidden] BF16 bias, or NULL */
  const float* topkWeights;    /* optional, only to produce combinedTopkWeights (the backward of the
                                  dispatched weights); combine never multiplies by them. Expanded
                                  [R] (one per row); dedup [R, topk] where only the columns of this
                                  rank's experts are used */
  int numRows;                 /* optional shape check: rows of x (>= the handle's rows); 0 = not checked */
  int hidden;                  /* optional shape check: channels of x; 0 = not checked */
} ncclEpCombineInputs_t;

typedef struct {
  void* out;                   /* [T, hidden] BF16, 16-byte aligned: sum over destination ranks, FP32
                                  accumulation; a token sent nowhere gets bias0 + bias1 (or 0) */
  float* combinedTopkWeights;  /* optional [T, topk]: weight of slot k from its expert's rank (0 for
                                  masked slots); requires topkWeights in the inputs */
  int numTokens;               /* optional shape check: rows of out (== the layout's T); 0 = not checked */
} ncclEpCombineOutputs_t;

/*
 * The group's receive buffers, in its registered window (device pointers, valid for the group's
 * lifetime). Rows are deduplicated dispatch rows (R = nRanks * maxTokensPerRank of them).
 * Zero-copy: a deduplicated-layout dispatch whose outputs.recvX is `recvX` here lets the senders
 * store rows straight into it over NVLink (no receive-side copy); its recvScales / recvTopkIdx /
 * recvTopkWeights / recvSrcInfo are then these buffers' too (NULL or other pointers in the outputs
 * get a copy); rows from network (GIN) peers land there directly too. A deduplicated-layout combine
 * whose inputs.x is `combineX` (the expert output written there in dispatch row order) lets NVLink
 * peers read it directly instead of it being sent, and is put from there to network peers without
 * staging. The rows stay valid until the next dispatch (combineX: until the next combine) of the
 * group returns. With network peers, combineX is also where an own-buffer combine stages the rows
 * it returns over GIN (so the expanded layout's combine input must not be combineX).
 */
typedef struct {
  void* recvX;            /* [rows, hidden] BF16, or FP8 e4m3 [rows, hidden] (row stride = hidden) */
  float* recvScales;      /* [rows, hidden/128] FP32 (fp8Dispatch groups), else NULL */
  int32_t* recvTopkIdx;   /* [rows, topk] local expert index or -1 */
  float* recvTopkWeights; /* [rows, topk] */
  int32_t* recvSrcInfo;   /* [rows, 2] (source rank, source token) */
  void* combineX;         /* [rows, hidden] BF16: combine input in place */
  int rows;               /* nRanks * maxTokensPerRank */
} ncclEpBuffers_t;

ncclResult_t ncclEpGroupGetBuffers(ncclEpGroup_t group, ncclEpBuffers_t* buffers);

/* Exact-mode receive counts, valid after ncclEpDispatchLayout returns. */
typedef struct {
  int numRows;        /* rows of the dispatch output (expanded: incl. alignment gaps) */
  int numTokens;      /* received (token, rank) pairs = deduplicated rows */
  int numLocalExperts;
  const int* expertCounts; /* host array [numLocalExperts], owned by the handle; valid until the
                              handle's next ncclEpDispatchLayout or ncclEpHandleDestroy */
} ncclEpCounts_t;

/* --- errors --------------------------------------------------------------------------------- */

/* Reason for the last failing ncclEp* call of the calling thread ("" if none); the string stays
 * valid until that thread's next failing ncclEp* call. */
const char* ncclEpGetLastError(void);

/* The NCCL this libepx was built against (*buildVersion, NCCL_VERSION_CODE of its headers) and the
 * one loaded in the process (*runtimeVersion, ncclGetVersion), codes as NCCL_VERSION_CODE (22809 =
 * 2.28.9). ncclSuccess when the loaded NCCL can run this build: a build on 2.28.9 headers runs on
 * 2.28.9 only; a build on 2.30+ headers on the same or a newer NCCL 2.x. Otherwise ncclInvalidUsage
 * and ncclEpGetLastError names both versions and what to do (every ncclEp*Create refuses with the
 * same reason). Both outputs are set in either case. */
ncclResult_t ncclEpGetNcclVersions(int* runtimeVersion, int* buildVersion);

/*
 * Device-side error of the group. Does not synchronize. *asyncError = ncclSuccess when none;
 * ncclRemoteError after a device wait timed out (a peer never arrived within timeoutMs; the group
 * then refuses new work and must be destroyed and recreated on every rank; with network peers,
 * GIN traffic of the failed operation may still be in flight, so destroy the communicator too);
 * ncclInvalidArgument
 * when a capacity-mode layout found invalid expert ids (those slots were dropped; the group stays
 * usable). msg (may be NULL) receives a description naming the stalled peer or the bad token,
 * truncated to msgLen. Errors: ncclInvalidArgument for NULL group/asyncError.
 */
ncclResult_t ncclEpGroupGetAsyncError(ncclEpGroup_t group, ncclResult_t* asyncError, char* msg,
                                      size_t msgLen);

/* --- group ---------------------------------------------------------------------------------- */

/*
 * Bytes of symmetric (window) memory a group with this config needs per rank, before anything is
 * allocated. Does not need a communicator: nRanks is the EP size. This is the upper bound for a
 * group with network (GIN) peers, which adds staging areas of maxTokensPerRank * min(topk, network
 * peers) rows; a group inside one NVLink domain allocates less. Memory grows with
 * nRanks * maxTokensPerRank rows (receive arrays, combine buffers); the count exchange of every
 * ncclEpDispatchLayout moves nRanks + Le ints to every rank. A low-latency config
 * (ncclEpAlgoLowLatency) is sized for its own regions instead (docs/low-latency.md, "Memory").
 * Hybrid forwarding adds the forwarder's regions; without a communicator the hint cannot see the
 * NVLink team, so with forwardNodeSize 0 it assumes nodes of one rank whose forward hop stages rows
 * (the largest size; over real NVLink those staging regions take 0 bytes, docs/hybrid.md).
 * Errors: ncclInvalidArgument for an invalid config (reason in ncclEpGetLastError).
 */
ncclResult_t ncclEpGetBufferSizeHint(const ncclEpConfig_t* config, int nRanks, size_t* bytes);

/*
 * Create an EP group over all ranks of comm (collective), 1 to 1024 ranks in any number of NVLink
 * domains: NVLink (LSA) peers are reached through the window, the others through GIN (the device
 * communicator then requests 5 * nRanks GIN signals on every GIN context; NCCL 2.28.9 gives at most
 * 4 contexts, NCCL_GIN_NCONTEXTS). 1 rank runs without communication. Takes a region
 * (ncclEpGetBufferSizeHint bytes) of the communicator's planned epx window (window.h) or, without a
 * plan, allocates a window of its own with ncclMemAlloc, registers it and creates an NCCL device
 * communicator for it; ends with a barrier over comm. Several groups may share one comm. All ncclEp*
 * operations of a group (on all its handles) must be issued in the same order on every rank and be
 * stream-ordered with each other.
 * The ranks first agree on the config (one ncclAllGather on comm, on a private stream): each compares
 * every rank's maxTokensPerRank, hidden, topk, numExperts, fp8Dispatch, exactCombine, algorithm,
 * forwarding, forwardNodeSize, smBudget and resolved CTA count, timeoutMs and epx/NCCL build versions
 * with rank 0's. When any
 * differ, every rank (not only the odd one) returns ncclInvalidUsage with the same message, naming
 * the first differing rank, the field and both values, e.g. "ncclEpGroupCreate: rank 3 has smBudget
 * 16 (16 CTAs) but rank 0 has 24 (24 CTAs); every rank must create the group with the same config";
 * nothing is allocated. A config invalid on its own (ncclInvalidArgument) is reported before the
 * exchange, so it must be invalid on every rank alike (the others would wait in the exchange).
 * Errors: ncclInvalidArgument (config), ncclInvalidUsage (configs differ between ranks, a runtime NCCL
 * that cannot run this build — see ncclEpGetNcclVersions —, no symmetric memory support, more CTAs
 * than can be resident, no GIN for peers outside the NVLink domain, no room for it in the planned
 * window — the message says what it needs and what is free —, ranks took different regions), ncclSystemError /
 * ncclUnhandledCudaError / the NCCL call's own result.
 */
ncclResult_t ncclEpGroupCreate(ncclComm_t comm, const ncclEpConfig_t* config, ncclEpGroup_t* group);

/* Destroy a group. NULL is ignored. Collective over the group's communicator, like NCCL's window
 * deregistration inside it: waits for the group's work on this device, then (ranks spanning
 * NVLink domains) until every GIN signal a peer's kernels sent to this rank has landed, so that
 * none reaches the signals NCCL hands the next group (bounded by timeoutMs). The group is released
 * whatever the result. Errors: ncclRemoteError when a network peer did not destroy its group
 * within timeoutMs (message: the peer; ncclEpGetLastError), ncclUnhandledCudaError when the
 * group's pending work failed. After the group recorded a timeout, this rank does not wait for
 * the peers' drain (a peer that stalled cannot drain; abort the communicator), it only sends its own. */
ncclResult_t ncclEpGroupDestroy(ncclEpGroup_t group);

/* Number of CTAs the group's kernels launch (the SM budget actually used). */
ncclResult_t ncclEpGroupGetSmCount(ncclEpGroup_t group, int* sms);

/* --- handles -------------------------------------------------------------------------------- */

/*
 * A route slot of the group (not collective; allocates device memory sized by the group's maxima,
 * so create handles before CUDA graph capture). Errors: ncclInvalidArgument (config, capacity over
 * 2^31 rows), ncclUnhandledCudaError.
 */
ncclResult_t ncclEpHandleCreate(ncclEpGroup_t group, const ncclEpHandleConfig_t* config,
                                ncclEpHandle_t* handle);
ncclResult_t ncclEpHandleDestroy(ncclEpHandle_t handle);

/* Capacity-mode output rows: deduplicated nRanks * maxTokensPerRank; expanded
 * nRanks * maxTokensPerRank * min(topk, Le) + Le * (expertAlignment - 1). Exact mode: the same
 * bound (outputs may be sized by it too). */
ncclResult_t ncclEpHandleGetCapacity(ncclEpHandle_t handle, int* rows);

/* Exact mode only, after ncclEpDispatchLayout: the receive counts (host). */
ncclResult_t ncclEpHandleGetCounts(ncclEpHandle_t handle, ncclEpCounts_t* counts);

/*
 * Compute the route of `routing` into the handle and exchange counts with all ranks (collective).
 * Exact mode: blocks the host until the counts arrive, and returns ncclInvalidArgument for expert
 * ids out of range [-1, numExperts) or repeated within a token. Capacity mode: does not block;
 * invalid ids are dropped and reported through ncclEpGroupGetAsyncError.
 * Host-side errors: numTokens > maxTokensPerRank, NULL/misaligned pointers, bad dtype.
 */
ncclResult_t ncclEpDispatchLayout(ncclEpHandle_t handle, const ncclEpRouting_t* routing,
                                  cudaStream_t stream);

/* Send tokens to the ranks of their experts by the handle's route (collective, stream-ordered).
 * Errors (before launching): ncclInvalidArgument for a handle without a layout, NULL or misaligned
 * pointers, dtype not BF16/FP8 (FP8 needs an fp8Dispatch group and scales), hidden or numRows not
 * matching, recvTopkIdx with the expanded layout; ncclRemoteError after an async timeout. */
ncclResult_t ncclEpDispatch(ncclEpHandle_t handle, const ncclEpDispatchInputs_t* in,
                            const ncclEpDispatchOutputs_t* out, cudaStream_t stream);

/* Return expert outputs to their source tokens and sum them (collective, stream-ordered).
 * In-place input (x = the group's combineX, deduplicated layout) must be used by every rank of the
 * group for the same call, or by none: NVLink peers then read each other's rows instead of sending
 * them. Needs a dispatch of the handle's current route: after ncclEpDispatchLayout, ncclEpDispatch must have been
 * called on the handle before ncclEpCombine. Dispatching again on the same layout (cached dispatch)
 * and combining several times after one dispatch are allowed.
 * Errors (before launching): ncclInvalidArgument for a handle without a layout, x not BF16, NULL or
 * misaligned pointers, numRows/hidden/numTokens not matching the handle, combinedTopkWeights
 * without topkWeights; ncclInvalidUsage for a handle laid out but not dispatched since its last
 * ncclEpDispatchLayout (nothing is launched); ncclRemoteError after an async timeout. */
ncclResult_t ncclEpCombine(ncclEpHandle_t handle, const ncclEpCombineInputs_t* in,
                           const ncclEpCombineOutputs_t* out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* EPX_EP_H_ */
