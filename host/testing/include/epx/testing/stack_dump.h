// Diagnostics for multi-process runs (scripts/fake-nodes.sh): on SIGUSR1 the process writes the
// call stack of its main thread to stderr, plus a one-line note of what it was doing (setPhase),
// then asks every other thread of the process (SIGUSR2) for its stack too (NCCL's proxy and GIN
// progress threads, a net plugin's threads), one after the other, and goes on. fake-nodes.sh sends SIGUSR1 to every rank still running when its time limit is hit,
// before killing them: a hang then shows which host call (NCCL, CUDA, epx) the rank was blocked in.
// cuda-gdb cannot attach under MPS ("Late attach is not supported with CUDA MPS"), hence this.
//
// Frames are printed by glibc's backtrace_symbols_fd as module(+offset); resolve the offsets of
// our own binaries with `addr2line -f -C -e <binary> <offset>` on the machine that built them.
#pragma once
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
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
inline std::atomic<int>& threadDone() {
  static std::atomic<int> d{0};
  return d;
}
inline void writeStack() {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
}
// SIGUSR2, sent by the main thread's handler: this thread's stack.
inline void onThreadSignal(int) {
  char line[96];
  char name[32] = "?";
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", long(syscall(SYS_gettid)));
  if (FILE* f = std::fopen(path, "r")) {
    if (std::fgets(name, sizeof(name), f)) name[std::strcspn(name, "\n")] = 0;
    std::fclose(f);
  }
  std::snprintf(line, sizeof(line), "---- thread %ld (%s)\n", long(syscall(SYS_gettid)), name);
  writeStr(line);
  writeStack();
  threadDone().store(1);
}
inline void onStackSignal(int) {
  if (!pthread_equal(pthread_self(), mainThread())) {  // delivered to another thread: pass it on
    pthread_kill(mainThread(), SIGUSR1);
    return;
  }
  writeStr("\n==== SIGUSR1: main thread stack (phase: ");
  writeStr(phaseSlot().load());
  writeStr(")\n");
  writeStack();
  // The other threads, one at a time (each waited for at most 500 ms).
  const long self = long(syscall(SYS_gettid));
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      const long tid = std::atol(e->d_name);
      if (tid <= 0 || tid == self) continue;
      threadDone().store(0);
      if (syscall(SYS_tgkill, long(getpid()), tid, SIGUSR2) != 0) continue;
      for (int i = 0; i < 500 && !threadDone().load(); ++i) {
        timespec ts{0, 1000000};
        nanosleep(&ts, nullptr);
      }
    }
    closedir(d);
  }
  writeStr("==== end of stacks\n");
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
  sa.sa_handler = detail::onThreadSignal;
  sigaction(SIGUSR2, &sa, nullptr);
}

}  // namespace epx::testing
