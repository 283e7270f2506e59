// GPU check of libnccl-net-epx.so on one host: two processes, one GPU each (or both on one GPU
// under MPS: scripts/plugin-gpu-check.sh), distinct NCCL_HOSTID,
// NCCL_NET_PLUGIN=<abs path>. Host collectives go through the EPX socket transport; GIN kernels go
// through the EPX-ipc GIN backend. Each result is compared with a host reference.
//   plugin_gpu_check <rank> <nranks> <id-file> [--no-gin | --gin-only]
// EPX_GIN_CHECK_TIMEOUT_S (default 10): how long a GIN kernel waits for a counter or signal.
// Exit status 0 only if every check passed; 77 when there is no usable GPU (skipped).
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CUDA_OK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "rank %d: %s: %s\n", gRank, #x, cudaGetErrorString(e)); exit(2); } } while (0)
#define NCCL_OK(x) do { ncclResult_t res_ = (x); if (res_ != ncclSuccess) { fprintf(stderr, "rank %d: %s: %s\n", gRank, #x, ncclGetErrorString(res_)); exit(3); } } while (0)

static int gRank = 0;
static int gFailures = 0;

static void check(bool ok, const std::string& what) {
  printf("rank %d: %s %s\n", gRank, ok ? "PASS" : "FAIL", what.c_str());
  fflush(stdout);
  if (!ok) ++gFailures;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void fillPattern(float* p, size_t n, int rank, int salt) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = static_cast<float>((i * 7 + rank * 131 + salt * 17) % 1021);
}

__global__ void fillBytes(unsigned char* p, size_t n, int rank, int salt) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = static_cast<unsigned char>((i * 13 + rank * 71 + salt * 29) & 0xff);
}

__global__ void countByteMismatches(const unsigned char* p, size_t n, int rank, int salt, unsigned long long* bad) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (p[i] != static_cast<unsigned char>((i * 13 + rank * 71 + salt * 29) & 0xff)) atomicAdd(bad, 1ull);
}

// ---------------------------------------------------------------------------------------------
// GIN kernels. Waits are bounded so that a broken plugin fails the check instead of hanging.

__device__ long long gTimeoutCycles = 20000000000ll;  // ~10 s; set from EPX_GIN_CHECK_TIMEOUT_S

__device__ bool waitSignalAtLeast(ncclGin& gin, int sig, uint64_t target, int* error) {
  long long start = clock64();
  while (gin.readSignal(sig) < target) {
    if (clock64() - start > gTimeoutCycles) { atomicExch(error, 1); return false; }
  }
  return true;
}

__device__ bool waitCounterAtLeast(ncclGin& gin, int ctr, uint64_t target, int* error) {
  long long start = clock64();
  while (gin.readCounter(ctr) < target) {
    if (clock64() - start > gTimeoutCycles) { atomicExch(error, 2); return false; }
  }
  return true;
}

// One round on context `ctx`: put `bytes` to `peer` with SignalInc(sig) and CounterInc(ctr), then a
// signal-only SignalAdd(sig+1, 5); wait for our counter, flush, and wait for the peer's
// (or our own, when peer == rank) updates to reach `round`.
__global__ void ginRound(ncclDevComm devComm, ncclWindow_t recvWin, ncclWindow_t sendWin, size_t bytes,
                         int ctx, int peer, int sig, int ctr, uint64_t round, int* error) {
  ncclGin gin{devComm, ctx};
  if (bytes > 0)
    gin.put(ncclTeamWorld(devComm), peer, recvWin, 0, sendWin, 0, bytes, ncclGin_SignalInc{(ncclGinSignal_t)sig},
            ncclGin_CounterInc{(ncclGinCounter_t)ctr});
  gin.signal(ncclTeamWorld(devComm), peer, ncclGin_SignalAdd{(ncclGinSignal_t)(sig + 1), 5});
  if (bytes > 0 && !waitCounterAtLeast(gin, ctr, round, error)) return;
  gin.flush(ncclCoopThread());
  if (bytes > 0 && !waitSignalAtLeast(gin, sig, round, error)) return;
  waitSignalAtLeast(gin, sig + 1, 5 * round, error);
}

// Ping-pong of `iters` 8-byte puts with SignalInc between ranks 0 and 1 (round-trip latency), or
// a one-way stream of `iters` puts of `bytes` (bandwidth), on context 0, signal `sig`.
__global__ void ginPingPong(ncclDevComm devComm, ncclWindow_t recvWin, ncclWindow_t sendWin, size_t bytes,
                            int iters, int sig, uint64_t base, bool stream, int* error) {
  ncclGin gin{devComm, 0};
  int peer = 1 - devComm.rank;
  for (int i = 0; i < iters; ++i) {
    if (stream) {
      if (devComm.rank == 0)
        gin.put(ncclTeamWorld(devComm), peer, recvWin, 0, sendWin, 0, bytes, ncclGin_SignalInc{(ncclGinSignal_t)sig});
      continue;
    }
    if (devComm.rank == 0) {
      gin.put(ncclTeamWorld(devComm), peer, recvWin, 0, sendWin, 0, bytes, ncclGin_SignalInc{(ncclGinSignal_t)sig});
      if (!waitSignalAtLeast(gin, sig, base + i + 1, error)) return;
    } else {
      if (!waitSignalAtLeast(gin, sig, base + i + 1, error)) return;
      gin.put(ncclTeamWorld(devComm), peer, recvWin, 0, sendWin, 0, bytes, ncclGin_SignalInc{(ncclGinSignal_t)sig});
    }
  }
  if (stream && devComm.rank == 1) waitSignalAtLeast(gin, sig, base + iters, error);
  gin.flush(ncclCoopThread());
}

// ---------------------------------------------------------------------------------------------

static void exchangeId(int rank, const char* path, ncclUniqueId* id) {
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(id));
    std::string tmp = std::string(path) + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    fwrite(id, sizeof(*id), 1, f);
    fclose(f);
    rename(tmp.c_str(), path);
    return;
  }
  double deadline = now() + 60;
  while (now() < deadline) {
    FILE* f = fopen(path, "rb");
    if (f != nullptr) {
      size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fprintf(stderr, "rank %d: no unique id in %s\n", rank, path);
  exit(4);
}

static void barrier(ncclComm_t comm, cudaStream_t s, float* scratch) {
  NCCL_OK(ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, comm, s));
  CUDA_OK(cudaStreamSynchronize(s));
}

static void hostCollectives(ncclComm_t comm, int rank, int nRanks, cudaStream_t s) {
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20, size_t(16) << 20}) {
    float* buf;
    CUDA_OK(cudaMalloc(&buf, count * sizeof(float)));
    fillPattern<<<256, 256, 0, s>>>(buf, count, rank, 1);
    NCCL_OK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, s));
    std::vector<float> got(count);
    CUDA_OK(cudaMemcpyAsync(got.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      float expect = 0;
      for (int r = 0; r < nRanks; ++r) expect += static_cast<float>((i * 7 + r * 131 + 17) % 1021);
      if (got[i] != expect) ++bad;
    }
    check(bad == 0, "all-reduce " + std::to_string(count) + " floats (" + std::to_string(bad) + " wrong)");
    CUDA_OK(cudaFree(buf));
  }
  for (size_t count : {size_t(1000), size_t(1) << 20}) {
    float *in, *out;
    CUDA_OK(cudaMalloc(&in, count * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, count * nRanks * sizeof(float)));
    fillPattern<<<256, 256, 0, s>>>(in, count, rank, 2);
    NCCL_OK(ncclAllGather(in, out, count, ncclFloat, comm, s));
    std::vector<float> got(count * nRanks);
    CUDA_OK(cudaMemcpyAsync(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (int r = 0; r < nRanks; ++r)
      for (size_t i = 0; i < count; ++i)
        if (got[r * count + i] != static_cast<float>((i * 7 + r * 131 + 2 * 17) % 1021)) ++bad;
    check(bad == 0, "all-gather " + std::to_string(count) + " floats per rank (" + std::to_string(bad) + " wrong)");
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
  }
  {
    size_t count = 1 << 18;  // per peer
    float *in, *out;
    CUDA_OK(cudaMalloc(&in, count * nRanks * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, count * nRanks * sizeof(float)));
    for (int r = 0; r < nRanks; ++r) fillPattern<<<256, 256, 0, s>>>(in + r * count, count, rank, 10 + r);
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nRanks; ++r) {
      NCCL_OK(ncclSend(in + r * count, count, ncclFloat, r, comm, s));
      NCCL_OK(ncclRecv(out + r * count, count, ncclFloat, r, comm, s));
    }
    NCCL_OK(ncclGroupEnd());
    std::vector<float> got(count * nRanks);
    CUDA_OK(cudaMemcpyAsync(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (int r = 0; r < nRanks; ++r)
      for (size_t i = 0; i < count; ++i)
        if (got[r * count + i] != static_cast<float>((i * 7 + r * 131 + (10 + rank) * 17) % 1021)) ++bad;
    check(bad == 0, "all-to-all (grouped send/recv) " + std::to_string(count) + " floats per peer");
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
  }
  {  // all-reduce bandwidth over the network plugin, 64 MiB
    size_t count = 16 << 20;
    float* buf;
    CUDA_OK(cudaMalloc(&buf, count * sizeof(float)));
    for (int i = 0; i < 2; ++i) NCCL_OK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    int iters = 10;
    double t0 = now();
    for (int i = 0; i < iters; ++i) NCCL_OK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    double t = (now() - t0) / iters;
    double bytes = count * sizeof(float);
    printf("rank %d: MEASURE all-reduce 64 MiB float: %.2f ms, algbw %.2f GB/s, busbw %.2f GB/s\n", rank, t * 1e3,
           bytes / t / 1e9, bytes / t / 1e9 * 2.0 * (nRanks - 1) / nRanks);
    CUDA_OK(cudaFree(buf));
  }
}

static void ginChecks(ncclComm_t comm, int rank, int nRanks, cudaStream_t s) {
  const size_t maxBytes = 16 << 20;
  // Load every kernel now. With CUDA lazy loading (the default), the first launch of a kernel
  // loads it, and loading waits for the device: launched while a GIN kernel spins (as
  // countByteMismatches is, right after the first ginRound), it held back the plugin's copies
  // until the GIN kernel timed out (docs/plugins.md, "First-op stall").
  {
    cudaFuncAttributes attr;
    CUDA_OK(cudaFuncGetAttributes(&attr, fillBytes));
    CUDA_OK(cudaFuncGetAttributes(&attr, countByteMismatches));
    CUDA_OK(cudaFuncGetAttributes(&attr, ginRound));
    CUDA_OK(cudaFuncGetAttributes(&attr, ginPingPong));
  }
  void *sendBuf, *recvBuf;
  NCCL_OK(ncclMemAlloc(&sendBuf, maxBytes));
  NCCL_OK(ncclMemAlloc(&recvBuf, maxBytes));
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
  NCCL_OK(ncclCommWindowRegister(comm, sendBuf, maxBytes, &sendWin, NCCL_WIN_DEFAULT));
  NCCL_OK(ncclCommWindowRegister(comm, recvBuf, maxBytes, &recvWin, NCCL_WIN_DEFAULT));
  check(sendWin != nullptr && recvWin != nullptr, "window registration");
  ncclDevComm devComm;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  // 2.30+: the initializer (size, magic, version); GIN by connection type, strong legacy signals.
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  reqs.ginStrongSignalsRequired = true;
#else
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof(reqs));  // 2.28.9 has no initializer
#endif
  reqs.ginSignalCount = 16;
  reqs.ginCounterCount = 8;
  ncclResult_t created = ncclDevCommCreate(comm, &reqs, &devComm);
  check(created == ncclSuccess, std::string("ncclDevCommCreate with GIN: ") + ncclGetErrorString(created));
  if (created != ncclSuccess) return;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  const int ginType0 = devComm.ginNetDeviceTypes[0];
#else
  const int ginType0 = devComm.ginTypes[0];
#endif
  printf("rank %d: devComm lsaSize %d ginContextCount %d ginType[0] %d\n", rank, devComm.lsaSize,
         (int)devComm.ginContextCount, ginType0);
  int* dError;
  unsigned long long* dBad;
  CUDA_OK(cudaMalloc(&dError, sizeof(int)));
  CUDA_OK(cudaMalloc(&dBad, sizeof(unsigned long long)));
  float* scratch;
  CUDA_OK(cudaMalloc(&scratch, sizeof(float)));
  const int peer = (rank + 1) % nRanks;
  const int from = (rank + nRanks - 1) % nRanks;
  // Small sizes again at the end: a first-use effect would pass there, a size effect would not.
  std::vector<size_t> sizes = {8, 4096, 65536 + 8, 1 << 20, maxBytes, 8, 4096};
  int salt = 0;
  for (int ctx = 0; ctx < devComm.ginContextCount; ++ctx) {
    uint64_t round = 0;
    for (int self = 0; self < 2; ++self) {
      int target = self ? rank : peer;
      int source = self ? rank : from;
      for (size_t bytes : (self ? std::vector<size_t>{4096, 1 << 20} : sizes)) {
        ++salt;
        ++round;
        fillBytes<<<512, 256, 0, s>>>(static_cast<unsigned char*>(sendBuf), bytes, rank, salt);
        CUDA_OK(cudaMemsetAsync(recvBuf, 0, bytes, s));
        CUDA_OK(cudaMemsetAsync(dError, 0, sizeof(int), s));
        CUDA_OK(cudaStreamSynchronize(s));
        barrier(comm, s, scratch);
        double t0 = now();
        ginRound<<<1, 1, 0, s>>>(devComm, recvWin, sendWin, bytes, ctx, target, 2 * ctx, ctx, round, dError);
        CUDA_OK(cudaMemsetAsync(dBad, 0, sizeof(unsigned long long), s));
        countByteMismatches<<<512, 256, 0, s>>>(static_cast<unsigned char*>(recvBuf), bytes, source, salt, dBad);
        int err = 0;
        unsigned long long bad = 0;
        CUDA_OK(cudaMemcpyAsync(&err, dError, sizeof(int), cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaMemcpyAsync(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaStreamSynchronize(s));
        char took[64];
        snprintf(took, sizeof(took), ", %.3f ms", (now() - t0) * 1e3);
        check(err == 0 && bad == 0, "GIN ctx " + std::to_string(ctx) + (self ? " self" : " to peer") +
                                        " put+SignalInc+CounterInc+signal(Add 5)+flush " + std::to_string(bytes) +
                                        " B (timeout " + std::to_string(err) + ", " + std::to_string(bad) +
                                        " bytes wrong" + took + ")");
        barrier(comm, s, scratch);
      }
    }
  }
  if (nRanks == 2) {
    int sig = 15;
    uint64_t base = 0;
    CUDA_OK(cudaMemsetAsync(dError, 0, sizeof(int), s));
    barrier(comm, s, scratch);
    int iters = 200;
    ginPingPong<<<1, 1, 0, s>>>(devComm, recvWin, sendWin, 8, 20, sig, base, false, dError);  // warm-up
    CUDA_OK(cudaStreamSynchronize(s));
    base += 20;
    barrier(comm, s, scratch);
    double t0 = now();
    ginPingPong<<<1, 1, 0, s>>>(devComm, recvWin, sendWin, 8, iters, sig, base, false, dError);
    CUDA_OK(cudaStreamSynchronize(s));
    double rtt = (now() - t0) / iters;
    base += iters;
    int err = 0;
    CUDA_OK(cudaMemcpy(&err, dError, sizeof(int), cudaMemcpyDeviceToHost));
    check(err == 0, "GIN ping-pong");
    if (rank == 0) printf("rank 0: MEASURE GIN ipc round trip (8 B put + SignalInc each way): %.1f us\n", rtt * 1e6);
    for (size_t bytes : {size_t(1) << 20, size_t(16) << 20}) {
      int n = 20;
      barrier(comm, s, scratch);
      double t1 = now();
      ginPingPong<<<1, 1, 0, s>>>(devComm, recvWin, sendWin, bytes, n, sig, base, true, dError);
      CUDA_OK(cudaStreamSynchronize(s));
      barrier(comm, s, scratch);
      double t = now() - t1;
      if (rank == 1) base += n;  // only rank 1 receives in stream mode
      if (rank == 0) printf("rank 0: MEASURE GIN ipc one-way stream %d x %zu B: %.2f GB/s (incl. host barrier)\n", n, bytes, n * bytes / t / 1e9);
    }
    CUDA_OK(cudaMemcpy(&err, dError, sizeof(int), cudaMemcpyDeviceToHost));
    check(err == 0, "GIN one-way streams");
  }
  NCCL_OK(ncclDevCommDestroy(comm, &devComm));
  NCCL_OK(ncclCommWindowDeregister(comm, sendWin));
  NCCL_OK(ncclCommWindowDeregister(comm, recvWin));
  NCCL_OK(ncclMemFree(sendBuf));
  NCCL_OK(ncclMemFree(recvBuf));
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <rank> <nranks> <id-file> [--no-gin]\n", argv[0]);
    return 1;
  }
  int rank = atoi(argv[1]), nRanks = atoi(argv[2]);
  gRank = rank;
  bool gin = !(argc > 4 && std::string(argv[4]) == "--no-gin");
  bool collectives = !(argc > 4 && std::string(argv[4]) == "--gin-only");
  int nDev = 0;
  if (cudaGetDeviceCount(&nDev) != cudaSuccess || nDev == 0) {
    printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  CUDA_OK(cudaSetDevice(rank % nDev));
  int version = 0;
  ncclGetVersion(&version);
  printf("rank %d: NCCL runtime %d, device %d of %d\n", rank, version, rank % nDev, nDev);
  ncclUniqueId id;
  exchangeId(rank, argv[3], &id);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, nRanks, id, rank));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (const char* t = getenv("EPX_GIN_CHECK_TIMEOUT_S")) {
    long long cycles = static_cast<long long>(atof(t) * 2e9);
    if (cycles > 0) CUDA_OK(cudaMemcpyToSymbol(gTimeoutCycles, &cycles, sizeof(cycles)));
  }
  if (collectives) hostCollectives(comm, rank, nRanks, s);
  if (gin) ginChecks(comm, rank, nRanks, s);
  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  printf("rank %d: %s (%d failure(s))\n", rank, gFailures ? "FAILED" : "ALL PASSED", gFailures);
  return gFailures ? 1 : 0;
}
