#include "gin/verbs_gin_wire.h"

#include <cstddef>

#include "common/fnv.h"

namespace epx::plugin::gin {

namespace {
uint32_t regChecksum(const GinRegInfo& i) { return fnv1a(&i, offsetof(GinRegInfo, checksum)); }
}  // namespace

void sealRegInfo(GinRegInfo& info) {
  info.magic = kGinRegMagic;
  info.checksum = regChecksum(info);
}

std::string validateRegInfo(const GinRegInfo& got, uint32_t index) {
  if (got.magic != kGinRegMagic) return "peer sent no GIN registration (magic)";
  if (got.checksum != regChecksum(got)) return "peer's GIN registration is corrupted (checksum)";
  if (got.index != index)
    return "registration order differs: peer sent region " + std::to_string(got.index) + ", expected " +
           std::to_string(index);
  return {};
}

std::string validateHello(const GinHello& got, int expectedRank, int myRank, int nRanks, int context) {
  if (got.magic != kGinHelloMagic) return "not an epx GIN verbs hello (magic)";
  if (got.nRanks != static_cast<uint32_t>(nRanks))
    return "peer's communicator has " + std::to_string(got.nRanks) + " ranks, this one " + std::to_string(nRanks);
  if (got.context != static_cast<uint32_t>(context))
    return "peer is GIN context " + std::to_string(got.context) + ", this is context " + std::to_string(context);
  const int r = static_cast<int>(got.rank);
  if (got.rank >= static_cast<uint32_t>(nRanks) || r == myRank) return "peer claims rank " + std::to_string(got.rank);
  if (expectedRank >= 0 && r != expectedRank)
    return "peer claims rank " + std::to_string(r) + ", expected rank " + std::to_string(expectedRank);
  return {};
}

}  // namespace epx::plugin::gin
