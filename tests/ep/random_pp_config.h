// Configuration sampler of the randomized PP send/recv test (GPU suite `random_pp`,
// test_random_pp.cc; checked on the CPU by the suite `random_pp_sampler`). Every draw is a pure
// function of (base seed, index, nRanks), the same in every process, and one case can be replayed
// alone from its index.
//
// Ranges are the documented ones of epx/pp.h: maxMessageBytes 1 B and up (within the budget), slots
// 1..64 (both ends often, or the default), numCtas 1..32 (or the default), chunkBytes 64 KiB..1 GiB
// (or the default); messages of 0..maxMessageBytes bytes (0, 1, the maximum and maximum - 1 often,
// odd sizes, multiples of 16 +- a few); several ordered pairs of ranks per case (src != dst at more
// than one rank; now and then a rank to itself, which pp.h allows), often more messages per pair than
// slots, interleaved in one global order that every rank issues its sends and receives in (sends on
// one stream, receives on another, the receiver sometimes late; or both on one stream); receive
// capacities from the exact size up; NULL buffers for empty messages; recvBytes given or not.
// Budget: the channel window of every rank together (ncclEpPpGetBufferSizeHint, all ranks on one GPU
// under fake nodes) and the message bytes of a case.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/pp.h"

namespace epx::test::rnd::pp {

// ncclEpPpGetBufferSizeHint of one rank times nRanks.
constexpr double kWindowBytesBudget = 1536.0 * (1 << 20);
// Receive capacities (16-byte rounded) of every message of a case, all ranks together; the same
// bounds the bytes sent.
constexpr double kMessageBytesBudget = 96.0 * (1 << 20);
// Messages of one case, all pairs together.
constexpr int kMaxMessages = 512;
// Largest maxMessageBytes drawn (before the window budget shrinks it).
constexpr uint64_t kMaxMessageBytes = uint64_t(32) << 20;
// Cases per channel (creation is collective and registers a window).
constexpr int kCasesPerChannel = 4;
// Longest delay of the receive stream, ns.
constexpr uint64_t kMaxLagNs = 2000000;

struct PpSpec {
  uint64_t maxBytes = 1;
  int slots = 0;            // 0: the default (2)
  int numCtas = 0;          // 0: the default (4)
  uint64_t chunkBytes = 0;  // 0: the default (1 MiB)
  int effectiveSlots() const { return slots > 0 ? slots : 2; }
};

struct PpMsg {
  int src = 0, dst = 0;
  uint64_t bytes = 0;
  uint64_t capacity = 0;   // of the receive buffer, >= bytes
  bool nullSend = false;   // bytes == 0: send buf NULL
  bool nullRecv = false;   // capacity == 0: receive buf NULL
  bool recvBytes = true;   // pass a recvBytes word
  uint64_t seed = 0;       // data pattern
};

struct PpCase {
  int index = 0;
  std::vector<PpMsg> msgs;  // the global order
  bool twoStreams = true;   // sends and receives on separate streams (else one stream)
  uint64_t lagNs = 0;       // two streams: the receive stream starts this late
};

PpSpec drawChannel(uint64_t baseSeed, int group, int nRanks);
inline int groupOf(int caseIndex) { return caseIndex / kCasesPerChannel; }
PpCase drawCase(uint64_t baseSeed, int index, const PpSpec& s, int nRanks);

// ncclEpPpConfig_t of the spec (numCtas as drawn; the GPU suite caps it under fake nodes).
ncclEpPpConfig_t makePpConfig(const PpSpec& s);
// Bytes of the receive region of a message: its capacity rounded up to 16, plus one 16-byte vector
// that must stay poisoned.
inline uint64_t recvRegionBytes(const PpMsg& m) { return (m.capacity + 15) / 16 * 16 + 16; }
// Its send region (16-byte aligned).
inline uint64_t sendRegionBytes(const PpMsg& m) { return (m.bytes + 15) / 16 * 16; }

std::string describe(const PpSpec& s);
// The case on one line (message list abbreviated past a few dozen messages).
std::string describe(const PpCase& c, const PpSpec& s);

}  // namespace epx::test::rnd::pp
