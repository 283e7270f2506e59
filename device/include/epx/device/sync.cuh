// Flags between ranks over NVLink: release stores, acquire loads and bounded waits that turn a
// stalled peer into an AsyncError instead of a hang.
#pragma once
#include <cstdint>

#include "epx/device/ep_args.h"

namespace epx::dev {

__device__ __forceinline__ uint32_t loadAcquireSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void storeReleaseSys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void addReleaseSys(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Records the group's first device-side error (later ones are dropped).
__device__ __forceinline__ void recordError(AsyncError* err, int code, int phase, int peer, int rank,
                                            long long d0 = 0, long long d1 = 0) {
  if (atomicCAS_system(&err->code, 0, code) == 0) {
    err->phase = phase;
    err->peer = peer;
    err->rank = rank;
    err->detail0 = d0;
    err->detail1 = d1;
    __threadfence_system();
  }
}

// Waits until *flag >= target (wrap-safe). Returns false after timeoutNs and records the error
// naming `peer`. Single-thread wait; callers spread flags over threads.
__device__ __forceinline__ bool waitFlag(const uint32_t* flag, uint32_t target, const Common& c,
                                         int phase, int peer) {
  if (int32_t(loadAcquireSys(flag) - target) >= 0) return true;
  const uint64_t start = globalTimerNs();
  for (uint32_t spin = 0;; ++spin) {
    if (int32_t(loadAcquireSys(flag) - target) >= 0) return true;
    if ((spin & 1023u) == 0) {
      if (*(volatile int*)&c.error->code != 0 && c.error->phase != kPhaseBadExpertId) return false;
      if (globalTimerNs() - start > uint64_t(c.timeoutNs)) {
        recordError(c.error, /*ncclRemoteError*/ 6, phase, peer, c.rank);
        return false;
      }
    }
  }
}

// Flag addresses inside a window whose local base is `base`.
__device__ __forceinline__ uint32_t* countFlag(char* base, const WindowLayout& wl, int src) {
  return reinterpret_cast<uint32_t*>(base + wl.countFlags) + src;
}
__device__ __forceinline__ uint32_t* readyFlag(char* base, const WindowLayout& wl, int kind, int src) {
  return reinterpret_cast<uint32_t*>(base + wl.readyFlags) + kind * kMaxRanks + src;
}
__device__ __forceinline__ uint32_t* arrivals(char* base, const WindowLayout& wl, int kind, int src) {
  return reinterpret_cast<uint32_t*>(base + wl.arrivals) + kind * kMaxRanks + src;
}

}  // namespace epx::dev
