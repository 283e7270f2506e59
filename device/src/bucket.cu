// Bucket collective kernel (ncclEpBucketAllGather / ReduceScatter / AllReduce): one all-gather or
// reduce-scatter over the tensors of a call, pushed into the peers' windows on the transport layer
// and synchronized by the protocol session (session.cuh, op slot kBucketSessionKind):
//   begin         this rank may receive the op (ready to every peer); wait until every peer may
//                 receive it (NVLink peers: the session; network peers: every CTA too);
//   network       GIN chunks, each adding 1 to the peer's arrival signal: all-gather puts this
//                 rank's shard from its tensor, chunks spread over the CTAs; reduce-scatter puts its
//                 contribution to the peer's shard from its tensor (or, BF16 wire, from the stage,
//                 each chunk as soon as every CTA converted its share of it; the first chunk
//                 goes as three ramped puts, so the wire starts after a quarter of it), every chunk to one
//                 peer posted by one thread in order, so the peer's arrival count says which
//                 chunks are in;
//   NVLink        every CTA stores its share of each transfer into the NVLink peers' windows
//                 (BF16 wire: converted on the way), then arrives at each of them;
//   arrivals      until every source's data arrived (bounded); reduce-scatter waits for network
//                 sources chunk by chunk instead, inside the reduction;
//   reduce        reduce-scatter: this rank's shard = the sum of every rank's contribution in rank
//                 order 0..nRanks-1, FP32 accumulation, then times the scale; written in place,
//                 one put at a time as soon as that put arrived from every network source (the
//                 sum overlaps the rest of the transfer; each transfer's last chunk goes as three
//                 tapered puts, so a quarter of it is left to sum after the last arrival: PutChunks).
// No multicast; all-reduce is a reduce-scatter followed by an all-gather (host/src/bucket.cc).
#include "epx/device/bulk_copy.cuh"
#include "epx/device/chunking.h"
#include "epx/device/coll_launch.h"
#include "epx/device/session.cuh"

namespace epx::dev {

namespace {

// Every network source puts the same number of chunks to this rank in one op.
struct SameRows {
  uint32_t n;
  __device__ uint32_t operator()(int) const { return n; }
};

__device__ uint64_t shardBytes(const BucketTensorLayout& t) { return t.shard * uint64_t(t.elemBytes); }

// Window offsets of the transfer from this rank (`me`) to `dst` for tensor t: source in this
// rank's window, destination in dst's window.
__device__ uint64_t transferSrc(const BucketArgs& a, const BucketTensorLayout& t, int me, int dst) {
  if (a.op == kBucketAllGather) return t.offset + uint64_t(me) * shardBytes(t);
  return t.offset + uint64_t(dst) * shardBytes(t);
}
__device__ uint64_t transferDst(const BucketArgs& a, const BucketTensorLayout& t, int me) {
  if (a.op == kBucketAllGather) return t.offset + uint64_t(me) * shardBytes(t);
  return t.scratch + uint64_t(me) * bucketTransferBytes(t, a.op, a.bf16Wire);
}
__device__ bool converts(const BucketArgs& a, const BucketTensorLayout& t) {
  return a.op == kBucketReduceScatter && a.bf16Wire && t.elem == kElemF32;
}
__device__ bool convertsAny(const BucketArgs& a) {
  for (int i = 0; i < a.numTensors; ++i)
    if (converts(a, a.t[i])) return true;
  return false;
}

// Vectors each thread loads before using them (bytes in flight: with 4 CTAs the conversions and
// sums are bound by memory latency). Every row of a tensor, the scratch area and the stage is
// 16-byte aligned when the shard is a multiple of 8 elements.
constexpr int kReduceVecs = 4;
constexpr uint64_t kVecShardMultiple = 8;

// The threads that convert: a CTA's threads [first, first + count) (count a multiple of 32), which
// meet at their own barrier (the posting CTA's poster warp is not among them).
struct Converters {
  uint32_t first, count;
  static constexpr uint32_t kBarrier = 1;  // named barrier 0 is __syncthreads
  __device__ static Converters all() { return Converters{0, blockDim.x}; }
  __device__ uint32_t tid() const { return threadIdx.x - first; }
  __device__ void sync() const { asm volatile("bar.sync %0, %1;" ::"n"(kBarrier), "r"(count) : "memory"); }
};

// Elements [b, e) of FP32 src as BF16 into dst (the Converters' threads): 8 elements per thread and
// vector (two 16-byte loads, one 16-byte store), kConvertVecs vectors in flight, from b (a multiple
// of 8) up to the last whole vector when both rows are 16-byte aligned; the rest one by one. A shard
// that is not a multiple of 8 elements puts rank r's row of a tensor, of the stage and of the
// scratch area at r * shard elements, so row alignment differs from row to row (a 1007-element
// shard: the second stage row starts 2014 bytes in).
constexpr uint64_t kConvertElems = 8;
constexpr int kConvertVecs = 4;
__device__ void ctaToBf16(uint16_t* dst, const float* src, uint64_t b, uint64_t e, Converters cv) {
  const bool vectors = b % kConvertElems == 0 && reinterpret_cast<uintptr_t>(src) % sizeof(float4) == 0 &&
                       reinterpret_cast<uintptr_t>(dst) % sizeof(uint4) == 0;
  const uint64_t vecEnd = vectors ? b + (e - b) / kConvertElems * kConvertElems : b;
  for (uint64_t i = vecEnd + cv.tid(); i < e; i += cv.count) dst[i] = toBf16Bits(src[i]);
  const uint64_t end = vecEnd / kConvertElems;
  const float4* s4 = reinterpret_cast<const float4*>(src);
  for (uint64_t q0 = b / kConvertElems + cv.tid(); q0 < end; q0 += uint64_t(cv.count) * kConvertVecs) {
    float4 lo[kConvertVecs], hi[kConvertVecs];
#pragma unroll
    for (int u = 0; u < kConvertVecs; ++u)
      if (q0 + u * cv.count < end) {
        lo[u] = s4[2 * (q0 + u * cv.count)];
        hi[u] = s4[2 * (q0 + u * cv.count) + 1];
      }
#pragma unroll
    for (int u = 0; u < kConvertVecs; ++u)
      if (q0 + u * cv.count < end)
        reinterpret_cast<uint4*>(dst)[q0 + u * cv.count] = make_uint4(
            uint32_t(toBf16Bits(lo[u].x)) | (uint32_t(toBf16Bits(lo[u].y)) << 16),
            uint32_t(toBf16Bits(lo[u].z)) | (uint32_t(toBf16Bits(lo[u].w)) << 16),
            uint32_t(toBf16Bits(hi[u].x)) | (uint32_t(toBf16Bits(hi[u].y)) << 16),
            uint32_t(toBf16Bits(hi[u].z)) | (uint32_t(toBf16Bits(hi[u].w)) << 16));
  }
}

// Part p of `parts` of elements el: whole conversion vectors from el.begin, the last part also
// takes the tail that is not a whole vector.
__device__ ByteRange vecElemShare(ByteRange el, int parts, int p) {
  const ByteRange v = itemShare((el.end - el.begin) / kConvertElems, parts, p);
  return ByteRange{el.begin + v.begin * kConvertElems, p == parts - 1 ? el.end : el.begin + v.end * kConvertElems};
}

// Where a reduce-scatter's stage holds this rank's BF16 contribution to dst's shard of tensor t.
__device__ uint64_t stageOf(const BucketTensorLayout& t, int dst) { return t.stage + uint64_t(dst) * t.shard * 2; }

// Single thread: GIN peer p may receive this op's puts now (kBucketFreeKind, bucket_layout.h):
// reduce-scatter once p finished its previous op, all-gather once p started this op (or, as the
// gather half of an all-reduce, the call's reduce-scatter half). false after a timeout (aborts).
__device__ bool peerMayReceive(const BucketArgs& a, const Transport& tr, OpSession& ses, int p) {
  const bool ok = a.op == kBucketReduceScatter
                      ? waitCredit(tr, kBucketFreeKind, p, ses.seq, 1u, kPhaseBucketFree)
                      : waitCredit(tr, kFlagReadyDispatch, p, ses.seq, a.gatherOfAllReduce ? 1u : 0u, kPhaseBucketReady);
  if (!ok) ses.abort = 1;
  return ok;
}

// GIN, all-gather: this CTA's chunks of every (tensor, network peer) transfer; chunk item i goes
// to CTA i % nCtas.
__device__ void postGinSpread(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  const LinkArgs& c = tr.link;
  uint64_t item = 0;
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    const PutChunks puts = bucketPutChunks(t, a.op, a.bf16Wire, a.chunkBytes);
    const uint64_t chunks = puts.count();
    for (int k = 1; k < c.nRanks; ++k) {
      const int d = (c.rank + k) % c.nRanks;
      if (tr.lsa(d)) continue;
      for (uint64_t ch = 0; ch < chunks; ++ch, ++item) {
        if (int(item % uint64_t(gridDim.x)) != int(blockIdx.x)) continue;
        const ByteRange r = puts.range(ch);
        if (threadIdx.x == 0 && !ses.abort && peerMayReceive(a, tr, ses, d))
          tr.putSignal(d, transferDst(a, t, c.rank) + r.begin, transferSrc(a, t, c.rank, d) + r.begin, r.size(),
                       kFlagArriveDispatch, 1u, dataContextOf(d, c.ginContexts));
      }
    }
  }
}

// GIN, reduce-scatter: every chunk to network peer d is posted by one thread, in (tensor, chunk)
// order on one context, so d's arrival count from this rank is a prefix of the chunks
// (bucketChunkTarget) and d reduces each chunk as soon as it arrived from every source.
// FP32 wire (nothing converts): the chunks leave from the tensor, network peer k's from thread 0
// of CTA k % nCtas.
__device__ void postGinDirect(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  const LinkArgs& c = tr.link;
  if (threadIdx.x != 0) return;
  for (int k = 1, peer = 0; k < c.nRanks; ++k) {
    const int d = (c.rank + k) % c.nRanks;
    if (tr.lsa(d)) continue;
    if (peer++ % int(gridDim.x) != int(blockIdx.x) || ses.abort || !peerMayReceive(a, tr, ses, d)) continue;
    const int ctx = dataContextOf(d, c.ginContexts);
    for (int ti = 0; ti < a.numTensors; ++ti) {
      const BucketTensorLayout& t = a.t[ti];
      const PutChunks puts = bucketPutChunks(t, a.op, a.bf16Wire, a.chunkBytes);
      for (uint64_t ch = 0; ch < puts.count(); ++ch) {
        const ByteRange r = puts.range(ch);
        tr.putSignal(d, transferDst(a, t, c.rank) + r.begin, transferSrc(a, t, c.rank, d) + r.begin, r.size(),
                     kFlagArriveDispatch, 1u, ctx);
      }
    }
  }
}

// Stage progress words (GroupState::stageProgress): CTA b has converted the op's first n chunks
// once its word reached (seq << 32) | n.
__device__ uint64_t stageTag(uint32_t seq, uint64_t chunks) { return (uint64_t(seq) << 32) | chunks; }

// Poster lane: until CTA `cta` converted the op's first `chunks` chunks (bounded; false after a
// timeout, recorded with the CTA in place of a peer).
__device__ bool waitStaged(const Transport& tr, const GroupState* state, uint32_t seq, int cta, uint64_t chunks) {
  const volatile uint64_t* w = &state->stageProgress[cta];
  const uint64_t target = stageTag(seq, chunks);
  return tr.spinBounded([&] { return *w >= target; }, WaitBound{}, [&] {
    recordTimeout(tr.link.error, kPhaseBucketStage, cta, tr.link.rank, kTransportGin, (long long)chunks,
                  (long long)(*w & 0xffffffffu));
  });
}

// GIN, reduce-scatter with the BF16 wire: the conversion of this rank's FP32 contributions runs a
// chunk ahead of the wire. Chunks go in (tensor, chunk) order; every CTA converts its share of
// chunk g for every network peer, then publishes g + 1 in its stage progress word; the poster warp
// (warp 0 of the last CTA, which converts with its other warps) posts chunk g to every network peer
// once every CTA's word says so (lane l: the peers l, l + 32, ... in order), so chunk g is on the
// wire while g + 1 is being converted. Tensors that are BF16 already leave from the tensor.
__device__ void postGinConverted(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  const LinkArgs& c = tr.link;
  char* local = tr.localBase();
  const int lane = threadIdx.x & 31;
  const bool posterCta = blockIdx.x == gridDim.x - 1;
  const bool poster = posterCta && threadIdx.x < 32;
  const Converters cv = posterCta ? Converters{32, blockDim.x - 32} : Converters::all();
  uint64_t g = 0;  // chunks of the op so far
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    const PutChunks puts = bucketPutChunks(t, a.op, a.bf16Wire, a.chunkBytes);
    for (uint64_t ch = 0; ch < puts.count(); ++ch) {
      ++g;
      if (!poster) {
        if (converts(a, t)) {
          const ByteRange e = vecElemShare(bucketChunkElems(puts, 2, ch), gridDim.x, blockIdx.x);
          for (int d = 0; d < c.nRanks; ++d)
            if (!tr.lsa(d))
              ctaToBf16(reinterpret_cast<uint16_t*>(local + stageOf(t, d)),
                        reinterpret_cast<const float*>(local + transferSrc(a, t, c.rank, d)), e.begin, e.end, cv);
        }
        cv.sync();
        if (cv.tid() == 0) {
          __threadfence_system();  // the converted rows, before the word that lets them be put
          *reinterpret_cast<volatile uint64_t*>(&a.session.state->stageProgress[blockIdx.x]) = stageTag(ses.seq, g);
        }
        continue;
      }
      // The poster warp.
      const bool staged = lane >= int(gridDim.x) || waitStaged(tr, a.session.state, ses.seq, lane, g);
      if (!__all_sync(0xffffffffu, staged)) ses.abort = 1;
      __syncwarp();
      if (ses.abort) continue;
      const ByteRange r = puts.range(ch);
      for (int k = 1, peer = 0; k < c.nRanks; ++k) {
        const int d = (c.rank + k) % c.nRanks;
        if (tr.lsa(d)) continue;
        if (peer++ % 32 != lane) continue;
        const uint64_t from = converts(a, t) ? stageOf(t, d) : transferSrc(a, t, c.rank, d);
        tr.putSignal(d, transferDst(a, t, c.rank) + r.begin, from + r.begin, r.size(), kFlagArriveDispatch, 1u,
                     dataContextOf(d, c.ginContexts));
      }
    }
  }
}

// NVLink: this CTA's share of every (tensor, NVLink peer) transfer, stored into the peer's window.
__device__ void storeLsa(const BucketArgs& a, const Transport& tr) {
  const LinkArgs& c = tr.link;
  const char* local = tr.localBase();
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    const uint64_t bytes = bucketTransferBytes(t, a.op, a.bf16Wire);
    for (int k = 1; k < c.lsaSize; ++k) {
      const int d = c.rank - c.lsaRank + (c.lsaRank + k) % c.lsaSize;
      char* dst = tr.lsaBase(d) + transferDst(a, t, c.rank);
      const char* src = local + transferSrc(a, t, c.rank, d);
      if (converts(a, t)) {
        const ByteRange e = vecElemShare(ByteRange{0, t.shard}, gridDim.x, blockIdx.x);
        ctaToBf16(reinterpret_cast<uint16_t*>(dst), reinterpret_cast<const float*>(src), e.begin, e.end,
                  Converters::all());
      } else {
        const ByteRange r = vecShare(bytes, gridDim.x, blockIdx.x);
        ctaCopyBytes<false>(dst + r.begin, src + r.begin, r.size());
      }
    }
  }
}

// Elements j .. j+N-1 (N = 4 or 8) of an FP32 or BF16 row, 16-byte loads (one BF16 vector of 4
// elements is 8 bytes), volatile (peers' stores and puts).
template <int N>
__device__ __forceinline__ void loadElems(const char* row, uint64_t j, bool bf16, float (&v)[N]) {
  static_assert(N == 4 || N == 8, "4 or 8 elements");
  if (bf16) {
    uint32_t w[N / 2];
    if constexpr (N == 8) {
      const int4 q = ldVolatile(reinterpret_cast<const int4*>(row + j * 2));
      w[0] = uint32_t(q.x), w[1] = uint32_t(q.y), w[2] = uint32_t(q.z), w[3] = uint32_t(q.w);
    } else {
      asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(row + j * 2));
    }
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      v[2 * k] = __uint_as_float(w[k] << 16);
      v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int h = 0; h < N / 4; ++h) {
      const int4 q = ldVolatile(reinterpret_cast<const int4*>(row + (j + 4 * h) * 4));
      v[4 * h] = __int_as_float(q.x);
      v[4 * h + 1] = __int_as_float(q.y);
      v[4 * h + 2] = __int_as_float(q.z);
      v[4 * h + 3] = __int_as_float(q.w);
    }
  }
}

template <int N>
__device__ __forceinline__ void storeElems(char* row, uint64_t j, bool bf16, const float (&v)[N]) {
  if (bf16) {
    uint32_t w[N / 2];
#pragma unroll
    for (int k = 0; k < N / 2; ++k) w[k] = uint32_t(toBf16Bits(v[2 * k])) | (uint32_t(toBf16Bits(v[2 * k + 1])) << 16);
    if constexpr (N == 8)
      *reinterpret_cast<uint4*>(row + j * 2) = make_uint4(w[0], w[1], w[2], w[3]);
    else
      *reinterpret_cast<uint2*>(row + j * 2) = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (int h = 0; h < N / 4; ++h)
      *reinterpret_cast<float4*>(row + (j + 4 * h) * 4) = make_float4(v[4 * h], v[4 * h + 1], v[4 * h + 2], v[4 * h + 3]);
  }
}

// One source's value of element(s) at j of a reduce-scatter: this rank's own contribution from its
// tensor, through the wire's rounding, or source s's from the scratch area.
struct ReduceSources {
  const char* own;
  const char* scratch;
  uint64_t shard, wireBytes;
  bool tensorBf16, wireBf16, roundOwn;
  int me;
  template <int N>
  __device__ void loadVec(int s, uint64_t j, float (&v)[N]) const {
    if (s == me) {
      loadElems<N>(own, j, tensorBf16, v);
      if (roundOwn)
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = roundBf16(v[k]);
    } else {
      loadElems<N>(scratch + uint64_t(s) * shard * wireBytes, j, wireBf16, v);
    }
  }
  __device__ float loadOne(int s, uint64_t j) const {
    if (s == me) {
      const float v = tensorBf16 ? ldBf16Volatile(reinterpret_cast<const uint16_t*>(own) + j)
                                 : ldF32Volatile(reinterpret_cast<const float*>(own) + j);
      return roundOwn ? roundBf16(v) : v;
    }
    const char* row = scratch + uint64_t(s) * shard * wireBytes;
    return wireBf16 ? ldBf16Volatile(reinterpret_cast<const uint16_t*>(row) + j)
                    : ldF32Volatile(reinterpret_cast<const float*>(row) + j);
  }
};

// This CTA's share of elements el (N-element vectors: el a whole number of them), summed in rank
// order from +0, FP32, times the scale, written in place; kReduceVecs vectors per thread in flight.
template <int N>
__device__ void reduceVectors(const BucketArgs& a, const LinkArgs& c, const ReduceSources& src, char* own, ByteRange el) {
  const ByteRange g = itemShare((el.end - el.begin) / N, gridDim.x, blockIdx.x);
  const uint64_t first = el.begin / N + g.begin, end = el.begin / N + g.end;
  for (uint64_t q0 = first + threadIdx.x; q0 < end; q0 += uint64_t(blockDim.x) * kReduceVecs) {
    float acc[kReduceVecs][N] = {};
    for (int s = 0; s < c.nRanks; ++s) {
      float v[kReduceVecs][N];
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u)
        if (q0 + u * blockDim.x < end) src.loadVec<N>(s, (q0 + u * blockDim.x) * N, v[u]);
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u)
#pragma unroll
        for (int k = 0; k < N; ++k) acc[u][k] = __fadd_rn(acc[u][k], v[u][k]);
    }
#pragma unroll
    for (int u = 0; u < kReduceVecs; ++u) {
      if (q0 + u * blockDim.x >= end) continue;
      if (a.hasScale)
#pragma unroll
        for (int k = 0; k < N; ++k) acc[u][k] = __fmul_rn(acc[u][k], a.scale);
      storeElems<N>(own, (q0 + u * blockDim.x) * N, src.tensorBf16, acc[u]);
    }
  }
}

// Reduce-scatter of this rank's shard elements [el.begin, el.end) of tensor t, this CTA's share:
// the sum of every rank's contribution in rank order, FP32 accumulation, times the scale, written
// in place. Vectors when every row is 16-byte aligned (shard a multiple of 8 elements): of 8
// elements with a BF16 wire (its put chunks are whole 16-byte BF16 vectors), else of 4 (FP32 wire
// chunks are whole 16-byte FP32 vectors); one element at a time otherwise. The same additions in
// the same order either way.
__device__ void reduceElems(const BucketArgs& a, const Transport& tr, const BucketTensorLayout& t, ByteRange el) {
  const LinkArgs& c = tr.link;
  char* local = tr.localBase();
  const bool tensorBf16 = t.elem == kElemBf16;
  const bool wireBf16 = tensorBf16 || a.bf16Wire;
  char* own = local + t.offset + uint64_t(c.rank) * shardBytes(t);
  const ReduceSources src{own, local + t.scratch, t.shard, uint64_t(wireBf16 ? 2 : 4), tensorBf16, wireBf16,
                          a.bf16Wire != 0, c.rank};
  if (t.shard % kVecShardMultiple == 0) {
    if (wireBf16)
      reduceVectors<8>(a, c, src, own, el);
    else
      reduceVectors<4>(a, c, src, own, el);
    return;
  }
  const ByteRange e = itemShare(el.end - el.begin, gridDim.x, blockIdx.x);
  for (uint64_t j = el.begin + e.begin + threadIdx.x; j < el.begin + e.end; j += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < c.nRanks; ++s) acc = __fadd_rn(acc, src.loadOne(s, j));
    if (a.hasScale) acc = __fmul_rn(acc, a.scale);
    if (tensorBf16)
      reinterpret_cast<uint16_t*>(own)[j] = toBf16Bits(acc);
    else
      reinterpret_cast<float*>(own)[j] = acc;
  }
}

// Reduce-scatter: every tensor's shard, one put chunk's elements at a time; with network sources,
// each chunk as soon as it arrived from all of them (their chunks arrive in order: postGinOrdered).
__device__ void reduceShard(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  uint32_t before = 0;  // put chunks of the earlier tensors
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    const PutChunks puts = bucketPutChunks(t, a.op, a.bf16Wire, a.chunkBytes);
    const uint64_t chunks = puts.count();
    for (uint64_t ch = 0; ch < chunks; ++ch) {
      if (tr.hasGin()) {
        ses.waitGinPrefix(tr, a.session, kBucketSessionKind, kPhaseBucketData, SameRows{bucketChunkTarget(before, ch)});
        if (ses.abort) return;
      }
      reduceElems(a, tr, t, bucketChunkElems(puts, puts.bytes / t.shard, ch));
    }
    before += uint32_t(chunks);
  }
}

__global__ void __launch_bounds__(kCollThreads, 1) bucketKernel(const __grid_constant__ BucketArgs a) {
  const Transport tr(a.link);
  __shared__ OpSession ses;
  ses.begin(tr, a.session, kBucketSessionKind, kPhaseBucketReady);
  const bool gin = tr.hasGin();
  // Every rank sends to every peer: every CTA also waits until the network peers are ready, so a
  // peer that never starts stalls every CTA here (and is named), not in a later wait on this
  // rank's own CTAs.
  if (gin) {
    for (int p = threadIdx.x; p < tr.link.nRanks && !ses.abort; p += blockDim.x)
      if (!tr.lsa(p)) peerMayReceive(a, tr, ses, p);
    __syncthreads();
  }
  if (gin && !ses.abort) {
    if (a.op != kBucketReduceScatter)
      postGinSpread(a, tr, ses);
    else if (convertsAny(a))
      postGinConverted(a, tr, ses);
    else
      postGinDirect(a, tr, ses);
  }
  if (!ses.abort) storeLsa(a, tr);
  ses.arriveLsa(tr, kBucketSessionKind);
  const SameRows rows{bucketGinPutsPerPeer(a.t, a.numTensors, a.op, a.bf16Wire != 0, a.chunkBytes)};
  const bool reduce = a.op == kBucketReduceScatter;
  ses.waitArrivals(tr, a.session, kBucketSessionKind, kPhaseBucketData, true, gin && !reduce, rows);
  if (reduce && !ses.abort) reduceShard(a, tr, ses);
  if (gin) tr.completeGin();  // the tensors and the stage are the caller's / the next op's again
  ses.end(tr, a.session, kBucketSessionKind, rows, kBucketFreeKind);
}

}  // namespace

cudaError_t preloadBucketKernels() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, bucketKernel);
}

cudaError_t launchBucket(const BucketArgs& a, int nCtas, cudaStream_t stream) {
  bucketKernel<<<nCtas, kCollThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace epx::dev
