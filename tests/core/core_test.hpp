// SPDX-License-Identifier: BSD-3-Clause
// Shared helpers for the core tests.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hugepool/hugepool.h"
#include "kernel_view.hpp"

namespace test {

constexpr size_t MiB = size_t{1} << 20;

// Puts the library back in its default state: empty cache, default limits,
// strict policy, 2 MB pages.
inline void fresh_state() {
  hugepool_trim();
  hugepool_set_cache_limits(64, size_t{1} << 30);
  hugepool_set_policy(HUGEPOOL_POLICY_STRICT);
  hugepool_set_page_size(2 * MiB);
}

inline long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Is any mapping of /proc/self/maps starting at addr?
inline bool mapped_at(const void *addr) {
  char want[32];
  std::snprintf(want, sizeof(want), "%lx-", reinterpret_cast<unsigned long>(addr));
  std::string maps = kv::read_file("/proc/self/maps");
  return maps.find("\n" + std::string(want)) != std::string::npos || maps.rfind(want, 0) == 0;
}

// Captures what this process writes to stderr between construction and text().
class StderrCapture {
 public:
  StderrCapture() {
    if (pipe(fds_) != 0) throw std::runtime_error("pipe");
    saved_ = dup(2);
    dup2(fds_[1], 2);
  }
  std::string text() {
    if (saved_ >= 0) {
      dup2(saved_, 2);
      close(saved_);
      close(fds_[1]);
      saved_ = -1;
      char buf[4096];
      ssize_t n;
      while ((n = read(fds_[0], buf, sizeof(buf))) > 0) out_.append(buf, static_cast<size_t>(n));
      close(fds_[0]);
    }
    return out_;
  }
  ~StderrCapture() { text(); }

 private:
  int fds_[2]{};
  int saved_ = -1;
  std::string out_;
};

// Runs a shell command, returns its exit status and combined output.
inline int run(const std::string &cmd, std::string &output) {
  output.clear();
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace test
