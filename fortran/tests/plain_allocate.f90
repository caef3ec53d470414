! SPDX-License-Identifier: BSD-3-Clause
! A Fortran program that knows nothing of hugepool: a plain ALLOCATE of a
! 64 MiB array, and the kernel's view of where it landed.
program plain_allocate
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, output_unit
  use hp_test, only: smaps_kb
  implicit none
  real(real64), allocatable, target :: x(:)
  integer :: i
  real(real64) :: n
  allocate(x(8 * 1024 * 1024))
  x = [(real(i, real64), i = 1, size(x))]
  n = real(size(x), real64)
  write (output_unit, '(a,i0,a,i0,a,i0)') 'page_kb ', smaps_kb(c_loc(x(1)), 'KernelPageSize'), &
    ' hugetlb_kb ', smaps_kb(c_loc(x(1)), 'Private_Hugetlb'), ' sum_ok ', merge(1, 0, sum(x) == 0.5_real64 * n * (n + 1))
  deallocate(x)
end program
