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
  // 2 NVLink ranks x 2 nodes, 400 Gb/s NIC (50 GB/s), hybrid: RDMA is the bottleneck;
  // write-bound 50 / 0.2764 x 1.5529 / 45 = 6.24, x1.3 = 8.1 -> 9 -> 12 SMs; QPs 12x16+1 capped at 129.
  EpxEpShape s;
  s.numScaleoutRanks = 2;
  s.forwarding = EpxForwarding::kHybrid;
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), epxNicGBps(400), 132, s);
  BOOST_TEST(e.sms == 12);
  BOOST_TEST(e.qps == 129);
  BOOST_TEST(e.nicGBps == 50.0);
  BOOST_TEST(e.networkRowsPerToken == 0.9965, boost::test_tools::tolerance(1e-4));  // T(2) x 1/2
}

BOOST_AUTO_TEST_CASE(rdma_bound_direct_two_nodes) {
  // The same group, direct (the 3-argument form's default): rdma = 1 - 1/2 = 0.5 is the bottleneck,
  // write = 1: 50 / 0.5 x 1 / 45 = 2.22, x1.3 = 2.9 -> 3 -> the floor, 4 SMs; QPs min(4, 9) = 4.
  // Twice the network rows of hybrid at 2 nodes, each written once: fewer SMs per NIC byte.
  auto e = epxEstimateEpResources(epxNvlinkGBps(18), epxNicGBps(400), 132);
  BOOST_TEST(e.sms == 4);
  BOOST_TEST(e.qps == 4);
  BOOST_TEST(e.networkRowsPerToken == 1.8071, boost::test_tools::tolerance(1e-4));  // T(4) x 1/2
}

BOOST_AUTO_TEST_CASE(network_rows_deepseek_v3_eight_nodes) {
  // Top-8 of 256 experts over 8 nodes x 8 ranks: direct T(64) x 7/8 = 7.68 x 0.875 = 6.72, hybrid
  // T(8) x 7/8 = 5.29 x 0.875 = 4.63: 31 % fewer rows on the NICs. One node: no network rows.
  BOOST_TEST(epxExpectedNetworkRows(256, 8, 64, 8, EpxForwarding::kDirect) == 6.72, boost::test_tools::tolerance(0.002));
  BOOST_TEST(epxExpectedNetworkRows(256, 8, 64, 8, EpxForwarding::kHybrid) == 4.63, boost::test_tools::tolerance(0.002));
  BOOST_TEST(epxExpectedNetworkRows(256, 8, 8, 1, EpxForwarding::kDirect) == 0.0);
  BOOST_TEST(epxExpectedNetworkRows(256, 8, 8, 1, EpxForwarding::kHybrid) == 0.0);
  // One rank per node: hybrid is direct.
  BOOST_TEST(epxExpectedNetworkRows(256, 8, 8, 8, EpxForwarding::kHybrid) ==
             epxExpectedNetworkRows(256, 8, 8, 8, EpxForwarding::kDirect));
  EpxEpShape s;
  s.numScaleupRanks = 8;
  s.numScaleoutRanks = 8;
  const auto d = epxEstimateEpResources(epxNvlinkGBps(18), epxNicGBps(400), 132, s);
  s.forwarding = EpxForwarding::kHybrid;
  const auto h = epxEstimateEpResources(epxNvlinkGBps(18), epxNicGBps(400), 132, s);
  BOOST_TEST(h.networkRowsPerToken / d.networkRowsPerToken == 0.69, boost::test_tools::tolerance(0.01));
  BOOST_TEST(h.qps > d.qps);  // DeepEP's hybrid allocation: a QP per SM and channel
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
