// GPU tests of the bucket collectives (suite "bucket"): all-gather of several dtypes (byte-exact,
// also against ncclAllGather), reduce-scatter FP32 (FP32 or BF16 wire, with and without a scale)
// and all-reduce FP32 / BF16, bit-exact against the CPU reference (rank-order sums) and close to
// ncclReduceScatter / ncclAllReduce (whose summation order differs); every tensor of a bucket in
// one batched call; sizes from one element per rank to 64 MiB (not multiples of the GIN chunk);
// external tensors through a session; graph capture and replay; 1000 iterations; a peer that never
// arrives (timeout naming it); argument errors.
// Inputs are generated on the device from seeds and recomputed on the host. EPX_TEST_QUICK=1:
// largest tensor 4 MiB, 100 iterations instead of 1000, 10 replays instead of 50.
// EPX_BUCKET_LARGE_MIB=<n> adds an FP32 tensor of n MiB (e.g. 256) to the all-reduce case.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/bucket.h"
#include "epx/ref/bf16.h"
#include "epx/ref/bucket_ref.h"

using namespace epx::test;

namespace {

constexpr uint8_t kPoison = 0xa5;

int elemBytes(ncclDataType_t t) {
  switch (t) {
    case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclFloat32: return 4;
    case ncclInt64: return 8;
    default: return 0;
  }
}

// Elements per rank (shards): 1, odd, shards whose rows start off 16-byte alignment (1007, 1010:
// rank r's row of the tensor, the scratch area and the BF16 stage at r * shard elements), 64 Ki + 5,
// a few GIN chunks + 7 elements, and a large one: 8 per dtype, so four dtypes fill one bucket.
std::vector<size_t> shardCounts(int elem) {
  const size_t largeBytes = quick() ? (size_t(4) << 20) : (size_t(64) << 20);
  std::vector<size_t> s = {1, 3, 1000, 1007, 1010, 65536 + 5, ((size_t(2) << 20) * 2 + 28) / size_t(elem)};
  s.push_back(std::max<size_t>(1, largeBytes / size_t(elem) / size_t(nRanks())));
  return s;
}

struct Buckets {
  std::vector<ncclEpBucket_t> b;
  std::vector<ncclEpBucketTensor_t> plan;
  explicit Buckets(std::vector<ncclEpBucketTensor_t> p, const ncclEpBucketConfig_t* cfg = nullptr)
      : b(static_cast<size_t>(nRanks()), nullptr), plan(std::move(p)) {
    gpus().run([&](const RankContext& c) {
      EPX_CHECK_EP(ncclEpBucketCreate(c.comm, plan.data(), int(plan.size()), cfg, &b[size_t(c.rank)]));
    });
  }
  // Collective (run() starts with a barrier): no rank unmaps its window while a peer's kernel may
  // still store into it.
  ~Buckets() {
    try {
      gpus().run([&](const RankContext& c) { ncclEpBucketDestroy(b[size_t(c.rank)]); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ncclEpBucketDestroy: %s\n", e.what());
    }
  }
  char* tensor(int r, int i) const {
    void* p = nullptr;
    EPX_CHECK_EP(ncclEpBucketGetTensor(b[size_t(r)], i, &p));
    return static_cast<char*>(p);
  }
  size_t bytes(int i) const { return plan[size_t(i)].count * size_t(elemBytes(plan[size_t(i)].dtype)); }
  std::vector<ncclEpBucketItem_t> items() const {
    std::vector<ncclEpBucketItem_t> it;
    for (size_t i = 0; i < plan.size(); ++i) it.push_back(ncclEpBucketItem_t{int(i), plan[i].count, plan[i].dtype, nullptr});
    return it;
  }
};

std::string asyncErrorOf(ncclEpBucket_t b) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpBucketGetAsyncError(b, &r, msg, sizeof(msg));
  return r == ncclSuccess ? std::string() : std::string(msg);
}

uint64_t seedOf(uint64_t base, int rank, int tensor) { return mix64(base ^ (uint64_t(rank) << 48) ^ uint64_t(tensor)); }

// Host value of element j of rank r's input for tensor i (FP32, or BF16 bits widened).
float inputValue(uint64_t base, int r, int i, size_t j, bool bf16) {
  const float f = patternFloat(seedOf(base, r, i), j);
  return bf16 ? epx::ref::bf16ToFloat(epx::ref::floatToBf16(f)) : f;
}

// Expected element j of a reduction over every rank's inputs (the CPU reference's order).
float expectedSum(uint64_t base, int i, size_t j, bool bf16Tensor, const epx::ref::ReduceOptions& o) {
  thread_local std::vector<std::vector<float>> one;  // reused: no allocation per element
  if (one.size() != size_t(nRanks())) one.assign(size_t(nRanks()), std::vector<float>(1));
  for (int r = 0; r < nRanks(); ++r) one[size_t(r)][0] = inputValue(base, r, i, j, bf16Tensor);
  return epx::ref::rankOrderSum(one, 0, o);
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Fills every planned tensor of rank c.rank with its input (FP32 / BF16 floats, else bytes).
void fillInputs(const Buckets& bk, const RankContext& c, uint64_t base) {
  for (size_t i = 0; i < bk.plan.size(); ++i) {
    const auto& t = bk.plan[i];
    char* p = bk.tensor(c.rank, int(i));
    if (t.dtype == ncclFloat32 || t.dtype == ncclBfloat16)
      EPX_CHECK_CUDA(launchFillFloats(p, t.count, t.dtype == ncclBfloat16, seedOf(base, c.rank, int(i)), c.stream));
    else
      EPX_CHECK_CUDA(launchFillPattern(p, bk.bytes(int(i)), seedOf(base, c.rank, int(i)), c.stream));
  }
}

// Checks rank r's elements [b, e) of tensor i (host copy `got`) against the reference sum.
std::string checkSums(const std::vector<uint8_t>& got, uint64_t base, int i, bool bf16, size_t b, size_t e,
                      const epx::ref::ReduceOptions& o) {
  for (size_t j = b; j < e; ++j) {
    const float want = expectedSum(base, i, j, bf16, o);
    uint32_t gotBits, wantBits;
    if (bf16) {
      uint16_t h;
      std::memcpy(&h, &got[j * 2], 2);
      gotBits = h;
      wantBits = epx::ref::floatToBf16(want);
    } else {
      std::memcpy(&gotBits, &got[j * 4], 4);
      wantBits = bitsOf(want);
    }
    if (gotBits != wantBits)
      return "tensor " + std::to_string(i) + " element " + std::to_string(j) + ": bits " + std::to_string(gotBits) +
             ", reference " + std::to_string(wantBits);
  }
  return {};
}

std::vector<uint8_t> download(const void* p, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  EPX_CHECK_CUDA(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost));
  return v;
}

void reportFailures(const std::vector<std::string>& f) {
  for (int r : localRanks()) BOOST_TEST(f[size_t(r)] == "", "rank " << r << ": " << f[size_t(r)]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bucket)

// Every dtype and size in one bucket, all gathered in one call; byte-exact, and equal to
// ncclAllGather of the same shards.
BOOST_AUTO_TEST_CASE(all_gather_dtypes_sizes_batched) {
  const int R = nRanks();
  std::vector<ncclEpBucketTensor_t> plan;
  for (ncclDataType_t dt : {ncclUint8, ncclBfloat16, ncclFloat32, ncclInt64})
    for (size_t s : shardCounts(elemBytes(dt))) plan.push_back({s * size_t(R), dt});
  Buckets bk(plan);
  const uint64_t base = nextSeed();
  std::vector<std::string> f(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = f[size_t(c.rank)];
    for (size_t i = 0; i < plan.size(); ++i) {
      const size_t bytes = bk.bytes(int(i)), shard = bytes / size_t(R);
      char* t = bk.tensor(c.rank, int(i));
      EPX_CHECK_CUDA(cudaMemsetAsync(t, kPoison, bytes, c.stream));
      // Own shard: bytes [rank * shard, ...) of the pattern of (rank, tensor).
      DevBuf tmp;
      tmp.reserve(bytes);
      EPX_CHECK_CUDA(launchFillPattern(tmp.ptr(), bytes, seedOf(base, c.rank, int(i)), c.stream));
      EPX_CHECK_CUDA(cudaMemcpyAsync(t + c.rank * shard, tmp.as<char>() + c.rank * shard, shard, cudaMemcpyDeviceToDevice,
                                     c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    }
    const auto items = bk.items();
    EPX_CHECK_EP(ncclEpBucketAllGather(bk.b[size_t(c.rank)], items.data(), int(items.size()), nullptr, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    // NCCL's all-gather of the same shards (collective: every tensor on every rank, whatever failed).
    std::vector<DevBuf> viaNccl(plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      const size_t bytes = bk.bytes(int(i)), shard = bytes / size_t(R);
      viaNccl[i].reserve(bytes);
      EPX_CHECK_NCCL(ncclAllGather(bk.tensor(c.rank, int(i)) + c.rank * shard, viaNccl[i].ptr(), shard, ncclUint8, c.comm,
                                   c.stream));
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    for (size_t i = 0; i < plan.size() && fail.empty(); ++i) {
      const size_t bytes = bk.bytes(int(i)), shard = bytes / size_t(R);
      const char* t = bk.tensor(c.rank, int(i));
      const auto got = download(t, bytes);
      for (size_t k = 0; k < bytes && fail.empty(); ++k) {
        const int owner = int(k / shard);
        if (got[k] != patternByte(seedOf(base, owner, int(i)), k))
          fail = "tensor " + std::to_string(i) + " (" + std::to_string(bytes) + " bytes) byte " + std::to_string(k) +
                 " of rank " + std::to_string(owner) + "'s shard differs";
      }
      if (fail.empty() && download(viaNccl[i].ptr(), bytes) != got)
        fail = "tensor " + std::to_string(i) + " differs from ncclAllGather";
    }
    if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
  });
  reportFailures(f);
}

// Reduce-scatter of FP32 tensors: FP32 wire; BF16 wire with a scale of 1 / nRanks. Bit-exact
// against the reference; FP32 wire close to ncclReduceScatter.
BOOST_AUTO_TEST_CASE(reduce_scatter_fp32) {
  const int R = nRanks();
  std::vector<ncclEpBucketTensor_t> plan;
  for (size_t s : shardCounts(4)) plan.push_back({s * size_t(R), ncclFloat32});
  // The smallest GIN chunk (64 KiB): many chunks per transfer, each reduced as it arrives.
  ncclEpBucketConfig_t cfg = NCCL_EP_BUCKET_CONFIG_INITIALIZER;
  cfg.chunkBytes = size_t(64) << 10;
  Buckets bk(plan, &cfg);
  for (int variant = 0; variant < 2; ++variant) {
    const bool bf16Wire = variant == 1;
    epx::ref::ReduceOptions o;
    o.bf16Wire = bf16Wire;
    o.hasScale = bf16Wire;
    o.scale = 1.0f / float(R);
    const ncclEpBucketReduceOpts_t opts{bf16Wire ? ncclBfloat16 : ncclFloat32, o.hasScale ? 1 : 0, o.scale};
    const uint64_t base = nextSeed();
    BOOST_TEST_MESSAGE("reduce-scatter, " << (bf16Wire ? "BF16 wire, scale 1/nRanks" : "FP32 wire"));
    std::vector<std::string> f(static_cast<size_t>(R));
    gpus().run([&](const RankContext& c) {
      std::string& fail = f[size_t(c.rank)];
      fillInputs(bk, c, base);
      std::vector<DevBuf> ncclOut(plan.size()), ncclIn(plan.size());
      if (!bf16Wire)  // NCCL's reduce-scatter of copies of the same inputs
        for (size_t i = 0; i < plan.size(); ++i) {
          ncclIn[i].reserve(bk.bytes(int(i)));
          ncclOut[i].reserve(bk.bytes(int(i)) / size_t(R));
          EPX_CHECK_CUDA(cudaMemcpyAsync(ncclIn[i].ptr(), bk.tensor(c.rank, int(i)), bk.bytes(int(i)),
                                         cudaMemcpyDeviceToDevice, c.stream));
          EPX_CHECK_NCCL(ncclReduceScatter(ncclIn[i].ptr(), ncclOut[i].ptr(), plan[i].count / size_t(R), ncclFloat32,
                                           ncclSum, c.comm, c.stream));
        }
      const auto items = bk.items();
      EPX_CHECK_EP(ncclEpBucketReduceScatter(bk.b[size_t(c.rank)], items.data(), int(items.size()), &opts, nullptr, c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      for (size_t i = 0; i < plan.size() && fail.empty(); ++i) {
        const size_t shard = plan[i].count / size_t(R);
        const auto got = download(bk.tensor(c.rank, int(i)), bk.bytes(int(i)));
        fail = checkSums(got, base, int(i), false, size_t(c.rank) * shard, size_t(c.rank + 1) * shard, o);
        if (fail.empty() && !bf16Wire) {
          const auto ref = download(ncclOut[i].ptr(), shard * 4);
          for (size_t j = 0; j < shard; ++j) {
            float a, b;
            std::memcpy(&a, &got[(size_t(c.rank) * shard + j) * 4], 4);
            std::memcpy(&b, &ref[j * 4], 4);
            double mag = 0;
            for (int r = 0; r < R; ++r) mag += std::fabs(inputValue(base, r, int(i), size_t(c.rank) * shard + j, false));
            if (std::fabs(double(a) - double(b)) > mag * R * 1.2e-7) {
              fail = "tensor " + std::to_string(i) + " element " + std::to_string(j) + ": epx " + std::to_string(a) +
                     ", ncclReduceScatter " + std::to_string(b);
              break;
            }
          }
        }
      }
      if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
    });
    reportFailures(f);
  }
}

// All-reduce in place of FP32 and BF16 tensors in one call: bit-exact against the reference on
// every rank; FP32 close to ncclAllReduce.
BOOST_AUTO_TEST_CASE(all_reduce_fp32_bf16) {
  const int R = nRanks();
  std::vector<ncclEpBucketTensor_t> plan;
  for (ncclDataType_t dt : {ncclFloat32, ncclBfloat16})
    for (size_t s : shardCounts(elemBytes(dt))) plan.push_back({s * size_t(R), dt});
  if (const char* v = std::getenv("EPX_BUCKET_LARGE_MIB"); v && std::atoi(v) > 0)
    plan.push_back({(size_t(std::atoi(v)) << 20) / 4 / size_t(R) * size_t(R), ncclFloat32});
  Buckets bk(plan);
  const uint64_t base = nextSeed();
  std::vector<std::string> f(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = f[size_t(c.rank)];
    fillInputs(bk, c, base);
    std::vector<DevBuf> viaNccl(plan.size());
    for (size_t i = 0; i < plan.size(); ++i)
      if (plan[i].dtype == ncclFloat32) {
        viaNccl[i].reserve(bk.bytes(int(i)));
        EPX_CHECK_NCCL(ncclAllReduce(bk.tensor(c.rank, int(i)), viaNccl[i].ptr(), plan[i].count, ncclFloat32, ncclSum,
                                     c.comm, c.stream));
      }
    const auto items = bk.items();
    EPX_CHECK_EP(ncclEpBucketAllReduce(bk.b[size_t(c.rank)], items.data(), int(items.size()), nullptr, nullptr, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    for (size_t i = 0; i < plan.size() && fail.empty(); ++i) {
      const bool bf16 = plan[i].dtype == ncclBfloat16;
      const auto got = download(bk.tensor(c.rank, int(i)), bk.bytes(int(i)));
      // Bit-exact everywhere for tensors up to 1 Mi elements, else a strided sample of them.
      const size_t n = plan[i].count, step = n > (size_t(1) << 20) ? 97 : 1;
      for (size_t j = 0; j < n && fail.empty(); j += step)
        fail = checkSums(got, base, int(i), bf16, j, j + 1, epx::ref::ReduceOptions{});
      if (fail.empty() && !bf16) {
        const auto ref = download(viaNccl[i].ptr(), bk.bytes(int(i)));
        for (size_t j = 0; j < n; j += step) {
          float a, b;
          std::memcpy(&a, &got[j * 4], 4);
          std::memcpy(&b, &ref[j * 4], 4);
          if (std::fabs(double(a) - double(b)) > 1e-4 * (1.0 + std::fabs(double(b))) * R) {
            fail = "tensor " + std::to_string(i) + " element " + std::to_string(j) + ": epx " + std::to_string(a) +
                   ", ncclAllReduce " + std::to_string(b);
            break;
          }
        }
      }
    }
    if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
  });
  reportFailures(f);
}

// Tensors outside the bucket go through a session (staged in, result copied back); without a
// session the call is refused.
BOOST_AUTO_TEST_CASE(external_tensors_with_session) {
  const int R = nRanks();
  const std::vector<ncclEpBucketTensor_t> plan = {{size_t(R) * 1000, ncclFloat32}, {size_t(R) * 77, ncclBfloat16}};
  Buckets bk(plan);
  const uint64_t base = nextSeed();
  std::vector<std::string> f(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = f[size_t(c.rank)];
    std::vector<DevBuf> ext(plan.size());
    std::vector<ncclEpBucketItem_t> items = bk.items();
    for (size_t i = 0; i < plan.size(); ++i) {
      ext[i].reserve(bk.bytes(int(i)));
      EPX_CHECK_CUDA(launchFillFloats(ext[i].ptr(), plan[i].count, plan[i].dtype == ncclBfloat16,
                                      seedOf(base, c.rank, int(i)), c.stream));
      EPX_CHECK_CUDA(cudaMemsetAsync(bk.tensor(c.rank, int(i)), 0, bk.bytes(int(i)), c.stream));
      items[i].external = ext[i].ptr();
    }
    const ncclResult_t refused = ncclEpBucketAllReduce(bk.b[size_t(c.rank)], items.data(), 2, nullptr, nullptr, c.stream);
    const std::string why = ncclEpGetLastError();
    if (refused != ncclInvalidArgument || why.find("lives outside the bucket") == std::string::npos)
      fail = "no session: got " + std::to_string(int(refused)) + " " + why;
    ncclEpBucketSession_t s = nullptr;
    EPX_CHECK_EP(ncclEpBucketSessionCreate(bk.b[size_t(c.rank)], &s));
    EPX_CHECK_EP(ncclEpBucketAllReduce(bk.b[size_t(c.rank)], items.data(), 2, nullptr, s, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    size_t staged = 0;
    EPX_CHECK_EP(ncclEpBucketSessionGetStagedBytes(s, &staged));
    EPX_CHECK_EP(ncclEpBucketSessionDestroy(s));
    if (fail.empty() && staged != 2 * (bk.bytes(0) + bk.bytes(1))) fail = "staged " + std::to_string(staged) + " bytes";
    for (size_t i = 0; i < plan.size() && fail.empty(); ++i)
      fail = checkSums(download(ext[i].ptr(), bk.bytes(int(i))), base, int(i), plan[i].dtype == ncclBfloat16, 0,
                       plan[i].count, epx::ref::ReduceOptions{});
    if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
  });
  reportFailures(f);
}

// An all-reduce and an all-gather captured once, replayed with new inputs each time.
BOOST_AUTO_TEST_CASE(graph_capture_replay) {
  const int R = nRanks();
  const int replays = quick() ? 10 : 50;
  const std::vector<ncclEpBucketTensor_t> plan = {{size_t(R) * 4099, ncclFloat32}, {size_t(R) * 333, ncclUint8}};
  Buckets bk(plan);
  const uint64_t base0 = nextSeed();
  std::vector<std::string> f(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = f[size_t(c.rank)];
    const ncclEpBucketItem_t ar{0, plan[0].count, ncclFloat32, nullptr}, ag{1, plan[1].count, ncclUint8, nullptr};
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    const ncclResult_t r1 = ncclEpBucketAllReduce(bk.b[size_t(c.rank)], &ar, 1, nullptr, nullptr, c.stream);
    const ncclResult_t r2 = ncclEpBucketAllGather(bk.b[size_t(c.rank)], &ag, 1, nullptr, c.stream);
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &graph));
    if (r1 != ncclSuccess || r2 != ncclSuccess) throw std::runtime_error(std::string("capture: ") + ncclEpGetLastError());
    EPX_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    const size_t shard1 = plan[1].count / size_t(R);
    for (int rep = 0; rep < replays; ++rep) {  // every replay on every rank (collective), first failure kept
      const uint64_t base = mix64(base0 + uint64_t(rep));
      EPX_CHECK_CUDA(launchFillFloats(bk.tensor(c.rank, 0), plan[0].count, false, seedOf(base, c.rank, 0), c.stream));
      EPX_CHECK_CUDA(launchFillPattern(bk.tensor(c.rank, 1), plan[1].count, seedOf(base, c.rank, 1), c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(exec, c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      if (!fail.empty()) continue;
      fail = checkSums(download(bk.tensor(c.rank, 0), bk.bytes(0)), base, 0, false, 0, plan[0].count,
                       epx::ref::ReduceOptions{});
      const auto got = download(bk.tensor(c.rank, 1), bk.bytes(1));
      for (size_t k = 0; k < got.size() && fail.empty(); ++k)
        if (got[k] != patternByte(seedOf(base, int(k / shard1), 1), k))
          fail = "all-gather byte " + std::to_string(k) + " differs";
      if (!fail.empty()) fail = "replay " + std::to_string(rep) + ": " + fail;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
  });
  reportFailures(f);
}

// 1000 all-reduces of a small FP32 tensor, new inputs each time, every result kept and checked.
BOOST_AUTO_TEST_CASE(many_iterations) {
  const int R = nRanks();
  const int iters = quick() ? 100 : 1000;
  const size_t count = size_t(R) * 67;
  Buckets bk({{count, ncclFloat32}});
  const uint64_t base0 = nextSeed();
  std::vector<std::string> f(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = f[size_t(c.rank)];
    DevBuf results;
    results.reserve(count * 4 * size_t(iters));
    const ncclEpBucketItem_t it{0, count, ncclFloat32, nullptr};
    for (int i = 0; i < iters; ++i) {
      EPX_CHECK_CUDA(launchFillFloats(bk.tensor(c.rank, 0), count, false, seedOf(mix64(base0 + uint64_t(i)), c.rank, 0),
                                      c.stream));
      EPX_CHECK_EP(ncclEpBucketAllReduce(bk.b[size_t(c.rank)], &it, 1, nullptr, nullptr, c.stream));
      EPX_CHECK_CUDA(cudaMemcpyAsync(results.as<char>() + size_t(i) * count * 4, bk.tensor(c.rank, 0), count * 4,
                                     cudaMemcpyDeviceToDevice, c.stream));
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    const auto all = download(results.ptr(), count * 4 * size_t(iters));
    for (int i = 0; i < iters && fail.empty(); ++i) {
      std::vector<uint8_t> one(all.begin() + long(size_t(i) * count * 4), all.begin() + long(size_t(i + 1) * count * 4));
      fail = checkSums(one, mix64(base0 + uint64_t(i)), 0, false, 0, count, epx::ref::ReduceOptions{});
      if (!fail.empty()) fail = "iteration " + std::to_string(i) + ": " + fail;
    }
    if (fail.empty()) fail = asyncErrorOf(bk.b[size_t(c.rank)]);
  });
  reportFailures(f);
}

// Only rank 0 calls the all-gather: it times out naming a peer that never arrived, and the bucket
// then refuses work on rank 0.
BOOST_AUTO_TEST_CASE(timeout_names_a_peer, *boost::unit_test::precondition(needsPeers)) {
  const int R = nRanks();
  ncclEpBucketConfig_t cfg = NCCL_EP_BUCKET_CONFIG_INITIALIZER;
  cfg.timeoutMs = 300;
  Buckets bk({{size_t(R) * 256, ncclFloat32}}, &cfg);
  std::string err, refused;
  gpus().run([&](const RankContext& c) {
    if (c.rank != 0) return;
    const ncclEpBucketItem_t it{0, size_t(R) * 256, ncclFloat32, nullptr};
    EPX_CHECK_EP(ncclEpBucketAllGather(bk.b[0], &it, 1, nullptr, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    err = asyncErrorOf(bk.b[0]);
    const ncclResult_t r = ncclEpBucketAllGather(bk.b[0], &it, 1, nullptr, c.stream);
    refused = std::to_string(int(r)) + ":" + ncclEpGetLastError();
  });
  if (isLocal(0)) {
    BOOST_TEST(err.find("rank 0: timed out after 300 ms in bucket collective start waiting for peer rank ") == 0u, err);
    BOOST_TEST(err.find("waiting for peer rank 0 ") == std::string::npos, err);
    BOOST_TEST(refused ==
               "6:ncclEpBucketAllGather: the bucket had a device-side timeout (ncclEpBucketGetAsyncError); destroy it");
  }
}

// Bad calls fail before launch with the reason.
BOOST_AUTO_TEST_CASE(argument_errors) {
  const int R = nRanks();
  Buckets bk({{size_t(R) * 64, ncclFloat32}, {size_t(R) * 64, ncclInt32}});
  std::vector<std::vector<std::string>> msgs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpBucket_t b = bk.b[size_t(c.rank)];
    auto err = [&](ncclResult_t r) { msgs[size_t(c.rank)].push_back(std::to_string(int(r)) + ":" + ncclEpGetLastError()); };
    ncclEpBucketItem_t it{1, size_t(R) * 64, ncclInt32, nullptr};
    err(ncclEpBucketReduceScatter(b, &it, 1, nullptr, nullptr, c.stream));
    it = {0, size_t(R) * 32, ncclFloat32, nullptr};
    err(ncclEpBucketAllGather(b, &it, 1, nullptr, c.stream));
    it = {2, size_t(R) * 64, ncclFloat32, nullptr};
    err(ncclEpBucketAllGather(b, &it, 1, nullptr, c.stream));
    void* p = nullptr;
    err(ncclEpBucketGetTensor(b, 5, &p));
    const ncclEpBucketTensor_t odd{size_t(R) * 64 + 1, ncclFloat32};
    ncclEpBucket_t none = nullptr;
    if (R > 1) err(ncclEpBucketCreate(c.comm, &odd, 1, nullptr, &none));  // fails before any collective step
  });
  for (int r : localRanks()) {
    const auto& m = msgs[size_t(r)];
    BOOST_TEST_REQUIRE(m.size() >= 4u);
    BOOST_TEST(m[0] == "4:ncclEpBucketReduceScatter: item 0: reduce-scatter takes ncclFloat32 tensors; tensor 1 has dtype 2");
    BOOST_TEST(m[1] == "4:ncclEpBucketAllGather: item 0: count " + std::to_string(R * 32) + " does not match tensor 0's planned " +
                           std::to_string(R * 64));
    BOOST_TEST(m[2] == "4:ncclEpBucketAllGather: item 0: tensor 2 is not in the plan (0 .. 1)");
    BOOST_TEST(m[3] == "4:ncclEpBucketGetTensor: tensor 5 is not in the plan (0 .. 1)");
    if (R > 1)
      BOOST_TEST(m[4] == "4:ncclEpBucketCreate: tensor 0 has count " + std::to_string(R * 64 + 1) + ", not a multiple of the " +
                             std::to_string(R) + " ranks (every rank holds an equal shard)");
  }
}

BOOST_AUTO_TEST_SUITE_END()
