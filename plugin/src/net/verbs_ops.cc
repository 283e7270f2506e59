#include "net/verbs_ops.h"

#include <atomic>

namespace epx::plugin::verbs {

bool fifoSlotReady(const FifoEntry& entry, uint64_t seq) {
  const uint64_t s = __atomic_load_n(const_cast<const uint64_t*>(&entry.seq), __ATOMIC_ACQUIRE);
  return s == seq + 1;
}

std::string planSendOps(uint64_t seq, size_t size, int tag, const FifoEntry& entry, int nQps, size_t minChunk,
                        uint64_t sizeAddr, uint32_t sizeRkey, std::vector<WriteOp>* ops) {
  ops->clear();
  if (entry.tag != tag)
    return "message " + std::to_string(seq) + ": tag " + std::to_string(tag) + " sent, receiver posted tag " + std::to_string(entry.tag);
  if (size > entry.capacity)
    return "message " + std::to_string(seq) + " of " + std::to_string(size) + " bytes is larger than the receive buffer (" +
           std::to_string(entry.capacity) + " bytes)";
  const ChunkPlan plan = planChunks(size, nQps, minChunk);
  const uint32_t imm = encodeImm(seq, plan.nChunks);
  ops->push_back({WriteOp::Size, 0, 0, sizeof(uint64_t), sizeAddr, sizeRkey, 0, false});
  for (int i = 0; i < plan.nChunks; ++i)
    ops->push_back({WriteOp::Chunk, i % std::max(1, nQps), plan.offset(i), plan.length(i, size), entry.addr + plan.offset(i),
                    entry.rkey, imm, true});
  return {};
}

bool ImmTracker::post(uint64_t seq) {
  const int s = slot(seq);
  if (posted_[s]) return false;
  posted_[s] = true;
  seqs_[s] = seq;
  chunks_[s] = 0;
  expected_[s] = 0;
  return true;
}

std::string ImmTracker::onImm(uint32_t imm) {
  uint16_t low = 0;
  int n = 0;
  if (!decodeImm(imm, &low, &n)) return "immediate 0x" + std::to_string(imm) + " is not an epx verbs immediate";
  for (int s = 0; s < depth_; ++s) {
    if (!posted_[s] || static_cast<uint16_t>(seqs_[s] & 0xffff) != low) continue;
    if (expected_[s] != 0 && expected_[s] != n)
      return "message " + std::to_string(seqs_[s]) + ": chunks announced as " + std::to_string(expected_[s]) + " then " + std::to_string(n);
    expected_[s] = n;
    if (++chunks_[s] > n) return "message " + std::to_string(seqs_[s]) + ": more chunks than the " + std::to_string(n) + " announced";
    return {};
  }
  return "immediate for sequence " + std::to_string(low) + " matches no posted receive";
}

bool ImmTracker::complete(uint64_t seq) const {
  const int s = slot(seq);
  return posted_[s] && seqs_[s] == seq && expected_[s] > 0 && chunks_[s] == expected_[s];
}

void ImmTracker::release(uint64_t seq) {
  const int s = slot(seq);
  if (posted_[s] && seqs_[s] == seq) posted_[s] = false;
}

}  // namespace epx::plugin::verbs
