// SPDX-License-Identifier: BSD-3-Clause
// Helpers for the tests that run under libhugepool_preload.so.
#pragma once

#include <dlfcn.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernel_view.hpp"

namespace pl {

inline bool preloaded() { return dlsym(RTLD_DEFAULT, "hugepool_stats_snprint") != nullptr; }

// The preload's statistics report (text), read through its exported C API.
inline std::string report() {
  using fn = int (*)(char *, size_t, int);
  auto f = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "hugepool_stats_snprint"));
  if (!f) return {};
  std::string buf(8192, '\0');
  int n = f(buf.data(), buf.size(), 0);
  buf.resize(n > 0 && static_cast<size_t>(n) < buf.size() ? static_cast<size_t>(n) : 0);
  return buf;
}

// One counter of the report, by its label; -1 if absent.  Sizes are given
// in the text in B, KiB, MiB, GiB or TiB (one decimal at most): returned in
// bytes, rounded.
inline long long counter(const std::string &label) {
  std::string r = report();
  auto at = r.find(label);
  if (at == std::string::npos) return -1;
  std::string rest = r.substr(at + label.size());
  size_t used = 0;
  double value = std::stod(rest, &used);
  static const char *const units[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  for (int u = 0; u < 5; u++)
    if (rest.compare(used, std::strlen(units[u]), units[u]) == 0) value *= static_cast<double>(1ULL << (10 * u));
  return std::llround(value);
}

// The kernel's page size (kB) and hugetlb kB for the mapping holding p.
inline long long page_kb(const void *p) { return kv::smaps_of(p).field("KernelPageSize"); }
inline bool on_hugetlb(const void *p) {
  auto e = kv::smaps_of(p);
  return e.found && e.field("KernelPageSize") == 2048 && e.field("Private_Hugetlb") > 0;
}

// After the pool was resized: the small heap asks the pool again a
// millisecond after a refusal and after the thread's next 63 requests
// (which glibc serves), so this waits and makes them.
inline void small_heap_sees_pool() {
  usleep(3000);
  for (int i = 0; i < 64; i++) {
    void *volatile p = malloc(16);
    free(p);
  }
}

inline bool aligned(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

inline void fill(void *p, size_t n, unsigned seed) {
  auto *b = static_cast<unsigned char *>(p);
  for (size_t i = 0; i < n; i++) b[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}
inline bool check(const void *p, size_t n, unsigned seed) {
  auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i] != static_cast<unsigned char>((i * 131 + seed) >> 3)) return false;
  return true;
}

// Runs fn in a forked child; returns the raw wait status.
template <class F>
int in_child(F fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

// Captures what the process writes to fd 2 while fn runs.
template <class F>
std::string capture_stderr(F fn) {
  char path[] = "/tmp/hugepool-preload-stderr-XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(2);
  dup2(fd, 2);
  fn();
  dup2(saved, 2);
  close(saved);
  std::string text = kv::read_file(path);
  close(fd);
  unlink(path);
  return text;
}

}  // namespace pl
