// Progress beacons for debugging hangs (off unless EPX_DEBUG_BEACONS names a directory): each group
// gets a 4 KiB file <dir>/epx-beacons-rank<r>-pid<p>-g<n>.bin, mapped into this process and
// registered with CUDA, into which the kernels' CTAs write where they are (epx::dev::BeaconStep,
// device/include/epx/device/ep_args.h). Another process reads it while a kernel hangs:
//   od -A d -t x4 -w16 <file>      word b = CTA b: (kernel << 24) | (step << 16) | (sequence & 0xffff)
// scripts/fake-nodes.sh dumps them at its time limit.
#pragma once
#include <cstdint>
#include <string>

namespace epx {

struct Beacons {
  uint32_t* host = nullptr;    // mmap of the file, registered (cudaHostRegisterMapped)
  uint32_t* device = nullptr;  // its device alias (LinkArgs::beacons)
  std::string path;
};

// Opens the group's beacon file when EPX_DEBUG_BEACONS is set; false with `error` when it is set
// but the file cannot be made (the group is then created without beacons).
bool openBeacons(int rank, Beacons* b, std::string* error);
void closeBeacons(Beacons* b);

}  // namespace epx
