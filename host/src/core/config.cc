#include "core/config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "epx/topology/estimate.h"

namespace epx {

namespace {
bool undef(int v) { return v == NCCL_EP_UNDEF_INT; }

std::string header(size_t size, unsigned magic, unsigned version, size_t expected, const char* what) {
  std::ostringstream os;
  if (magic != NCCL_EP_CONFIG_MAGIC)
    os << what << " not initialized: use " << what << "_INITIALIZER (magic 0x" << std::hex << magic << ")";
  else if (size != expected)
    os << what << " size " << size << " does not match this library (" << expected << ")";
  else if (version > EPX_VERSION_CODE)
    os << what << " version " << version << " is newer than this library (" << EPX_VERSION_CODE << ")";
  return os.str();
}
}  // namespace

std::string normalizeConfig(const ncclEpConfig_t* in, int nRanks, GroupConfig* out) {
  if (!in) return "config is NULL";
  std::string h = header(in->size, in->magic, in->version, sizeof(ncclEpConfig_t), "NCCL_EP_CONFIG");
  if (!h.empty()) return h;
  std::ostringstream os;
  GroupConfig c;
  if (nRanks < 1 || nRanks > dev::kMaxRanks) {
    os << "EP size " << nRanks << " not supported: epx runs 1.." << dev::kMaxRanks << " ranks";
    return os.str();
  }
  if (undef(in->maxTokensPerRank) || in->maxTokensPerRank < 1 || in->maxTokensPerRank > dev::kMaxTokens) {
    os << "maxTokensPerRank must be in [1, " << dev::kMaxTokens << "], got " << in->maxTokensPerRank;
    return os.str();
  }
  c.maxTokensPerRank = in->maxTokensPerRank;
  c.fp8Dispatch = !undef(in->fp8Dispatch) && in->fp8Dispatch != 0;
  if (!undef(in->fp8Dispatch) && in->fp8Dispatch != 0 && in->fp8Dispatch != 1)
    return "fp8Dispatch must be 0 or 1, got " + std::to_string(in->fp8Dispatch);
  if (undef(in->hidden) || in->hidden < 8 || in->hidden % 8 != 0 || in->hidden > (1 << 16)) {
    os << "hidden must be a multiple of 8 in [8, 65536], got " << in->hidden;
    return os.str();
  }
  if (c.fp8Dispatch && in->hidden % 128 != 0) {
    os << "hidden must be a multiple of 128 for FP8 dispatch (one FP32 scale per 128 channels), got "
       << in->hidden;
    return os.str();
  }
  c.hidden = in->hidden;
  if (undef(in->topk) || in->topk < 1 || in->topk > dev::kMaxTopk) {
    os << "topk must be in [1, " << dev::kMaxTopk << "], got " << in->topk;
    return os.str();
  }
  c.topk = in->topk;
  if (undef(in->numExperts) || in->numExperts < 1 || in->numExperts > dev::kMaxExperts) {
    os << "numExperts must be in [1, " << dev::kMaxExperts << "], got " << in->numExperts;
    return os.str();
  }
  if (in->numExperts % nRanks != 0) {
    os << "numExperts (" << in->numExperts << ") must be a multiple of the EP size (" << nRanks << ")";
    return os.str();
  }
  c.numExperts = in->numExperts;
  if (const uint64_t smem = dev::layoutSmemBytes(c.numExperts, nRanks, c.localExperts(nRanks)); smem > dev::kMaxSmemPerCta) {
    os << "numExperts " << c.numExperts << " with " << nRanks << " ranks needs " << smem
       << " bytes of shared memory in the layout kernel (16 x (2 x numExperts + nRanks) x 4), more than the "
       << dev::kMaxSmemPerCta << " a Hopper CTA has; use fewer experts or ranks";
    return os.str();
  }
  c.algorithm = undef(in->algorithm) ? ncclEpAlgoAuto : in->algorithm;
  if (c.algorithm != ncclEpAlgoAuto && c.algorithm != ncclEpAlgoHighThroughput && c.algorithm != ncclEpAlgoLowLatency)
    return "algorithm must be an ncclEpAlgo_t value, got " + std::to_string(c.algorithm);
  if (c.lowLatency()) {
    if (c.maxTokensPerRank > dev::kLlMaxTokens) {
      os << "maxTokensPerRank must be in [1, " << dev::kLlMaxTokens << "] for ncclEpAlgoLowLatency, got "
         << c.maxTokensPerRank;
      return os.str();
    }
    if (c.hidden % dev::kLlScaleBlock != 0) {
      os << "hidden must be a multiple of " << dev::kLlScaleBlock << " for ncclEpAlgoLowLatency, got " << c.hidden;
      return os.str();
    }
  }
  static_assert(dev::kMaxCtas == NCCL_EP_MAX_SM_BUDGET, "ep.h states the kernels' CTA limit");
  c.smBudget = undef(in->smBudget) ? 0 : in->smBudget;
  if (c.smBudget < 0 || c.smBudget > dev::kMaxCtas) {
    os << "smBudget must be in [0, " << dev::kMaxCtas << "] (0 = analytic), got " << c.smBudget;
    return os.str();
  }
  c.qpBudget = undef(in->qpBudget) ? 0 : in->qpBudget;
  if (c.qpBudget < 0) return "qpBudget must be >= 0, got " + std::to_string(c.qpBudget);
  c.slIndex = undef(in->slIndex) ? -1 : in->slIndex;
  if (c.slIndex < -1 || c.slIndex > 15) return "slIndex must be -1 (policy) or an InfiniBand SL 0..15, got " + std::to_string(c.slIndex);
  c.timeoutMs = undef(in->timeoutMs) ? 10000 : in->timeoutMs;
  if (c.timeoutMs < 1) return "timeoutMs must be >= 1, got " + std::to_string(c.timeoutMs);
  if (!undef(in->exactCombine) && in->exactCombine != 0 && in->exactCombine != 1)
    return "exactCombine must be 0 or 1, got " + std::to_string(in->exactCombine);
  c.exactCombine = !undef(in->exactCombine) && in->exactCombine == 1;
  const int fw = undef(in->forwarding) ? ncclEpForwardAuto : in->forwarding;
  if (fw != ncclEpForwardAuto && fw != ncclEpForwardDirect && fw != ncclEpForwardHybrid)
    return "forwarding must be ncclEpForwardAuto, ncclEpForwardDirect or ncclEpForwardHybrid, got " + std::to_string(fw);
  // Auto is direct until the forward hop has been measured over real NVLink (ep.h).
  c.forwarding = fw == ncclEpForwardHybrid ? ncclEpForwardHybrid : ncclEpForwardDirect;
  c.forwardNodeSize = undef(in->forwardNodeSize) ? 0 : in->forwardNodeSize;
  if (c.forwardNodeSize < 0)
    return "forwardNodeSize must be >= 0 (0 = the NVLink team), got " + std::to_string(c.forwardNodeSize);
  if (c.forwardNodeSize != 0 && !c.hybrid())
    return "forwardNodeSize applies to forwarding = ncclEpForwardHybrid only, got " + std::to_string(c.forwardNodeSize) +
           " with forwarding = " + (fw == ncclEpForwardAuto ? "ncclEpForwardAuto (direct)" : "ncclEpForwardDirect");
  if (c.hybrid() && c.lowLatency())
    return "forwarding = ncclEpForwardHybrid applies to the high-throughput algorithm; ncclEpAlgoLowLatency sends "
           "every row directly";
  *out = c;
  return {};
}

std::string normalizeHandleConfig(const ncclEpHandleConfig_t* in, HandleConfig* out) {
  if (!in) return "handle config is NULL";
  std::string h = header(in->size, in->magic, in->version, sizeof(ncclEpHandleConfig_t), "NCCL_EP_HANDLE_CONFIG");
  if (!h.empty()) return h;
  HandleConfig c;
  const int layout = undef(in->layout) ? ncclEpLayoutExpanded : in->layout;
  if (layout != ncclEpLayoutExpanded && layout != ncclEpLayoutDeduplicated)
    return "layout must be ncclEpLayoutExpanded or ncclEpLayoutDeduplicated, got " + std::to_string(layout);
  c.expanded = layout == ncclEpLayoutExpanded;
  const int mode = undef(in->mode) ? ncclEpModeExact : in->mode;
  if (mode != ncclEpModeExact && mode != ncclEpModeCapacity)
    return "mode must be ncclEpModeExact or ncclEpModeCapacity, got " + std::to_string(mode);
  c.capacity = mode == ncclEpModeCapacity;
  c.alignment = undef(in->expertAlignment) ? 1 : in->expertAlignment;
  if (c.alignment < 1 || c.alignment > 1024)
    return "expertAlignment must be in [1, 1024] rows, got " + std::to_string(c.alignment);
  if (!c.expanded && c.alignment != 1)
    return "expertAlignment applies to the expanded layout only (deduplicated rows are not grouped by expert)";
  c.zeroGaps = !undef(in->zeroGaps) && in->zeroGaps != 0;
  const int precision = undef(in->combinePrecision) ? ncclEpCombineBf16Partials : in->combinePrecision;
  if (precision != ncclEpCombineBf16Partials && precision != ncclEpCombineFp32)
    return "combinePrecision must be ncclEpCombineBf16Partials or ncclEpCombineFp32, got " + std::to_string(precision);
  c.fp32Combine = precision == ncclEpCombineFp32;
  *out = c;
  return {};
}

namespace {
dev::WindowShape windowShape(const GroupConfig& cfg, int nRanks, int lsaSize) {
  dev::WindowShape shape;
  shape.nRanks = nRanks;
  shape.lsaSize = lsaSize;
  shape.maxTokens = cfg.maxTokensPerRank;
  shape.hidden = cfg.hidden;
  shape.topk = cfg.topk;
  shape.localExperts = cfg.localExperts(nRanks);
  shape.fp8 = cfg.fp8Dispatch;
  shape.fp32Combine = cfg.exactCombine;
  if (cfg.hybrid() && !cfg.lowLatency()) {  // nodes the group can form; invalid ones are refused before
    int n = 0;
    if (checkForwarding(cfg, nRanks, lsaSize, &n).empty()) shape.nodeSize = n;
  }
  if (cfg.lowLatency()) {  // only the synchronization words, then the LL region
    shape.maxTokens = 0;
    shape.extraFlagWords = dev::llTotalWords(nRanks, cfg.numExperts) - uint32_t(dev::kNumFlagKinds) * nRanks;
  }
  return shape;
}
}  // namespace

std::string checkForwarding(const GroupConfig& cfg, int nRanks, int lsaSize, int* nodeSize) {
  *nodeSize = 0;
  if (!cfg.hybrid()) return {};
  const int n = cfg.forwardNodeSize > 0 ? cfg.forwardNodeSize : lsaSize;
  std::ostringstream os;
  auto ranks = [](int k) { return std::to_string(k) + (k == 1 ? " rank" : " ranks"); };
  os << "forwarding = ncclEpForwardHybrid with nodes of " << ranks(n)
     << (cfg.forwardNodeSize > 0 ? " (forwardNodeSize)" : " (the NVLink team)") << ": ";
  if (cfg.lowLatency()) {
    os << "needs the high-throughput algorithm";
  } else if (n < 1 || nRanks % n != 0) {
    os << "the node size must divide the EP size " << nRanks;
  } else if (nRanks / n < 2) {
    os << (nRanks == 1 ? std::string("the only rank is") : "all " + ranks(nRanks) + " are")
       << " one node, nothing crosses the network (use direct forwarding)";
  } else if (lsaSize < 1 || n % lsaSize != 0) {
    os << "a node must hold whole NVLink teams (of " << ranks(lsaSize) << ")";
  } else if (n > kMaxNodeSize) {
    os << "at most " << kMaxNodeSize << " ranks per node are supported";
  } else {
    *nodeSize = n;
    return {};
  }
  return os.str();
}

dev::LlLayout computeLlLayout(const GroupConfig& cfg, int nRanks, int lsaSize) {
  dev::LlShape s;
  s.nRanks = nRanks;
  s.maxTokens = cfg.maxTokensPerRank;
  s.hidden = cfg.hidden;
  s.topk = cfg.topk;
  s.numExperts = cfg.numExperts;
  s.fp8 = cfg.fp8Dispatch;
  return dev::layoutLl(s, dev::layoutWindow(windowShape(cfg, nRanks, lsaSize)).totalBytes);
}

dev::WindowLayout computeWindowLayout(const GroupConfig& cfg, int nRanks, int lsaSize) {
  dev::WindowLayout wl = dev::layoutWindow(windowShape(cfg, nRanks, lsaSize));
  if (cfg.lowLatency()) wl.totalBytes = dev::alignUp(computeLlLayout(cfg, nRanks, lsaSize).endBytes, dev::kWindowTotalAlign);
  return wl;
}

long long capacityRows(const GroupConfig& cfg, int nRanks, const HandleConfig& h) {
  const long long tokens = 1LL * nRanks * cfg.maxTokensPerRank;
  if (!h.expanded) return tokens;
  const int Le = cfg.localExperts(nRanks);
  return tokens * std::min(cfg.topk, Le) + 1LL * Le * (h.alignment - 1);
}

LinkRates parseLinkRates(const char* nvlinkEnv, const char* rdmaEnv, std::string* warnings) {
  LinkRates r;
  r.nvlinkGBps = topo::epxNvlinkGBps(topo::kNvlinkSxmLinks);
  auto parse = [&](const char* name, const char* v, bool zeroOk, double* out) {
    if (!v) return;
    char* end = nullptr;
    const double g = std::strtod(v, &end);
    if (end != v && *end == '\0' && std::isfinite(g) && (g > 0 || (zeroOk && g == 0))) {
      *out = g;
      return;
    }
    if (warnings)
      *warnings += std::string("ignoring ") + name + "=\"" + v + "\" (not a " + (zeroOk ? "non-negative" : "positive") +
                   " number of GB/s)\n";
  };
  parse("EPX_NVLINK_GBPS", nvlinkEnv, false, &r.nvlinkGBps);
  parse("EPX_RDMA_GBPS", rdmaEnv, true, &r.rdmaGBps);
  return r;
}

int analyticSmCount(const GroupConfig& cfg, int numSMs, int nRanks, int lsaSize, const LinkRates& rates) {
  // One model for libepx and epx-topo: topology/include/epx/topology/estimate.h (source and
  // constants in docs/topology.md, "SM and QP estimate").
  // Hybrid groups: the hybrid model over their nodes (the NVLink team, or virtual nodes of
  // forwardNodeSize ranks); direct groups: the direct model over the NVLink team.
  topo::EpxEpShape shape;
  const int node = cfg.hybrid() && cfg.forwardNodeSize > 0 ? cfg.forwardNodeSize : lsaSize;
  shape.numScaleupRanks = std::max(1, node);
  shape.numScaleoutRanks = node > 0 ? std::max(1, nRanks / node) : 1;
  shape.forwarding = cfg.hybrid() ? topo::EpxForwarding::kHybrid : topo::EpxForwarding::kDirect;
  if (cfg.numExperts > 0) shape.numExperts = cfg.numExperts;
  if (cfg.topk > 0) shape.numTopk = cfg.topk;
  return topo::epxEstimateEpResources(rates.nvlinkGBps, rates.rdmaGBps, numSMs, shape).sms;
}

int resolveCtaCount(const GroupConfig& cfg, int numSMs, int nRanks, int lsaSize, const LinkRates& rates) {
  int n = cfg.smBudget > 0 ? cfg.smBudget : analyticSmCount(cfg, numSMs, nRanks, lsaSize, rates);
  return std::max(1, std::min({n, numSMs, dev::kMaxCtas}));
}

}  // namespace epx
