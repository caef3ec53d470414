! SPDX-License-Identifier: BSD-3-Clause
! A downstream program: a 4 MiB array on hugetlb pages, its kind from hugepool.
program consumer
  use, intrinsic :: iso_c_binding, only: c_loc
  use, intrinsic :: iso_fortran_env, only: real64
  use hugepool
  implicit none
  real(real64), pointer :: a(:, :)
  integer :: ierr
  character(256) :: msg
  call hugepool_allocate(a, [512, 1024], stat=ierr, errmsg=msg)
  if (ierr /= 0) error stop trim(msg)
  a = 1
  print '(a,a,a,f0.1)', 'consumer: kind ', hugepool_kind_name(hugepool_kind_of(c_loc(a(1, 1)))), ' sum ', sum(a)
  call hugepool_deallocate(a)
end program
