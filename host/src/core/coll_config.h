// Configs, plans, argument checks and agreement records of PP channels and buckets. Pure C++ (no
// CUDA calls), unit-tested on the CPU (tests/core: pp_logic, bucket_logic). Every check returns ""
// when the arguments are valid, else the reason in words.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "epx/bucket.h"
#include "epx/device/bucket_layout.h"
#include "epx/device/pp_layout.h"
#include "epx/pp.h"

namespace epx {

// ---- PP ----------------------------------------------------------------------------------------

constexpr uint64_t kPpMaxMessageBytes = uint64_t(4) << 30;
constexpr int kPpDefaultSlots = 2;
constexpr int kCollDefaultTimeoutMs = 10000;
constexpr uint64_t kCollPtrAlign = 16;

struct PpConfig {
  uint64_t maxBytes = 0;
  int slots = kPpDefaultSlots;
  int numCtas = dev::kPpDefaultCtas;
  int timeoutMs = kCollDefaultTimeoutMs;
  uint64_t chunkBytes = dev::kPpDefaultChunkBytes;
};

std::string normalizePpConfig(const ncclEpPpConfig_t* in, PpConfig* out);
dev::PpLayout ppLayout(const PpConfig& cfg, int nRanks, int lsaSize);
// send: buf/bytes is the message; recv: buf/bytes is the receive buffer and its capacity.
std::string checkPpSend(const PpConfig& cfg, int nRanks, const void* buf, uint64_t bytes, int peer);
std::string checkPpRecv(const PpConfig& cfg, int nRanks, const void* buf, uint64_t capacity, int peer,
                        const void* recvBytes);

// What every rank of a channel must agree on (exchanged byte for byte).
struct PpAgreed {
  uint32_t epxVersion;
  int32_t slots, numCtas, timeoutMs;
  uint64_t maxBytes;
  uint64_t chunkBytes;
};
std::string checkPpAgreement(const std::vector<PpAgreed>& all);

// ---- buckets -----------------------------------------------------------------------------------

struct BucketConfig {
  int numCtas = dev::kBucketDefaultCtas;
  int timeoutMs = kCollDefaultTimeoutMs;
  uint64_t chunkBytes = dev::kBucketDefaultChunkBytes;
};

// Bytes of one element of an NCCL dtype, 0 if unknown.
int dtypeBytes(ncclDataType_t t);
std::string normalizeBucketConfig(const ncclEpBucketConfig_t* in, BucketConfig* out);
// Checks the plan and converts it (element sizes and kinds) for layoutBucket.
std::string checkBucketPlan(const ncclEpBucketTensor_t* tensors, int n, int nRanks,
                            std::vector<dev::BucketTensorPlan>* out);

enum class BucketCall { AllGather, ReduceScatter, AllReduce };
const char* bucketCallName(BucketCall c);

// What a call checks against: the plan as the user wrote it and where the bucket's tensors are.
struct BucketView {
  const ncclEpBucketTensor_t* plan;
  int numTensors;
  const char* const* tensorPtrs;  // device address of each tensor (in place when external == it)
};
std::string checkBucketItems(const BucketView& b, BucketCall call, const ncclEpBucketItem_t* items, int n,
                             bool haveSession, const ncclEpBucketReduceOpts_t* opts);

struct BucketAgreed {
  uint32_t epxVersion;
  int32_t numTensors, numCtas, timeoutMs;
  uint64_t chunkBytes;
  uint64_t count[dev::kMaxBucketTensors];
  int32_t dtype[dev::kMaxBucketTensors];
};
BucketAgreed makeBucketAgreed(const ncclEpBucketTensor_t* tensors, int n, const BucketConfig& cfg);
std::string checkBucketAgreement(const std::vector<BucketAgreed>& all);

}  // namespace epx
