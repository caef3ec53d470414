! SPDX-License-Identifier: BSD-3-Clause
! hugepool-halo-fortran: the shape of a halo exchange with the hugepool
! Fortran module.
!
! A 3-D domain has six faces (-x +x -y +y -z +z).  Each face owns a send and
! a receive buffer, allocated once with hugepool_allocate and reused every
! iteration, as a stencil code does around its MPI_Isend/MPI_Irecv.  Here the
! domain is periodic and alone, so what leaves through one face arrives
! through the opposite one; the copy stands in for the network.  Every
! iteration packs new values, "exchanges" them and checks each received face.
! At the end it shows, from /proc/self/smaps, the page size of every buffer.
!
! It uses the pool as it finds it: reserve 16 free 2 MB pages first, e.g.
!   echo 16 > /proc/sys/vm/nr_hugepages     (as root)
! Build: gfortran halo.f90 $(pkg-config --cflags --libs hugepool-fortran)
program halo
  use, intrinsic :: iso_c_binding, only: c_loc, c_ptr, c_intptr_t
  use, intrinsic :: iso_fortran_env, only: int64, real64, output_unit, error_unit
  use hugepool
  implicit none
  integer, parameter :: faces = 6, n = 512 * 512, iterations = 50 ! 2 MiB of real64 a buffer
  character(2), parameter :: face_name(faces) = ['-x', '+x', '-y', '+y', '-z', '+z']
  type :: buffer
    real(real64), pointer, contiguous :: v(:) => null()
  end type
  type(buffer) :: send(faces), recv(faces)
  integer :: f, it, i, ierr, dir, not_huge
  integer(int64) :: bad, page_kb, hugetlb_kb
  character(256) :: why

  do f = 1, faces
    call hugepool_allocate(send(f)%v, [n], stat=ierr, errmsg=why)
    if (ierr == 0) call hugepool_allocate(recv(f)%v, [n], stat=ierr, errmsg=why)
    if (ierr /= 0) then
      write (error_unit, '(a)') 'hugepool-halo-fortran: 12 buffers of 2 MiB do not fit in the pool: ' // trim(why)
      stop 1
    end if
  end do

  bad = 0
  do it = 0, iterations - 1
    do f = 1, faces ! pack
      send(f)%v = [(value(it, f, i), i = 1, n)]
    end do
    do f = 1, faces ! the periodic neighbour's face arrives
      recv(opposite(f))%v = send(f)%v
    end do
    do f = 1, faces ! unpack and check
      bad = bad + count(recv(f)%v /= [(value(it, opposite(f), i), i = 1, n)])
    end do
  end do
  write (output_unit, '(i0,a,i0,a,i0,a)') iterations, ' iterations over ', faces, ' faces: ', bad, ' wrong values'

  not_huge = 0
  write (output_unit, '(a)') 'buffer    address           KernelPageSize  Private_Hugetlb  (from /proc/self/smaps)'
  do f = 1, faces
    do dir = 1, 2
      if (dir == 1) then
        call page_view(c_loc(send(f)%v(1)), page_kb, hugetlb_kb)
      else
        call page_view(c_loc(recv(f)%v(1)), page_kb, hugetlb_kb)
      end if
      if (page_kb /= 2048 .or. hugetlb_kb < 2048) not_huge = not_huge + 1
      write (output_unit, '(a,1x,a,3x,a,t35,i6,a,t50,i8,a)') face_name(f), merge('send', 'recv', dir == 1), &
        hex(address(merge(c_loc(send(f)%v(1)), c_loc(recv(f)%v(1)), dir == 1))), page_kb, ' kB', hugetlb_kb, ' kB'
    end do
  end do

  do f = 1, faces ! back to hugepool's cache
    call hugepool_deallocate(send(f)%v)
    call hugepool_deallocate(recv(f)%v)
  end do
  if (bad /= 0 .or. not_huge /= 0) stop 1

contains

  integer function opposite(f)
    integer, intent(in) :: f
    opposite = f + 1 - 2 * modulo(f - 1, 2)
  end function

  ! The value at index i of face f sent in iteration it.
  real(real64) function value(it, f, i)
    integer, intent(in) :: it, f, i
    value = it * 1d7 + f * 1d6 + real(modulo(i, 999983), real64)
  end function

  ! 0x and the lower-case hex digits of a.
  function hex(a) result(s)
    integer(int64), intent(in) :: a
    character(:), allocatable :: s
    character(18) :: buf
    integer :: k
    write (buf, '(z0)') a
    do k = 1, len_trim(buf)
      if (buf(k:k) >= 'A' .and. buf(k:k) <= 'F') buf(k:k) = achar(iachar(buf(k:k)) + 32)
    end do
    s = '0x' // trim(buf)
  end function

  integer(int64) function address(p)
    type(c_ptr), intent(in) :: p
    address = int(transfer(p, 0_c_intptr_t), int64)
  end function

  ! KernelPageSize and Private_Hugetlb (kB) of the /proc/self/smaps entry holding p.
  subroutine page_view(p, page_kb, hugetlb_kb)
    type(c_ptr), intent(in) :: p
    integer(int64), intent(out) :: page_kb, hugetlb_kb
    character(512) :: line
    integer :: u, ios, dash, space
    integer(int64) :: lo, hi, a
    logical :: inside
    a = address(p)
    page_kb = -1
    hugetlb_kb = -1
    inside = .false.
    open (newunit=u, file='/proc/self/smaps', action='read', iostat=ios)
    if (ios /= 0) return
    do
      read (u, '(a)', iostat=ios) line
      if (ios /= 0) exit
      dash = index(line, '-')
      space = index(line, ' ')
      if (dash > 1 .and. dash < space .and. index(line(1:space), ':') == 0) then ! "lo-hi perms ..."
        read (line(1:dash - 1), '(z16)') lo
        read (line(dash + 1:space - 1), '(z16)') hi
        inside = a >= lo .and. a < hi
      else if (inside .and. line(1:15) == 'KernelPageSize:') then
        read (line(16:), *) page_kb
      else if (inside .and. line(1:16) == 'Private_Hugetlb:') then
        read (line(17:), *) hugetlb_kb
      end if
    end do
    close (u)
  end subroutine
end program halo
