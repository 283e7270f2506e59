// The ranks of a test or benchmark job and their NCCL communicators, the way a multi-process job
// would call epx (every ncclEp* call is collective). Header-only; used by the GPU tests and epx-bench.
//
// Two modes, one code path (the single-process mode is the case where every rank is local):
//  * single process: ranks 0..n-1 on GPUs 0..n-1, one thread per rank (ncclCommInitAll).
//  * multi-process (one process per rank, e.g. under scripts/fake-nodes.sh): when EPX_MP_SIZE
//    (ranks in the job), EPX_MP_RANK (this process's rank) and EPX_MP_ID_FILE (a path all ranks
//    share) are set. The process owns one rank on GPU rank % (local GPUs); rank 0 writes the
//    ncclUniqueId to EPX_MP_ID_FILE (temp file + rename), the others wait for it (at most
//    EPX_MP_ID_TIMEOUT_S seconds, default 120), then ncclCommInitRank. Many ranks may share one
//    GPU when each runs as its own NCCL node (distinct NCCL_HOSTID; docs in fake-nodes.sh).
//
// run(fn) calls fn for the local ranks only. In multi-process mode it then agrees with the other
// processes on the outcome (a small all-reduce over the communicator), so that every process
// throws when any rank's fn threw, just as the single-process run rethrows a rank thread's
// exception: the processes stay in step through failures.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
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

// ---- how host threads wait for the GPU ------------------------------------------------------------

// Sets cudaDeviceSchedule{Auto,Spin,Yield,BlockingSync} ("auto", "spin", "yield", "blocking") on every
// visible device; must run before this process creates any CUDA context. Many ranks sharing a
// host's cores (fake nodes: 8 processes, each with a spinning wait and NCCL's spinning GIN progress
// thread, on 16 cores) starve the progress threads for whole scheduler slices; "yield" gives the
// core away while waiting. "blocking" also slows the GIN plugin's own synchronisations (it applies
// to the whole context). Throws on an unknown name.
inline void setHostSync(const std::string& how) {
  unsigned flag = cudaDeviceScheduleAuto;
  if (how == "spin") flag = cudaDeviceScheduleSpin;
  else if (how == "yield") flag = cudaDeviceScheduleYield;
  else if (how == "blocking") flag = cudaDeviceScheduleBlockingSync;
  else if (how != "auto") throw std::runtime_error("host sync '" + how + "': expected auto, spin, yield or blocking");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return;  // no device: nothing to set
  for (int d = 0; d < n; ++d) {
    EPX_CHECK_CUDA(cudaSetDevice(d));
    EPX_CHECK_CUDA(cudaSetDeviceFlags(flag));
  }
}

// EPX_HOST_SYNC (auto, spin, yield, blocking; unset: CUDA's default), applied by MultiGpu before it
// creates its contexts. epx-bench --host-sync sets it; scripts/fake-nodes.sh passes it to the ranks.
inline void setHostSyncFromEnv() {
  if (const char* v = std::getenv("EPX_HOST_SYNC"); v && *v) setHostSync(v);
}

// ---- multi-process environment -----------------------------------------------------------------

struct MpEnv {
  bool enabled = false;
  int size = 0;        // EPX_MP_SIZE
  int rank = 0;        // EPX_MP_RANK
  std::string idFile;  // EPX_MP_ID_FILE
};

// True when any EPX_MP_* variable is set (mpEnv() then validates all of them).
inline bool multiProcessRequested() {
  for (const char* v : {"EPX_MP_SIZE", "EPX_MP_RANK", "EPX_MP_ID_FILE"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

// Reads EPX_MP_*; throws with the reason when only some are set or a value is invalid.
inline MpEnv mpEnv() {
  MpEnv m;
  if (!multiProcessRequested()) return m;
  const char* size = std::getenv("EPX_MP_SIZE");
  const char* rank = std::getenv("EPX_MP_RANK");
  const char* file = std::getenv("EPX_MP_ID_FILE");
  if (!size || !*size || !rank || !*rank || !file || !*file) {
    std::string set;
    for (const auto& [name, v] : {std::pair<const char*, const char*>{"EPX_MP_SIZE", size}, {"EPX_MP_RANK", rank},
                                  {"EPX_MP_ID_FILE", file}})
      if (v && *v) set += (set.empty() ? "" : ", ") + std::string(name);
    throw std::runtime_error("multi-process mode needs all of EPX_MP_SIZE, EPX_MP_RANK and EPX_MP_ID_FILE (set: " + set + ")");
  }
  auto toInt = [](const char* name, const char* v) {
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < 0 || x > (1 << 20))
      throw std::runtime_error(std::string(name) + "='" + v + "' is not a valid integer");
    return int(x);
  };
  m.enabled = true;
  m.size = toInt("EPX_MP_SIZE", size);
  m.rank = toInt("EPX_MP_RANK", rank);
  m.idFile = file;
  if (m.size < 1) throw std::runtime_error("EPX_MP_SIZE=" + std::to_string(m.size) + ": a job has at least 1 rank");
  if (m.rank >= m.size)
    throw std::runtime_error("EPX_MP_RANK=" + std::to_string(m.rank) + " is not in [0, EPX_MP_SIZE=" +
                             std::to_string(m.size) + ")");
  return m;
}

// Rank 0: writes the id to `path` atomically (temp file in the same directory, then rename).
inline void writeUniqueIdFile(const std::string& path, const ncclUniqueId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot create " + tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(&id, sizeof(id), 1, f) == 1;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write the ncclUniqueId to " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
}

// Ranks > 0: waits until `path` holds a whole ncclUniqueId (bounded).
inline ncclUniqueId readUniqueIdFile(const std::string& path, int rank, double timeoutS) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      ncclUniqueId id;
      const size_t n = std::fread(&id, 1, sizeof(id), f);
      std::fclose(f);
      if (n == sizeof(id)) return id;  // rank 0 renames a complete file into place
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeoutS)
      throw std::runtime_error("rank " + std::to_string(rank) + ": no ncclUniqueId in " + path + " after " +
                               std::to_string(int(waited)) +
                               " s (is rank 0 running, with the same EPX_MP_ID_FILE? EPX_MP_ID_TIMEOUT_S sets the wait)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct RankContext {
  int rank = 0;
  int nRanks = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// ---- the job's ranks ---------------------------------------------------------------------------

class MultiGpu {
 public:
  // Single process: ranks 0..n-1 on GPUs 0..n-1, all local.
  explicit MultiGpu(int n) : n_(n), comms_(n, nullptr), streams_(n, nullptr), devs_(n, -1) {
    if (n < 1) throw std::runtime_error("MultiGpu: need at least 1 rank, got " + std::to_string(n));
    setHostSyncFromEnv();
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) {
      devs[i] = devs_[i] = i;
      local_.push_back(i);
    }
    EPX_CHECK_NCCL(ncclCommInitAll(comms_.data(), n, devs.data()));
    for (int i = 0; i < n; ++i) {
      EPX_CHECK_CUDA(cudaSetDevice(i));
      EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
    }
  }

  // Multi-process: this process owns rank mp.rank of mp.size.
  explicit MultiGpu(const MpEnv& mp)
      : n_(mp.size), mp_(true), comms_(mp.size, nullptr), streams_(mp.size, nullptr), devs_(mp.size, -1) {
    const int nDev = localGpuCount();
    if (nDev < 1) throw std::runtime_error("multi-process mode: no CUDA device visible to this process");
    setHostSyncFromEnv();
    const int r = mp.rank;
    local_.push_back(r);
    devs_[r] = r % nDev;
    EPX_CHECK_CUDA(cudaSetDevice(devs_[r]));
    ncclUniqueId id;
    if (r == 0) {
      EPX_CHECK_NCCL(ncclGetUniqueId(&id));
      if (n_ > 1) writeUniqueIdFile(mp.idFile, id);
    } else {
      double t = 120;
      if (const char* v = std::getenv("EPX_MP_ID_TIMEOUT_S"); v && *v) t = std::atof(v);
      id = readUniqueIdFile(mp.idFile, r, t);
    }
    EPX_CHECK_NCCL(ncclCommInitRank(&comms_[r], n_, id, r));
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking));
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&aux_, cudaStreamNonBlocking));
    EPX_CHECK_CUDA(cudaMalloc(&scratch_, sizeof(int64_t) * size_t(n_)));
    EPX_CHECK_CUDA(cudaMallocHost(&hostScratch_, sizeof(int64_t) * size_t(n_)));
  }

  // EPX_MP_* set: multi-process; else single process over `nSingle` GPUs.
  static std::unique_ptr<MultiGpu> create(int nSingle) {
    const MpEnv mp = mpEnv();
    return mp.enabled ? std::make_unique<MultiGpu>(mp) : std::make_unique<MultiGpu>(nSingle);
  }

  ~MultiGpu() {
    for (int r : local_) {
      cudaSetDevice(devs_[r]);
      if (streams_[r]) cudaStreamDestroy(streams_[r]);
      if (!comms_[r] || aborted_) continue;
      if (mp_) ncclCommFinalize(comms_[r]);
      ncclCommDestroy(comms_[r]);
    }
    if (aux_) cudaStreamDestroy(aux_);
    if (scratch_) cudaFree(scratch_);
    if (hostScratch_) cudaFreeHost(hostScratch_);
  }
  MultiGpu(const MultiGpu&) = delete;
  MultiGpu& operator=(const MultiGpu&) = delete;

  int size() const { return n_; }  // ranks in the job
  bool multiProcess() const { return mp_; }
  bool isLocal(int r) const { return r >= 0 && r < n_ && devs_[r] >= 0; }
  const std::vector<int>& localRanks() const { return local_; }
  int device(int r) const { return devs_[r]; }
  ncclComm_t comm(int r) const { return comms_[r]; }  // local ranks only, else nullptr
  cudaStream_t stream(int r) const { return streams_[r]; }
  bool aborted() const { return aborted_; }

  // Calls fn(ctx) for every local rank (cudaSetDevice done): one thread per rank in single-process
  // mode; in multi-process mode on the calling thread, between a barrier with the other processes
  // and an agreement on the outcome (both collective): throws when fn threw on any rank. Single
  // process: rethrows the first exception.
  void run(const std::function<void(const RankContext&)>& fn) { runImpl(fn, true); }

  // Like run, without the agreement step: only for code that must not talk to the other ranks
  // any more (a peer is gone).
  void runLocal(const std::function<void(const RankContext&)>& fn) { runImpl(fn, false); }

  // Ranks whose flag is set, in every process (collective). Single process: the local flags.
  std::vector<int> ranksWith(const std::vector<bool>& flagByRank) {
    std::vector<int64_t> v(size_t(n_), 0);
    for (int r : local_) v[size_t(r)] = flagByRank.at(size_t(r)) ? 1 : 0;
    if (mp_) v = allReduceSum(v);
    std::vector<int> out;
    for (int r = 0; r < n_; ++r)
      if (v[size_t(r)]) out.push_back(r);
    return out;
  }
  // True in every process when `local` is true on any rank (collective in multi-process mode).
  bool anyRank(bool local) {
    if (!mp_) return local;
    std::vector<int64_t> v(size_t(n_), 0);
    v[size_t(local_[0])] = local ? 1 : 0;
    v = allReduceSum(v);
    for (int64_t x : v)
      if (x) return true;
    return false;
  }
  // Multi-process: every rank waits for all (collective). Single process: nothing to do (run()
  // returns only after every rank thread finished).
  void barrier() {
    if (mp_) allReduceSum(std::vector<int64_t>(size_t(n_), 0));
  }
  // Rank 0's value in every process (collective in multi-process mode).
  uint64_t broadcast(uint64_t v) {
    if (!mp_) return v;
    std::vector<int64_t> x(size_t(n_), 0);
    if (local_[0] == 0) std::memcpy(&x[0], &v, sizeof(v));
    x = allReduceSum(x);
    uint64_t out;
    std::memcpy(&out, &x[0], sizeof(out));
    return out;
  }

  // Element-wise sum over all ranks of an int64 vector of size() values (collective).
  std::vector<int64_t> allReduceSum(std::vector<int64_t> v) {
    if (!mp_) return v;
    if (v.size() != size_t(n_)) throw std::logic_error("allReduceSum: need one value per rank");
    const int r = local_[0];
    EPX_CHECK_CUDA(cudaSetDevice(devs_[r]));
    std::memcpy(hostScratch_, v.data(), v.size() * sizeof(int64_t));
    EPX_CHECK_CUDA(cudaMemcpyAsync(scratch_, hostScratch_, v.size() * sizeof(int64_t), cudaMemcpyHostToDevice, aux_));
    EPX_CHECK_NCCL(ncclAllReduce(scratch_, scratch_, v.size(), ncclInt64, ncclSum, comms_[r], aux_));
    EPX_CHECK_CUDA(cudaMemcpyAsync(hostScratch_, scratch_, v.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, aux_));
    EPX_CHECK_CUDA(cudaStreamSynchronize(aux_));
    std::memcpy(v.data(), hostScratch_, v.size() * sizeof(int64_t));
    return v;
  }

  // One value per rank: the local ranks' entries from this process, the others' from theirs
  // (collective in multi-process mode; single process: returned as given).
  std::vector<double> gatherPerRank(std::vector<double> v) {
    if (!mp_) return v;
    if (v.size() != size_t(n_)) throw std::logic_error("gatherPerRank: need one value per rank");
    std::vector<int64_t> bits(size_t(n_), 0);
    for (int r : local_) std::memcpy(&bits[size_t(r)], &v[size_t(r)], sizeof(double));
    bits = allReduceSum(bits);
    for (int r = 0; r < n_; ++r) std::memcpy(&v[size_t(r)], &bits[size_t(r)], sizeof(double));
    return v;
  }

  // ncclCommAbort on the local communicators (a peer died: destroy would wait for it). The
  // destructor then leaves them alone. Nothing collective works afterwards.
  void abortComms() {
    for (int r : local_) {
      if (!comms_[r]) continue;
      cudaSetDevice(devs_[r]);
      ncclCommAbort(comms_[r]);
      comms_[r] = nullptr;
    }
    aborted_ = true;
  }

 private:
  void runImpl(const std::function<void(const RankContext&)>& fn, bool agree) {
    if (aborted_) throw std::runtime_error("MultiGpu: the communicators were aborted");
    if (!mp_) {
      std::vector<std::thread> threads;
      std::exception_ptr first;
      std::mutex mu;
      for (int r : local_) {
        threads.emplace_back([&, r] {
          try {
            EPX_CHECK_CUDA(cudaSetDevice(devs_[r]));
            fn(RankContext{r, n_, comms_[r], streams_[r]});
          } catch (...) {
            std::lock_guard<std::mutex> g(mu);
            if (!first) first = std::current_exception();
          }
        });
      }
      for (auto& t : threads) t.join();
      if (first) std::rethrow_exception(first);
      return;
    }
    const int r = local_[0];
    // Start together, like the rank threads of one process: a process still busy with host work
    // (generating data) must not leave its peers' device waits running into their timeouts.
    if (agree) barrier();
    std::exception_ptr mine;
    try {
      EPX_CHECK_CUDA(cudaSetDevice(devs_[r]));
      fn(RankContext{r, n_, comms_[r], streams_[r]});
    } catch (...) {
      mine = std::current_exception();
    }
    if (!agree) {
      if (mine) std::rethrow_exception(mine);
      return;
    }
    std::vector<bool> flags(size_t(n_), false);
    flags[size_t(r)] = mine != nullptr;
    std::vector<int> failed;
    try {
      failed = ranksWith(flags);
    } catch (const std::exception& e) {
      if (mine) std::rethrow_exception(mine);
      throw std::runtime_error(std::string("rank ") + std::to_string(r) +
                               ": could not agree with the other ranks on this step's outcome: " + e.what());
    }
    if (mine) std::rethrow_exception(mine);
    if (!failed.empty()) {
      std::string who;
      for (int f : failed) who += (who.empty() ? "" : ",") + std::to_string(f);
      throw std::runtime_error("rank(s) " + who + " failed in this step (see their logs); rank " + std::to_string(r) +
                               " stops with them");
    }
  }

  int n_;
  bool mp_ = false;
  bool aborted_ = false;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<int> devs_;   // device of each local rank, -1 for ranks of other processes
  std::vector<int> local_;  // local ranks, ascending
  cudaStream_t aux_ = nullptr;
  void* scratch_ = nullptr;
  void* hostScratch_ = nullptr;
};

}  // namespace epx::testing
