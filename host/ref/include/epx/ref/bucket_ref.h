// CPU reference of the bucket collectives (no CUDA): what ncclEpBucketAllGather /
// ReduceScatter / AllReduce must produce, bit for bit. Reductions start from +0.0 and add every
// rank's contribution in rank order 0..nRanks-1 with FP32 round-to-nearest additions (a BF16 wire
// or BF16 tensor first rounds each contribution to BF16), then multiply by the scale if one is
// given, then round once to the tensor's dtype.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "epx/ref/bf16.h"

namespace epx::ref {

struct ReduceOptions {
  bool bf16Wire = false;  // FP32 tensors: every contribution rounded to BF16 first
  bool hasScale = false;
  float scale = 1.0f;
};

// Element j of the rank-order sum over inputs[r][j] (FP32 contributions).
inline float rankOrderSum(const std::vector<std::vector<float>>& inputs, size_t j, const ReduceOptions& o) {
  float acc = 0.0f;
  for (const auto& in : inputs) {
    float v = in[j];
    if (o.bf16Wire) v = bf16ToFloat(floatToBf16(v));
    acc = acc + v;
  }
  if (o.hasScale) acc = acc * o.scale;
  return acc;
}

// Reduce-scatter of FP32 tensors: rank `rank`'s shard (count / nRanks elements) of the sum.
inline std::vector<float> reduceScatterF32(const std::vector<std::vector<float>>& inputs, int rank,
                                           const ReduceOptions& o) {
  const size_t shard = inputs[0].size() / inputs.size();
  std::vector<float> out(shard);
  for (size_t j = 0; j < shard; ++j) out[j] = rankOrderSum(inputs, size_t(rank) * shard + j, o);
  return out;
}

// All-reduce of FP32 tensors (the whole sum, the same on every rank).
inline std::vector<float> allReduceF32(const std::vector<std::vector<float>>& inputs, const ReduceOptions& o) {
  std::vector<float> out(inputs[0].size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = rankOrderSum(inputs, j, o);
  return out;
}

// All-reduce of BF16 tensors: FP32 accumulation of the BF16 values, rounded once.
inline std::vector<uint16_t> allReduceBf16(const std::vector<std::vector<uint16_t>>& inputs, const ReduceOptions& o) {
  std::vector<std::vector<float>> f(inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) {
    f[r].resize(inputs[r].size());
    for (size_t j = 0; j < inputs[r].size(); ++j) f[r][j] = bf16ToFloat(inputs[r][j]);
  }
  ReduceOptions plain = o;
  plain.bf16Wire = false;
  std::vector<uint16_t> out(inputs[0].size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = floatToBf16(rankOrderSum(f, j, plain));
  return out;
}

// All-gather: rank r's shard of its own tensor (bytes [r * shardBytes, (r + 1) * shardBytes)) in
// every rank's result.
inline std::vector<uint8_t> allGatherBytes(const std::vector<std::vector<uint8_t>>& tensors) {
  const size_t n = tensors.size(), shardBytes = tensors[0].size() / n;
  std::vector<uint8_t> out(tensors[0].size());
  for (size_t r = 0; r < n; ++r) std::memcpy(&out[r * shardBytes], &tensors[r][r * shardBytes], shardBytes);
  return out;
}

}  // namespace epx::ref
