// Internal: NVLink edges from NVML, loaded with dlopen() at run time only when present.
#pragma once
#include <string>

#include "epx/topology/model.h"

namespace epx::topo::detail {

/// Fills Gpu::nvlinks (and names) from libnvidia-ml.so.1 when it loads. Returns a note for the
/// warnings list ("NVML not found: NVLink unknown"), or "" on success. EPX_TOPO_NO_NVML=1 skips it.
std::string addNvmlLinks(Topology& t);

}  // namespace epx::topo::detail
