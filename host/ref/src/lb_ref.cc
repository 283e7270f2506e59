// CPU reference of expert load balancing (lb_ref.h).
#include "epx/ref/lb_ref.h"

#include <cstring>

namespace epx::ref {

std::string lbCheckMapping(const LbShape& s, const std::vector<int32_t>& map) {
  if (s.nRanks < 1) return "nRanks must be at least 1";
  if (s.numExperts < 1 || s.numExperts % s.nRanks != 0)
    return "numExperts (" + std::to_string(s.numExperts) + ") must be a positive multiple of nRanks (" +
           std::to_string(s.nRanks) + ")";
  if (s.numSlots < 0) return "numSlots must not be negative";
  if (map.size() != size_t(s.nRanks) * size_t(s.numSlots))
    return "the mapping has " + std::to_string(map.size()) + " entries, not nRanks * numSlots = " +
           std::to_string(size_t(s.nRanks) * size_t(s.numSlots));
  for (size_t i = 0; i < map.size(); ++i)
    if (map[i] < -1 || map[i] >= s.numExperts)
      return "mapping entry of rank " + std::to_string(i / size_t(s.numSlots)) + ", slot " +
             std::to_string(i % size_t(s.numSlots)) + " is " + std::to_string(map[i]) + " (want -1 or 0.." +
             std::to_string(s.numExperts - 1) + ")";
  return "";
}

std::vector<std::vector<int>> lbReplicas(const LbShape& s, const std::vector<int32_t>& map) {
  std::vector<std::vector<int>> rep(size_t(s.numExperts));
  for (size_t i = 0; i < map.size(); ++i)
    if (map[i] >= 0) rep[size_t(map[i])].push_back(int(i));
  return rep;
}

void lbPrefetch(const LbShape& s, const std::vector<int32_t>& map, size_t rowBytes,
                const std::vector<std::vector<uint8_t>>& originals, std::vector<std::vector<uint8_t>>* slots) {
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const int d = int(i / size_t(s.numSlots)), slot = int(i % size_t(s.numSlots));
    const auto& src = originals[size_t(s.ownerOf(map[i]))];
    std::memcpy((*slots)[size_t(d)].data() + size_t(slot) * rowBytes,
                src.data() + size_t(s.localIndex(map[i])) * rowBytes, rowBytes);
  }
}

void lbReduceGrads(const LbShape& s, const std::vector<int32_t>& map, size_t rowElems,
                   const std::vector<std::vector<float>>& slotGrads, std::vector<std::vector<float>>* grads) {
  const auto rep = lbReplicas(s, map);
  for (int e = 0; e < s.numExperts; ++e) {
    float* g = (*grads)[size_t(s.ownerOf(e))].data() + size_t(s.localIndex(e)) * rowElems;
    for (int i : rep[size_t(e)]) {
      const float* r = slotGrads[size_t(i / s.numSlots)].data() + size_t(i % s.numSlots) * rowElems;
      for (size_t j = 0; j < rowElems; ++j) g[j] = g[j] + r[j];
    }
  }
}

LbTraffic lbTraffic(const LbShape& s, const std::vector<int32_t>& map) {
  LbTraffic t;
  t.rowsOut.assign(size_t(s.nRanks), 0);
  t.rowsIn.assign(size_t(s.nRanks), 0);
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const int d = int(i / size_t(s.numSlots)), owner = s.ownerOf(map[i]);
    if (d == owner) continue;
    ++t.rowsOut[size_t(owner)];
    ++t.rowsIn[size_t(d)];
  }
  return t;
}

}  // namespace epx::ref
