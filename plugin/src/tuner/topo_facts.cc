#include "tuner/topo_facts.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "epx/topology/load.h"
#include "epx/topology/paths.h"
#include "epx/topology/rails.h"

namespace epx::plugin::tuner {

const char* gpuLinksName(GpuLinks l) {
  switch (l) {
    case GpuLinks::NvLink: return "NVLink between every GPU pair";
    case GpuLinks::PcieOnly: return "PCIe only (no NVLink)";
    case GpuLinks::Mixed: return "NVLink between some GPU pairs only";
    case GpuLinks::Unknown: return "GPU links unknown";
  }
  return "?";
}

TopoFacts deriveFacts(const topo::Topology& t) {
  TopoFacts f;
  f.valid = true;
  f.source = t.sourceName;
  f.gpus = static_cast<int>(t.gpus.size());

  bool allKnown = f.gpus >= 2;
  for (const topo::Gpu& g : t.gpus) allKnown = allKnown && g.nvlinkKnown;
  int pairs = 0, nvlPairs = 0;
  topo::PathType worst = topo::PathType::PIX;
  for (int a = 0; a < f.gpus; ++a)
    for (int b = a + 1; b < f.gpus; ++b) {
      ++pairs;
      if (t.nvlinkBetween(a, b) > 0) ++nvlPairs;
      worst = std::max(worst, topo::gpuGpuPath(t, a, b));
    }
  if (pairs > 0) f.worstPcie = topo::toString(worst);
  if (allKnown) {
    f.links = nvlPairs == pairs ? GpuLinks::NvLink : nvlPairs == 0 ? GpuLinks::PcieOnly : GpuLinks::Mixed;
  } else if (pairs > 0 && nvlPairs == pairs) {
    f.links = GpuLinks::NvLink;  // links seen are links present, even where others may be unknown
  }

  topo::RailPlan plan = topo::assignRails(t);
  f.railPolicy = plan.policy;
  f.nicCards = static_cast<int>(plan.rails.size());
  if (f.gpus > 0 && f.nicCards > 0) {
    f.minNicsPerGpu = INT32_MAX;
    f.minGbpsPerGpu = -1;
    for (const topo::GpuRail& g : plan.gpus) {
      f.minNicsPerGpu = std::min(f.minNicsPerGpu, static_cast<int>(g.rails.size()));
      double gbps = 0;
      for (int r : g.rails) {
        const topo::Rail& rail = plan.rails[static_cast<size_t>(r)];
        double cardGbps = 0;
        for (int n : rail.nics) {
          cardGbps += t.nics[static_cast<size_t>(n)].speedGbps;
          f.gbpsAssumed |= t.nics[static_cast<size_t>(n)].speedAssumed;
        }
        gbps += cardGbps / static_cast<double>(std::max<size_t>(1, rail.gpus.size()));
      }
      if (f.minGbpsPerGpu < 0 || gbps < f.minGbpsPerGpu) f.minGbpsPerGpu = gbps;
    }
    for (const topo::Rail& r : plan.rails)
      f.maxGpusPerNic = std::max(f.maxGpusPerNic, static_cast<int>(r.gpus.size()));
  }
  return f;
}

TopoFacts loadFacts(const std::string& spec) {
  TopoFacts f;
  if (spec == "off") {
    f.source = "EPX_TUNER_TOPO=off";
    return f;
  }
  topo::Result<topo::Topology> r;
  if (spec.empty()) {
    r = topo::loadLive();
  } else {
    std::ifstream in(spec);
    if (!in) {
      f.source = "cannot open " + spec;
      return f;
    }
    std::stringstream text;
    text << in.rdbuf();
    const std::string xml = text.str();
    r = xml.find("<system") != std::string::npos ? topo::loadNcclXmlBuffer(xml, spec)
                                                 : topo::loadHwlocXmlBuffer(xml, spec);
  }
  if (!r.ok()) {
    f.source = r.error;
    return f;
  }
  return deriveFacts(r.value);
}

std::string nicSpeedText(const TopoFacts& f) {
  char speed[64] = "NIC speed unknown";
  if (f.minGbpsPerGpu > 0)
    std::snprintf(speed, sizeof speed, ">= %.0f Gb/s per GPU%s", f.minGbpsPerGpu,
                  f.gbpsAssumed ? " (assumed from PCI ids)" : "");
  return speed;
}

std::string describeFacts(const TopoFacts& f) {
  if (!f.valid) return "none (" + f.source + ")";
  const std::string speed = nicSpeedText(f);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s: %d GPU(s), %s%s%s; %d RDMA NIC card(s) (rails %s), >= %d card(s) per GPU, "
                "<= %d GPU(s) per card, %s",
                f.source.c_str(), f.gpus, gpuLinksName(f.links),
                f.worstPcie.empty() ? "" : ", worst GPU-GPU PCIe path ", f.worstPcie.c_str(),
                f.nicCards, f.railPolicy.c_str(), f.minNicsPerGpu, f.maxGpusPerNic, speed.c_str());
  return buf;
}

}  // namespace epx::plugin::tuner
