// Helpers of the expert load-balancing GPU suites (lb, random_lb): one LB object per rank, inputs
// generated on the device from seeds and recomputed on the host, and the checks of a prefetch and
// a gradient reduction against the CPU reference (host/ref lb_ref.h), byte and bit exact.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "epx/lb.h"

namespace epx::test::lb {

constexpr uint8_t kPoison = 0xa5;
constexpr uint64_t kDefaultChunkBytes = uint64_t(256) << 10;

struct Plan {
  int localExperts = 2;
  int numSlots = 2;
  std::vector<size_t> weightRowBytes;
  std::vector<size_t> gradRowElems;
  int numCtas = 8;                          // capped by the SM cap of processes sharing a GPU
  uint64_t chunkBytes = kDefaultChunkBytes;
  int numExperts() const;
};

// One object per rank (collective). A build on NCCL older than 2.30.3 cannot read network peers'
// slot gradients (no one-sided GIN get): there creation refuses gradient tensors with network
// peers (checked, message included), and the object is made without them (gradsRefused).
struct LbObjects {
  Plan plan;
  std::vector<ncclEpLb_t> lb;
  bool gradsRefused = false;
  explicit LbObjects(const Plan& p);
  ~LbObjects();
  LbObjects(const LbObjects&) = delete;
  LbObjects& operator=(const LbObjects&) = delete;
  // No object: a gradients-only plan whose gradients were refused.
  bool empty() const { return plan.weightRowBytes.empty() && plan.gradRowElems.empty(); }
  char* slots(int r, int t) const;
  float* slotGrads(int r, int t) const;

 private:
  bool create();  // false: refused for want of GIN get; any other failure throws
};

// One rank's device buffers of a case: originals (weights, gradients) and the mapping.
struct RankBuffers {
  std::vector<void*> weights, grads;
  int32_t* mapping = nullptr;
  RankBuffers() = default;
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  ~RankBuffers();
};

std::string asyncErrorOf(ncclEpLb_t lb, ncclResult_t* code = nullptr);

// Fills rank `rank`'s originals and slot gradients from the seeds (base), poisons its slots and
// uploads the mapping, on `stream`.
void prepare(const LbObjects& o, int rank, cudaStream_t stream, RankBuffers& b, uint64_t base,
             const std::vector<int32_t>& map);
// Rank r's slots / gradients against the reference ("" or the first difference). Entries outside
// [-1, numExperts) count as unused (the kernels skip them).
std::string checkSlots(const LbObjects& o, int r, uint64_t base, const std::vector<int32_t>& map);
std::string checkGrads(const LbObjects& o, const RankBuffers& b, int r, uint64_t base, const std::vector<int32_t>& map);

// Prefetch, then (with gradient tensors) reduce with `map` on every rank; per rank "" or why not
// (async error, slots, gradients). badEntryMessage: the async error every rank must report instead
// of none (a mapping with bad entries), or "".
std::vector<std::string> runMapping(const LbObjects& o, const std::vector<int32_t>& map, uint64_t base,
                                    const std::string& badEntryMessage = "");

}  // namespace epx::test::lb
