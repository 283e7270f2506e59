#include "rig/ipc_stats.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

namespace epx::plugin::gin {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ContextStats>> contexts;  // connection order
  std::map<int, std::shared_ptr<NicPacer>> nics;        // by CUDA device
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: a tool may call in during exit
  return *r;
}

uint64_t load(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

std::string formatBytes(uint64_t bytes) {
  char text[32];
  if (bytes < 1024) {
    snprintf(text, sizeof(text), "%lluB", static_cast<unsigned long long>(bytes));
    return text;
  }
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  snprintf(text, sizeof(text), "%.1f%s", v, units[u]);
  return text;
}

ContextStats::ContextStats(const Identity& id, std::shared_ptr<NicPacer> nic)
    : id_(id), nic_(std::move(nic)), peers_(new PeerCounters[static_cast<size_t>(id.nRanks > 0 ? id.nRanks : 1)]) {}

void ContextStats::count(int peer, uint64_t payload, bool withSignal) {
  PeerCounters& c = peers_[static_cast<size_t>(peer)];
  if (!withSignal)
    c.puts.fetch_add(1, std::memory_order_relaxed);
  else if (payload > 0)
    c.putSignals.fetch_add(1, std::memory_order_relaxed);
  else
    c.signalOnly.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(payload, std::memory_order_relaxed);
  c.wireBytes.fetch_add(nicWireBytes(payload), std::memory_order_relaxed);
}

void ContextStats::opDone(int peer, bool withPayload, uint64_t copyNs, uint64_t doneNs) {
  PeerCounters& c = peers_[static_cast<size_t>(peer)];
  c.completed.fetch_add(1, std::memory_order_relaxed);
  c.doneNs.fetch_add(doneNs, std::memory_order_relaxed);
  if (withPayload) {
    c.copied.fetch_add(1, std::memory_order_relaxed);
    c.copyNs.fetch_add(copyNs, std::memory_order_relaxed);
  }
}

void ContextStats::opIssued(int peer, uint64_t ns) {
  peers_[static_cast<size_t>(peer)].issueNs.fetch_add(ns, std::memory_order_relaxed);
}

void ContextStats::signalApplied(int peer, uint64_t ns) {
  PeerCounters& c = peers_[static_cast<size_t>(peer)];
  c.signalsIn.fetch_add(1, std::memory_order_relaxed);
  c.signalInNs.fetch_add(ns, std::memory_order_relaxed);
}

void ContextStats::progressCall(uint64_t nowNs) {
  ProgressCounters& p = progress_;
  p.calls.fetch_add(1, std::memory_order_relaxed);
  const uint64_t last = p.lastNs.exchange(nowNs, std::memory_order_relaxed);
  if (last == 0 || nowNs <= last) return;  // first call since a reset
  const uint64_t gap = nowNs - last;
  if (gap > kProgressGapNs) p.gaps1ms.fetch_add(1, std::memory_order_relaxed);
  uint64_t seen = p.gapMaxNs.load(std::memory_order_relaxed);
  while (gap > seen && !p.gapMaxNs.compare_exchange_weak(seen, gap, std::memory_order_relaxed)) {
  }
}

void ContextStats::applyBatch(uint64_t ns) {
  progress_.applyBatches.fetch_add(1, std::memory_order_relaxed);
  progress_.applyNs.fetch_add(ns, std::memory_order_relaxed);
}

void ContextStats::reset() {
  for (int j = 0; j < id_.nRanks; ++j) {
    PeerCounters& c = peers_[static_cast<size_t>(j)];
    for (std::atomic<uint64_t>* a : {&c.puts, &c.putSignals, &c.signalOnly, &c.bytes, &c.wireBytes, &c.completed,
                                     &c.copied, &c.copyNs, &c.doneNs, &c.signalsIn, &c.signalInNs, &c.issueNs})
      a->store(0, std::memory_order_relaxed);
  }
  ProgressCounters& p = progress_;
  for (std::atomic<uint64_t>* a : {&p.calls, &p.lastNs, &p.gapMaxNs, &p.gaps1ms, &p.applyBatches, &p.applyNs})
    a->store(0, std::memory_order_relaxed);
}

void ContextStats::fill(int peer, epxGinIpcStats* out) const {
  const PeerCounters& c = peers_[static_cast<size_t>(peer)];
  *out = epxGinIpcStats{};
  out->commHash = id_.commHash;
  out->rank = id_.rank;
  out->nRanks = id_.nRanks;
  out->context = id_.context;
  out->peer = peer;
  out->cudaDev = id_.cudaDev;
  out->closed = closed() ? 1 : 0;
  out->puts = load(c.puts);
  out->putSignals = load(c.putSignals);
  out->signalOnly = load(c.signalOnly);
  out->ops = out->puts + out->putSignals + out->signalOnly;
  out->signals = out->putSignals + out->signalOnly;
  out->bytes = load(c.bytes);
  out->wireBytes = load(c.wireBytes);
  out->completed = load(c.completed);
  out->copied = load(c.copied);
  out->copyNs = load(c.copyNs);
  out->doneNs = load(c.doneNs);
  out->signalsIn = load(c.signalsIn);
  out->signalInNs = load(c.signalInNs);
  out->issueNs = load(c.issueNs);
  out->progressCalls = load(progress_.calls);
  out->progressGapMaxNs = load(progress_.gapMaxNs);
  out->progressGaps1ms = load(progress_.gaps1ms);
  out->applyBatches = load(progress_.applyBatches);
  out->applyNs = load(progress_.applyNs);
  if (nic_ != nullptr) {
    const NicEmulation& e = nic_->emulation();
    out->emuGBps = e.gbps();
    out->emuLatencyUs = e.latencyUs();
    out->busyNs = nicBusyNs(out->wireBytes, e.bytesPerSecond);
    out->nicBusyNs = nic_->busyNs();
  }
}

std::string ContextStats::summary() const {
  uint64_t puts = 0, putSignals = 0, signalOnly = 0, bytes = 0, wire = 0;
  std::string peers;
  int listed = 0, more = 0;
  for (int j = 0; j < id_.nRanks; ++j) {
    epxGinIpcStats s;
    fill(j, &s);
    puts += s.puts;
    putSignals += s.putSignals;
    signalOnly += s.signalOnly;
    bytes += s.bytes;
    wire += s.wireBytes;
    if (s.ops == 0) continue;
    if (listed == kSummaryPeers) {
      ++more;
      continue;
    }
    ++listed;
    char item[64];
    snprintf(item, sizeof(item), " %d:%llu/%s", j, static_cast<unsigned long long>(s.ops), formatBytes(s.bytes).c_str());
    peers += item;
  }
  if (more > 0) peers += " +" + std::to_string(more) + " more";
  if (peers.empty()) peers = " none";
  char text[512];
  int n = snprintf(text, sizeof(text),
                   "GIN/EPX-ipc rank %d context %d (comm %016llx, device %d): %llu ops (%llu put, %llu put+signal, "
                   "%llu signal-only), %s payload; ",
                   id_.rank, id_.context, static_cast<unsigned long long>(id_.commHash), id_.cudaDev,
                   static_cast<unsigned long long>(puts + putSignals + signalOnly), static_cast<unsigned long long>(puts),
                   static_cast<unsigned long long>(putSignals), static_cast<unsigned long long>(signalOnly),
                   formatBytes(bytes).c_str());
  std::string line(text, static_cast<size_t>(n > 0 ? std::min<int>(n, sizeof(text) - 1) : 0));
  if (nic_ != nullptr) {
    const NicEmulation& e = nic_->emulation();
    snprintf(text, sizeof(text), "emulated NIC %g GB/s + %g us, busy %.1f us (this context), %.1f us (NIC)", e.gbps(),
             e.latencyUs(), static_cast<double>(nicBusyNs(wire, e.bytesPerSecond)) / 1e3,
             static_cast<double>(nic_->busyNs()) / 1e3);
    line += text;
  } else {
    line += "NIC emulation off";
  }
  return line + "; per peer ops/bytes:" + peers;
}

std::shared_ptr<NicPacer> sharedNic(int cudaDev, const NicEmulation& emulation, std::string* note) {
  note->clear();
  if (!emulation.enabled()) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& nic = r.nics[cudaDev];
  if (nic == nullptr) {
    nic = std::make_shared<NicPacer>(emulation);
  } else if (!(nic->emulation() == emulation)) {
    char text[256];
    snprintf(text, sizeof(text),
             "device %d's emulated NIC already runs at %g GB/s + %g us; keeping it (asked for %g GB/s + %g us)", cudaDev,
             nic->emulation().gbps(), nic->emulation().latencyUs(), emulation.gbps(), emulation.latencyUs());
    *note = text;
  }
  return nic;
}

std::shared_ptr<ContextStats> openContextStats(const ContextStats::Identity& id, std::shared_ptr<NicPacer> nic) {
  auto stats = std::make_shared<ContextStats>(id, std::move(nic));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.contexts.push_back(stats);
  return stats;
}

int statsSnapshot(epxGinIpcStats* out, int maxEntries) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  int total = 0;
  for (const auto& c : r.contexts) {
    for (int j = 0; j < c->identity().nRanks; ++j, ++total)
      if (out != nullptr && total < maxEntries) c->fill(j, &out[total]);
  }
  return total;
}

void statsReset() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::shared_ptr<ContextStats>> open;
  for (auto& c : r.contexts) {
    if (c->closed()) continue;
    c->reset();
    open.push_back(c);
  }
  r.contexts.swap(open);
  for (auto& [dev, nic] : r.nics) nic->resetStats();
}

void statsClearForTesting() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.contexts.clear();
  r.nics.clear();
}

}  // namespace epx::plugin::gin
