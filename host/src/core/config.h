// Group configuration: defaults, validation, window layout and output capacities. Pure C++ (no
// CUDA calls), unit-tested on the CPU.
#pragma once
#include <cstddef>
#include <string>

#include "epx/device/ep_args.h"
#include "epx/device/ll_layout.h"
#include "epx/ep.h"

namespace epx {

struct GroupConfig {
  int maxTokensPerRank = 0;
  int hidden = 0;
  int topk = 0;
  int numExperts = 0;
  bool fp8Dispatch = false;
  int algorithm = ncclEpAlgoAuto;
  int smBudget = 0;  // 0 = analytic
  int qpBudget = 0;
  int slIndex = -1;
  int timeoutMs = 10000;
  bool exactCombine = false;  // window reserves FP32 combine rows
  int forwarding = ncclEpForwardDirect;  // resolved: ncclEpForwardDirect or ncclEpForwardHybrid
  int forwardNodeSize = 0;               // requested ranks per node (0: the NVLink team)
  bool hybrid() const { return forwarding == ncclEpForwardHybrid; }
  int localExperts(int nRanks) const { return numExperts / nRanks; }
  bool lowLatency() const { return algorithm == ncclEpAlgoLowLatency; }
};

struct HandleConfig {
  bool expanded = true;
  bool capacity = false;
  int alignment = 1;
  bool zeroGaps = false;
  bool fp32Combine = false;  // ncclEpCombineFp32
};

// Fills `out` from the user's struct (undefined fields take defaults). Returns "" when valid,
// else the reason. nRanks is the EP size.
std::string normalizeConfig(const ncclEpConfig_t* in, int nRanks, GroupConfig* out);
std::string normalizeHandleConfig(const ncclEpHandleConfig_t* in, HandleConfig* out);

// Hybrid forwarding's ranks per node for a group whose NVLink (LSA) team has lsaSize ranks: 0 in
// direct mode, else forwardNodeSize or, when 0, lsaSize. "" when the group can forward that way,
// else the reason (the host refuses the group with ncclInvalidArgument): hybrid needs the
// high-throughput algorithm, nodes that divide the EP size into at least two, hold whole NVLink
// teams, and have at most kMaxNodeSize ranks.
constexpr int kMaxNodeSize = dev::kMaxNodeRanks;
std::string checkForwarding(const GroupConfig& cfg, int nRanks, int lsaSize, int* nodeSize);

// Window layout (identical on every rank) and its total size in bytes. lsaSize: ranks per NVLink
// domain (lsaSize < nRanks adds the GIN staging regions).
dev::WindowLayout computeWindowLayout(const GroupConfig& cfg, int nRanks, int lsaSize);

// Low-latency groups: the LL region of the window (after the synchronization words; the
// high-throughput regions are empty). computeWindowLayout's totalBytes includes it.
dev::LlLayout computeLlLayout(const GroupConfig& cfg, int nRanks, int lsaSize);

// Rows a dispatch output needs in the worst case (capacity mode):
// deduplicated: nRanks * maxTokens; expanded: nRanks * maxTokens * min(topk, Le) + Le * (alignment-1).
long long capacityRows(const GroupConfig& cfg, int nRanks, const HandleConfig& h);

// Link bandwidths the analytic SM count assumes, GB/s per direction.
struct LinkRates {
  double nvlinkGBps = 0;  // EPX_NVLINK_GBPS, else an H100/H200 SXM: 18 NVLink4 links (topology/)
  double rdmaGBps = 0;    // EPX_RDMA_GBPS, else 0 (unknown: the estimate is NVLink-bound)
};

// Reads EPX_NVLINK_GBPS / EPX_RDMA_GBPS values (nullptr = unset). A value that is not a positive
// number (EPX_RDMA_GBPS: not >= 0) is ignored with a line appended to *warnings.
LinkRates parseLinkRates(const char* nvlinkEnv, const char* rdmaEnv, std::string* warnings);

// SM (CTA) count of the EP kernels when smBudget is 0: topology/'s analytic model
// (epx::topo::epxEstimateEpResources, DeepEP V2's sizing with the constants of docs/topology.md),
// the one model epx-topo prints too. The group's shape: lsaSize ranks per NVLink domain,
// nRanks / lsaSize domains, the group's experts and top-k.
int analyticSmCount(const GroupConfig& cfg, int numSMs, int nRanks, int lsaSize, const LinkRates& rates);

// CTAs actually launched: the budget (or the analytic count), at most numSMs and dev::kMaxCtas.
int resolveCtaCount(const GroupConfig& cfg, int numSMs, int nRanks, int lsaSize, const LinkRates& rates);

}  // namespace epx
