// The exchange behind epx::agreeOnConfig: one ncclAllGather of a 64-byte record per rank.
#include "agree.h"

#include <string>
#include <vector>

#include "core/agree.h"
#include "core/errors.h"
#include "link.h"

namespace epx {

ncclResult_t agreeOnConfig(const ncclEpGroup& g) {
  const AgreedConfig mine = makeAgreedConfig(g.cfg, g.nCtas);
  std::vector<AgreedConfig> all(size_t(g.link.nRanks), mine);
  if (g.link.nRanks > 1)
    if (ncclResult_t r = linkGather(g.link.comm, g.link.rank, g.link.nRanks, &mine, sizeof(mine), all.data(),
                                    "ncclEpGroupCreate");
        r != ncclSuccess)
      return r;
  const std::string err = checkAgreement(all);
  if (!err.empty()) return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + err);
  return ncclSuccess;
}

}  // namespace epx
