// epx-bench's command-line parsing (tools/epx-bench/args.cc): the checks that need no GPU fail at
// parse time with exit status 2 and a message, so a bad command line is an error even on a machine
// without GPUs (where epx-bench would otherwise say "no CUDA GPU ... nothing to run" and exit 0).
// parseArgs exits on an error: each case runs in a forked child whose stdout/stderr are captured.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "args_in_child.h"
#include "../../plugin/rig/nic_pacer.h"  // the plugin's rate bounds, which args.h mirrors

namespace {

using epxbench::testing::has;
using Outcome = epxbench::testing::ParseOutcome;

// parseArgs(args) in a child with `env` (args_in_child.h).
Outcome parse(std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  return epxbench::testing::parseInChild(std::move(args), env, [](const epxbench::Options&) {});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bench_args)

BOOST_AUTO_TEST_CASE(valid_command_lines_parse) {
  BOOST_TEST(parse({}).status == 0);
  BOOST_TEST(parse({"--gpus", "8", "--algo", "low-latency", "--hidden", "7168"}).status == 0);
  BOOST_TEST(parse({"--algo", "high-throughput", "--hidden", "7000"}).status == 0);  // HT: multiple of 8
  BOOST_TEST(parse({"--csv", "/tmp/epx-bench-args-test.csv"}).status == 0);
  BOOST_TEST(parse({}, {{"EPX_GIN_EMU_GBPS", "0"}}).status == 0);  // 0 = off
  BOOST_TEST(parse({}, {{"EPX_GIN_EMU_GBPS", "0.001"}}).status == 0);
  BOOST_TEST(parse({}, {{"EPX_GIN_EMU_GBPS", "10000"}}).status == 0);
  // Multi-process mode: --gpus is the job's rank count (run() compares it with EPX_MP_SIZE).
  BOOST_TEST(parse({"--gpus", "16"}, {{"EPX_MP_SIZE", "16"}, {"EPX_MP_RANK", "0"}, {"EPX_MP_ID_FILE", "/tmp/x"}})
                 .status == 0);
  BOOST_TEST(parse({"--help"}).status == 0);
}

BOOST_AUTO_TEST_CASE(option_equals_value_is_option_space_value) {
  const Outcome o = epxbench::testing::parseInChild(
      {"--algo=low-latency", "--hidden=7168", "--ll-tokens=0,128", "--sms", "8"}, {}, [](const epxbench::Options& opt) {
        std::printf("low-latency %d hidden %d tokens %zu sms %d\n", int(opt.lowLatency()), opt.hidden, opt.llTokens.size(),
                    opt.sms.empty() ? -1 : opt.sms[0]);
      });
  BOOST_TEST(o.status == 0);
  BOOST_TEST(has(o, "low-latency 1 hidden 7168 tokens 2 sms 8"), o.output);
  Outcome n = parse({"--no-check=1"});
  BOOST_TEST(n.status == 2);
  BOOST_TEST(has(n, "--no-check takes no value, got '--no-check=1'"), n.output);
  for (const char* flag : {"--help=1", "--version=1"}) {
    const Outcome f = parse({flag});
    BOOST_TEST(f.status == 2, flag);
    BOOST_TEST(has(f, "takes no value"), f.output);
  }
  n = parse({"--bogus=3"});
  BOOST_TEST(n.status == 2);
  BOOST_TEST(has(n, "unknown option '--bogus'"), n.output);
  const Outcome positional = parse({"foo", "bar"});
  BOOST_TEST(positional.status == 2);
  BOOST_TEST(has(positional, "unexpected argument 'foo' (epx-bench takes options only"), positional.output);
  BOOST_TEST(parse({"--hidden="}).status == 2);  // an empty value is not a number
}

BOOST_AUTO_TEST_CASE(low_latency_hidden_must_be_a_multiple_of_128) {
  const Outcome o = parse({"--algo", "low-latency", "--hidden", "7000"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "epx-bench: --algo low-latency needs --hidden a multiple of 128, got 7000"), o.output);
  BOOST_TEST(parse({"--hidden", "7000", "--algo", "low-latency"}).status == 2);  // either order
}

// Values that used to be accepted on a machine without GPUs and ignored or refused only at run time.
BOOST_AUTO_TEST_CASE(sms_list_experts_and_host_sync_checked_at_parse_time) {
  Outcome o = parse({"--algo", "low-latency", "--sms", "8,16"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "--algo low-latency runs one SM budget: give --sms one value, got 2"), o.output);
  BOOST_TEST(parse({"--algo", "low-latency", "--sms", "8"}).status == 0);
  BOOST_TEST(parse({"--algo", "low-latency"}).status == 0);  // the default list: its first value
  o = parse({"--sms", "24,161"});  // smBudget's range (NCCL_EP_MAX_SM_BUDGET), not a later failure
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "161"), o.output);
  BOOST_TEST(parse({"--sms", "160"}).status == 0);
  o = parse({"--gpus", "2", "--experts", "3", "--topk", "1"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "--experts 3 must be a multiple of --gpus 2"), o.output);
  o = parse({}, {{"EPX_HOST_SYNC", "bogus"}});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "EPX_HOST_SYNC: expected auto, spin, yield or blocking, got 'bogus'"), o.output);
  BOOST_TEST(parse({}, {{"EPX_HOST_SYNC", "blocking"}}).status == 0);
  BOOST_TEST(parse({"--host-sync", "yield"}, {{"EPX_HOST_SYNC", "bogus"}}).status == 0);  // the option wins
}

BOOST_AUTO_TEST_CASE(an_error_is_one_line_not_the_usage) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--gpus", "0"}, {"--topk", "40"}, {"--bogus"}, {"--tokens"}, {"--routing", "zipf"}, {"--hidden", "7001"},
           {"--topk", "16", "--experts", "8"}}) {
    const Outcome o = parse(args);
    BOOST_TEST_CONTEXT(args[0]) {
      BOOST_TEST(o.status == 2);
      BOOST_TEST(o.output.rfind("epx-bench: ", 0) == 0u, o.output);
      BOOST_TEST(has(o, args[0]), o.output);  // names the option
      BOOST_TEST(o.output.find('\n') == o.output.size() - 1, o.output);  // one line
      BOOST_TEST(has(o, "(see epx-bench --help)\n"), o.output);
      BOOST_TEST(!has(o, "usage:"), o.output);
      if (args.size() > 1) BOOST_TEST(has(o, args[1]), o.output);  // names the value
    }
  }
  BOOST_TEST(parse({"--gpus", "0"}).output == "epx-bench: --gpus: '0' is not an integer in [1, 64] (see epx-bench --help)\n");
  BOOST_TEST(parse({"--topk", "16", "--experts", "8"}).output ==
             "epx-bench: --topk 16 must not exceed --experts 8 (see epx-bench --help)\n");
}

BOOST_AUTO_TEST_CASE(lists_refuse_empty_items) {
  for (const char* v : {"24,", ",24", "24,,0", ","}) {
    const Outcome o = parse({"--sms", v});
    BOOST_TEST_CONTEXT(v) {
      BOOST_TEST(o.status == 2);
      BOOST_TEST(has(o, "has an empty item"), o.output);
    }
  }
  BOOST_TEST(parse({"--sms", "24,0,16"}).status == 0);
  BOOST_TEST(parse({"--ll-tokens", "1,"}).status == 2);
}

BOOST_AUTO_TEST_CASE(options_of_the_other_algorithm_are_refused) {
  const Outcome ll = parse({"--algo", "low-latency", "--layout", "expanded"});
  BOOST_TEST(ll.status == 2);
  BOOST_TEST(has(ll, "--layout has no effect with --algo low-latency"), ll.output);
  BOOST_TEST(parse({"--no-floor", "--algo", "low-latency"}).status == 2);  // order does not matter
  const Outcome ht = parse({"--ll-tokens", "1,2"});
  BOOST_TEST(ht.status == 2);
  BOOST_TEST(has(ht, "--ll-tokens applies to --algo low-latency only"), ht.output);
  BOOST_TEST(parse({"--algo", "low-latency", "--ll-tokens", "1,32", "--sms", "8", "--no-check"}).status == 0);
  BOOST_TEST(parse({"--algo", "low-latency", "--sync-start"}).status == 0);
  BOOST_TEST(parse({"--sync-start"}).status == 0);  // high-throughput too
  const Outcome parsed = epxbench::testing::parseInChild({"--sync-start"}, {}, [](const epxbench::Options& o) {
    std::printf("syncStart=%d\n", int(o.syncStart));
  });
  BOOST_TEST(has(parsed, "syncStart=1"));
  BOOST_TEST(has(parse({"--algo", "bucket", "--sync-start"}), "--sync-start"));
  // --hybrid: high-throughput only (low-latency groups always send directly), a node size in [1, 64].
  BOOST_TEST(parse({"--hybrid", "4"}).status == 0);
  BOOST_TEST(has(parse({"--algo", "low-latency", "--hybrid", "2"}), "--hybrid has no effect with --algo low-latency"));
  BOOST_TEST(has(parse({"--algo", "bucket", "--hybrid", "2"}), "--hybrid has no effect with --algo bucket"));
  BOOST_TEST(parse({"--hybrid", "0"}).status == 2);
  BOOST_TEST(parse({"--hybrid", "65"}).status == 2);
}

// --algo bucket / pp (coll_bench.h): their own sizes and CTA count; EP options mean nothing there.
BOOST_AUTO_TEST_CASE(bucket_and_pp_options) {
  BOOST_TEST(parse({"--algo", "bucket", "--coll-mib", "256", "--coll-ctas", "16", "--iters", "5"}).status == 0);
  BOOST_TEST(parse({"--algo", "pp", "--pp-mib", "16", "--warmup", "1", "--net-gbps", "50"}).status == 0);
  const Outcome ep = parse({"--algo", "bucket", "--tokens", "128"});
  BOOST_TEST(ep.status == 2);
  BOOST_TEST(has(ep, "--tokens has no effect with --algo bucket"), ep.output);
  BOOST_TEST(has(parse({"--algo", "pp", "--sms", "8"}), "--sms has no effect with --algo pp"));
  BOOST_TEST(has(parse({"--algo", "pp", "--ll-tokens", "1"}), "--ll-tokens applies to --algo low-latency only"));
  BOOST_TEST(has(parse({"--algo", "pp", "--coll-mib", "4"}), "--coll-mib applies to --algo bucket only"));
  BOOST_TEST(has(parse({"--algo", "bucket", "--pp-mib", "4"}), "--pp-mib applies to --algo pp only"));
  BOOST_TEST(parse({"--algo", "pp", "--chunk-kib", "4096"}).status == 0);
  BOOST_TEST(parse({"--algo", "bucket", "--chunk-kib", "64"}).status == 0);
  BOOST_TEST(parse({"--algo", "pp", "--chunk-kib", "1048577"}).status == 2);
  BOOST_TEST(parse({"--algo", "pp", "--chunk-kib", "63"}).status == 2);
  BOOST_TEST(has(parse({"--chunk-kib", "1024"}), "--chunk-kib applies to --algo bucket, pp, lb and engram only"));
  BOOST_TEST(has(parse({"--coll-ctas", "4"}), "--coll-ctas applies to --algo bucket, pp, lb and engram only"));
  BOOST_TEST(has(parse({"--algo", "bucket", "--coll-mib", "0"}), "--coll-mib: '0' is not an integer in [1, 4096]"));
  BOOST_TEST(has(parse({"--algo", "allreduce"}), "--algo: expected high-throughput, low-latency, bucket, pp, lb or engram"));
  BOOST_TEST(parse({"--algo", "bucket", "--gpus", "3"}).status == 0);  // no expert count to divide
  BOOST_TEST(has(parse({"--algo", "pp", "--net-latency-us", "3"}), "--net-latency-us has no effect with --algo pp"));
  BOOST_TEST(has(parse({"--algo", "pp", "--coll-ctas", "33"}), "--coll-ctas: '33' is not an integer in [1, 32]"));
}

BOOST_AUTO_TEST_CASE(gpus_above_eight_in_one_process) {
  const Outcome o = parse({"--gpus", "9"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "epx-bench: --gpus 9: one process drives 1..8 GPUs"), o.output);
  BOOST_TEST(parse({"--gpus", "0"}).status == 2);
  BOOST_TEST(parse({"--gpus", "65"}).status == 2);
}

BOOST_AUTO_TEST_CASE(csv_that_cannot_be_created) {
  Outcome o = parse({"--csv", "/nonexistent/dir/x.csv"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "epx-bench: --csv /nonexistent/dir/x.csv: cannot write: directory /nonexistent/dir:"), o.output);
  o = parse({"--csv", "/tmp"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "is a directory"), o.output);
  o = parse({"--csv", "/etc/passwd/x.csv"});  // a file as the directory
  BOOST_TEST(o.status == 2, o.output);
  o = parse({"--csv", ""});  // e.g. an unset shell variable: not "no CSV"
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "epx-bench: --csv needs a file name"), o.output);
}

BOOST_AUTO_TEST_CASE(net_latency_uses_the_plugin_range) {
  BOOST_TEST(parse({"--net-latency-us", "1e6"}).status == 0);
  Outcome o = parse({"--net-latency-us", "2e6"});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "--net-latency-us: '2e6' is not a number in [0, 1e+06]"), o.output);
}

BOOST_AUTO_TEST_CASE(gin_emu_gbps_uses_the_plugin_range) {
  BOOST_TEST(epxbench::kNicMinGBps == epx::plugin::gin::kNicMinGBps);
  BOOST_TEST(epxbench::kNicMaxGBps == epx::plugin::gin::kNicMaxGBps);
  Outcome o = parse({}, {{"EPX_GIN_EMU_GBPS", "0.0001"}});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "epx-bench: EPX_GIN_EMU_GBPS: '0.0001' is neither 0 (off) nor in 0.001..10000 GB/s"), o.output);
  o = parse({}, {{"EPX_GIN_EMU_GBPS", "10001"}});
  BOOST_TEST(o.status == 2);
  BOOST_TEST(has(o, "EPX_GIN_EMU_GBPS"), o.output);
  BOOST_TEST(parse({}, {{"EPX_GIN_EMU_GBPS", "-1"}}).status == 2);
}

// Options of one layout only are refused when no run uses them; EPX_MP_RANKS_PER_NODE is checked
// like --ranks-per-node; --version prints the library's version (EPX_VERSION_CODE 100 = 0.1.0).
BOOST_AUTO_TEST_CASE(layout_options_ranks_per_node_and_version) {
  BOOST_TEST(has(parse({"--align", "64"}), "--align applies to the expanded layout only"));
  BOOST_TEST(parse({"--align", "64", "--layout", "both"}).status == 0);
  BOOST_TEST(has(parse({"--buffers", "user", "--layout", "expanded"}), "--buffers applies to the deduplicated layout only"));
  BOOST_TEST(parse({"--buffers", "user", "--layout", "dedup"}).status == 0);
  const std::vector<std::pair<std::string, std::string>> mp = {
      {"EPX_MP_SIZE", "4"}, {"EPX_MP_RANK", "0"}, {"EPX_MP_ID_FILE", "/tmp/x"}};
  for (const char* v : {"abc", "0", "-1", "2x"}) {
    auto env = mp;
    env.push_back({"EPX_MP_RANKS_PER_NODE", v});
    const Outcome o = parse({}, env);
    BOOST_TEST(o.status == 2);
    BOOST_TEST(has(o, "EPX_MP_RANKS_PER_NODE: '" + std::string(v) + "' is not an integer in [1, 1048576]"), o.output);
  }
  auto env = mp;
  env.push_back({"EPX_MP_RANKS_PER_NODE", "2"});
  BOOST_TEST(parse({}, env).status == 0);
  const Outcome v = parse({"--version"});
  BOOST_TEST(v.status == 0);
  BOOST_TEST(v.output == "epx-bench 0.1.0\n");
  BOOST_TEST(epxbench::epxVersionText() == "0.1.0");
}

BOOST_AUTO_TEST_SUITE_END()
