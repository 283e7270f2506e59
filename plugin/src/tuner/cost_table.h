// NCCL's per-call cost table (a contiguous float[numAlgo][numProto], modelled µs): read the current
// choice and make one allowed entry the cheapest. Entries below 0 (NCCL_ALGO_PROTO_IGNORE) are
// combinations NCCL does not allow for the call; nothing here ever enables one.
#pragma once

namespace epx::plugin::tuner {

struct Entry {
  int algorithm = -1;  // NCCL_ALGO_*, -1 when no entry is allowed
  int protocol = -1;   // NCCL_PROTO_*
};

bool entryAllowed(const float* table, int numAlgo, int numProto, int algorithm, int protocol);
// NCCL's selection rule: the smallest entry >= 0, the first one on ties.
Entry cheapestEntry(const float* table, int numAlgo, int numProto);
// Sets (algorithm, protocol) to 0 and raises every other allowed 0 entry just above it, so that
// NCCL picks it. Returns false (table unchanged) when the entry is not allowed.
bool makeCheapest(float* table, int numAlgo, int numProto, int algorithm, int protocol);

}  // namespace epx::plugin::tuner
