# SPDX-License-Identifier: BSD-3-Clause
# Makes a private copy of Debian's libjemalloc_pic.a for the preload:
#   cmake -DARCHIVE=.../libjemalloc_pic.a -DOUT=.../libhugepool_jemalloc.a
#         -DAR=ar -DNM=nm -DOBJCOPY=objcopy -P jemalloc-private.cmake
# 1. the C objects only (jemalloc_cpp's operator new/delete would need a C++
#    runtime, and the preload already covers them through malloc/free);
# 2. every symbol they define is renamed hpje_<name> (from nm --defined-only,
#    so undefined references to libc stay as they are): jemalloc's malloc,
#    free, mallocx ... cannot meet the program's or the preload's own;
# 3. nine libc and libm references are sent to the preload's glue (preload/small-heap.c):
#    secure_getenv and readlink (so MALLOC_CONF and /etc/malloc.conf, meant
#    for the program's allocator, never configure this one), dlsym (jemalloc
#    looks up pthread_create with it at start-up; dlsym may call calloc, which
#    is the preload's), and the unwinder and libm's log, exp and round (heap
#    profiling only: never enabled; and no libgcc_s or libm dependency: libm
#    alone cost every exec 0.13 ms); and madvise and mprotect, which would
#    bind to the preload's own exports (preload/protect.c: a registry
#    lookup in the core, from inside jemalloc under its locks), go straight
#    to the kernel: jemalloc calls them on its own metadata mappings alone
#    (the heap's extents come from hooks with no purge: heap-chunks.c);
# 4. jemalloc's constructor is dropped (.init_array): it would start jemalloc
#    in every process; the preload starts it only in small-heap mode;
# 5. the glibc names newer than 2.17 that it calls (pthread_create ...) are
#    named at their oldest version, weakly, as lib/libc-floor.h (FLOOR) names
#    them for the preload's own code: a preloaded process then loads under
#    glibc 2.17 and later (ARCH: the version names differ by architecture);
# 6. jemalloc's thread data (je_tsd_tls, initial-exec TLS) becomes an
#    undefined reference to hugepool_small_heap_tsd, which the interposer
#    defines (preload/small-heap-core.c) with the initial bytes written to
#    TSD_HEADER: libhugepool_small_heap.so, loaded with dlopen, then has no
#    TLS block of its own, which glibc could not place (its static TLS
#    reserve for dlopen is smaller than jemalloc's 2.6 KB).  UNDEFINE is
#    cmake/elf-undefine.c, built for this.
# Fails (FATAL_ERROR) if any step does not do what it should.
cmake_minimum_required(VERSION 3.16)
foreach(v ARCHIVE OUT AR NM OBJCOPY FLOOR ARCH UNDEFINE TSD_HEADER)
  if(NOT ${v})
    message(FATAL_ERROR "jemalloc-private.cmake: ${v} not set")
  endif()
endforeach()
foreach(v READELF OBJDUMP) # optional: the toolchain's, else the host's
  if(NOT ${v})
    string(TOLOWER ${v} ${v})
  endif()
endforeach()
get_filename_component(_dir "${OUT}" DIRECTORY)
set(_work "${_dir}/objects")
file(REMOVE_RECURSE "${_work}")
file(MAKE_DIRECTORY "${_work}")

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${_work}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "jemalloc-private: '${ARGN}' failed (${rc}): ${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

run("${AR}" x "${ARCHIVE}")
file(GLOB _objs RELATIVE "${_work}" "${_work}/*.o")
list(FILTER _objs EXCLUDE REGEX "jemalloc_cpp")
list(LENGTH _objs _n)
if(_n LESS 10)
  message(FATAL_ERROR "jemalloc-private: only ${_n} objects in ${ARCHIVE}")
endif()
list(SORT _objs)

# Defined global symbols (nm types in upper case: T D B R V W ...).
run("${NM}" --defined-only -g -P ${_objs})
string(REPLACE "\n" ";" _lines "${run_out}")
set(_map "")
set(_names "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^([^ :]+) [A-Z] ")
    list(APPEND _names "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _names)
if(NOT "je_tsd_tls" IN_LIST _names)
  message(FATAL_ERROR "jemalloc-private: ${ARCHIVE} defines no 'je_tsd_tls': not jemalloc 5 with TLS?")
endif()
foreach(_name IN LISTS _names)
  if(_name STREQUAL "je_tsd_tls")
    string(APPEND _map "je_tsd_tls hugepool_small_heap_tsd\n") # 6.
  else()
    string(APPEND _map "${_name} hpje_${_name}\n")
  endif()
endforeach()
foreach(_name malloc free mallocx dallocx mallctl)
  if(NOT _name IN_LIST _names)
    message(FATAL_ERROR "jemalloc-private: ${ARCHIVE} defines no '${_name}': not jemalloc 5?")
  endif()
endforeach()
string(APPEND _map "secure_getenv hpl_je_secure_getenv\nreadlink hpl_je_readlink\ndlsym hpl_je_dlsym\n")
string(APPEND _map "_Unwind_Backtrace hpl_je_unwind_backtrace\n_Unwind_GetIP hpl_je_unwind_get_ip\n")
string(APPEND _map "log hpl_je_log\nexp hpl_je_exp\nround hpl_je_round\n")
string(APPEND _map "madvise hpl_je_madvise\nmprotect hpl_je_mprotect\n")
# 5.: X(name, HP_LIBC_V0) lines of libc-floor.h, but the names sent to glue above.
if(ARCH MATCHES "^(x86_64|AMD64|amd64)$")
  set(_v0 "GLIBC_2.2.5")
  set(_v12 "GLIBC_2.12")
  set(_v34 "GLIBC_2.3.4")
elseif(ARCH MATCHES "^(aarch64|arm64)$")
  set(_v0 "GLIBC_2.17")
  set(_v12 "GLIBC_2.17")
  set(_v34 "GLIBC_2.17")
else() # (libc-floor.h names none there either: the build's own versions)
  set(_v0 "")
  message(STATUS "jemalloc-private: no oldest glibc versions known for ${ARCH}: names left as they are")
endif()
file(READ "${FLOOR}" _floor_text) # (its lines end in backslashes: not a CMake list)
string(REGEX MATCHALL "X\\([a-z_0-9]+, HP_LIBC_V[0-9]+\\)" _floor "${_floor_text}")
set(_weak "")
if(NOT _v0)
  set(_floor "")
endif()
foreach(_line IN LISTS _floor)
  string(REGEX MATCH "X\\(([a-z_0-9]+), HP_LIBC_V(0|12|34)\\)" _m "${_line}")
  if(NOT _m)
    message(FATAL_ERROR "jemalloc-private: ${FLOOR}: '${_line}' names no version this script knows")
  endif()
  set(_name "${CMAKE_MATCH_1}")
  set(_ver "${_v${CMAKE_MATCH_2}}")
  if(_map MATCHES "(^|\n)${_name} ")
    continue()
  endif()
  string(APPEND _map "${_name} ${_name}@${_ver}\n")
  list(APPEND _weak "--weaken-symbol=${_name}@${_ver}")
endforeach()
list(LENGTH _weak _nweak)
if(_v0 AND _nweak LESS 10)
  message(FATAL_ERROR "jemalloc-private: only ${_nweak} names read from ${FLOOR}")
endif()
file(WRITE "${_dir}/redefine.syms" "${_map}")

foreach(_obj IN LISTS _objs)
  run("${OBJCOPY}" --redefine-syms=${_dir}/redefine.syms --remove-section=.init_array
      --remove-section=.rela.init_array "${_obj}")
  if(_weak)
    run("${OBJCOPY}" ${_weak} "${_obj}")
  endif()
endforeach()

# 6. The object that defines the thread data: its .tdata holds that alone.
set(_tsd_obj "")
foreach(_obj IN LISTS _objs)
  run("${READELF}" -s -W "${_obj}")
  string(REGEX MATCHALL "[^\n]* TLS [^\n]*" _tls "${run_out}")
  foreach(_line IN LISTS _tls)
    if(_line MATCHES " UND hugepool_small_heap_tsd$")
      continue()
    elseif(_line MATCHES ": 0+ +([0-9]+) TLS +GLOBAL +[A-Z]+ +[0-9]+ hugepool_small_heap_tsd$")
      set(_tsd_obj "${_obj}")
      set(_tsd_size "${CMAKE_MATCH_1}")
    else()
      message(FATAL_ERROR "jemalloc-private: ${_obj}: thread-local data other than je_tsd_tls: ${_line}")
    endif()
  endforeach()
endforeach()
if(NOT _tsd_obj)
  message(FATAL_ERROR "jemalloc-private: no object defines je_tsd_tls at the start of its .tdata")
endif()
run("${READELF}" -S -W "${_tsd_obj}")
if(run_out MATCHES "\\.rela?\\.tdata") # an initializer the loader relocates: the bytes alone would be wrong
  message(FATAL_ERROR "jemalloc-private: ${_tsd_obj}: je_tsd_tls's initial value has relocations")
endif()
run("${OBJDUMP}" -h "${_tsd_obj}")
string(REGEX MATCH "\\.tdata +([0-9a-f]+) +[0-9a-f]+ +[0-9a-f]+ +[0-9a-f]+ +2\\*\\*([0-9]+)" _m "${run_out}")
set(_sec_hex "${CMAKE_MATCH_1}")
set(_lg_align "${CMAKE_MATCH_2}")
if(NOT _m OR run_out MATCHES "\\.tbss")
  message(FATAL_ERROR "jemalloc-private: ${_tsd_obj}: no .tdata, or a .tbss too")
endif()
math(EXPR _sec_size "0x${_sec_hex}" OUTPUT_FORMAT DECIMAL)
math(EXPR _align "1 << ${_lg_align}")
if(NOT _sec_size EQUAL _tsd_size)
  message(FATAL_ERROR "jemalloc-private: ${_tsd_obj}: .tdata (${_sec_size} bytes) is not je_tsd_tls (${_tsd_size})")
endif()
run("${OBJCOPY}" -O binary --only-section=.tdata "${_tsd_obj}" "${_dir}/tsd.bin")
file(READ "${_dir}/tsd.bin" _hex HEX)
string(LENGTH "${_hex}" _hex_len)
math(EXPR _bin_size "${_hex_len} / 2")
if(NOT _bin_size EQUAL _tsd_size)
  message(FATAL_ERROR "jemalloc-private: ${_tsd_obj}: read ${_bin_size} bytes of .tdata, not ${_tsd_size}")
endif()
set(_bytes "")
math(EXPR _last "${_hex_len} - 1")
foreach(_at RANGE 0 ${_last} 32) # 16 bytes a line
  string(SUBSTRING "${_hex}" ${_at} 32 _line)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _line "${_line}")
  string(APPEND _bytes "  ${_line} \\\n")
endforeach()
file(WRITE "${TSD_HEADER}" "/* Generated by cmake/jemalloc-private.cmake from ${ARCHIVE}: the initial\n"
  " * bytes of jemalloc's thread data (je_tsd_tls), defined by the interposer\n"
  " * as hugepool_small_heap_tsd (preload/small-heap-core.c). */\n"
  "#define HP_JEMALLOC_TSD_SIZE ${_tsd_size}\n#define HP_JEMALLOC_TSD_ALIGN ${_align}\n"
  "#define HP_JEMALLOC_TSD_INIT { \\\n${_bytes}}\n")
run("${UNDEFINE}" "${_tsd_obj}" hugepool_small_heap_tsd)
run("${OBJCOPY}" --remove-section=.tdata "${_tsd_obj}")

# Checks: nothing the program could call, no constructor left, no TLS block.
run("${NM}" --defined-only -g -P ${_objs})
if(run_out MATCHES "(^|\n)(malloc|free|calloc|realloc|mallocx|mallctl|je_[a-z_0-9]*) ")
  message(FATAL_ERROR "jemalloc-private: '${CMAKE_MATCH_2}' still defined after renaming")
endif()
run("${NM}" --undefined-only -P ${_objs})
if(run_out MATCHES "(^|\n)(secure_getenv|readlink|dlsym|_Unwind_Backtrace|_Unwind_GetIP|log|exp|round|madvise|mprotect|malloc|free) ")
  message(FATAL_ERROR "jemalloc-private: undefined '${CMAKE_MATCH_2}' left")
endif()
foreach(_obj IN LISTS _objs)
  run("${OBJDUMP}" -h "${_obj}")
  if(run_out MATCHES "init_array|\\.ctors")
    message(FATAL_ERROR "jemalloc-private: ${_obj} still has a constructor")
  endif()
  if(run_out MATCHES "\\.tdata|\\.tbss")
    message(FATAL_ERROR "jemalloc-private: ${_obj} still has thread-local data of its own")
  endif()
endforeach()

file(REMOVE "${OUT}")
run("${AR}" qc "${OUT}" ${_objs})
message(STATUS "jemalloc-private: ${_n} objects of ${ARCHIVE}, symbols renamed hpje_*")
