// Generated NCCL topology XML of any size, for the scale tests (nothing large is committed).
#pragma once
#include <cstdio>
#include <string>

namespace epx::topo::test {

/// An NCCL topology with `gpus` H200s and `nics` 400 Gb/s InfiniBand NICs, paired under PCIe
/// switches (GPU i and NIC i share switch i) and spread over two NUMA nodes. With `nvswitch`, each
/// GPU has 18 NVLinks to an NVSwitch, so every GPU pair is NVLink-connected (the largest output).
inline std::string generatedNcclXml(int gpus, int nics, bool nvswitch = true) {
  int next = 0;
  auto busId = [&next] {  // distinct bus ids: 256 buses per PCI domain
    char b[32];
    std::snprintf(b, sizeof b, "%04x:%02x:00.0", next / 256 + 1, next % 256);
    ++next;
    return std::string(b);
  };
  const int switches = gpus > nics ? gpus : nics;
  std::string xml = "<system version=\"1\">\n";
  for (int numa = 0; numa < 2; ++numa) {
    xml += "  <cpu numaid=\"" + std::to_string(numa) + "\" affinity=\"ffffffff\" arch=\"x86_64\">\n";
    for (int i = numa; i < switches; i += 2) {
      xml += "    <pci busid=\"" + busId() + "\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\">\n";
      if (i < gpus) {
        xml += "      <pci busid=\"" + busId() + "\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2335\">"
               "<gpu dev=\"" + std::to_string(i) + "\">";
        if (nvswitch) xml += "<nvlink target=\"ffff:ff:00.0\" count=\"18\" tclass=\"0x068000\"/>";
        xml += "</gpu></pci>\n";
      }
      if (i < nics)
        xml += "      <pci busid=\"" + busId() + "\" class=\"0x020700\" vendor=\"0x15b3\" device=\"0x1021\">"
               "<nic><net name=\"mlx5_" + std::to_string(i) + "\" dev=\"" + std::to_string(i) +
               "\" speed=\"400000\" port=\"1\" guid=\"0x" + std::to_string(i + 1) + "\"/></nic></pci>\n";
      xml += "    </pci>\n";
    }
    xml += "  </cpu>\n";
  }
  return xml + "</system>\n";
}

}  // namespace epx::topo::test
