/*
 * epx low-latency (decode) dispatch and combine: ncclEpAlgoLowLatency.
 *
 * For inference decoding (1 to a few hundred tokens per rank, every call inside a CUDA graph):
 * one kernel per dispatch and per combine, no layout call, no count exchange and no host
 * synchronization. Each (token, top-k slot) is sent to its expert's rank as its own row, into a
 * slot that the sender derives from the routing alone (the slot's position among this rank's tokens
 * of that expert, in token order), so the receiver knows where everything lands.
 *
 *   ncclEpConfig_t cfg = NCCL_EP_CONFIG_INITIALIZER;
 *   cfg.algorithm = ncclEpAlgoLowLatency; cfg.maxTokensPerRank = 128; cfg.hidden = 7168;
 *   cfg.topk = 8; cfg.numExperts = 256; cfg.fp8Dispatch = 1;
 *   ncclEpGroupCreate(comm, &cfg, &group);               collective, once
 *   ncclEpHandleCreate(group, &hcfg, &handle);           per micro-batch in flight (config ignored)
 *   ncclEpLowLatencyDispatch(handle, &din, &dout, NCCL_EP_LL_SEND_RECV, stream);
 *   ... experts on dout.recvX [Le, nRanks * maxTokensPerRank, hidden], dout.recvCount [Le] ...
 *   ncclEpLowLatencyCombine(handle, &cin, &cout, NCCL_EP_LL_SEND_RECV, stream);
 *
 * Send/receive split: flags NCCL_EP_LL_SEND launches only the send half (returns once the rows are
 * written or their puts issued: no SMs are held while data is in flight); NCCL_EP_LL_RECV later
 * (any stream, ordered after the send half by the caller) waits and finishes. Pass the same
 * inputs/outputs to both halves. Both halves are capturable in a CUDA graph. Send halves of a group
 * run one at a time (keep them on one stream), and so do receive halves; a receive half may run
 * while a later send half does.
 *
 * Double buffering: the group owns a device-side sequence number per op kind; op #seq uses bank
 * seq & 1 of every receive region, so two handles used alternately (two micro-batches) never share
 * rows or signals, and graph replays alternate banks without the host. At most two ops of a kind
 * may be pending per group (send half issued, receive half not yet), and receive halves must be
 * issued in the order of their send halves (a whole call needs no other pending op of its kind);
 * on the device a send also waits until the peers received the op that used its bank before.
 *
 * Rules: like every ncclEp op, LL calls are collective over the group and issued in the same order
 * on every rank; a group created with ncclEpAlgoLowLatency serves only these calls (the
 * high-throughput ones return ncclInvalidUsage on its handles and vice versa). Every rank passes
 * the same useFp8 to a dispatch.
 *
 * Errors (host, before launch; reason in ncclEpGetLastError): ncclInvalidArgument for NULL or
 * misaligned pointers, numTokens outside [0, maxTokensPerRank] (also during graph capture), FP8
 * without fp8Dispatch, bad flags; ncclInvalidUsage for a handle of a high-throughput group, a
 * receive half without its send half, a send half while the handle's previous one is not received,
 * a combine without a received dispatch, receive halves out of send order, a third pending send;
 * ncclRemoteError after a device-side timeout. Device side
 * (ncclEpGroupGetAsyncError): top-k ids outside [-1, numExperts) or repeated within a token are
 * dropped (the slot contributes nothing) and reported; a peer that does not arrive within
 * timeoutMs becomes a timeout naming the peer and the phase.
 */
#ifndef EPX_EP_LL_H_
#define EPX_EP_LL_H_

#include "epx/ep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Halves of an LL call (flags). */
#define NCCL_EP_LL_SEND 0x1
#define NCCL_EP_LL_RECV 0x2
#define NCCL_EP_LL_SEND_RECV (NCCL_EP_LL_SEND | NCCL_EP_LL_RECV)

/* Dispatch inputs (device pointers). */
typedef struct {
  const void* x;              /* [numTokens, hidden] BF16, 16-byte aligned */
  const void* topkIdx;        /* [numTokens, topk] global expert ids, -1 = masked slot */
  ncclDataType_t topkIdxType; /* ncclInt32 or ncclInt64 */
  int numTokens;              /* 0 .. maxTokensPerRank */
  int useFp8;                 /* 0: BF16 rows; 1: cast to FP8 e4m3 in the kernel, one FP32 scale per 128
                                 channels (scale = max|x| / 448 over the block, floored at 1e-4 / 448;
                                 needs fp8Dispatch); the same on every rank */
  int roundScale;             /* FP8 only: 1 = scales rounded up to powers of two (UE8M0) */
} ncclEpLowLatencyDispatchInputs_t;

/* Dispatch outputs (device pointers), expert-major. Le = numExperts / nRanks local experts, each
 * with rowsPerExpert = nRanks * maxTokensPerRank rows; expert le's valid rows are 0 .. recvCount[le]-1,
 * ordered by (source rank, the source's token order); rows past the count are not written. */
typedef struct {
  void* recvX;          /* [Le, rowsPerExpert, hidden] BF16, or FP8 e4m3 bytes when useFp8; 16-byte aligned */
  float* recvScales;    /* FP8: [Le, rowsPerExpert, hidden / 128] FP32 dequantization scales; else NULL */
  int32_t* recvCount;   /* [Le] rows received per local expert */
  int32_t* recvSrcInfo; /* optional [Le, rowsPerExpert, 3]: (source rank, source token, top-k slot); or NULL */
} ncclEpLowLatencyDispatchOutputs_t;

/* Combine inputs: the expert outputs in the dispatch output layout of the same handle. */
typedef struct {
  const void* x;             /* [Le, rowsPerExpert, hidden] BF16, 16-byte aligned (rows past recvCount
                                are not read). Zero-copy: the group's combine buffer
                                (ncclEpLowLatencyGetCombineBuffer) saves the copy for network peers */
  const float* topkWeights;  /* [numTokens, topk] FP32 gate weights, applied at the source rank */
} ncclEpLowLatencyCombineInputs_t;

typedef struct {
  void* out; /* [numTokens, hidden] BF16 (numTokens of the handle's dispatch), 16-byte aligned:
                out[t] = sum over k = 0..topk-1 of topkWeights[t, k] * expert output of slot k,
                accumulated in FP32 in slot order, rounded once; masked/dropped slots add nothing */
} ncclEpLowLatencyCombineOutputs_t;

/* Sizes of the LL outputs of a group. */
typedef struct {
  int numLocalExperts;  /* Le */
  int rowsPerExpert;    /* nRanks * maxTokensPerRank */
  int hidden;
  int scaleCols;        /* hidden / 128 (FP8 scales per row) */
} ncclEpLowLatencyShape_t;

/* Errors: ncclInvalidArgument (NULL), ncclInvalidUsage (not a low-latency group). */
ncclResult_t ncclEpLowLatencyGetShape(ncclEpGroup_t group, ncclEpLowLatencyShape_t* shape);

/* The group's combine buffer [Le, rowsPerExpert, hidden] BF16 in its window (zero-copy combine input).
 * Its contents must stay unchanged from the combine's send half until the next dispatch's receive
 * half of the group has returned (network peers may still be reading it). */
ncclResult_t ncclEpLowLatencyGetCombineBuffer(ncclEpGroup_t group, void** x);

/* Low-latency dispatch (collective, stream-ordered); flags: NCCL_EP_LL_SEND, NCCL_EP_LL_RECV or both. */
ncclResult_t ncclEpLowLatencyDispatch(ncclEpHandle_t handle, const ncclEpLowLatencyDispatchInputs_t* in,
                                      const ncclEpLowLatencyDispatchOutputs_t* out, int flags, cudaStream_t stream);

/* Low-latency combine of the handle's last received dispatch (collective, stream-ordered). */
ncclResult_t ncclEpLowLatencyCombine(ncclEpHandle_t handle, const ncclEpLowLatencyCombineInputs_t* in,
                                     const ncclEpLowLatencyCombineOutputs_t* out, int flags, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* EPX_EP_LL_H_ */
