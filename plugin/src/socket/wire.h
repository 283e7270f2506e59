// On-the-wire formats of the socket transport: the listen handle, the per-stream hello and the
// per-message header, plus how a message is split across a connection's TCP streams.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace epx::plugin::socket {

constexpr uint32_t kHandleMagic = 0x45505853;  // "EPXS"
constexpr uint32_t kHelloMagic = 0x45505848;   // "EPXH"
constexpr uint32_t kHeaderMagic = 0x4550584d;  // "EPXM"
constexpr uint16_t kWireVersion = 1;
constexpr int kMaxStreams = 16;

// Written by listen() into NCCL's 128-byte handle. connect() keeps its in-progress state in
// `connectState` (NCCL passes the same handle on every retry), which listen() zeroes.
struct Handle {
  uint32_t magic;
  uint16_t version;
  uint16_t nStreams;
  uint32_t addressLength;
  uint32_t checksum;  // over every field above and `address`
  union {
    sockaddr_in v4;
    sockaddr_in6 v6;
  } address;
  uint64_t connectState;  // pointer to the connector's state between connect() calls; 0 at first
};
static_assert(sizeof(Handle) <= 128, "NCCL_NET_HANDLE_MAXSIZE is 128 bytes");

uint32_t handleChecksum(const Handle& handle);
void sealHandle(Handle& handle);
// Returns an empty string when the handle is well formed, else what is wrong with it.
std::string validateHandle(const Handle& handle);

// First bytes sent on every stream of a new connection.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t streamIndex;
  uint16_t nStreams;
  uint16_t reserved;
  uint32_t reserved2;
  uint64_t connectionId;
};
static_assert(sizeof(Hello) == 24);
std::string validateHello(const Hello& hello);

// Precedes every message on stream 0; the sender's split travels with it, so the two sides
// need not share split settings.
struct MessageHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
  uint32_t nParts;
  uint32_t reserved;
  uint64_t partSize;
};
static_assert(sizeof(MessageHeader) == 32);

// A message of `size` bytes is cut into parts, part i going on stream i. Messages smaller than
// two `minPart`s travel whole on stream 0; larger ones use up to `nStreams` parts of equal size
// (a multiple of 4 KiB), the last one shorter.
struct Split {
  int nParts;
  size_t partSize;
  size_t offset(int part) const { return static_cast<size_t>(part) * partSize; }
  size_t length(int part, size_t size) const;
};
Split splitMessage(size_t size, int nStreams, size_t minPart);
// Returns an empty string when a received header is consistent with a connection of nStreams.
std::string validateHeader(const MessageHeader& header, int nStreams);

}  // namespace epx::plugin::socket
