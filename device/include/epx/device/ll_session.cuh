// The protocol session of one low-latency (LL) half, on the completion protocol (completion.cuh):
//   sendSeq()      the op's sequence number (group-owned: the last send + 1) and so its bank;
//   recvSeq()      the sequence number of the send half this receive half completes;
//   waitFree()     before a send half writes bank seq & 1 of a peer: the peer has received op
//                  seq - 2, the op that used the bank before (free word, cumulative: a credit of
//                  depth kLlBanks);
// The one CTA that finished a half last (lastCtaOf) then signals counts / arrival, or frees the
// bank and advances the running totals.
//   freeBank()     after a receive half: tell every source that op #seq of this kind was consumed.
// Waits are bounded (Transport::waitWord); a timeout records the peer and phase and aborts the CTA.
// Also the FP8 cast helpers the LL kernels share.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "epx/device/completion.cuh"
#include "epx/device/ll_args.h"

namespace epx::dev {

struct LlSession {
  const Transport& t;
  const LlGroupDev& g;
  bool abort = false;

  __device__ LlSession(const Transport& tr, const LlGroupDev& gd) : t(tr), g(gd) {}

  __device__ uint32_t sendSeq(int op) const { return nextSeq(&g.state->seq[op]); }
  __device__ static uint32_t recvSeq(const LlRoute& r, int op) { return publishedCount(&r.seq[op]); }

  // Every thread of the CTA.
  __device__ void waitFree(int op, uint32_t seq, int phase) {
    bool ok = true;
    for (int p = threadIdx.x; p < t.link.nRanks && ok; p += blockDim.x)
      ok = waitCreditWord(t, g.l.freeWord(op, p), p, seq, uint32_t(kLlBanks), phase);
    abort = __syncthreads_or(!ok) != 0 || abort;
  }

  // Last CTA of a receive half: op #seq of `op` was consumed here (every source may reuse the bank).
  __device__ void freeBank(int op, uint32_t seq) const {
    for (int p = threadIdx.x; p < t.link.nRanks; p += blockDim.x) t.publishWord(p, g.l.freeWord(op, t.link.rank), seq);
  }
};

// FP32 dequantization scale of a 128-channel block whose largest magnitude is amax: amax / 448
// (floored at kLlMinAmax / 448), optionally rounded up to a power of two (UE8M0). The CPU reference
// (host/ref/src/ll_ref.cc) computes the same bits.
__device__ __forceinline__ float llFp8Scale(float amax, bool roundPow2) {
  const float a = fmaxf(amax, kLlMinAmax);
  float s = __fdiv_rn(a, kFp8E4m3Max);
  if (roundPow2) {
    uint32_t u = __float_as_uint(s);
    if (u & 0x007fffffu) u = (u & 0xff800000u) + 0x00800000u;
    s = __uint_as_float(u);
  }
  return s;
}

// Eight BF16 channels (one 16-byte vector) times `inv`, cast to FP8 e4m3 (round to nearest even,
// saturating to +-448), packed in 8 bytes.
__device__ __forceinline__ uint2 castFp8x8(const int4& v, float inv) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  uint32_t w[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float2 a = __bfloat1622float2(h[2 * j]), b = __bfloat1622float2(h[2 * j + 1]);
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(a.x, inv), __fmul_rn(a.y, inv)), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(b.x, inv), __fmul_rn(b.y, inv)), __NV_SATFINITE, __NV_E4M3);
    w[j] = lo | (hi << 16);
  }
  return make_uint2(w[0], w[1]);
}

// Largest |channel| of eight BF16 channels.
__device__ __forceinline__ float absMax8(const int4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  return m;
}

}  // namespace epx::dev
