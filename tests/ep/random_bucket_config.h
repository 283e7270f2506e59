// Configuration sampler of the randomized bucket-collective test (GPU suite `random_bucket`,
// test_random_bucket.cc; checked on the CPU by the suite `random_bucket_sampler`). Every draw is a
// pure function of (base seed, index, nRanks), the same in every process, and one case can be
// replayed alone from its index.
//
// Ranges are the documented ones of epx/bucket.h: 1..32 tensors per bucket (both ends often), counts
// any multiple of nRanks (shards of 1, odd shards such as 3, 1007, 4097, multiples of 8, shards near
// the GIN chunk, large ones), every dtype the plan takes (all-gather moves all of them;
// reduce-scatter takes FP32, all-reduce FP32 and BF16), FP32 or BF16 wire, no / 1 / nRanks / any
// scale, numCtas 1..32 (or the default), chunkBytes 64 KiB..1 GiB (or the default). A case is 1..3
// calls, issued back to back on one stream, each over a subset of the bucket's tensors (disjoint
// between the calls of a case, in a random item order); items are in place, external through a
// session (16-byte aligned, not always 256), or name the bucket's own tensor pointer.
// Budget: the tensor bytes of every rank together (all ranks share one GPU under fake nodes, and the
// host recomputes every reduced element from every rank's inputs).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/bucket.h"

namespace epx::test::rnd::bucket {

// Sum over the plan's tensors of count * element bytes * nRanks.
constexpr double kTensorBytesBudget = 48.0 * (1 << 20);
// Cases per bucket (creation is collective and registers a window).
constexpr int kCasesPerBucket = 4;
// Largest shard drawn before the budget, in elements.
constexpr uint64_t kMaxShard = uint64_t(1) << 21;

enum Op : int { kAllGather = 0, kReduceScatter = 1, kAllReduce = 2 };
const char* opName(int op);

// Every dtype the plan accepts.
const std::vector<ncclDataType_t>& planDtypes();
int dtypeBytes(ncclDataType_t t);
const char* dtypeName(ncclDataType_t t);

struct BucketSpec {
  std::vector<ncclEpBucketTensor_t> plan;
  int numCtas = 0;        // 0: the default (left NCCL_EP_UNDEF_INT)
  uint64_t chunkBytes = 0;  // 0: the default
  uint64_t shard(int i, int nRanks) const { return plan[size_t(i)].count / uint64_t(nRanks); }
};

// How an item names its tensor.
enum Where : int {
  kInPlace = 0,     // external = NULL
  kExternal = 1,    // a device tensor outside the bucket (needs the session)
  kOwnPointer = 2,  // external = the bucket's own tensor pointer (in place, no session needed)
};

struct BucketCall {
  int op = kAllGather;
  std::vector<int> tensors;  // item order
  std::vector<int> where;    // per item: Where
  bool passOpts = false;     // reductions: opts given (else NULL: FP32 wire, no scale)
  bool bf16Wire = false;     // opts.wireType (all-reduce: its reduce-scatter half)
  bool hasScale = false;
  float scale = 1.0f;
};

struct BucketCase {
  int index = 0;
  std::vector<BucketCall> calls;  // issued back to back; their tensor sets are disjoint
  bool session = false;           // pass a session (needed when an item is kExternal)
  int externalOffset = 0;         // external tensors start this many 16-byte vectors into their allocation
  uint64_t dataSeed = 0;
};

BucketSpec drawBucket(uint64_t baseSeed, int group, int nRanks);
inline int groupOf(int caseIndex) { return caseIndex / kCasesPerBucket; }
BucketCase drawCase(uint64_t baseSeed, int index, const BucketSpec& b, int nRanks);

// Whether a tensor of this dtype may be an item of op.
bool opTakes(int op, ncclDataType_t t);

std::string describe(const BucketSpec& b, int nRanks);
std::string describe(const BucketCase& c, const BucketSpec& b, int nRanks);

}  // namespace epx::test::rnd::bucket
