// Configs, plans, argument checks and agreement records of PP channels, buckets and expert load
// balancing (LB). Pure C++ (no
// CUDA calls), unit-tested on the CPU (tests/core: pp_logic, bucket_logic). Every check returns ""
// when the arguments are valid, else the reason in words. The public structs (epx/pp.h,
// epx/bucket.h) are the API layer's: pp.cc and bucket.cc translate them into the types here.
#pragma once
#include <nccl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epx/device/bucket_layout.h"
#include "epx/device/pp_layout.h"

namespace epx {

// A config integer the caller left unset (the public NCCL_EP_UNDEF_INT; the API layer asserts
// that they are equal).
constexpr int kUnsetInt = -2147483647 - 1;

// The header of a public config struct: present (not NULL), its size and magic against the ones
// this library expects. `what` names the struct in the reason.
std::string checkConfigHeader(const char* what, bool present, uint64_t size, uint64_t expectedSize, unsigned magic,
                              unsigned expectedMagic);

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

// A PP channel's config as the caller set it (ncclEpPpConfig_t after its header check).
struct PpConfigRequest {
  uint64_t maxMessageBytes = 0;
  int slots = kUnsetInt;
  int numCtas = kUnsetInt;
  int timeoutMs = kUnsetInt;
  uint64_t chunkBytes = 0;  // 0 = default
};

std::string normalizePpConfig(const PpConfigRequest& in, PpConfig* out);
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

// A bucket's config as the caller set it (ncclEpBucketConfig_t after its header check; no config:
// the defaults).
struct BucketConfigRequest {
  int numCtas = kUnsetInt;
  int timeoutMs = kUnsetInt;
  uint64_t chunkBytes = 0;  // 0 = default
};

// One planned tensor (ncclEpBucketTensor_t).
struct BucketTensorSpec {
  uint64_t count;
  ncclDataType_t dtype;
};

// One tensor of a collective call (ncclEpBucketItem_t).
struct BucketItemSpec {
  int tensor;
  uint64_t count;
  ncclDataType_t dtype;
  const void* external;
};

// Bytes of one element of an NCCL dtype, 0 if unknown.
int dtypeBytes(ncclDataType_t t);
std::string normalizeBucketConfig(const BucketConfigRequest& in, BucketConfig* out);
// Checks the plan and converts it (element sizes and kinds) for layoutBucket.
std::string checkBucketPlan(const BucketTensorSpec* tensors, int n, int nRanks, std::vector<dev::BucketTensorPlan>* out);

enum class BucketCall { AllGather, ReduceScatter, AllReduce };
const char* bucketCallName(BucketCall c);

// What a call checks against: the plan as the user wrote it and where the bucket's tensors are.
struct BucketView {
  const BucketTensorSpec* plan;
  int numTensors;
  const char* const* tensorPtrs;  // device address of each tensor (in place when external == it)
};
// wireType: the reduction options' wire type (none without options).
std::string checkBucketItems(const BucketView& b, BucketCall call, const BucketItemSpec* items, int n,
                             bool haveSession, std::optional<ncclDataType_t> wireType);

struct BucketAgreed {
  uint32_t epxVersion;
  int32_t numTensors, numCtas, timeoutMs;
  uint64_t chunkBytes;
  uint64_t count[dev::kMaxBucketTensors];
  int32_t dtype[dev::kMaxBucketTensors];
};
BucketAgreed makeBucketAgreed(const BucketTensorSpec* tensors, int n, const BucketConfig& cfg, uint32_t epxVersion);
std::string checkBucketAgreement(const std::vector<BucketAgreed>& all);

// ---- expert load balancing ---------------------------------------------------------------------

constexpr int kLbMaxTensors = 8;   // NCCL_EP_LB_MAX_TENSORS
constexpr int kLbMaxSlots = 256;
constexpr int kLbMaxCtas = 32;
constexpr int kLbDefaultCtas = 8;
constexpr uint64_t kLbDefaultChunkBytes = uint64_t(2) << 20;
constexpr uint64_t kLbRowAlign = 16;  // weight rows (bytes) and gradient rows (4 FP32) alike
static_assert(kLbRowAlign % dev::kVecBytes == 0, "the LB kernels split rows into whole 16-byte vectors");

struct LbConfig {
  int numCtas = kLbDefaultCtas;
  int timeoutMs = kCollDefaultTimeoutMs;
  uint64_t chunkBytes = kLbDefaultChunkBytes;
};
struct LbConfigRequest {
  int numCtas = kUnsetInt;
  int timeoutMs = kUnsetInt;
  uint64_t chunkBytes = 0;  // 0 = default
};
std::string normalizeLbConfig(const LbConfigRequest& in, LbConfig* out);

// ncclEpLbPlan_t in core's terms.
struct LbPlan {
  int numExperts = 0;
  int numSlots = 0;
  std::vector<uint64_t> weightRowBytes;
  std::vector<uint64_t> gradRowElems;
};
std::string checkLbPlan(const LbPlan& p, int nRanks);

// What every rank of an LB object must agree on (exchanged byte for byte).
struct LbAgreed {
  uint32_t epxVersion;
  int32_t numExperts, numSlots, numWeightTensors, numGradTensors, numCtas, timeoutMs;
  uint64_t chunkBytes;
  uint64_t weightRowBytes[kLbMaxTensors];
  uint64_t gradRowElems[kLbMaxTensors];
};
LbAgreed makeLbAgreed(const LbPlan& p, const LbConfig& cfg, uint32_t epxVersion);
std::string checkLbAgreement(const std::vector<LbAgreed>& all);

// ---- Engram (epx/engram.h) --------------------------------------------------------------------

constexpr int kEngramMaxLayers = 64;  // NCCL_EP_ENGRAM_MAX_LAYERS
constexpr int kEngramMaxCtas = 32;
constexpr int kEngramDefaultCtas = 8;
// 8 MiB: fewer, larger GIN operations (8 fake nodes: 2.35 x the floor against 3.03 x with 2 MiB).
constexpr uint64_t kEngramDefaultChunkBytes = uint64_t(8) << 20;
constexpr int64_t kEngramMaxRows = (int64_t(1) << 31) - 1;  // global row numbers are int32
constexpr int64_t kEngramMaxRequests = int64_t(1) << 24;    // maxTokens * entriesPerToken
constexpr int kEngramMaxRanks = 1024;  // the fetch counts rows per owner in shared memory
constexpr uint64_t kEngramMaxRowBytes = uint64_t(1) << 30;

struct EngramConfig {
  int numCtas = kEngramDefaultCtas;
  int timeoutMs = kCollDefaultTimeoutMs;
  uint64_t chunkBytes = kEngramDefaultChunkBytes;
};
struct EngramConfigRequest {
  int numCtas = kUnsetInt;
  int timeoutMs = kUnsetInt;
  uint64_t chunkBytes = 0;  // 0 = default
};
std::string normalizeEngramConfig(const EngramConfigRequest& in, EngramConfig* out);

// ncclEpEngramPlan_t in core's terms.
struct EngramPlan {
  int numLayers = 0;
  int64_t numRows = 0;
  uint64_t rowBytes = 0;
  int maxTokens = 0;
  int entriesPerToken = 0;
};
std::string checkEngramPlan(const EngramPlan& p, int nRanks);

// What every rank of an Engram object must agree on (exchanged byte for byte).
struct EngramAgreed {
  uint32_t epxVersion;
  int32_t numLayers, maxTokens, entriesPerToken, numCtas, timeoutMs;
  int64_t numRows;
  uint64_t rowBytes, chunkBytes;
};
EngramAgreed makeEngramAgreed(const EngramPlan& p, const EngramConfig& cfg, uint32_t epxVersion);
std::string checkEngramAgreement(const std::vector<EngramAgreed>& all);

}  // namespace epx
