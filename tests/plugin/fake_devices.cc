#include "fake_devices.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace epx::test {

std::vector<uint8_t> fakeGid(std::initializer_list<uint8_t> head, std::initializer_list<uint8_t> tail) {
  std::vector<uint8_t> g(16, 0);
  int i = 0;
  for (uint8_t b : head) g[i++] = b;
  i = 16 - static_cast<int>(tail.size());
  for (uint8_t b : tail) g[i++] = b;
  return g;
}

FakeDeviceSpec fakeIbDevice() {
  FakeDeviceSpec ib{"fakeib0", 0x1111, {}};
  FakePortSpec port;
  port.lid = 5;
  port.gids = {fakeGid({0xfe, 0x80}, {0x11, 0x11})};
  ib.ports = {port};
  return ib;
}

FakeDeviceSpec fakeRoceDevice() {
  FakeDeviceSpec roce{"fakeroce0", 0x2222, {}};
  FakePortSpec port;
  port.ethernet = true;
  port.activeMtu = IBV_MTU_1024;
  port.gids = {fakeGid({0xfe, 0x80}, {1}), fakeGid({0xfe, 0x80}, {1}), fakeGid({}, {0xff, 0xff, 10, 0, 0, 5}),
               fakeGid({}, {0xff, 0xff, 10, 0, 0, 5})};
  roce.ports = {port};
  return roce;
}

void writeFakeSysfs(const std::filesystem::path& root) {
  const auto types = root / "fakeroce0" / "ports" / "1" / "gid_attrs" / "types";
  std::filesystem::create_directories(types);
  const char* t[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"};
  for (int i = 0; i < 4; ++i) std::ofstream(types / std::to_string(i)) << t[i] << "\n";
  setenv("EPX_IB_SYSFS_ROOT", root.c_str(), 1);
}

}  // namespace epx::test
