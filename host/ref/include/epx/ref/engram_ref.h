// CPU reference of the Engram fetch (no CUDA): what a fetch of embedding-like rows from tables
// sharded over the ranks must produce, byte for byte.
//
// Tables: `layers` tables of numRows rows of rowBytes bytes each, every table split evenly over the
// ranks: rank r holds rows [r * rowsPerRank, (r + 1) * rowsPerRank) (rowsPerRank = numRows / nRanks).
// A fetch takes int32 indices [layers][tokens][entries] and returns, for each, the row's bytes
// ([layers][tokens][entries][rowBytes]). Index -1 means "no entry": its output row is zero. An index
// outside [-1, numRows) is an error: its output row is zero too, and the first one (in index order)
// is reported.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace epx::ref {

struct EngramShape {
  int nRanks = 1;
  int layers = 1;
  int64_t numRows = 0;   // rows per layer's table, a multiple of nRanks
  uint64_t rowBytes = 0;
  int tokens = 0;        // of this fetch
  int entries = 0;       // per token
  int64_t rowsPerRank() const { return nRanks > 0 ? numRows / nRanks : 0; }
  int ownerOf(int64_t row) const { return int(row / rowsPerRank()); }
  int64_t localRow(int64_t row) const { return row % rowsPerRank(); }
};

// "" when the shape is valid, else why not.
std::string engramCheckShape(const EngramShape& s);

struct EngramResult {
  std::vector<uint8_t> out;  // [layers][tokens][entries][rowBytes]
  int64_t firstBad = -1;     // flat index (into indices) of the first index outside [-1, numRows)
  int32_t firstBadValue = 0;
};

// shards[r][layer]: rank r's rowsPerRank rows of that layer's table; indices: [layers][tokens][entries].
EngramResult engramFetch(const EngramShape& s, const std::vector<std::vector<std::vector<uint8_t>>>& shards,
                         const std::vector<int32_t>& indices);

// Rows one fetch reads from each rank, per layer ([layer][rank]), counting only valid indices (a
// rank reading its own rows included): the data each owner serves, for the bench's floor.
std::vector<std::vector<int64_t>> engramRowsPerOwner(const EngramShape& s, const std::vector<int32_t>& indices);

}  // namespace epx::ref
