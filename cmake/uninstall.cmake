# SPDX-License-Identifier: BSD-3-Clause
# `cmake --build BUILD --target uninstall`: removes every file the last
# `cmake --install BUILD` put in place (install_manifest.txt), then the
# directories that removal left empty under the prefix.  Nothing else: a file
# the install did not write is never touched, and a missing one is reported.
# The prefix is the directory every listed file shares (an install with
# --prefix elsewhere is undone as well); no directory above it is removed.
if(NOT HUGEPOOL_MANIFEST)
  set(HUGEPOOL_MANIFEST "${HUGEPOOL_BINARY_DIR}/install_manifest.txt")
endif()
set(_manifest "${HUGEPOOL_MANIFEST}")
if(NOT EXISTS "${_manifest}")
  message(FATAL_ERROR "uninstall: ${_manifest} not found: nothing was installed from this build "
                      "(run cmake --install first)")
endif()
file(STRINGS "${_manifest}" _files)
list(GET _files 0 _prefix)
foreach(f IN LISTS _files)
  string(FIND "${f}" "${_prefix}/" _at)
  while(NOT _at EQUAL 0 AND NOT _prefix STREQUAL "/")
    get_filename_component(_prefix "${_prefix}" DIRECTORY)
    string(FIND "${f}" "${_prefix}/" _at)
  endwhile()
endforeach()
set(_dirs "")
foreach(f IN LISTS _files)
  if(IS_SYMLINK "${f}" OR EXISTS "${f}")
    file(REMOVE "${f}")
    message(STATUS "removed ${f}")
    get_filename_component(_d "${f}" DIRECTORY)
    list(APPEND _dirs "${_d}")
  else()
    message(STATUS "not there: ${f}")
  endif()
endforeach()
# Empty directories, deepest first, never above the prefix.
list(REMOVE_DUPLICATES _dirs)
list(SORT _dirs ORDER DESCENDING)
foreach(d IN LISTS _dirs)
  while(IS_DIRECTORY "${d}")
    string(FIND "${d}" "${_prefix}/" _at)
    if(NOT _at EQUAL 0)
      break()
    endif()
    file(GLOB _left "${d}/*" "${d}/.*")
    if(_left)
      break()
    endif()
    file(REMOVE_RECURSE "${d}") # empty: checked just above
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
endforeach()
file(REMOVE "${_manifest}")
