// Randomized differential test of the bucket collectives (suite `random_bucket`): buckets and calls
// drawn from the whole documented range (random_bucket_config.h), every result compared bit for bit
// with the CPU reference (epx/ref/bucket_ref.h: rank-order sums; all-gather byte-exact), outputs
// poisoned first. Inputs are generated on the device from seeds (coll_kernels.h) and recomputed on
// the host. Per call: all-gather results in every byte of the tensor (each shard from its owner),
// reduce-scatter this rank's shard, all-reduce the whole tensor; tensors the case's calls do not name
// must come back unchanged; a session's staged bytes must count its external tensors in and out.
// Cases come in groups of kCasesPerBucket that share one collectively created bucket.
//
// Environment: EPX_TEST_SEED, EPX_RANDOM_CASES (default 300, 100 with EPX_TEST_QUICK),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed and rank count),
// EPX_RANDOM_SECONDS (no new bucket after this many seconds, default 150, 0 = unlimited). A failing
// case prints its index, the seed, its full configuration and the command line that replays it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/bucket.h"
#include "epx/ref/bf16.h"
#include "epx/ref/bucket_ref.h"
#include "random_bucket_config.h"
#include "random_run.h"

using namespace epx::test;
namespace rb = epx::test::rnd::bucket;

namespace {

constexpr uint8_t kPoison = 0xa5;        // all-gather outputs (every shard but the rank's own)
constexpr uint8_t kBucketPoison = 0x5b;  // a bucket tensor whose item is external (staged over)

uint64_t inputSeed(uint64_t base, int rank, int tensor) {
  return mix64(base ^ (uint64_t(rank) << 48) ^ (uint64_t(tensor) * 0x100000001ull));
}
// Tensors no call of the case names: this pattern before and after.
uint64_t untouchedSeed(uint64_t base, int rank, int tensor) {
  return mix64(~base ^ (uint64_t(rank) << 40) ^ (uint64_t(tensor) << 8) ^ 0x7577ull);
}

// numCtas of the config: the draw, within the SM cap of processes sharing a GPU (fake nodes: the
// CTAs of every process spin on each other and must be resident together).
int effectiveCtas(const rb::BucketSpec& s) {
  int n = s.numCtas;
  if (const int cap = smCap(); cap > 0) n = std::min(n > 0 ? n : 4, cap);
  return n;
}

// One bucket per local rank for the spec; destroyed collectively.
struct Buckets {
  std::vector<ncclEpBucket_t> b;
  explicit Buckets(const rb::BucketSpec& s) : b(size_t(nRanks()), nullptr) {
    ncclEpBucketConfig_t cfg = NCCL_EP_BUCKET_CONFIG_INITIALIZER;
    if (const int n = effectiveCtas(s); n > 0) cfg.numCtas = n;
    cfg.chunkBytes = s.chunkBytes;
    gpus().run([&](const RankContext& c) {
      EPX_CHECK_EP(ncclEpBucketCreate(c.comm, s.plan.data(), int(s.plan.size()), &cfg, &b[size_t(c.rank)]));
    });
  }
  ~Buckets() {
    try {
      gpus().run([&](const RankContext& c) {
        if (b[size_t(c.rank)]) ncclEpBucketDestroy(b[size_t(c.rank)]);
      });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ncclEpBucketDestroy: %s\n", e.what());
    }
  }
  Buckets(const Buckets&) = delete;
  Buckets& operator=(const Buckets&) = delete;
};

std::string asyncErrorOf(ncclEpBucket_t b) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpBucketGetAsyncError(b, &r, msg, sizeof(msg));
  return r == ncclSuccess ? std::string() : std::string(msg);
}

epx::ref::ReduceOptions optionsOf(const rb::BucketCall& call) {
  epx::ref::ReduceOptions o;
  if (!call.passOpts) return o;
  o.bf16Wire = call.bf16Wire;  // reduce-scatter, and the reduce-scatter half of all-reduce
  o.hasScale = call.hasScale;
  o.scale = call.scale;
  return o;
}

// Element j of the reduction of tensor t over every rank's input, by the reference (rank order).
uint32_t expectedBits(uint64_t base, int R, int t, size_t j, bool bf16Tensor, const epx::ref::ReduceOptions& o,
                      std::vector<std::vector<float>>& scratch) {
  scratch.resize(size_t(R));
  for (int r = 0; r < R; ++r) {
    const float f = patternFloat(inputSeed(base, r, t), j);
    scratch[size_t(r)].assign(1, bf16Tensor ? epx::ref::bf16ToFloat(epx::ref::floatToBf16(f)) : f);
  }
  const float sum = epx::ref::rankOrderSum(scratch, 0, o);
  if (bf16Tensor) return epx::ref::floatToBf16(sum);
  uint32_t u;
  std::memcpy(&u, &sum, 4);
  return u;
}

std::string at(int callIdx, const rb::BucketCall& call, int t) {
  return "call " + std::to_string(callIdx) + " (" + rb::opName(call.op) + ") tensor " + std::to_string(t);
}

// Checks rank r's result of tensor t (host copy `got`); "" when it matches.
std::string checkTensor(const rb::BucketSpec& s, const rb::BucketCase& c, int r, int R, int t, int callIdx,
                        const std::vector<uint8_t>& got) {
  const ncclEpBucketTensor_t& p = s.plan[size_t(t)];
  const size_t eb = size_t(rb::dtypeBytes(p.dtype)), count = p.count, shard = count / size_t(R);
  if (callIdx < 0) {
    const size_t k = firstPatternMismatch(got.data(), 0, got.size(), untouchedSeed(c.dataSeed, r, t));
    if (k < got.size()) return "tensor " + std::to_string(t) + " (named by no call) changed at byte " + std::to_string(k);
    return {};
  }
  const rb::BucketCall& call = c.calls[size_t(callIdx)];
  if (call.op == rb::kAllGather) {
    const size_t shardBytes = shard * eb;
    for (int owner = 0; owner < R; ++owner) {
      const uint64_t seed = inputSeed(c.dataSeed, owner, t);
      const size_t b = size_t(owner) * shardBytes, e = b + shardBytes;
      const size_t k = firstPatternMismatch(got.data(), b, e, seed);
      if (k < e)
        return at(callIdx, call, t) + ": byte " + std::to_string(k) + " (rank " + std::to_string(owner) + "'s shard) is " +
               std::to_string(got[k]) + ", expected " + std::to_string(patternByte(seed, k)) +
               (got[k] == kPoison ? " (poison)" : "");
    }
    return {};
  }
  const bool bf16 = p.dtype == ncclBfloat16;
  const epx::ref::ReduceOptions o = optionsOf(call);
  const size_t b = call.op == rb::kReduceScatter ? size_t(r) * shard : 0;
  const size_t e = call.op == rb::kReduceScatter ? b + shard : count;
  std::vector<std::vector<float>> scratch;
  for (size_t j = b; j < e; ++j) {
    uint32_t gotBits = 0;
    if (bf16) {
      uint16_t h;
      std::memcpy(&h, &got[j * 2], 2);
      gotBits = h;
    } else {
      std::memcpy(&gotBits, &got[j * 4], 4);
    }
    const uint32_t want = expectedBits(c.dataSeed, R, t, j, bf16, o, scratch);
    if (gotBits != want) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), ": element %zu (shard of rank %zu) has bits 0x%x, reference 0x%x", j, j / shard,
                    gotBits, want);
      return at(callIdx, call, t) + buf;
    }
  }
  return {};
}

// Runs one case on every local rank; "" when every rank's results matched (only local ranks'
// results are read: under fake nodes each process checks its own rank).
std::string runBucketCase(const rb::BucketSpec& s, const rb::BucketCase& c, const Buckets& bk) {
  const int R = nRanks(), n = int(s.plan.size());
  std::vector<int> callOf(size_t(n), -1), itemOf(size_t(n), -1);
  for (size_t k = 0; k < c.calls.size(); ++k)
    for (size_t i = 0; i < c.calls[k].tensors.size(); ++i) {
      callOf[size_t(c.calls[k].tensors[i])] = int(k);
      itemOf[size_t(c.calls[k].tensors[i])] = int(i);
    }
  std::vector<std::string> fails(static_cast<size_t>(R));
  gpus().run([&](const RankContext& ctx) {
    const int r = ctx.rank;
    ncclEpBucket_t bucket = bk.b[size_t(r)];
    std::string& fail = fails[size_t(r)];
    std::vector<char*> tensor(static_cast<size_t>(n)), data(static_cast<size_t>(n));
    std::vector<DevBuf> ext(static_cast<size_t>(n));
    size_t externalBytes = 0;
    for (int t = 0; t < n; ++t) {
      const ncclEpBucketTensor_t& p = s.plan[size_t(t)];
      const size_t bytes = p.count * size_t(rb::dtypeBytes(p.dtype)), shardBytes = bytes / size_t(R);
      void* tp = nullptr;
      EPX_CHECK_EP(ncclEpBucketGetTensor(bucket, t, &tp));
      tensor[size_t(t)] = data[size_t(t)] = static_cast<char*>(tp);
      const int k = callOf[size_t(t)];
      if (k < 0) {
        EPX_CHECK_CUDA(launchFillPattern(tp, bytes, untouchedSeed(c.dataSeed, r, t), ctx.stream));
        continue;
      }
      const rb::BucketCall& call = c.calls[size_t(k)];
      if (call.where[size_t(itemOf[size_t(t)])] == rb::kExternal) {
        ext[size_t(t)].reserve(bytes + 16 * size_t(c.externalOffset));
        data[size_t(t)] = ext[size_t(t)].as<char>() + 16 * c.externalOffset;
        EPX_CHECK_CUDA(cudaMemsetAsync(tp, kBucketPoison, bytes, ctx.stream));
        externalBytes += bytes;
      }
      char* d = data[size_t(t)];
      if (call.op == rb::kAllGather) {
        EPX_CHECK_CUDA(cudaMemsetAsync(d, kPoison, bytes, ctx.stream));
        EPX_CHECK_CUDA(launchFillPatternRange(d, size_t(r) * shardBytes, size_t(r + 1) * shardBytes,
                                              inputSeed(c.dataSeed, r, t), ctx.stream));
      } else {
        EPX_CHECK_CUDA(launchFillFloats(d, p.count, p.dtype == ncclBfloat16, inputSeed(c.dataSeed, r, t), ctx.stream));
      }
    }
    ncclEpBucketSession_t session = nullptr;
    if (c.session) EPX_CHECK_EP(ncclEpBucketSessionCreate(bucket, &session));
    // Every call back to back on the stream, no host synchronization between them.
    for (const rb::BucketCall& call : c.calls) {
      std::vector<ncclEpBucketItem_t> items;
      for (size_t i = 0; i < call.tensors.size(); ++i) {
        const int t = call.tensors[i];
        void* external = call.where[i] == rb::kExternal     ? static_cast<void*>(data[size_t(t)])
                         : call.where[i] == rb::kOwnPointer ? static_cast<void*>(tensor[size_t(t)])
                                                            : nullptr;
        items.push_back(ncclEpBucketItem_t{t, s.plan[size_t(t)].count, s.plan[size_t(t)].dtype, external});
      }
      const ncclEpBucketReduceOpts_t opts{call.bf16Wire ? ncclBfloat16 : ncclFloat32, call.hasScale ? 1 : 0, call.scale};
      const ncclEpBucketReduceOpts_t* o = call.passOpts ? &opts : nullptr;
      switch (call.op) {
        case rb::kAllGather:
          EPX_CHECK_EP(ncclEpBucketAllGather(bucket, items.data(), int(items.size()), session, ctx.stream));
          break;
        case rb::kReduceScatter:
          EPX_CHECK_EP(ncclEpBucketReduceScatter(bucket, items.data(), int(items.size()), o, session, ctx.stream));
          break;
        default:
          EPX_CHECK_EP(ncclEpBucketAllReduce(bucket, items.data(), int(items.size()), o, session, ctx.stream));
          break;
      }
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    if (session) {
      size_t staged = 0;
      EPX_CHECK_EP(ncclEpBucketSessionGetStagedBytes(session, &staged));
      EPX_CHECK_EP(ncclEpBucketSessionDestroy(session));
      if (staged != 2 * externalBytes)
        fail = "the session staged " + std::to_string(staged) + " bytes, expected " + std::to_string(2 * externalBytes) +
               " (external tensors in and out)";
    }
    for (int t = 0; t < n && fail.empty(); ++t) {
      const ncclEpBucketTensor_t& p = s.plan[size_t(t)];
      std::vector<uint8_t> got(p.count * size_t(rb::dtypeBytes(p.dtype)));
      EPX_CHECK_CUDA(cudaMemcpy(got.data(), data[size_t(t)], got.size(), cudaMemcpyDeviceToHost));
      fail = checkTensor(s, c, r, R, t, callOf[size_t(t)], got);
    }
    if (fail.empty()) fail = asyncErrorOf(bucket);
    if (!fail.empty()) fail = "rank " + std::to_string(r) + ": " + fail;
  });
  std::string all;
  for (int r : localRanks())
    if (!fails[size_t(r)].empty()) all += (all.empty() ? "" : "; ") + fails[size_t(r)];
  return all;
}

void tally(rnd::RandomRun& run, const rb::BucketSpec& s, const rb::BucketCase& c, int R) {
  run.feature("32 tensors", s.plan.size() == 32);
  run.feature("1 tensor", s.plan.size() == 1);
  run.feature("2+ calls back to back", c.calls.size() > 1);
  run.feature("chunk 64 KiB", s.chunkBytes == (uint64_t(64) << 10));
  run.feature("chunk 1 GiB", s.chunkBytes == (uint64_t(1) << 30));
  run.feature("session", c.session);
  for (const rb::BucketCall& call : c.calls) {
    run.feature(rb::opName(call.op));
    bool odd = false, oddBf16 = false, notMul8 = false;
    for (size_t i = 0; i < call.tensors.size(); ++i) {
      const ncclEpBucketTensor_t& p = s.plan[size_t(call.tensors[i])];
      const uint64_t shard = p.count / uint64_t(R);
      odd |= shard % 2 == 1;
      notMul8 |= shard % 8 != 0;
      oddBf16 |= shard % 2 == 1 && p.dtype == ncclBfloat16;
      if (call.op == rb::kAllGather) run.feature(std::string("all-gather ") + rb::dtypeName(p.dtype));
      run.feature("external item", call.where[i] == rb::kExternal);
      run.feature("own-pointer item", call.where[i] == rb::kOwnPointer);
    }
    const bool reduce = call.op != rb::kAllGather;
    const bool wire = call.passOpts && call.bf16Wire;
    run.feature("odd shard reduced", reduce && odd);
    run.feature("shard not a multiple of 8 reduced", reduce && notMul8);
    run.feature("BF16 wire", wire);
    run.feature("BF16 wire, odd shard", wire && odd);
    run.feature("BF16 all-reduce, odd shard", call.op == rb::kAllReduce && oddBf16);
    run.feature("scale", reduce && call.passOpts && call.hasScale);
    run.feature("opts NULL", reduce && !call.passOpts);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_bucket)

BOOST_AUTO_TEST_CASE(differential) {
  rnd::RandomRun run("random_bucket", rb::kCasesPerBucket);
  const uint64_t seed = run.seed();
  const int R = run.ranks();
  for (int grp = run.firstGroup(); grp < run.endGroup(); ++grp) {
    if (run.timeUp()) break;
    const rb::BucketSpec s = rb::drawBucket(seed, grp, R);
    std::unique_ptr<Buckets> bk;
    try {
      bk = std::make_unique<Buckets>(s);
    } catch (const std::exception& e) {
      run.reportFailure("to create bucket " + std::to_string(grp) + " {" + rb::describe(s, R) + "}", run.caseBegin(grp),
                        e.what());
      throw;
    }
    for (int i = run.caseBegin(grp); i < run.caseEnd(grp); ++i) {
      const rb::BucketCase c = rb::drawCase(seed, i, s, R);
      const std::string name = rb::describe(c, s, R);
      BOOST_TEST_MESSAGE("random_bucket " << name);
      const double start = run.elapsed();
      std::string why;
      try {
        why = runBucketCase(s, c, *bk);
      } catch (const std::exception& e) {
        run.reportFailure(name, i, e.what());
        throw;  // a call failed: the collective sequence may be out of step; stop here
      }
      if (!why.empty()) run.reportFailure(name, i, why);
      BOOST_TEST(why.empty(), name << ": " << why);
      run.count(why.empty(), run.elapsed() - start, name);
      tally(run, s, c, R);
      // A device-side timeout leaves the bucket unusable: a fresh one for the next case.
      bool broken = false;
      for (int r : localRanks()) broken |= !asyncErrorOf(bk->b[size_t(r)]).empty();
      if (gpus().anyRank(broken) && i + 1 < run.caseEnd(grp)) {
        bk.reset();
        bk = std::make_unique<Buckets>(s);
      }
    }
  }
  run.finish();
}

BOOST_AUTO_TEST_SUITE_END()
