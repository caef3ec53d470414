# SPDX-License-Identifier: BSD-3-Clause
# The layers of lib/, kept by their include lines (lib/README.md):
#  1. preload/ includes of lib/ only hooks.h (what the preload sees of the core);
#  2. mpi/ includes of lib/ only option-reader.h (the preload's option reader);
#  3. the OS layer (os.c, os-file.c, os.h) includes of lib/ only os.h;
#  4. a header of lib/ includes only headers of a lower level (the table below).
# A quoted include naming a file of lib/ counts, with or without a path.
#   cmake -DROOT=<source dir> -P layers.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P layers.cmake")
endif()

# The level of each header of lib/: a header may include only lower ones.
set(level_os.h 0)
set(level_spin.h 0)
set(level_size.h 0)
set(level_option-reader.h 0)
set(level_warn.h 1)
set(level_options.h 1)
set(level_init.h 1)
set(level_launcher.h 1)
set(level_base.h 2)
set(level_registry.h 3)
set(level_cache.h 3)
set(level_tcache.h 3)
set(level_share.h 3)
set(level_split.h 3)
set(level_fork.h 3)
set(level_stats.h 3)
set(level_alloc.h 4)
set(level_atfork.h 1)
set(level_hooks.h 5)

file(GLOB lib_headers RELATIVE ${ROOT}/lib ${ROOT}/lib/*.h)
set(problems "")

# The lib/ headers that `file` includes, in `out`.
function(lib_includes file out)
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  set(found "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" path "${line}")
    get_filename_component(name "${path}" NAME)
    if(name IN_LIST lib_headers AND NOT path MATCHES "^hugepool/")
      list(APPEND found "${path}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# Every file of `files` includes of lib/ only headers in `allowed`.
function(only files allowed why)
  foreach(file IN LISTS files)
    lib_includes(${file} found)
    foreach(path IN LISTS found)
      if(NOT path IN_LIST allowed)
        file(RELATIVE_PATH rel ${ROOT} ${file})
        list(APPEND problems "${rel} includes \"${path}\": ${why}")
      endif()
    endforeach()
  endforeach()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

file(GLOB preload_files ${ROOT}/preload/*.c ${ROOT}/preload/*.h)
only("${preload_files}" "hooks.h" "preload/ sees the core through hooks.h alone")
file(GLOB mpi_files ${ROOT}/mpi/*.c ${ROOT}/mpi/*.h)
only("${mpi_files}" "option-reader.h" "mpi/ reads options through option-reader.h alone")
only("${ROOT}/lib/os.c;${ROOT}/lib/os-file.c;${ROOT}/lib/os.h" "os.h" "the OS layer includes nothing above it")

foreach(header IN LISTS lib_headers)
  if(NOT DEFINED level_${header})
    list(APPEND problems "lib/${header} has no level in tests/layers.cmake")
    continue()
  endif()
  lib_includes(${ROOT}/lib/${header} found)
  foreach(path IN LISTS found)
    get_filename_component(name "${path}" NAME)
    if(NOT level_${name} LESS level_${header})
      list(APPEND problems "lib/${header} (level ${level_${header}}) includes ${name} (level ${level_${name}})")
    endif()
  endforeach()
endforeach()

if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layers broken:\n  ${text}")
endif()
list(LENGTH lib_headers n)
message(STATUS "layers: ${n} headers of lib/, preload/, mpi/ and the OS layer keep their include rules")
