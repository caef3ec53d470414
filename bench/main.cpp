// SPDX-License-Identifier: BSD-3-Clause
// hugepool-bench SUBCOMMAND [--option value ...]
// Prints JSON lines (see bench_util.hpp); bench/run drives it.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "benches.hpp"

int main(int argc, char **argv) {
  using namespace hb;
  struct Sub {
    const char *name;
    int (*fn)(const Args &);
    const char *what;
  };
  static const Sub subs[] = {
      {"touch", bench_touch, "first-touch cost (warm median, cold worst case)"},
      {"pin", bench_pin, "io_uring fixed-buffer register/unregister, mlock/munlock"},
      {"translate", bench_translate, "physically-contiguous chunk count from /proc/self/pagemap, fresh and fragmented"},
      {"cma", bench_cma, "process_vm_readv/writev bandwidth between two processes"},
      {"tlb", bench_tlb, "dependent pointer chase (TLB reach)"},
  };
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: hugepool-bench SUBCOMMAND [--pages 4k,thp,hugetlb,hugetlb1g,hugepool] [--sizes 2M,64M] ...\n");
    for (const auto &s : subs) std::fprintf(stderr, "  %-10s %s\n", s.name, s.what);
    return argc < 2 ? 2 : 0;
  }
  for (const auto &s : subs)
    if (std::strcmp(argv[1], s.name) == 0) return s.fn(Args(argc, argv, 2));
  die(std::string("unknown subcommand ") + argv[1]);
}
