#include "core/async_error.h"

#include <cstdio>

namespace epx {

namespace {
const char* phaseName(int phase) {
  switch (phase) {
    case dev::kPhaseBucketReady: return "bucket collective start";
    case dev::kPhaseBucketData: return "bucket collective data";
    case dev::kPhaseBucketFree: return "bucket reduce-scatter start (the peer's previous collective has not finished)";
    case dev::kPhasePpSlot: return "PP send (waiting for the receiver to free a slot)";
    case dev::kPhasePpData: return "PP recv (waiting for the message)";
    case dev::kPhaseCounts: return "count exchange (ncclEpDispatchLayout)";
    case dev::kPhaseDispatchReady: return "dispatch start";
    case dev::kPhaseDispatchData: return "dispatch data";
    case dev::kPhaseCombineReady: return "combine start";
    case dev::kPhaseCombineData: return "combine data";
    case dev::kPhaseCombineFree: return "combine start (the peer's previous combine has not finished)";
    case dev::kPhaseBadExpertId: return "expert id check";
    case dev::kPhaseLbReady: return "load-balancing call start";
    case dev::kPhaseLbData:
      return "load-balancing data (prefetched rows, or the owner's reads of this rank's slot gradients)";
    case dev::kPhaseEngramReady: return "Engram fetch start";
    case dev::kPhaseEngramRequests: return "Engram fetch (the peer's request list)";
    case dev::kPhaseEngramRows: return "Engram fetch (the rows this rank asked the peer for)";
    case dev::kPhaseGinCompletion: return "GIN completion";
    case dev::kPhaseLlDispatchFree: return "low-latency dispatch start (previous dispatch of this buffer bank not yet received by the peer)";
    case dev::kPhaseLlDispatchData: return "low-latency dispatch data";
    case dev::kPhaseLlCombineFree: return "low-latency combine start (previous combine of this buffer bank not yet received by the peer)";
    case dev::kPhaseLlCombineData: return "low-latency combine data";
    default: return "unknown phase";
  }
}
}  // namespace

ncclResult_t describeAsyncError(const dev::AsyncError& e, int timeoutMs, std::string* message) {
  char buf[512];
  if (e.timeout.code != 0) {
    const dev::ErrorRecord& t = e.timeout;
    if (t.phase == dev::kPhaseGinCompletion)
      std::snprintf(buf, sizeof(buf),
                    "rank %d: timed out after %d ms in GIN completion: %lld of this rank's own GIN puts posted, only "
                    "%lld completed locally (the network or NCCL's GIN proxy stalled, or a peer's connection was "
                    "lost); the group must be destroyed",
                    t.rank, timeoutMs, t.detail0, t.detail1);
    else if (t.phase == dev::kPhaseGinGet)
      std::snprintf(buf, sizeof(buf),
                    "rank %d: timed out after %d ms in GIN get completion: NCCL's flush of this rank's one-sided "
                    "reads did not return (the network or NCCL's GIN proxy stalled, or a peer's connection was "
                    "lost); the group must be destroyed",
                    t.rank, timeoutMs);
    else if (t.phase == dev::kPhaseBucketStage)
      std::snprintf(buf, sizeof(buf),
                    "rank %d: timed out after %d ms in the bucket reduce-scatter's BF16 conversion: CTA %d of this "
                    "rank converted %lld of the first %lld chunks (that CTA is not running: the grid must be "
                    "co-resident); the bucket must be destroyed",
                    t.rank, timeoutMs, t.peer, t.detail1, t.detail0);
    else if (t.phase == dev::kPhaseLinkDrain)
      std::snprintf(buf, sizeof(buf),
                    "rank %d: timed out after %d ms at destroy waiting for peer rank %d's GIN drain signals (%lld of "
                    "%lld contexts arrived): the peer has not destroyed its side, or died; released anyway, but "
                    "signals still in flight from it may reach the communicator's next device communicator",
                    t.rank, timeoutMs, t.peer, t.detail1, t.detail0);
    else
      std::snprintf(buf, sizeof(buf),
                    "rank %d: timed out after %d ms in %s waiting for peer rank %d over %s (expected %lld, saw %lld; "
                    "the peer never arrived or died); the group (bucket, channel) must be destroyed",
                    t.rank, timeoutMs, phaseName(t.phase), t.peer, t.transport == dev::kTransportGin ? "GIN" : "NVLink",
                    t.detail0, t.detail1);
    if (e.badId.code != 0) {
      const size_t n = std::char_traits<char>::length(buf);
      if (e.badId.phase == dev::kPhasePpRecvTooSmall)
        std::snprintf(buf + n, sizeof(buf) - n, "; earlier: a PP message of %lld bytes from rank %d was dropped (receive "
                      "buffer %lld bytes)", e.badId.detail0, e.badId.peer, e.badId.detail1);
      else if (e.badId.phase == dev::kPhaseEngramBadIndex)
        std::snprintf(buf + n, sizeof(buf) - n, "; earlier: layer %d, token %lld, entry %d had index %lld (row zeroed)",
                      e.badId.peer, e.badId.detail0, e.badId.transport, e.badId.detail1);
      else if (e.badId.phase == dev::kPhaseLbBadMapping)
        std::snprintf(buf + n, sizeof(buf) - n, "; earlier: the mapping entry of rank %d, slot %lld was %lld (skipped)",
                      e.badId.peer, e.badId.detail0, e.badId.detail1);
      else
        std::snprintf(buf + n, sizeof(buf) - n, "; earlier: token %lld had expert id %lld (slot dropped)",
                      e.badId.detail0, e.badId.detail1);
    }
    *message = buf;
    return ncclResult_t(t.code);
  }
  if (e.badId.code != 0 && e.badId.phase == dev::kPhasePpRecvTooSmall) {
    std::snprintf(buf, sizeof(buf),
                  "rank %d: a PP message of %lld bytes from peer rank %d is larger than the receive buffer (%lld "
                  "bytes); it was dropped, nothing was written",
                  e.badId.rank, e.badId.detail0, e.badId.peer, e.badId.detail1);
    *message = buf;
    return ncclResult_t(e.badId.code);
  }
  if (e.badId.code != 0 && e.badId.phase == dev::kPhaseEngramBadIndex) {
    std::snprintf(buf, sizeof(buf),
                  "rank %d: the Engram index of layer %d, token %lld, entry %d is %lld, not -1 or a row in 0 .. "
                  "numRows - 1; its output row was zeroed",
                  e.badId.rank, e.badId.peer, e.badId.detail0, e.badId.transport, e.badId.detail1);
    *message = buf;
    return ncclResult_t(e.badId.code);
  }
  if (e.badId.code != 0 && e.badId.phase == dev::kPhaseLbBadMapping) {
    std::snprintf(buf, sizeof(buf),
                  "rank %d: the load-balancing mapping entry of rank %d, slot %lld is %lld, not -1 or an original "
                  "expert id; that slot was skipped on every rank",
                  e.badId.rank, e.badId.peer, e.badId.detail0, e.badId.detail1);
    *message = buf;
    return ncclResult_t(e.badId.code);
  }
  if (e.badId.code != 0) {
    std::snprintf(buf, sizeof(buf), "rank %d: token %lld has expert id %lld, out of range or repeated (slot dropped)",
                  e.badId.rank, e.badId.detail0, e.badId.detail1);
    *message = buf;
    return ncclResult_t(e.badId.code);
  }
  *message = "no error";
  return ncclSuccess;
}

}  // namespace epx
