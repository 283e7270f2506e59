// CPU tests of the device protocol's pure logic (device/include/epx/device/protocol.h) and of the
// async-error report (host/src/core/async_error.h).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "core/async_error.h"
#include "epx/device/protocol.h"

using namespace epx;

BOOST_AUTO_TEST_CASE(gin_signal_ids_are_unique_and_in_range) {
  for (int R : {1, 2, 8, 1024}) {
    std::set<uint32_t> seen;
    for (int kind = 0; kind < dev::kNumFlagKinds; ++kind)
      for (int src = 0; src < R; ++src) {
        const uint32_t id = dev::ginSignalId(kind, src, R);
        BOOST_TEST(id < uint32_t(dev::ginSignalCount(R)));
        BOOST_TEST(seen.insert(id).second);
      }
    // NCCL 2.28.9's proxy descriptor carries 16-bit signal ids from a 65536-signal pool.
    BOOST_TEST(dev::ginSignalCount(R) <= 65536);
  }
}

BOOST_AUTO_TEST_CASE(cumulative_words_compare_across_wraparound) {
  BOOST_TEST(dev::reached(5, 5));
  BOOST_TEST(!dev::reached(4, 5));
  BOOST_TEST(dev::reached(3, 0xfffffff0u));   // wrapped past the target
  BOOST_TEST(!dev::reached(0xfffffff0u, 3));  // not yet wrapped
  // A running total of rows (GIN arrivals) over many ops: target = base + rows.
  uint32_t base = 0xffffff00u, signal = base;
  for (int op = 0; op < 1000; ++op) {
    const uint32_t rows = uint32_t(op * 37 % 4096);
    const uint32_t target = base + rows;
    if (rows) BOOST_TEST(!dev::reached(signal, target));
    signal += rows;  // every context's adds summed
    BOOST_TEST(dev::reached(signal, target));
    base = target;
  }
  // LSA arrivals: seq * nCtas per op.
  BOOST_TEST(dev::reached(uint32_t(100000u * 132u), uint32_t(100000u * 132u)));
}

BOOST_AUTO_TEST_CASE(shares_are_contiguous_and_cover_everything) {
  for (int n : {0, 1, 7, 4096, 4097})
    for (int parts : {1, 3, 16, 132}) {
      int next = 0;
      for (int p = 0; p < parts; ++p) {
        const dev::Share s = dev::shareOf(n, parts, p);
        BOOST_TEST(s.begin == next);
        BOOST_TEST(s.end >= s.begin);
        BOOST_TEST(s.end - s.begin <= n / parts + 1);
        next = s.end;
      }
      BOOST_TEST(next == n);
    }
}

// The GIN put of a CTA's rows to one destination is one contiguous range: the rows a contiguous
// share of tokens sends to rank d have consecutive slots among this rank's rows to d.
BOOST_AUTO_TEST_CASE(a_ctas_rows_to_a_destination_are_contiguous) {
  std::mt19937 rng(7);
  const int T = 3000, K = 8, R = 64, E = 256, Le = E / R;
  std::vector<int> slotOf(T * R, -1), count(R, 0);
  for (int t = 0; t < T; ++t) {
    std::set<int> dests;
    for (int k = 0; k < K; ++k) {
      const int e = int(rng() % E);
      if (rng() % 5 == 0) continue;  // masked slot
      dests.insert(dev::destOf(e, Le));
    }
    for (int d : dests) slotOf[t * R + d] = count[d]++;  // token order, as the layout kernel numbers them
  }
  for (int parts : {1, 8, 24, 132})
    for (int p = 0; p < parts; ++p) {
      const dev::Share s = dev::shareOf(T, parts, p);
      for (int d = 0; d < R; ++d) {
        int first = -1, last = -1, n = 0;
        for (int t = s.begin; t < s.end; ++t)
          if (slotOf[t * R + d] >= 0) {
            if (first < 0) first = slotOf[t * R + d];
            last = slotOf[t * R + d];
            ++n;
          }
        if (n) BOOST_TEST(last - first + 1 == n);
      }
    }
}

BOOST_AUTO_TEST_CASE(put_rounds_cover_whole_layout_chunks) {
  BOOST_TEST(dev::putRoundsOf(8, false, dev::kMaxPutRounds) == 1);  // NVLink only: one pass, no rounds
  BOOST_TEST(dev::putRoundsOf(0, true, dev::kMaxPutRounds) == 1);
  BOOST_TEST(dev::putRoundsOf(1, true, dev::kMaxPutRounds) == 1);
  BOOST_TEST(dev::putRoundsOf(3, true, dev::kMaxPutRounds) == 3);
  BOOST_TEST(dev::putRoundsOf(128, true, dev::kMaxPutRounds) == dev::kMaxPutRounds);
  BOOST_TEST(dev::putRoundsOf(128, true, 2) == 2);
  BOOST_TEST(dev::putRoundsOf(128, true, 0) == 1);    // clamped up
  BOOST_TEST(dev::putRoundsOf(128, true, 99) == dev::kMaxPutRounds);  // clamped down
  for (int T : {0, 1, 511, 512, 513, 2047, 4096, 5000, 65536}) {
    const int chunks = (T + dev::kLayoutChunk - 1) / dev::kLayoutChunk;
    for (bool gin : {false, true}) {
      const int rounds = dev::putRoundsOf(chunks, gin, dev::kMaxPutRounds);
      BOOST_TEST(rounds >= 1);
      BOOST_TEST(rounds <= dev::kMaxPutRounds);
      int next = 0;
      for (int j = 0; j < rounds; ++j) {
        const dev::Share tok = dev::dispatchRoundTokens(T, rounds, j);
        BOOST_TEST(tok.begin == next);
        BOOST_TEST(tok.end >= tok.begin);
        BOOST_TEST((tok.end == T || tok.end % dev::kLayoutChunk == 0));  // rounds end on chunk bounds
        if (gin && chunks >= rounds) BOOST_TEST(tok.end > tok.begin);   // no empty round
        next = tok.end;
      }
      BOOST_TEST(next == T);
    }
  }
}

// Combine rounds: round j carries the j-th share of every network source's rows, so over the
// rounds each source's rows go back in order (its arrival count is a prefix) and every round
// reaches every source that still has rows; NVLink sources (no GIN rows) get nothing.
BOOST_AUTO_TEST_CASE(combine_rounds_give_every_source_a_prefix) {
  const int R = 8;
  const std::vector<int> rows = {0, 3400, 1, 0, 3, 9000, 7, 2};  // GIN rows from each source (0: NVLink or none)
  std::vector<int> ginBase(R + 1, 0);
  for (int s = 0; s < R; ++s) ginBase[s + 1] = ginBase[s] + rows[s];
  for (int rounds = 1; rounds <= dev::kMaxPutRounds; ++rounds) {
    std::vector<int> next(ginBase.begin(), ginBase.end() - 1);
    for (int j = 0; j < rounds; ++j)
      for (int s = 0; s < R; ++s) {
        const dev::Share p = dev::combineRoundRows(ginBase.data(), s, rounds, j);
        BOOST_TEST(p.begin == next[s]);
        BOOST_TEST(p.end >= p.begin);
        // Shares of one source differ by at most one row between rounds.
        BOOST_TEST(p.end - p.begin <= rows[s] / rounds + 1);
        if (rows[s] >= rounds) BOOST_TEST(p.end > p.begin);
        next[s] = p.end;
      }
    for (int s = 0; s < R; ++s) BOOST_TEST(next[s] == ginBase[s + 1], "rounds " << rounds << " source " << s);
  }
}

// Layout numbering as the layout kernel does it: chunk-local slots in token order, chunkRankBase
// [chunks][R] the rows to each rank in earlier chunks, sendCount [R].
struct ChunkedRoute {
  std::vector<int> slot;  // [T][R] chunk-local slot of token t's row to rank d, or -1
  std::vector<int> chunkRankBase, sendCount;
  int gslot(int t, int d, int R) const { return chunkRankBase[(t / dev::kLayoutChunk) * R + d] + slot[t * R + d]; }
};

ChunkedRoute randomRoute(std::mt19937& rng, int T, int R, int K, int E) {
  ChunkedRoute cr;
  const int chunks = (T + dev::kLayoutChunk - 1) / dev::kLayoutChunk;
  cr.slot.assign(size_t(T) * R, -1);
  cr.chunkRankBase.assign(size_t(chunks) * R, 0);
  cr.sendCount.assign(R, 0);
  std::vector<int> inChunk(R, 0);
  for (int t = 0; t < T; ++t) {
    if (t % dev::kLayoutChunk == 0) {
      for (int d = 0; d < R; ++d) cr.chunkRankBase[(t / dev::kLayoutChunk) * R + d] = cr.sendCount[d];
      std::fill(inChunk.begin(), inChunk.end(), 0);
    }
    std::set<int> dests;
    const bool oneExpert = rng() % 7 == 0;  // all of the token's slots on expert 0
    for (int k = 0; k < K; ++k) {
      if (rng() % 5 == 0) continue;  // masked slot
      dests.insert(dev::destOf(oneExpert ? 0 : int(rng() % E), E / R));
    }
    for (int d : dests) {
      cr.slot[size_t(t) * R + d] = inChunk[d]++;
      ++cr.sendCount[d];
    }
  }
  return cr;
}

// Dispatch put round j to destination d moves rows [rowsBeforeToken(begin), rowsBeforeToken(end)):
// exactly the rows of the round's tokens; the rounds partition d's rows.
BOOST_AUTO_TEST_CASE(a_put_rounds_rows_to_a_destination_are_its_tokens_rows) {
  std::mt19937 rng(11);
  for (int T : {1, 600, 4096, 5000}) {
    const int R = 8, K = 8, E = 64;
    const ChunkedRoute cr = randomRoute(rng, T, R, K, E);
    const int rounds = dev::putRoundsOf((T + dev::kLayoutChunk - 1) / dev::kLayoutChunk, true, dev::defaultPutRounds(1));
    for (int d = 0; d < R; ++d) {
      int next = 0;
      for (int j = 0; j < rounds; ++j) {
        const dev::Share tok = dev::dispatchRoundTokens(T, rounds, j);
        const int lo = dev::rowsBeforeToken(cr.chunkRankBase.data(), cr.sendCount.data(), R, T, tok.begin, d);
        const int hi = dev::rowsBeforeToken(cr.chunkRankBase.data(), cr.sendCount.data(), R, T, tok.end, d);
        BOOST_TEST(lo == next);
        std::set<int> rows;
        for (int t = tok.begin; t < tok.end; ++t)
          if (cr.slot[size_t(t) * R + d] >= 0) rows.insert(cr.gslot(t, d, R));
        BOOST_TEST(int(rows.size()) == hi - lo);
        if (!rows.empty()) {
          BOOST_TEST(*rows.begin() == lo);
          BOOST_TEST(*rows.rbegin() == hi - 1);
        }
        next = hi;
      }
      BOOST_TEST(next == cr.sendCount[d]);
    }
  }
}

// Receive waves: for every row count and wave count, the waves' row ranges are in order, cover
// [0, n) exactly, agree with waveOfRow row by row, and a wave's arrival target (the next wave's
// first row) is monotonic and ends at n; one wave is the whole source.
BOOST_AUTO_TEST_CASE(receive_waves_partition_a_sources_rows) {
  for (int waves = 1; waves <= dev::kMaxPutRounds; ++waves) {
    for (int n : {0, 1, 2, 3, 7, 8, 9, 511, 4096, 30011}) {
      BOOST_TEST(dev::waveRowBegin(n, waves, 0) == 0);
      BOOST_TEST(dev::waveRowBegin(n, waves, waves) == n);
      for (int j = 0; j < waves; ++j) {
        const int b = dev::waveRowBegin(n, waves, j), e = dev::waveRowBegin(n, waves, j + 1);
        BOOST_TEST(b <= e);
        BOOST_TEST(e - b <= (n + waves - 1) / waves);  // about one round's worth each
        for (int r = b; r < e; ++r) BOOST_TEST(dev::waveOfRow(n, waves, r) == j);
      }
    }
  }
  BOOST_TEST(dev::waveRowBegin(100, 1, 1) == 100);
  BOOST_TEST(dev::waveOfRow(100, 1, 99) == 0);
  BOOST_TEST(dev::waveRowBegin(1 << 30, 8, 7) == 939524096);  // no int overflow: 7 * 2^30 / 8
}

// Combine put rounds cut the received rows; each source's piece of a round is contiguous, and the
// pieces partition the source's rows in order (the arrival signal grows by each piece's rows).
// Combine's put rounds cut the rows received from network sources (numbered in source order):
// per network source, the pieces of the rounds (mapped back to received rows as putRound does)
// are contiguous, in order and cover its rows exactly; ginRowOf walks exactly those rows, in order.
BOOST_AUTO_TEST_CASE(combine_put_round_pieces_partition_each_network_source) {
  std::mt19937 rng(5);
  for (int sources : {1, 2, 9, 1024}) {
    std::vector<int> base(sources + 1, 0), ginBase(sources + 1, 0);
    std::vector<bool> nvlink(sources);
    for (int s = 0; s < sources; ++s) {
      nvlink[s] = rng() % 3 == 0;
      const int n = int(rng() % (sources > 100 ? 40 : 3000)) * (s % 4 != 1);  // some send nothing
      base[s + 1] = base[s] + n;
      ginBase[s + 1] = ginBase[s] + (nvlink[s] ? 0 : n);
    }
    const int ginRows = ginBase[sources];
    // ginRowOf: the v-th network row, in order, skipping NVLink sources' rows.
    std::vector<int> expect;
    for (int s = 0; s < sources; ++s)
      if (!nvlink[s])
        for (int i = base[s]; i < base[s + 1]; ++i) expect.push_back(i);
    BOOST_REQUIRE(int(expect.size()) == ginRows);
    for (int v = 0; v < ginRows; ++v) BOOST_TEST(dev::ginRowOf(base.data(), ginBase.data(), sources, v) == expect[v]);
    const int rounds = dev::putRoundsOf((ginRows + dev::kLayoutChunk - 1) / dev::kLayoutChunk, true, dev::kMaxPutRounds);
    BOOST_TEST(rounds == std::min(dev::kMaxPutRounds, std::max(1, (ginRows + dev::kLayoutChunk - 1) / dev::kLayoutChunk)));
    for (int s = 0; s < sources; ++s) {
      if (nvlink[s]) continue;
      int next = base[s];
      for (int j = 0; j < rounds; ++j) {
        const dev::Share v = dev::intersect(dev::Share{ginBase[s], ginBase[s + 1]}, dev::shareOf(ginRows, rounds, j));
        const dev::Share piece{base[s] + (v.begin - ginBase[s]), base[s] + (v.end - ginBase[s])};
        BOOST_TEST(piece.end >= piece.begin);
        if (piece.end > piece.begin) {
          BOOST_TEST(piece.begin == next);
          next = piece.end;
        }
      }
      BOOST_TEST(next == base[s + 1]);
    }
  }
  BOOST_TEST(dev::intersect(dev::Share{0, 5}, dev::Share{7, 9}).end == dev::intersect(dev::Share{0, 5}, dev::Share{7, 9}).begin);
}

BOOST_AUTO_TEST_CASE(source_of_a_received_row) {
  // Sources 1 and 3 sent nothing; rows 0..9 from 0, 10..14 from 2, 15..19 from 4.
  const int base[] = {0, 10, 10, 15, 15, 20};
  for (int i = 0; i < 20; ++i) {
    const int s = dev::sourceOfRow(base, 5, i);
    BOOST_TEST(base[s] <= i);
    BOOST_TEST(i < base[s + 1]);
  }
  // 1024 sources, random sizes.
  std::mt19937 rng(3);
  std::vector<int> big(1025, 0);
  for (int s = 0; s < 1024; ++s) big[s + 1] = big[s] + int(rng() % 3);
  for (int i = 0; i < big[1024]; ++i) {
    const int s = dev::sourceOfRow(big.data(), 1024, i);
    BOOST_TEST((big[s] <= i && i < big[s + 1]));
  }
}

namespace {

// Rows of [rows.begin, rows.end) outside [skip.begin, skip.end), in order (what RowsExcept numbers).
std::vector<int> rowsOutside(dev::Share rows, dev::Share skip) {
  std::vector<int> want;
  for (int i = rows.begin; i < rows.end; ++i)
    if (i < skip.begin || i >= skip.end) want.push_back(i);
  return want;
}

void checkRowsExcept(dev::Share rows, dev::Share skip) {
  BOOST_TEST_CONTEXT("rows [" << rows.begin << ", " << rows.end << ") less [" << skip.begin << ", " << skip.end << ")") {
    const dev::RowsExcept r = dev::rowsExcept(rows, skip);
    const std::vector<int> want = rowsOutside(rows, skip);
    BOOST_TEST_REQUIRE(r.count() == int(want.size()));
    for (int v = 0; v < r.count(); ++v) BOOST_TEST(r.rowOf(v) == want[size_t(v)]);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_except_a_sub_range_number_the_rest_in_order) {
  // Every sub-range (empty ones at every position included) of small row ranges.
  for (int b = 0; b < 4; ++b)
    for (int n = 0; n <= 9; ++n)
      for (int sb = b; sb <= b + n; ++sb)
        for (int se = sb; se <= b + n; ++se) checkRowsExcept(dev::Share{b, b + n}, dev::Share{sb, se});
  // The named edge cases.
  checkRowsExcept(dev::Share{10, 20}, dev::Share{10, 13});  // skip at the start
  checkRowsExcept(dev::Share{10, 20}, dev::Share{17, 20});  // skip at the end
  BOOST_TEST(dev::rowsExcept(dev::Share{10, 20}, dev::Share{10, 20}).count() == 0);  // the whole range
  BOOST_TEST(dev::rowsExcept(dev::Share{10, 10}, dev::Share{10, 10}).count() == 0);  // no rows
  // An empty skip anywhere, inside the rows or not, changes nothing.
  for (int s : {0, 5, 10, 15, 20, 25}) {
    const dev::RowsExcept r = dev::rowsExcept(dev::Share{10, 20}, dev::Share{s, s});
    BOOST_TEST_REQUIRE(r.count() == 10);
    for (int v = 0; v < 10; ++v) BOOST_TEST(r.rowOf(v) == 10 + v);
  }
  // Random large ranges.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int b = int(rng() % 1000), n = int(rng() % 500);
    const int sb = b + int(rng() % (n + 1));
    const int se = sb + int(rng() % (b + n - sb + 1));
    checkRowsExcept(dev::Share{b, b + n}, dev::Share{sb, se});
  }
}

BOOST_AUTO_TEST_CASE(rows_except_own_rows_clipped_to_a_receive_group) {
  // Dispatch's receive copy: a group's received rows less this rank's own rows, whichever part of
  // them falls in the group (before, overlapping either end, inside, covering, after).
  for (int ob = 0; ob <= 12; ++ob)
    for (int oe = ob; oe <= 12; ++oe) {
      const dev::Share rows{3, 9}, own{ob, oe};
      checkRowsExcept(rows, dev::intersect(own, rows));
      const dev::RowsExcept r = dev::rowsExcept(rows, dev::intersect(own, rows));
      BOOST_TEST(r.count() == int(rowsOutside(rows, own).size()));
    }
  // Combine's NVLink rows: 8 ranks, NVLink domains of 4; rank 5 (LSA rank 1 of {4..7}); rows per
  // source 3,0,2,5,1,4,0,2. The team's rows are [10, 17), rank 5's own [11, 15).
  const int base[] = {0, 3, 3, 5, 10, 11, 15, 15, 17};
  const dev::Share team{base[4], base[8]};
  const dev::RowsExcept all = dev::rowsExcept(team, dev::Share{base[5], base[5]});
  BOOST_TEST_REQUIRE(all.count() == 7);
  for (int v = 0; v < all.count(); ++v) BOOST_TEST(all.rowOf(v) == 10 + v);
  const dev::RowsExcept others = dev::rowsExcept(team, dev::Share{base[5], base[6]});
  const int want[] = {10, 15, 16};
  BOOST_TEST_REQUIRE(others.count() == 3);
  for (int v = 0; v < others.count(); ++v) BOOST_TEST(others.rowOf(v) == want[v]);
}

BOOST_AUTO_TEST_CASE(lsa_peers_and_contexts) {
  // 16 ranks, NVLink domains of 4: rank 6 is LSA rank 2 of {4..7}.
  for (int p = 0; p < 16; ++p) BOOST_TEST(dev::isLsaPeer(6, 2, 4, p) == (p >= 4 && p < 8));
  BOOST_TEST(dev::dataContextOf(5, 4) == 1);
  BOOST_TEST(dev::dataContextOf(5, 0) == 0);
  BOOST_TEST(dev::destOf(-1, 4) == -1);
  BOOST_TEST(dev::destOf(13, 4) == 3);
}

BOOST_AUTO_TEST_CASE(async_error_timeout_takes_precedence_over_bad_id) {
  dev::AsyncError e;
  std::memset(&e, 0, sizeof(e));
  std::string msg;
  BOOST_TEST(describeAsyncError(e, 1000, &msg) == ncclSuccess);
  BOOST_TEST(msg == "no error");
  // A bad expert id first (capacity mode keeps working) ...
  e.badIdClaim = 1;
  e.badId = dev::ErrorRecord{4, dev::kPhaseBadExpertId, -1, 1, -1, 0, 17, 999};
  BOOST_TEST(describeAsyncError(e, 1000, &msg) == ncclInvalidArgument);
  BOOST_TEST(msg.find("token 17") != std::string::npos);
  BOOST_TEST(!groupBroken(e));
  // ... then a timeout: it is reported, naming the peer, the phase and the transport.
  e.timeoutClaim = 1;
  e.timeout = dev::ErrorRecord{6, dev::kPhaseDispatchData, 3, 1, dev::kTransportGin, 0, 40, 12};
  BOOST_TEST(describeAsyncError(e, 1000, &msg) == ncclRemoteError);
  BOOST_TEST(msg.find("peer rank 3") != std::string::npos);
  BOOST_TEST(msg.find("dispatch data") != std::string::npos);
  BOOST_TEST(msg.find("GIN") != std::string::npos);
  BOOST_TEST(msg.find("token 17") != std::string::npos);  // the earlier bad id is kept
  BOOST_TEST(groupBroken(e));
  // A network peer whose previous combine never finished (its combine-ready word counts finished
  // combines, protocol.h readyReached).
  e.timeout.phase = dev::kPhaseCombineFree;
  BOOST_TEST(describeAsyncError(e, 1000, &msg) == ncclRemoteError);
  BOOST_TEST(msg.find("in combine start (the peer's previous combine has not finished) waiting for peer rank 3 over GIN") !=
                 std::string::npos,
             msg);
}

BOOST_AUTO_TEST_CASE(gin_completion_counters) {
  // One counter per CTA of the widest kernel that puts: dispatch/combine CTAs or layout chunks.
  BOOST_TEST(dev::ginCounterCount(24, 4096) == 24);
  BOOST_TEST(dev::ginCounterCount(4, 4096) == 8);  // 4096 tokens = 8 layout chunks of 512
  BOOST_TEST(dev::ginCounterCount(1, 1) == 1);
  BOOST_TEST(dev::ginCounterCount(16, 513) == 16);
  BOOST_TEST(dev::ginCounterCount(1, 513) == 2);
  // 56-bit rolling comparison, as NCCL's waitCounter: reached at and after the target, also
  // across the 2^56 wrap; not reached before it.
  const uint64_t wrap = uint64_t(1) << 56;
  BOOST_TEST(dev::counterReached(5, 5));
  BOOST_TEST(dev::counterReached(6, 5));
  BOOST_TEST(!dev::counterReached(4, 5));
  BOOST_TEST(dev::counterReached(2, wrap - 3));   // counter wrapped past the target
  BOOST_TEST(!dev::counterReached(wrap - 4, wrap - 3));
  BOOST_TEST(!dev::counterReached(wrap - 3, 2));  // target wrapped, counter not yet
}

BOOST_AUTO_TEST_CASE(async_error_gin_completion_timeout) {
  dev::AsyncError e;
  std::memset(&e, 0, sizeof(e));
  e.timeoutClaim = 1;
  e.timeout = dev::ErrorRecord{6, dev::kPhaseGinCompletion, -1, 2, dev::kTransportGin, 0, 48, 40};
  std::string msg;
  BOOST_TEST(describeAsyncError(e, 2000, &msg) == ncclRemoteError);
  BOOST_TEST(msg.find("rank 2: timed out after 2000 ms in GIN completion") != std::string::npos);
  BOOST_TEST(msg.find("48 of this rank's own GIN puts posted, only 40 completed") != std::string::npos);
  BOOST_TEST(groupBroken(e));
}

// A peer that does not drain at destroy (host/src/link.cc linkDrain) is named with what arrived.
BOOST_AUTO_TEST_CASE(link_drain_timeout_words) {
  dev::AsyncError e;
  std::memset(&e, 0, sizeof(e));
  e.timeoutClaim = 1;
  e.timeout = dev::ErrorRecord{6, dev::kPhaseLinkDrain, 5, 2, dev::kTransportGin, 0, 4, 1};
  std::string msg;
  BOOST_TEST(describeAsyncError(e, 300, &msg) == ncclRemoteError);
  BOOST_TEST(msg.find("rank 2: timed out after 300 ms at destroy waiting for peer rank 5's GIN drain signals (1 of 4 "
                      "contexts arrived)") == 0u, msg);
}

// The free/ready rule (protocol.h creditTarget / mayWrite) that every kernel's producer waits on:
// with `depth` areas the first `depth` ops go at once, op #seq waits for op seq - depth to be
// released, and a producer and consumer that follow it with random progress never overwrite an
// unreleased area, across the 32-bit wrap of the counters.
BOOST_AUTO_TEST_CASE(ready_word_of_a_peer_that_reached_the_op) {
  // What begin() and end() publish (session.cuh), replayed for one peer over a run of ops: the
  // value this rank sees once the peer started op k (and finished ops before it) reaches
  // readyReached(k) exactly when the peer has reached op k, for every kind of peer and op.
  for (bool nvlink : {false, true})
    for (bool freeAtEnd : {false, true})
      for (uint32_t start : {0u, 0xffffffffu - 3u}) {
        uint32_t word = start;  // the peer's ready word as this rank sees it
        for (uint32_t k = start + 1u; k != start + 8u; ++k) {
          // Before its begin() of op k the peer has not reached op k + 1, and has reached op k
          // only where the word counts finished ops (finishing op k - 1 is then what op k needs).
          BOOST_TEST(!dev::reached(word, dev::readyReached(k + 1u, nvlink, freeAtEnd)));
          BOOST_TEST(dev::reached(word, dev::readyReached(k, nvlink, freeAtEnd)) == !dev::readyAtBegin(nvlink, freeAtEnd));
          if (dev::readyAtBegin(nvlink, freeAtEnd)) word = k;  // begin() of op k
          BOOST_TEST(dev::reached(word, dev::readyReached(k, nvlink, freeAtEnd)),
                     "nvlink " << nvlink << " freeAtEnd " << freeAtEnd << " op " << k);
          if (!dev::readyAtBegin(nvlink, freeAtEnd)) word = k;  // end() of op k
        }
      }
  // The op's kinds: dispatch publishes at begin to everyone; combine to network peers at end.
  BOOST_TEST(dev::readyAtBegin(false, false));
  BOOST_TEST(!dev::readyAtBegin(false, true));
  BOOST_TEST(dev::readyAtBegin(true, true));
  BOOST_TEST(dev::readyReached(5u, false, true) == 4u);
}

BOOST_AUTO_TEST_CASE(credit_rule_never_overwrites) {
  BOOST_TEST(dev::mayWrite(1, 0, 1));   // depth 0: the consumer started op 1
  BOOST_TEST(!dev::mayWrite(1, 0, 0));
  BOOST_TEST(dev::mayWrite(1, 1, 0));   // depth 1: the consumer finished op 0 (none)
  BOOST_TEST(!dev::mayWrite(2, 1, 0));
  BOOST_TEST(dev::mayWrite(2, 1, 1));
  std::mt19937 rng(11);
  for (uint32_t depth : {1u, 2u, 3u, 8u}) {
    for (uint32_t start : {0u, 0xffffffffu - 100u}) {  // counters that wrap during the run
      std::vector<uint32_t> held(depth, 0);            // op in each area, 0 = released
      uint32_t sent = start, released = start, received = start;
      for (int step = 0; step < 4000; ++step) {
        if (rng() % 2 == 0) {
          const uint32_t seq = sent + 1u;
          if (dev::mayWrite(seq, depth, released)) {
            const uint32_t area = (seq - 1u - start) % depth;
            BOOST_TEST_REQUIRE(held[area] == 0u, "depth " << depth << " op " << seq);
            held[area] = seq;
            sent = seq;
          }
        } else if (received != sent) {
          const uint32_t seq = received + 1u;
          const uint32_t area = (seq - 1u - start) % depth;
          BOOST_TEST_REQUIRE(held[area] == seq);
          held[area] = 0;
          received = released = seq;
        }
      }
      BOOST_TEST(sent - start > 500u, "depth " << depth << ": the producer stalled");
    }
  }
}
