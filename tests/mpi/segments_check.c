/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-mpi-check: the MPI layer's test program, run with mpiexec.
 *   hugepool-mpi-check BYTES [KILL_RANK KILL_STAGE]
 * Every rank creates BYTES of node-shared segment, writes its pattern, and
 * after a barrier checks every node peer's pattern and the kernel's view of
 * every mapping (Shared_Hugetlb in its own smaps).  Rank 0 prints the drop of
 * HugePages_Free across the collective.  A rank that cannot reach another
 * user's view is checked too: a child of rank 0 running as nobody tries to
 * map a peer's segment and to open its /proc map_files entry.
 * KILL_STAGE (before | during | after): rank KILL_RANK kills itself with
 * SIGKILL before the collective, inside it (while the node peers wait in
 * it), or after it with every segment mapped.
 * HUGEPOOL_TEST_MOUNT=1: the segments are files on the first hugetlbfs mount.
 * Prints "rank R ok" lines, or "rank R FAIL ..." / "rank R error ERRNO". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hugepool/mpi.h"
#include "kernel_view.h"

/* Another user tries to reach a node peer's segment: by its handle, and by
 * the peer's /proc/<pid>/map_files (the only way to a file that has no name
 * and no descriptor left).  1 if every way was refused. */
static int other_user_refused(const hugepool_mpi_segments *s, int peer) {
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    hugepool_segment seg;
    if (hugepool_segment_map(&s->segments[peer].handle, &seg) == 0) _exit(1);
    char dir[64];
    (void)snprintf(dir, sizeof(dir), "/proc/%lld/map_files", (long long)s->segments[peer].handle.pid);
    if (open(dir, O_RDONLY | O_DIRECTORY) >= 0) _exit(2);
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)4 << 20;
  int kill_rank = argc > 3 ? atoi(argv[2]) : -1;
  const char *stage = argc > 3 ? argv[3] : "";
  int killer = rank == kill_rank;
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  const char *mnt = getenv("HUGEPOOL_TEST_MOUNT");
  if (mnt && strcmp(mnt, "1") == 0) opts.hugetlbfs = "";

  MPI_Barrier(MPI_COMM_WORLD);
  long free0 = meminfo("HugePages_Free");
  MPI_Barrier(MPI_COMM_WORLD);
  if (killer && strcmp(stage, "before") == 0) raise(SIGKILL);
  if (killer && strcmp(stage, "during") == 0) {
    /* Inside the collective as the peers see it: its segment is created and
     * the others are in the agreement, waiting for this rank. */
    hugepool_segment mine;
    if (hugepool_segment_create(bytes, &opts, &mine) == 0) raise(SIGKILL);
  }
  hugepool_mpi_segments s;
  if (hugepool_mpi_segments_create(MPI_COMM_WORLD, bytes, &opts, &s) != 0) {
    printf("rank %d error %d\n", rank, errno);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    long free1 = meminfo("HugePages_Free");
    if (rank == 0) printf("free drop %ld\n", free0 - free1);
    MPI_Finalize();
    return 0;
  }
  if (killer && strcmp(stage, "after") == 0) raise(SIGKILL);
  memset(s.local, 'A' + s.node_rank, s.local_size);
  MPI_Barrier(MPI_COMM_WORLD);
  long free1 = meminfo("HugePages_Free");
  int bad = 0;
  for (int i = 0; i < s.node_size; i++) {
    const unsigned char *p = s.peers[i];
    for (size_t off = 0; off < s.peer_sizes[i]; off += 4096) {
      if (p[off] != 'A' + i || p[off + 4095] != 'A' + i) {
        printf("rank %d FAIL peer %d byte %zu is %d\n", rank, i, off, p[off]);
        bad = 1;
        break;
      }
    }
    long kb = smaps_field(s.peers[i], "Shared_Hugetlb");
    long page = smaps_field(s.peers[i], "KernelPageSize");
    if (kb != (long)(s.peer_sizes[i] >> 10) || page != 2048) {
      printf("rank %d FAIL peer %d Shared_Hugetlb %ld kB KernelPageSize %ld\n", rank, i, kb, page);
      bad = 1;
    }
  }
  if (rank == 0 && s.node_size > 1 && !other_user_refused(&s, 1)) {
    printf("rank %d FAIL another user reached a peer's segment\n", rank);
    bad = 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("free drop %ld\n", free0 - free1);
  if (!bad) printf("rank %d ok %d peers\n", rank, s.node_size);
  fflush(stdout);
  hugepool_mpi_segments_free(&s);
  MPI_Barrier(MPI_COMM_WORLD);
  long free2 = meminfo("HugePages_Free");
  if (rank == 0) printf("free after %ld\n", free0 - free2);
  MPI_Finalize();
  return bad;
}
