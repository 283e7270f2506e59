#include "core/nccl_version.h"

#include <sstream>

namespace epx {

namespace {
constexpr int kFirstVersionedAbi = 23000;  // 2.30.0: ncclDevComm carries magic and version
constexpr int kOnlyUnversioned = 22809;    // 2.28.9: the one earlier NCCL epx builds against

int majorOf(int code) { return code >= 10000 ? code / 10000 : code / 1000; }

const char* kSupported = "2.28.9, or 2.30.0 and newer";
}  // namespace

std::string ncclVersionString(int code) {
  std::ostringstream os;
  if (code >= 10000)
    os << code / 10000 << "." << (code / 100) % 100 << "." << code % 100;
  else
    os << code / 1000 << "." << (code % 1000) / 100 << "." << code % 100;
  return os.str();
}

bool ncclVersionSupportedForBuild(int headers) {
  return headers == kOnlyUnversioned || (headers >= kFirstVersionedAbi && majorOf(headers) == 2);
}

std::string checkNcclVersion(int runtime, int headers) {
  const std::string r = ncclVersionString(runtime), h = ncclVersionString(headers);
  const std::string rebuild = "or rebuild epx against NCCL " + r + "'s headers (EPX_NCCL_HOME)";
  const std::string rebuildIfSupported =
      ncclVersionSupportedForBuild(runtime)
          ? rebuild
          : "or run on an NCCL that epx can be built against (" + std::string(kSupported) + ") and rebuild epx with it";
  if (!ncclVersionSupportedForBuild(headers))
    return "epx was built against NCCL " + h + " headers, which it does not support (it supports " + kSupported +
           "); rebuild epx against a supported NCCL (EPX_NCCL_HOME), e.g. the runtime's (NCCL " + r + ") if it is one.";
  if (headers < kFirstVersionedAbi) {
    if (runtime == headers) return {};
    return "NCCL runtime " + r + " cannot run epx built against the NCCL " + h +
           " headers: their device-API structs carry no version, so only the " + h +
           " library can. Load libnccl.so.2 of NCCL " + h + " (LD_LIBRARY_PATH), " + rebuildIfSupported + ".";
  }
  if (majorOf(runtime) != majorOf(headers))
    return "NCCL runtime " + r + " has another major version than the NCCL " + h +
           " headers epx was built with; its device-API ABI is unknown to this build. Load NCCL " + h +
           " or a newer 2.x (LD_LIBRARY_PATH), " + rebuildIfSupported + ".";
  if (runtime < headers)
    return "NCCL runtime " + r + " is older than the NCCL " + h +
           " headers epx was built with; NCCL runs device code built with its own or older headers only. Load NCCL " +
           h + " or newer (LD_LIBRARY_PATH), " + rebuildIfSupported + ".";
  return {};
}

std::string checkDevCommAbi(unsigned magic, unsigned version, unsigned expectedMagic, int headers) {
  if (headers < kFirstVersionedAbi) return {};
  std::ostringstream os;
  if (magic != expectedMagic) {
    os << "ncclDevCommCreate returned a device communicator without NCCL's ABI magic (0x" << std::hex << magic
       << ", expected 0x" << expectedMagic << std::dec << "): the loaded libnccl does not fill the NCCL "
       << ncclVersionString(headers) << " layout epx's kernels were compiled for. Load NCCL "
       << ncclVersionString(headers) << " or newer, or rebuild epx against the loaded NCCL's headers.";
    return os.str();
  }
  if (int(version) != headers)
    return "ncclDevCommCreate returned a device communicator of ABI version " + ncclVersionString(int(version)) +
           " while epx's kernels were compiled for NCCL " + ncclVersionString(headers) +
           "; rebuild epx against the loaded NCCL's headers.";
  return {};
}

std::string ginGetUnsupported(int headers, const std::string& who) {
  constexpr int kFirstGinGet = 23003;  // 2.30.3: ncclGin::get, flushAsync and wait
  if (headers >= kFirstGinGet) return {};
  return who + " reads from ranks behind the network with NCCL's one-sided GIN get, which needs NCCL " +
         ncclVersionString(kFirstGinGet) + " or newer; this epx was built against NCCL " + ncclVersionString(headers) +
         ". Rebuild epx against NCCL 2.30.3 or newer (cmake -DEPX_NCCL_HOME=<nccl>), or keep the ranks it reads "
         "from inside one NVLink domain.";
}

}  // namespace epx
