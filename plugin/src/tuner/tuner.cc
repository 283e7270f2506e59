#include "tuner/tuner.h"

#include "common/env.h"
#include "common/log.h"

namespace epx::plugin::tuner {

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
  EPX_INFO(NCCL_INIT | NCCL_TUNING,
           "EPX tuner plugin loaded: %zu ranks, %zu nodes, %d NVLink domain(s) of %d-%d ranks; %zu rule(s)%s%s",
           comm.nRanks, comm.nNodes, comm.nNvlDomains, comm.minRanksPerNvlDomain,
           comm.maxRanksPerNvlDomain, ctx->rules.size(), ctx->rulesPath.empty() ? "" : " from ",
           ctx->rulesPath.c_str());
  return ctx;
}

void decide(Context* ctx, int collective, size_t bytes, float* table, int numAlgo, int numProto,
            int* nChannels) {
  if (ctx == nullptr || table == nullptr || ctx->rules.empty()) return;
  int fired = applyRules(ctx->rules, collective, bytes, ctx->comm.nRanks, ctx->comm.nNodes, table,
                         numAlgo, numProto, nChannels);
  if (fired < 0) return;
  const Rule& r = ctx->rules[static_cast<size_t>(fired)];
  if (!ctx->announced[static_cast<size_t>(fired)]) {
    ctx->announced[static_cast<size_t>(fired)] = true;
    EPX_INFO(NCCL_TUNING, "EPX tuner: rule at %s:%d fired for %s %zu bytes: %s/%s channels %s (\"%s\")",
             ctx->rulesPath.c_str(), r.line, collectiveName(collective), bytes,
             algorithmName(r.algorithm), protocolName(r.protocol),
             r.channels > 0 ? std::to_string(r.channels).c_str() : "NCCL's", r.text.c_str());
  } else {
    EPX_TRACE(NCCL_TUNING, "EPX tuner: rule at line %d for %s %zu bytes", r.line,
              collectiveName(collective), bytes);
  }
}

}  // namespace epx::plugin::tuner
