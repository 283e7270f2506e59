// Diagnostics for multi-process runs (scripts/fake-nodes.sh): on SIGUSR1 the process writes the
// call stack of its main thread to stderr, plus a one-line note of what it was doing (setPhase),
// and goes on. fake-nodes.sh sends SIGUSR1 to every rank still running when its time limit is hit,
// before killing them: a hang then shows which host call (NCCL, CUDA, epx) the rank was blocked in.
// cuda-gdb cannot attach under MPS ("Late attach is not supported with CUDA MPS"), hence this.
//
// Frames are printed by glibc's backtrace_symbols_fd as module(+offset); resolve the offsets of
// our own binaries with `addr2line -f -C -e <binary> <offset>` on the machine that built them.
#pragma once
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace epx::testing {

namespace detail {
inline std::atomic<const char*>& phaseSlot() {
  static std::atomic<const char*> p{"start"};
  return p;
}
inline pthread_t& mainThread() {
  static pthread_t t{};
  return t;
}
inline void writeStr(const char* s) {
  ssize_t ignored = ::write(2, s, std::strlen(s));
  (void)ignored;
}
inline void onStackSignal(int) {
  if (!pthread_equal(pthread_self(), mainThread())) {  // delivered to another thread: pass it on
    pthread_kill(mainThread(), SIGUSR1);
    return;
  }
  writeStr("\n==== SIGUSR1: main thread stack (phase: ");
  writeStr(phaseSlot().load());
  writeStr(")\n");
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  writeStr("==== end of stack\n");
}
}  // namespace detail

// What the main thread is doing now (a string literal or other static string).
inline void setPhase(const char* what) { detail::phaseSlot().store(what); }

// Call once from main(), on the main thread.
inline void installStackDump() {
  detail::mainThread() = pthread_self();
  void* warm[2];
  backtrace(warm, 2);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_handler = detail::onStackSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

}  // namespace epx::testing
