// epx correctness check (see check.h).
#include "check.h"

#include <cmath>
#include <sstream>

#include "epx/ref/bf16.h"
#include "randgen.h"

namespace epxbench {

namespace {

// Collects the number of problems and the text of the first few.
struct Problems {
  int64_t count = 0;
  std::ostringstream text;
  template <class F>
  void add(F&& describe) {
    if (count++ < 4) {
      if (count > 1) text << "; ";
      describe(text);
    }
  }
};

template <class T>
std::string join(const std::vector<T>& v, size_t maxItems = 8) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size() && i < maxItems; ++i) os << (i ? "," : "") << v[i];
  if (v.size() > maxItems) os << ",...";
  os << "]";
  return os.str();
}

// Weights and scales are copied, never computed: bit-for-bit equal (poison NaN never matches).
bool sameFloat(float a, float b) { return a == b; }

}  // namespace

CheckResult checkEpx(const BenchShape& s, const EpxRunSpec& spec,
                     const std::vector<epx::ref::RankRouting>& routing,
                     const std::vector<EpxCapture>& caps, uint64_t checkSeed, const std::vector<bool>& local) {
  const int n = s.nRanks, H = s.hidden, K = s.topk;
  const bool expanded = spec.layout == ncclEpLayoutExpanded;
  epx::ref::EpShape rs;
  rs.nRanks = n;
  rs.hidden = H;
  rs.topk = K;
  rs.numExperts = s.experts;
  rs.expertAlignment = spec.align;
  rs.expanded = expanded;
  const auto disp = epx::ref::dispatch(rs, routing);

  Problems pr;
  bool rowsMatch = true;
  const size_t nSc = size_t(H / 128);
  for (int d = 0; d < n; ++d) {
    if (!local[size_t(d)]) continue;  // another process checks it
    const EpxCapture& c = caps[d];
    const epx::ref::RankDispatch& D = disp[d];
    if (!c.valid) {
      pr.add([&](std::ostream& o) { o << "rank " << d << ": " << c.error; });
      rowsMatch = false;
      continue;
    }
    if (c.numRows != D.numRows) {
      pr.add([&](std::ostream& o) { o << "rank " << d << ": numRecvRows " << c.numRows << ", want " << D.numRows; });
      rowsMatch = false;
      continue;
    }
    if (spec.mode == ncclEpModeExact) {
      if (c.exactRows != D.numRows || c.exactTokens != D.numTokens || c.exactCounts != D.expertCounts)
        pr.add([&](std::ostream& o) {
          o << "rank " << d << ": ncclEpHandleGetCounts rows/tokens " << c.exactRows << "/" << c.exactTokens
            << " counts " << join(c.exactCounts) << ", want " << D.numRows << "/" << D.numTokens << " "
            << join(D.expertCounts);
        });
    }
    if (c.counts != D.expertCounts)
      pr.add([&](std::ostream& o) { o << "rank " << d << ": expertCounts " << join(c.counts) << ", want " << join(D.expertCounts); });
    if (c.offsets != D.expertOffsets)
      pr.add([&](std::ostream& o) { o << "rank " << d << ": expertOffsets " << join(c.offsets) << ", want " << join(D.expertOffsets); });

    for (int i = 0; i < D.numRows; ++i) {
      const int src = D.srcRank[i], tok = D.srcToken[i];
      if (src < 0) continue;  // alignment gap (not zeroed in the benchmark)
      if (c.srcInfo[2 * size_t(i)] != src || c.srcInfo[2 * size_t(i) + 1] != tok) {
        pr.add([&](std::ostream& o) {
          o << "rank " << d << " row " << i << ": srcInfo (" << c.srcInfo[2 * size_t(i)] << ","
            << c.srcInfo[2 * size_t(i) + 1] << "), want (" << src << "," << tok << ")";
        });
        continue;
      }
      const uint64_t kx = streamKey(checkSeed, kTensorX, uint64_t(src));
      for (int h = 0; h < H; ++h) {
        const uint16_t want = randBf16(kx, size_t(tok) * H + h);
        if (c.x[size_t(i) * H + h] != want) {
          pr.add([&](std::ostream& o) {
            o << "rank " << d << " row " << i << " (src " << src << " token " << tok << ") BF16 channel " << h
              << ": 0x" << std::hex << c.x[size_t(i) * H + h] << ", want 0x" << want << std::dec;
          });
          break;
        }
      }
      if (spec.fp8) {
        const uint64_t k8 = streamKey(checkSeed, kTensorX8, uint64_t(src));
        for (int h = 0; h < H; ++h) {
          const uint8_t want = randFp8(k8, size_t(tok) * H + h);
          if (c.x8[size_t(i) * H + h] != want) {
            pr.add([&](std::ostream& o) {
              o << "rank " << d << " row " << i << " FP8 channel " << h << ": 0x" << std::hex
                << int(c.x8[size_t(i) * H + h]) << ", want 0x" << int(want) << std::dec;
            });
            break;
          }
        }
        const uint64_t ks = streamKey(checkSeed, kTensorScales, uint64_t(src));
        for (size_t j = 0; j < nSc; ++j) {
          const float want = randScale(ks, size_t(tok) * nSc + j);
          if (!sameFloat(c.scales[size_t(i) * nSc + j], want)) {
            pr.add([&](std::ostream& o) {
              o << "rank " << d << " row " << i << " scale " << j << ": " << c.scales[size_t(i) * nSc + j]
                << ", want " << want;
            });
            break;
          }
        }
      }
      if (expanded) {
        if (!sameFloat(c.weights[size_t(i)], D.recvWeights[size_t(i)]))
          pr.add([&](std::ostream& o) {
            o << "rank " << d << " row " << i << ": weight " << c.weights[size_t(i)] << ", want " << D.recvWeights[size_t(i)];
          });
      } else {
        for (int k = 0; k < K; ++k) {
          const size_t j = size_t(i) * K + k;
          if (c.topkIdx[j] != D.recvTopkIdx[j] ||
              (D.recvTopkIdx[j] >= 0 && !sameFloat(c.weights[j], D.recvWeights[j]))) {
            pr.add([&](std::ostream& o) {
              o << "rank " << d << " row " << i << " slot " << k << ": id/weight " << c.topkIdx[j] << "/"
                << c.weights[j] << ", want " << D.recvTopkIdx[j] << "/" << D.recvWeights[j];
            });
            break;
          }
        }
      }
    }
  }

  // Combine: expert outputs were row i = randBf16(kTensorExpertOut of the expert rank, i * H + h).
  if (rowsMatch) {
    std::vector<std::vector<uint16_t>> expertOut(n);
    for (int d = 0; d < n; ++d) {
      const uint64_t ke = streamKey(checkSeed, kTensorExpertOut, uint64_t(d));
      expertOut[d].assign(size_t(disp[d].numRows) * H, 0);
      // Only rows that return to a checked (local) rank matter: the others stay 0 (in
      // multi-process mode this saves generating every other rank's expert outputs).
      for (int row = 0; row < disp[d].numRows; ++row) {
        const int src = disp[d].srcRank[size_t(row)];
        if (src < 0 || !local[size_t(src)]) continue;
        for (size_t h = 0; h < size_t(H); ++h)
          expertOut[d][size_t(row) * H + h] = randBf16(ke, size_t(row) * H + h);
      }
    }
    // Hybrid: each node's partials summed at its forwarder first, in the reference's order.
    const auto want = epx::ref::combine(rs, routing, disp, expertOut, {}, {}, epx::ref::CombinePath{spec.forwardNodeSize});
    for (int r = 0; r < n; ++r) {
      if (!local[size_t(r)]) continue;
      const auto& got = caps[r].out;
      int64_t bad = 0;
      size_t first = 0;
      for (size_t i = 0; i < want[r].size(); ++i) {
        const float g = epx::ref::bf16ToFloat(got[i]), w = epx::ref::bf16ToFloat(want[r][i]);
        if (!(std::fabs(g - w) <= std::fabs(w) * (1.0f / 64) + 1e-3f)) {
          if (bad++ == 0) first = i;
        }
      }
      if (bad)
        pr.add([&](std::ostream& o) {
          o << "rank " << r << " combine: " << bad << " wrong values, first token " << first / H << " channel "
            << first % H << ": " << epx::ref::bf16ToFloat(got[first]) << ", want "
            << epx::ref::bf16ToFloat(want[r][first]);
        });
    }
  } else {
    pr.add([&](std::ostream& o) { o << "combine not checked (dispatch rows wrong)"; });
  }

  CheckResult res;
  res.ok = pr.count == 0;
  if (!res.ok) {
    std::ostringstream os;
    os << pr.count << " problem(s): " << pr.text.str();
    res.msg = os.str();
  }
  return res;
}

}  // namespace epxbench
