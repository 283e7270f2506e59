#include "core/coll_config.h"

#include <cstring>
#include <limits>

namespace epx {

namespace {

bool aligned(const void* p, uint64_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }
std::string num(uint64_t v) { return std::to_string(v); }

std::string peerCheck(int nRanks, int peer) {
  if (peer < 0 || peer >= nRanks)
    return "peer " + std::to_string(peer) + " is not a rank of the communicator (0 .. " + std::to_string(nRanks - 1) + ")";
  return {};
}

// A config's chunkBytes (0 = the default): "" and *out set, or the reason.
std::string chunkBytesCheck(uint64_t in, uint64_t deflt, uint64_t* out) {
  if (in == 0) {
    *out = deflt;
    return {};
  }
  if (in < dev::kGinMinChunkBytes || in > dev::kGinMaxChunkBytes || in % dev::kVecBytes != 0)
    return "chunkBytes " + num(in) + " is not a multiple of 16 in " + num(dev::kGinMinChunkBytes) + " .. " +
           num(dev::kGinMaxChunkBytes) + " (0 = default " + num(deflt) + ")";
  *out = in;
  return {};
}

// A config's optional int (kUnsetInt = keep *out's default) in lo .. hi (kNoUpper: no upper
// bound): "" and *out set, or the reason.
constexpr int kNoUpper = std::numeric_limits<int>::max();
std::string intCheck(const char* name, int in, int lo, int hi, int* out) {
  if (in == kUnsetInt) return {};
  const std::string what = std::string(name) + " " + std::to_string(in);
  if (in < lo || in > hi)
    return hi == kNoUpper ? what + " must be >= " + std::to_string(lo)
                          : what + " is not in " + std::to_string(lo) + " .. " + std::to_string(hi);
  *out = in;
  return {};
}

}  // namespace

std::string checkConfigHeader(const char* what, bool present, uint64_t size, uint64_t expectedSize, unsigned magic,
                              unsigned expectedMagic) {
  if (!present) return std::string(what) + " is NULL";
  if (magic != expectedMagic) return std::string(what) + " was not initialized with its _INITIALIZER macro (bad magic)";
  if (size != expectedSize)
    return std::string(what) + " has size " + num(size) + ", this library expects " + num(expectedSize);
  return {};
}

// ---- PP ----------------------------------------------------------------------------------------

std::string normalizePpConfig(const PpConfigRequest& in, PpConfig* out) {
  PpConfig c;
  if (in.maxMessageBytes == 0 || in.maxMessageBytes > kPpMaxMessageBytes)
    return "maxMessageBytes " + num(in.maxMessageBytes) + " is not in 1 .. " + num(kPpMaxMessageBytes);
  c.maxBytes = in.maxMessageBytes;
  if (std::string e = intCheck("slots", in.slots, 1, dev::kPpMaxSlots, &c.slots); !e.empty()) return e;
  if (std::string e = intCheck("numCtas", in.numCtas, 1, dev::kPpMaxCtas, &c.numCtas); !e.empty()) return e;
  if (std::string e = intCheck("timeoutMs", in.timeoutMs, 1, kNoUpper, &c.timeoutMs); !e.empty()) return e;
  if (std::string e = chunkBytesCheck(in.chunkBytes, dev::kPpDefaultChunkBytes, &c.chunkBytes); !e.empty()) return e;
  *out = c;
  return {};
}

dev::PpLayout ppLayout(const PpConfig& cfg, int nRanks, int lsaSize) {
  dev::PpShape s;
  s.nRanks = nRanks;
  s.lsaSize = lsaSize;
  s.maxBytes = cfg.maxBytes;
  s.slots = cfg.slots;
  return dev::layoutPp(s);
}

std::string checkPpSend(const PpConfig& cfg, int nRanks, const void* buf, uint64_t bytes, int peer) {
  if (std::string e = peerCheck(nRanks, peer); !e.empty()) return e;
  if (bytes > cfg.maxBytes)
    return "message of " + num(bytes) + " bytes is larger than the channel's maxMessageBytes " + num(cfg.maxBytes);
  if (bytes > 0 && !buf) return "buf is NULL";
  if (bytes > 0 && !aligned(buf, kCollPtrAlign)) return "buf is not 16-byte aligned";
  return {};
}

std::string checkPpRecv(const PpConfig& cfg, int nRanks, const void* buf, uint64_t capacity, int peer,
                        const void* recvBytes) {
  (void)cfg;
  if (std::string e = peerCheck(nRanks, peer); !e.empty()) return e;
  if (capacity > 0 && !buf) return "buf is NULL";
  if (capacity > 0 && !aligned(buf, kCollPtrAlign)) return "buf is not 16-byte aligned";
  if (recvBytes && !aligned(recvBytes, sizeof(uint64_t))) return "recvBytes is not 8-byte aligned";
  return {};
}

std::string checkPpAgreement(const std::vector<PpAgreed>& all) {
  const PpAgreed& r0 = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const PpAgreed& x = all[r];
    auto differ = [&](const char* field, uint64_t a, uint64_t b) {
      return "rank " + std::to_string(r) + " has " + field + " " + num(a) + " but rank 0 has " + num(b) +
             "; every rank must create the channel with the same config";
    };
    if (x.epxVersion != r0.epxVersion) return differ("epx version", x.epxVersion, r0.epxVersion);
    if (x.maxBytes != r0.maxBytes) return differ("maxMessageBytes", x.maxBytes, r0.maxBytes);
    if (x.slots != r0.slots) return differ("slots", x.slots, r0.slots);
    if (x.numCtas != r0.numCtas) return differ("numCtas", x.numCtas, r0.numCtas);
    if (x.timeoutMs != r0.timeoutMs) return differ("timeoutMs", x.timeoutMs, r0.timeoutMs);
    if (x.chunkBytes != r0.chunkBytes) return differ("chunkBytes", x.chunkBytes, r0.chunkBytes);
  }
  return {};
}

// ---- buckets -----------------------------------------------------------------------------------

int dtypeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: break;
  }
  return 0;
}

std::string normalizeBucketConfig(const BucketConfigRequest& in, BucketConfig* out) {
  BucketConfig c;
  if (std::string e = intCheck("numCtas", in.numCtas, 1, dev::kBucketMaxCtas, &c.numCtas); !e.empty()) return e;
  if (std::string e = intCheck("timeoutMs", in.timeoutMs, 1, kNoUpper, &c.timeoutMs); !e.empty()) return e;
  if (std::string e = chunkBytesCheck(in.chunkBytes, dev::kBucketDefaultChunkBytes, &c.chunkBytes); !e.empty())
    return e;
  *out = c;
  return {};
}

std::string checkBucketPlan(const BucketTensorSpec* tensors, int n, int nRanks, std::vector<dev::BucketTensorPlan>* out) {
  if (n < 1 || n > dev::kMaxBucketTensors)
    return "numTensors " + std::to_string(n) + " is not in 1 .. " + std::to_string(dev::kMaxBucketTensors);
  if (!tensors) return "tensors is NULL";
  out->clear();
  for (int i = 0; i < n; ++i) {
    const BucketTensorSpec& t = tensors[i];
    const int eb = dtypeBytes(t.dtype);
    if (eb == 0) return "tensor " + std::to_string(i) + " has an unknown dtype " + std::to_string(int(t.dtype));
    if (t.count == 0) return "tensor " + std::to_string(i) + " has count 0";
    if (t.count % uint64_t(nRanks) != 0)
      return "tensor " + std::to_string(i) + " has count " + num(t.count) + ", not a multiple of the " +
             std::to_string(nRanks) + " ranks (every rank holds an equal shard)";
    const int elem = t.dtype == ncclFloat32 ? dev::kElemF32 : t.dtype == ncclBfloat16 ? dev::kElemBf16 : dev::kElemOther;
    out->push_back(dev::BucketTensorPlan{t.count, eb, elem});
  }
  return {};
}

const char* bucketCallName(BucketCall c) {
  switch (c) {
    case BucketCall::AllGather: return "ncclEpBucketAllGather";
    case BucketCall::ReduceScatter: return "ncclEpBucketReduceScatter";
    case BucketCall::AllReduce: return "ncclEpBucketAllReduce";
  }
  return "?";
}

std::string checkBucketItems(const BucketView& b, BucketCall call, const BucketItemSpec* items, int n,
                             bool haveSession, std::optional<ncclDataType_t> wireType) {
  if (n < 1 || n > b.numTensors)
    return "numItems " + std::to_string(n) + " is not in 1 .. " + std::to_string(b.numTensors) + " (the bucket's tensors)";
  if (!items) return "items is NULL";
  std::vector<bool> seen(size_t(b.numTensors), false);
  for (int i = 0; i < n; ++i) {
    const BucketItemSpec& it = items[i];
    const std::string at = "item " + std::to_string(i) + ": ";
    if (it.tensor < 0 || it.tensor >= b.numTensors)
      return at + "tensor " + std::to_string(it.tensor) + " is not in the plan (0 .. " + std::to_string(b.numTensors - 1) + ")";
    if (seen[size_t(it.tensor)]) return at + "tensor " + std::to_string(it.tensor) + " appears twice in one call";
    seen[size_t(it.tensor)] = true;
    const BucketTensorSpec& p = b.plan[it.tensor];
    if (it.count != p.count)
      return at + "count " + num(it.count) + " does not match tensor " + std::to_string(it.tensor) + "'s planned " + num(p.count);
    if (it.dtype != p.dtype)
      return at + "dtype " + std::to_string(int(it.dtype)) + " does not match tensor " + std::to_string(it.tensor) +
             "'s planned " + std::to_string(int(p.dtype));
    if (call == BucketCall::ReduceScatter && p.dtype != ncclFloat32)
      return at + "reduce-scatter takes ncclFloat32 tensors; tensor " + std::to_string(it.tensor) + " has dtype " +
             std::to_string(int(p.dtype));
    if (call == BucketCall::AllReduce && p.dtype != ncclFloat32 && p.dtype != ncclBfloat16)
      return at + "all-reduce takes ncclFloat32 or ncclBfloat16 tensors; tensor " + std::to_string(it.tensor) +
             " has dtype " + std::to_string(int(p.dtype));
    const bool inPlace = it.external == nullptr || (b.tensorPtrs && it.external == b.tensorPtrs[it.tensor]);
    if (!inPlace) {
      if (!haveSession)
        return at + "tensor " + std::to_string(it.tensor) +
               " lives outside the bucket (external pointer) but the call has no session (ncclEpBucketSessionCreate)";
      if (!aligned(it.external, kCollPtrAlign)) return at + "external pointer is not 16-byte aligned";
    }
  }
  if (wireType && call != BucketCall::AllGather && *wireType != ncclFloat32 && *wireType != ncclBfloat16)
    return "opts->wireType must be ncclFloat32 or ncclBfloat16";
  return {};
}

BucketAgreed makeBucketAgreed(const BucketTensorSpec* tensors, int n, const BucketConfig& cfg, uint32_t epxVersion) {
  BucketAgreed a;
  std::memset(&a, 0, sizeof(a));
  a.epxVersion = epxVersion;
  a.numTensors = n;
  a.numCtas = cfg.numCtas;
  a.timeoutMs = cfg.timeoutMs;
  a.chunkBytes = cfg.chunkBytes;
  for (int i = 0; i < n && i < dev::kMaxBucketTensors; ++i) {
    a.count[i] = tensors[i].count;
    a.dtype[i] = int32_t(tensors[i].dtype);
  }
  return a;
}

std::string checkBucketAgreement(const std::vector<BucketAgreed>& all) {
  const BucketAgreed& r0 = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const BucketAgreed& x = all[r];
    auto differ = [&](const std::string& field, uint64_t a, uint64_t b) {
      return "rank " + std::to_string(r) + " has " + field + " " + num(a) + " but rank 0 has " + num(b) +
             "; every rank must create the bucket with the same plan and config";
    };
    if (x.epxVersion != r0.epxVersion) return differ("epx version", x.epxVersion, r0.epxVersion);
    if (x.numTensors != r0.numTensors) return differ("numTensors", x.numTensors, r0.numTensors);
    if (x.numCtas != r0.numCtas) return differ("numCtas", x.numCtas, r0.numCtas);
    if (x.timeoutMs != r0.timeoutMs) return differ("timeoutMs", x.timeoutMs, r0.timeoutMs);
    if (x.chunkBytes != r0.chunkBytes) return differ("chunkBytes", x.chunkBytes, r0.chunkBytes);
    for (int i = 0; i < r0.numTensors; ++i) {
      if (x.count[i] != r0.count[i]) return differ("tensor " + std::to_string(i) + " count", x.count[i], r0.count[i]);
      if (x.dtype[i] != r0.dtype[i]) return differ("tensor " + std::to_string(i) + " dtype", x.dtype[i], r0.dtype[i]);
    }
  }
  return {};
}

// ---- expert load balancing ---------------------------------------------------------------------

std::string normalizeLbConfig(const LbConfigRequest& in, LbConfig* out) {
  LbConfig c;
  if (std::string e = intCheck("numCtas", in.numCtas, 1, kLbMaxCtas, &c.numCtas); !e.empty()) return e;
  if (std::string e = intCheck("timeoutMs", in.timeoutMs, 1, kNoUpper, &c.timeoutMs); !e.empty()) return e;
  if (std::string e = chunkBytesCheck(in.chunkBytes, kLbDefaultChunkBytes, &c.chunkBytes); !e.empty()) return e;
  *out = c;
  return {};
}

std::string checkLbPlan(const LbPlan& p, int nRanks) {
  if (p.numExperts < 1 || p.numExperts % nRanks != 0)
    return "numExperts " + std::to_string(p.numExperts) + " is not a positive multiple of the " +
           std::to_string(nRanks) + " ranks (every rank owns an equal share of the original experts)";
  if (p.numSlots < 1 || p.numSlots > kLbMaxSlots)
    return "numSlots " + std::to_string(p.numSlots) + " is not in 1 .. " + std::to_string(kLbMaxSlots);
  const auto count = [](const char* what, size_t n) -> std::string {
    if (n > size_t(kLbMaxTensors))
      return std::string(what) + " " + std::to_string(n) + " is more than " + std::to_string(kLbMaxTensors);
    return {};
  };
  if (std::string e = count("numWeightTensors", p.weightRowBytes.size()); !e.empty()) return e;
  if (std::string e = count("numGradTensors", p.gradRowElems.size()); !e.empty()) return e;
  if (p.weightRowBytes.empty() && p.gradRowElems.empty()) return "the plan has neither weight nor gradient tensors";
  for (size_t i = 0; i < p.weightRowBytes.size(); ++i)
    if (p.weightRowBytes[i] == 0 || p.weightRowBytes[i] % kLbRowAlign != 0)
      return "weight tensor " + std::to_string(i) + " has " + num(p.weightRowBytes[i]) +
             " bytes per expert, not a positive multiple of " + num(kLbRowAlign);
  for (size_t i = 0; i < p.gradRowElems.size(); ++i)
    if (p.gradRowElems[i] == 0 || p.gradRowElems[i] * sizeof(float) % kLbRowAlign != 0)
      return "gradient tensor " + std::to_string(i) + " has " + num(p.gradRowElems[i]) +
             " FP32 elements per expert, not a positive multiple of " + num(kLbRowAlign / sizeof(float));
  return {};
}

LbAgreed makeLbAgreed(const LbPlan& p, const LbConfig& cfg, uint32_t epxVersion) {
  LbAgreed a{};
  a.epxVersion = epxVersion;
  a.numExperts = p.numExperts;
  a.numSlots = p.numSlots;
  a.numWeightTensors = int32_t(p.weightRowBytes.size());
  a.numGradTensors = int32_t(p.gradRowElems.size());
  a.numCtas = cfg.numCtas;
  a.timeoutMs = cfg.timeoutMs;
  a.chunkBytes = cfg.chunkBytes;
  for (size_t i = 0; i < p.weightRowBytes.size() && i < size_t(kLbMaxTensors); ++i) a.weightRowBytes[i] = p.weightRowBytes[i];
  for (size_t i = 0; i < p.gradRowElems.size() && i < size_t(kLbMaxTensors); ++i) a.gradRowElems[i] = p.gradRowElems[i];
  return a;
}

std::string checkLbAgreement(const std::vector<LbAgreed>& all) {
  const LbAgreed& r0 = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const LbAgreed& x = all[r];
    auto differ = [&](const std::string& field, uint64_t a, uint64_t b) {
      return "rank " + std::to_string(r) + " has " + field + " " + num(a) + " but rank 0 has " + num(b) +
             "; every rank must create the load-balancing object with the same plan and config";
    };
    if (x.epxVersion != r0.epxVersion) return differ("epx version", x.epxVersion, r0.epxVersion);
    if (x.numExperts != r0.numExperts) return differ("numExperts", uint64_t(x.numExperts), uint64_t(r0.numExperts));
    if (x.numSlots != r0.numSlots) return differ("numSlots", uint64_t(x.numSlots), uint64_t(r0.numSlots));
    if (x.numWeightTensors != r0.numWeightTensors)
      return differ("numWeightTensors", uint64_t(x.numWeightTensors), uint64_t(r0.numWeightTensors));
    if (x.numGradTensors != r0.numGradTensors)
      return differ("numGradTensors", uint64_t(x.numGradTensors), uint64_t(r0.numGradTensors));
    if (x.numCtas != r0.numCtas) return differ("numCtas", uint64_t(x.numCtas), uint64_t(r0.numCtas));
    if (x.timeoutMs != r0.timeoutMs) return differ("timeoutMs", uint64_t(x.timeoutMs), uint64_t(r0.timeoutMs));
    if (x.chunkBytes != r0.chunkBytes) return differ("chunkBytes", x.chunkBytes, r0.chunkBytes);
    for (int i = 0; i < kLbMaxTensors; ++i) {
      if (x.weightRowBytes[i] != r0.weightRowBytes[i])
        return differ("weightRowBytes[" + std::to_string(i) + "]", x.weightRowBytes[i], r0.weightRowBytes[i]);
      if (x.gradRowElems[i] != r0.gradRowElems[i])
        return differ("gradRowElems[" + std::to_string(i) + "]", x.gradRowElems[i], r0.gradRowElems[i]);
    }
  }
  return {};
}

// ---- Engram ------------------------------------------------------------------------------------

std::string normalizeEngramConfig(const EngramConfigRequest& in, EngramConfig* out) {
  EngramConfig c;
  if (std::string e = intCheck("numCtas", in.numCtas, 1, kEngramMaxCtas, &c.numCtas); !e.empty()) return e;
  if (std::string e = intCheck("timeoutMs", in.timeoutMs, 1, kNoUpper, &c.timeoutMs); !e.empty()) return e;
  if (std::string e = chunkBytesCheck(in.chunkBytes, kEngramDefaultChunkBytes, &c.chunkBytes); !e.empty()) return e;
  *out = c;
  return {};
}

std::string checkEngramPlan(const EngramPlan& p, int nRanks) {
  if (nRanks > kEngramMaxRanks)
    return "the communicator has " + std::to_string(nRanks) + " ranks; Engram serves at most " +
           std::to_string(kEngramMaxRanks);
  if (p.numLayers < 1 || p.numLayers > kEngramMaxLayers)
    return "numLayers " + std::to_string(p.numLayers) + " is not in 1 .. " + std::to_string(kEngramMaxLayers);
  if (p.numRows < 1 || p.numRows % nRanks != 0)
    return "numRows " + std::to_string(p.numRows) + " is not a positive multiple of the " + std::to_string(nRanks) +
           " ranks (every rank holds an equal shard of each table)";
  if (p.numRows > kEngramMaxRows)
    return "numRows " + std::to_string(p.numRows) + " is more than " + std::to_string(kEngramMaxRows) +
           " (indices are int32)";
  if (p.rowBytes == 0 || p.rowBytes % kCollPtrAlign != 0 || p.rowBytes > kEngramMaxRowBytes)
    return "rowBytes " + num(p.rowBytes) + " is not a positive multiple of " + num(kCollPtrAlign) + " up to " +
           num(kEngramMaxRowBytes);
  if (p.maxTokens < 1) return "maxTokens " + std::to_string(p.maxTokens) + " must be at least 1";
  if (p.entriesPerToken < 1) return "entriesPerToken " + std::to_string(p.entriesPerToken) + " must be at least 1";
  if (int64_t(p.maxTokens) * p.entriesPerToken > kEngramMaxRequests)
    return "maxTokens x entriesPerToken is " + std::to_string(int64_t(p.maxTokens) * p.entriesPerToken) +
           ", more than " + std::to_string(kEngramMaxRequests) + " rows per layer";
  return {};
}

EngramAgreed makeEngramAgreed(const EngramPlan& p, const EngramConfig& cfg, uint32_t epxVersion) {
  EngramAgreed a{};
  a.epxVersion = epxVersion;
  a.numLayers = p.numLayers;
  a.maxTokens = p.maxTokens;
  a.entriesPerToken = p.entriesPerToken;
  a.numCtas = cfg.numCtas;
  a.timeoutMs = cfg.timeoutMs;
  a.numRows = p.numRows;
  a.rowBytes = p.rowBytes;
  a.chunkBytes = cfg.chunkBytes;
  return a;
}

std::string checkEngramAgreement(const std::vector<EngramAgreed>& all) {
  const EngramAgreed& r0 = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const EngramAgreed& x = all[r];
    auto differ = [&](const std::string& field, uint64_t a, uint64_t b) {
      return "rank " + std::to_string(r) + " has " + field + " " + num(a) + " but rank 0 has " + num(b) +
             "; every rank must create the Engram object with the same plan and config";
    };
    if (x.epxVersion != r0.epxVersion) return differ("epx version", x.epxVersion, r0.epxVersion);
    if (x.numLayers != r0.numLayers) return differ("numLayers", uint64_t(x.numLayers), uint64_t(r0.numLayers));
    if (x.numRows != r0.numRows) return differ("numRows", uint64_t(x.numRows), uint64_t(r0.numRows));
    if (x.rowBytes != r0.rowBytes) return differ("rowBytes", x.rowBytes, r0.rowBytes);
    if (x.maxTokens != r0.maxTokens) return differ("maxTokens", uint64_t(x.maxTokens), uint64_t(r0.maxTokens));
    if (x.entriesPerToken != r0.entriesPerToken)
      return differ("entriesPerToken", uint64_t(x.entriesPerToken), uint64_t(r0.entriesPerToken));
    if (x.numCtas != r0.numCtas) return differ("numCtas", uint64_t(x.numCtas), uint64_t(r0.numCtas));
    if (x.timeoutMs != r0.timeoutMs) return differ("timeoutMs", uint64_t(x.timeoutMs), uint64_t(r0.timeoutMs));
    if (x.chunkBytes != r0.chunkBytes) return differ("chunkBytes", x.chunkBytes, r0.chunkBytes);
  }
  return {};
}

}  // namespace epx
