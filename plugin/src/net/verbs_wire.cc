#include "net/verbs_wire.h"

#include <algorithm>
#include <cstring>

#include "common/fnv.h"

namespace epx::plugin::verbs {

namespace {


uint32_t handleChecksum(const Handle& h) {
  uint32_t c = fnv1a(&h, offsetof(Handle, checksum));
  return fnv1a(&h.address, sizeof h.address, c);
}

uint32_t connInfoChecksum(const ConnInfo& i) { return fnv1a(&i, offsetof(ConnInfo, checksum)); }

}  // namespace

void sealHandle(Handle& handle) {
  handle.magic = kHandleMagic;
  handle.version = kWireVersion;
  handle.checksum = handleChecksum(handle);
}

std::string validateHandle(const Handle& h) {
  if (h.magic != kHandleMagic) return "not an epx verbs handle (magic)";
  if (h.version != kWireVersion) return "verbs handle version " + std::to_string(h.version) + ", expected " + std::to_string(kWireVersion);
  if (h.checksum != handleChecksum(h)) return "verbs handle checksum mismatch (corrupted handle)";
  const sa_family_t fam = h.address.v4.sin_family;
  if (!((fam == AF_INET && h.addressLength == sizeof(sockaddr_in)) || (fam == AF_INET6 && h.addressLength == sizeof(sockaddr_in6))))
    return "verbs handle carries no IPv4/IPv6 address";
  return {};
}

void sealConnInfo(ConnInfo& info) {
  info.magic = kConnInfoMagic;
  info.version = kWireVersion;
  info.checksum = connInfoChecksum(info);
}

std::string validateConnInfo(const ConnInfo& r, const ConnInfo& local) {
  if (r.magic != kConnInfoMagic) return "peer sent no verbs connection info (magic)";
  if (r.version != kWireVersion) return "peer's verbs wire version " + std::to_string(r.version) + " differs from " + std::to_string(kWireVersion);
  if (r.checksum != connInfoChecksum(r)) return "peer's connection info is corrupted (checksum)";
  if (r.nQps < 1 || r.nQps > kMaxQps) return "peer announces " + std::to_string(r.nQps) + " QPs (1.." + std::to_string(kMaxQps) + ")";
  if (r.nQps != local.nQps) return "peer has " + std::to_string(r.nQps) + " QPs per connection, this side " + std::to_string(local.nQps) + " (set EPX_IB_QPS_PER_CONNECTION alike)";
  if (r.mtu < 1 || r.mtu > 5) return "peer's MTU code " + std::to_string(r.mtu) + " is not 1..5";
  if (r.fifoDepth != local.fifoDepth) return "peer's FIFO depth " + std::to_string(r.fifoDepth) + " differs from " + std::to_string(local.fifoDepth);
  if (r.ethernet != local.ethernet) return std::string("peer's port is ") + (r.ethernet ? "RoCE" : "InfiniBand") + ", this one " + (local.ethernet ? "RoCE" : "InfiniBand");
  if (!r.ethernet && r.lid == 0) return "peer's InfiniBand port has no LID (subnet manager not running?)";
  for (int q = 0; q < r.nQps; ++q)
    if (r.qpn[q] == 0 || r.qpn[q] > 0xffffff) return "peer's QP number " + std::to_string(r.qpn[q]) + " is not a 24-bit QPN";
  return {};
}

uint32_t encodeImm(uint64_t seq, int nChunks) {
  return static_cast<uint32_t>(seq & 0xffff) | (static_cast<uint32_t>(nChunks & 0xff) << 16) | (0xE5u << 24);
}

bool decodeImm(uint32_t imm, uint16_t* seqLow, int* nChunks) {
  if ((imm >> 24) != 0xE5u) return false;
  const int n = static_cast<int>((imm >> 16) & 0xff);
  if (n < 1 || n > kMaxQps) return false;
  *seqLow = static_cast<uint16_t>(imm & 0xffff);
  *nChunks = n;
  return true;
}

size_t ChunkPlan::length(int i, size_t size) const {
  const size_t off = offset(i);
  if (off >= size) return 0;
  return std::min(chunkBytes, size - off);
}

ChunkPlan planChunks(size_t size, int nQps, size_t minChunk) {
  nQps = std::clamp(nQps, 1, kMaxQps);
  minChunk = std::max<size_t>(minChunk, 1);
  if (size < 2 * minChunk || nQps == 1) return {1, size};
  const size_t wanted = std::min<size_t>(nQps, size / minChunk);
  size_t chunk = (size + wanted - 1) / wanted;
  chunk = (chunk + 4095) / 4096 * 4096;
  const int n = static_cast<int>((size + chunk - 1) / chunk);
  return {n, chunk};
}

}  // namespace epx::plugin::verbs
