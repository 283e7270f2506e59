// Which NCCL epx can be built against, and which NCCL runtimes can run a build. Pure C++, no
// NCCL calls: the callers pass ncclGetVersion's code and NCCL_VERSION_CODE of the headers
// (codes as NCCL_VERSION_CODE: 22809 is 2.28.9, 23203 is 2.32.3).
//
// - NCCL 2.28.9 headers: ncclDevComm and the requirements carry no size, magic or version, so only
//   the 2.28.9 library can run such a build.
// - NCCL 2.30.0 and newer headers (NCCL 2): ncclDevComm carries NCCL_API_MAGIC and the version of
//   the headers the device code was compiled with; a runtime of the same or a newer version fills
//   that layout (NCCL refuses device code built against newer headers than itself).
#pragma once
#include <string>

namespace epx {

// "2.32.3" for 23203 (and the pre-2.9 encoding, 2804 = 2.8.4).
std::string ncclVersionString(int code);

// True when epx can be built against NCCL headers of this version: 2.28.9, or 2.30.0 and newer
// of NCCL 2. The same rule stops the configuration (cmake/FindNccl.cmake).
bool ncclVersionSupportedForBuild(int headers);

// "" when the NCCL runtime `runtime` can run epx built against `headers`; else why not, naming both
// versions and what to do. Checked at group, bucket and PP channel creation.
std::string checkNcclVersion(int runtime, int headers);

// After ncclDevCommCreate (headers 2.30.0 and newer): "" when the device communicator carries
// NCCL's ABI magic and the headers' version, i.e. the layout the kernels were compiled for; else
// why not. Always "" for older headers (their ncclDevComm has no such fields).
std::string checkDevCommAbi(unsigned magic, unsigned version, unsigned expectedMagic, int headers);

// "" when a build against NCCL `headers` can read network peers' windows with the one-sided GIN
// get (ncclGin::get, NCCL 2.30.3 and newer; the device transport's EPX_HAVE_GIN_GET); else why
// not, for the refusal of an operation that needs it across nodes (`who` names the call).
// Reads of NVLink (LSA) peers need no GIN and work with every supported NCCL.
std::string ginGetUnsupported(int headers, const std::string& who);

}  // namespace epx
