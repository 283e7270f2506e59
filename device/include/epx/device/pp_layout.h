// The registered window of a PP channel (ncclEpPpChannel), laid out by device/ for the PP kernels
// and the host (sizing, CPU tests). Identical on every rank of the channel.
//   flags  u32 [kPpFlagKinds][nRanks]: per (kind, peer) LSA words (GIN peers signal instead)
//   slots  [nRanks sender][slots][slotBytes]: messages from each sender; a slot is a 16-byte
//          header (PpHeader: the message's bytes) followed by up to maxBytes of data
//   stage  [nRanks receiver][2][slotBytes]: GIN only (0 bytes without network peers): a message to
//          a network peer is copied here (puts leave from registered memory) and put round by round;
//          two buffers per receiver, used by alternate messages (ppStageBufferOf), so a send stages
//          while the previous message's rounds are still on the wire
#pragma once
#include <cstdint>

#include "epx/device/chunking.h"
#include "epx/device/link_args.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

// PP synchronization words / GIN signals, per source rank.
enum PpFlagKind : int {
  kPpFlagData = 0,  // sender -> receiver: messages written (cumulative count)
  kPpFlagFree = 1,  // receiver -> sender: messages consumed, slots free again (cumulative count)
  kPpFlagKinds = 2
};

constexpr uint64_t kPpHeaderBytes = 16;
constexpr int kPpMaxSlots = 64;
constexpr int kPpMaxCtas = 32;
constexpr int kPpDefaultCtas = 4;

struct PpHeader {
  uint64_t bytes;  // message bytes that follow the header
  uint64_t seq;    // message number of the pair (diagnostics)
};
static_assert(sizeof(PpHeader) == kPpHeaderBytes, "PP slot header");

struct PpShape {
  int nRanks = 1;
  int lsaSize = 1;
  uint64_t maxBytes = 16;
  int slots = 1;
  bool hasGinPeers() const { return lsaSize < nRanks; }
};

// Stage buffers per network receiver: message n (1-based, per pair) is staged in buffer
// ppStageBufferOf(n), and its puts count on that buffer's range of GIN counters
// (ppGinCounterBase: numCtas counters each), so staging message n waits only for the puts of
// message n - 2 to have left the stage, not for those of n - 1.
constexpr int kPpStageBuffers = 2;
EPX_HD int ppStageBufferOf(uint32_t n) { return int(n % uint32_t(kPpStageBuffers)); }
EPX_HD int ppGinCounterBase(int buffer, int numCtas) { return buffer * numCtas; }
EPX_HD int ppGinCounterCount(int numCtas) { return kPpStageBuffers * numCtas; }

struct PpLayout {
  uint64_t flags;      // u32 [kPpFlagKinds][nRanks]
  uint64_t slots;      // [nRanks][slots][slotBytes]
  uint64_t stage;      // [nRanks][kPpStageBuffers][slotBytes] (GIN)
  uint64_t slotBytes;  // kPpHeaderBytes + maxBytes rounded up to 16
  uint64_t totalBytes;
  int numSlots;
};

inline PpLayout layoutPp(const PpShape& s) {
  PpLayout l{};
  l.numSlots = s.slots;
  l.slotBytes = kPpHeaderBytes + alignUp(s.maxBytes, kPpHeaderBytes);
  RegionCursor cur;
  l.flags = cur.take(uint64_t(kPpFlagKinds) * uint64_t(s.nRanks) * 4);
  l.slots = cur.take(uint64_t(s.nRanks) * uint64_t(s.slots) * l.slotBytes);
  l.stage = cur.take(s.hasGinPeers() ? uint64_t(s.nRanks) * kPpStageBuffers * l.slotBytes : 0);
  l.totalBytes = cur.total();
  return l;
}

// Offset of sender `src`'s slot `slot` in a receiver's window.
EPX_HD uint64_t ppSlotOffset(const PpLayout& l, int src, int slot) {
  return l.slots + (uint64_t(src) * uint64_t(l.numSlots) + uint64_t(slot)) * l.slotBytes;
}
EPX_HD uint64_t ppStageOffset(const PpLayout& l, int dst, int buffer) {
  return l.stage + (uint64_t(dst) * kPpStageBuffers + uint64_t(buffer)) * l.slotBytes;
}

// Per-channel device state: message counts per peer and the CTAs of a running send/recv that
// finished (the last one publishes and advances the count).
struct PpState {
  uint32_t* sendSeq;   // [nRanks] messages sent to each peer
  uint32_t* recvSeq;   // [nRanks] messages received from each peer
  uint32_t* sendDone;  // [nRanks]
  uint32_t* recvDone;  // [nRanks]
  uint32_t* recvRounds;  // [nRanks] GIN data signals (put rounds) received from each peer so far
  uint32_t* sendStaged;  // [nRanks][kPpMaxPutRounds] CTAs done staging a put round (GIN)
};
constexpr int kPpStateWordsPerRank = 5 + kPpMaxPutRounds;

struct PpArgs {
  LinkArgs link;  // flags = PpLayout::flags
  PpLayout pl;
  PpState st;
  int peer;
  const char* src;        // send: the message
  char* dst;              // recv: the receive buffer
  uint64_t bytes;         // send: message bytes; recv: capacity of dst
  uint64_t* recvBytes;    // recv: optional device word, the received message's bytes
  uint64_t chunkBytes;    // GIN put chunk (ncclEpPpConfig_t.chunkBytes; ppPutRounds)
};

}  // namespace epx::dev
