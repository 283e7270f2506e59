// The fake RDMA devices and sysfs the verbs tests share (fake_verbs.h is the fabric itself).
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <vector>

#include "fake_verbs.h"

namespace epx::test {

// A 16-byte GID: `head` bytes first, `tail` bytes last, zeros between.
std::vector<uint8_t> fakeGid(std::initializer_list<uint8_t> head, std::initializer_list<uint8_t> tail);

// "fakeib0": InfiniBand, one port, LID 5, one link-local GID.
FakeDeviceSpec fakeIbDevice();
// "fakeroce0": RoCE, one port, MTU 1024, GIDs 0/1 link-local and 2/3 IPv4 10.0.0.5 (types in
// writeFakeSysfs: RoCE v1, v2, v1, v2).
FakeDeviceSpec fakeRoceDevice();

// Writes fakeroce0 port 1's GID types under `root` as the kernel's sysfs shows them, and points
// EPX_IB_SYSFS_ROOT there.
void writeFakeSysfs(const std::filesystem::path& root);

}  // namespace epx::test
