// The local row work of one rank that epx-bench's memory floor times (memory_floor.h): host only,
// CPU-tested (tests/unit/test_bench_memory_floor.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "epx/ref/ep_ref.h"
#include "routing.h"

namespace epxbench {

// Rows of one rank's local work: received row j (source rank order, then token order) has the
// output rows outRows[first[j] .. first[j + 1]).
struct MemFloorWork {
  int rowBytes = 0;                 // BF16 row
  bool expanded = false;            // else one output row per received row
  std::vector<int32_t> first;       // [received rows + 1]
  std::vector<int32_t> outRows;     // [output rows] (expanded: positions grouped by local expert)
  int64_t receivedRows() const { return first.empty() ? 0 : int64_t(first.size()) - 1; }
  int64_t outputRows() const { return int64_t(outRows.size()); }
};

// The floor's times on one rank (runMemFloor), or over the ranks (max of the times, mean of the bytes).
struct MemFloorTimes {
  double bytes = 0;     // written by the dispatch into its outputs, and read back by the combine
  double ceUs = 0;      // one copy-engine copy of `bytes` (median)
  double copySmUs = 0;  // the plain SM expansion / copy (median)
  double sumSmUs = 0;   // the plain SM read-and-sum (median)
  int ctas = 0;
};

// Work of rank `rank` for the layout (expanded or deduplicated) under `routing` (every rank's).
MemFloorWork memFloorWork(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing, int rank,
                          bool expanded);

}  // namespace epxbench
