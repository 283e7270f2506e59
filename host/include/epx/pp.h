/*
 * epx pipeline-parallel (PP) send / recv: messages between any two ranks of a communicator, over
 * NVLink (LSA stores into the receiver's registered window) or the network (GIN puts), through
 * pre-registered slots on the receiver.
 *
 *   ncclEpPpChannelCreate(comm, &cfg, &ch)          collective; a region of the window (window.h)
 *   ncclEpPpSend(ch, buf, bytes, peer, stream)      stream-ordered; returns when enqueued
 *   ncclEpPpRecv(ch, buf, capacity, peer, recvBytes, stream)
 *   ncclEpPpChannelDestroy(ch)
 *
 * Ordering: messages of one ordered pair (sender, receiver) are received in the order they were
 * sent: the n-th ncclEpPpRecv from `peer` gets the n-th ncclEpPpSend of `peer` to this rank. Sends
 * to one peer must be stream-ordered with each other (one stream, or events), and so must receives
 * from one peer; sends and receives of different peers or directions may run concurrently.
 * Flow control: at most cfg.slots messages of a pair are in flight; the (slots + 1)-th send waits on
 * the device (stream-ordered, not on the host) until the receiver has consumed the first one; it
 * never overwrites an unread message. Every device wait is bounded by cfg.timeoutMs; a peer that
 * never sends or receives becomes an async error naming it (ncclEpPpGetAsyncError).
 * CUDA graphs: no call synchronizes with the host or allocates, so sends and receives can be
 * captured and replayed (message counts live in device memory; each replay is the next message).
 * Alignment: buffers 16-byte aligned; any byte count from 0 to cfg.maxMessageBytes.
 * A message larger than the receive buffer is dropped (nothing written to the buffer, the slot is
 * freed) and reported as ncclInvalidArgument by ncclEpPpGetAsyncError.
 */
#ifndef EPX_PP_H_
#define EPX_PP_H_

#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>

#include "epx/ep.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_EP_PP_CONFIG_MAGIC 0x45505850u /* "EPXP" */

typedef struct ncclEpPpChannel* ncclEpPpChannel_t;

/* Channel configuration. Initialize with NCCL_EP_PP_CONFIG_INITIALIZER; every rank must pass the
 * same values (exchanged and compared at creation). */
typedef struct {
  size_t size;            /* sizeof(ncclEpPpConfig_t) */
  unsigned int magic;     /* NCCL_EP_PP_CONFIG_MAGIC */
  unsigned int version;   /* EPX_VERSION_CODE */
  size_t maxMessageBytes; /* required: largest message, 1 B .. 4 GiB */
  int slots;              /* messages in flight per ordered pair, 1 .. 64; default 2 */
  int numCtas;            /* CTAs (SMs) per send / recv kernel, 1 .. 32; default 4 */
  int timeoutMs;          /* device wait bound, >= 1; default 10000 */
  size_t chunkBytes;      /* network (GIN) peers: a message is staged and put in chunks of this many
                           * bytes, at most 8 per message (larger messages: bytes / 8 per chunk), so
                           * that the wire carries one chunk while the sender stages the next and
                           * the receiver copies out the one before (NCCL_P2P_NET_CHUNKSIZE plays
                           * this role in NCCL's own send/recv); 64 KiB .. 1 GiB, a multiple of 16;
                           * 0 = default 4 MiB. Larger chunks mean fewer GIN operations per message
                           * and a longer pipeline fill and drain. */
} ncclEpPpConfig_t;

#define NCCL_EP_PP_CONFIG_INITIALIZER                                                                  \
  {                                                                                                    \
    sizeof(ncclEpPpConfig_t), NCCL_EP_PP_CONFIG_MAGIC, EPX_VERSION_CODE, 0, NCCL_EP_UNDEF_INT,         \
        NCCL_EP_UNDEF_INT, NCCL_EP_UNDEF_INT, 0                                                        \
  }

/* Window bytes per rank of a channel with this config over nRanks ranks, the upper bound (a channel
 * with network peers): a 4 KiB flag region, nRanks * slots receive slots of (maxMessageBytes + 16)
 * bytes and a staging area of nRanks * 2 such slots (two stage buffers per peer, for GIN puts),
 * rounded up to 2 MiB. Errors: ncclInvalidArgument. */
ncclResult_t ncclEpPpGetBufferSizeHint(const ncclEpPpConfig_t* config, int nRanks, size_t* bytes);

/* Collective over comm: takes a region of the communicator's planned epx window (window.h) or,
 * without a plan, registers a window of its own. Errors: ncclInvalidArgument (config),
 * ncclInvalidUsage (configs differ between ranks, a runtime NCCL that cannot run this build (ep.h,
 * ncclEpGetNcclVersions), no symmetric memory, no GIN for network peers, no room in the planned
 * window, ranks took different regions), CUDA/NCCL failures. */
ncclResult_t ncclEpPpChannelCreate(ncclComm_t comm, const ncclEpPpConfig_t* config, ncclEpPpChannel_t* channel);
/* Collective over comm: waits until the channel's last sends left their stage, then drains the
 * GIN signals in flight as ncclEpGroupDestroy does (ep.h; same errors). NULL is ignored. */
ncclResult_t ncclEpPpChannelDestroy(ncclEpPpChannel_t channel);

/* Sends bytes (0 .. maxMessageBytes) of buf (device memory, 16-byte aligned unless bytes == 0) to
 * peer (any rank of the communicator, this one included). buf may be reused when the stream reaches
 * the end of the call. Errors (nothing launched): ncclInvalidArgument for a NULL channel, a peer out
 * of range, bytes > maxMessageBytes, a NULL or misaligned buf; ncclRemoteError after an async
 * timeout of the channel. */
ncclResult_t ncclEpPpSend(ncclEpPpChannel_t channel, const void* buf, size_t bytes, int peer, cudaStream_t stream);

/* Receives the next message from peer into buf (capacity bytes, 16-byte aligned unless capacity
 * == 0). recvBytes: optional device word (8-byte aligned) set to the message's size. Errors as for
 * ncclEpPpSend; a message larger than capacity is reported asynchronously (see above). */
ncclResult_t ncclEpPpRecv(ncclEpPpChannel_t channel, void* buf, size_t capacity, int peer, size_t* recvBytes,
                          cudaStream_t stream);

/* Device-side error of the channel (see ncclEpGroupGetAsyncError): ncclRemoteError after a timeout
 * (naming the peer and whether a send waited for a free slot or a receive for data),
 * ncclInvalidArgument after a message larger than its receive buffer. Does not synchronize. */
ncclResult_t ncclEpPpGetAsyncError(ncclEpPpChannel_t channel, ncclResult_t* asyncError, char* msg, size_t msgLen);

#ifdef __cplusplus
}
#endif

#endif /* EPX_PP_H_ */
