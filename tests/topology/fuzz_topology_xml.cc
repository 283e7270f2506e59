// Fuzz target for both XML readers (libFuzzer entry point). Each input goes to the NCCL topology
// reader and to the hwloc XML reader; whatever loads is also pushed through rails and the NCCL
// exporter, whose output must load again. Built with clang -fsanitize=fuzzer,address when available,
// otherwise linked with fuzz_replay_main.cc to replay the corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "epx/topology/load.h"
#include "epx/topology/nccl_export.h"
#include "epx/topology/rails.h"

namespace {
void exercise(const epx::topo::Result<epx::topo::Topology>& r) {
  if (!r.ok()) {
    if (r.error.empty() || r.error.find('\n') != std::string::npos) std::abort();  // one line, always
    return;
  }
  epx::topo::RailPlan p = epx::topo::assignRails(r.value);
  std::string xml = epx::topo::renderNcclTopo(r.value, p);
  auto back = epx::topo::loadNcclXmlBuffer(xml, "re-export");
  if (!back.ok() || back.value.gpus.size() != r.value.gpus.size() || back.value.nics.size() != r.value.nics.size())
    std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string in(reinterpret_cast<const char*>(data), size);
  exercise(epx::topo::loadNcclXmlBuffer(in, "fuzz"));
  exercise(epx::topo::loadHwlocXmlBuffer(in, "fuzz"));
  return 0;
}
