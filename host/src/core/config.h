// Group configuration: defaults, validation, window layout and output capacities. Pure C++ (no
// CUDA calls), unit-tested on the CPU.
#pragma once
#include <cstddef>
#include <string>

#include "epx/device/ep_args.h"
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
  int localExperts(int nRanks) const { return numExperts / nRanks; }
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

// Window layout (identical on every rank) and its total size in bytes. lsaSize: ranks per NVLink
// domain (lsaSize < nRanks adds the GIN staging regions).
dev::WindowLayout computeWindowLayout(const GroupConfig& cfg, int nRanks, int lsaSize);

// Rows a dispatch output needs in the worst case (capacity mode):
// deduplicated: nRanks * maxTokens; expanded: nRanks * maxTokens * min(topk, Le) + Le * (alignment-1).
long long capacityRows(const GroupConfig& cfg, int nRanks, const HandleConfig& h);

// SM (CTA) count of the EP kernels when smBudget is 0. Bandwidth model in the spirit of DeepEP
// V2's analytic sizing (per-SM NVLink store and HBM copy rates, see docs/performance.md):
// enough CTAs that the NVLink sends saturate the links and the receive copy keeps up.
int analyticSmCount(int numSMs, int nRanks, double nvlinkGBps);

// "" when an NCCL runtime (ncclGetVersion code) can run epx built against `headers`; else the
// reason naming both versions. The device-API structs (ncclDevComm, windows) carry no size or
// version field and changed between 2.28.3 and 2.28.9, so the codes must match exactly.
std::string checkNcclVersion(int runtime, int headers);

// CTAs actually launched: the budget (or the analytic count), at most numSMs and dev::kMaxCtas.
int resolveCtaCount(const GroupConfig& cfg, int numSMs, int nRanks, double nvlinkGBps);

}  // namespace epx
