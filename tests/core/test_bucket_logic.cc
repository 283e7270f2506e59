// CPU tests of the buckets' pure logic: plan checks, window layout, GIN put counts, call argument
// checks, agreement, async-error words, and the CPU reference's summation order.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "core/async_error.h"
#include "core/coll_config.h"
#include "epx/device/bucket_layout.h"
#include "epx/ref/bucket_ref.h"

using namespace epx;

namespace {
std::vector<dev::BucketTensorPlan> planOf(const std::vector<BucketTensorSpec>& t, int nRanks) {
  std::vector<dev::BucketTensorPlan> p;
  BOOST_REQUIRE(checkBucketPlan(t.data(), int(t.size()), nRanks, &p) == "");
  return p;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(bucket_logic)

BOOST_AUTO_TEST_CASE(plan_checks) {
  std::vector<dev::BucketTensorPlan> p;
  std::vector<BucketTensorSpec> t = {{1024, ncclFloat32}, {8, ncclBfloat16}, {12, ncclInt8}};
  BOOST_TEST(checkBucketPlan(t.data(), 3, 4, &p) == "");
  BOOST_TEST_REQUIRE(p.size() == 3u);
  BOOST_TEST(p[0].elem == dev::kElemF32);
  BOOST_TEST(p[0].elemBytes == 4);
  BOOST_TEST(p[1].elem == dev::kElemBf16);
  BOOST_TEST(p[2].elem == dev::kElemOther);
  BOOST_TEST(p[2].elemBytes == 1);
  BOOST_TEST(checkBucketPlan(t.data(), 3, 8, &p) ==
             "tensor 2 has count 12, not a multiple of the 8 ranks (every rank holds an equal shard)");
  BOOST_TEST(checkBucketPlan(t.data(), 0, 4, &p) == "numTensors 0 is not in 1 .. 32");
  BOOST_TEST(checkBucketPlan(t.data(), 33, 4, &p) == "numTensors 33 is not in 1 .. 32");
  BOOST_TEST(checkBucketPlan(nullptr, 1, 4, &p) == "tensors is NULL");
  t[1].count = 0;
  BOOST_TEST(checkBucketPlan(t.data(), 3, 4, &p) == "tensor 1 has count 0");
  t[1] = {8, ncclDataType_t(99)};
  BOOST_TEST(checkBucketPlan(t.data(), 3, 4, &p) == "tensor 1 has an unknown dtype 99");
  BOOST_TEST(dtypeBytes(ncclFloat64) == 8);
  BOOST_TEST(dtypeBytes(ncclFloat16) == 2);
  BOOST_TEST(dtypeBytes(ncclFloat8e4m3) == 1);
}

BOOST_AUTO_TEST_CASE(config) {
  BucketConfig c;
  BOOST_TEST(normalizeBucketConfig(BucketConfigRequest{}, &c) == "");  // nothing set: defaults
  BOOST_TEST(c.numCtas == 4);
  BOOST_TEST(c.timeoutMs == 10000);
  BOOST_TEST(c.chunkBytes == uint64_t(2) << 20);
  BucketConfigRequest in;
  in.numCtas = 16;
  BOOST_TEST(normalizeBucketConfig(in, &c) == "");
  BOOST_TEST(c.numCtas == 16);
  in.numCtas = 0;
  BOOST_TEST(normalizeBucketConfig(in, &c) == "numCtas 0 is not in 1 .. 32");
  in.numCtas = kUnsetInt;
  in.timeoutMs = -5;
  BOOST_TEST(normalizeBucketConfig(in, &c) == "timeoutMs -5 must be >= 1");
  in.timeoutMs = kUnsetInt;
  in.chunkBytes = size_t(8) << 20;
  BOOST_TEST(normalizeBucketConfig(in, &c) == "");
  BOOST_TEST(c.chunkBytes == uint64_t(8) << 20);
  in.chunkBytes = 1000;
  BOOST_TEST(normalizeBucketConfig(in, &c) ==
             "chunkBytes 1000 is not a multiple of 16 in 65536 .. 1073741824 (0 = default 2097152)");
}

BOOST_AUTO_TEST_CASE(window_layout) {
  const std::vector<BucketTensorSpec> t = {{1000, ncclFloat32}, {6, ncclBfloat16}, {30, ncclUint8}};
  const auto p = planOf(t, 2);
  const dev::BucketLayout nv = dev::layoutBucket(p.data(), 3, 2, false);
  BOOST_TEST(nv.flags == 0u);
  BOOST_TEST(nv.t[0].offset == dev::kBucketTensorAlign);  // after the flags (40 bytes)
  BOOST_TEST(nv.t[0].shard == 500u);
  BOOST_TEST(nv.t[1].offset == nv.t[0].offset + 4096u);   // 4000 bytes, 256-aligned
  BOOST_TEST(nv.t[2].offset == nv.t[1].offset + 256u);    // 12 bytes, 256-aligned
  BOOST_TEST(nv.t[0].scratch == nv.t[2].offset + 256u);   // scratch after every tensor
  BOOST_TEST(nv.t[1].scratch == nv.t[0].scratch + 4096u);
  BOOST_TEST(nv.t[2].scratch == 0u);                      // not reducible
  BOOST_TEST(nv.t[0].stage == 0u);                        // no network peers
  BOOST_TEST(nv.totalBytes % dev::kWindowTotalAlign == 0u);
  const dev::BucketLayout net = dev::layoutBucket(p.data(), 3, 2, true);
  BOOST_TEST(net.t[0].stage == net.t[1].scratch + 256u);  // BF16 [2][500] staging of the FP32 tensor
  BOOST_TEST(net.t[1].stage == 0u);
  BOOST_TEST(net.totalBytes >= net.t[0].stage + 2000u);
  for (int i = 0; i < 3; ++i) BOOST_TEST(net.t[i].offset % dev::kBucketTensorAlign == 0u);
}

BOOST_AUTO_TEST_CASE(transfers_and_gin_puts) {
  const uint64_t big = 3 * dev::kBucketDefaultChunkBytes / 4 * 4 + 4;  // a few chunks, not a multiple of the chunk
  const std::vector<BucketTensorSpec> t = {{big / 4 * 2, ncclFloat32}, {2, ncclBfloat16}};
  const auto p = planOf(t, 2);
  const dev::BucketLayout l = dev::layoutBucket(p.data(), 2, 2, true);
  const uint64_t shardBytes = big / 4 * 4;  // FP32 shard
  BOOST_TEST(dev::bucketTransferBytes(l.t[0], dev::kBucketAllGather, false) == shardBytes);
  BOOST_TEST(dev::bucketTransferBytes(l.t[0], dev::kBucketReduceScatter, false) == shardBytes);
  BOOST_TEST(dev::bucketTransferBytes(l.t[0], dev::kBucketReduceScatter, true) == shardBytes / 2);
  BOOST_TEST(dev::bucketTransferBytes(l.t[1], dev::kBucketReduceScatter, false) == 2u);
  const uint32_t fp32Puts = uint32_t(dev::chunksOf(shardBytes, dev::kBucketDefaultChunkBytes));
  BOOST_TEST(fp32Puts == 4u);
  BOOST_TEST(dev::bucketGinPutsPerPeer(l.t, 2, dev::kBucketAllGather, false, dev::kBucketDefaultChunkBytes) == fp32Puts + 1u);
  // Reduce-scatter with the BF16 wire: the ~3 MiB transfer converted from FP32 goes as its first
  // 2 MiB chunk in 3 ramped puts and its last ~1 MiB chunk in 3 tapered puts; the 2-byte BF16 one
  // is neither (below kTaperMinBytes, and not converted). FP32 wire: tapered only.
  BOOST_TEST(dev::bucketGinPutsPerPeer(l.t, 2, dev::kBucketReduceScatter, true, dev::kBucketDefaultChunkBytes) ==
             uint32_t(dev::chunksOf(shardBytes / 2, dev::kBucketDefaultChunkBytes)) + 2u + 2u + 1u);
  BOOST_TEST(dev::bucketPutChunks(l.t[0], dev::kBucketReduceScatter, true, dev::kBucketDefaultChunkBytes).ramped());
  BOOST_TEST(!dev::bucketPutChunks(l.t[0], dev::kBucketReduceScatter, false, dev::kBucketDefaultChunkBytes).ramped());
  BOOST_TEST(!dev::bucketPutChunks(l.t[1], dev::kBucketReduceScatter, true, dev::kBucketDefaultChunkBytes).ramped());
  BOOST_TEST(!dev::bucketPutChunks(l.t[0], dev::kBucketAllGather, false, dev::kBucketDefaultChunkBytes).ramped());
  // Another chunk size (ncclEpBucketConfig_t.chunkBytes): 64 KiB chunks of the same transfers.
  const uint64_t k64 = dev::kGinMinChunkBytes;
  BOOST_TEST(dev::bucketGinPutsPerPeer(l.t, 2, dev::kBucketAllGather, false, k64) ==
             uint32_t(dev::chunksOf(shardBytes, k64)) + 1u);
  BOOST_TEST(dev::chunksOf(shardBytes, k64) == 97u);  // 96 whole chunks and 4 bytes
}

// Reduce-scatter over GIN reduces put by put: the puts' element ranges tile the shard in order
// (every element once, whatever the shard, wire width or tail), and the arrival target of each put
// counts the earlier tensors' puts and this one's predecessors.
BOOST_AUTO_TEST_CASE(reduce_chunks_tile_the_shard) {
  for (const uint64_t C : {dev::kBucketDefaultChunkBytes, dev::kGinMinChunkBytes, uint64_t(4) << 20})
  for (const uint64_t wire : {uint64_t(2), uint64_t(4)})
    for (const bool taper : {false, true})
    for (const bool ramp : {false, true})
    for (const uint64_t shard : {uint64_t(0), uint64_t(1), uint64_t(8), C / wire - 8, C / wire, C / wire + 8,
                                 5 * C / wire + 4, 5 * C / wire + 3, uint64_t(64) << 20 >> 2}) {
      const uint64_t bytes = shard * wire;
      const dev::PutChunks puts{bytes, C, taper, ramp};
      uint64_t next = 0;
      for (uint64_t ch = 0; ch < puts.count(); ++ch) {
        const dev::ByteRange e = dev::bucketChunkElems(puts, wire, ch);
        BOOST_TEST(e.begin == next);
        BOOST_TEST(e.end > e.begin);
        BOOST_TEST((e.end - e.begin) * wire == puts.range(ch).size());
        BOOST_TEST(puts.range(ch).size() <= C);
        BOOST_TEST(puts.range(ch).begin % dev::kVecBytes == 0u);  // whole vectors from the transfer's start
        if (shard % 8 == 0) BOOST_TEST(e.begin % 4 == 0u);  // whole 4-element vectors (reduceElems)
        next = e.end;
      }
      BOOST_TEST(next == shard,
                 "chunk " << C << " wire " << wire << " shard " << shard << " taper " << taper << " ramp " << ramp);
      // Without the taper and the ramp: chunkRange's chunks; the taper adds two puts when the last
      // chunk is big enough, the ramp two when there are two chunks or more and they are big enough.
      const uint64_t whole = dev::chunksOf(bytes, C);
      const uint64_t last = bytes == 0 ? 0 : bytes - (whole - 1) * C;
      const bool ramped = ramp && whole >= 2 && C >= dev::kTaperMinBytes;
      BOOST_TEST(puts.count() == whole + (taper && last >= dev::kTaperMinBytes ? 2u : 0u) + (ramped ? 2u : 0u));
      if (ramped) {  // a quarter, a quarter, then the rest of the first chunk
        BOOST_TEST(puts.range(0).size() == C / 4);
        BOOST_TEST(puts.range(1).size() == C / 4);
        BOOST_TEST(puts.range(2).end == C);
      }
      if (!taper && !ramp)
        for (uint64_t ch = 0; ch < puts.count(); ++ch)
          BOOST_TEST(puts.range(ch).begin == dev::chunkRange(bytes, C, ch).begin);
    }
  // 2 MiB chunks of a 16 MiB transfer, tapered: 7 whole chunks, then 1 MiB, 512 KiB, 512 KiB.
  const uint64_t M = uint64_t(1) << 20;
  const dev::PutChunks t16{16 * M, 2 * M, true};
  BOOST_TEST(t16.count() == 10u);
  BOOST_TEST(t16.range(6).size() == 2 * M);
  BOOST_TEST(t16.range(7).begin == 14 * M);
  BOOST_TEST(t16.range(7).size() == M);
  BOOST_TEST(t16.range(8).size() == M / 2);
  BOOST_TEST(t16.range(9).size() == M / 2);
  BOOST_TEST(t16.range(9).end == 16 * M);
  // A last chunk below kTaperMinBytes stays whole: 2 MiB + 100 KiB.
  BOOST_TEST((dev::PutChunks{2 * M + 100 * 1024, 2 * M, true}.count()) == 2u);
  BOOST_TEST(dev::bucketChunkTarget(0, 0) == 1u);
  BOOST_TEST(dev::bucketChunkTarget(4, 0) == 5u);
  BOOST_TEST(dev::bucketChunkTarget(4, 2) == 7u);
}

BOOST_AUTO_TEST_CASE(call_checks) {
  const std::vector<BucketTensorSpec> plan = {{64, ncclFloat32}, {64, ncclBfloat16}, {64, ncclInt32}};
  alignas(16) static char t0[256], t1[128], t2[256], ext[512];
  const char* ptrs[3] = {t0, t1, t2};
  const BucketView v{plan.data(), 3, ptrs};
  auto item = [](int t, size_t count, ncclDataType_t dt, void* ext = nullptr) {
    return BucketItemSpec{t, count, dt, ext};
  };
  std::vector<BucketItemSpec> it = {item(0, 64, ncclFloat32), item(2, 64, ncclInt32)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 2, false, std::nullopt) == "");
  BOOST_TEST(checkBucketItems(v, BucketCall::ReduceScatter, it.data(), 2, false, std::nullopt) ==
             "item 1: reduce-scatter takes ncclFloat32 tensors; tensor 2 has dtype 2");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllReduce, it.data(), 2, false, std::nullopt) ==
             "item 1: all-reduce takes ncclFloat32 or ncclBfloat16 tensors; tensor 2 has dtype 2");
  it = {item(0, 64, ncclFloat32), item(1, 64, ncclBfloat16)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllReduce, it.data(), 2, false, std::nullopt) == "");
  BOOST_TEST(checkBucketItems(v, BucketCall::ReduceScatter, it.data(), 2, false, std::nullopt) ==
             "item 1: reduce-scatter takes ncclFloat32 tensors; tensor 1 has dtype 9");
  it = {item(0, 64, ncclFloat32), item(0, 64, ncclFloat32)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 2, false, std::nullopt) ==
             "item 1: tensor 0 appears twice in one call");
  it = {item(3, 64, ncclFloat32)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, false, std::nullopt) ==
             "item 0: tensor 3 is not in the plan (0 .. 2)");
  it = {item(0, 32, ncclFloat32)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, false, std::nullopt) ==
             "item 0: count 32 does not match tensor 0's planned 64");
  it = {item(0, 64, ncclBfloat16)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, false, std::nullopt) ==
             "item 0: dtype 9 does not match tensor 0's planned 7");
  it = {item(0, 64, ncclFloat32, ext)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, false, std::nullopt) ==
             "item 0: tensor 0 lives outside the bucket (external pointer) but the call has no session "
             "(ncclEpBucketSessionCreate)");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, true, std::nullopt) == "");
  it = {item(0, 64, ncclFloat32, ext + 4)};
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, true, std::nullopt) ==
             "item 0: external pointer is not 16-byte aligned");
  it = {item(0, 64, ncclFloat32, t0)};  // the bucket tensor itself: in place, no session needed
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 1, false, std::nullopt) == "");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, it.data(), 0, false, std::nullopt) ==
             "numItems 0 is not in 1 .. 3 (the bucket's tensors)");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllGather, nullptr, 1, false, std::nullopt) == "items is NULL");
  std::optional<ncclDataType_t> o = ncclFloat16;
  it = {item(0, 64, ncclFloat32)};
  BOOST_TEST(checkBucketItems(v, BucketCall::ReduceScatter, it.data(), 1, false, o) ==
             "opts->wireType must be ncclFloat32 or ncclBfloat16");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllReduce, it.data(), 1, false, o) ==
             "opts->wireType must be ncclFloat32 or ncclBfloat16");
  o = ncclBfloat16;
  BOOST_TEST(checkBucketItems(v, BucketCall::ReduceScatter, it.data(), 1, false, o) == "");
  BOOST_TEST(checkBucketItems(v, BucketCall::AllReduce, it.data(), 1, false, o) == "");
}

BOOST_AUTO_TEST_CASE(agreement) {
  const std::vector<BucketTensorSpec> plan = {{64, ncclFloat32}, {64, ncclBfloat16}};
  BucketConfig cfg;
  std::vector<BucketAgreed> all(3, makeBucketAgreed(plan.data(), 2, cfg, 100));
  BOOST_TEST(checkBucketAgreement(all) == "");
  all[1].count[1] = 128;
  BOOST_TEST(checkBucketAgreement(all) ==
             "rank 1 has tensor 1 count 128 but rank 0 has 64; every rank must create the bucket with the same plan and "
             "config");
  all[1] = all[0];
  all[2].numCtas = 8;
  BOOST_TEST(checkBucketAgreement(all) ==
             "rank 2 has numCtas 8 but rank 0 has 4; every rank must create the bucket with the same plan and config");
  all[2] = all[0];
  all[2].chunkBytes = uint64_t(4) << 20;
  BOOST_TEST(checkBucketAgreement(all) ==
             "rank 2 has chunkBytes 4194304 but rank 0 has 2097152; every rank must create the bucket with the same plan "
             "and config");
}

BOOST_AUTO_TEST_CASE(async_error_words) {
  dev::AsyncError e;
  std::memset(&e, 0, sizeof(e));
  e.timeout = dev::ErrorRecord{6, dev::kPhaseBucketData, 5, 0, dev::kTransportGin, 0, 12, 3};
  std::string text;
  BOOST_TEST(describeAsyncError(e, 250, &text) == ncclRemoteError);
  BOOST_TEST(text.find("rank 0: timed out after 250 ms in bucket collective data waiting for peer rank 5 over GIN "
                       "(expected 12, saw 3") != std::string::npos);
  e.timeout.phase = dev::kPhaseBucketReady;
  describeAsyncError(e, 250, &text);
  BOOST_TEST(text.find("bucket collective start") != std::string::npos);
  e.timeout.phase = dev::kPhaseBucketFree;
  describeAsyncError(e, 250, &text);
  BOOST_TEST(text.find("in bucket reduce-scatter start (the peer's previous collective has not finished) waiting for "
                       "peer rank 5 over GIN") != std::string::npos,
             text);
  e.timeout.phase = dev::kPhaseBucketStage;
  e.timeout.peer = 2;  // the CTA
  describeAsyncError(e, 250, &text);
  BOOST_TEST(text.find("rank 0: timed out after 250 ms in the bucket reduce-scatter's BF16 conversion: CTA 2 of this "
                       "rank converted 3 of the first 12 chunks") != std::string::npos,
             text);
}

// The reference sums in rank order from +0.0: (1e8 + 1) - 1e8 = 0 in FP32, while the other order
// gives 1; BF16 wire rounds each contribution; the scale multiplies the sum.
BOOST_AUTO_TEST_CASE(reference_order_and_rounding) {
  const std::vector<std::vector<float>> in = {{1e8f, 2.f}, {1.f, 3.f}, {-1e8f, 5.f}, {0.f, 7.f}};
  ref::ReduceOptions o;
  std::vector<float> all = ref::allReduceF32(in, o);
  BOOST_TEST(all[0] == 0.f);
  BOOST_TEST(all[1] == 17.f);
  const std::vector<std::vector<float>> in2 = {{1e8f, 2.f}, {-1e8f, 3.f}, {1.f, 5.f}, {0.f, 7.f}};
  BOOST_TEST(ref::allReduceF32(in2, o)[0] == 1.f);
  // Shards: 2 elements over 2 ranks.
  const std::vector<std::vector<float>> two = {{1.f, 2.f}, {10.f, 20.f}};
  BOOST_TEST(ref::reduceScatterF32(two, 0, o) == std::vector<float>{11.f});
  BOOST_TEST(ref::reduceScatterF32(two, 1, o) == std::vector<float>{22.f});
  o.hasScale = true;
  o.scale = 0.5f;
  BOOST_TEST(ref::reduceScatterF32(two, 1, o) == std::vector<float>{11.f});
  // BF16 wire: 1 + 2^-9 rounds to 1 in BF16 before the sum.
  ref::ReduceOptions w;
  w.bf16Wire = true;
  const std::vector<std::vector<float>> fine = {{1.0f + 1.0f / 512}, {0.f}};
  BOOST_TEST(ref::allReduceF32(fine, w)[0] == 1.0f);
  BOOST_TEST(ref::allReduceF32(fine, o)[0] != 1.0f);
  // BF16 all-reduce: FP32 accumulation, one rounding: 256 + 1 - 256 = 1 (BF16 partial sums give 0).
  const std::vector<std::vector<uint16_t>> b = {{ref::floatToBf16(256.f)}, {ref::floatToBf16(1.f)},
                                               {ref::floatToBf16(-256.f)}};
  BOOST_TEST(ref::bf16ToFloat(ref::allReduceBf16(b, ref::ReduceOptions{})[0]) == 1.f);
  // All-gather: shard r from rank r.
  const std::vector<std::vector<uint8_t>> g = {{1, 2, 0, 0}, {0, 0, 3, 4}};
  BOOST_TEST((ref::allGatherBytes(g) == std::vector<uint8_t>{1, 2, 3, 4}));
}

BOOST_AUTO_TEST_SUITE_END()
