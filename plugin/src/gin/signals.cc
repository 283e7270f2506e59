#include "gin/signals.h"

#include <algorithm>

#include "nccl_net.h"

namespace epx::plugin::gin {

std::string validateSignal(const SignalUpdate& u, size_t regionSize) {
  if (u.op != NCCL_NET_SIGNAL_OP_INC && u.op != NCCL_NET_SIGNAL_OP_ADD)
    return "unknown signal op " + std::to_string(u.op);
  if (u.offset % 8 != 0) return "signal offset " + std::to_string(u.offset) + " not 8-byte aligned";
  if (u.offset > regionSize || regionSize - u.offset < 8)
    return "signal offset " + std::to_string(u.offset) + " outside the " + std::to_string(regionSize) +
           "-byte signal region";
  return {};
}

uint64_t signalDelta(const SignalUpdate& u) { return u.op == NCCL_NET_SIGNAL_OP_INC ? 1 : u.value; }

std::map<std::pair<uint32_t, uint64_t>, uint64_t> coalesce(const std::vector<SignalUpdate>& updates) {
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> sums;
  for (const SignalUpdate& u : updates) sums[{u.registration, u.offset}] += signalDelta(u);
  return sums;
}

uint64_t PeerOrder::post() { return next_++; }

void PeerOrder::complete(uint64_t seq) {
  if (seq > released_ && std::find(done_.begin(), done_.end(), seq) == done_.end()) done_.push_back(seq);
}

uint64_t PeerOrder::release() {
  uint64_t before = released_;
  std::sort(done_.begin(), done_.end());
  size_t i = 0;
  while (i < done_.size() && done_[i] == released_ + 1) {
    ++released_;
    ++i;
  }
  done_.erase(done_.begin(), done_.begin() + static_cast<long>(i));
  return released_ - before;
}

}  // namespace epx::plugin::gin
