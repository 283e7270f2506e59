// Pure pieces of the socket transport: interface filters, message splitting, wire validation.
#define BOOST_TEST_MODULE plugin_socket_logic
#include <boost/test/unit_test.hpp>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "socket/interfaces.h"
#include "socket/wire.h"

using namespace epx::plugin::socket;

BOOST_AUTO_TEST_CASE(interface_filter_follows_nccl_socket_ifname_syntax) {
  BOOST_TEST(interfaceMatches("", "eth0"));
  BOOST_TEST(interfaceMatches("eth", "eth0"));
  BOOST_TEST(interfaceMatches("ib,eth", "eth1"));
  BOOST_TEST(!interfaceMatches("ib", "eth1"));
  BOOST_TEST(!interfaceMatches("^eth", "eth0"));
  BOOST_TEST(interfaceMatches("^eth", "ens3"));
  BOOST_TEST(interfaceMatches("=eth0", "eth0"));
  BOOST_TEST(!interfaceMatches("=eth0", "eth01"));
  BOOST_TEST(!interfaceMatches("^=lo", "lo"));
  BOOST_TEST(interfaceMatches("^=lo", "lo0"));
}

BOOST_AUTO_TEST_CASE(explicit_filter_can_select_loopback) {
  auto devs = discoverInterfaces("lo");
  BOOST_TEST_REQUIRE(devs.size() == 1u);
  BOOST_TEST(devs[0].name == "lo");
  BOOST_TEST(devs[0].loopback);
  BOOST_TEST(devs[0].pciPath.empty());
  // Automatic choice never mixes loopback with real interfaces.
  auto automatic = discoverInterfaces("");
  BOOST_TEST_REQUIRE(!automatic.empty());
  bool anyLoop = false, anyOther = false;
  for (auto& d : automatic) (d.loopback ? anyLoop : anyOther) = true;
  BOOST_TEST(!(anyLoop && anyOther));
}

BOOST_AUTO_TEST_CASE(split_covers_message_exactly) {
  for (size_t size : {size_t(0), size_t(1), size_t(4096), size_t(131071), size_t(131072), size_t(1 << 20),
                      size_t((64 << 20) + 3)}) {
    for (int streams : {1, 2, 3, 4, 16}) {
      Split s = splitMessage(size, streams, 64 << 10);
      BOOST_TEST(s.nParts <= streams);
      size_t total = 0;
      for (int p = 0; p < s.nParts; ++p) {
        BOOST_TEST(s.offset(p) == total);
        BOOST_TEST(s.length(p, size) > 0u);
        total += s.length(p, size);
      }
      BOOST_TEST(total == size, "size " << size << " streams " << streams);
      if (size == 0) BOOST_TEST(s.nParts == 0);
      MessageHeader h{kHeaderMagic, 0, size, static_cast<uint32_t>(s.nParts), 0, s.partSize};
      BOOST_TEST(validateHeader(h, streams).empty());
    }
  }
  BOOST_TEST(splitMessage(100000, 4, 64 << 10).nParts == 1);  // below two minimum parts
  BOOST_TEST(splitMessage(64 << 20, 4, 64 << 10).nParts == 4);
}

BOOST_AUTO_TEST_CASE(inconsistent_headers_are_rejected) {
  MessageHeader good{kHeaderMagic, 1, 1000, 1, 0, 1000};
  BOOST_TEST(validateHeader(good, 2).empty());
  MessageHeader bad = good;
  bad.magic = 0;
  BOOST_TEST(!validateHeader(bad, 2).empty());
  bad = good;
  bad.nParts = 3;
  BOOST_TEST(!validateHeader(bad, 2).empty());
  bad = good;
  bad.partSize = 10;
  BOOST_TEST(!validateHeader(bad, 2).empty());
  bad = good;
  bad.partSize = ~0ull;
  BOOST_TEST(!validateHeader(bad, 2).empty());
}

BOOST_AUTO_TEST_CASE(handle_seal_and_validate) {
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kWireVersion;
  h.nStreams = 2;
  h.addressLength = sizeof(sockaddr_in);
  h.address.v4.sin_family = AF_INET;
  h.address.v4.sin_port = htons(1234);
  sealHandle(h);
  BOOST_TEST(validateHandle(h).empty());
  Handle c = h;
  c.nStreams = 3;
  BOOST_TEST(validateHandle(c).find("checksum") != std::string::npos);
  c = h;
  c.nStreams = 0;
  sealHandle(c);
  BOOST_TEST(!validateHandle(c).empty());
  c = h;
  c.address.v4.sin_port = 0;
  sealHandle(c);
  BOOST_TEST(!validateHandle(c).empty());
  Hello hello{kHelloMagic, kWireVersion, 2, 2, 0, 0, 1};
  BOOST_TEST(!validateHello(hello).empty());  // stream index out of range
  hello.streamIndex = 1;
  BOOST_TEST(validateHello(hello).empty());
}

// Environment integers with a range (EPX_SOCKET_* settings): an out-of-range value is clamped and
// says so at WARN level, naming the variable, the value, the range and the value used.
namespace {
std::vector<std::pair<int, std::string>> gLogged;
void captureLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  gLogged.emplace_back(int(level), buf);
}
}  // namespace

BOOST_AUTO_TEST_CASE(env_integers_out_of_range_are_clamped_with_a_warning) {
  epx::plugin::setLogger(captureLog);
  const char* var = "EPX_TEST_RANGE_VALUE";
  struct Case {
    const char* text;
    int64_t expect;
    bool warns;
  };
  for (const Case& c : {Case{"0", 1, true}, Case{"17", 16, true}, Case{"5", 5, false}, Case{"abc", 2, true},
                        Case{"", 2, false}}) {
    gLogged.clear();
    setenv(var, c.text, 1);
    BOOST_TEST(epx::plugin::envIntInRange(var, 2, 1, 16) == c.expect, c.text);
    bool warned = false;
    for (const auto& [level, text] : gLogged)
      if (level == NCCL_LOG_WARN && text.find(var) != std::string::npos) warned = true;
    BOOST_TEST(warned == c.warns, c.text);
  }
  gLogged.clear();
  setenv(var, "0", 1);
  epx::plugin::envIntInRange(var, 2, 1, 16);
  BOOST_TEST_REQUIRE(!gLogged.empty());
  BOOST_TEST(gLogged[0].second == std::string("EPX: ") + var + "=0 is outside 1..16; using 1");
  unsetenv(var);
  epx::plugin::setLogger(nullptr);
}
