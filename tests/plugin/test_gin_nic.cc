// Emulated NIC of the GIN ipc backend (pacing arithmetic, settings) and its counters (the
// exported epxGinIpcStats* API). No GPU needed.
#define BOOST_TEST_MODULE plugin_gin_nic
#include <boost/test/unit_test.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <random>
#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "epx/gin_stats.h"
#include "rig/ipc_stats.h"
#include "rig/nic_pacer.h"
#include "nccl_net.h"
#include "net_harness.h"

using namespace epx::plugin::gin;

namespace {

NicEmulation emu(double gbps, double latencyUs) {
  NicEmulation e;
  e.bytesPerSecond = static_cast<uint64_t>(gbps * 1e9);
  e.latencyNs = static_cast<uint64_t>(latencyUs * 1e3);
  return e;
}

std::string parse(const char* gbps, const char* latency, NicEmulation* out, std::string* note = nullptr) {
  std::string ignored;
  return parseNicEmulation(gbps, latency, out, note != nullptr ? note : &ignored);
}

}  // namespace

BOOST_AUTO_TEST_CASE(settings_parse_and_default_latency) {
  NicEmulation e;
  std::string note;
  BOOST_TEST(parse(nullptr, nullptr, &e, &note).empty());
  BOOST_TEST(!e.enabled());
  BOOST_TEST(note.empty());
  BOOST_TEST(parse("", "", &e).empty());
  BOOST_TEST(!e.enabled());
  BOOST_TEST(parse("0", nullptr, &e).empty());  // 0 = off
  BOOST_TEST(!e.enabled());
  BOOST_TEST(parse("0.0", "5", &e, &note).empty());
  BOOST_TEST(!e.enabled());
  BOOST_TEST(note.find("ignored") != std::string::npos);  // a latency without a rate is noted

  BOOST_TEST(parse("50", nullptr, &e, &note).empty());
  BOOST_TEST(note.empty());
  BOOST_TEST(e.bytesPerSecond == 50000000000ull);  // GB/s = 1e9 bytes/s: 400 Gb/s
  BOOST_TEST(e.latencyNs == 3000u);                 // default 3 us
  BOOST_TEST(e.gbps() == 50.0);
  BOOST_TEST(e.latencyUs() == 3.0);
  BOOST_TEST(parse("12.5", "1.5", &e).empty());
  BOOST_TEST(e.bytesPerSecond == 12500000000ull);
  BOOST_TEST(e.latencyNs == 1500u);
  BOOST_TEST(parse("1e3", "0", &e).empty());
  BOOST_TEST(e.bytesPerSecond == 1000000000000ull);
  BOOST_TEST(e.latencyNs == 0u);
  BOOST_TEST(parse("0.001", "1000000", &e).empty());  // the limits themselves
  BOOST_TEST(e.bytesPerSecond == 1000000u);
  BOOST_TEST(parse("10000", nullptr, &e).empty());
}

BOOST_AUTO_TEST_CASE(bad_settings_are_rejected_with_the_variable_named) {
  NicEmulation e;
  for (const char* bad : {"abc", "-1", "50GB", " 50", "50 ", "inf", "nan", "1e400", "0x10", "+5", "0.0001", "20000", "."}) {
    std::string err = parse(bad, nullptr, &e);
    BOOST_TEST_INFO("EPX_GIN_EMU_GBPS=" << bad);
    BOOST_TEST(err.find("EPX_GIN_EMU_GBPS") != std::string::npos);
    BOOST_TEST(err.find(bad) != std::string::npos);  // the value is quoted
    BOOST_TEST(!e.enabled());
  }
  for (const char* bad : {"-3", "x", "3us", "2e6", "nan"}) {
    BOOST_TEST_INFO("EPX_GIN_EMU_LATENCY_US=" << bad);
    BOOST_TEST(parse("50", bad, &e).find("EPX_GIN_EMU_LATENCY_US") != std::string::npos);
    BOOST_TEST(!e.enabled());
    BOOST_TEST(!parse(nullptr, bad, &e).empty());  // malformed even when the rate is off
  }
}

BOOST_AUTO_TEST_CASE(back_to_back_ops_serialize) {
  NicPacer nic(emu(1, 1));  // 1 byte per ns, 1 us
  BOOST_TEST(nic.freeAtNs() == 0u);
  for (uint64_t i = 1; i <= 4; ++i) {
    NicPacer::Slot s = nic.schedule(100, 1000);  // all issued at t = 100
    BOOST_TEST(s.departNs == 100 + i * 1000);
    BOOST_TEST(s.arriveNs == s.departNs + 1000);
    BOOST_TEST(s.notBeforeNs(false) == s.departNs);
    BOOST_TEST(s.notBeforeNs(true) == s.arriveNs);
  }
  BOOST_TEST(nic.freeAtNs() == 4100u);
  BOOST_TEST(nic.wireBytes() == 4000u);
  BOOST_TEST(nic.busyNs() == 4000u);
  // Issued while the NIC is still busy with earlier ops: waits for them.
  BOOST_TEST(nic.schedule(2000, 500).departNs == 4600u);
}

BOOST_AUTO_TEST_CASE(idle_gaps_restart_from_the_issue_time) {
  NicPacer nic(emu(1, 3));
  BOOST_TEST(nic.schedule(0, 1000).departNs == 1000u);
  NicPacer::Slot s = nic.schedule(5000, 1000);  // the NIC was idle from 1000 to 5000
  BOOST_TEST(s.departNs == 6000u);
  BOOST_TEST(s.arriveNs == 9000u);
  BOOST_TEST(nic.schedule(5500, 1000).departNs == 7000u);  // queued behind the previous op
  BOOST_TEST(nic.schedule(7000, 1).departNs == 7001u);     // issued exactly when free
  BOOST_TEST(nic.busyNs() == 3001u);                       // idle time is not busy time
}

BOOST_AUTO_TEST_CASE(fractional_serialization_times_do_not_drift) {
  // 50 GB/s: an 8-byte op takes 0.16 ns. Reported times round up, the schedule stays exact.
  NicPacer nic(emu(50, 3));
  NicPacer::Slot first = nic.schedule(1000, 8);
  BOOST_TEST(first.departNs == 1001u);
  NicPacer::Slot last{};
  for (int i = 1; i < 1000000; ++i) last = nic.schedule(1000, 8);
  BOOST_TEST(last.departNs == 1000u + 160000u);  // 8e6 bytes / 50 B/ns, exactly
  BOOST_TEST(nic.busyNs() == 160000u);
  // 3 GB/s: 1 byte = 1/3 ns.
  NicPacer third(emu(3, 0));
  BOOST_TEST(third.schedule(0, 1).departNs == 1u);  // ceil(1/3)
  BOOST_TEST(third.schedule(0, 1).departNs == 1u);  // ceil(2/3)
  BOOST_TEST(third.schedule(0, 1).departNs == 1u);  // exactly 1
  BOOST_TEST(third.schedule(0, 1).departNs == 2u);  // ceil(4/3)
  BOOST_TEST(third.freeAtNs() == 2u);
  // A large op: 64 GiB at 0.001 GB/s, 1 us per byte (bytes x 1e9 overflows 64 bits: no matter).
  NicPacer slow(emu(0.001, 0));
  BOOST_TEST(slow.schedule(0, 64ull << 30).departNs == (64ull << 30) * 1000u);
}

BOOST_AUTO_TEST_CASE(ops_without_payload_are_charged_a_header) {
  BOOST_TEST(nicWireBytes(0) == kNicHeaderBytes);
  BOOST_TEST(kNicHeaderBytes == 64u);
  BOOST_TEST(nicWireBytes(8) == 8u);  // a payload is charged as is, without headers
  NicPacer nic(emu(1, 2));
  NicPacer::Slot s = nic.schedule(0, 0);  // signal-only
  BOOST_TEST(s.departNs == 64u);
  BOOST_TEST(s.arriveNs == 2064u);
  BOOST_TEST(nic.schedule(0, 8).departNs == 72u);  // a put with signal: its payload only
  BOOST_TEST(nic.wireBytes() == 72u);
  BOOST_TEST(nicBusyNs(64, 0) == 0u);  // off
  BOOST_TEST(nicBusyNs(1000, 4000000000ull) == 250u);
}

BOOST_AUTO_TEST_CASE(arrivals_are_monotonic_so_signals_stay_ordered) {
  // Whatever the mix of sizes, peers and issue times, departures (and so arrivals, at a fixed
  // latency) never go backwards: a later signal cannot arrive before an earlier put.
  NicPacer nic(emu(25, 2));
  std::mt19937_64 rng(5);
  uint64_t t = 0, lastDepart = 0, lastArrive = 0;
  for (int i = 0; i < 100000; ++i) {
    t += rng() % 300;
    uint64_t bytes = (rng() % 4 == 0) ? 0 : rng() % 100000;
    NicPacer::Slot s = nic.schedule(t, bytes);
    BOOST_TEST_REQUIRE(s.departNs >= t + nicBusyNs(nicWireBytes(bytes), nic.emulation().bytesPerSecond));
    BOOST_TEST_REQUIRE(s.departNs >= lastDepart);
    BOOST_TEST_REQUIRE(s.arriveNs >= lastArrive);
    lastDepart = s.departNs;
    lastArrive = s.arriveNs;
  }
}

BOOST_AUTO_TEST_CASE(contexts_of_a_device_share_one_nic) {
  statsClearForTesting();
  std::string note;
  BOOST_TEST(sharedNic(0, NicEmulation{}, &note) == nullptr);  // emulation off: no NIC
  auto nic = sharedNic(0, emu(1, 1), &note);
  BOOST_TEST_REQUIRE(nic != nullptr);
  BOOST_TEST(note.empty());
  BOOST_TEST(sharedNic(0, emu(1, 1), &note) == nic);
  auto other = sharedNic(1, emu(1, 1), &note);
  BOOST_TEST(other != nic);  // another device: another NIC
  BOOST_TEST(sharedNic(0, emu(2, 1), &note) == nic);  // other settings: kept, with a note
  BOOST_TEST(note.find("keeping") != std::string::npos);

  auto c0 = openContextStats({7, 0, 2, 0, 0}, sharedNic(0, emu(1, 1), &note));
  auto c1 = openContextStats({7, 0, 2, 1, 0}, sharedNic(0, emu(1, 1), &note));
  BOOST_TEST(c0->nic() == c1->nic());
  // Context 0 and context 1 alternate 1000-byte ops at t = 0: one queue.
  BOOST_TEST(c0->nic()->schedule(0, 1000).departNs == 1000u);
  BOOST_TEST(c1->nic()->schedule(0, 1000).departNs == 2000u);
  BOOST_TEST(c0->nic()->schedule(0, 1000).departNs == 3000u);
  BOOST_TEST(other->schedule(0, 1000).departNs == 1000u);  // device 1's NIC is independent

  // Several threads (progress threads of several communicators) on one NIC: every op gets its own
  // slot and the total is exact.
  NicPacer shared(emu(1, 0));
  constexpr int kThreads = 4, kOps = 20000;
  std::vector<std::vector<uint64_t>> departs(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < kOps; ++i) departs[k].push_back(shared.schedule(0, 100).departNs);
    });
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& d : departs) {
    BOOST_TEST(std::is_sorted(d.begin(), d.end()));
    all.insert(d.begin(), d.end());
  }
  BOOST_TEST(all.size() == static_cast<size_t>(kThreads * kOps));
  BOOST_TEST(*all.begin() == 100u);
  BOOST_TEST(*all.rbegin() == 100u * kThreads * kOps);
  statsClearForTesting();
}

BOOST_AUTO_TEST_CASE(latency_counters) {
  statsClearForTesting();
  auto a = openContextStats({0xabc, 0, 3, 0, 0}, nullptr);
  a->opDone(1, true, 2000, 5000);
  a->opDone(1, false, 0, 1000);  // a signal-only op: no copy
  a->opDone(2, true, 4000, 9000);
  a->opIssued(1, 150);
  a->opIssued(1, 50);
  a->signalApplied(2, 700);
  a->signalApplied(2, 300);
  a->progressCall(1000000);  // first call: no gap yet
  a->progressCall(1500000);  // 0.5 ms
  a->progressCall(3600000);  // 2.1 ms: over 1 ms
  a->progressCall(3600500);
  a->applyBatch(8000);
  std::vector<epxGinIpcStats> s(3);
  BOOST_TEST(statsSnapshot(s.data(), 3) == 3);
  BOOST_TEST(s[1].completed == 2u);
  BOOST_TEST(s[1].copied == 1u);
  BOOST_TEST(s[1].copyNs == 2000u);
  BOOST_TEST(s[1].issueNs == 200u);
  BOOST_TEST(s[2].issueNs == 0u);
  BOOST_TEST(s[1].doneNs == 6000u);
  BOOST_TEST(s[2].completed == 1u);
  BOOST_TEST(s[2].signalsIn == 2u);
  BOOST_TEST(s[2].signalInNs == 1000u);
  for (const epxGinIpcStats& e : s) {  // per context: the same in every entry
    BOOST_TEST(e.progressCalls == 4u);
    BOOST_TEST(e.progressGapMaxNs == 2100000u);
    BOOST_TEST(e.progressGaps1ms == 1u);
    BOOST_TEST(e.applyBatches == 1u);
    BOOST_TEST(e.applyNs == 8000u);
  }
  statsReset();
  BOOST_TEST(statsSnapshot(s.data(), 3) == 3);
  BOOST_TEST(s[1].completed == 0u);
  BOOST_TEST(s[1].doneNs == 0u);
  BOOST_TEST(s[2].signalInNs == 0u);
  BOOST_TEST(s[0].progressGapMaxNs == 0u);
  a->progressCall(9000000);  // the first call after a reset starts a new gap count
  BOOST_TEST(statsSnapshot(s.data(), 3) == 3);
  BOOST_TEST(s[0].progressGapMaxNs == 0u);
  BOOST_TEST(s[0].progressCalls == 1u);
  statsClearForTesting();
}

BOOST_AUTO_TEST_CASE(counters_snapshot_reset_and_close) {
  statsClearForTesting();
  std::string note;
  auto nic = sharedNic(0, emu(1, 3), &note);
  auto a = openContextStats({0xabc, 1, 3, 0, 0}, nic);
  auto b = openContextStats({0xabc, 1, 3, 1, 0}, nic);
  a->count(0, 4096, false);
  a->count(0, 100, true);
  a->count(2, 0, true);  // signal-only
  a->count(2, 0, true);
  a->count(1, 8, false);  // self
  b->count(0, 0, false);  // a zero-byte put
  for (uint64_t bytes : {4096, 100, 0, 0, 8}) a->nic()->schedule(0, bytes);  // as ipcPut does
  b->nic()->schedule(0, 0);

  BOOST_TEST(statsSnapshot(nullptr, 0) == 6);  // 2 contexts x 3 peers
  std::vector<epxGinIpcStats> s(6);
  BOOST_TEST(statsSnapshot(s.data(), 2) == 6);  // only 2 written
  BOOST_TEST(statsSnapshot(s.data(), 6) == 6);
  const epxGinIpcStats& a0 = s[0];
  BOOST_TEST(a0.commHash == 0xabcu);
  BOOST_TEST(a0.rank == 1);
  BOOST_TEST(a0.nRanks == 3);
  BOOST_TEST(a0.context == 0);
  BOOST_TEST(a0.peer == 0);
  BOOST_TEST(a0.ops == 2u);
  BOOST_TEST(a0.puts == 1u);
  BOOST_TEST(a0.putSignals == 1u);
  BOOST_TEST(a0.signalOnly == 0u);
  BOOST_TEST(a0.signals == 1u);
  BOOST_TEST(a0.bytes == 4196u);
  BOOST_TEST(a0.wireBytes == 4196u);
  BOOST_TEST(a0.emuGBps == 1.0);
  BOOST_TEST(a0.emuLatencyUs == 3.0);
  BOOST_TEST(a0.busyNs == 4196u);
  BOOST_TEST(a0.nicBusyNs == 4196u + 128u + 8u + 64u);  // both contexts' ops on the one NIC
  BOOST_TEST(a0.closed == 0);
  BOOST_TEST(s[1].peer == 1);
  BOOST_TEST(s[1].puts == 1u);
  BOOST_TEST(s[2].signalOnly == 2u);
  BOOST_TEST(s[2].signals == 2u);
  BOOST_TEST(s[2].bytes == 0u);
  BOOST_TEST(s[2].wireBytes == 128u);
  BOOST_TEST(s[3].context == 1);
  BOOST_TEST(s[3].puts == 1u);
  BOOST_TEST(s[3].wireBytes == 64u);

  std::string line = a->summary();
  BOOST_TEST_MESSAGE(line);
  BOOST_TEST(line.find("rank 1 context 0") != std::string::npos);
  BOOST_TEST(line.find("5 ops (2 put, 1 put+signal, 2 signal-only)") != std::string::npos);
  BOOST_TEST(line.find("4.1KiB payload") != std::string::npos);
  BOOST_TEST(line.find("emulated NIC 1 GB/s + 3 us") != std::string::npos);
  BOOST_TEST(line.find("0:2/4.1KiB 1:1/8B 2:2/0B") != std::string::npos);

  // Closing keeps the entries until a reset; a reset zeroes the open ones and drops closed ones.
  a->close();
  BOOST_TEST(statsSnapshot(s.data(), 6) == 6);
  BOOST_TEST(s[0].closed == 1);
  statsReset();
  BOOST_TEST(statsSnapshot(s.data(), 6) == 3);
  BOOST_TEST(s[0].context == 1);
  BOOST_TEST(s[0].ops == 0u);
  BOOST_TEST(s[0].nicBusyNs == 0u);
  BOOST_TEST(nic->freeAtNs() > 0u);  // the schedule is not statistics: untouched
  statsClearForTesting();
}

BOOST_AUTO_TEST_CASE(summary_without_emulation_and_with_many_peers) {
  statsClearForTesting();
  auto c = openContextStats({1, 0, 20, 2, 0}, nullptr);
  for (int j = 0; j < 20; ++j) c->count(j, 3u << 20, true);
  std::string line = c->summary();
  BOOST_TEST_MESSAGE(line);
  BOOST_TEST(line.find("NIC emulation off") != std::string::npos);
  BOOST_TEST(line.find("20 ops (0 put, 20 put+signal, 0 signal-only), 60.0MiB payload") != std::string::npos);
  BOOST_TEST(line.find(" 7:1/3.0MiB +12 more") != std::string::npos);  // 8 peers listed
  BOOST_TEST(line.size() < 1000u);  // fits NCCL's log line
  epxGinIpcStats s;
  BOOST_TEST(statsSnapshot(&s, 1) == 20);
  BOOST_TEST(s.emuGBps == 0.0);
  BOOST_TEST(s.busyNs == 0u);
  BOOST_TEST(formatBytes(1023) == "1023B");
  BOOST_TEST(formatBytes(1024) == "1.0KiB");
  BOOST_TEST(formatBytes(3ull << 30) == "3.0GiB");
  statsClearForTesting();
}

BOOST_AUTO_TEST_CASE(snapshots_from_another_thread_see_monotonic_exact_counters) {
  statsClearForTesting();
  auto c = openContextStats({0, 0, 2, 0, 0}, nullptr);
  constexpr uint64_t kOps = 200000;
  std::atomic<bool> stop{false};
  std::thread progress([&] {
    for (uint64_t i = 0; i < kOps; ++i) c->count(1, 16, (i & 1) != 0);
    stop.store(true);
  });
  uint64_t lastOps = 0, lastBytes = 0;
  int snapshots = 0;
  while (!stop.load()) {
    epxGinIpcStats s[2];
    BOOST_TEST_REQUIRE(statsSnapshot(s, 2) == 2);
    BOOST_TEST_REQUIRE(s[1].ops >= lastOps);
    BOOST_TEST_REQUIRE(s[1].bytes >= lastBytes);
    lastOps = s[1].ops;
    lastBytes = s[1].bytes;
    ++snapshots;
  }
  progress.join();
  epxGinIpcStats s[2];
  statsSnapshot(s, 2);
  BOOST_TEST(s[1].ops == kOps);
  BOOST_TEST(s[1].puts == kOps / 2);
  BOOST_TEST(s[1].putSignals == kOps / 2);
  BOOST_TEST(s[1].bytes == 16 * kOps);
  BOOST_TEST(s[0].ops == 0u);
  BOOST_TEST_MESSAGE(snapshots << " snapshots during the run");
  statsClearForTesting();
}

BOOST_AUTO_TEST_CASE(exported_api_is_reachable_through_rtld_noload) {
  // As NCCL does: RTLD_LOCAL, so the functions are not global ...
  void* nccls = epx::test::openPlugin();
  BOOST_TEST_REQUIRE(nccls != nullptr);
  BOOST_TEST(dlsym(RTLD_DEFAULT, "epxGinIpcStatsSnapshot") == nullptr);
  // ... and a tool finds NCCL's copy with RTLD_NOLOAD.
  void* h = dlopen(EPX_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(h != nullptr);
  BOOST_TEST(h == nccls);
  auto version = reinterpret_cast<epxGinIpcStatsVersionFn>(dlsym(h, "epxGinIpcStatsVersion"));
  auto snapshot = reinterpret_cast<epxGinIpcStatsSnapshotFn>(dlsym(h, "epxGinIpcStatsSnapshot"));
  auto reset = reinterpret_cast<epxGinIpcStatsResetFn>(dlsym(h, "epxGinIpcStatsReset"));
  BOOST_TEST_REQUIRE(version != nullptr);
  BOOST_TEST_REQUIRE(snapshot != nullptr);
  BOOST_TEST_REQUIRE(reset != nullptr);
  BOOST_TEST(version() == EPX_GIN_IPC_STATS_VERSION);
  BOOST_TEST(snapshot(nullptr, 0) == 0);  // no GIN connection in this process
  reset();
  BOOST_TEST(snapshot(nullptr, -1) == 0);
  dlclose(h);  // drops the NOLOAD reference only
  BOOST_TEST(dlopen(EPX_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD) == nccls);
}

BOOST_AUTO_TEST_CASE(gin_init_refuses_bad_emulation_settings) {
  const auto* gin = epx::test::pluginSymbol<ncclGin_v11_t>("ncclGinPlugin_v11");
  BOOST_TEST_REQUIRE(gin != nullptr);
  void* ctx = nullptr;
  setenv("EPX_GIN_EMU_GBPS", "fast", 1);
  BOOST_TEST(gin->init(&ctx, 1, epx::test::captureLog) == ncclInvalidUsage);
  BOOST_TEST(ctx == nullptr);
  BOOST_TEST(epx::test::warned("EPX_GIN_EMU_GBPS=\"fast\""));
  BOOST_TEST(epx::test::warned("GIN init refused"));
  setenv("EPX_GIN_EMU_GBPS", "50", 1);
  setenv("EPX_GIN_EMU_LATENCY_US", "-1", 1);
  BOOST_TEST(gin->init(&ctx, 1, epx::test::captureLog) == ncclInvalidUsage);
  BOOST_TEST(epx::test::warned("EPX_GIN_EMU_LATENCY_US=\"-1\""));
  // Valid settings: init goes on as without them (declines here only for want of a CUDA driver).
  setenv("EPX_GIN_EMU_LATENCY_US", "2", 1);
  ncclResult_t r = gin->init(&ctx, 1, epx::test::captureLog);
  BOOST_TEST(r != ncclInvalidUsage);
  if (r == ncclSuccess) BOOST_TEST(ctx != nullptr);
  unsetenv("EPX_GIN_EMU_GBPS");
  unsetenv("EPX_GIN_EMU_LATENCY_US");
}
