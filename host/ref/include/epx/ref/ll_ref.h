// CPU reference of low-latency dispatch/combine (ep_ll.h): which (token, slot) goes to which
// expert row, the FP8 e4m3 cast with one FP32 scale per 128 channels (bit-exact with the kernel),
// and the weighted combine at the source rank. Plain C++, no CUDA.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace epx::ref {

struct LlShape {
  int nRanks = 1;
  int maxTokens = 1;
  int hidden = 128;
  int topk = 1;
  int numExperts = 1;
  int localExperts() const { return numExperts / nRanks; }
  int rowsPerExpert() const { return nRanks * maxTokens; }
};

// One rank's router decision: topkIdx [numTokens, topk] (-1 = masked).
struct LlRouting {
  int numTokens = 0;
  std::vector<int64_t> topkIdx;
};

// Expert of slot k of token t, or -1: masked, outside [0, numExperts), or repeating an earlier slot
// of the token (the first occurrence is kept).
int llSlotExpert(const LlShape& s, const LlRouting& r, int t, int k);
// Whether slot k of token t holds an invalid id (out of range other than -1, or repeated).
bool llSlotInvalid(const LlShape& s, const LlRouting& r, int t, int k);

// Source of one dispatch output row.
struct LlRow {
  int srcRank, token, slot;
  bool operator==(const LlRow& o) const { return srcRank == o.srcRank && token == o.token && slot == o.slot; }
};

// What `rank` receives: per local expert, its rows in output order (source rank, then token order).
struct LlReceived {
  std::vector<std::vector<LlRow>> rows;  // [Le][count]
};
LlReceived llDispatchRows(const LlShape& s, const std::vector<LlRouting>& all, int rank);

// FP8 e4m3 (bias 7, no infinities, 0x7f / 0xff NaN): round to nearest even, saturating to +-448.
uint8_t fp8E4m3FromFloat(float f);
float fp8E4m3ToFloat(uint8_t v);
// Dequantization scale of a 128-channel block: max(amax, 1e-4) / 448, rounded up to a power of two
// when roundPow2 (UE8M0).
float llFp8Scale(float amax, bool roundPow2);
// One BF16 row of `hidden` channels to FP8 bytes [hidden] and scales [hidden / 128]: each channel
// x * (1 / scale) (FP32, round to nearest) cast to e4m3.
void llCastRowFp8(const uint16_t* x, int hidden, bool roundPow2, uint8_t* q, float* scales);

// Weighted combine of `numTokens` tokens at their source rank: out[t] = BF16 of the FP32 sum over
// k = 0..topk-1 (in that order, from 0) of weights[t, k] * row(t, k), for the slots with an expert
// (llSlotExpert >= 0); row(t, k) gives the expert output (BF16 [hidden]) of that slot.
std::vector<uint16_t> llCombine(const LlShape& s, const LlRouting& r, const std::vector<float>& weights,
                                const std::function<const uint16_t*(int t, int k)>& row);

}  // namespace epx::ref
