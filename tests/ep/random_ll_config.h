// Configuration sampler of the randomized low-latency test (GPU suite `random_ll`,
// test_random_ll.cc; checked on the CPU by the suite `random_ll_sampler`). Every draw is a pure
// function of (base seed, index, nRanks), the same in every process, and one case can be replayed
// alone from its index.
//
// Ranges are the documented ones of epx/ep_ll.h and docs/low-latency.md: maxTokensPerRank 1..4096,
// hidden a multiple of 128 in 128..65536, top-k 1..32 (1, 31 and 32 often), experts a multiple of
// nRanks up to 1024 (fewer than top-k too: the rest of a token's slots stay masked), FP8 groups or
// not; per case tokens 0..maxTokensPerRank on each rank (0 and the maximum often, uneven), BF16 or
// FP8 (UE8M0 scales or not), int32/int64 ids, masked slots (-1) and fully masked tokens, every token
// to one expert, all-zero 128-channel blocks (the FP8 amax floor), send/receive halves split onto two
// streams, the zero-copy combine input (the group's combine buffer), recvSrcInfo given or not.
// Budgets: the window of every rank together (ncclEpGetBufferSizeHint), the outputs of every rank
// together (all ranks on one GPU under fake nodes) and the host reference's work; a group that does
// not fit shrinks maxTokensPerRank, the experts and hidden (one of them, drawn at its maximum, last).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/ep.h"
#include "epx/ref/ll_ref.h"

namespace epx::test::rnd::ll {

// ncclEpGetBufferSizeHint of one rank times nRanks.
constexpr double kWindowBytesBudget = 1024.0 * (1 << 20);
// Dispatch outputs and combine inputs of every rank: nRanks * numExperts * maxTokens * hidden * 4 bytes.
constexpr double kOutputBytesBudget = 512.0 * (1 << 20);
// Host reference work: nRanks * maxTokens * min(topk, numExperts) * hidden row elements.
constexpr double kRowElemsBudget = 32.0 * (1 << 20);
constexpr int kCasesPerGroup = 6;

struct LlGroup {
  int maxTokens = 1;
  int hidden = 128;
  int topk = 1;
  int numExperts = 1;
  int fp8 = 0;       // fp8Dispatch
  int smBudget = 0;  // 0 = analytic
};

struct LlCase {
  int index = 0;
  std::vector<int> tokens;     // per rank
  bool fp8 = false, roundScale = false, int32Ids = false;
  double maskProb = 0;         // each slot masked (-1) with this probability
  bool fullyMaskedToken = false;  // token 0 of every rank has no expert
  int singleExpert = -1;       // >= 0: every token to this expert only, in one random slot
  bool zeroBlocks = false;     // some 128-channel blocks of x are all zero
  bool split = false;          // send half, other work, receive half on another stream
  bool zeroCopy = false;       // combine input written into the group's combine buffer
  bool srcInfo = true;         // pass recvSrcInfo
  uint64_t dataSeed = 0;       // routing, x, weights
};

LlGroup drawGroup(uint64_t baseSeed, int group, int nRanks);
inline int groupOf(int caseIndex) { return caseIndex / kCasesPerGroup; }
LlCase drawCase(uint64_t baseSeed, int index, const LlGroup& g, int nRanks);

// Every rank's inputs of a case, drawn from its dataSeed (the same in every process): routing
// (distinct experts per token, or one expert; masked slots -1), x (random BF16, all-zero blocks when
// zeroBlocks) and the combine's gate weights (k / 32, |k| <= 64: their products with BF16 values
// are exact in FP32).
struct LlInputs {
  std::vector<epx::ref::LlRouting> routing;
  std::vector<std::vector<uint16_t>> x;     // [T, H]
  std::vector<std::vector<float>> weights;  // [T, K]
};
LlInputs makeInputs(const LlGroup& g, const LlCase& c, int nRanks);

// The group's ncclEpConfig_t (algorithm ncclEpAlgoLowLatency; smBudget as drawn, without the SM cap
// the GPU suite applies under fake nodes).
ncclEpConfig_t makeLlConfig(const LlGroup& g);
// Whether the group is within the budgets (windowBytes: ncclEpGetBufferSizeHint times nRanks).
bool withinBudget(const LlGroup& g, int nRanks, double* windowBytes = nullptr);

std::string describe(const LlGroup& g);
std::string describe(const LlCase& c, const LlGroup& g);

}  // namespace epx::test::rnd::ll
