#include "tuner/tuner.h"

#include <map>
#include <mutex>

#include "common/env.h"
#include "common/log.h"

namespace epx::plugin::tuner {

namespace {

// Live discovery takes hwloc (and NVML) time, and the host does not change while the process runs:
// one snapshot per EPX_TUNER_TOPO value, shared by all communicators.
TopoFacts cachedFacts(const std::string& spec) {
  static std::mutex mutex;
  static std::map<std::string, TopoFacts> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(spec);
  if (it == cache.end()) it = cache.emplace(spec, loadFacts(spec)).first;
  return it->second;
}

}  // namespace

Context* createContext(const Communicator& comm) {
  auto* ctx = new Context();
  ctx->comm = comm;
  ctx->rulesPath = envString("EPX_TUNER_RULES");
  if (!ctx->rulesPath.empty()) {
    ParseResult parsed = loadRulesFile(ctx->rulesPath);
    for (const std::string& e : parsed.errors)
      EPX_WARN(NCCL_TUNING | NCCL_ENV, "EPX tuner: EPX_TUNER_RULES=%s: %s (ignored)",
               ctx->rulesPath.c_str(), e.c_str());
    ctx->rules = std::move(parsed.rules);
  }
  ctx->announced.assign(ctx->rules.size(), false);
  const std::string topoEnv = envString("EPX_TUNER_TOPO");
  ctx->topo = cachedFacts(topoEnv);
  // Asked for explicitly (a file) but unusable: as visible as a bad rules file.
  if (!ctx->topo.valid && !topoEnv.empty() && topoEnv != "off")
    EPX_WARN(NCCL_TUNING | NCCL_ENV, "EPX tuner: EPX_TUNER_TOPO=%s: %s; the topology policy is off",
             topoEnv.c_str(), ctx->topo.source.c_str());
  EPX_INFO(NCCL_INIT | NCCL_TUNING,
           "EPX tuner plugin loaded: %zu ranks, %zu nodes, %d NVLink domain(s) of %d-%d ranks; %zu rule(s)%s%s",
           comm.nRanks, comm.nNodes, comm.nNvlDomains, comm.minRanksPerNvlDomain,
           comm.maxRanksPerNvlDomain, ctx->rules.size(), ctx->rulesPath.empty() ? "" : " from ",
           ctx->rulesPath.c_str());
  EPX_INFO(NCCL_INIT | NCCL_TUNING, "EPX tuner: topology %s", describeFacts(ctx->topo).c_str());
  for (const std::string& note : topoPolicyNotes(ctx->topo, comm.nRanks, comm.nNodes))
    EPX_INFO(NCCL_INIT | NCCL_TUNING, "EPX tuner: %s", note.c_str());
  return ctx;
}

void decide(Context* ctx, int collective, size_t bytes, float* table, int numAlgo, int numProto,
            int* nChannels) {
  if (ctx == nullptr || table == nullptr) return;
  int fired = ctx->rules.empty() ? -1
                                 : applyRules(ctx->rules, collective, bytes, ctx->comm.nRanks,
                                              ctx->comm.nNodes, table, numAlgo, numProto, nChannels);
  if (fired >= 0) {
    const Rule& r = ctx->rules[static_cast<size_t>(fired)];
    if (!ctx->announced[static_cast<size_t>(fired)]) {
      ctx->announced[static_cast<size_t>(fired)] = true;
      EPX_INFO(NCCL_TUNING,
               "EPX tuner: rule at %s:%d fired for %s %zu bytes: %s/%s channels %s (\"%s\"); the rules file "
               "takes precedence over the topology policy",
               ctx->rulesPath.c_str(), r.line, collectiveName(collective), bytes,
               algorithmName(r.algorithm), protocolName(r.protocol),
               r.channels > 0 ? std::to_string(r.channels).c_str() : "NCCL's", r.text.c_str());
    } else {
      EPX_TRACE(NCCL_TUNING, "EPX tuner: rule at line %d for %s %zu bytes", r.line,
                collectiveName(collective), bytes);
    }
    return;
  }
  TopoDecision d = applyTopoPolicy(ctx->topo, ctx->comm.nRanks, ctx->comm.nNodes, collective, table,
                                   numAlgo, numProto);
  if (d.rule == TopoRule::None) return;
  bool* seen = nullptr;
  if (collective >= 0 && collective < 5 && d.from.algorithm >= 0 && d.from.algorithm < 7)
    seen = &ctx->topoAnnounced[collective][d.from.algorithm];
  if (seen == nullptr || !*seen) {
    if (seen != nullptr) *seen = true;
    EPX_INFO(NCCL_TUNING, "EPX tuner: %s %zu bytes: %s/%s -> %s/%s by %s",
             collectiveName(collective), bytes, algorithmName(d.from.algorithm),
             protocolName(d.from.protocol), algorithmName(d.to.algorithm), protocolName(d.to.protocol),
             explainTopoDecision(d, ctx->topo, ctx->comm.nRanks).c_str());
  } else {
    EPX_TRACE(NCCL_TUNING, "EPX tuner: %s %zu bytes: %s", collectiveName(collective), bytes,
              topoRuleName(d.rule));
  }
}

}  // namespace epx::plugin::tuner
