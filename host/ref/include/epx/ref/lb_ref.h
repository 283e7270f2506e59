// CPU reference of expert load balancing (no CUDA): what a weight prefetch and a gradient reduction
// over a redundancy mapping must produce, bit for bit.
//
// Experts: numExperts original experts split evenly over the ranks, rank r owning experts
// [r * L, (r + 1) * L) with L = numExperts / nRanks (its local experts 0..L-1). Every rank has
// numSlots redundant slots. The redundancy mapping, the same on every rank, names for slot s of
// rank d the original expert it replicates: map[d * numSlots + s] in [0, numExperts), or -1 for an
// unused slot. An expert may have any number of replicas, on any ranks (its owner's included).
//  - Prefetch: every used slot becomes a byte copy of its expert's rows of each tensor (weights,
//    quantization scales: any dtype, no conversion); unused slots keep their bytes.
//  - Gradient reduction: every original expert's FP32 gradient becomes its value plus the
//    gradients of its replicas, added one by one in (rank, slot) ascending order with FP32
//    round-to-nearest additions, starting from the original's value: bit-identical from run to run.
//    Experts without a replica keep their bits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace epx::ref {

struct LbShape {
  int nRanks = 1;
  int numExperts = 0;  // original experts, a multiple of nRanks
  int numSlots = 0;    // redundant slots per rank
  int localExperts() const { return nRanks > 0 ? numExperts / nRanks : 0; }
  int ownerOf(int expert) const { return expert / localExperts(); }
  int localIndex(int expert) const { return expert % localExperts(); }
};

// "" when the shape and the mapping (nRanks * numSlots entries) are valid, else the reason, naming
// the first bad entry (its rank and slot) and its value.
std::string lbCheckMapping(const LbShape& s, const std::vector<int32_t>& map);

// The (rank, slot) replicas of each original expert, in (rank, slot) ascending order: the order in
// which the gradient reduction adds them. [expert] -> list of rank * numSlots + slot.
std::vector<std::vector<int>> lbReplicas(const LbShape& s, const std::vector<int32_t>& map);

// One tensor's rows: originals[r] holds rank r's localExperts() rows of rowBytes bytes; slots[r]
// holds rank r's numSlots rows. Applies the prefetch to `slots` in place.
void lbPrefetch(const LbShape& s, const std::vector<int32_t>& map, size_t rowBytes,
                const std::vector<std::vector<uint8_t>>& originals, std::vector<std::vector<uint8_t>>* slots);

// One FP32 gradient tensor: grads[r] holds rank r's localExperts() rows of rowElems elements,
// slotGrads[r] its numSlots rows. Applies the reduction to `grads` in place.
void lbReduceGrads(const LbShape& s, const std::vector<int32_t>& map, size_t rowElems,
                   const std::vector<std::vector<float>>& slotGrads, std::vector<std::vector<float>>* grads);

// Rows one call moves between ranks (a rank's own replicas excluded): [rank] rows sent (prefetch:
// this rank's experts to other ranks' slots; a gradient reduction moves the same rows back) and
// rows received. With rows of equal size, the larger of the two over ranks, times the row bytes,
// is what the slowest rank's link must carry.
struct LbTraffic {
  std::vector<int64_t> rowsOut, rowsIn;
};
LbTraffic lbTraffic(const LbShape& s, const std::vector<int32_t>& map);

}  // namespace epx::ref
