#include "epx/topology/busid.h"

#include <cstdio>
#include <cstdlib>

namespace epx::topo {

namespace {
bool parseHex(const std::string& s, size_t begin, size_t end, unsigned long max, unsigned long* out) {
  if (begin >= end || end - begin > 8) return false;
  unsigned long v = 0;
  for (size_t i = begin; i < end; ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = v * 16 + d;
  }
  if (v > max) return false;
  *out = v;
  return true;
}
}  // namespace

std::optional<PciAddress> parseBusId(const std::string& s) {
  // [domain:]bus:device.function
  size_t dot = s.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  size_t c2 = s.rfind(':', dot);
  if (c2 == std::string::npos) return std::nullopt;
  size_t c1 = c2 == 0 ? std::string::npos : s.rfind(':', c2 - 1);
  unsigned long dom = 0, bus = 0, dev = 0, fn = 0;
  size_t busBegin = 0;
  if (c1 != std::string::npos) {
    if (!parseHex(s, 0, c1, 0xffffffffUL, &dom)) return std::nullopt;
    busBegin = c1 + 1;
  }
  if (!parseHex(s, busBegin, c2, 0xff, &bus)) return std::nullopt;
  if (!parseHex(s, c2 + 1, dot, 0x1f, &dev)) return std::nullopt;
  if (!parseHex(s, dot + 1, s.size(), 0x7, &fn)) return std::nullopt;
  PciAddress a;
  a.domain = static_cast<uint32_t>(dom);
  a.bus = static_cast<uint8_t>(bus);
  a.device = static_cast<uint8_t>(dev);
  a.function = static_cast<uint8_t>(fn);
  return a;
}

bool isHiddenNvlinkPeer(const std::string& s) {
  std::string v = s;
  if (v.size() > 2 && v.compare(v.size() - 2, 2, ".0") == 0) v.resize(v.size() - 2);
  int fs = 0, colons = 0;
  for (char c : v) {
    if (c == 'f' || c == 'F') ++fs;
    else if (c == ':') ++colons;
    else if (c != '.') return false;
  }
  return colons > 0 && fs >= 6;
}

std::string formatBusId(const PciAddress& a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function);
  return buf;
}

}  // namespace epx::topo
