// SPDX-License-Identifier: BSD-3-Clause
// hugepool-halo: the shape of a halo exchange with hugepool::vector.
//
// A 3-D domain has six faces (-x +x -y +y -z +z).  Each face owns a send and
// a receive buffer, allocated once and reused every iteration, as a stencil
// code does around its MPI_Isend/MPI_Irecv.  Here the domain is periodic and
// alone, so what leaves through one face arrives through the opposite one;
// the copy stands in for the network.  Every iteration packs new values,
// "exchanges" them and checks each received face.  At the end it shows, from
// /proc/self/smaps, the page size of every buffer.
//
// It uses the pool as it finds it: reserve 16 free 2 MB pages first, e.g.
//   echo 16 > /proc/sys/vm/nr_hugepages     (as root)
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "hugepool/allocator.hpp"

namespace {

constexpr int kFaces = 6;
constexpr const char *kFaceName[kFaces] = {"-x", "+x", "-y", "+y", "-z", "+z"};
constexpr std::size_t kFaceValues = std::size_t{512} * 512;  // 2 MiB of doubles a buffer
constexpr int kIterations = 50;

int opposite(int face) { return face ^ 1; }

// The value at index i of the face `face` sent in iteration `it`.
double value(int it, int face, std::size_t i) { return it * 1e7 + face * 1e6 + static_cast<double>(i % 999983); }

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// KernelPageSize and Private_Hugetlb (kB) of the /proc/self/smaps entry holding p.
struct PageView {
  long page_kb = -1, hugetlb_kb = -1;
};
PageView page_view(const void *p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  PageView v;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') > line.find(' ') && (head >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = addr >= lo && addr < hi;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("KernelPageSize:", 0) == 0) v.page_kb = std::strtol(line.c_str() + 15, nullptr, 10);
    if (line.rfind("Private_Hugetlb:", 0) == 0) v.hugetlb_kb = std::strtol(line.c_str() + 16, nullptr, 10);
  }
  return v;
}

}  // namespace

int main() {
  std::vector<hugepool::vector<double>> send, recv;
  try {
    for (int f = 0; f < kFaces; f++) {
      send.emplace_back(kFaceValues);
      recv.emplace_back(kFaceValues);
    }
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "hugepool-halo: %d buffers of 2 MiB do not fit in the pool (reserve 16 free 2 MB pages)\n",
                 2 * kFaces);
    return 1;
  }

  long faults_after_first = 0;
  long bad = 0;
  for (int it = 0; it < kIterations; it++) {
    for (int f = 0; f < kFaces; f++)  // pack
      for (std::size_t i = 0; i < kFaceValues; i++) send[f][i] = value(it, f, i);
    for (int f = 0; f < kFaces; f++)  // the periodic neighbour's face arrives
      std::memcpy(recv[opposite(f)].data(), send[f].data(), kFaceValues * sizeof(double));
    for (int f = 0; f < kFaces; f++)  // unpack and check
      for (std::size_t i = 0; i < kFaceValues; i++) bad += recv[f][i] != value(it, opposite(f), i);
    if (it == 0) faults_after_first = minor_faults();
  }
  const long loop_faults = minor_faults() - faults_after_first;
  std::printf("%d iterations over %d faces: %ld wrong values, %ld page faults after the first iteration\n", kIterations,
              kFaces, bad, loop_faults);

  int not_huge = 0;
  std::printf("buffer    address           KernelPageSize  Private_Hugetlb  (from /proc/self/smaps)\n");
  for (int f = 0; f < kFaces; f++) {
    for (int dir = 0; dir < 2; dir++) {
      const double *p = dir == 0 ? send[f].data() : recv[f].data();
      const PageView v = page_view(p);
      not_huge += v.page_kb != 2048 || v.hugetlb_kb < 2048;
      std::printf("%s %s   %-16p  %6ld kB       %8ld kB\n", kFaceName[f], dir == 0 ? "send" : "recv",
                  static_cast<const void *>(p), v.page_kb, v.hugetlb_kb);
    }
  }
  return bad == 0 && not_huge == 0 ? 0 : 1;
}
