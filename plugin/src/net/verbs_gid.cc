#include "net/verbs_gid.h"

#include <cstring>

namespace epx::plugin::verbs {

bool gidIsZero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; ++i)
    if (raw[i]) return false;
  return true;
}

bool gidIsIpv4Mapped(const uint8_t raw[16]) {
  for (int i = 0; i < 10; ++i)
    if (raw[i]) return false;
  return raw[10] == 0xff && raw[11] == 0xff;
}

bool gidIsLinkLocal(const uint8_t raw[16]) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

bool parseAddressFamily(const char* text, AddressFamily* out) {
  if (!text) return false;
  if (!std::strcmp(text, "AF_INET") || !std::strcmp(text, "4")) return *out = AddressFamily::Ipv4, true;
  if (!std::strcmp(text, "AF_INET6") || !std::strcmp(text, "6")) return *out = AddressFamily::Ipv6, true;
  return false;
}

namespace {

// Lower is better; -1: never.
int rank(const GidEntry& e, AddressFamily family) {
  if (gidIsZero(e.raw)) return -1;
  if (e.type == GidType::RoceV2) {
    const bool v4 = gidIsIpv4Mapped(e.raw);
    if (!v4 && gidIsLinkLocal(e.raw)) return 3;
    return (v4 == (family == AddressFamily::Ipv4)) ? 1 : 2;
  }
  if (e.type == GidType::RoceV1) return 4;
  return -1;
}

const char* className(int r) {
  switch (r) {
    case 1: return "RoCE v2, preferred address family";
    case 2: return "RoCE v2, other address family";
    case 3: return "RoCE v2, link-local IPv6";
    default: return "RoCE v1";
  }
}

}  // namespace

GidChoice selectGid(const std::vector<GidEntry>& table, bool ethernet, int overrideIndex, AddressFamily family) {
  GidChoice c;
  if (overrideIndex >= 0) {
    for (const GidEntry& e : table)
      if (e.index == overrideIndex) {
        if (gidIsZero(e.raw)) {
          c.reason = "GID index " + std::to_string(overrideIndex) + " (override) is empty";
          return c;
        }
        c.index = e.index, c.type = e.type, c.reason = "override";
        return c;
      }
    c.reason = "GID index " + std::to_string(overrideIndex) + " (override) is not in the port's table";
    return c;
  }
  if (!ethernet) {
    for (const GidEntry& e : table)
      if (e.index == 0 && !gidIsZero(e.raw)) {
        c.index = 0, c.type = GidType::InfiniBand, c.reason = "InfiniBand port GID";
        return c;
      }
    c.reason = "InfiniBand port has no GID at index 0";
    return c;
  }
  int best = -1;
  for (const GidEntry& e : table) {
    const int r = rank(e, family);
    if (r < 0) continue;
    if (best < 0 || r < rank(table[best], family) || (r == rank(table[best], family) && e.index < table[best].index))
      best = static_cast<int>(&e - table.data());
  }
  if (best < 0) {
    c.reason = "no RoCE GID with an address on this port";
    return c;
  }
  c.index = table[best].index;
  c.type = table[best].type;
  c.reason = className(rank(table[best], family));
  return c;
}

GidType gidTypeFromSysfs(const std::string& text, bool ethernet) {
  if (text.find("RoCE v2") != std::string::npos) return GidType::RoceV2;
  if (text.find("RoCE v1") != std::string::npos || text.find("IB/RoCE") != std::string::npos)
    return ethernet ? GidType::RoceV1 : GidType::InfiniBand;
  return GidType::Unknown;
}

}  // namespace epx::plugin::verbs
