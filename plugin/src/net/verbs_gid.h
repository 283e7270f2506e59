// GID selection for RoCE (and InfiniBand with a GRH). Pure logic, unit-tested.
//
// Policy (docs/plugins.md, "Verbs transport"): EPX_IB_GID_INDEX (else NCCL_IB_GID_INDEX) names
// the index outright. Otherwise, on RoCE, the lowest index of the best class wins:
//   1. RoCE v2, address family EPX_IB_ADDR_FAMILY (AF_INET default, or AF_INET6),
//   2. RoCE v2, the other family (IPv6 not link-local),
//   3. RoCE v2, link-local IPv6 (fe80::/10),
//   4. RoCE v1 (any address).
// All-zero entries are never chosen. On InfiniBand the index is 0 (the port GID, from the GUID).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epx::plugin::verbs {

enum class GidType { InfiniBand, RoceV1, RoceV2, Unknown };

struct GidEntry {
  int index = 0;
  uint8_t raw[16] = {};
  GidType type = GidType::Unknown;
};

enum class AddressFamily { Ipv4, Ipv6 };

struct GidChoice {
  int index = -1;        // -1: none usable
  GidType type = GidType::Unknown;
  std::string reason;    // why this one, or why none
};

bool gidIsZero(const uint8_t raw[16]);
bool gidIsIpv4Mapped(const uint8_t raw[16]);  // ::ffff:a.b.c.d
bool gidIsLinkLocal(const uint8_t raw[16]);   // fe80::/10

// Parses "AF_INET" / "AF_INET6" (also "4"/"6"); false for anything else.
bool parseAddressFamily(const char* text, AddressFamily* out);

// overrideIndex < 0: no override. ethernet: the port's link layer is Ethernet (RoCE).
GidChoice selectGid(const std::vector<GidEntry>& table, bool ethernet, int overrideIndex, AddressFamily family);

// Type from the sysfs text /sys/class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>
// ("IB/RoCE v1", "RoCE v2"), for kernels whose libibverbs lacks ibv_query_gid_type.
GidType gidTypeFromSysfs(const std::string& text, bool ethernet);

}  // namespace epx::plugin::verbs
