// The registered window of a bucket (ncclEpBucket): the planned tensors and the areas the
// reductions receive into. Laid out by device/ for the bucket kernels and the host (sizing,
// CPU tests); identical on every rank (the plan is agreed at creation).
//   flags    u32 [kNumFlagKinds][nRanks] (the protocol session's words, window_layout.h)
//   tensors  each planned tensor, whole (every rank's shard), at kBucketTensorAlign
//   scratch  reductions: per reducible tensor (FP32 or BF16) [nRanks source][shard] at the
//            tensor's element size (BF16 wire uses the first half)
//   stage    GIN only: per FP32 tensor [nRanks destination][shard] BF16 (the BF16 wire's
//            converted contributions, put from here)
// Shards: tensor t of count elements (count % nRanks == 0) has shard count / nRanks; rank r's shard
// is elements [r * shard, (r + 1) * shard).
#pragma once
#include <cstdint>

#include "epx/device/chunking.h"
#include "epx/device/link_args.h"
#include "epx/device/session_args.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

constexpr int kMaxBucketTensors = 32;
constexpr uint64_t kBucketTensorAlign = 256;
constexpr int kBucketMaxCtas = 32;
constexpr int kBucketDefaultCtas = 4;

// Element kinds the kernels distinguish (all-gather moves bytes of any kind).
enum BucketElem : int { kElemOther = 0, kElemF32 = 1, kElemBf16 = 2 };

struct BucketTensorPlan {
  uint64_t count;      // elements of the whole tensor
  int elemBytes;
  int elem;            // BucketElem
};

struct BucketTensorLayout {
  uint64_t offset;      // the tensor
  uint64_t scratch;     // reductions' receive area, or 0 (not reducible)
  uint64_t stage;       // BF16-wire staging (GIN, FP32 tensors), or 0
  uint64_t count;
  uint64_t shard;       // count / nRanks
  int elemBytes;
  int elem;
};

struct BucketLayout {
  uint64_t flags;
  uint64_t totalBytes;
  int numTensors;
  BucketTensorLayout t[kMaxBucketTensors];
};

EPX_HD bool bucketReducible(int elem) { return elem == kElemF32 || elem == kElemBf16; }

// nTensors <= kMaxBucketTensors, every count a multiple of nRanks (checked by the host first).
inline BucketLayout layoutBucket(const BucketTensorPlan* plan, int nTensors, int nRanks, bool ginPeers) {
  BucketLayout l{};
  l.numTensors = nTensors;
  RegionCursor cur;
  l.flags = cur.take(uint64_t(kNumFlagKinds) * uint64_t(nRanks) * 4, kWindowRegionAlign);
  for (int i = 0; i < nTensors; ++i) {
    BucketTensorLayout& t = l.t[i];
    t.count = plan[i].count;
    t.shard = plan[i].count / uint64_t(nRanks);
    t.elemBytes = plan[i].elemBytes;
    t.elem = plan[i].elem;
    t.offset = cur.take(t.count * uint64_t(t.elemBytes), kBucketTensorAlign);
  }
  for (int i = 0; i < nTensors; ++i) {
    BucketTensorLayout& t = l.t[i];
    if (bucketReducible(t.elem)) t.scratch = cur.take(t.count * uint64_t(t.elemBytes), kBucketTensorAlign);
  }
  for (int i = 0; i < nTensors; ++i) {
    BucketTensorLayout& t = l.t[i];
    if (ginPeers && t.elem == kElemF32) t.stage = cur.take(t.count * 2, kBucketTensorAlign);
  }
  l.totalBytes = cur.total();
  return l;
}

// What one bucket kernel does.
enum BucketOp : int {
  kBucketAllGather = 0,      // every rank's shard into every rank's tensor (bytes)
  kBucketReduceScatter = 1,  // sum of every rank's tensor, rank order, into this rank's shard
};

// Bytes one source sends one destination for tensor t.
EPX_HD uint64_t bucketTransferBytes(const BucketTensorLayout& t, int op, bool bf16Wire) {
  if (op == kBucketAllGather) return t.shard * uint64_t(t.elemBytes);
  return t.shard * uint64_t(bf16Wire ? 2 : t.elemBytes);
}

// The GIN puts of one source's transfer of tensor t to one network destination: chunks of
// chunkBytes; a reduce-scatter's with a tapered tail (the destination reduces each put as it
// arrives), and with a ramped head when the source converts FP32 to the BF16 wire before putting
// (PutChunks).
EPX_HD PutChunks bucketPutChunks(const BucketTensorLayout& t, int op, bool bf16Wire, uint64_t chunkBytes) {
  const bool reduce = op == kBucketReduceScatter;
  const bool converts = reduce && bf16Wire && t.elem == kElemF32;
  return PutChunks{bucketTransferBytes(t, op, bf16Wire), chunkBytes, reduce, converts};
}

// GIN puts each source sends each network destination in one op over these tensors: the arrival
// count the destination waits for.
EPX_HD uint32_t bucketGinPutsPerPeer(const BucketTensorLayout* t, int n, int op, bool bf16Wire, uint64_t chunkBytes) {
  uint64_t puts = 0;
  for (int i = 0; i < n; ++i) puts += bucketPutChunks(t[i], op, bf16Wire, chunkBytes).count();
  return uint32_t(puts);
}

// Reduce-scatter over GIN reduces one put chunk at a time as it arrives: each source posts its
// chunks to a destination in (tensor, chunk) order on one context, so the destination's arrival
// count from that source has reached bucketChunkTarget(before, ch) once chunk ch of a tensor is in
// (`before`: the chunks of the op's earlier tensors; the op's base count not included).
EPX_HD uint32_t bucketChunkTarget(uint32_t before, uint64_t ch) { return before + uint32_t(ch) + 1u; }
// The shard elements that put ch of a transfer carries (wireBytes per element).
EPX_HD ByteRange bucketChunkElems(const PutChunks& puts, uint64_t wireBytes, uint64_t ch) {
  const ByteRange r = puts.range(ch);
  return ByteRange{r.begin / wireBytes, r.end / wireBytes};
}

// The bucket's window runs one kind of op through the protocol session: its slot 0 (readiness
// and arrival words kFlagReadyDispatch / kFlagArriveDispatch of the bucket's own window).
constexpr int kBucketSessionKind = kOpDispatch;
// Over GIN every op's end also adds 1 to each network peer's "free" word of this rank (the
// session's otherwise unused combine-ready word): the ops this rank finished, so its receive area is
// free again. A reduce-scatter puts into a peer's receive area once that count reached seq - 1 —
// without waiting for the peer to start this op (its "ready", a one-way signal later). All-gathers
// write the peers' tensors, which a peer hands over when it calls: they wait for ready >= seq, the
// gather half of an all-reduce for ready >= seq - 1 (the reduce-scatter half of the same call).
constexpr int kBucketFreeKind = kFlagReadyCombine;

struct BucketArgs {
  LinkArgs link;         // flags = BucketLayout::flags
  SessionArgs session;   // the bucket's session state
  int op;            // BucketOp
  int bf16Wire;      // reduce-scatter of FP32 tensors: contributions travel (and are summed) as BF16
  int hasScale;
  float scale;       // reduce-scatter: the sum is multiplied by scale (after the rank-order sum)
  uint64_t chunkBytes;  // GIN put chunk (ncclEpBucketConfig_t.chunkBytes)
  int gatherOfAllReduce;  // all-gather launched as the second half of an all-reduce
  int numTensors;
  BucketTensorLayout t[kMaxBucketTensors];
};

}  // namespace epx::dev
