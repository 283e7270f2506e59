#include "beacons.h"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "epx/device/ep_args.h"

namespace epx {

namespace {
constexpr size_t kBeaconBytes = 4096;
static_assert(sizeof(uint32_t) * (dev::kBeaconCtas + 1) <= kBeaconBytes, "beacon words exceed one page");
std::atomic<int> gGroupsSeen{0};
}  // namespace

bool openBeacons(int rank, Beacons* b, std::string* error) {
  const char* dir = std::getenv("EPX_DEBUG_BEACONS");
  if (dir == nullptr || *dir == '\0') return true;
  b->path = std::string(dir) + "/epx-beacons-rank" + std::to_string(rank) + "-pid" + std::to_string(getpid()) + "-g" +
            std::to_string(gGroupsSeen++) + ".bin";
  const int fd = open(b->path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, kBeaconBytes) != 0) {
    if (fd >= 0) close(fd);
    *error = "cannot create " + b->path + ": " + std::strerror(errno);
    return false;
  }
  void* p = mmap(nullptr, kBeaconBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map " + b->path + ": " + std::strerror(errno);
    return false;
  }
  void* d = nullptr;
  if (cudaHostRegister(p, kBeaconBytes, cudaHostRegisterMapped) != cudaSuccess) {
    cudaGetLastError();
    munmap(p, kBeaconBytes);
    *error = "cannot register " + b->path + " with CUDA (use a tmpfs directory such as /dev/shm)";
    return false;
  }
  if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
    cudaGetLastError();
    cudaHostUnregister(p);
    munmap(p, kBeaconBytes);
    *error = "no device alias for " + b->path;
    return false;
  }
  b->host = static_cast<uint32_t*>(p);
  b->device = static_cast<uint32_t*>(d);
  return true;
}

void closeBeacons(Beacons* b) {
  if (b->host == nullptr) return;
  cudaHostUnregister(b->host);
  munmap(b->host, kBeaconBytes);
  b->host = b->device = nullptr;
}

}  // namespace epx
