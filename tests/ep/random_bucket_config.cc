// Configuration sampler of the randomized bucket-collective test: see random_bucket_config.h.
#include "random_bucket_config.h"

#include <algorithm>
#include <sstream>

#include "random_config.h"

namespace epx::test::rnd::bucket {

namespace {

constexpr uint64_t kBucketStream = 0x6275636b6574ull, kCallStream = 0x63616c6cull;
constexpr uint64_t kDefaultChunk = uint64_t(2) << 20, kMinChunk = uint64_t(64) << 10, kMaxChunk = uint64_t(1) << 30;

// Elements per rank of one tensor: 1, odd shards (3, 1007, 4097 and others), multiples of 8, a
// whole number of GIN chunks +- a few elements, or log-uniform up to kMaxShard.
uint64_t drawShard(Rng& rng, int elemBytes, uint64_t chunk) {
  const double u = rng.unit();
  if (u < 0.12) return 1;
  if (u < 0.17) return 1007;
  if (u < 0.20) return 3;
  if (u < 0.23) return 4097;
  if (u < 0.32) return 2 * logUniform64(rng, 1, kMaxShard / 2) + 1;
  if (u < 0.46) return 8 * logUniform64(rng, 1, kMaxShard / 8);
  if (u < 0.56) {
    const uint64_t atChunks = uint64_t(rng.uniform(1, 4)) * chunk / uint64_t(elemBytes);
    const int delta = rng.uniform(-3, 3);
    return delta < 0 && uint64_t(-delta) >= atChunks ? 1 : atChunks + uint64_t(int64_t(delta));
  }
  return logUniform64(rng, 1, kMaxShard);
}

ncclDataType_t drawDtype(Rng& rng) {
  const double u = rng.unit();
  if (u < 0.35) return ncclFloat32;
  if (u < 0.60) return ncclBfloat16;
  std::vector<ncclDataType_t> others;
  for (ncclDataType_t t : planDtypes())
    if (t != ncclFloat32 && t != ncclBfloat16) others.push_back(t);
  return others[size_t(rng.uniform(0, int(others.size()) - 1))];
}

float drawScale(Rng& rng, int R) {
  const double u = rng.unit();
  if (u < 0.4) return 1.0f / float(R);
  if (u < 0.55) return 1.0f;
  if (u < 0.7) {
    static const float kPow2[] = {0.5f, 0.25f, 2.0f, 4.0f, 0.0078125f};
    return kPow2[rng.uniform(0, 4)];
  }
  return float(rng.uniform(1, 1 << 20)) * 0x1p-18f;  // (0, 4], any mantissa
}

}  // namespace

const char* opName(int op) {
  switch (op) {
    case kAllGather: return "all-gather";
    case kReduceScatter: return "reduce-scatter";
    case kAllReduce: return "all-reduce";
  }
  return "?";
}

const std::vector<ncclDataType_t>& planDtypes() {
  static const std::vector<ncclDataType_t> all = {ncclInt8,    ncclUint8,  ncclInt32,   ncclUint32,
                                                  ncclInt64,   ncclUint64, ncclFloat16, ncclFloat32,
                                                  ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return all;
}

int dtypeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* dtypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "i8";
    case ncclUint8: return "u8";
    case ncclInt32: return "i32";
    case ncclUint32: return "u32";
    case ncclInt64: return "i64";
    case ncclUint64: return "u64";
    case ncclFloat16: return "f16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    case ncclBfloat16: return "bf16";
    case ncclFloat8e4m3: return "e4m3";
    case ncclFloat8e5m2: return "e5m2";
    default: return "?";
  }
}

bool opTakes(int op, ncclDataType_t t) {
  if (op == kReduceScatter) return t == ncclFloat32;
  if (op == kAllReduce) return t == ncclFloat32 || t == ncclBfloat16;
  return true;
}

BucketSpec drawBucket(uint64_t baseSeed, int group, int R) {
  Rng rng(streamSeed(baseSeed, kBucketStream, uint64_t(group)));
  BucketSpec b;
  double u = rng.unit();
  b.numCtas = u < 0.3 ? 0 : u < 0.42 ? 1 : u < 0.54 ? 32 : rng.uniform(2, 31);
  u = rng.unit();
  b.chunkBytes = u < 0.3    ? 0
                 : u < 0.5  ? kMinChunk
                 : u < 0.58 ? kMaxChunk
                 : u < 0.75 ? kMinChunk + 16 * uint64_t(rng.uniform(1, 8191))
                            : 16 * logUniform64(rng, kMinChunk / 16, (uint64_t(64) << 20) / 16);
  const uint64_t chunk = b.chunkBytes ? b.chunkBytes : kDefaultChunk;
  u = rng.unit();
  const int n = u < 0.15 ? 32 : u < 0.3 ? 1 : rng.uniform(2, 31);
  double used = 0;
  for (int i = 0; i < n; ++i) {
    const ncclDataType_t dt = drawDtype(rng);
    const int eb = dtypeBytes(dt);
    uint64_t shard = drawShard(rng, eb, chunk);
    // What is left of the budget; past it, shards of 1 element.
    const double room = (kTensorBytesBudget - used) / (double(R) * eb);
    if (double(shard) > room) shard = room < 1 ? 1 : logUniform64(rng, 1, uint64_t(room));
    used += double(shard) * R * eb;
    b.plan.push_back(ncclEpBucketTensor_t{shard * uint64_t(R), dt});
  }
  return b;
}

BucketCase drawCase(uint64_t baseSeed, int index, const BucketSpec& b, int R) {
  Rng rng(streamSeed(baseSeed, kCallStream, uint64_t(index)));
  BucketCase c;
  c.index = index;
  const double u = rng.unit();
  const int calls = u < 0.6 ? 1 : u < 0.85 ? 2 : 3;
  std::vector<int> available;
  for (int i = 0; i < int(b.plan.size()); ++i) available.push_back(i);
  for (int k = 0; k < calls && !available.empty(); ++k) {
    std::vector<int> ops;
    for (int op : {kAllGather, kReduceScatter, kAllReduce})
      for (int t : available)
        if (opTakes(op, b.plan[size_t(t)].dtype)) {
          ops.push_back(op);
          break;
        }
    BucketCall call;
    call.op = ops[size_t(rng.uniform(0, int(ops.size()) - 1))];
    std::vector<int> eligible;
    for (int t : available)
      if (opTakes(call.op, b.plan[size_t(t)].dtype)) eligible.push_back(t);
    for (size_t i = eligible.size(); i > 1; --i) std::swap(eligible[i - 1], eligible[size_t(rng.uniform(0, int(i) - 1))]);
    const double v = rng.unit();
    const int m = v < 0.3 ? int(eligible.size()) : v < 0.5 ? 1 : rng.uniform(1, int(eligible.size()));
    call.tensors.assign(eligible.begin(), eligible.begin() + m);
    for (int t : call.tensors) {
      available.erase(std::find(available.begin(), available.end(), t));
      const double w = rng.unit();
      call.where.push_back(w < 0.22 ? kExternal : w < 0.3 ? kOwnPointer : kInPlace);
    }
    if (call.op != kAllGather) {
      call.passOpts = rng.unit() < 0.8;
      if (call.passOpts) {
        call.bf16Wire = rng.unit() < 0.5;
        call.hasScale = rng.unit() < 0.5;
        if (call.hasScale) call.scale = drawScale(rng, R);
      }
    }
    c.calls.push_back(call);
  }
  bool external = false;
  for (const BucketCall& call : c.calls)
    for (int w : call.where) external |= w == kExternal;
  c.session = external || rng.unit() < 0.2;
  c.externalOffset = rng.uniform(0, 3);
  c.dataSeed = rng.next();
  return c;
}

std::string describe(const BucketSpec& b, int R) {
  std::ostringstream os;
  os << b.plan.size() << " tensors [";
  for (size_t i = 0; i < b.plan.size(); ++i)
    os << (i ? " " : "") << i << ":" << dtypeName(b.plan[i].dtype) << "x" << b.plan[i].count / uint64_t(R) << "/rank";
  os << "] numCtas=" << (b.numCtas ? std::to_string(b.numCtas) : std::string("default"))
     << " chunkBytes=" << (b.chunkBytes ? std::to_string(b.chunkBytes) : std::string("default"));
  return os.str();
}

std::string describe(const BucketCase& c, const BucketSpec& b, int R) {
  std::ostringstream os;
  os.precision(9);  // scales to the last bit
  os << "case " << c.index << ": bucket {" << describe(b, R) << "} calls:";
  for (const BucketCall& call : c.calls) {
    os << " " << opName(call.op) << "(";
    for (size_t i = 0; i < call.tensors.size(); ++i)
      os << (i ? "," : "") << call.tensors[i]
         << (call.where[i] == kExternal ? "ext" : call.where[i] == kOwnPointer ? "own" : "");
    os << ")";
    if (call.op != kAllGather) {
      if (!call.passOpts) os << "[opts NULL]";
      else if (call.hasScale) os << "[wire " << (call.bf16Wire ? "bf16" : "fp32") << " scale " << call.scale << "]";
      else os << "[wire " << (call.bf16Wire ? "bf16" : "fp32") << "]";
    }
  }
  os << (c.session ? " session" : "") << " externalOffset=" << c.externalOffset * 16 << "B dataSeed=0x" << std::hex
     << c.dataSeed;
  return os.str();
}

}  // namespace epx::test::rnd::bucket
