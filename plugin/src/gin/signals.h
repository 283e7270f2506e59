// Signal updates travel to the rank that owns the signal and are applied there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace epx::plugin::gin {

struct SignalUpdate {
  uint32_t registration;  // index of the owner's registration holding the signal
  uint64_t offset;        // byte offset of the 64-bit signal in it
  uint64_t value;
  uint32_t op;            // NCCL_NET_SIGNAL_OP_INC / _ADD
};

// Returns an error text when the update cannot be applied to a region of `regionSize` bytes.
std::string validateSignal(const SignalUpdate& u, size_t regionSize);
// The amount a valid update adds (INC adds 1 whatever value says).
uint64_t signalDelta(const SignalUpdate& u);
// Sums updates per (registration, offset): one read-modify-write per signal per progress call.
std::map<std::pair<uint32_t, uint64_t>, uint64_t> coalesce(const std::vector<SignalUpdate>& updates);

// Per-peer ordering of a context's operations: each op completes its copy at some point (copies
// on one in-order stream finish in order, but the tracker does not rely on it); a signal may
// leave only when its op and every earlier op to the same peer have completed.
class PeerOrder {
 public:
  uint64_t post();                 // returns the op's sequence number
  void complete(uint64_t seq);     // its copy finished
  // Ops whose effects are now visible in order: everything <= the returned sequence number.
  // Returns the number of newly released ops.
  uint64_t release();
  uint64_t released() const { return released_; }
  bool isReleased(uint64_t seq) const { return seq <= released_; }

 private:
  uint64_t next_ = 1;
  uint64_t released_ = 0;
  std::vector<uint64_t> done_;  // completed but not yet released
};

}  // namespace epx::plugin::gin
