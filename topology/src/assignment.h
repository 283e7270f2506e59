// Internal: minimum-cost assignment (Hungarian method with row/column potentials), for rails.
//
// Assigns each of `rows` rows to its own column among `cols` >= rows columns, minimizing the sum
// of cost(row, col). Rows are added one at a time; each addition grows a shortest augmenting path
// over the columns with reduced costs, so the work is O(rows² · cols) at worst on plain arrays,
// and no edge list is built (the rail problem is dense: every GPU to every NIC card).
#pragma once
#include <limits>
#include <vector>

namespace epx::topo::detail {

/// Returns the column of every row. `cost(row, col)` must be finite; rows <= cols.
template <class Cost>
std::vector<int> minCostAssignment(int rows, int cols, const Cost& cost) {
  constexpr long long kInf = std::numeric_limits<long long>::max() / 4;
  // 1-based internally: column 0 is the virtual start of each augmenting path.
  std::vector<long long> rowPot(rows + 1, 0), colPot(cols + 1, 0), slack(cols + 1);
  std::vector<int> rowOfCol(cols + 1, 0), prevCol(cols + 1, 0);
  std::vector<char> reached(cols + 1);
  for (int r = 1; r <= rows; ++r) {
    rowOfCol[0] = r;
    int col = 0;
    std::fill(slack.begin(), slack.end(), kInf);
    std::fill(reached.begin(), reached.end(), 0);
    do {  // grow the tree of tight edges until it reaches a free column
      reached[col] = 1;
      const int row = rowOfCol[col];
      long long delta = kInf;
      int next = 0;
      for (int j = 1; j <= cols; ++j) {
        if (reached[j]) continue;
        const long long reduced = cost(row - 1, j - 1) - rowPot[row] - colPot[j];
        if (reduced < slack[j]) {
          slack[j] = reduced;
          prevCol[j] = col;
        }
        // Among equal slacks prefer a free column: the path ends there instead of walking through
        // assigned columns of equal cost (many ties when many rows share few NIC cards).
        if (slack[j] < delta || (slack[j] == delta && rowOfCol[next] != 0 && rowOfCol[j] == 0)) {
          delta = slack[j];
          next = j;
        }
      }
      for (int j = 0; j <= cols; ++j) {
        if (reached[j]) {
          rowPot[rowOfCol[j]] += delta;
          colPot[j] -= delta;
        } else {
          slack[j] -= delta;
        }
      }
      col = next;
    } while (rowOfCol[col] != 0);
    do {  // flip the path back to the start
      const int prev = prevCol[col];
      rowOfCol[col] = rowOfCol[prev];
      col = prev;
    } while (col != 0);
  }
  std::vector<int> colOfRow(rows, -1);
  for (int j = 1; j <= cols; ++j)
    if (rowOfCol[j] != 0) colOfRow[rowOfCol[j] - 1] = j - 1;
  return colOfRow;
}

}  // namespace epx::topo::detail
