// The registered window of an Engram object (ncclEpEngram, epx/engram.h) and its fetch kernel's
// arguments. Laid out by device/ for the kernel and the host (sizing, CPU tests); identical on
// every rank (the plan is agreed at creation).
//   flags      u32 [kNumFlagKinds][nRanks] (the protocol session's words, window_layout.h)
//   requests   i32 [nRanks][requestStride]: this rank's request list to each owner: a header
//              (rows, first receive row), then the owner's local row numbers. NVLink owners read
//              it here; network owners get it put into their inbox.
//   inbox      i32 [nRanks][requestStride]: network requesters' lists (only with network peers)
//   positions  i32 [maxRequests]: the output row (token * entries + entry) of each receive row
//   recv       [maxRequests][rowBytes]: the rows of one layer, grouped by owner in request order
//   stage      [CTA][kEngramStageBuffers][chunkRows * rowBytes] (only with network peers): where an
//              owner gathers a chunk of rows for a network requester before putting it
// One fetch layer is one op of the protocol session (session.cuh): ready = "this rank entered op
// #seq" (its inbox may be written); the request of a layer arrives on the dispatch slot's arrival
// word (NVLink: every CTA of the requester adds 1 once the lists are built; network: one put per
// owner, +1); the rows arrive on the combine slot's arrival word (NVLink: every CTA of the owner
// adds 1 after its stores; network: +1 per chunk put). A requester's rows of op #seq are written
// only after its request of op #seq arrived, so the rows need no credit of their own.
#pragma once
#include <cstdint>

#include "epx/device/chunking.h"
#include "epx/device/link_args.h"
#include "epx/device/session_args.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

constexpr int kEngramMaxCtas = 32;
constexpr int kEngramMaxRanks = 1024;
// Header of a request list, in int32: rows, the first receive row at the requester, two unused
// (the list starts 16-byte aligned).
constexpr int kEngramHeaderInts = 4;
enum EngramHeader : int { kEngramHeaderRows = 0, kEngramHeaderRecvRow = 1 };
// An owner CTA alternates between two stage buffers (PP's and load balancing's scheme).
constexpr int kEngramStageBuffers = 2;
constexpr uint64_t kEngramAlign = 256;

struct EngramLayout {
  uint64_t flags, requests, inbox, positions, recv, stage;
  uint64_t totalBytes;
  uint64_t rowBytes;
  int64_t rowsPerRank;      // rows of each layer's table on each rank
  int maxRequests;          // maxTokens * entriesPerToken
  int entries;              // entriesPerToken
  int requestStride;        // int32 per request list: header + maxRequests, a multiple of 4
  int chunkRows;            // rows per network chunk (>= 1)
  EPX_HD uint64_t chunkBytes() const { return uint64_t(chunkRows) * rowBytes; }
  EPX_HD uint64_t requestOffset(int owner) const { return requests + uint64_t(owner) * uint64_t(requestStride) * 4; }
  EPX_HD uint64_t inboxOffset(int requester) const { return inbox + uint64_t(requester) * uint64_t(requestStride) * 4; }
  EPX_HD uint64_t recvOffset(int64_t row) const { return recv + uint64_t(row) * rowBytes; }
  EPX_HD uint64_t stageOffset(int cta, int buffer) const {
    return stage + (uint64_t(cta) * kEngramStageBuffers + uint64_t(buffer)) * chunkBytes();
  }
};

// Rows per network chunk: whole rows within chunkBytes, at least one, at most the rows one fetch
// layer can ask for (a small plan does not stage more than it can send).
EPX_HD int engramChunkRows(uint64_t chunkBytes, uint64_t rowBytes, int maxRequests) {
  const uint64_t r = chunkBytes / rowBytes;
  const uint64_t cap = maxRequests > 0 ? uint64_t(maxRequests) : 1;
  return r < 1 ? 1 : int(r < cap ? r : cap);
}

inline EngramLayout layoutEngram(int64_t numRows, uint64_t rowBytes, int maxTokens, int entries, int nRanks,
                                 int numCtas, uint64_t chunkBytes, bool ginPeers) {
  EngramLayout l{};
  l.rowBytes = rowBytes;
  l.rowsPerRank = numRows / nRanks;
  l.maxRequests = maxTokens * entries;
  l.entries = entries;
  l.requestStride = int(alignUp(uint64_t(kEngramHeaderInts) + uint64_t(l.maxRequests), 4));
  l.chunkRows = engramChunkRows(chunkBytes, rowBytes, l.maxRequests);
  RegionCursor cur;
  const uint64_t lists = uint64_t(nRanks) * uint64_t(l.requestStride) * 4;
  l.flags = cur.take(uint64_t(kNumFlagKinds) * uint64_t(nRanks) * 4, kWindowRegionAlign);
  l.requests = cur.take(lists, kEngramAlign);
  l.inbox = cur.take(ginPeers ? lists : 0, kEngramAlign);
  l.positions = cur.take(uint64_t(l.maxRequests) * 4, kEngramAlign);
  l.recv = cur.take(uint64_t(l.maxRequests) * rowBytes, kEngramAlign);
  l.stage = cur.take(ginPeers ? uint64_t(numCtas) * kEngramStageBuffers * l.chunkBytes() : 0, kEngramAlign);
  l.totalBytes = cur.total();
  return l;
}

// Bytes zeroed before any peer may write: the flags.
inline uint64_t engramZeroedPrefix(const EngramLayout& l) { return l.requests; }

// GIN counters: CTA b's puts from stage buffer k count on counter k * nCtas + b; CTA 0's request
// puts on the counter after them.
EPX_HD int engramStageCounterBase(int buffer, int nCtas) { return buffer * nCtas; }
EPX_HD int engramRequestCounterBase(int nCtas) { return kEngramStageBuffers * nCtas; }
EPX_HD int engramGinCounters(int nCtas) { return kEngramStageBuffers * nCtas + 1; }

// Network chunks that carry `rows` rows (what a requester expects from a network owner).
EPX_HD uint32_t engramChunksOf(int rows, int chunkRows) { return uint32_t((rows + chunkRows - 1) / chunkRows); }

// The session slots: requests on the dispatch slot (ready, arrivals), rows on the combine slot's
// arrival word.
constexpr int kEngramRequestKind = kOpDispatch;
constexpr int kEngramRowsKind = kOpCombine;

struct EngramArgs {
  LinkArgs link;            // flags = EngramLayout::flags
  SessionArgs session;
  EngramLayout l;
  int layer;
  int numTokens;            // this rank's tokens (0 .. maxTokens)
  const int32_t* indices;   // this layer's [numTokens][entries]
  const char* table;        // this rank's shard of this layer's table [rowsPerRank][rowBytes]
  char* output;             // this layer's [numTokens][entries][rowBytes]
  uint32_t* builtSeq;       // device word: CTA 0 built op #value's request lists and positions
};

}  // namespace epx::dev
