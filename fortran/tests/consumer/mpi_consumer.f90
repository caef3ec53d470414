! SPDX-License-Identifier: BSD-3-Clause
! A downstream MPI program (use mpi_f08): node segments, every peer's read.
program mpi_consumer
  use, intrinsic :: iso_fortran_env, only: int64
  use mpi_f08
  use hugepool
  use hugepool_mpi
  implicit none
  type(hugepool_mpi_segments) :: segs
  integer(int64), pointer :: v(:)
  integer :: p, ok
  call MPI_Init()
  call hugepool_mpi_segments_create(MPI_COMM_WORLD, 2_int64**21, segs)
  call hugepool_view(hugepool_mpi_peer(segs, segs%node_rank), 2_int64**21, v, [2**18])
  v = segs%node_rank
  call MPI_Barrier(MPI_COMM_WORLD)
  ok = 0
  do p = 0, segs%node_size - 1
    call hugepool_view(hugepool_mpi_peer(segs, p), 2_int64**21, v, [2**18])
    if (all(v == p)) ok = ok + 1
  end do
  print '(a,i0,a)', 'mpi consumer: read ', ok, ' node segments'
  call hugepool_mpi_segments_free(segs)
  call MPI_Finalize()
end program
