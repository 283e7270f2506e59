// Pure arithmetic of the bucket and PP kernels (host and device, CPU-tested): how a byte range is
// cut into GIN put chunks, how a CTA's share of 16-byte vectors is found, and the per-pair slot
// flow control of PP channels. No CUDA types.
#pragma once
#include <cstdint>

#include "epx/device/protocol.h"

namespace epx::dev {

// Copies and conversions move 16-byte vectors; pointers the API accepts are 16-byte aligned.
constexpr uint64_t kVecBytes = 16;
// GIN chunks: the bucket collectives and PP cut what they put to a network peer into chunks of
// the object's chunkBytes (ncclEpBucketConfig_t / ncclEpPpConfig_t), kGinMinChunkBytes ..
// kGinMaxChunkBytes and a multiple of kVecBytes. Buckets: every chunk is one put that adds 1 to the
// receiver's arrival signal (the receiver expects chunksOf(bytes, chunkBytes) per transfer); PP:
// ppPutRounds below.
constexpr uint64_t kGinMinChunkBytes = uint64_t(64) << 10;
constexpr uint64_t kGinMaxChunkBytes = uint64_t(1) << 30;
constexpr uint64_t kBucketDefaultChunkBytes = uint64_t(2) << 20;

// [begin, end) in bytes.
struct ByteRange {
  uint64_t begin, end;
  EPX_HD uint64_t size() const { return end - begin; }
};

// Chunks of at most `chunk` bytes covering `bytes` (0 bytes: 0 chunks).
EPX_HD uint64_t chunksOf(uint64_t bytes, uint64_t chunk) { return (bytes + chunk - 1) / chunk; }

// Chunk i of a `bytes` range cut into `chunk`-byte pieces (the last one may be shorter).
EPX_HD ByteRange chunkRange(uint64_t bytes, uint64_t chunk, uint64_t i) {
  const uint64_t b = i * chunk;
  const uint64_t e = b + chunk;
  return ByteRange{b < bytes ? b : bytes, e < bytes ? e : bytes};
}

// The GIN puts of one transfer: chunks of `chunk` bytes (chunkRange), optionally with a ramped head
// and a tapered tail.
// - Taper: a receiver that works on each put as it arrives (the reduce-scatter's reduction) still
//   has the last put's work to do after the wire went quiet; tapering cuts the transfer's last
//   chunk, when it is at least kTaperMinBytes, into its half, a quarter and the rest (about a
//   quarter): two more puts, a quarter of the last chunk's work left after the last arrival.
// - Ramp: a sender that prepares each put before posting it (the BF16 wire's conversion) keeps the
//   wire idle while it prepares the first one; ramping cuts the first chunk, when the transfer has
//   at least two and the chunk is at least kTaperMinBytes, into a quarter, a quarter and the rest
//   (about a half): two more puts, the wire busy after a quarter of the first chunk's work.
// Boundaries are 16-byte multiples from the transfer's start (whole vectors, also when `bytes` is
// not a multiple of 16).
constexpr uint64_t kTaperMinBytes = 4 * kGinMinChunkBytes;
constexpr uint64_t kTaperPieces = 3;
constexpr uint64_t kRampPieces = 3;
struct PutChunks {
  uint64_t bytes, chunk;
  bool taper;
  bool ramp = false;
  // Chunks without the taper and the ramp, and whether this transfer's first / last one is cut.
  EPX_HD uint64_t whole() const { return chunksOf(bytes, chunk); }
  EPX_HD bool ramped() const { return ramp && whole() >= 2 && chunk >= kTaperMinBytes; }
  EPX_HD bool tapered() const { return taper && bytes > 0 && bytes - (whole() - 1) * chunk >= kTaperMinBytes; }
  EPX_HD uint64_t head() const { return ramped() ? kRampPieces - 1 : 0; }  // extra puts of the ramp
  EPX_HD uint64_t count() const { return whole() + head() + (tapered() ? kTaperPieces - 1 : 0); }
  // Bytes of put i (0 <= i < count()), in order; they tile [0, bytes).
  EPX_HD ByteRange range(uint64_t i) const {
    if (ramped() && i < kRampPieces) {
      const uint64_t quarter = chunk / 4 / kVecBytes * kVecBytes;
      if (i == 0) return ByteRange{0, quarter};
      if (i == 1) return ByteRange{quarter, 2 * quarter};
      return ByteRange{2 * quarter, chunk};
    }
    i -= head();  // chunk index without the ramp's extra puts
    if (!tapered() || i + 1 < whole()) return chunkRange(bytes, chunk, i);
    const uint64_t b = (whole() - 1) * chunk, last = bytes - b;
    const uint64_t half = last / 2 / kVecBytes * kVecBytes, quarter = last / 4 / kVecBytes * kVecBytes;
    const uint64_t j = i - (whole() - 1);
    if (j == 0) return ByteRange{b, b + half};
    if (j == 1) return ByteRange{b + half, b + half + quarter};
    return ByteRange{b + half + quarter, bytes};
  }
};

// Contiguous share of part p of `parts` over `bytes`, cut at 16-byte boundaries (the last part
// takes the tail that is not a whole vector): CTA p's bytes of a transfer.
EPX_HD ByteRange vecShare(uint64_t bytes, int parts, int p) {
  const uint64_t vecs = bytes / kVecBytes;
  const uint64_t q = vecs / uint64_t(parts), r = vecs % uint64_t(parts);
  const uint64_t up = uint64_t(p);
  const uint64_t b = up * q + (up < r ? up : r);
  const uint64_t e = b + q + (up < r ? 1 : 0);
  return ByteRange{b * kVecBytes, p == parts - 1 ? bytes : e * kVecBytes};
}

// Contiguous share of part p of `parts` over n items (the first n % parts parts get one more):
// CTA p's elements of a reduction.
EPX_HD ByteRange itemShare(uint64_t n, int parts, int p) {
  const uint64_t q = n / uint64_t(parts), r = n % uint64_t(parts), up = uint64_t(p);
  const uint64_t b = up * q + (up < r ? up : r);
  return ByteRange{b, b + q + (up < r ? 1 : 0)};
}

// PP over GIN: a message is staged and put in up to kPpMaxPutRounds rounds (chunks) of about the
// channel's chunk bytes (ncclEpPpConfig_t.chunkBytes), so that the network carries round j while
// the sender stages round j + 1 and the receiver copies out round j - 1; every round's put adds 1 to
// the receiver's data signal (all on one context, in order: the count says which rounds are in).
// Round j's data bytes: vecShare(bytes, rounds, j); round 0 also carries the header. Sender and
// receiver use the same chunk bytes (agreed at channel creation).
constexpr int kPpMaxPutRounds = 8;
// The default chunk: 4 MiB. On the fake-node rig (emulated NIC 50 GB/s + 3 us, 4 fake nodes, 16 MiB
// messages, two streams) 1 MiB chunks (8 rounds of 2 MiB) reached 62-75 % of line and 4 MiB chunks
// (4 rounds) 97.5-97.7 %: each put costs the rig a fixed ~20 us. The fill and drain a larger chunk
// adds is one chunk's staging copy (~2 us per 4 MiB at HBM rates), small against its wire time.
constexpr uint64_t kPpDefaultChunkBytes = uint64_t(4) << 20;
EPX_HD int ppPutRounds(uint64_t bytes, uint64_t chunkBytes = kPpDefaultChunkBytes) {
  const uint64_t r = chunksOf(bytes, chunkBytes);
  return r <= 1 ? 1 : r < uint64_t(kPpMaxPutRounds) ? int(r) : kPpMaxPutRounds;
}

// PP flow control. Message n (1-based, per ordered pair) uses slot (n - 1) % slots of the
// receiver's slots for that sender; the sender may write it once the receiver freed message
// n - slots (protocol.h mayWrite with depth `slots`; the first `slots` messages need nothing).
EPX_HD int ppSlotOf(uint32_t n, int slots) { return int((n - 1u) % uint32_t(slots)); }

}  // namespace epx::dev
