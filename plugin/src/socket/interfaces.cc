#include "interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace epx::plugin::socket {

namespace {

bool prefixListMatches(std::string_view list, std::string_view name, bool exact) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(start, end - start);
    if (!item.empty()) {
      if (exact ? name == item : name.substr(0, item.size()) == item) return true;
    }
    start = end + 1;
  }
  return false;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

void describe(Interface& itf) {
  std::string device = "/sys/class/net/" + itf.name + "/device";
  char resolved[PATH_MAX];
  if (realpath(device.c_str(), resolved) != nullptr) {
    std::string subsystem = std::string(resolved) + "/subsystem";
    char sub[PATH_MAX];
    if (realpath(subsystem.c_str(), sub) != nullptr) {
      std::string s(sub);
      if (s.size() >= 3 && s.compare(s.size() - 3, 3, "pci") == 0) itf.pciPath = resolved;
    }
  }
  std::string speed = readFirstLine("/sys/class/net/" + itf.name + "/speed");
  int mbps = speed.empty() ? 0 : atoi(speed.c_str());
  itf.speedMbps = mbps > 0 ? mbps : 0;
}

}  // namespace

bool interfaceMatches(std::string_view filter, std::string_view name) {
  if (filter.empty()) return true;
  bool exclude = false;
  if (filter.front() == '^') {
    exclude = true;
    filter.remove_prefix(1);
  }
  bool exact = false;
  if (!filter.empty() && filter.front() == '=') {
    exact = true;
    filter.remove_prefix(1);
  }
  bool listed = prefixListMatches(filter, name, exact);
  return exclude ? !listed : listed;
}

std::vector<Interface> discoverInterfaces(std::string_view filter) {
  std::vector<Interface> all;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return all;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (!(it->ifa_flags & IFF_UP) || !(it->ifa_flags & IFF_RUNNING)) continue;
    if (family == AF_INET6) {
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id; skip
    }
    std::string name = it->ifa_name;
    if (!interfaceMatches(filter, name)) continue;
    auto existing = std::find_if(all.begin(), all.end(),
                                 [&](const Interface& i) { return i.name == name; });
    if (existing != all.end()) {
      // Prefer IPv4 when an interface has both.
      if (existing->address.ss_family == AF_INET6 && family == AF_INET) {
        memset(&existing->address, 0, sizeof(existing->address));
        memcpy(&existing->address, it->ifa_addr, sizeof(sockaddr_in));
        existing->addressLength = sizeof(sockaddr_in);
      }
      continue;
    }
    Interface itf;
    itf.name = name;
    memset(&itf.address, 0, sizeof(itf.address));
    socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&itf.address, it->ifa_addr, length);
    itf.addressLength = length;
    itf.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    all.push_back(itf);
  }
  freeifaddrs(list);
  for (Interface& itf : all) {
    if (itf.address.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&itf.address)->sin_port = 0;
    else
      reinterpret_cast<sockaddr_in6*>(&itf.address)->sin6_port = 0;
  }
  std::sort(all.begin(), all.end(),
            [](const Interface& a, const Interface& b) { return a.name < b.name; });

  std::vector<Interface> chosen;
  if (filter.empty()) {
    for (const Interface& itf : all) {
      bool bridge = itf.name.rfind("docker", 0) == 0 || itf.name.rfind("virbr", 0) == 0;
      if (!itf.loopback && !bridge) chosen.push_back(itf);
    }
    if (chosen.empty()) {
      for (const Interface& itf : all)
        if (itf.loopback) chosen.push_back(itf);
    }
  } else {
    chosen = all;
  }
  for (Interface& itf : chosen) describe(itf);
  return chosen;
}

std::string formatAddress(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address->sa_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (address->sa_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "<family " + std::to_string(address->sa_family) + ">";
}

}  // namespace epx::plugin::socket
