// epx topology: PCI bus ids ("DDDD:BB:DD.F").
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace epx::topo {

/// A PCI address. `domain` is 32-bit because NVML and NCCL print 8-digit domains.
struct PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0, device = 0, function = 0;

  auto operator<=>(const PciAddress&) const = default;
  /// Same physical device (all functions of one card share domain:bus:device).
  bool sameDevice(const PciAddress& o) const {
    return domain == o.domain && bus == o.bus && device == o.device;
  }
};

/// Parses "0000:19:00.0", "00000000:19:00.0" or "19:00.0" (domain 0); case-insensitive.
std::optional<PciAddress> parseBusId(const std::string& s);

/// Far end of an NVLink that a VM guest cannot see (an NVSwitch of the host): NVML reports
/// "FFFFFFFF:FF:FF.0", NCCL writes "fffffff:ffff:ff". epx uses this spelling as that edge's target.
inline constexpr const char* kHiddenNvlinkPeer = "ffffffff:ff:ff.0";

/// True for the all-F bus ids above (any case and grouping, optional ".0"); parseBusId() rejects them.
bool isHiddenNvlinkPeer(const std::string& s);

/// Formats as "dddd:bb:dd.f" (lowercase; the domain widens past 4 digits when needed).
std::string formatBusId(const PciAddress& a);

}  // namespace epx::topo
