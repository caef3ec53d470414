// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the hugepool benchmarks: timing, statistics, JSON-lines
// output, size parsing and the page types a buffer can live on.
//
// Every benchmark prints one JSON object per line on stdout.  A result line
// has "bench", the parameters, and samples summarised as median/min/max; a
// line with "skip" says what was not measured and why.  bench/report.py
// turns the lines into results.json, report.md and the plots.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "size.h" // lib/size.c, the project's one size parser

#ifdef HUGEPOOL_BENCH_HAVE_LIB
#include <hugepool/hugepool.h>
#endif
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
extern "C" {  // the header has no C++ guard
#include <hugetlbfs.h>
}
#endif

namespace hb {

constexpr size_t kKB = 1024, kMB = 1024 * kKB, kGB = 1024 * kMB;
constexpr size_t kSmallPage = 4096, kHuge2M = 2 * kMB, kHuge1G = kGB;

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

inline uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] inline void die(const std::string &what) {
  std::fprintf(stderr, "hugepool-bench: %s\n", what.c_str());
  std::exit(2);
}

// ---------------------------------------------------------------- statistics
struct Summary {
  double median = 0, min = 0, max = 0;
  size_t n = 0;
};

inline Summary summarise(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = (v.size() % 2) ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

// ---------------------------------------------------------------- JSON lines
// A flat JSON object built field by field; values are numbers or strings.
class Json {
 public:
  Json &str(const std::string &k, const std::string &v) {
    add(k, quote(v));
    return *this;
  }
  Json &num(const std::string &k, double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    add(k, b);
    return *this;
  }
  Json &integer(const std::string &k, long long v) {
    add(k, std::to_string(v));
    return *this;
  }
  // median/min/max/n of samples under a metric name, with its unit.
  Json &stats(const std::string &metric, const std::string &unit, const Summary &s) {
    str("metric", metric).str("unit", unit);
    return num("median", s.median).num("min", s.min).num("max", s.max).integer("n", static_cast<long long>(s.n));
  }
  void emit() const {
    std::printf("{%s}\n", body_.c_str());
    std::fflush(stdout);
  }

 private:
  static std::string quote(const std::string &v) {
    std::string o = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        o += ' ';
      } else {
        o += c;
      }
    }
    return o + "\"";
  }
  void add(const std::string &k, const std::string &v) {
    if (!body_.empty()) body_ += ", ";
    body_ += quote(k) + ": " + v;
  }
  std::string body_;
};

inline void skip(const std::string &bench, const std::string &what, const std::string &why) {
  Json().str("bench", bench).str("skip", what).str("reason", why).emit();
  std::fprintf(stderr, "skip %s %s: %s\n", bench.c_str(), what.c_str(), why.c_str());
}

// ---------------------------------------------------------------- arguments
// Sizes through the project's one size parser (lib/size.c): "64M", "2G", "4096".
inline size_t parse_size(const std::string &s) {
  unsigned long long v = 0;
  if (hp_parse_size(s.c_str(), &v) != 0 || v > SIZE_MAX) die("bad size: " + s);
  return static_cast<size_t>(v);
}

inline std::vector<std::string> split(const std::string &s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

inline std::vector<size_t> parse_sizes(const std::string &s) {
  std::vector<size_t> out;
  for (const auto &x : split(s)) out.push_back(parse_size(x));
  return out;
}

inline std::string size_name(size_t b) {
  char buf[32];
  if (b >= kGB && b % kGB == 0) std::snprintf(buf, sizeof buf, "%zuG", b / kGB);
  else if (b >= kMB && b % kMB == 0) std::snprintf(buf, sizeof buf, "%zuM", b / kMB);
  else if (b >= kKB && b % kKB == 0) std::snprintf(buf, sizeof buf, "%zuK", b / kKB);
  else std::snprintf(buf, sizeof buf, "%zu", b);
  return buf;
}

// --opt value pairs after the subcommand.
class Args {
 public:
  Args(int argc, char **argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0) die("unexpected argument " + k);
      if (i + 1 >= argc) die("missing value for " + k);
      kv_[k.substr(2)] = argv[++i];
    }
  }
  std::string get(const std::string &k, const std::string &def) const {
    auto it = kv_.find(k);
    return it == kv_.end() ? def : it->second;
  }
  long num(const std::string &k, long def) const {
    auto it = kv_.find(k);
    return it == kv_.end() ? def : std::strtol(it->second.c_str(), nullptr, 10);
  }

 private:
  std::map<std::string, std::string> kv_;
};

// ---------------------------------------------------------------- the pool
inline long read_long(const std::string &path) {
  std::ifstream in(path);
  long v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// Free, unreserved pages of the given huge page size (kB).
inline long pool_available(size_t page_kb) {
  const std::string d = "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(page_kb) + "kB/";
  const long f = read_long(d + "free_hugepages"), r = read_long(d + "resv_hugepages");
  return f < 0 || r < 0 ? -1 : f - r;
}

// A field of the mapping that holds p ("KernelPageSize", "AnonHugePages"),
// in kB, from /proc/self/smaps: what the kernel gave a buffer, not what its
// allocator claims.  -1 when no mapping holds p or it lacks the field.
inline long smaps_kb_of(const void *p, const char *field) {
  std::FILE *f = std::fopen("/proc/self/smaps", "re");
  if (f == nullptr) return -1;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const size_t n = std::strlen(field);
  char line[512];
  bool inside = false;
  long kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    const char *colon = std::strchr(line, ':'), *space = std::strchr(line, ' ');
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && colon > space) {  // a mapping's first line
      inside = a >= lo && a < hi;
    } else if (inside && std::strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = std::strtol(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

// ---------------------------------------------------------------- page types
// Where a buffer comes from.  The first five are page types (--pages names
// them); the last three are the allocator calls of the allocator and MPI
// benchmarks, whose pages are whatever that allocator gives.
enum class Page {
  small,     // mmap, 4 KB pages (THP off)
  thp,       // mmap, 2 MB aligned, MADV_HUGEPAGE
  huge2m,    // mmap MAP_HUGETLB | MAP_HUGE_2MB
  huge1g,    // mmap MAP_HUGETLB | MAP_HUGE_1GB
  hugepool,  // hugepool_alloc
  heap,      // malloc (glibc, or the allocator preloaded)
  memalign,  // posix_memalign, 4 KB aligned
  ghp,       // libhugetlbfs get_huge_pages
};

inline const char *page_name(Page p) {
  switch (p) {
    case Page::small: return "4k";
    case Page::thp: return "thp";
    case Page::huge2m: return "hugetlb";
    case Page::huge1g: return "hugetlb1g";
    case Page::hugepool: return "hugepool";
    case Page::heap: return "malloc";
    case Page::memalign: return "memalign";
    case Page::ghp: return "ghp";
  }
  return "?";
}

inline bool have_hugepool() {
#ifdef HUGEPOOL_BENCH_HAVE_LIB
  return true;
#else
  return false;
#endif
}

inline bool have_hugetlbfs() {
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
  return true;
#else
  return false;
#endif
}

inline bool parse_page(const std::string &s, Page *out) {
  static const std::pair<const char *, Page> names[] = {{"4k", Page::small},
                                                         {"thp", Page::thp},
                                                         {"hugetlb", Page::huge2m},
                                                         {"hugetlb1g", Page::huge1g},
                                                         {"hugepool", Page::hugepool}};
  for (const auto &n : names)
    if (s == n.first) {
      *out = n.second;
      return true;
    }
  return false;
}

inline std::vector<Page> parse_pages(const std::string &s) {
  std::vector<Page> out;
  for (const auto &x : split(s)) {
    Page p;
    if (!parse_page(x, &p)) die("unknown page type " + x + " (4k, thp, hugetlb, hugetlb1g, hugepool)");
    out.push_back(p);
  }
  return out;
}

inline size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// A buffer on one page type.  `p` is what the benchmark uses; `base`/`maplen`
// what has to be unmapped.
struct Buf {
  char *p = nullptr;
  size_t len = 0;
  Page kind = Page::small;
  void *base = nullptr;
  size_t maplen = 0;
  explicit operator bool() const { return p != nullptr; }
};

// Why a page type cannot hold `bytes` now ("" when it can).
inline std::string unavailable(Page kind, size_t bytes, int copies = 1) {
  const size_t n = static_cast<size_t>(copies);
  switch (kind) {
    case Page::small:
    case Page::thp:
    case Page::heap:
    case Page::memalign: return "";
    case Page::ghp: return have_hugetlbfs() ? "" : "built without libhugetlbfs";
    case Page::huge2m: {
      const long need = static_cast<long>(n * round_up(bytes, kHuge2M) / kHuge2M);
      const long have = pool_available(2048);
      if (have < need)
        return "2 MB hugetlb pool has " + std::to_string(have) + " free pages, needs " + std::to_string(need);
      return "";
    }
    case Page::huge1g: {
      const long need = static_cast<long>(n * round_up(bytes, kHuge1G) / kHuge1G);
      const long have = pool_available(1048576);
      if (have < need)
        return "1 GB hugetlb pool has " + std::to_string(have < 0 ? 0 : have) + " free pages, needs " +
               std::to_string(need);
      return "";
    }
    case Page::hugepool: {
      if (!have_hugepool()) return "built without the hugepool library";
      const long need = static_cast<long>(n * round_up(bytes, kHuge2M) / kHuge2M);
      const long have = pool_available(2048);
      if (have < need)
        return "2 MB hugetlb pool has " + std::to_string(have) + " free pages, needs " + std::to_string(need);
      return "";
    }
  }
  return "unknown page type";
}

// The row label for (kind, bytes), or "" when this combination is not
// measured: a 1 GB page type with a size that is not whole 1 GB pages is left
// out silently; a page type this machine cannot give is reported as skipped.
// `suffix` is appended to the label (e.g. the fragmentation state).
inline std::string measured_label(const char *bench, Page kind, size_t bytes, const std::string &suffix = "") {
  if (kind == Page::huge1g && bytes % kHuge1G) return {};
  std::string what = std::string(page_name(kind)) + " " + size_name(bytes) + suffix;
  if (auto why = unavailable(kind, bytes); !why.empty()) {
    skip(bench, what, why);
    return {};
  }
  return what;
}

// Allocate (not touch) a buffer.  Returns an empty Buf with errno set on
// failure.
inline Buf buf_alloc(Page kind, size_t bytes) {
  Buf b;
  b.kind = kind;
  b.len = bytes;
  const int prot = PROT_READ | PROT_WRITE, anon = MAP_PRIVATE | MAP_ANONYMOUS;
  switch (kind) {
    case Page::small: {
      b.maplen = round_up(bytes, kSmallPage);
      b.base = mmap(nullptr, b.maplen, prot, anon, -1, 0);
      if (b.base == MAP_FAILED) return Buf{};
      madvise(b.base, b.maplen, MADV_NOHUGEPAGE);
      b.p = static_cast<char *>(b.base);
      return b;
    }
    case Page::thp: {
      // Over-map by 2 MB so the buffer can start on a 2 MB boundary.
      b.maplen = round_up(bytes, kHuge2M) + kHuge2M;
      b.base = mmap(nullptr, b.maplen, prot, anon, -1, 0);
      if (b.base == MAP_FAILED) return Buf{};
      b.p = reinterpret_cast<char *>(round_up(reinterpret_cast<uintptr_t>(b.base), kHuge2M));
      madvise(b.p, round_up(bytes, kHuge2M), MADV_HUGEPAGE);
      return b;
    }
    case Page::huge2m:
    case Page::huge1g: {
      const size_t page = kind == Page::huge2m ? kHuge2M : kHuge1G;
      b.maplen = round_up(bytes, page);
      b.base = mmap(nullptr, b.maplen, prot, anon | MAP_HUGETLB | (kind == Page::huge2m ? MAP_HUGE_2MB : MAP_HUGE_1GB),
                    -1, 0);
      if (b.base == MAP_FAILED) return Buf{};
      b.p = static_cast<char *>(b.base);
      return b;
    }
    case Page::hugepool: {
#ifdef HUGEPOOL_BENCH_HAVE_LIB
      b.p = static_cast<char *>(hugepool_alloc(bytes));
      if (!b.p) return Buf{};
      b.base = b.p;
      b.maplen = bytes; /* buf_free needs no length: no usable_size call inside a timed pair */
      return b;
#else
      errno = ENOTSUP;
      return Buf{};
#endif
    }
    case Page::heap: {
      b.p = static_cast<char *>(std::malloc(bytes));
      if (!b.p) return Buf{};
      b.base = b.p;
      b.maplen = bytes;
      return b;
    }
    case Page::memalign: {
      void *p = nullptr;
      if (posix_memalign(&p, kSmallPage, bytes) != 0) return Buf{};
      b.p = static_cast<char *>(p);
      b.base = p;
      b.maplen = bytes;
      return b;
    }
    case Page::ghp: {
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
      b.maplen = round_up(bytes, kHuge2M);
      b.base = get_huge_pages(b.maplen, GHP_DEFAULT);
      if (!b.base) return Buf{};
      b.p = static_cast<char *>(b.base);
      return b;
#else
      errno = ENOTSUP;
      return Buf{};
#endif
    }
  }
  return Buf{};
}

inline void buf_free(Buf &b) {
  if (!b.p) return;
  switch (b.kind) {
    case Page::small:
    case Page::thp:
    case Page::huge2m:
    case Page::huge1g: munmap(b.base, b.maplen); break;
    case Page::hugepool:
#ifdef HUGEPOOL_BENCH_HAVE_LIB
      hugepool_free(b.p);
#endif
      break;
    case Page::heap:
    case Page::memalign: std::free(b.p); break;
    case Page::ghp:
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
      free_huge_pages(b.base);
#endif
      break;
  }
  b = Buf{};
}

// Release whatever a caching page type keeps (hugepool's cache), so that the
// next allocation is a cold one.
inline void page_type_trim(Page kind) {
#ifdef HUGEPOOL_BENCH_HAVE_LIB
  if (kind == Page::hugepool) hugepool_trim();
#else
  (void)kind;
#endif
}

// Write one byte per 4 KB page: the cost of faulting the buffer in.
inline void touch_pages(char *p, size_t len) {
  for (size_t off = 0; off < len; off += kSmallPage) static_cast<volatile char *>(p)[off] = 1;
}

}  // namespace hb
