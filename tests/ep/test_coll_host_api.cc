// host_api (no GPU needed), bucket and PP part: size hints (exact bytes of the documented layouts)
// and the argument errors every call reports before touching a device.
#include <boost/test/unit_test.hpp>

#include <string>

#include "ep_harness.h"
#include "epx/bucket.h"
#include "epx/pp.h"

BOOST_AUTO_TEST_SUITE(host_api)

BOOST_AUTO_TEST_CASE(pp_buffer_size_hint) {
  ncclEpPpConfig_t c = NCCL_EP_PP_CONFIG_INITIALIZER;
  c.maxMessageBytes = size_t(16) << 20;
  c.slots = 4;
  size_t bytes = 0;
  BOOST_TEST(ncclEpPpGetBufferSizeHint(&c, 8, &bytes) == ncclSuccess, ncclEpGetLastError());
  // flags (4 KiB region), 8 x 4 slots of (16 + 16 MiB), 8 x 2 staging slots, rounded up to 2 MiB.
  BOOST_TEST(bytes == size_t(807403520));
  BOOST_TEST(bytes >= size_t(8) * 4 * (16 + (size_t(16) << 20)) + size_t(8) * 2 * (16 + (size_t(16) << 20)));
  c.maxMessageBytes = 0;
  BOOST_TEST(ncclEpPpGetBufferSizeHint(&c, 8, &bytes) == ncclInvalidArgument);
  BOOST_TEST(std::string(ncclEpGetLastError()) ==
             "ncclEpPpGetBufferSizeHint: maxMessageBytes 0 is not in 1 .. 4294967296");
  BOOST_TEST(ncclEpPpGetBufferSizeHint(&c, 8, nullptr) == ncclInvalidArgument);
  BOOST_TEST(std::string(ncclEpGetLastError()) == "ncclEpPpGetBufferSizeHint: bytes is NULL");
}

BOOST_AUTO_TEST_CASE(bucket_buffer_size_hint) {
  const ncclEpBucketTensor_t plan[] = {{1024, ncclFloat32}, {512, ncclBfloat16}, {100, ncclUint8}};
  size_t bytes = 0;
  BOOST_TEST(ncclEpBucketGetBufferSizeHint(plan, 3, 4, &bytes) == ncclSuccess, ncclEpGetLastError());
  BOOST_TEST(bytes == size_t(2) << 20);  // 10752 bytes of regions, rounded up to 2 MiB
  BOOST_TEST(ncclEpBucketGetBufferSizeHint(plan, 3, 8, &bytes) == ncclInvalidArgument);
  BOOST_TEST(std::string(ncclEpGetLastError()) ==
             "ncclEpBucketGetBufferSizeHint: tensor 2 has count 100, not a multiple of the 8 ranks (every rank holds "
             "an equal shard)");
  const ncclEpBucketTensor_t big[] = {{size_t(64) << 20, ncclFloat32}};  // 256 MiB of FP32
  BOOST_TEST(ncclEpBucketGetBufferSizeHint(big, 1, 8, &bytes) == ncclSuccess, ncclEpGetLastError());
  // tensor + receive area + BF16 staging (network peers), rounded up to 2 MiB.
  BOOST_TEST(bytes == (size_t(256) << 20) * 2 + (size_t(128) << 20) + (size_t(2) << 20));
}

BOOST_AUTO_TEST_CASE(bucket_and_pp_null_handles) {
  auto last = [] { return std::string(ncclEpGetLastError()); };
  char buf[64];
  BOOST_TEST(ncclEpPpSend(nullptr, buf, 16, 0, nullptr) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpPpSend: channel is NULL");
  BOOST_TEST(ncclEpPpRecv(nullptr, buf, 16, 0, nullptr, nullptr) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpPpRecv: channel is NULL");
  ncclEpPpChannel_t ch = nullptr;
  BOOST_TEST(ncclEpPpChannelCreate(nullptr, nullptr, &ch) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpPpChannelCreate: comm is NULL");
  BOOST_TEST(ncclEpPpChannelDestroy(nullptr) == ncclSuccess);
  const ncclEpBucketItem_t it{0, 16, ncclFloat32, nullptr};
  BOOST_TEST(ncclEpBucketAllGather(nullptr, &it, 1, nullptr, nullptr) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpBucketAllGather: bucket is NULL");
  BOOST_TEST(ncclEpBucketReduceScatter(nullptr, &it, 1, nullptr, nullptr, nullptr) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpBucketReduceScatter: bucket is NULL");
  BOOST_TEST(ncclEpBucketAllReduce(nullptr, &it, 1, nullptr, nullptr, nullptr) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpBucketAllReduce: bucket is NULL");
  void* p = nullptr;
  BOOST_TEST(ncclEpBucketGetTensor(nullptr, 0, &p) == ncclInvalidArgument);
  ncclEpBucketSession_t s = nullptr;
  BOOST_TEST(ncclEpBucketSessionCreate(nullptr, &s) == ncclInvalidArgument);
  ncclEpBucket_t b = nullptr;
  const ncclEpBucketTensor_t plan[] = {{16, ncclFloat32}};
  BOOST_TEST(ncclEpBucketCreate(nullptr, plan, 1, nullptr, &b) == ncclInvalidArgument);
  BOOST_TEST(last() == "ncclEpBucketCreate: comm is NULL");
  BOOST_TEST(ncclEpBucketDestroy(nullptr) == ncclSuccess);
}

BOOST_AUTO_TEST_SUITE_END()
