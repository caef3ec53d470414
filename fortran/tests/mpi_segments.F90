! SPDX-License-Identifier: BSD-3-Clause
! The hugepool_mpi module under mpiexec, with `use mpi` or (HP_F08) `use
! mpi_f08`: node-shared segments written and read across ranks, hugepool
! arrays as MPI buffers, a shortage in every rank; placement from smaps.
! Run with 2 ranks and 64 free 2 MB pages (mpi.sh).
program mpi_segments
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, real64, output_unit
#ifdef HP_F08
  use mpi_f08
#else
  use mpi
#endif
  use hugepool
  use hugepool_mpi
  use hp_test
  implicit none
#ifdef HP_F08
  type(MPI_Comm) :: comm
#else
  integer :: comm
#endif
  integer, parameter :: n = 512 * 1024            ! int64: 4 MiB a segment
  integer :: ierr, rank, nranks, p, right, left, stat
  character(512) :: msg
  type(hugepool_mpi_segments) :: segs
  integer(int64), pointer, contiguous :: mine(:), peer(:)
  real(real64), pointer, contiguous :: sendbuf(:), recvbuf(:)
  integer(int64) :: i

  call MPI_Init(ierr)
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank, ierr)
  call MPI_Comm_size(comm, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)

  ! Segments: every rank's, mapped in every rank of the node.
  call hugepool_mpi_segments_create(comm, 8_int64 * n, segs, stat=stat)
  call check(stat == 0 .and. segs%node_size == nranks .and. segs%node_rank == rank, 'segments created on the node')
  call hugepool_view(hugepool_mpi_peer(segs, segs%node_rank), hugepool_mpi_peer_size(segs, segs%node_rank), mine, [n])
  mine = [(rank * 10_int64**9 + i, i = 1, n)]
  call check(on_hugetlb(c_loc(mine(1)), 8_int64 * n), 'own segment on 2 MB hugetlb pages (smaps)')
  call MPI_Barrier(comm, ierr)
  do p = 0, segs%node_size - 1
    call hugepool_view(hugepool_mpi_peer(segs, p), hugepool_mpi_peer_size(segs, p), peer, [n])
    write (msg, '(a,i0)') 'peer segment of node rank ', p
    call check(all(peer == [(p * 10_int64**9 + i, i = 1, n)]), trim(msg) // ': its values')
    call check(on_hugetlb(c_loc(peer(1)), 8_int64 * n), trim(msg) // ': on 2 MB hugetlb pages (smaps)')
  end do
  call MPI_Barrier(comm, ierr)
  ! The halo: each rank stores its last quarter into the first quarter of its right neighbour's segment.
  call hugepool_view(hugepool_mpi_peer(segs, right), hugepool_mpi_peer_size(segs, right), peer, [n])
  peer(1:n / 4) = -mine(3 * n / 4 + 1:)
  call MPI_Barrier(comm, ierr)
  call check(all(mine(1:n / 4) == -[(left * 10_int64**9 + i, i = 3 * n / 4 + 1, n)]), &
    'the left neighbour''s stores arrived in this segment')
  call hugepool_mpi_segments_free(segs, stat=stat)
  call check(stat == 0 .and. segs%node_size == 0, 'segments freed')

  ! hugepool arrays as MPI buffers, reused every iteration.
  do p = 1, 3
    call hugepool_allocate(sendbuf, [1024 * 1024], stat=stat)
    call hugepool_allocate(recvbuf, [1024 * 1024], stat=stat)
    sendbuf = [(real(rank * 1000 + p, real64) + real(i, real64), i = 1, 1024 * 1024)]
    call MPI_Sendrecv(sendbuf, size(sendbuf), MPI_DOUBLE_PRECISION, right, 7, recvbuf, size(recvbuf), &
      MPI_DOUBLE_PRECISION, left, 7, comm, MPI_STATUS_IGNORE, ierr)
    write (msg, '(a,i0)') 'MPI_Sendrecv of 8 MiB hugepool arrays, iteration ', p
    call check(ierr == 0 .and. all(recvbuf == [(real(left * 1000 + p, real64) + real(i, real64), i = 1, 1024 * 1024)]), &
      trim(msg) // ': data')
    call check(on_hugetlb(c_loc(sendbuf(1)), 8_int64 * 1024 * 1024) .and. on_hugetlb(c_loc(recvbuf(1)), &
      8_int64 * 1024 * 1024), trim(msg) // ': on 2 MB hugetlb pages (smaps)')
    call hugepool_deallocate(sendbuf)
    call hugepool_deallocate(recvbuf)
  end do

  ! A segment no pool can cover: ENOMEM in every rank, nothing held, no hang.
  msg = ''
  call hugepool_mpi_segments_create(comm, 64_int64 * 1024**3, segs, stat=stat, errmsg=msg)
  call check(stat == HUGEPOOL_ENOMEM .and. .not. c_associated(segs%impl), 'a 64 GiB segment: HUGEPOOL_ENOMEM in every rank')
  call check(index(msg, 'hugepool_mpi_segments_create: hugepool: cannot allocate') == 1, 'with the reason: ' // trim(msg))

  call MPI_Finalize(ierr)
  call finish()
end program
