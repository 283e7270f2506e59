// Test helper (tests/unit/test_bench_args.cc, test_engram_work.cc): parseArgs exits on a bad
// command line, so a test runs it in a forked child and looks at its exit status and output.
// Include after <boost/test/unit_test.hpp>.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "args.h"

namespace epxbench::testing {

struct ParseOutcome {
  int status = -1;     // exit status of the child (0: parseArgs returned)
  std::string output;  // its stdout and stderr
};

// Runs parseArgs("epx-bench" args...) in a child with the environment variables in `env` set
// ("" = unset) and the EPX_MP_* / EPX_GIN_EMU_* / EPX_HOST_SYNC variables unset unless given;
// onParsed(options) runs in the child after parseArgs returned (it may print what it parsed).
template <class OnParsed>
ParseOutcome parseInChild(std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>>& env,
                          OnParsed onParsed) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    for (const char* v : {"EPX_MP_SIZE", "EPX_MP_RANK", "EPX_MP_ID_FILE", "EPX_MP_RANKS_PER_NODE", "EPX_GIN_EMU_GBPS",
                          "EPX_GIN_EMU_LATENCY_US", "EPX_HOST_SYNC"})
      ::unsetenv(v);
    for (const auto& [k, v] : env)
      if (v.empty()) ::unsetenv(k.c_str());
      else ::setenv(k.c_str(), v.c_str(), 1);
    args.insert(args.begin(), "epx-bench");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    onParsed(parseArgs(int(args.size()), argv.data()));
    std::fflush(nullptr);
    ::_exit(0);
  }
  ::close(fds[1]);
  ParseOutcome o;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) o.output.append(buf, size_t(n));
  ::close(fds[0]);
  int ws = 0;
  BOOST_REQUIRE(::waitpid(pid, &ws, 0) == pid);
  o.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  return o;
}

inline bool has(const ParseOutcome& o, const std::string& s) { return o.output.find(s) != std::string::npos; }

}  // namespace epxbench::testing
