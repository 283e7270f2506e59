// Network interfaces the socket transport exposes as NCCL devices, one device per interface.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

namespace epx::plugin::socket {

struct Interface {
  std::string name;          // e.g. "eth0"; also the NCCL device name
  sockaddr_storage address;  // first usable address (IPv4 preferred), port 0
  socklen_t addressLength = 0;
  std::string pciPath;       // realpath of /sys/class/net/<name>/device, empty if not PCI
  int speedMbps = 0;         // from /sys/class/net/<name>/speed, 0 if unknown
  bool loopback = false;
};

// NCCL_SOCKET_IFNAME-style filter: a comma-separated list of name prefixes; a leading '^'
// excludes the listed prefixes instead, and a leading '=' (after '^' if both) requires exact
// names. An empty filter accepts everything.
bool interfaceMatches(std::string_view filter, std::string_view name);

// Usable interfaces (up, running, with an IPv4 or IPv6 address), in a stable order (by name).
// With an empty filter, loopback and container bridges ("docker", "virbr") are skipped unless
// nothing else is left, in which case loopback is used.
std::vector<Interface> discoverInterfaces(std::string_view filter);

std::string formatAddress(const sockaddr* address);

}  // namespace epx::plugin::socket
