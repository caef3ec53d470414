// SPDX-License-Identifier: BSD-3-Clause
// hugepool::mpi::node_segments — the MPI layer's collective segments as a
// C++ object (header-only; link with hugepool::hugepool_mpi).
//
//   hugepool::mpi::node_segments segs(MPI_COMM_WORLD, 64 << 20);
//   double *mine = segs.local<double>();             // this rank's 64 MiB
//   double *next = segs.peer<double>((segs.node_rank() + 1) % segs.node_size());
//   MPI_Barrier(segs.node_comm());                   // order writes and reads as usual
//
// Construction and destruction are collective over the communicator, like
// creating and freeing an MPI window: every rank constructs and destroys its
// object at the same point of the program, before MPI_Finalize.  Failure
// throws std::system_error in every rank (ENOMEM: the pool is too small; the
// C API's line on stderr says by how much).
#pragma once

#include <cerrno>
#include <cstddef>
#include <system_error>

#include "hugepool/mpi.h"

namespace hugepool::mpi {

class node_segments {
 public:
  node_segments(MPI_Comm comm, std::size_t bytes, const hugepool_segment_options *opts = nullptr) {
    if (hugepool_mpi_segments_create(comm, bytes, opts, &s_) != 0) {
      throw std::system_error(errno, std::generic_category(), "hugepool_mpi_segments_create");
    }
  }
  node_segments(const node_segments &) = delete;
  node_segments &operator=(const node_segments &) = delete;
  ~node_segments() { hugepool_mpi_segments_free(&s_); }

  template <class T = void>
  [[nodiscard]] T *local() const noexcept {
    return static_cast<T *>(s_.local);
  }
  template <class T = void>
  [[nodiscard]] T *peer(int node_rank) const noexcept {
    return static_cast<T *>(s_.peers[node_rank]);
  }
  [[nodiscard]] std::size_t size() const noexcept { return s_.local_size; }
  [[nodiscard]] std::size_t peer_size(int node_rank) const noexcept { return s_.peer_sizes[node_rank]; }
  [[nodiscard]] int node_rank() const noexcept { return s_.node_rank; }
  [[nodiscard]] int node_size() const noexcept { return s_.node_size; }
  [[nodiscard]] MPI_Comm node_comm() const noexcept { return s_.node_comm; }
  [[nodiscard]] const hugepool_mpi_segments &c_struct() const noexcept { return s_; }

 private:
  hugepool_mpi_segments s_{};
};

}  // namespace hugepool::mpi
