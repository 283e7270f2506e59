// FNV-1a (32-bit) over a byte range: the checksum of the plugin's wire handles and hellos.
#pragma once
#include <cstddef>
#include <cstdint>

namespace epx::plugin {

constexpr uint32_t kFnv1aOffset = 2166136261u;

inline uint32_t fnv1a(const void* data, size_t length, uint32_t hash = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < length; ++i) hash = (hash ^ bytes[i]) * 16777619u;
  return hash;
}

}  // namespace epx::plugin
