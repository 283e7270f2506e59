// The work requests of one message and the bookkeeping of its completions, without verbs calls:
// verbs_transport.cc turns WriteOps into ibv_send_wr and feeds completions to a Tracker.
// Pure logic, unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/verbs_wire.h"

namespace epx::plugin::verbs {

// One RDMA write of a message. kind Size: the 8-byte size word (inline, unsignalled) ahead of
// chunk 0 on the same QP; kind Chunk: write-with-immediate of one chunk, signalled.
struct WriteOp {
  enum Kind { Size, Chunk } kind;
  int qp;             // index in the connection's QPs
  size_t localOffset; // into the send buffer (Chunk)
  size_t length;
  uint64_t remoteAddr;
  uint32_t rkey;
  uint32_t imm;       // Chunk only
  bool signaled;
};

// The writes of message `seq` of `size` bytes into the receiver's posted buffer `entry`; the size
// word goes to `sizeAddr`/`sizeRkey` (the receiver's size slot). "" or why the message cannot go
// (larger than the posted buffer, tag mismatch).
std::string planSendOps(uint64_t seq, size_t size, int tag, const FifoEntry& entry, int nQps, size_t minChunk,
                        uint64_t sizeAddr, uint32_t sizeRkey, std::vector<WriteOp>* ops);

// Whether the FIFO slot carries the receiver's entry for message `seq` (its seq field is seq + 1).
bool fifoSlotReady(const FifoEntry& entry, uint64_t seq);

// Receive side: counts the immediates of the outstanding messages (at most `depth`, in order).
class ImmTracker {
 public:
  explicit ImmTracker(int depth)
      : depth_(depth), chunks_(depth, 0), expected_(depth, 0), posted_(depth, false), seqs_(depth, 0) {}
  // A receive for message `seq` was posted; false if its slot is still busy.
  bool post(uint64_t seq);
  // One immediate arrived. "" or why it is not one of ours (unknown sequence, chunk count
  // changed, more chunks than announced).
  std::string onImm(uint32_t imm);
  // All chunks of `seq` arrived.
  bool complete(uint64_t seq) const;
  // Frees the slot of a completed `seq`.
  void release(uint64_t seq);

 private:
  int slot(uint64_t seq) const { return static_cast<int>(seq % depth_); }
  int depth_;
  std::vector<int> chunks_, expected_;
  std::vector<bool> posted_;
  std::vector<uint64_t> seqs_;
};

}  // namespace epx::plugin::verbs
