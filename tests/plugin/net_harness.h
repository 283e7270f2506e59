// Shared helpers for driving the built plugin's ncclNet_v11 between two processes.
#pragma once

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_net.h"

namespace epx::test {

inline std::mutex gLogMutex;
inline std::vector<std::string> gWarnings;
inline std::vector<std::string> gInfos;

inline void captureLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  if (level == NCCL_LOG_WARN) {
    std::lock_guard<std::mutex> lock(gLogMutex);
    gWarnings.push_back(text);
  } else if (level == NCCL_LOG_INFO) {
    std::lock_guard<std::mutex> lock(gLogMutex);
    gInfos.push_back(text);
  }
  if (getenv("EPX_TEST_VERBOSE") != nullptr) fprintf(stderr, "[plugin %d] %s\n", level, text);
}

inline bool warned(const std::string& needle) {
  std::lock_guard<std::mutex> lock(gLogMutex);
  for (const auto& w : gWarnings)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

// An INFO line containing `needle` was logged.
inline bool infoed(const std::string& needle) {
  std::lock_guard<std::mutex> lock(gLogMutex);
  for (const auto& i : gInfos)
    if (i.find(needle) != std::string::npos) return true;
  return false;
}

inline void* openPlugin() {
  static void* lib = [] {
    void* h = dlopen(EPX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) fprintf(stderr, "dlopen(%s): %s\n", EPX_PLUGIN_PATH, dlerror());
    return h;
  }();
  return lib;
}

template <typename T>
const T* pluginSymbol(const char* name) {
  void* lib = openPlugin();
  return lib ? static_cast<const T*>(dlsym(lib, name)) : nullptr;
}

using Clock = std::chrono::steady_clock;
inline Clock::time_point deadlineIn(int seconds) { return Clock::now() + std::chrono::seconds(seconds); }

inline ncclResult_t connectBlocking(const ncclNet_v11_t* net, void* ctx, int dev, void* handle,
                                    void** sendComm, int seconds = 20) {
  auto deadline = deadlineIn(seconds);
  *sendComm = nullptr;
  while (*sendComm == nullptr) {
    ncclNetDeviceHandle_v11_t* devComm = nullptr;
    ncclResult_t r = net->connect(ctx, dev, handle, sendComm, &devComm);
    if (r != ncclSuccess) return r;
    if (Clock::now() > deadline) return ncclInternalError;
    if (*sendComm == nullptr) usleep(100);
  }
  return ncclSuccess;
}

inline ncclResult_t acceptBlocking(const ncclNet_v11_t* net, void* listenComm, void** recvComm,
                                   int seconds = 20) {
  auto deadline = deadlineIn(seconds);
  *recvComm = nullptr;
  while (*recvComm == nullptr) {
    ncclNetDeviceHandle_v11_t* devComm = nullptr;
    ncclResult_t r = net->accept(listenComm, recvComm, &devComm);
    if (r != ncclSuccess) return r;
    if (Clock::now() > deadline) return ncclInternalError;
    if (*recvComm == nullptr) usleep(100);
  }
  return ncclSuccess;
}

// Tests a request until done; ncclInternalError on the harness's own timeout.
inline ncclResult_t wait(const ncclNet_v11_t* net, void* request, int* sizes, int seconds = 30) {
  auto deadline = deadlineIn(seconds);
  int done = 0;
  while (!done) {
    ncclResult_t r = net->test(request, &done, sizes);
    if (r != ncclSuccess) return r;
    if (Clock::now() > deadline) return ncclInternalError;
  }
  return ncclSuccess;
}

// Runs `body` in a child process; returns its exit status (or 128+signal). The child is killed
// after `seconds`.
template <typename F>
pid_t spawn(F body, int seconds = 60) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    int rc = body();
    _exit(rc);
  }
  return pid;
}

inline int reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

inline unsigned char pattern(size_t i, size_t salt) {
  return static_cast<unsigned char>((i * 131u + salt * 7u + (i >> 12)) & 0xff);
}

inline void fill(std::vector<unsigned char>& buf, size_t salt) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(i, salt);
}

inline size_t firstMismatch(const unsigned char* data, size_t size, size_t salt) {
  for (size_t i = 0; i < size; ++i)
    if (data[i] != pattern(i, salt)) return i;
  return size;
}

}  // namespace epx::test
