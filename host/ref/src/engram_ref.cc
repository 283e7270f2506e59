// CPU reference of the Engram fetch (engram_ref.h).
#include "epx/ref/engram_ref.h"

#include <cstring>

namespace epx::ref {

std::string engramCheckShape(const EngramShape& s) {
  if (s.nRanks < 1) return "nRanks must be at least 1";
  if (s.layers < 1) return "layers must be at least 1";
  if (s.numRows < 1 || s.numRows % s.nRanks != 0)
    return "numRows (" + std::to_string(s.numRows) + ") must be a positive multiple of nRanks (" +
           std::to_string(s.nRanks) + ")";
  if (s.rowBytes == 0) return "rowBytes must be positive";
  if (s.tokens < 0 || s.entries < 1) return "tokens must be >= 0 and entries >= 1";
  return "";
}

EngramResult engramFetch(const EngramShape& s, const std::vector<std::vector<std::vector<uint8_t>>>& shards,
                         const std::vector<int32_t>& indices) {
  EngramResult r;
  const size_t perLayer = size_t(s.tokens) * size_t(s.entries);
  r.out.assign(size_t(s.layers) * perLayer * s.rowBytes, 0);
  for (int l = 0; l < s.layers; ++l)
    for (size_t k = 0; k < perLayer; ++k) {
      const size_t flat = size_t(l) * perLayer + k;
      const int32_t idx = indices[flat];
      if (idx == -1) continue;
      if (idx < -1 || idx >= s.numRows) {
        if (r.firstBad < 0) r.firstBad = int64_t(flat), r.firstBadValue = idx;
        continue;
      }
      const auto& shard = shards[size_t(s.ownerOf(idx))][size_t(l)];
      std::memcpy(r.out.data() + flat * s.rowBytes, shard.data() + size_t(s.localRow(idx)) * s.rowBytes, s.rowBytes);
    }
  return r;
}

std::vector<std::vector<int64_t>> engramRowsPerOwner(const EngramShape& s, const std::vector<int32_t>& indices) {
  std::vector<std::vector<int64_t>> rows(size_t(s.layers), std::vector<int64_t>(size_t(s.nRanks), 0));
  const size_t perLayer = size_t(s.tokens) * size_t(s.entries);
  for (int l = 0; l < s.layers; ++l)
    for (size_t k = 0; k < perLayer; ++k) {
      const int32_t idx = indices[size_t(l) * perLayer + k];
      if (idx >= 0 && idx < s.numRows) ++rows[size_t(l)][size_t(s.ownerOf(idx))];
    }
  return rows;
}

}  // namespace epx::ref
