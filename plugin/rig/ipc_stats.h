// Per-(context, peer) counters of the ipc GIN backend and the process-wide state behind the
// exported epxGinIpcStats* functions (plugin/include/epx/gin_stats.h): the list of contexts and
// the emulated NICs, one per CUDA device. No CUDA.
//
// Threads: a context's progress thread calls count(); tools call statsSnapshot/statsReset from
// any thread. Counters are relaxed atomics (no lock on the op path); the registry's mutex guards
// only the list of contexts and NICs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "epx/gin_stats.h"
#include "rig/nic_pacer.h"

namespace epx::plugin::gin {

class ContextStats {
 public:
  struct Identity {
    uint64_t commHash = 0;
    int rank = 0;
    int nRanks = 1;
    int context = 0;
    int cudaDev = 0;
  };
  // nic: the device's emulated NIC, or null when emulation is off.
  ContextStats(const Identity& id, std::shared_ptr<NicPacer> nic);
  const Identity& identity() const { return id_; }
  NicPacer* nic() const { return nic_.get(); }
  // One op to `peer` (0 <= peer < nRanks): a put, a put with signal, or (payload 0 with signal)
  // a signal-only op.
  void count(int peer, uint64_t payload, bool withSignal);
  // Latency accounting (epxGinIpcStats version 2), all in ns. An op to `peer` reported done
  // doneNs after it was issued; with a payload, its copy was seen complete copyNs after.
  void opDone(int peer, bool withPayload, uint64_t copyNs, uint64_t doneNs);
  // An op to `peer` took ns inside the put call (its CUDA work queued).
  void opIssued(int peer, uint64_t ns);
  // A signal from `peer` applied ns after its message was received.
  void signalApplied(int peer, uint64_t ns);
  // A progress call at host time nowNs (steady clock), to find the gaps between calls.
  void progressCall(uint64_t nowNs);
  // One signal apply batch (a signal kernel launch, or a read-back without it) that took ns.
  void applyBatch(uint64_t ns);
  void close() { closed_.store(true, std::memory_order_release); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  void reset();
  void fill(int peer, epxGinIpcStats* out) const;
  // The INFO line logged when the context closes: totals, emulation, and per-peer ops/bytes for
  // at most kSummaryPeers peers that saw ops ("+N more" after that).
  std::string summary() const;
  static constexpr int kSummaryPeers = 8;
  // A gap between two progress calls longer than this is counted in progressGaps1ms.
  static constexpr uint64_t kProgressGapNs = 1000000;

 private:
  struct PeerCounters {
    std::atomic<uint64_t> puts{0}, putSignals{0}, signalOnly{0}, bytes{0}, wireBytes{0};
    std::atomic<uint64_t> completed{0}, copied{0}, copyNs{0}, doneNs{0}, signalsIn{0}, signalInNs{0}, issueNs{0};
  };
  struct ProgressCounters {
    std::atomic<uint64_t> calls{0}, lastNs{0}, gapMaxNs{0}, gaps1ms{0}, applyBatches{0}, applyNs{0};
  };
  ProgressCounters progress_;
  Identity id_;
  std::shared_ptr<NicPacer> nic_;
  std::unique_ptr<PeerCounters[]> peers_;
  std::atomic<bool> closed_{false};
};

// The emulated NIC of `cudaDev` in this process, created with `emulation` on first use; null when
// emulation is off. If it already exists with other settings, it is kept and *note says so.
std::shared_ptr<NicPacer> sharedNic(int cudaDev, const NicEmulation& emulation, std::string* note);
// Creates a context's counters and lists them for snapshots.
std::shared_ptr<ContextStats> openContextStats(const ContextStats::Identity& id, std::shared_ptr<NicPacer> nic);
// See epxGinIpcStatsSnapshot / epxGinIpcStatsReset.
int statsSnapshot(epxGinIpcStats* out, int maxEntries);
void statsReset();
// Tests: forget every context and NIC.
void statsClearForTesting();

// "512B", "4.0KiB", "1.5MiB", "2.0GiB".
std::string formatBytes(uint64_t bytes);

}  // namespace epx::plugin::gin
