// SPDX-License-Identifier: BSD-3-Clause
// Test support: what the kernel says about memory, never what hugepool says.
//
//  - PoolGuard reserves an exact number of free huge pages for the duration
//    of a test and restores the previous pool afterwards: the C++ face of
//    tests/pool/pool-lock, the one harness that takes the machine-wide pool
//    lock (/tmp/hugepool-pool.lock), says when and for whom it waits, sets
//    and restores the pool.  PoolGuard runs `pool-lock hold` and talks to it
//    over two pipes; no two guards may live at once in one process (the
//    second would wait for the first).
//  - meminfo() reads /proc/meminfo, smaps_of() the /proc/self/smaps entry that
//    contains an address.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char **environ;

namespace kv {

// tests/CMakeLists.txt defines where the harness is.
inline constexpr const char *kPoolLockTool = HUGEPOOL_POOL_LOCK_TOOL;

inline std::string read_file(const std::string &path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot open " + path + " for writing");
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

// /proc/meminfo as key -> value (kB figures stay in kB, page counts as counts).
inline std::map<std::string, long long> meminfo() {
  std::map<std::string, long long> out;
  std::istringstream in(read_file("/proc/meminfo"));
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[line.substr(0, colon)] = std::stoll(line.substr(colon + 1));
  }
  return out;
}

inline long long huge_free() { return meminfo().at("HugePages_Free"); }
inline long long huge_total() { return meminfo().at("HugePages_Total"); }
inline long long huge_rsvd() { return meminfo().at("HugePages_Rsvd"); }
// Pages neither in use nor promised to a mapping: what a new mmap can get.
inline long long huge_available() {
  auto m = meminfo();
  return m.at("HugePages_Free") - m.at("HugePages_Rsvd");
}

// Hugetlb memory this process maps (HugetlbPages in /proc/self/status, kB):
// unlike the pool counters, other processes on the machine cannot move it.
inline long long self_hugetlb_kb() {
  std::istringstream in(read_file("/proc/self/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("HugetlbPages:", 0) == 0) return std::atoll(line.c_str() + 13);
  return -1;
}

// One /proc/self/smaps entry: its range and its fields (in kB).
struct SmapsEntry {
  uintptr_t start = 0, end = 0;
  std::string header;
  std::map<std::string, long long> kb;
  bool found = false;
  long long field(const std::string &k) const {
    auto it = kb.find(k);
    return it == kb.end() ? -1 : it->second;
  }
};

inline SmapsEntry smaps_of(const void *addr, const std::string &pid = "self") {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::istringstream in(read_file("/proc/" + pid + "/smaps"));
  std::string line;
  SmapsEntry cur;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long s = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2 && line.find(':') > line.find(' ')) {
      if (inside) return cur;
      inside = a >= s && a < e;
      if (inside) {
        cur = SmapsEntry{};
        cur.start = s;
        cur.end = e;
        cur.header = line;
        cur.found = true;
      }
      continue;
    }
    if (!inside) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    try {
      cur.kb[key] = std::stoll(line.substr(colon + 1));
    } catch (...) {
      // non-numeric fields (VmFlags, THPeligible text) are not needed
    }
  }
  return inside ? cur : SmapsEntry{};
}

// What the kernel shows over [addr, addr + size) of this process, summed over
// every mapping that overlaps it (smaps): bytes mapped inside the range, the
// mappings, their hugetlb kB (private and shared), whether all are on 2 MB
// pages.
struct RangeView {
  size_t mapped = 0;
  int mappings = 0;
  long long hugetlb_kb = 0;
  bool all_2m = true;
};

inline RangeView range_view(const void *addr, size_t size) {
  const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + size;
  std::istringstream in(read_file("/proc/self/smaps"));
  std::string line;
  RangeView v;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long s = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2 && line.find(':') > line.find(' ')) {
      inside = e > lo && s < hi;
      if (inside) {
        v.mappings++;
        v.mapped += std::min<uintptr_t>(e, hi) - std::max<uintptr_t>(s, lo);
      }
      continue;
    }
    if (!inside) continue;
    long long kb = 0;
    if (std::sscanf(line.c_str(), "KernelPageSize: %lld", &kb) == 1 && kb != 2048) v.all_2m = false;
    if (std::sscanf(line.c_str(), "Private_Hugetlb: %lld", &kb) == 1) v.hugetlb_kb += kb;
    if (std::sscanf(line.c_str(), "Shared_Hugetlb: %lld", &kb) == 1) v.hugetlb_kb += kb;
  }
  return v;
}

// VmFlags of the mapping containing addr ("ht" = hugetlb, "hg" = MADV_HUGEPAGE).
inline std::string vmflags_of(const void *addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::istringstream in(read_file("/proc/self/smaps"));
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long s = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= s && a < e;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8);
  }
  return {};
}

inline std::string pool_file(size_t page_kb) {
  return "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(page_kb) + "kB/";
}

inline long long pool_read(size_t page_kb, const char *what) {
  return std::stoll(read_file(pool_file(page_kb) + what));
}

// Reads or writes one number in a pool file without allocating: under the
// preload's small heap an allocation here could itself take a pool page
// between resizing the pool and checking it.
inline long long pool_number(const char *path) {
  char buf[64];
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof(buf) - 1);
  if (fd >= 0) ::close(fd);
  if (n <= 0) throw std::runtime_error("cannot read pool file");
  buf[n] = '\0';
  return std::strtoll(buf, nullptr, 10);
}

inline void pool_set_number(const char *path, long long v) {
  char buf[32];
  int len = std::snprintf(buf, sizeof(buf), "%lld\n", v);
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::write(fd, buf, static_cast<size_t>(len)) == len;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (!ok) throw std::runtime_error("cannot write pool file");
}

// The environment of `pool-lock hold`: this process's without LD_PRELOAD,
// so the harness never runs under hugepool's preload (its own allocations
// would take pool pages).
inline std::vector<char *> harness_environment() {
  std::vector<char *> env;
  for (char **e = environ; *e != nullptr; e++)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  env.push_back(nullptr);
  return env;
}

// Holds the machine-wide pool lock and sets the pool so that exactly
// `free_pages` pages of `page_kb` are free; restores the old pool on exit,
// also when the pool cannot be set.  The lock, its wait and its messages,
// the setting and the restoring are tests/pool/pool-lock's.
class PoolGuard {
 public:
  explicit PoolGuard(long long free_pages, size_t page_kb = 2048)
      : free_(pool_file(page_kb) + "free_hugepages"), resv_(pool_file(page_kb) + "resv_hugepages") {
    long long before = available();
    start(page_kb, free_pages);
    try {
      check(free_pages, answer("ready"), before);
    } catch (...) {
      release();
      throw;
    }
  }
  PoolGuard(const PoolGuard &) = delete;
  PoolGuard &operator=(const PoolGuard &) = delete;
  ~PoolGuard() { release(); }
  // Resize so that `free_pages` are free (pages in use by others are kept).
  // A process that hugepool runs in and that was refused by a short pool
  // (the small heap's first chunk, at start, before this guard set the pool)
  // sees pages added since at its next try, at most 64 ms after the last
  // refusal (lib/alloc.c, SHORT_MAX_MS): when the pool grows, wait that out,
  // so that the test's next request meets the pool it set.
  void set_free(long long free_pages) {
    long long before = available();
    char line[32];
    int len = std::snprintf(line, sizeof(line), "set %lld\n", free_pages);
    if (::write(to_, line, static_cast<size_t>(len)) != len) throw std::runtime_error("pool-lock hold: cannot write");
    check(free_pages, answer("ok"), before);
  }
  long long available() const { return pool_number(free_.c_str()) - pool_number(resv_.c_str()); }

 private:
  void start(size_t page_kb, long long free_pages) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pool-lock: pipe");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw std::runtime_error("pool-lock: pipe");
    }
    std::string kb = std::to_string(page_kb), n = std::to_string(free_pages);
    const char *argv[] = {kPoolLockTool, "hold", "--page-kb", kb.c_str(), "--free", n.c_str(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    auto env = harness_environment();
    int err = ::posix_spawn(&pid_, kPoolLockTool, &fa, nullptr, const_cast<char **>(argv), env.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (err != 0) {
      pid_ = -1;
      release();
      throw std::runtime_error(std::string("cannot run ") + kPoolLockTool + ": " + std::strerror(err));
    }
  }
  // The harness's answer "<word> FREE": FREE, the free pages it sees.  Read
  // a byte at a time and without allocating (see pool_number).
  long long answer(const char *word) {
    char buf[128];
    size_t n = 0;
    while (n + 1 < sizeof(buf) && ::read(from_, buf + n, 1) == 1 && buf[n] != '\n') n++;
    buf[n] = '\0';
    size_t w = std::strlen(word);
    if (std::strncmp(buf, word, w) != 0 || buf[w] != ' ')
      throw std::runtime_error(std::string("pool-lock hold: ") + (n ? buf : "ended without an answer (see its message above)"));
    return std::strtoll(buf + w + 1, nullptr, 10);
  }
  void check(long long want, long long got, long long before) {
    if (got != want)
      throw std::runtime_error("could not reserve " + std::to_string(want) + " free huge pages (have " +
                               std::to_string(got) + ", via " + free_ + ")");
    if (got > before && dlsym(RTLD_DEFAULT, "hugepool_alloc") != nullptr) ::usleep(80000);
  }
  // "release", then the harness restores the pool and exits: wait for it,
  // so the next guard or test meets the pool as it was.
  void release() noexcept {
    if (to_ >= 0) {
      static const char bye[] = "release\n";
      (void)!::write(to_, bye, sizeof(bye) - 1);
      ::close(to_);
      to_ = -1;
    }
    if (from_ >= 0) ::close(from_);
    from_ = -1;
    int status = 0;
    if (pid_ > 0) (void)::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string free_, resv_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

}  // namespace kv
