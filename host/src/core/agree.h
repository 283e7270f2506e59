// Agreement of all ranks on a group's config at ncclEpGroupCreate. Every rank contributes one
// fixed-size record (AgreedConfig, 64 bytes, exchanged with one ncclAllGather in host/src/agree.cc)
// and every rank compares all of them with checkAgreement, so all ranks reach the same verdict and
// either all create the group or all return ncclInvalidUsage. Pure C++ (no CUDA calls),
// unit-tested on the CPU.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/config.h"

namespace epx {

// "EPA2": revision 2 of this record's layout. A build with another layout sends another magic (the
// record stays 64 bytes so that the exchange itself never mismatches in size).
constexpr uint32_t kAgreedConfigMagic = 0x45504132u;

// What must be identical on every rank of a group. Plain old data with fixed-size fields: it is
// copied byte for byte between ranks (same endianness: one NVLink domain).
struct AgreedConfig {
  uint32_t magic;        // kAgreedConfigMagic
  uint32_t epxVersion;   // EPX_VERSION_CODE of the build (version/ABI word)
  uint32_t ncclVersion;  // NCCL_VERSION_CODE the build was compiled against (device-API structs)
  int32_t maxTokensPerRank;
  int32_t hidden;
  int32_t topk;
  int32_t numExperts;
  int32_t fp8Dispatch;  // 0 or 1
  int32_t algorithm;    // ncclEpAlgo_t as requested (Auto stays Auto)
  int32_t smBudget;     // as requested; 0 = analytic
  int32_t nCtas;        // CTAs the kernels launch (resolved from smBudget / the analytic estimate)
  int32_t timeoutMs;
  int32_t exactCombine;  // 0 or 1 (window layout)
  int32_t forwarding;    // ncclEpForwarding_t as resolved (direct or hybrid)
  int32_t forwardNodeSize;  // as requested (0: the NVLink team)
  int32_t reserved[1];  // zero
};
static_assert(sizeof(AgreedConfig) == 64, "the exchanged record must keep its size across builds");
static_assert(std::is_trivially_copyable_v<AgreedConfig> && std::is_standard_layout_v<AgreedConfig>);

// This rank's record: the normalized config, the resolved CTA count and this build's versions.
AgreedConfig makeAgreedConfig(const GroupConfig& cfg, int nCtas);

// all[r] is rank r's record. "" when every rank's record equals rank 0's; otherwise a message naming
// the first differing rank (lowest rank), its first differing field, both values and both ranks,
// e.g. "rank 3 has smBudget 16 (16 CTAs) but rank 0 has 24 (24 CTAs); every rank must create the
// group with the same config". The same input gives the same message on every rank.
std::string checkAgreement(const std::vector<AgreedConfig>& all);

}  // namespace epx
