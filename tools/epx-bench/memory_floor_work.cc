// Host side of the memory floor (memory_floor.h): which output rows each received row has.
#include "memory_floor_work.h"

namespace epxbench {

MemFloorWork memFloorWork(const BenchShape& s, const std::vector<epx::ref::RankRouting>& routing, int rank,
                          bool expanded) {
  const int Le = s.expertsPerRank(), K = s.topk, lo = rank * Le;
  MemFloorWork w;
  w.rowBytes = s.hidden * 2;
  w.expanded = expanded;
  // Local experts of each received row, in the order rows arrive (source rank, then token).
  std::vector<std::vector<int>> rowExperts;
  std::vector<int64_t> perExpert(size_t(Le), 0);
  for (const auto& src : routing)
    for (int t = 0; t < src.numTokens; ++t) {
      std::vector<int> mine;
      for (int k = 0; k < K; ++k) {
        const int64_t e = src.topkIdx[size_t(t) * K + k];
        if (e >= lo && e < lo + Le) mine.push_back(int(e - lo));
      }
      if (mine.empty()) continue;
      for (int le : mine) ++perExpert[size_t(le)];
      rowExperts.push_back(std::move(mine));
    }
  std::vector<int64_t> next(size_t(Le), 0);  // expanded: each expert's segment start, then its fill
  for (int le = 1; le < Le; ++le) next[size_t(le)] = next[size_t(le) - 1] + perExpert[size_t(le) - 1];
  w.first.push_back(0);
  for (size_t j = 0; j < rowExperts.size(); ++j) {
    if (expanded)
      for (int le : rowExperts[j]) w.outRows.push_back(int32_t(next[size_t(le)]++));
    else
      w.outRows.push_back(int32_t(j));
    w.first.push_back(int32_t(w.outRows.size()));
  }
  return w;
}

}  // namespace epxbench
