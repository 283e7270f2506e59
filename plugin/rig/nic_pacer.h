// Emulated NIC of the ipc GIN backend (EPX_GIN_EMU_GBPS, EPX_GIN_EMU_LATENCY_US): the pacing
// arithmetic only. No CUDA, no clock: callers pass times in nanoseconds.
//
// One NIC per rank, shared by all of the rank's GIN contexts and peers. An op that puts B bytes
// on the wire and is issued at time t departs at d = max(t, freeAt) + B / rate (freeAt = d
// afterwards) and arrives at a = d + latency. Departures are kept exactly (whole nanoseconds
// plus a remainder in units of 1/rate), so long runs of small ops do not drift; the times
// reported are rounded up to the next nanosecond, never down.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace epx::plugin::gin {

// Bytes charged for an op without payload (signal-only, or a zero-byte put): a stand-in for the
// headers of an RDMA atomic or empty write. Ops with a payload are charged their payload only.
constexpr uint64_t kNicHeaderBytes = 64;
constexpr double kNicDefaultLatencyUs = 3.0;
// Accepted ranges. The rate is in GB/s (1e9 bytes/s): 50 means 400 Gb/s.
constexpr double kNicMinGBps = 0.001;
constexpr double kNicMaxGBps = 10000.0;
constexpr double kNicMaxLatencyUs = 1e6;

struct NicEmulation {
  uint64_t bytesPerSecond = 0;  // 0: emulation off
  uint64_t latencyNs = 0;
  bool enabled() const { return bytesPerSecond != 0; }
  double gbps() const { return static_cast<double>(bytesPerSecond) / 1e9; }
  double latencyUs() const { return static_cast<double>(latencyNs) / 1e3; }
  bool operator==(const NicEmulation& o) const {
    return bytesPerSecond == o.bytesPerSecond && latencyNs == o.latencyNs;
  }
};

// Parses the texts of EPX_GIN_EMU_GBPS and EPX_GIN_EMU_LATENCY_US (nullptr or "" = unset).
// Returns "" and fills *out on success; otherwise returns the error text (naming the variable and
// the value) and leaves *out off. A rate of 0 (or unset) is off. The latency defaults to
// kNicDefaultLatencyUs when a rate is set; a valid latency without a rate sets *note (ignored).
std::string parseNicEmulation(const char* gbps, const char* latencyUs, NicEmulation* out,
                              std::string* note);

// Bytes an op of `payload` bytes puts on the emulated wire.
inline uint64_t nicWireBytes(uint64_t payload) { return payload == 0 ? kNicHeaderBytes : payload; }

// Serialization time of `wireBytes` at `bytesPerSecond`, in ns (rounded down; 0 when off).
uint64_t nicBusyNs(uint64_t wireBytes, uint64_t bytesPerSecond);

// One emulated NIC. Thread-safe: several contexts (and their progress threads) may share it.
class NicPacer {
 public:
  struct Slot {
    uint64_t departNs;  // the op has left the NIC: its source may be reported consumed
    uint64_t arriveNs;  // departNs + latency: its signal may become visible at the target
    // When the backend may report the op done: its departure for a put; its arrival for an op
    // with a signal (done = signal delivered, as an RDMA atomic completes after it landed).
    uint64_t notBeforeNs(bool withSignal) const { return withSignal ? arriveNs : departNs; }
  };
  explicit NicPacer(const NicEmulation& emulation);
  const NicEmulation& emulation() const { return emulation_; }
  // Schedules an op of `payloadBytes` (charged nicWireBytes) issued at `issueNs`.
  Slot schedule(uint64_t issueNs, uint64_t payloadBytes);
  // When the NIC is next free (rounded up); 0 before the first op.
  uint64_t freeAtNs() const;
  // Statistics since construction or resetStats: wire bytes charged and their serialization time.
  uint64_t wireBytes() const;
  uint64_t busyNs() const { return nicBusyNs(wireBytes(), emulation_.bytesPerSecond); }
  void resetStats();

 private:
  const NicEmulation emulation_;
  mutable std::mutex mutex_;
  uint64_t freeNs_ = 0;   // the NIC is free at freeNs_ + freeRem_ / bytesPerSecond
  uint64_t freeRem_ = 0;  // < bytesPerSecond
  uint64_t wireBytes_ = 0;
};

}  // namespace epx::plugin::gin
