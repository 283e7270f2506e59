#include "core/window_plan.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace epx {

namespace {
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr uint64_t kPadBytes = 16;  // dev::kLinkPadBytes
}  // namespace

uint64_t drainPadOffset(uint64_t bytes) { return alignUp(bytes, kPadBytes); }

WindowNeed regionNeed(uint64_t bytes, int signals, int counters, int nRanks, bool network) {
  WindowNeed n;
  n.bytes = alignUp(network ? drainPadOffset(bytes) + kPadBytes : bytes, kRegionAlign);
  if (n.bytes == 0) n.bytes = kRegionAlign;
  n.ginSignals = network ? signals + nRanks : 0;
  n.ginCounters = network ? std::max(counters, 1) : 0;
  return n;
}

WindowNeed operator+(const WindowNeed& a, const WindowNeed& b) {
  return {a.bytes + b.bytes, a.ginSignals + b.ginSignals, a.ginCounters + b.ginCounters};
}

std::string describeNeed(const WindowNeed& n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", double(n.bytes) / double(1 << 20));
  std::string s = buf;
  if (n.ginSignals) s += ", " + std::to_string(n.ginSignals) + " GIN signals";
  if (n.ginCounters) s += ", " + std::to_string(n.ginCounters) + " GIN counters";
  return s;
}

RangeAllocator::RangeAllocator(uint64_t size) : size_(size) {
  if (size) free_[0] = size;
}

std::optional<uint64_t> RangeAllocator::take(uint64_t n, uint64_t align) {
  if (n == 0) return uint64_t(0);
  if (align == 0) align = 1;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = alignUp(it->first, align), end = it->first + it->second;
    if (start >= end || end - start < n) continue;
    const uint64_t off = it->first, len = it->second;
    free_.erase(it);
    if (start > off) free_[off] = start - off;
    if (start + n < off + len) free_[start + n] = off + len - (start + n);
    used_ += n;
    return start;
  }
  return std::nullopt;
}

void RangeAllocator::give(uint64_t offset, uint64_t n) {
  if (n == 0) return;
  used_ -= n;
  auto it = free_.emplace(offset, n).first;
  if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

uint64_t RangeAllocator::largestFree(uint64_t align) const {
  uint64_t best = 0;
  if (align == 0) align = 1;
  for (const auto& [off, len] : free_) {
    const uint64_t start = alignUp(off, align);
    if (start < off + len) best = std::max(best, off + len - start);
  }
  return best;
}

}  // namespace epx
