! SPDX-License-Identifier: BSD-3-Clause
! The hugepool module with gfortran, checked from the kernel's view
! (/proc/self/smaps, /proc/meminfo).  Run with a pool of exactly 600 free
! 2 MB pages (tests/preload/with-pool).  Modes:
!   (none)  every kind and rank, reuse, zeroing, errors, a 1.1 GB array,
!           trim, policy, page size, statistics, segments
!   stop    an allocation the pool cannot cover, without stat=: ERROR STOP
!           with hugepool's reason (the test script checks the exit and text)
program alloc
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64, output_unit
  use hugepool
  use hp_test
  implicit none
  character(32) :: mode
  integer :: ierr
  character(512) :: msg
  real(real64), pointer :: a(:), b(:), big(:,:,:), sec(:)
  integer(int32), pointer :: z(:), empty(:,:)
  type(c_ptr) :: first
  integer(int64) :: free0, n  ! free0: pages this process mapped at its start
  type(hugepool_stats) :: st
  type(hugepool_segment) :: seg, peer
  integer(int32), pointer :: sv(:), pv(:)
  character(:), allocatable :: text

  mode = ''
  if (command_argument_count() > 0) call get_command_argument(1, mode)
  if (mode == 'stop') then
    ! 2 GB from a pool of 600 pages: no stat=, so this must ERROR STOP.
    call hugepool_allocate(a, [256_int64 * 1024 * 1024])
    write (output_unit, '(a)') 'FAIL: the allocation returned'
    stop 3
  end if

  ierr = -1
  free0 = hugetlb_pages()

  call check_all_types()

  ! A freed array is handed out again: the same mapping, no new pages.
  call hugepool_allocate(a, [1024 * 1024], stat=ierr)   ! 8 MiB
  first = c_loc(a(1))
  a = 1.0_real64
  call hugepool_deallocate(a, stat=ierr)
  call check(ierr == 0 .and. .not. associated(a), 'deallocate nullifies')
  n = hugetlb_pages()
  call hugepool_allocate(b, [1024_int64 * 1024], stat=ierr)
  call check(ierr == 0 .and. c_associated(first, c_loc(b(1))), 'the next array of that size is the same mapping')
  call check(hugetlb_pages() == n, 'reuse maps no new page (/proc/self/status)')
  call check(on_hugetlb(c_loc(b(1)), 8_int64 * 1024 * 1024), 'reused array on 2 MB hugetlb pages (smaps)')

  ! zero=.true. clears a reused buffer.
  b = 7.0_real64
  call hugepool_deallocate(b)
  call hugepool_allocate(a, [1024 * 1024], stat=ierr, zero=.true.)
  call check(ierr == 0 .and. c_associated(first, c_loc(a(1))) .and. all(a == 0), 'zero=.true. clears a reused array')

  ! A section, or a pointer that is not associated, is refused and nothing is freed.
  sec => a(2:)
  msg = ''
  call hugepool_deallocate(sec, stat=ierr, errmsg=msg)
  call check(ierr == HUGEPOOL_EINVAL .and. associated(sec), 'deallocate of a section: HUGEPOOL_EINVAL')
  call check(index(msg, 'not the start of a live hugepool buffer') > 0, 'deallocate of a section: the reason')
  call check(hugepool_owns(c_loc(a(1))) /= 0 .and. on_hugetlb(c_loc(a(1)), 8_int64 * 1024 * 1024), &
    'the array behind the section is kept')
  ! Sections that start where the array starts: the same address, not the whole array.
  a(1:4) = [1.0_real64, 2.0_real64, 3.0_real64, 4.0_real64]
  sec => a(1:10)
  call hugepool_deallocate(sec, stat=ierr)
  call check(ierr == HUGEPOOL_EINVAL .and. associated(sec), 'deallocate of a(1:10): HUGEPOOL_EINVAL')
  sec => a(1::2)
  call hugepool_deallocate(sec, stat=ierr)
  call check(ierr == HUGEPOOL_EINVAL .and. associated(sec), 'deallocate of a(1::2): HUGEPOOL_EINVAL')
  sec => a(1:size(a) - 1)
  call hugepool_deallocate(sec, stat=ierr)
  call check(ierr == HUGEPOOL_EINVAL, 'deallocate of all but the last element: HUGEPOOL_EINVAL')
  call check(hugepool_owns(c_loc(a(1))) /= 0 .and. all(a(1:4) == [1.0_real64, 2.0_real64, 3.0_real64, 4.0_real64]), &
    'the array behind the sections is kept, with its contents')
  call hugepool_deallocate(a, stat=ierr)
  call check(ierr == 0, 'the whole array is then deallocated')
  call hugepool_deallocate(a, stat=ierr)
  call check(ierr == HUGEPOOL_EINVAL, 'deallocate of a disassociated pointer: HUGEPOOL_EINVAL')

  ! Zero-size and negative extents are zero-size arrays, as with ALLOCATE.
  call hugepool_allocate(empty, [0, 5], stat=ierr)
  call check(ierr == 0 .and. associated(empty) .and. size(empty) == 0, 'a zero-size array')
  call hugepool_deallocate(empty, stat=ierr)
  call check(ierr == 0 .and. .not. associated(empty), 'a zero-size array is deallocated')
  call hugepool_allocate(z, [-3], stat=ierr)
  call check(ierr == 0 .and. size(z) == 0, 'a negative extent is a zero-size array')
  call hugepool_deallocate(z)

  ! A shortage is stat=HUGEPOOL_ENOMEM with the reason, never a crash.
  msg = ''
  call hugepool_allocate(a, [256_int64 * 1024 * 1024], stat=ierr, errmsg=msg)   ! 2 GiB
  call check(ierr == HUGEPOOL_ENOMEM .and. .not. associated(a), 'a shortage: stat = HUGEPOOL_ENOMEM, not associated')
  write (output_unit, '(2a)') '     errmsg: ', trim(msg)
  call check(index(msg, 'cannot allocate 2147483648 bytes') > 0 .and. index(msg, 'free in the pool') > 0, &
    'a shortage: errmsg has the size and the pool''s state')
  call hugepool_allocate(a, [2_int64**61], stat=ierr, errmsg=msg)
  call check(ierr == HUGEPOOL_ENOMEM .and. index(msg, 'overflows') > 0, 'a size past 64 bits: HUGEPOOL_ENOMEM')

  ! Past 1 GB: 1.1 GB in one array, all on hugetlb pages; trim gives it back.
  call hugepool_trim_all()
  call check(hugepool_set_cache_limits(64_c_size_t, 2_c_size_t * 1024**3) == 0, 'cache limits: 64 buffers, 2 GiB')
  n = hugetlb_pages()
  call hugepool_allocate(big, [400, 400, 900], stat=ierr)
  call check(ierr == 0, '1.15 GB rank-3 array allocated')
  big = 1.5_real64
  big(400, 400, 900) = 2.5_real64
  call check(on_hugetlb(c_loc(big(1, 1, 1)), 400_int64 * 400 * 900 * 8), '1.15 GB array on 2 MB hugetlb pages (smaps)')
  call check(hugetlb_pages() - n == 550, '1.15 GB array maps 550 pages (/proc/self/status)')
  call check(sum(big) == 1.5_real64 * (400 * 400 * 900 - 1) + 2.5_real64, '1.15 GB array holds its values')
  call hugepool_deallocate(big)
  call check(hugetlb_pages() - n == 550, 'deallocated: kept in the cache')
  call check(hugepool_trim() >= 400_int64 * 400 * 900 * 8, 'hugepool_trim releases it')
  call check(hugetlb_pages() == n, 'after trim the pages are unmapped (/proc/self/status)')

  ! Policy: with thp a shortage is served on other pages, and counted.
  call check(hugepool_get_policy() == HUGEPOOL_POLICY_STRICT, 'the default policy is strict')
  call check(hugepool_set_policy(HUGEPOOL_POLICY_THP) == 0, 'set policy thp')
  call check(hugepool_policy_name(hugepool_get_policy()) == 'thp', 'policy name thp')
  call hugepool_allocate(a, [160_int64 * 1024 * 1024], stat=ierr)   ! 1.25 GiB
  call check(ierr == 0, 'policy thp: a shortage is served')
  a(1) = 1
  call check(smaps_kb(c_loc(a(1)), 'KernelPageSize') == 4 .and. hugepool_kind_of(c_loc(a(1))) == HUGEPOOL_KIND_THP, &
    'policy thp: the array is not on hugetlb pages (smaps)')
  call hugepool_get_stats(st)
  call check(st%fallbacks_thp >= 1, 'policy thp: the fallback is counted')
  call hugepool_deallocate(a)
  call check(hugepool_set_policy(7) /= 0, 'an unknown policy is refused')
  call check(hugepool_set_policy(HUGEPOOL_POLICY_STRICT) == 0, 'set policy strict')

  ! Page size.
  call check(hugepool_get_page_size() == HUGEPOOL_2MB, 'the page size is 2 MB')
  call check(hugepool_set_page_size(3_int64 * 1024 * 1024) /= 0, 'a 3 MB page size is refused')
  call check(hugepool_set_page_size(HUGEPOOL_2MB) == 0, 'set the page size to 2 MB')

  ! Statistics.
  call hugepool_allocate(a, [1024 * 1024], stat=ierr)
  call hugepool_get_stats(st)
  call check(st%live_buffers == 1 .and. st%bytes_live == 8 * 1024 * 1024, 'statistics: one live 8 MiB buffer')
  text = hugepool_stats_string()
  call check(len(text) > 0 .and. index(text, 'alloc') > 0, 'statistics as text')
  text = hugepool_stats_string(json=.true.)
  call check(text(1:1) == '{' .and. index(text, '"live_buffers"') > 0, 'statistics as JSON')
  n = kernel_free_pages()
  call check(abs(hugepool_pool_free_pages(HUGEPOOL_ANY_NODE) - n) <= abs(kernel_free_pages() - n), &
    'hugepool_pool_free_pages agrees with meminfo')
  call hugepool_deallocate(a)
  deallocate(text)

  ! A segment, viewed as an array, mapped a second time from its handle.
  call hugepool_segment_create(seg, 4_int64 * 1024 * 1024, stat=ierr)
  call check(ierr == 0 .and. seg%size == 4 * 1024 * 1024, 'a 4 MiB segment')
  call hugepool_view(seg%addr, int(seg%size, int64), sv, [1024 * 1024], stat=ierr)
  call check(ierr == 0 .and. size(sv) == 1024 * 1024, 'the segment viewed as int32(1048576)')
  sv = [(int(n, int32), n = 1, 1024 * 1024)]
  call check(on_hugetlb(seg%addr, 4_int64 * 1024 * 1024), 'the segment on 2 MB hugetlb pages (smaps)')
  call hugepool_view(seg%addr, int(seg%size, int64), pv, [1024 * 1024 + 1], stat=ierr)
  call check(ierr == HUGEPOOL_EINVAL .and. .not. associated(pv), 'a view larger than the segment is refused')
  call hugepool_segment_map(peer, seg%handle, stat=ierr)
  call check(ierr == 0 .and. .not. c_associated(peer%addr, seg%addr), 'the segment mapped again from its handle')
  call hugepool_view(peer%addr, int(peer%size, int64), pv, [1024 * 1024])
  call check(all(pv == sv), 'the second mapping shows the same data')
  call hugepool_segment_unmap(peer, stat=ierr)
  call hugepool_segment_unmap(seg, stat=ierr)
  call check(ierr == 0, 'segments unmapped')

  call hugepool_trim_all()
  call check(hugetlb_pages() == free0, 'after trim this process maps no more pages than at its start')
  call finish()

contains
  subroutine hugepool_trim_all()
    integer(c_size_t) :: released
    released = hugepool_trim()
  end subroutine
  include 'types.inc'
end program alloc
