// Shared helpers of epx-bench: fail-fast error checks, a host barrier for the rank threads, device
// buffers, CUDA-event timing and medians. Every CUDA/NCCL/epx call goes through a check macro; a
// failure prints the call and the reason and ends the process at once (a rank that stops while its
// peers wait in a collective would otherwise hang the benchmark).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "epx/ep.h"

namespace epxbench {

[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "epx-bench: error: %s (%s:%d)\n", msg.c_str(), file, line);
  std::fflush(stderr);
  std::_Exit(2);
}

#define BENCH_CUDA(cmd)                                                                   \
  do {                                                                                    \
    cudaError_t e_ = (cmd);                                                               \
    if (e_ != cudaSuccess)                                                                \
      ::epxbench::fail(__FILE__, __LINE__, std::string(#cmd) + ": " + cudaGetErrorString(e_)); \
  } while (0)

#define BENCH_NCCL(cmd)                                                                   \
  do {                                                                                    \
    ncclResult_t r_ = (cmd);                                                              \
    if (r_ != ncclSuccess)                                                                \
      ::epxbench::fail(__FILE__, __LINE__, std::string(#cmd) + ": " + ncclGetErrorString(r_)); \
  } while (0)

// epx calls: the NCCL result plus epx's reason in words.
#define BENCH_EP(cmd)                                                                     \
  do {                                                                                    \
    ncclResult_t r_ = (cmd);                                                              \
    if (r_ != ncclSuccess)                                                                \
      ::epxbench::fail(__FILE__, __LINE__, std::string(#cmd) + ": " + ncclGetErrorString(r_) + \
                                               " (" + ncclEpGetLastError() + ")");        \
  } while (0)

#define BENCH_REQUIRE(cond, msg)                                  \
  do {                                                            \
    if (!(cond)) ::epxbench::fail(__FILE__, __LINE__, (msg));     \
  } while (0)

// Barrier for the rank threads of one MultiGpu::run call.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    const unsigned gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return gen != gen_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  unsigned gen_ = 0;
};

// Device memory owned by the calling rank's current device.
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t bytes) { alloc(bytes); }
  ~DevBuf() { release(); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  void alloc(size_t bytes) {
    release();
    if (bytes) BENCH_CUDA(cudaMalloc(&p_, bytes));
    n_ = bytes;
  }
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  template <class T = void>
  T* as() const { return static_cast<T*>(p_); }
  void* get() const { return p_; }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// --sync-start: before a timed op, an NCCL all-reduce of one value (not timed) that every rank
// leaves at about the same time, so the op starts together on every rank. Off: nothing.
class SyncStart {
 public:
  explicit SyncStart(bool on) : buf_(on ? sizeof(float) : 0) {
    if (on) BENCH_CUDA(cudaMemset(buf_.get(), 0, sizeof(float)));
  }
  void operator()(ncclComm_t comm, cudaStream_t st) const {
    if (buf_.get()) BENCH_NCCL(ncclAllReduce(buf_.get(), buf_.get(), 1, ncclFloat32, ncclSum, comm, st));
  }

 private:
  DevBuf buf_;
};

// Events recorded on one stream: event i marks the boundary between step i-1 and step i.
class EventSeq {
 public:
  explicit EventSeq(size_t n) : ev_(n) {
    for (auto& e : ev_) BENCH_CUDA(cudaEventCreate(&e));
  }
  ~EventSeq() {
    for (auto& e : ev_) cudaEventDestroy(e);
  }
  EventSeq(const EventSeq&) = delete;
  EventSeq& operator=(const EventSeq&) = delete;
  void record(size_t i, cudaStream_t s) { BENCH_CUDA(cudaEventRecord(ev_[i], s)); }
  // Microseconds between events a and b (both complete).
  double us(size_t a, size_t b) const {
    float ms = 0.f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev_[a], ev_[b]));
    return double(ms) * 1e3;
  }

 private:
  std::vector<cudaEvent_t> ev_;
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double maxOf(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, x);
  return m;
}

// GB/s (1e9 bytes per second) of `bytes` moved in `us` microseconds.
inline double gbps(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0.0; }

}  // namespace epxbench
