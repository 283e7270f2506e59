// Runs one function per local GPU, each on its own thread with its own NCCL communicator, the way a
// multi-process job would call epx (every ncclEp* call is collective). Used by the GPU tests and
// epx-bench; header-only.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace epx::testing {

#define EPX_CHECK_CUDA(cmd)                                                                  \
  do {                                                                                       \
    cudaError_t e_ = (cmd);                                                                  \
    if (e_ != cudaSuccess)                                                                   \
      throw std::runtime_error(std::string(#cmd) + ": " + cudaGetErrorString(e_) + " at " + \
                               __FILE__ + ":" + std::to_string(__LINE__));                   \
  } while (0)

#define EPX_CHECK_NCCL(cmd)                                                                   \
  do {                                                                                        \
    ncclResult_t r_ = (cmd);                                                                  \
    if (r_ != ncclSuccess)                                                                    \
      throw std::runtime_error(std::string(#cmd) + ": " + ncclGetErrorString(r_) + " at " +  \
                               __FILE__ + ":" + std::to_string(__LINE__));                    \
  } while (0)

inline int localGpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

struct RankContext {
  int rank = 0;
  int nRanks = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Communicators over GPUs 0..n-1, created once and kept for reuse (creating comms is slow).
class MultiGpu {
 public:
  explicit MultiGpu(int n) : n_(n), comms_(n) {
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    EPX_CHECK_NCCL(ncclCommInitAll(comms_.data(), n, devs.data()));
    streams_.resize(n);
    for (int i = 0; i < n; ++i) {
      EPX_CHECK_CUDA(cudaSetDevice(i));
      EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
    }
  }
  ~MultiGpu() {
    for (int i = 0; i < n_; ++i) {
      cudaSetDevice(i);
      cudaStreamDestroy(streams_[i]);
      ncclCommDestroy(comms_[i]);
    }
  }
  MultiGpu(const MultiGpu&) = delete;
  MultiGpu& operator=(const MultiGpu&) = delete;

  int size() const { return n_; }
  ncclComm_t comm(int r) const { return comms_[r]; }

  // Calls fn(ctx) on one thread per rank (cudaSetDevice done); rethrows the first exception.
  void run(const std::function<void(const RankContext&)>& fn) {
    std::vector<std::thread> threads;
    std::exception_ptr first;
    std::mutex mu;
    for (int r = 0; r < n_; ++r) {
      threads.emplace_back([&, r] {
        try {
          EPX_CHECK_CUDA(cudaSetDevice(r));
          fn(RankContext{r, n_, comms_[r], streams_[r]});
        } catch (...) {
          std::lock_guard<std::mutex> g(mu);
          if (!first) first = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

 private:
  int n_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace epx::testing
