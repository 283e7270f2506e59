// Pure pieces of the verbs transport (plugin/src/net/verbs_*): HCA filter, GID selection, settings,
// MTU, SL/TC per connection, wire formats, immediate encoding, chunking, device properties.
// The verbs calls themselves never ran on a NIC (none here); these tests do not touch libibverbs.
#define BOOST_TEST_MODULE plugin_verbs_logic
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "nccl_net.h"
#include "net/verbs_gid.h"
#include "net/verbs_hca_filter.h"
#include "net/verbs_oob.h"
#include "net/verbs_ops.h"
#include "net/verbs_params.h"
#include "net/verbs_props.h"
#include "net/verbs_wire.h"

using namespace epx::plugin::verbs;

namespace {

Getenv envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

HcaFilter filterOf(const char* text) {
  HcaFilter f;
  BOOST_TEST_REQUIRE(parseHcaFilter(text, &f) == "");
  return f;
}

GidEntry gid(int index, GidType type, std::initializer_list<uint8_t> head, std::initializer_list<uint8_t> tail = {}) {
  GidEntry e;
  e.index = index;
  e.type = type;
  int i = 0;
  for (uint8_t b : head) e.raw[i++] = b;
  i = 16 - static_cast<int>(tail.size());
  for (uint8_t b : tail) e.raw[i++] = b;
  return e;
}

GidEntry v4(int index, GidType type, uint8_t last) {
  return gid(index, type, {}, {0xff, 0xff, 10, 0, 0, last});
}

ConnInfo info(int nQps, bool ethernet) {
  ConnInfo c{};
  c.nQps = static_cast<uint8_t>(nQps);
  c.ethernet = ethernet;
  c.lid = ethernet ? 0 : 7;
  c.mtu = 5;
  c.fifoDepth = 64;
  for (int q = 0; q < nQps; ++q) c.qpn[q] = 0x100 + q;
  c.psn = 0x1234;
  sealConnInfo(c);
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hca_filter)

BOOST_AUTO_TEST_CASE(prefix_exact_exclude_and_ports) {
  BOOST_TEST(hcaFilterAccepts(filterOf(""), "mlx5_0", 1));
  HcaFilter f = filterOf("mlx5");
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_3", 2));
  BOOST_TEST(!hcaFilterAccepts(f, "bnxt_re0", 1));
  f = filterOf("=mlx5_1");
  BOOST_TEST(f.exact);
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_1", 1));
  BOOST_TEST(!hcaFilterAccepts(f, "mlx5_10", 1));
  f = filterOf("mlx5_0:1,mlx5_1:2");
  BOOST_TEST(f.entries.size() == 2u);
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_0", 1));
  BOOST_TEST(!hcaFilterAccepts(f, "mlx5_0", 2));
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_1", 2));
  f = filterOf("^mlx5_2");
  BOOST_TEST(f.exclude);
  BOOST_TEST(!hcaFilterAccepts(f, "mlx5_2", 1));
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_3", 1));
  f = filterOf("^=mlx5_1:1");
  BOOST_TEST(!hcaFilterAccepts(f, "mlx5_1", 1));
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_1", 2));
  BOOST_TEST(hcaFilterAccepts(f, "mlx5_11", 1));
  f = filterOf(" mlx5_0 , , mlx5_1 ");
  BOOST_TEST(f.entries.size() == 2u);
  BOOST_TEST(f.entries[1].name == "mlx5_1");
}

BOOST_AUTO_TEST_CASE(bad_ports_are_errors) {
  HcaFilter f;
  BOOST_TEST(parseHcaFilter("mlx5_0:x", &f).find("not a number in 1..255") != std::string::npos);
  BOOST_TEST(parseHcaFilter("mlx5_0:0", &f).find("not a number") != std::string::npos);
  BOOST_TEST(parseHcaFilter("mlx5_0:", &f).find("not a number") != std::string::npos);
  BOOST_TEST(parseHcaFilter(":1", &f).find("empty device name") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(gid_selection)

BOOST_AUTO_TEST_CASE(roce_prefers_v2_with_the_requested_family) {
  const std::vector<GidEntry> table = {
      gid(0, GidType::RoceV1, {0xfe, 0x80}, {1}),  // link-local, v1
      gid(1, GidType::RoceV2, {0xfe, 0x80}, {1}),  // link-local, v2
      v4(2, GidType::RoceV1, 5),
      v4(3, GidType::RoceV2, 5),
      gid(4, GidType::RoceV2, {0x20, 0x01, 0x0d, 0xb8}, {9}),  // global IPv6, v2
      GidEntry{5, {}, GidType::RoceV2},                        // empty slot
  };
  GidChoice c = selectGid(table, true, -1, AddressFamily::Ipv4);
  BOOST_TEST(c.index == 3);
  BOOST_TEST(c.reason == "RoCE v2, preferred address family");
  c = selectGid(table, true, -1, AddressFamily::Ipv6);
  BOOST_TEST(c.index == 4);
  // Without global addresses the v2 link-local entry beats RoCE v1.
  c = selectGid({table[0], table[1], table[5]}, true, -1, AddressFamily::Ipv4);
  BOOST_TEST(c.index == 1);
  BOOST_TEST(c.reason == "RoCE v2, link-local IPv6");
  c = selectGid({table[0], table[5]}, true, -1, AddressFamily::Ipv4);
  BOOST_TEST(c.index == 0);
  BOOST_TEST((c.type == GidType::RoceV1));
  c = selectGid({table[5]}, true, -1, AddressFamily::Ipv4);
  BOOST_TEST(c.index == -1);
  BOOST_TEST(c.reason.find("no RoCE GID") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(override_and_infiniband) {
  const std::vector<GidEntry> table = {gid(0, GidType::InfiniBand, {0xfe, 0x80}, {0x11}), v4(3, GidType::RoceV2, 5),
                                       GidEntry{4, {}, GidType::RoceV2}};
  BOOST_TEST(selectGid(table, true, 0, AddressFamily::Ipv4).index == 0);
  BOOST_TEST(selectGid(table, true, 0, AddressFamily::Ipv4).reason == "override");
  GidChoice c = selectGid(table, true, 4, AddressFamily::Ipv4);
  BOOST_TEST(c.index == -1);
  BOOST_TEST(c.reason.find("is empty") != std::string::npos);
  c = selectGid(table, true, 9, AddressFamily::Ipv4);
  BOOST_TEST(c.reason.find("not in the port's table") != std::string::npos);
  c = selectGid(table, false, -1, AddressFamily::Ipv4);
  BOOST_TEST(c.index == 0);
  BOOST_TEST((c.type == GidType::InfiniBand));
  BOOST_TEST(selectGid({table[2]}, false, -1, AddressFamily::Ipv4).index == -1);
}

BOOST_AUTO_TEST_CASE(classification_helpers) {
  const GidEntry m = v4(0, GidType::RoceV2, 1);
  BOOST_TEST(gidIsIpv4Mapped(m.raw));
  BOOST_TEST(!gidIsLinkLocal(m.raw));
  const GidEntry ll = gid(0, GidType::RoceV2, {0xfe, 0xbf});
  BOOST_TEST(gidIsLinkLocal(ll.raw));
  const GidEntry notLl = gid(0, GidType::RoceV2, {0xfe, 0xc0}, {1});
  BOOST_TEST(!gidIsLinkLocal(notLl.raw));
  BOOST_TEST((gidTypeFromSysfs("RoCE v2\n", true) == GidType::RoceV2));
  BOOST_TEST((gidTypeFromSysfs("IB/RoCE v1\n", true) == GidType::RoceV1));
  BOOST_TEST((gidTypeFromSysfs("IB/RoCE v1\n", false) == GidType::InfiniBand));
  BOOST_TEST((gidTypeFromSysfs("", true) == GidType::Unknown));
  AddressFamily fam = AddressFamily::Ipv4;
  BOOST_TEST(parseAddressFamily("AF_INET6", &fam));
  BOOST_TEST((fam == AddressFamily::Ipv6));
  BOOST_TEST(!parseAddressFamily("inet", &fam));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(settings_and_qp_attributes)

BOOST_AUTO_TEST_CASE(defaults_and_precedence_of_epx_over_nccl_names) {
  Settings s;
  BOOST_TEST_REQUIRE(readSettings(envOf({}), &s) == "");
  BOOST_TEST(s.qpsPerConnection == 2);
  BOOST_TEST(s.timeout == 20);
  BOOST_TEST(s.retryCount == 7);
  BOOST_TEST(s.fifoDepth == 64);
  BOOST_TEST(s.gidIndex == -1);
  BOOST_TEST(s.hcaFilter.empty());
  BOOST_TEST_REQUIRE(readSettings(envOf({{"NCCL_IB_TIMEOUT", "18"}, {"EPX_IB_TIMEOUT", "22"}, {"NCCL_IB_GID_INDEX", "3"},
                                         {"NCCL_IB_HCA", "=mlx5_0"}, {"EPX_IB_QPS_PER_CONNECTION", "4"},
                                         {"NCCL_IB_ADDR_FAMILY", "AF_INET6"}, {"EPX_IB_MTU", "2048"}}),
                                  &s) == "");
  BOOST_TEST(s.timeout == 22);
  BOOST_TEST(s.gidIndex == 3);
  BOOST_TEST(s.hcaFilter == "=mlx5_0");
  BOOST_TEST(s.qpsPerConnection == 4);
  BOOST_TEST((s.family == AddressFamily::Ipv6));
  BOOST_TEST(s.mtuBytes == 2048);
  BOOST_TEST_REQUIRE(readSettings(envOf({{"NCCL_IB_HCA", "mlx5_0"}, {"EPX_IB_HCA", "^mlx5_1"}}), &s) == "");
  BOOST_TEST(s.hcaFilter == "^mlx5_1");
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_variable_and_range) {
  Settings s;
  BOOST_TEST(readSettings(envOf({{"EPX_IB_QPS_PER_CONNECTION", "17"}}), &s).find("EPX_IB_QPS_PER_CONNECTION=\"17\" is not an integer in 1..16") == 0u);
  BOOST_TEST(readSettings(envOf({{"NCCL_IB_TIMEOUT", "32"}}), &s).find("NCCL_IB_TIMEOUT") == 0u);
  BOOST_TEST(readSettings(envOf({{"EPX_IB_MTU", "1500"}}), &s).find("not 256, 512") != std::string::npos);
  BOOST_TEST(readSettings(envOf({{"EPX_IB_FIFO_DEPTH", "48"}}), &s).find("not a power of 2") != std::string::npos);
  BOOST_TEST(readSettings(envOf({{"EPX_IB_ADDR_FAMILY", "v4"}}), &s).find("AF_INET or AF_INET6") != std::string::npos);
  BOOST_TEST(readSettings(envOf({{"EPX_IB_RETRY_CNT", "7x"}}), &s).find("EPX_IB_RETRY_CNT") == 0u);
}

BOOST_AUTO_TEST_CASE(mtu_is_the_smaller_active_one_lowered_by_request) {
  BOOST_TEST(mtuCodeFromBytes(4096) == 5);
  BOOST_TEST(mtuCodeFromBytes(1500) == 0);
  BOOST_TEST(chooseMtu(5, 3, 0) == 3);
  BOOST_TEST(chooseMtu(5, 5, 1024) == 3);
  BOOST_TEST(chooseMtu(2, 5, 4096) == 2);  // a request never raises it
}

BOOST_AUTO_TEST_CASE(service_level_follows_epx_policy_per_link_layer) {
  // NCCL's per-communicator traffic class sits at the policy's "group" level.
  epx::topo::SlPolicy p;
  BOOST_TEST_REQUIRE(resolveConnectionPolicy(106, envOf({{"EPX_DEFAULT_TC", "40"}, {"NCCL_IB_SL", "3"}}), &p) == "");
  ServiceLevel roce = chooseServiceLevel(true, p);
  BOOST_TEST(roce.grh);
  BOOST_TEST(roce.trafficClass == 106);
  BOOST_TEST(roce.sl == 0);
  BOOST_TEST(roce.why == "tc 106 from group");
  ServiceLevel ib = chooseServiceLevel(false, p);
  BOOST_TEST(!ib.grh);
  BOOST_TEST(ib.sl == 3);
  BOOST_TEST(ib.why == "sl 3 from NCCL_IB_SL");
  // EPX_OVERRIDE_TC beats the communicator's value; without either, EPX_DEFAULT_TC applies.
  BOOST_TEST_REQUIRE(resolveConnectionPolicy(106, envOf({{"EPX_OVERRIDE_TC", "26"}}), &p) == "");
  BOOST_TEST(chooseServiceLevel(true, p).trafficClass == 26);
  BOOST_TEST_REQUIRE(resolveConnectionPolicy(NCCL_NET_TRAFFIC_CLASS_UNDEF, envOf({{"EPX_DEFAULT_TC", "40"}}), &p) == "");
  BOOST_TEST(chooseServiceLevel(true, p).trafficClass == 40);
  BOOST_TEST(resolveConnectionPolicy(-1, envOf({{"EPX_OVERRIDE_SL", "16"}}), &p).find("EPX_OVERRIDE_SL") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(qp_path_from_both_sides) {
  Settings s;
  BOOST_TEST_REQUIRE(readSettings(envOf({{"EPX_IB_TIMEOUT", "19"}}), &s) == "");
  ConnInfo local = info(2, false), remote = info(2, false);
  remote.lid = 42;
  remote.mtu = 4;
  remote.psn = 0xabcdef;
  ServiceLevel sl;
  sl.sl = 5;
  QpPath p = makeQpPath(s, local, remote, sl);
  BOOST_TEST(!p.ethernet);
  BOOST_TEST(p.dlid == 42);
  BOOST_TEST(p.mtu == 4);
  BOOST_TEST(p.hopLimit == 0);
  BOOST_TEST(p.service.sl == 5);
  BOOST_TEST(p.timeout == 19);
  BOOST_TEST(p.remotePsn == 0xabcdefu);
  local = info(2, true), remote = info(2, true);
  remote.gid[15] = 0x77;
  local.gidIndex = 3;
  p = makeQpPath(s, local, remote, sl);
  BOOST_TEST(p.ethernet);
  BOOST_TEST(p.dlid == 0);
  BOOST_TEST(p.dgid[15] == 0x77);
  BOOST_TEST(p.sgidIndex == 3);
  BOOST_TEST(p.hopLimit == 255);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire)

BOOST_AUTO_TEST_CASE(handle_round_trip_and_corruption) {
  Handle h{};
  h.address.v4.sin_family = AF_INET;
  h.address.v4.sin_port = htons(4242);
  h.addressLength = sizeof(sockaddr_in);
  sealHandle(h);
  BOOST_TEST(validateHandle(h) == "");
  Handle bad = h;
  bad.address.v4.sin_port = htons(4243);
  BOOST_TEST(validateHandle(bad).find("checksum") != std::string::npos);
  bad = h;
  bad.magic = 0x45505853;  // a socket-transport handle
  BOOST_TEST(validateHandle(bad).find("magic") != std::string::npos);
  Handle zero{};
  BOOST_TEST(validateHandle(zero) != "");
  // connectState is the connector's scratch space: not covered by the checksum.
  h.connectState = 0x1234;
  BOOST_TEST(validateHandle(h) == "");
}

BOOST_AUTO_TEST_CASE(conn_info_validation) {
  const ConnInfo local = info(2, false);
  ConnInfo r = info(2, false);
  BOOST_TEST(validateConnInfo(r, local) == "");
  r = info(3, false);
  BOOST_TEST(validateConnInfo(r, local).find("EPX_IB_QPS_PER_CONNECTION") != std::string::npos);
  r = info(2, true);
  BOOST_TEST(validateConnInfo(r, local).find("RoCE") != std::string::npos);
  r = info(2, false);
  r.lid = 0;
  sealConnInfo(r);
  BOOST_TEST(validateConnInfo(r, local).find("no LID") != std::string::npos);
  r = info(2, false);
  r.qpn[1] = 0;
  sealConnInfo(r);
  BOOST_TEST(validateConnInfo(r, local).find("24-bit QPN") != std::string::npos);
  r = info(2, false);
  r.fifoDepth = 32;
  sealConnInfo(r);
  BOOST_TEST(validateConnInfo(r, local).find("FIFO depth") != std::string::npos);
  r = info(2, false);
  r.psn ^= 1;  // changed after sealing
  BOOST_TEST(validateConnInfo(r, local).find("checksum") != std::string::npos);
  r = info(2, false);
  r.mtu = 6;
  sealConnInfo(r);
  BOOST_TEST(validateConnInfo(r, local).find("MTU") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(immediate_encoding) {
  uint16_t seq = 0;
  int n = 0;
  BOOST_TEST(decodeImm(encodeImm(0x12345, 3), &seq, &n));
  BOOST_TEST(seq == 0x2345);
  BOOST_TEST(n == 3);
  BOOST_TEST(decodeImm(encodeImm(65535, 16), &seq, &n));
  BOOST_TEST(seq == 65535);
  BOOST_TEST(n == 16);
  BOOST_TEST(!decodeImm(0, &seq, &n));                        // not ours
  BOOST_TEST(!decodeImm(encodeImm(1, 0), &seq, &n));          // no chunks
  BOOST_TEST(!decodeImm((0xE5u << 24) | (17u << 16), &seq, &n));  // more chunks than QPs
  BOOST_TEST(sizeof(FifoEntry) == 64u);
  BOOST_TEST(offsetof(FifoEntry, seq) == 56u);  // written last
}

BOOST_AUTO_TEST_CASE(chunks_cover_the_message_exactly) {
  const size_t minChunk = 128 << 10;
  ChunkPlan p = planChunks(0, 4, minChunk);
  BOOST_TEST(p.nChunks == 1);
  BOOST_TEST(p.length(0, 0) == 0u);
  p = planChunks(200 << 10, 4, minChunk);  // below 2 × minChunk: whole
  BOOST_TEST(p.nChunks == 1);
  for (size_t size : {size_t(256 << 10), size_t(1 << 20) + 1, size_t(3 << 20) + 4095, size_t(64 << 20)})
    for (int q : {1, 2, 3, 4, 16}) {
      p = planChunks(size, q, minChunk);
      BOOST_TEST(p.nChunks >= 1);
      BOOST_TEST(p.nChunks <= q);
      size_t total = 0;
      for (int i = 0; i < p.nChunks; ++i) {
        BOOST_TEST(p.offset(i) == total);
        BOOST_TEST(p.length(i, size) > 0u);
        total += p.length(i, size);
      }
      BOOST_TEST(total == size);
      if (p.nChunks > 1) BOOST_TEST(p.chunkBytes % 4096 == 0u);
    }
  p = planChunks(size_t(64) << 20, 4, minChunk);
  BOOST_TEST(p.nChunks == 4);
  BOOST_TEST(p.chunkBytes == size_t(16) << 20);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(device_properties)

BOOST_AUTO_TEST_CASE(speed_codes) {
  BOOST_TEST(portSpeedMbps(128, 2) == 400000);  // NDR 4x
  BOOST_TEST(portSpeedMbps(64, 2) == 200000);   // HDR 4x
  BOOST_TEST(portSpeedMbps(32, 1) == 25000);    // EDR 1x
  BOOST_TEST(portSpeedMbps(64, 16) == 100000);  // HDR 2x
  BOOST_TEST(portSpeedMbps(3, 2) == 0);
  BOOST_TEST(portSpeedMbps(64, 3) == 0);
}

BOOST_AUTO_TEST_CASE(topology_wins_where_it_knows_the_port) {
  std::vector<epx::topo::Nic> nics(2);
  nics[0].index = 0, nics[0].name = "mlx5_0", nics[0].port = 1, nics[0].guid = 0xaaa, nics[0].speedGbps = 400;
  nics[1].index = 1, nics[1].name = "mlx5_1", nics[1].port = 1;
  BOOST_TEST(findTopologyNic(nics, "mlx5_1", 1) == 1);
  BOOST_TEST(findTopologyNic(nics, "mlx5_1", 2) == -1);
  PortFacts f;
  f.device = "mlx5_0";
  f.port = 1;
  f.speedMbps = 200000;
  f.guid = 0xbbb;
  f.pciPath = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  DeviceProps p = makeDeviceProps(f, &nics[0], "/sys/devices/pci0000:10/0000:10:02.0/0000:11:00.0");
  BOOST_TEST(p.source == "topology");
  BOOST_TEST(p.speedMbps == 400000);
  BOOST_TEST(p.guid == 0xaaau);
  BOOST_TEST(p.pciPath == "/sys/devices/pci0000:10/0000:10:02.0/0000:11:00.0");
  BOOST_TEST(p.ptrSupport == NCCL_PTR_HOST);  // no GPUDirect: host memory only
  // A model NIC without speed or GUID keeps the verbs values.
  f.device = "mlx5_1";
  p = makeDeviceProps(f, &nics[1], "");
  BOOST_TEST(p.speedMbps == 200000);
  BOOST_TEST(p.guid == 0xbbbu);
  BOOST_TEST(p.pciPath == f.pciPath);
  p = makeDeviceProps(f, nullptr, "");
  BOOST_TEST(p.source == "verbs");
}

BOOST_AUTO_TEST_CASE(pointer_support_follows_gpudirect) {
  PortFacts f;
  f.dmabuf = true;
  BOOST_TEST(makeDeviceProps(f, nullptr, "").ptrSupport == (NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF));
  f.dmabuf = false;
  f.peermem = true;
  BOOST_TEST(makeDeviceProps(f, nullptr, "").ptrSupport == (NCCL_PTR_HOST | NCCL_PTR_CUDA));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(message_framing)

BOOST_AUTO_TEST_CASE(send_ops_put_the_size_word_ahead_of_chunk_zero) {
  FifoEntry e{};
  e.addr = 0x100000;
  e.capacity = 8 << 20;
  e.rkey = 77;
  e.tag = 5;
  e.seq = 10;  // message 9
  BOOST_TEST(fifoSlotReady(e, 9));
  BOOST_TEST(!fifoSlotReady(e, 10));
  std::vector<WriteOp> ops;
  BOOST_TEST_REQUIRE(planSendOps(9, 4 << 20, 5, e, 4, 128 << 10, 0x9000, 33, &ops) == "");
  BOOST_TEST_REQUIRE(ops.size() == 5u);
  BOOST_TEST((ops[0].kind == WriteOp::Size));
  BOOST_TEST(ops[0].qp == 0);
  BOOST_TEST(!ops[0].signaled);
  BOOST_TEST(ops[0].remoteAddr == 0x9000u);
  BOOST_TEST(ops[0].rkey == 33u);
  size_t covered = 0;
  for (int i = 1; i < 5; ++i) {
    BOOST_TEST((ops[i].kind == WriteOp::Chunk));
    BOOST_TEST(ops[i].qp == i - 1);
    BOOST_TEST(ops[i].signaled);
    BOOST_TEST(ops[i].rkey == 77u);
    BOOST_TEST(ops[i].remoteAddr == e.addr + ops[i].localOffset);
    BOOST_TEST(ops[i].imm == encodeImm(9, 4));
    covered += ops[i].length;
  }
  BOOST_TEST(covered == size_t(4 << 20));
  // Zero bytes: one write-with-immediate without data.
  BOOST_TEST_REQUIRE(planSendOps(9, 0, 5, e, 4, 128 << 10, 0x9000, 33, &ops) == "");
  BOOST_TEST(ops.size() == 2u);
  BOOST_TEST(ops[1].length == 0u);
}

BOOST_AUTO_TEST_CASE(send_refuses_truncation_and_tag_mismatch) {
  FifoEntry e{};
  e.capacity = 1000;
  e.tag = 5;
  std::vector<WriteOp> ops;
  BOOST_TEST(planSendOps(0, 1001, 5, e, 2, 4096, 0, 0, &ops).find("larger than the receive buffer") != std::string::npos);
  BOOST_TEST(ops.empty());
  BOOST_TEST(planSendOps(0, 10, 6, e, 2, 4096, 0, 0, &ops).find("tag 6 sent, receiver posted tag 5") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tracker_completes_messages_when_all_chunks_arrived) {
  ImmTracker t(4);
  BOOST_TEST(t.post(0));
  BOOST_TEST(t.post(1));
  BOOST_TEST(!t.post(4));  // slot of message 0 still busy
  BOOST_TEST(t.onImm(encodeImm(1, 1)) == "");
  BOOST_TEST(t.complete(1));
  BOOST_TEST(t.onImm(encodeImm(0, 3)) == "");
  BOOST_TEST(t.onImm(encodeImm(0, 3)) == "");
  BOOST_TEST(!t.complete(0));
  BOOST_TEST(t.onImm(encodeImm(0, 3)) == "");
  BOOST_TEST(t.complete(0));
  BOOST_TEST(t.onImm(encodeImm(0, 3)).find("more chunks") != std::string::npos);
  t.release(0);
  BOOST_TEST(!t.complete(0));
  BOOST_TEST(t.post(4));
  BOOST_TEST(t.onImm(encodeImm(4, 2)) == "");
  BOOST_TEST(t.onImm(encodeImm(4, 3)).find("announced as 2 then 3") != std::string::npos);
  BOOST_TEST(t.onImm(encodeImm(7, 1)).find("matches no posted receive") != std::string::npos);
  BOOST_TEST(t.onImm(12345).find("not an epx verbs immediate") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(oob)

// The handshake channel over loopback: listen, connect, swap ConnInfo both ways, as the
// transport's connect()/accept() state machines do (without QPs).
BOOST_AUTO_TEST_CASE(conn_info_swap_over_loopback) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  Handle h{};
  std::string why;
  const int lfd = oobListen(&h, &why);
  BOOST_TEST_REQUIRE(lfd >= 0, why);
  BOOST_TEST(validateHandle(h) == "");
  const int cfd = oobConnect(h, &why);
  BOOST_TEST_REQUIRE(cfd >= 0, why);
  int afd = -1, connected = 0;
  for (int i = 0; i < 2000 && (afd < 0 || connected == 0); ++i) {
    if (afd < 0) afd = oobAccept(lfd, &why);
    if (connected == 0) connected = oobConnected(cfd, &why);
    BOOST_TEST_REQUIRE(connected >= 0, why);
    if (afd < 0) BOOST_TEST_REQUIRE(why.empty(), why);
    usleep(1000);
  }
  BOOST_TEST_REQUIRE(afd >= 0);
  BOOST_TEST_REQUIRE(connected == 1);
  const ConnInfo mine = info(2, false);
  ConnInfo got{};
  size_t sent = 0, received = 0;
  int s = 0, r = 0;
  for (int i = 0; i < 2000 && (s != 1 || r != 1); ++i) {
    if (s != 1) s = oobSend(cfd, &mine, sizeof mine, &sent, &why);
    if (r != 1) r = oobRecv(afd, &got, sizeof got, &received, &why);
    BOOST_TEST_REQUIRE(s >= 0, why);
    BOOST_TEST_REQUIRE(r >= 0, why);
  }
  BOOST_TEST(validateConnInfo(got, mine) == "");
  BOOST_TEST(got.qpn[1] == mine.qpn[1]);
  // Nothing more to read yet: 0 (try again), not an error.
  uint8_t byte = 0;
  size_t done = 0;
  BOOST_TEST(oobRecv(afd, &byte, 1, &done, &why) == 0);
  // The peer closes mid-handshake: the reader says so.
  ::close(cfd);
  int rr = 0;
  for (int i = 0; i < 2000 && rr == 0; ++i) rr = oobRecv(afd, &byte, 1, &done, &why);
  BOOST_TEST(rr == -1);
  BOOST_TEST(why.find("peer closed") != std::string::npos, why);
  ::close(afd);
  ::close(lfd);
}

BOOST_AUTO_TEST_CASE(refused_connection_is_reported) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  Handle h{};
  std::string why;
  const int lfd = oobListen(&h, &why);
  BOOST_TEST_REQUIRE(lfd >= 0, why);
  ::close(lfd);  // nobody listens on that port any more
  const int cfd = oobConnect(h, &why);
  int state = cfd < 0 ? -1 : 0;
  for (int i = 0; i < 2000 && state == 0; ++i) {
    state = oobConnected(cfd, &why);
    usleep(1000);
  }
  BOOST_TEST(state == -1);
  BOOST_TEST(why.find("refused") != std::string::npos, why);
  if (cfd >= 0) ::close(cfd);
}

BOOST_AUTO_TEST_SUITE_END()
