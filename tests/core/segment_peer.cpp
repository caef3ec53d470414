// SPDX-License-Identifier: BSD-3-Clause
// hugepool-segment-peer: a separate process for the segment tests.
//   hugepool-segment-peer create BYTES [DIR]  creates a segment (on the hugetlbfs DIR), fills it with 0xC1, prints
//                                               "handle PID FD INO DEV SIZE PAGE", then waits
//   hugepool-segment-peer map PID FD INO DEV SIZE PAGE [FILL]
//                                             maps a peer's segment, checks that its first and
//                                             last bytes are equal, writes FILL (a byte) over it
//                                             if given, prints "mapped BYTE SHARED_HUGETLB_KB",
//                                             then waits
// Either prints "error ERRNO" and exits 1 on failure.  "Waits" means: until
// its standard input reaches end of file (or it is killed).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hugepool/hugepool.h"
#include "kernel_view.hpp"

static void wait_for_eof() {
  char c;
  while (::read(0, &c, 1) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc >= 3 && std::strcmp(argv[1], "create") == 0) {
    hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
    if (argc >= 4) opts.hugetlbfs = argv[3];
    hugepool_segment seg;
    if (hugepool_segment_create(std::strtoull(argv[2], nullptr, 10), &opts, &seg) != 0) {
      std::printf("error %d\n", errno);
      return 1;
    }
    std::memset(seg.addr, 0xC1, seg.size);
    const hugepool_segment_handle &h = seg.handle;
    std::printf("handle %lld %lld %llu %llu %llu %llu\n", static_cast<long long>(h.pid), static_cast<long long>(h.fd),
                static_cast<unsigned long long>(h.ino), static_cast<unsigned long long>(h.dev),
                static_cast<unsigned long long>(h.size), static_cast<unsigned long long>(h.page_size));
    std::fflush(stdout);
    wait_for_eof();
    hugepool_segment_unmap(&seg);
    return 0;
  }
  if (argc >= 8 && std::strcmp(argv[1], "map") == 0) {
    hugepool_segment_handle h{};
    h.pid = std::strtoll(argv[2], nullptr, 10);
    h.fd = std::strtoll(argv[3], nullptr, 10);
    h.ino = std::strtoull(argv[4], nullptr, 10);
    h.dev = std::strtoull(argv[5], nullptr, 10);
    h.size = std::strtoull(argv[6], nullptr, 10);
    h.page_size = std::strtoull(argv[7], nullptr, 10);
    hugepool_segment seg;
    if (hugepool_segment_map(&h, &seg) != 0) {
      std::printf("error %d\n", errno);
      return 1;
    }
    auto *bytes = static_cast<unsigned char *>(seg.addr);
    unsigned first = bytes[0];
    if (bytes[seg.size - 1] != first) first = 0x100;  // torn: not one pattern
    if (argc >= 9) std::memset(seg.addr, static_cast<int>(std::strtol(argv[8], nullptr, 0)), seg.size);
    std::printf("mapped %u %lld\n", first, kv::smaps_of(seg.addr).field("Shared_Hugetlb"));
    std::fflush(stdout);
    wait_for_eof();
    hugepool_segment_unmap(&seg);
    return 0;
  }
  std::fprintf(stderr, "usage: hugepool-segment-peer create BYTES | map PID FD INO DEV SIZE PAGE [FILL]\n");
  return 2;
}
