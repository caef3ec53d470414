// SPDX-License-Identifier: BSD-3-Clause
// How long MPI_Win_allocate_shared takes to create and to free a window, per
// node, at window sizes users ask for (MPICH's creation time grows with the
// window: MPICH issue 5962).  Every rank of a node allocates its part of the
// node's total; the time of one create (or free) is the slowest rank's, from
// a barrier before to the return of the call.  Between create and free every
// rank writes its whole part and reads its neighbour's first and last bytes
// through MPI_Win_shared_query (a window that does not work is an error, not a
// fast one), so the free gives back touched pages, as in a real job.
//   hugepool-bench-win-alloc [--sizes 1M,16M,...] [--reps N]
// One JSON line per size: {"bench":"win_alloc","size":..,"create_ms":[..],
// "free_ms":[..],"touch_ms":[..],"page_kb":..} (each rep's value; page_kb: the
// kernel's page size of the window, the smallest any rank saw in its smaps;
// rank 0 of the world prints).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_util.hpp"

namespace {

double slowest(double mine, MPI_Comm comm) {
  double all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
  return all;
}

void print_list(const char *name, const std::vector<double> &v) {
  std::printf(",\"%s\":[", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.3f", i ? "," : "", v[i]);
  std::printf("]");
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *sizes_arg = "1M,16M,256M,1G,4G";
  long reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) sizes_arg = argv[++i];
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--sizes LIST] [--reps N]\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int lrank = 0, lsize = 1;
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_size(node, &lsize);
  int bad = 0;
  for (const size_t total : hb::parse_sizes(sizes_arg)) {
    const size_t part = total / static_cast<size_t>(lsize);
    std::vector<double> create, touch, release;
    long page_kb = 0;  // the page size the window is on (smallest over the ranks below)
    for (long r = 0; r < reps + 1; ++r) {  // rep 0: warm-up, not recorded
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      char *base = nullptr;
      MPI_Win win;
      MPI_Win_allocate_shared(static_cast<MPI_Aint>(part), 1, MPI_INFO_NULL, node, &base, &win);
      const double c = slowest(MPI_Wtime() - t0, MPI_COMM_WORLD);
      if (r == 0) page_kb = std::max(0L, hb::smaps_kb_of(base, "KernelPageSize"));
      t0 = MPI_Wtime();
      std::memset(base, 'a' + lrank % 26, part);
      MPI_Win_fence(0, win);
      const double t = slowest(MPI_Wtime() - t0, MPI_COMM_WORLD);
      const int peer = (lrank + 1) % lsize;
      MPI_Aint peer_size = 0;
      int disp = 0;
      char *peer_base = nullptr;
      MPI_Win_shared_query(win, peer, &peer_size, &disp, &peer_base);
      const char want = static_cast<char>('a' + peer % 26);
      if (static_cast<size_t>(peer_size) != part || peer_base[0] != want || peer_base[part - 1] != want) ++bad;
      MPI_Win_fence(0, win);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Win_free(&win);
      const double f = slowest(MPI_Wtime() - t0, MPI_COMM_WORLD);
      if (r) {
        create.push_back(c * 1e3);
        touch.push_back(t * 1e3);
        release.push_back(f * 1e3);
      }
    }
    int all_bad = 0;
    long min_page_kb = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&page_kb, &min_page_kb, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("{\"bench\":\"win_alloc\",\"size\":%zu,\"ranks_per_node\":%d,\"bad\":%d,\"page_kb\":%ld", total, lsize,
                  all_bad, min_page_kb);
      print_list("create_ms", create);
      print_list("touch_ms", touch);
      print_list("free_ms", release);
      std::printf("}\n");
      std::fflush(stdout);
    }
  }
  MPI_Comm_free(&node);
  MPI_Finalize();
  return bad ? 1 : 0;
}
