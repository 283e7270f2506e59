// The arithmetic of a communicator's one epx window (host/src/window.h): what an object takes of it
// (bytes, GIN signals, GIN counters) and the first-fit ranges it is carved into. Pure C++, no CUDA
// calls, unit-tested without a GPU (tests/core/test_window_plan.cc).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace epx {

// What one epx object (EP group, bucket, PP channel) takes of its communicator's window. With
// network peers an object also takes its link's drain: a 16-byte pad after its bytes, one drain
// signal per rank after its own signals, and at least one GIN counter (link.h).
struct WindowNeed {
  uint64_t bytes = 0;   // region bytes: a multiple of kRegionAlign
  int ginSignals = 0;   // the object's protocol signals plus its drain signals (0 without network peers)
  int ginCounters = 0;  // GIN counters per context (0 without network peers)
};

// Regions start on this boundary (the windows' own alignment, window_layout.h kWindowTotalAlign).
constexpr uint64_t kRegionAlign = uint64_t(2) << 20;

// The need of an object whose kernels use `bytes` of window, `signals` GIN signals and `counters`
// GIN counters per context (LinkRequest), on a communicator of nRanks with or without network peers.
WindowNeed regionNeed(uint64_t bytes, int signals, int counters, int nRanks, bool network);
// Offset of the drain pad inside a region of an object with `bytes` (network links only).
uint64_t drainPadOffset(uint64_t bytes);

// a + b, each field (a plan that holds both).
WindowNeed operator+(const WindowNeed& a, const WindowNeed& b);
// "64.0 MiB, 96 GIN signals, 8 GIN counters" (signals and counters left out when 0).
std::string describeNeed(const WindowNeed& n);

// First-fit allocation of [offset, offset + n) ranges inside [0, size): deterministic, so that
// every rank that takes and gives the same ranges in the same order gets the same offsets (the
// window is symmetric). Freed neighbours merge.
class RangeAllocator {
 public:
  explicit RangeAllocator(uint64_t size = 0);
  // The lowest offset (a multiple of align) with n free units from it, taken; nullopt when none.
  // n == 0 takes nothing and gives 0.
  std::optional<uint64_t> take(uint64_t n, uint64_t align = 1);
  // Gives back a range that take() returned (n as asked).
  void give(uint64_t offset, uint64_t n);
  uint64_t size() const { return size_; }
  uint64_t used() const { return used_; }
  // The longest run of free units starting at a multiple of align.
  uint64_t largestFree(uint64_t align = 1) const;

 private:
  uint64_t size_ = 0, used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, disjoint and not adjacent
};

}  // namespace epx
