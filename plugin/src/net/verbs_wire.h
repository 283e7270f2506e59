// On-the-wire formats of the verbs transport. Pure logic, unit-tested.
//
// Connection setup: listen() opens a TCP socket (out of band, like the socket transport) and
// writes its address into NCCL's handle; connect() and accept() swap one ConnInfo each way over
// that socket, then bring their RC QPs up. Data path per message (docs/plugins.md):
//   1. the receiver's irecv writes a FifoEntry (buffer address, rkey, capacity, tag, sequence)
//      into the sender's FIFO slot with an RDMA write;
//   2. the sender's isend, once that slot carries the expected sequence, writes the message
//      into the buffer in `nChunks` chunks, chunk i on QP i % nQps: RDMA write of the size word
//      into the receiver's size slot on chunk 0's QP, then RDMA write-with-immediate of each
//      chunk (immediate = encodeImm(sequence, nChunks));
//   3. the receiver counts immediate completions for the slot; when all nChunks arrived the size
//      word is visible (RC delivers a QP's writes in order) and the receive is done.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace epx::plugin::verbs {

constexpr uint32_t kHandleMagic = 0x45505856;    // "EPXV"
constexpr uint32_t kConnInfoMagic = 0x45505843;  // "EPXC"
constexpr uint16_t kWireVersion = 1;
constexpr int kMaxQps = 16;
constexpr int kMaxFifoDepth = 256;

// Written by listen() into NCCL's 128-byte handle.
struct Handle {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint32_t addressLength;
  uint32_t checksum;  // over every field above and `address`
  union {
    sockaddr_in v4;
    sockaddr_in6 v6;
  } address;
  uint64_t connectState;  // connector's state between connect() calls; 0 at first
};
static_assert(sizeof(Handle) <= 128, "NCCL_NET_HANDLE_MAXSIZE is 128 bytes");

void sealHandle(Handle& handle);
std::string validateHandle(const Handle& handle);

// One side's QPs and control region, swapped once per connection over the TCP socket.
struct ConnInfo {
  uint32_t magic;
  uint16_t version;
  uint8_t nQps;
  uint8_t ethernet;   // 1: RoCE (GRH, GID), 0: InfiniBand (LID)
  uint16_t lid;
  uint8_t mtu;        // IBV_MTU_* enum value (1..5) of the port's active MTU
  uint8_t gidIndex;
  uint8_t gid[16];
  uint32_t qpn[kMaxQps];
  uint32_t psn;       // first PSN of every QP of this side
  uint32_t fifoDepth; // slots, power of 2
  uint64_t ctrlAddr;  // the side's control region: FIFO (sender) or size words (receiver)
  uint32_t ctrlRkey;
  uint32_t checksum;  // over every field above
};

void sealConnInfo(ConnInfo& info);
// "" when well formed and compatible with `local` (same FIFO depth and link layer), else why not.
std::string validateConnInfo(const ConnInfo& remote, const ConnInfo& local);

// A receiver's posted buffer, as the sender sees it in its FIFO. `seq` is written last.
struct FifoEntry {
  uint64_t addr;
  uint64_t capacity;
  uint32_t rkey;
  int32_t tag;
  uint64_t reserved[4];
  volatile uint64_t seq;  // message sequence number + 1 (0: slot never written)
};
static_assert(sizeof(FifoEntry) == 64);

// Immediate data of every chunk: the message's sequence (low 16 bits) and its chunk count.
uint32_t encodeImm(uint64_t seq, int nChunks);
bool decodeImm(uint32_t imm, uint16_t* seqLow, int* nChunks);

// How a message of `size` bytes is cut over a connection's QPs: one chunk below 2 × minChunk,
// else up to nQps chunks of equal size rounded up to 4 KiB (the last one shorter). A chunk count
// of 1 is also used for 0 bytes (a write-with-immediate without data).
struct ChunkPlan {
  int nChunks;
  size_t chunkBytes;
  size_t offset(int i) const { return static_cast<size_t>(i) * chunkBytes; }
  size_t length(int i, size_t size) const;
};
ChunkPlan planChunks(size_t size, int nQps, size_t minChunk);

}  // namespace epx::plugin::verbs
