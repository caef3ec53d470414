// SPDX-License-Identifier: BSD-3-Clause
// What the MPI benchmarks (mpi.cpp, halo.cpp) share, kept out of bench_util.hpp
// so that the benchmarks without MPI do not need mpi.h.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "bench_util.hpp"

namespace hb {

// Every rank of comm agrees that its part worked (a setup failure in one
// rank must skip the case in all of them, or the next collective hangs).
inline bool all_ranks_ok(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

// The configurations compared with each other (the buffer kinds or columns
// at one size) run interleaved, repetition by repetition, so that a burst of
// load on a shared machine hits all of them alike; round 0 is a warm-up.
// A case has `bool ok` (set up in every rank), `double run_once()` (one
// timed block, the value recorded) and `emit(const Summary &)`; rank 0 emits.
template <class Case>
void run_interleaved(std::vector<std::unique_ptr<Case>> &cases, long reps) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<std::vector<double>> samples(cases.size());
  for (long r = 0; r < reps + 1; ++r)
    for (size_t c = 0; c < cases.size(); ++c) {
      if (!cases[c]->ok) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      const double v = cases[c]->run_once();
      if (r) samples[c].push_back(v);
    }
  for (size_t c = 0; c < cases.size(); ++c)
    if (cases[c]->ok && rank == 0) cases[c]->emit(summarise(samples[c]));
}

}  // namespace hb
