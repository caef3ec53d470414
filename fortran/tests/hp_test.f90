! SPDX-License-Identifier: BSD-3-Clause
! What the Fortran tests share: the kernel's view of an address (smaps) and
! of the pool (meminfo), and a check that counts failures.
module hp_test
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64, output_unit
  implicit none
  integer :: failures = 0
  interface
    function c_smaps_kb(addr, key) bind(C, name='hp_test_smaps_kb') result(kb)
      import :: c_ptr, c_char, c_long
      type(c_ptr), value :: addr
      character(kind=c_char), intent(in) :: key(*)
      integer(c_long) :: kb
    end function
    function hugetlb_pages_c() bind(C, name='hp_test_hugetlb_pages') result(v)
      import :: c_long
      integer(c_long) :: v
    end function
    function c_meminfo(key) bind(C, name='hp_test_meminfo') result(v)
      import :: c_char, c_long
      character(kind=c_char), intent(in) :: key(*)
      integer(c_long) :: v
    end function
  end interface
contains
  ! The smaps field `key` (kB) of the mapping that holds addr; -1 if none.
  function smaps_kb(addr, key) result(kb)
    type(c_ptr), intent(in) :: addr
    character(*), intent(in) :: key
    integer(int64) :: kb
    kb = int(c_smaps_kb(addr, key // c_null_char), int64)
  end function
  ! Free 2 MB pages in the kernel's pool (meminfo HugePages_Free - Rsvd).
  function kernel_free_pages() result(n)
    integer(int64) :: n
    n = int(c_meminfo('HugePages_Free' // c_null_char) - c_meminfo('HugePages_Rsvd' // c_null_char), int64)
  end function
  ! 2 MB pages this process maps (/proc/self/status HugetlbPages).
  function hugetlb_pages() result(n)
    integer(int64) :: n
    n = int(hugetlb_pages_c(), int64)
  end function
  ! True when the mapping at addr is on 2 MB hugetlb pages holding at least `bytes`.
  function on_hugetlb(addr, bytes) result(ok)
    type(c_ptr), intent(in) :: addr
    integer(int64), intent(in) :: bytes
    logical :: ok
    ok = smaps_kb(addr, 'KernelPageSize') == 2048 .and. &
      smaps_kb(addr, 'Private_Hugetlb') + smaps_kb(addr, 'Shared_Hugetlb') >= bytes / 1024
  end function
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (ok) then
      write (output_unit, '(a,a)') 'ok   ', what
    else
      write (output_unit, '(a,a)') 'FAIL ', what
      failures = failures + 1
    end if
    flush (output_unit)
  end subroutine
  subroutine finish()
    if (failures /= 0) then
      write (output_unit, '(i0,a)') failures, ' checks failed'
      error stop 1
    end if
    write (output_unit, '(a)') 'all checks passed'
  end subroutine
end module hp_test
