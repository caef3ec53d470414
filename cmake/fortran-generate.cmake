# SPDX-License-Identifier: BSD-3-Clause
# Writes the specific procedures behind the generic names of the Fortran
# modules: one per element type, rank and extent kind, so that a user calls
# hugepool_allocate(a, [n1, n2]) for any of them.  Run at configure time
# (hugepool_fortran_generate), so the generated text is in the build tree
# only and never drifts from this one description.
#
# Element types: name, declaration, bytes.
set(HUGEPOOL_F_TYPES
  "real32|real(real32)|4"
  "real64|real(real64)|8"
  "complex64|complex(real32)|8"
  "complex128|complex(real64)|16"
  "int32|integer(int32)|4"
  "int64|integer(int64)|8")
set(HUGEPOOL_F_MAX_RANK 3)

# _dims(R) -> ":,:,:"    _first(R) -> "lbound(a,1),lbound(a,2),..."
function(_hp_rank_text rank dims_var first_var)
  set(d "")
  set(f "")
  foreach(i RANGE 1 ${rank})
    if(i GREATER 1)
      string(APPEND d ",")
      string(APPEND f ",")
    endif()
    string(APPEND d ":")
    string(APPEND f "lbound(a,${i})")
  endforeach()
  set(${dims_var} "${d}" PARENT_SCOPE)
  set(${first_var} "${f}" PARENT_SCOPE)
endfunction()

# Sets, in the caller:
#   HUGEPOOL_F_GENERICS  the module procedure lists of the generic interfaces
#   HUGEPOOL_F_PROCS     the procedures
function(hugepool_fortran_generate)
  set(alloc "")
  set(dealloc "")
  set(view "")
  set(procs "")
  foreach(t IN LISTS HUGEPOOL_F_TYPES)
    string(REPLACE "|" ";" t "${t}")
    list(GET t 0 name)
    list(GET t 1 decl)
    list(GET t 2 bytes)
    foreach(r RANGE 1 ${HUGEPOOL_F_MAX_RANK})
      _hp_rank_text(${r} dims first)
      set(s "${name}_${r}")
      string(APPEND alloc "    module procedure hp_allocate_${s}, hp_allocate_${s}_i4\n")
      string(APPEND dealloc "    module procedure hp_deallocate_${s}\n")
      string(APPEND view "    module procedure hp_view_${s}, hp_view_${s}_i4\n")
      string(APPEND procs "
  ! ---- ${decl}, rank ${r}
  subroutine hp_allocate_${s}(a, shape, stat, errmsg, zero)
    ${decl}, pointer, intent(inout) :: a(${dims})
    integer(int64), intent(in) :: shape(${r})
    integer, intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    logical, intent(in), optional :: zero
    type(c_ptr) :: p
    integer :: err
    p = hp_allocate_bytes(shape, ${bytes}_int64, err, stat, errmsg, zero)
    if (err /= 0) then
      nullify(a)
    else
      call c_f_pointer(p, a, max(shape, 0_int64))
    end if
  end subroutine
  subroutine hp_allocate_${s}_i4(a, shape, stat, errmsg, zero)
    ${decl}, pointer, intent(inout) :: a(${dims})
    integer(int32), intent(in) :: shape(${r})
    integer, intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    logical, intent(in), optional :: zero
    call hp_allocate_${s}(a, int(shape, int64), stat, errmsg, zero)
  end subroutine
  subroutine hp_deallocate_${s}(a, stat, errmsg)
    ${decl}, pointer, intent(inout) :: a(${dims})
    integer, intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer :: err
    if (.not. associated(a)) then
      call hp_free_checked(c_null_ptr, 0_int64, .false., err, stat, errmsg)
    else if (size(a, kind=int64) == 0) then
      call hp_free_checked(c_null_ptr, 0_int64, .true., err, stat, errmsg)
    else
      call hp_free_checked(c_loc(a(${first})), size(a, kind=int64) * ${bytes}_int64, .true., err, stat, errmsg)
    end if
    if (err == 0) nullify(a)
  end subroutine
  subroutine hp_view_${s}(addr, bytes, a, shape, stat, errmsg)
    type(c_ptr), intent(in) :: addr
    integer(int64), intent(in) :: bytes
    ${decl}, pointer, intent(inout) :: a(${dims})
    integer(int64), intent(in) :: shape(${r})
    integer, intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer :: err
    call hp_view_check(addr, bytes, shape, ${bytes}_int64, err, stat, errmsg)
    if (err /= 0) then
      nullify(a)
    else
      call c_f_pointer(addr, a, max(shape, 0_int64))
    end if
  end subroutine
  subroutine hp_view_${s}_i4(addr, bytes, a, shape, stat, errmsg)
    type(c_ptr), intent(in) :: addr
    integer(int64), intent(in) :: bytes
    ${decl}, pointer, intent(inout) :: a(${dims})
    integer(int32), intent(in) :: shape(${r})
    integer, intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call hp_view_${s}(addr, bytes, a, int(shape, int64), stat, errmsg)
  end subroutine
")
    endforeach()
  endforeach()
  set(HUGEPOOL_F_ALLOCATE_PROCS "${alloc}" PARENT_SCOPE)
  set(HUGEPOOL_F_DEALLOCATE_PROCS "${dealloc}" PARENT_SCOPE)
  set(HUGEPOOL_F_VIEW_PROCS "${view}" PARENT_SCOPE)
  set(HUGEPOOL_F_PROCS "${procs}" PARENT_SCOPE)
endfunction()
