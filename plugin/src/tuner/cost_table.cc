#include "tuner/cost_table.h"

namespace epx::plugin::tuner {

bool entryAllowed(const float* table, int numAlgo, int numProto, int algorithm, int protocol) {
  if (table == nullptr || algorithm < 0 || protocol < 0 || algorithm >= numAlgo || protocol >= numProto)
    return false;
  return table[algorithm * numProto + protocol] >= 0.0f;  // NCCL_ALGO_PROTO_IGNORE is -1
}

Entry cheapestEntry(const float* table, int numAlgo, int numProto) {
  Entry best;
  float bestCost = 0.0f;
  for (int a = 0; a < numAlgo; ++a)
    for (int p = 0; p < numProto; ++p) {
      float c = table[a * numProto + p];
      if (c < 0.0f) continue;
      if (best.algorithm < 0 || c < bestCost) best = {a, p}, bestCost = c;
    }
  return best;
}

bool makeCheapest(float* table, int numAlgo, int numProto, int algorithm, int protocol) {
  if (!entryAllowed(table, numAlgo, numProto, algorithm, protocol)) return false;
  table[algorithm * numProto + protocol] = 0.0f;
  for (int a = 0; a < numAlgo; ++a)
    for (int p = 0; p < numProto; ++p) {
      float& other = table[a * numProto + p];
      if ((a != algorithm || p != protocol) && other >= 0.0f && other < 1e-3f) other = 1e-3f;
    }
  return true;
}

}  // namespace epx::plugin::tuner
