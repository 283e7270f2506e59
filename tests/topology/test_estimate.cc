// The analytic SM/QP estimate, checked against values worked by hand from the DeepEP V2 model
// (docs/topology.md shows each derivation).
#include <boost/test/unit_test.hpp>

#include "epx/topology/estimate.h"

using namespace epx::topo;

BOOST_AUTO_TEST_SUITE(estimate)

BOOST_AUTO_TEST_CASE(nvlink_and_nic_bandwidth_helpers) {
  BOOST_TEST(epxNvlinkGBps(18) == 18 * 26.562 * 0.9, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(epxNvlinkGBps(0) == 0.0);
  BOOST_TEST(epxNicGBps(400) == 50.0);
}

BOOST_AUTO_TEST_CASE(two_h200_nvlink_only_needs_28_sms_no_qps) {
  // EP2, 256 experts, top-8: write-bound, 430.3 / 0.5 / 45 = 19.1 SMs, x1.3 = 24.9 -> 25 -> 28.
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), 0.0, 132);
  BOOST_TEST(e.sms == 28);
  BOOST_TEST(e.qps == 0);
  BOOST_TEST(e.nvlinkGBps == epxNvlinkGBps(18), boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(larger_nvlink_domain_needs_fewer_sms) {
  // EP8 on one node: 430.3 / 0.875 / 45 = 10.9, x1.3 = 14.2 -> 15 -> 16.
  EpxEpShape s;
  s.numScaleupRanks = 8;
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), 0.0, 132, s);
  BOOST_TEST(e.sms == 16);
}

BOOST_AUTO_TEST_CASE(rdma_bound_hybrid_two_nodes) {
  // 2 NVLink ranks x 2 nodes, 400 Gb/s NIC (50 GB/s): RDMA is the bottleneck;
  // write-bound 50 / 0.2764 x 1.5529 / 45 = 6.24, x1.3 = 8.1 -> 9 -> 12 SMs; QPs 12x16+1 capped at 129.
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), epxNicGBps(400), 132);
  BOOST_TEST(e.sms == 12);
  BOOST_TEST(e.qps == 129);
  BOOST_TEST(e.nicGBps == 50.0);
}

BOOST_AUTO_TEST_CASE(bounds_and_overlap_rule) {
  EpxEpShape s;
  s.preferOverlapWithCompute = false;  // DeepEP raises to 64
  BOOST_TEST(epxEstimateEpResources(epxNvlinkGBps(18), 0.0, 132, s).sms == 64);
  BOOST_TEST(epxEstimateEpResources(epxNvlinkGBps(18), 0.0, 20).sms == 20);  // capped at the GPU
  BOOST_TEST(epxEstimateEpResources(0.0, 0.0, 132).sms == kMinSms);          // no links: minimum
  auto huge = epxEstimateEpResources(1e6, 0.0, 0);                           // no cap when numSMs <= 0
  BOOST_TEST(huge.sms % kSmAlign == 0);
  BOOST_TEST(huge.sms > 132);
}

BOOST_AUTO_TEST_CASE(direct_mode_with_nic_uses_few_qps) {
  EpxEpShape s;
  s.numScaleupRanks = 8;
  s.numScaleoutRanks = 1;
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), 50.0, 132, s);
  BOOST_TEST(e.qps == std::min(e.sms, kMaxDirectQps));
}

BOOST_AUTO_TEST_SUITE_END()
