#include "core/agree.h"

#include <cstdio>
#include <optional>

namespace epx {

namespace {

std::string versionText(uint32_t code) {  // EPX_VERSION_CODE and NCCL_VERSION_CODE: X.YY.ZZ
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof(b), "0x%08x", v);
  return b;
}

std::string algoText(int32_t a) {
  const char* name = a == ncclEpAlgoAuto             ? "ncclEpAlgoAuto"
                     : a == ncclEpAlgoHighThroughput ? "ncclEpAlgoHighThroughput"
                     : a == ncclEpAlgoLowLatency     ? "ncclEpAlgoLowLatency"
                                                     : "unknown";
  return std::to_string(a) + " (" + name + ")";
}

std::string smText(const AgreedConfig& c) {
  return std::to_string(c.smBudget) + (c.smBudget == 0 ? " (analytic, " : " (") + std::to_string(c.nCtas) + " CTAs)";
}

// How rank r's record differs from rank 0's, in words: "<field> <r's value>" and "<rank 0's value>".
struct Diff {
  std::string mine, ref, hint;
  bool build = false;  // the builds differ, not the configs
};

std::optional<Diff> firstDiff(const AgreedConfig& x, const AgreedConfig& ref) {
  if (x.magic != ref.magic)
    return Diff{"config record magic " + hex(x.magic), hex(ref.magic),
                " (epx builds with different group-agreement records)", true};
  if (x.epxVersion != ref.epxVersion || x.ncclVersion != ref.ncclVersion) {
    auto text = [](const AgreedConfig& c) {
      return "epx " + versionText(c.epxVersion) + " built against NCCL " + versionText(c.ncclVersion);
    };
    return Diff{text(x), text(ref), "", true};
  }
  auto num = [](const char* name, int32_t a, int32_t b) -> std::optional<Diff> {
    if (a == b) return std::nullopt;
    return Diff{std::string(name) + " " + std::to_string(a), std::to_string(b), ""};
  };
  if (auto d = num("maxTokensPerRank", x.maxTokensPerRank, ref.maxTokensPerRank)) return d;
  if (auto d = num("hidden", x.hidden, ref.hidden)) return d;
  if (auto d = num("topk", x.topk, ref.topk)) return d;
  if (auto d = num("numExperts", x.numExperts, ref.numExperts)) return d;
  if (auto d = num("fp8Dispatch", x.fp8Dispatch, ref.fp8Dispatch)) return d;
  if (auto d = num("exactCombine", x.exactCombine, ref.exactCombine)) return d;
  if (auto d = num("forwarding", x.forwarding, ref.forwarding)) return d;
  if (auto d = num("forwardNodeSize", x.forwardNodeSize, ref.forwardNodeSize)) return d;
  if (x.algorithm != ref.algorithm) return Diff{"algorithm " + algoText(x.algorithm), algoText(ref.algorithm), ""};
  if (x.smBudget != ref.smBudget || x.nCtas != ref.nCtas) {
    Diff d{"smBudget " + smText(x), smText(ref), ""};
    if (x.smBudget == ref.smBudget)
      d.hint = " (the same smBudget resolves to different CTA counts: GPUs with different SM counts, or a "
               "different EPX_NVLINK_GBPS or EPX_RDMA_GBPS for the analytic estimate; set smBudget explicitly, at most the "
               "smallest GPU's SM count)";
    return d;
  }
  if (auto d = num("timeoutMs", x.timeoutMs, ref.timeoutMs)) return d;
  return std::nullopt;
}

}  // namespace

AgreedConfig makeAgreedConfig(const GroupConfig& cfg, int nCtas) {
  AgreedConfig a{};
  a.magic = kAgreedConfigMagic;
  a.epxVersion = EPX_VERSION_CODE;
  a.ncclVersion = NCCL_VERSION_CODE;
  a.maxTokensPerRank = cfg.maxTokensPerRank;
  a.hidden = cfg.hidden;
  a.topk = cfg.topk;
  a.numExperts = cfg.numExperts;
  a.fp8Dispatch = cfg.fp8Dispatch ? 1 : 0;
  a.exactCombine = cfg.exactCombine ? 1 : 0;
  a.forwarding = cfg.forwarding;
  a.forwardNodeSize = cfg.forwardNodeSize;
  a.algorithm = cfg.algorithm;
  a.smBudget = cfg.smBudget;
  a.nCtas = nCtas;
  a.timeoutMs = cfg.timeoutMs;
  return a;
}

std::string checkAgreement(const std::vector<AgreedConfig>& all) {
  if (all.empty()) return "no config records to compare (no ranks)";
  const int n = int(all.size());
  int first = -1, differing = 0;
  Diff diff;
  for (int r = 1; r < n; ++r) {
    if (auto d = firstDiff(all[r], all[0])) {
      if (differing++ == 0) {
        first = r;
        diff = *d;
      }
    }
  }
  if (differing == 0) return {};
  std::string msg = "rank " + std::to_string(first) + " has " + diff.mine + " but rank 0 has " + diff.ref + diff.hint +
                    (diff.build ? "; every rank must run the same epx build"
                                : "; every rank must create the group with the same config");
  if (differing > 1)
    msg += " (" + std::to_string(differing) + " of " + std::to_string(n) + " ranks differ from rank 0)";
  return msg;
}

}  // namespace epx
