#include "wire.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "../common/fnv.h"

namespace epx::plugin::socket {


uint32_t handleChecksum(const Handle& h) {
  uint32_t hash = kFnv1aOffset;
  hash = fnv1a(&h.magic, sizeof(h.magic), hash);
  hash = fnv1a(&h.version, sizeof(h.version), hash);
  hash = fnv1a(&h.nStreams, sizeof(h.nStreams), hash);
  hash = fnv1a(&h.addressLength, sizeof(h.addressLength), hash);
  hash = fnv1a(&h.address, sizeof(h.address), hash);
  return hash;
}

void sealHandle(Handle& handle) { handle.checksum = handleChecksum(handle); }

std::string validateHandle(const Handle& h) {
  if (h.magic != kHandleMagic) return "not an epx socket handle (bad magic)";
  if (h.version != kWireVersion)
    return "handle version " + std::to_string(h.version) + ", expected " +
           std::to_string(kWireVersion);
  if (h.checksum != handleChecksum(h)) return "handle is corrupt or truncated (checksum mismatch)";
  if (h.nStreams < 1 || h.nStreams > kMaxStreams)
    return "handle has " + std::to_string(h.nStreams) + " streams";
  int family = reinterpret_cast<const sockaddr*>(&h.address)->sa_family;
  if (family == AF_INET) {
    if (h.addressLength != sizeof(sockaddr_in) || h.address.v4.sin_port == 0)
      return "handle has a bad IPv4 address";
  } else if (family == AF_INET6) {
    if (h.addressLength != sizeof(sockaddr_in6) || h.address.v6.sin6_port == 0)
      return "handle has a bad IPv6 address";
  } else {
    return "handle has address family " + std::to_string(family);
  }
  return {};
}

std::string validateHello(const Hello& hello) {
  if (hello.magic != kHelloMagic) return "not an epx socket connection (bad hello magic)";
  if (hello.version != kWireVersion) return "peer speaks wire version " + std::to_string(hello.version);
  if (hello.nStreams < 1 || hello.nStreams > kMaxStreams || hello.streamIndex >= hello.nStreams)
    return "hello announces stream " + std::to_string(hello.streamIndex) + " of " +
           std::to_string(hello.nStreams);
  return {};
}

size_t Split::length(int part, size_t size) const {
  size_t begin = offset(part);
  if (begin >= size) return 0;
  return std::min(partSize, size - begin);
}

Split splitMessage(size_t size, int nStreams, size_t minPart) {
  minPart = std::max<size_t>(minPart, 1);
  if (nStreams <= 1 || size < 2 * minPart) return Split{size == 0 ? 0 : 1, size};
  size_t parts = std::min<size_t>(static_cast<size_t>(nStreams), size / minPart);
  constexpr size_t kAlign = 4096;
  size_t partSize = (size + parts - 1) / parts;
  partSize = (partSize + kAlign - 1) / kAlign * kAlign;
  int nParts = static_cast<int>((size + partSize - 1) / partSize);
  return Split{nParts, partSize};
}

std::string validateHeader(const MessageHeader& h, int nStreams) {
  if (h.magic != kHeaderMagic) return "stream out of sync (bad message header)";
  if (h.size == 0) return h.nParts == 0 ? std::string() : "empty message with parts";
  if (h.nParts < 1 || h.nParts > static_cast<uint32_t>(nStreams))
    return "message header announces " + std::to_string(h.nParts) + " parts on " +
           std::to_string(nStreams) + " streams";
  if (h.partSize == 0 || h.partSize > h.size || h.partSize * h.nParts < h.size || h.partSize * (h.nParts - 1) >= h.size)
    return "message header has an inconsistent split";
  return {};
}

}  // namespace epx::plugin::socket
