// GPU tests of the communicator's one epx window (suite "window", epx/window.h): a planned window
// holds an EP group, a bucket and a PP channel side by side, each used in turn and checked (EP
// against the CPU reference, the bucket's sums, every PP byte), with one registration; a plan that
// is too small refuses the extra object and names what is free; a region is reused after a
// destroy; without a plan each object registers a window of its own, released with it. Runs at 1
// rank and across fake nodes (regions of GIN signals and counters too).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/bucket.h"
#include "epx/pp.h"
#include "epx/window.h"

using namespace epx::test;

namespace {

constexpr size_t kShard = 4096;              // bucket elements per rank
constexpr size_t kPpBytes = (64 << 10) + 48;  // PP message (not a multiple of 16)

GroupSpec smallGroup() {
  GroupSpec g;
  g.maxTokens = 64;
  g.hidden = 1024;
  g.topk = 4;
  g.numExperts = 8 * nRanks();
  return g;
}

ncclEpBucketTensor_t bucketTensor() { return ncclEpBucketTensor_t{kShard * size_t(nRanks()), ncclFloat32}; }

ncclEpPpConfig_t ppConfig() {
  ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
  cfg.maxMessageBytes = kPpBytes;
  return cfg;
}

ncclEpWindowInfo_t infoOf(const RankContext& c) {
  ncclEpWindowInfo_t i{};
  EPX_CHECK_EP(ncclEpWindowGetInfo(c.comm, &i));
  return i;
}

std::string describe(const ncclEpWindowInfo_t& i) {
  return "windows " + std::to_string(i.windows) + " planned " + std::to_string(i.planned) + " objects " +
         std::to_string(i.objects) + " bytes " + std::to_string(i.bytes) + " used " + std::to_string(i.bytesUsed) +
         " signals " + std::to_string(i.ginSignalsUsed) + "/" + std::to_string(i.ginSignals) + " counters " +
         std::to_string(i.ginCountersUsed) + "/" + std::to_string(i.ginCounters);
}

// All-reduce of the bucket's tensor filled with rank + 1 + i % 7 at element i: every element must
// become R (R + 1) / 2 + R (i % 7). "" or what differs.
std::string allReduceChecked(const RankContext& c, ncclEpBucket_t b, int round) {
  const size_t n = kShard * size_t(c.nRanks);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(c.rank + 1 + int(i % 7) + round);
  void* t = nullptr;
  EPX_CHECK_EP(ncclEpBucketGetTensor(b, 0, &t));
  EPX_CHECK_CUDA(cudaMemcpy(t, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const ncclEpBucketItem_t item{0, n, ncclFloat32, nullptr};
  EPX_CHECK_EP(ncclEpBucketAllReduce(b, &item, 1, nullptr, nullptr, c.stream));
  EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  EPX_CHECK_CUDA(cudaMemcpy(v.data(), t, n * sizeof(float), cudaMemcpyDeviceToHost));
  const int R = c.nRanks;
  for (size_t i = 0; i < n; ++i) {
    const float want = float(R * (R + 1) / 2 + R * (int(i % 7) + round));
    if (v[i] != want)
      return "rank " + std::to_string(c.rank) + ": all-reduce element " + std::to_string(i) + " is " +
             std::to_string(v[i]) + ", not " + std::to_string(want);
  }
  return {};
}

// One message around the ring (rank r sends to r + 1), every byte checked. "" or what differs.
std::string ringChecked(const RankContext& c, ncclEpPpChannel_t ch, int round) {
  const int next = (c.rank + 1) % c.nRanks, prev = (c.rank + c.nRanks - 1) % c.nRanks;
  auto byteOf = [&](int src, size_t i) { return uint8_t((src * 131 + i * 7 + round) & 0xff); };
  std::vector<uint8_t> out(kPpBytes), in(kPpBytes, 0xa5);
  for (size_t i = 0; i < kPpBytes; ++i) out[i] = byteOf(c.rank, i);
  DevBuf s, r;
  s.reserve(kPpBytes);
  r.reserve(kPpBytes);
  EPX_CHECK_CUDA(cudaMemcpy(s.ptr(), out.data(), kPpBytes, cudaMemcpyHostToDevice));
  EPX_CHECK_CUDA(cudaMemcpy(r.ptr(), in.data(), kPpBytes, cudaMemcpyHostToDevice));
  EPX_CHECK_EP(ncclEpPpSend(ch, s.ptr(), kPpBytes, next, c.stream));
  EPX_CHECK_EP(ncclEpPpRecv(ch, r.ptr(), kPpBytes, prev, nullptr, c.stream));
  EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  EPX_CHECK_CUDA(cudaMemcpy(in.data(), r.ptr(), kPpBytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < kPpBytes; ++i)
    if (in[i] != byteOf(prev, i))
      return "rank " + std::to_string(c.rank) + ": PP byte " + std::to_string(i) + " from rank " +
             std::to_string(prev) + " is " + std::to_string(in[i]) + ", not " + std::to_string(byteOf(prev, i));
  return {};
}

void checkAll(const std::vector<std::string>& errs) {
  for (int r : localRanks()) BOOST_TEST(errs[size_t(r)] == "", errs[size_t(r)]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(window)

BOOST_AUTO_TEST_CASE(planned_window_holds_every_object) {
  evictAllGroups();  // the cached groups of other suites hold windows of their own
  const int R = nRanks();
  const GroupSpec gs = smallGroup();
  const ncclEpConfig_t gcfg = makeConfig(gs);
  const ncclEpBucketTensor_t tensor = bucketTensor();
  const ncclEpPpConfig_t pcfg = ppConfig();
  std::vector<ncclEpWindowPlan_t> plans(static_cast<size_t>(R));
  std::vector<std::string> errs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpWindowPlan_t p = NCCL_EP_WINDOW_PLAN_INITIALIZER;
    EPX_CHECK_EP(ncclEpWindowPlanAddGroup(c.comm, &gcfg, &p));
    EPX_CHECK_EP(ncclEpWindowPlanAddBucket(c.comm, &tensor, 1, nullptr, &p));
    EPX_CHECK_EP(ncclEpWindowPlanAddPpChannel(c.comm, &pcfg, &p));
    EPX_CHECK_EP(ncclEpWindowCreate(c.comm, &p));
    plans[size_t(c.rank)] = p;
    const ncclEpWindowInfo_t i = infoOf(c);
    if (i.windows != 1 || !i.planned || i.objects != 0 || i.bytes != p.bytes || i.bytesUsed != 0)
      errs[size_t(c.rank)] = "after ncclEpWindowCreate: " + describe(i);
  });
  checkAll(errs);
  std::vector<ncclEpGroup_t> groups = createGroups(gs);
  std::vector<ncclEpBucket_t> buckets(static_cast<size_t>(R), nullptr);
  std::vector<ncclEpPpChannel_t> channels(static_cast<size_t>(R), nullptr);
  gpus().run([&](const RankContext& c) {
    EPX_CHECK_EP(ncclEpBucketCreate(c.comm, &tensor, 1, nullptr, &buckets[size_t(c.rank)]));
    EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &pcfg, &channels[size_t(c.rank)]));
    const ncclEpWindowInfo_t i = infoOf(c);
    const ncclEpWindowPlan_t& p = plans[size_t(c.rank)];
    // One registration; the three regions fill the plan exactly.
    if (i.windows != 1 || i.objects != 3 || i.bytesUsed != p.bytes || i.ginSignalsUsed != p.ginSignals ||
        i.ginCountersUsed != p.ginCounters)
      errs[size_t(c.rank)] = "with the three objects: " + describe(i) + " (planned " + std::to_string(p.bytes) + " bytes)";
  });
  checkAll(errs);
  // Each object in turn, twice: a region another object's traffic landed in shows up here.
  CaseConfig ep;
  ep.g = gs;
  for (int round = 0; round < 2; ++round) {
    BOOST_TEST(runCaseOn(ep, groups, allTokens(48), {}, 2, nextSeed(), "EP in the planned window"));
    gpus().run([&](const RankContext& c) {
      std::string e = allReduceChecked(c, buckets[size_t(c.rank)], round);
      if (e.empty()) e = ringChecked(c, channels[size_t(c.rank)], round);
      errs[size_t(c.rank)] = e;
    });
    checkAll(errs);
  }
  // A fourth object has no room: refused before any collective step, naming the need and the room.
  std::vector<std::string> refused(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpBucket_t extra = nullptr;
    const ncclResult_t r = ncclEpBucketCreate(c.comm, &tensor, 1, nullptr, &extra);
    refused[size_t(c.rank)] = std::to_string(int(r)) + ":" + ncclEpGetLastError();
    const ncclResult_t d = ncclEpWindowDestroy(c.comm);  // objects still hold regions
    errs[size_t(c.rank)] = d == ncclInvalidUsage ? std::string() : "ncclEpWindowDestroy with live objects gave " +
                                                                        std::to_string(int(d));
  });
  checkAll(errs);
  for (int r : localRanks()) {
    const std::string& m = refused[size_t(r)];
    BOOST_TEST(m.rfind("5:ncclEpBucketCreate: the communicator's planned epx window (ncclEpWindowCreate) has no room "
                       "for this object: it needs ", 0) == 0, m);
    BOOST_TEST(m.find("free in one piece") != std::string::npos, m);
  }
  // A region given back is taken again by the next object that fits.
  gpus().run([&](const RankContext& c) {
    EPX_CHECK_EP(ncclEpBucketDestroy(buckets[size_t(c.rank)]));
    EPX_CHECK_EP(ncclEpBucketCreate(c.comm, &tensor, 1, nullptr, &buckets[size_t(c.rank)]));
    std::string e = allReduceChecked(c, buckets[size_t(c.rank)], 5);
    if (e.empty() && infoOf(c).windows != 1) e = "a second window after reusing a region: " + describe(infoOf(c));
    errs[size_t(c.rank)] = e;
  });
  checkAll(errs);
  destroyGroups(groups);
  gpus().run([&](const RankContext& c) {
    EPX_CHECK_EP(ncclEpBucketDestroy(buckets[size_t(c.rank)]));
    EPX_CHECK_EP(ncclEpPpChannelDestroy(channels[size_t(c.rank)]));
    const ncclEpWindowInfo_t before = infoOf(c);
    EPX_CHECK_EP(ncclEpWindowDestroy(c.comm));
    const ncclEpWindowInfo_t after = infoOf(c);
    errs[size_t(c.rank)] = before.windows == 1 && before.objects == 0 && before.bytesUsed == 0 && after.windows == 0
                               ? std::string()
                               : "at the end: " + describe(before) + " then " + describe(after);
  });
  checkAll(errs);
}

BOOST_AUTO_TEST_CASE(unplanned_objects_register_their_own) {
  evictAllGroups();
  const int R = nRanks();
  const ncclEpBucketTensor_t tensor = bucketTensor();
  std::vector<std::string> errs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpBucket_t a = nullptr, b = nullptr;
    std::string e;
    EPX_CHECK_EP(ncclEpBucketCreate(c.comm, &tensor, 1, nullptr, &a));
    EPX_CHECK_EP(ncclEpBucketCreate(c.comm, &tensor, 1, nullptr, &b));
    const ncclEpWindowInfo_t two = infoOf(c);
    if (two.windows != 2 || two.planned || two.objects != 2 || two.bytesUsed != two.bytes)
      e = "two unplanned buckets: " + describe(two);
    // A plan comes before the communicator's first object.
    ncclEpWindowPlan_t p = NCCL_EP_WINDOW_PLAN_INITIALIZER;
    EPX_CHECK_EP(ncclEpWindowPlanAddBucket(c.comm, &tensor, 1, nullptr, &p));
    if (e.empty() && ncclEpWindowCreate(c.comm, &p) != ncclInvalidUsage)
      e = "ncclEpWindowCreate after objects was not refused";
    if (e.empty() && p.bytes != two.bytes / 2) e = "the plan of one bucket is " + std::to_string(p.bytes) + " bytes";
    if (e.empty() && ncclEpWindowDestroy(c.comm) != ncclInvalidUsage) e = "ncclEpWindowDestroy without a plan was not refused";
    EPX_CHECK_EP(ncclEpBucketDestroy(a));  // a's window goes with it
    if (e.empty() && infoOf(c).windows != 1) e = "after destroying one: " + describe(infoOf(c));
    if (e.empty()) e = allReduceChecked(c, b, 1);
    EPX_CHECK_EP(ncclEpBucketDestroy(b));
    if (e.empty() && infoOf(c).windows != 0) e = "after destroying both: " + describe(infoOf(c));
    errs[size_t(c.rank)] = e;
  });
  checkAll(errs);
}

BOOST_AUTO_TEST_SUITE_END()
