// Bucket collective kernel (ncclEpBucketAllGather / ReduceScatter / AllReduce): one all-gather or
// reduce-scatter over the tensors of a call, pushed into the peers' windows on the transport layer
// and synchronized by the protocol session (session.cuh, op slot kBucketSessionKind):
//   begin         this rank may receive the op (ready to every peer); wait until every peer may
//                 receive it (NVLink peers: the session; network peers: every CTA too);
//   network       GIN chunks, each adding 1 to the peer's arrival signal: all-gather puts this
//                 rank's shard from its tensor, chunks spread over the CTAs; reduce-scatter puts its
//                 contribution to the peer's shard from its tensor (or, BF16 wire, from the stage
//                 once every CTA converted its share), every chunk to one peer posted by one thread
//                 in order, so the peer's arrival count says which chunks are in;
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

// Vectors of four elements each thread loads before using them (loads in flight: conversions and
// sums are bound by memory latency otherwise). Rows are 16-byte aligned (FP32) when the shard is a
// multiple of 8 elements.
constexpr int kReduceVecs = 4;
constexpr uint64_t kVecElems = 4, kVecShardMultiple = 8;

// CTA p's elements of n: whole 4-element vectors when n is a multiple of kVecShardMultiple.
__device__ ByteRange elemShare(uint64_t n, int parts, int p) {
  if (n % kVecShardMultiple != 0) return itemShare(n, parts, p);
  const ByteRange v = itemShare(n / kVecElems, parts, p);
  return ByteRange{v.begin * kVecElems, v.end * kVecElems};
}

// Elements [b, e) of FP32 src as BF16 into dst (CTA-wide): four per thread, kReduceVecs in flight,
// when b and e are multiples of 4 (16-byte source / 8-byte destination vectors); else one by one.
__device__ void ctaToBf16(uint16_t* dst, const float* src, uint64_t b, uint64_t e) {
  if (b % kVecElems != 0 || e % kVecElems != 0) {
    for (uint64_t i = b + threadIdx.x; i < e; i += blockDim.x) dst[i] = toBf16Bits(src[i]);
    return;
  }
  const uint64_t end = e / kVecElems;
  for (uint64_t q0 = b / kVecElems + threadIdx.x; q0 < end; q0 += uint64_t(blockDim.x) * kReduceVecs) {
    float4 v[kReduceVecs];
#pragma unroll
    for (int u = 0; u < kReduceVecs; ++u)
      if (q0 + u * blockDim.x < end) v[u] = reinterpret_cast<const float4*>(src)[q0 + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < kReduceVecs; ++u)
      if (q0 + u * blockDim.x < end)
        reinterpret_cast<uint2*>(dst)[q0 + u * blockDim.x] =
            make_uint2(uint32_t(toBf16Bits(v[u].x)) | (uint32_t(toBf16Bits(v[u].y)) << 16),
                       uint32_t(toBf16Bits(v[u].z)) | (uint32_t(toBf16Bits(v[u].w)) << 16));
  }
}

// Where a reduce-scatter's stage holds this rank's BF16 contribution to dst's shard of tensor t.
__device__ uint64_t stageOf(const BucketTensorLayout& t, int dst) { return t.stage + uint64_t(dst) * t.shard * 2; }

// Single thread: GIN peer p may receive this op's puts now (kBucketFreeKind, bucket_layout.h):
// reduce-scatter once p finished its previous op, all-gather once p started this op (or, as the
// gather half of an all-reduce, the call's reduce-scatter half). false after a timeout (aborts).
__device__ bool peerMayReceive(const BucketArgs& a, const Transport& tr, OpSession& ses, int p) {
  const bool ok = a.op == kBucketReduceScatter
                      ? tr.wait(kBucketFreeKind, p, ses.seq - 1u, kPhaseBucketFree)
                      : tr.wait(kFlagReadyDispatch, p, ses.seq - (a.gatherOfAllReduce ? 1u : 0u), kPhaseBucketReady);
  if (!ok) ses.abort = 1;
  return ok;
}

// GIN, all-gather: this CTA's chunks of every (tensor, network peer) transfer; chunk item i goes
// to CTA i % nCtas.
__device__ void postGinSpread(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  const Common& c = tr.c;
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
// (bucketChunkTarget) and d reduces each chunk as soon as it arrived from every source. FP32 wire:
// the chunks leave from the tensor, network peer k's from CTA k % nCtas. BF16 wire: every CTA first
// converts its share of each (tensor, peer) contribution into the stage; the last CTA to finish
// posts every peer's chunks (one thread per peer).
__device__ void postGinOrdered(const BucketArgs& a, const Transport& tr, OpSession& ses) {
  const Common& c = tr.c;
  char* local = tr.localBase();
  bool staged = false;
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    if (!converts(a, t)) continue;
    staged = true;
    const ByteRange e = elemShare(t.shard, gridDim.x, blockIdx.x);
    for (int d = 0; d < c.nRanks; ++d)
      if (!tr.lsa(d))
        ctaToBf16(reinterpret_cast<uint16_t*>(local + stageOf(t, d)),
                  reinterpret_cast<const float*>(local + transferSrc(a, t, c.rank, d)), e.begin, e.end);
  }
  if (staged && !ses.lastToStage(tr, kBucketSessionKind, 0)) return;
  for (int k = 1, peer = 0; k < c.nRanks; ++k) {
    const int d = (c.rank + k) % c.nRanks;
    if (tr.lsa(d)) continue;
    const bool mine = staged ? peer % int(blockDim.x) == int(threadIdx.x)
                             : peer % int(gridDim.x) == int(blockIdx.x) && threadIdx.x == 0;
    ++peer;
    if (!mine || ses.abort || !peerMayReceive(a, tr, ses, d)) continue;
    const int ctx = dataContextOf(d, c.ginContexts);
    for (int ti = 0; ti < a.numTensors; ++ti) {
      const BucketTensorLayout& t = a.t[ti];
      const PutChunks puts = bucketPutChunks(t, a.op, a.bf16Wire, a.chunkBytes);
      const uint64_t src = converts(a, t) ? stageOf(t, d) : transferSrc(a, t, c.rank, d);
      for (uint64_t ch = 0; ch < puts.count(); ++ch) {
        const ByteRange r = puts.range(ch);
        tr.putSignal(d, transferDst(a, t, c.rank) + r.begin, src + r.begin, r.size(), kFlagArriveDispatch, 1u, ctx);
      }
    }
  }
}

// NVLink: this CTA's share of every (tensor, NVLink peer) transfer, stored into the peer's window.
__device__ void storeLsa(const BucketArgs& a, const Transport& tr) {
  const Common& c = tr.c;
  const char* local = tr.localBase();
  for (int ti = 0; ti < a.numTensors; ++ti) {
    const BucketTensorLayout& t = a.t[ti];
    const uint64_t bytes = bucketTransferBytes(t, a.op, a.bf16Wire);
    for (int k = 1; k < c.lsaSize; ++k) {
      const int d = c.rank - c.lsaRank + (c.lsaRank + k) % c.lsaSize;
      char* dst = tr.lsaBase(d) + transferDst(a, t, c.rank);
      const char* src = local + transferSrc(a, t, c.rank, d);
      if (converts(a, t)) {
        const ByteRange e = elemShare(t.shard, gridDim.x, blockIdx.x);
        ctaToBf16(reinterpret_cast<uint16_t*>(dst), reinterpret_cast<const float*>(src), e.begin, e.end);
      } else {
        const ByteRange r = vecShare(bytes, gridDim.x, blockIdx.x);
        ctaCopyBytes<false>(dst + r.begin, src + r.begin, r.size());
      }
    }
  }
}

// Elements j .. j+3 of an FP32 or BF16 row (16-byte / 8-byte aligned), volatile (peers' stores).
__device__ __forceinline__ void load4(const char* row, uint64_t j, bool bf16, float (&v)[4]) {
  if (bf16) {
    uint32_t lo, hi;
    asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(lo), "=r"(hi) : "l"(row + j * 2));
    v[0] = __uint_as_float(lo << 16);
    v[1] = __uint_as_float(lo & 0xffff0000u);
    v[2] = __uint_as_float(hi << 16);
    v[3] = __uint_as_float(hi & 0xffff0000u);
  } else {
    const int4 q = ldVolatile(reinterpret_cast<const int4*>(row + j * 4));
    v[0] = __int_as_float(q.x);
    v[1] = __int_as_float(q.y);
    v[2] = __int_as_float(q.z);
    v[3] = __int_as_float(q.w);
  }
}

__device__ __forceinline__ void store4(char* row, uint64_t j, bool bf16, const float (&v)[4]) {
  if (bf16) {
    const uint32_t lo = uint32_t(toBf16Bits(v[0])) | (uint32_t(toBf16Bits(v[1])) << 16);
    const uint32_t hi = uint32_t(toBf16Bits(v[2])) | (uint32_t(toBf16Bits(v[3])) << 16);
    *reinterpret_cast<uint2*>(row + j * 2) = make_uint2(lo, hi);
  } else {
    *reinterpret_cast<float4*>(row + j * 4) = make_float4(v[0], v[1], v[2], v[3]);
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
  __device__ void loadVec(int s, uint64_t j, float (&v)[4]) const {
    if (s == me) {
      load4(own, j, tensorBf16, v);
      if (roundOwn)
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = roundBf16(v[k]);
    } else {
      load4(scratch + uint64_t(s) * shard * wireBytes, j, wireBf16, v);
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

// Reduce-scatter of this rank's shard elements [el.begin, el.end) of tensor t, this CTA's share:
// the sum of every rank's contribution in rank order, FP32 accumulation, times the scale, written
// in place. Four elements per thread and kReduceVecs of them in flight when every row is 16-byte
// aligned (shard a multiple of 8 elements), else one; the same additions in the same order.
__device__ void reduceElems(const BucketArgs& a, const Transport& tr, const BucketTensorLayout& t, ByteRange el) {
  const Common& c = tr.c;
  char* local = tr.localBase();
  const bool tensorBf16 = t.elem == kElemBf16;
  const bool wireBf16 = tensorBf16 || a.bf16Wire;
  char* own = local + t.offset + uint64_t(c.rank) * shardBytes(t);
  const ReduceSources src{own, local + t.scratch, t.shard, uint64_t(wireBf16 ? 2 : 4), tensorBf16, wireBf16,
                          a.bf16Wire != 0, c.rank};
  if (t.shard % kVecShardMultiple == 0) {
    const ByteRange g = itemShare((el.end - el.begin) / kVecElems, gridDim.x, blockIdx.x);
    const uint64_t first = el.begin / kVecElems + g.begin, end = el.begin / kVecElems + g.end;
    for (uint64_t q0 = first + threadIdx.x; q0 < end; q0 += uint64_t(blockDim.x) * kReduceVecs) {
      float acc[kReduceVecs][4] = {};
      for (int s = 0; s < c.nRanks; ++s) {
        float v[kReduceVecs][4];
#pragma unroll
        for (int u = 0; u < kReduceVecs; ++u)
          if (q0 + u * blockDim.x < end) src.loadVec(s, (q0 + u * blockDim.x) * kVecElems, v[u]);
#pragma unroll
        for (int u = 0; u < kReduceVecs; ++u)
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[u][k] = __fadd_rn(acc[u][k], v[u][k]);
      }
#pragma unroll
      for (int u = 0; u < kReduceVecs; ++u) {
        if (q0 + u * blockDim.x >= end) continue;
        if (a.hasScale)
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[u][k] = __fmul_rn(acc[u][k], a.scale);
        store4(own, (q0 + u * blockDim.x) * kVecElems, tensorBf16, acc[u]);
      }
    }
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
        ses.waitGinPrefix(tr, kBucketSessionKind, kPhaseBucketData, SameRows{bucketChunkTarget(before, ch)});
        if (ses.abort) return;
      }
      reduceElems(a, tr, t, bucketChunkElems(puts, puts.bytes / t.shard, ch));
    }
    before += uint32_t(chunks);
  }
}

__global__ void __launch_bounds__(kCollThreads, 1) bucketKernel(const __grid_constant__ BucketArgs a) {
  const Transport tr(a.c);
  __shared__ OpSession ses;
  ses.begin(tr, kBucketSessionKind, kPhaseBucketReady);
  const bool gin = tr.hasGin();
  // Every rank sends to every peer: every CTA also waits until the network peers are ready, so a
  // peer that never starts stalls every CTA here (and is named), not in a later wait on this
  // rank's own CTAs.
  if (gin) {
    for (int p = threadIdx.x; p < tr.c.nRanks && !ses.abort; p += blockDim.x)
      if (!tr.lsa(p)) peerMayReceive(a, tr, ses, p);
    __syncthreads();
  }
  if (gin && !ses.abort) {
    if (a.op == kBucketReduceScatter)
      postGinOrdered(a, tr, ses);
    else
      postGinSpread(a, tr, ses);
  }
  if (!ses.abort) storeLsa(a, tr);
  ses.arriveLsa(tr, kBucketSessionKind);
  const SameRows rows{bucketGinPutsPerPeer(a.t, a.numTensors, a.op, a.bf16Wire != 0, a.chunkBytes)};
  const bool reduce = a.op == kBucketReduceScatter;
  ses.waitArrivals(tr, kBucketSessionKind, kPhaseBucketData, true, gin && !reduce, rows);
  if (reduce && !ses.abort) reduceShard(a, tr, ses);
  if (gin) tr.completeGin();  // the tensors and the stage are the caller's / the next op's again
  ses.end(tr, kBucketSessionKind, rows, kBucketFreeKind);
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
