/* SPDX-License-Identifier: BSD-3-Clause */
/* Gradient allreduce that allocates its buffers on every call, like Baidu's
 * ring allreduce (tensorflow-allreduce / horovod's early versions): a ring
 * reduce-scatter + allgather over MPI_Sendrecv, with the output and the
 * receive buffer malloc'ed and freed per call.  Rank 0 prints the median,
 * min and max time per call (ms) for each gradient size. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static float *ring_allreduce(const float *in, size_t n, int rank, int size) {
  float *out = malloc(n * sizeof(float));
  memcpy(out, in, n * sizeof(float));
  size_t seg = (n + (size_t)size - 1) / (size_t)size;
  float *recv = malloc(seg * sizeof(float));
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int step = 0; step < size - 1; step++) { /* reduce-scatter */
    int send_seg = (rank - step + size) % size, recv_seg = (rank - step - 1 + size) % size;
    size_t so = (size_t)send_seg * seg, ro = (size_t)recv_seg * seg;
    size_t sn = so < n ? (n - so < seg ? n - so : seg) : 0, rn = ro < n ? (n - ro < seg ? n - ro : seg) : 0;
    MPI_Sendrecv(out + so, (int)sn, MPI_FLOAT, right, 0, recv, (int)rn, MPI_FLOAT, left, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (size_t i = 0; i < rn; i++) out[ro + i] += recv[i];
  }
  for (int step = 0; step < size - 1; step++) { /* allgather */
    int send_seg = (rank + 1 - step + size) % size, recv_seg = (rank - step + size) % size;
    size_t so = (size_t)send_seg * seg, ro = (size_t)recv_seg * seg;
    size_t sn = so < n ? (n - so < seg ? n - so : seg) : 0, rn = ro < n ? (n - ro < seg ? n - ro : seg) : 0;
    MPI_Sendrecv(out + so, (int)sn, MPI_FLOAT, right, 1, out + ro, (int)rn, MPI_FLOAT, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
  }
  free(recv);
  return out;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t mib[] = {4, 16, 64};
  if (rank == 0) printf("# gradient_MiB median_ms min_ms max_ms check\n");
  for (size_t k = 0; k < sizeof(mib) / sizeof(mib[0]); k++) {
    size_t n = (mib[k] << 20) / sizeof(float);
    int iters = mib[k] >= 64 ? 15 : 40;
    double t[64];
    double check = 0;
    for (int it = -2; it < iters; it++) {
      float *grad = malloc(n * sizeof(float)); /* the framework's fresh gradient */
      for (size_t i = 0; i < n; i++) grad[i] = (float)((rank + 1) * (i % 7));
      double t0 = MPI_Wtime();
      float *sum = ring_allreduce(grad, n, rank, size);
      double dt = (MPI_Wtime() - t0) * 1e3;
      if (it >= 0) t[it] = dt;
      check = sum[n - 1];
      free(sum);
      free(grad);
    }
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    if (rank == 0) printf("%zu %.2f %.2f %.2f %.0f\n", mib[k], t[iters / 2], t[0], t[iters - 1], check);
  }
  MPI_Finalize();
  return 0;
}
