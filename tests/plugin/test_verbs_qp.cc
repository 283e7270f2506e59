// QP attributes of the verbs transport's RC state machine (what ibv_modify_qp would receive),
// and the transport choice on a machine without RDMA devices (this one): the socket transport.
// Built when libibverbs' headers are present; no verbs call reaches a device here.
#define BOOST_TEST_MODULE plugin_verbs_qp
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>

#include "net/select.h"
#include "net/verbs_api.h"
#include "net/verbs_qp_attr.h"

using namespace epx::plugin::verbs;

namespace {

QpPath path(bool ethernet) {
  QpPath p;
  p.ethernet = ethernet;
  p.mtu = IBV_MTU_4096;
  p.dlid = ethernet ? 0 : 0x2a;
  for (int i = 0; i < 16; ++i) p.dgid[i] = static_cast<uint8_t>(i);
  p.sgidIndex = 3;
  p.hopLimit = ethernet ? 255 : 0;
  p.service.sl = ethernet ? 0 : 5;
  p.service.trafficClass = ethernet ? 106 : 0;
  p.service.grh = ethernet;
  p.timeout = 20;
  p.retryCount = 7;
  p.rnrRetry = 7;
  p.minRnrTimer = 12;
  p.remotePsn = 0x123456;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(init_allows_remote_reads_and_writes) {
  ibv_qp_attr a;
  int mask = 0;
  initAttr(2, &a, &mask);
  BOOST_TEST(a.qp_state == IBV_QPS_INIT);
  BOOST_TEST(a.port_num == 2);
  BOOST_TEST(a.qp_access_flags == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  BOOST_TEST(mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

BOOST_AUTO_TEST_CASE(rtr_on_infiniband_uses_lid_and_sl) {
  ibv_qp_attr a;
  int mask = 0;
  rtrAttr(path(false), 1, 0xabc, &a, &mask);
  BOOST_TEST(a.qp_state == IBV_QPS_RTR);
  BOOST_TEST(a.path_mtu == IBV_MTU_4096);
  BOOST_TEST(a.dest_qp_num == 0xabcu);
  BOOST_TEST(a.rq_psn == 0x123456u);
  BOOST_TEST(a.ah_attr.dlid == 0x2a);
  BOOST_TEST(a.ah_attr.sl == 5);
  BOOST_TEST(a.ah_attr.is_global == 0);
  BOOST_TEST(a.min_rnr_timer == 12);
  BOOST_TEST((mask & IBV_QP_AV) != 0);
  BOOST_TEST((mask & IBV_QP_DEST_QPN) != 0);
}

BOOST_AUTO_TEST_CASE(rtr_on_roce_uses_grh_gid_and_traffic_class) {
  ibv_qp_attr a;
  int mask = 0;
  rtrAttr(path(true), 1, 0xabc, &a, &mask);
  BOOST_TEST(a.ah_attr.is_global == 1);
  BOOST_TEST(a.ah_attr.dlid == 0);
  BOOST_TEST(a.ah_attr.sl == 0);
  BOOST_TEST(a.ah_attr.grh.sgid_index == 3);
  BOOST_TEST(a.ah_attr.grh.hop_limit == 255);
  BOOST_TEST(a.ah_attr.grh.traffic_class == 106);
  BOOST_TEST(a.ah_attr.grh.dgid.raw[15] == 15);
}

BOOST_AUTO_TEST_CASE(rts_carries_timeouts_and_psn) {
  ibv_qp_attr a;
  int mask = 0;
  rtsAttr(path(false), 0x777, &a, &mask);
  BOOST_TEST(a.qp_state == IBV_QPS_RTS);
  BOOST_TEST(a.timeout == 20);
  BOOST_TEST(a.retry_cnt == 7);
  BOOST_TEST(a.rnr_retry == 7);
  BOOST_TEST(a.sq_psn == 0x777u);
  BOOST_TEST(mask == (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC));
}

BOOST_AUTO_TEST_CASE(qp_caps_fit_the_fifo) {
  ibv_qp_init_attr a;
  qpInitAttr(nullptr, 64, &a);
  BOOST_TEST(a.qp_type == IBV_QPT_RC);
  BOOST_TEST(a.cap.max_recv_wr == 64u);
  BOOST_TEST(a.cap.max_send_wr >= 2u * 64u);  // size word + chunk per message, + FIFO writes
  BOOST_TEST(a.cap.max_inline_data >= sizeof(FifoEntry));
}

BOOST_AUTO_TEST_CASE(no_rdma_device_means_the_socket_transport) {
  // This machine has no RDMA device (and possibly no libibverbs at run time): init picks sockets.
  std::string why;
  const VerbsApi* api = verbsApi(&why);
  BOOST_TEST_MESSAGE("libibverbs: " << (api ? "loaded" : why));
  unsetenv("EPX_NET_TRANSPORT");
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  BOOST_TEST_REQUIRE(epx::plugin::net::init(nullptr) == ncclSuccess);
  BOOST_TEST((epx::plugin::net::active() == epx::plugin::net::Transport::Socket));
  int n = 0;
  BOOST_TEST(epx::plugin::net::devices(&n) == ncclSuccess);
  BOOST_TEST(n >= 1);
  // Asking for verbs where there is none is an error, not a silent fallback.
  setenv("EPX_NET_TRANSPORT", "verbs", 1);
  BOOST_TEST(epx::plugin::net::init(nullptr) == ncclSystemError);
  setenv("EPX_NET_TRANSPORT", "rdma", 1);
  BOOST_TEST(epx::plugin::net::init(nullptr) == ncclInvalidUsage);
  unsetenv("EPX_NET_TRANSPORT");
}
