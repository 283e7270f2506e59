#include "rig/nic_pacer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace epx::plugin::gin {

namespace {

using u128 = unsigned __int128;

// Strict decimal number: digits, one optional '.', optional exponent; nothing else (no sign,
// no hex, no "inf"/"nan", no blanks). Returns false with *why set otherwise.
bool parseDecimal(const char* text, double* value, std::string* why) {
  size_t n = strlen(text);
  if (n == 0 || strspn(text, "0123456789.eE+-") != n || !(isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) {
    *why = "not a non-negative decimal number";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end != text + n || errno == ERANGE || !std::isfinite(v)) {
    *why = "not a non-negative decimal number";
    return false;
  }
  *value = v;
  return true;
}

std::string quoted(const char* name, const char* text) { return std::string(name) + "=\"" + text + "\""; }

std::string number(double v) {
  char text[32];
  snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

std::string parseNicEmulation(const char* gbps, const char* latencyUs, NicEmulation* out, std::string* note) {
  *out = NicEmulation{};
  note->clear();
  bool haveRate = gbps != nullptr && *gbps != '\0';
  bool haveLatency = latencyUs != nullptr && *latencyUs != '\0';
  double rate = 0, latency = kNicDefaultLatencyUs;
  std::string why;
  if (haveRate) {
    if (!parseDecimal(gbps, &rate, &why)) return quoted("EPX_GIN_EMU_GBPS", gbps) + ": " + why + " (GB/s, e.g. 50 for 400 Gb/s; 0 = off)";
    if (rate != 0 && (rate < kNicMinGBps || rate > kNicMaxGBps))
      return quoted("EPX_GIN_EMU_GBPS", gbps) + ": outside " + number(kNicMinGBps) + ".." + number(kNicMaxGBps) + " GB/s (0 = off)";
  }
  if (haveLatency) {
    if (!parseDecimal(latencyUs, &latency, &why)) return quoted("EPX_GIN_EMU_LATENCY_US", latencyUs) + ": " + why + " (microseconds)";
    if (latency > kNicMaxLatencyUs)
      return quoted("EPX_GIN_EMU_LATENCY_US", latencyUs) + ": above " + number(kNicMaxLatencyUs) + " us";
  }
  if (rate == 0) {
    if (haveLatency) *note = quoted("EPX_GIN_EMU_LATENCY_US", latencyUs) + " ignored: EPX_GIN_EMU_GBPS is not set (NIC emulation off)";
    return {};
  }
  out->bytesPerSecond = static_cast<uint64_t>(std::llround(rate * 1e9));
  out->latencyNs = static_cast<uint64_t>(std::llround(latency * 1e3));
  return {};
}

uint64_t nicBusyNs(uint64_t wireBytes, uint64_t bytesPerSecond) {
  if (bytesPerSecond == 0) return 0;
  return static_cast<uint64_t>(static_cast<u128>(wireBytes) * 1000000000u / bytesPerSecond);
}

NicPacer::NicPacer(const NicEmulation& emulation) : emulation_(emulation) {}

NicPacer::Slot NicPacer::schedule(uint64_t issueNs, uint64_t payloadBytes) {
  const uint64_t rate = emulation_.bytesPerSecond;
  const uint64_t wire = nicWireBytes(payloadBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  wireBytes_ += wire;
  if (rate == 0) return Slot{issueNs, issueNs + emulation_.latencyNs};
  // Start when both the op and the NIC are ready: (issueNs, 0) against (freeNs_, freeRem_).
  uint64_t startNs = freeNs_, startRem = freeRem_;
  if (issueNs > freeNs_) {
    startNs = issueNs;
    startRem = 0;
  }
  u128 num = static_cast<u128>(wire) * 1000000000u + startRem;
  freeNs_ = startNs + static_cast<uint64_t>(num / rate);
  freeRem_ = static_cast<uint64_t>(num % rate);
  uint64_t depart = freeNs_ + (freeRem_ != 0 ? 1 : 0);
  return Slot{depart, depart + emulation_.latencyNs};
}

uint64_t NicPacer::freeAtNs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return freeNs_ + (freeRem_ != 0 ? 1 : 0);
}

uint64_t NicPacer::wireBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wireBytes_;
}

void NicPacer::resetStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  wireBytes_ = 0;
}

}  // namespace epx::plugin::gin
