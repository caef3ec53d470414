# SPDX-License-Identifier: BSD-3-Clause
# The layers of lib/, kept by their include lines (lib/README.md):
#  1. preload/ includes of lib/ only hooks.h (what the preload sees of the core);
#  2. mpi/ includes of lib/ only option-reader.h (the preload's option reader);
#  3. the OS layer (os.h, os-kernel.h, os.c and os-*.c) includes of lib/
#     only os.h and os-kernel.h, and nothing outside it includes
#     os-kernel.h (the layer's own way to the kernel);
#  4. a header of lib/ includes only headers of a lower level (the table below);
#  5. a source file of lib/ includes only headers of a lower level than its
#     own, besides its own header: nothing below calls up (a call needs a
#     declaration, and -Werror=implicit-function-declaration makes it so).
#     hooks.h, the top, is included below the top only by the files that
#     define what it declares (so the compiler checks one against the other).
#  6. given the core's objects, only api.c's defines or calls a public
#     hugepool_* function: the public API is the top, and it starts the core
#     (hp_ensure_init) before anything below runs.
#  7. given the core's objects, none but the OS layer's (os.c.o, os-*.c.o)
#     references mmap, munmap, mremap, madvise, mprotect, syscall, ioctl,
#     open or pread (nm -u): the include lines cannot show a system call
#     made without a header of lib/, nor one that binds at run time to an
#     interposer's symbol.  And the OS layer's own objects reference neither
#     madvise nor mprotect, which the preload exports (preload/protect.c):
#     inside it they would bind to its own, which calls back into the core
#     (lib/os-kernel.h); but in a sanitizer build (-DSANITIZE=...), whose
#     OS layer goes through libc for the sanitizer to see every call.  The
#     preload's objects (PRELOAD_OBJECTS) reference none of those calls
#     either: they reach the kernel through lib/os.h.
#  8. the OS layer chooses its road to the kernel in writing: every plain
#     munmap, mremap or mmap call in lib/os*.c (libc's, which registration
#     caches hook: os-kernel.h) has a "libc:" comment on its line or in the
#     six lines above; everything else goes through sys_*.
# A quoted include naming a file of lib/ counts, with or without a path.
#   cmake -DROOT=<source dir> [-DNM=nm -DOBJECTS=<a.o|b.o|...> -DSANITIZE=...] -P layers.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P layers.cmake")
endif()

# The level of each header of lib/: a header may include only lower ones.
set(level_os.h 0)
set(level_os-kernel.h 0) # the OS layer's own (rule 3)
set(level_spin.h 0)
set(level_size.h 0)
set(level_option-reader.h 0)
set(level_libc-floor.h 0) # compiled first into the core and the preloaded objects (-include)
set(level_warn.h 1)
set(level_launcher.h 1)
set(level_init.h 1)   # one declaration, defined at the top (init.c)
set(level_atfork.h 1) # one declaration, defined at the top (atfork.c)
set(level_embed.h 1)  # declared below its readers, defined in base.c
set(level_options.h 2)
set(level_base.h 3)
set(level_registry.h 4)
set(level_cache.h 4)
set(level_share.h 4)
set(level_shortage.h 4)
set(level_tcache-entry.h 4) # tcache.c and tcache-all.c alone
set(level_prefault.h 3)
set(level_registrar.h 4)
set(level_tcache.h 5)
set(level_live.h 6)
set(level_release.h 6)
set(level_split.h 7)
set(level_fork.h 8)
set(level_alloc.h 8)
set(level_stats.h 9)
set(level_realloc.h 9)
set(level_segment.h 9)
set(level_hooks.h 10)
set(top 10)

# The level of each source file of lib/: its own header's (the header of
# its name, or named here), unless its level is named here.
set(own_header_option-table.c options.h) # the table options.h describes
set(own_header_tcache-all.c tcache.h)
set(own_header_registrar-gpu.c registrar.h)
set(source_level_init.c ${top})
set(source_level_atfork.c ${top})
set(source_level_api.c ${top})
# These define what hooks.h declares for the preload.
set(defines_hooks base.c alloc.c split.c stats.c api.c)

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
file(GLOB os_layer ${ROOT}/lib/os.c ${ROOT}/lib/os-*.c ${ROOT}/lib/os.h ${ROOT}/lib/os-kernel.h)
only("${os_layer}" "os.h;os-kernel.h" "the OS layer includes nothing above it")
file(GLOB all_lib ${ROOT}/lib/*.c ${ROOT}/lib/*.h)
list(REMOVE_ITEM all_lib ${os_layer})
foreach(file IN LISTS all_lib preload_files mpi_files)
  lib_includes(${file} found)
  if("os-kernel.h" IN_LIST found)
    file(RELATIVE_PATH rel ${ROOT} ${file})
    list(APPEND problems "${rel} includes \"os-kernel.h\": the OS layer's own header")
  endif()
endforeach()

# The lib/ file `file` (level `at`) includes only lower levels, besides its
# own header `own` and, where it defines what hooks.h declares, hooks.h.
function(below file at own hooks_ok)
  if(${ROOT}/lib/${file} IN_LIST os_layer)
    return() # rule 3 holds the OS layer
  endif()
  lib_includes(${ROOT}/lib/${file} found)
  foreach(path IN LISTS found)
    get_filename_component(name "${path}" NAME)
    if(name STREQUAL own OR level_${name} LESS at OR (name STREQUAL "hooks.h" AND hooks_ok))
      continue()
    endif()
    list(APPEND problems "lib/${file} (level ${at}) includes ${name} (level ${level_${name}}): a call up")
  endforeach()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

foreach(header IN LISTS lib_headers)
  if(NOT DEFINED level_${header})
    list(APPEND problems "lib/${header} has no level in cmake/layers.cmake")
    continue()
  endif()
  below(${header} ${level_${header}} "" FALSE)
endforeach()

# Source files: the level of their own header, or the one named above.
file(GLOB lib_sources RELATIVE ${ROOT}/lib ${ROOT}/lib/*.c)
foreach(source IN LISTS lib_sources)
  string(REGEX REPLACE "\\.c$" ".h" own "${source}")
  if(source MATCHES "^os-.*\\.c$")
    set(own os.h) # the OS layer's files share its contract
  endif()
  if(DEFINED own_header_${source})
    set(own ${own_header_${source}})
  endif()
  if(DEFINED source_level_${source})
    set(at ${source_level_${source}})
  elseif(DEFINED level_${own})
    set(at ${level_${own}})
  else()
    list(APPEND problems "lib/${source} has no level in cmake/layers.cmake (no ${own}, no source_level_)")
    continue()
  endif()
  set(hooks_ok FALSE)
  if(source IN_LIST defines_hooks)
    set(hooks_ok TRUE)
  endif()
  below(${source} ${at} ${own} ${hooks_ok})
endforeach()

# Objects: the public functions are defined and called in api.c alone
# (rule 6), and the system calls are made by the OS layer alone (rule 7).
set(kernel_calls "mmap|mmap64|munmap|mremap|madvise|mprotect|syscall|ioctl|open|open64|__open_2|__open64_2|pread|pread64")
string(APPEND kernel_calls "|__pread_chk|__pread64_chk")
# An object's symbols (nm -P) in out; empty, and the failure among the
# problems, if nm fails.
function(object_symbols object out)
  execute_process(COMMAND ${NM} -P ${object} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    set(symbols "")
    set(problems ${problems} "${NM} -P ${object} failed" PARENT_SCOPE)
  endif()
  set(${out} "${symbols}" PARENT_SCOPE)
endfunction()

# The kernel calls (kernel_calls) an object references, in out: "name" each.
function(kernel_calls_of symbols out)
  string(REGEX MATCHALL "(^|\n)(${kernel_calls}) U" calls "${symbols}")
  set(names "")
  foreach(entry IN LISTS calls)
    string(REGEX REPLACE "^\n?([^ ]+) U$" "\\1" call "${entry}")
    list(APPEND names "${call}")
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

if(OBJECTS)
  string(REPLACE "|" ";" objects "${OBJECTS}")
  foreach(object IN LISTS objects)
    get_filename_component(name "${object}" NAME)
    object_symbols("${object}" symbols)
    if(NOT symbols)
      continue()
    endif()
    set(used "")
    if(NOT name MATCHES "^api\\.c\\.o(bj)?$")
      string(REGEX MATCHALL "(^|\n)hugepool_[a-z0-9_]+ [A-Za-z]" used "${symbols}")
    endif()
    foreach(entry IN LISTS used)
      string(STRIP "${entry}" entry)
      list(APPEND problems "lib/${name}: ${entry} (a public function outside api.c)")
    endforeach()
    if(name MATCHES "^os(-[a-z]+)?\\.c\\.o(bj)?$")
      string(REGEX MATCHALL "(^|\n)(madvise|mprotect) U" calls "${symbols}")
      if(calls AND NOT SANITIZE)
        string(REGEX REPLACE "\n?([a-z]+) U" "\\1" calls "${calls}")
        string(REPLACE ";" ", " calls "${calls}")
        list(APPEND problems "lib/${name} calls ${calls}: the preload's own in libhugepool_preload.so (os-kernel.h)")
      endif()
      continue()
    endif()
    # Rule 7 (with the names fortification and large-file support give them).
    kernel_calls_of("${symbols}" calls)
    foreach(call IN LISTS calls)
      list(APPEND problems "lib/${name} calls ${call}: only the OS layer makes system calls on memory and files")
    endforeach()
  endforeach()
endif()

# Rule 8, the OS layer's two roads to the kernel (os-kernel.h): a call that
# takes pages away from a range (munmap, mremap, mmap MAP_FIXED) goes
# through libc, where registration caches hook it, and says so where it is
# made; everything else goes through sys_*.  So every plain munmap( mremap(
# mmap( call in lib/os*.c carries a "libc:" comment on its line or in the
# six lines above it: a new call must choose its road in writing.
file(GLOB os_sources ${ROOT}/lib/os.c ${ROOT}/lib/os-*.c)
foreach(source IN LISTS os_sources)
  file(READ ${source} text)
  string(REPLACE ";" "<semicolon>" text "${text}") # one list element per line
  string(REPLACE "[" "<bracket>" text "${text}") # (brackets would hold list elements together)
  string(REPLACE "]" "<rbracket>" text "${text}")
  string(REPLACE "\\" "<backslash>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  get_filename_component(name ${source} NAME)
  set(recent "")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    string(REGEX MATCH "^[ \t]*(/\\*|\\*)" in_comment "${line}")
    string(REGEX MATCH "(^|[^_a-z])(munmap|mremap|mmap)\\(" call "${line}")
    if(call AND NOT in_comment AND NOT line MATCHES "os_report\\(")
      set(window "${recent}\n${line}")
      string(STRIP "${call}" call)
      if(NOT window MATCHES "libc:")
        list(APPEND problems "lib/${name}:${n}: ${call}) without a \"libc:\" comment: say why this call goes through libc (os-kernel.h), or use sys_*")
      endif()
    endif()
    list(APPEND recent "${line}")
    list(LENGTH recent len)
    if(len GREATER 6)
      list(REMOVE_AT recent 0)
    endif()
  endforeach()
endforeach()

# Rule 7 for the preload's objects too (preload/): its own madvise and
# mprotect calls, before it found libc's and for jemalloc's metadata, go
# through the OS layer (os_madvise, os_mprotect), never a syscall() here.
if(PRELOAD_OBJECTS)
  string(REPLACE "|" ";" objects "${PRELOAD_OBJECTS}")
  foreach(object IN LISTS objects)
    if(object STREQUAL "" OR NOT EXISTS "${object}")
      continue()
    endif()
    get_filename_component(name "${object}" NAME)
    object_symbols("${object}" symbols)
    if(NOT symbols)
      continue()
    endif()
    kernel_calls_of("${symbols}" calls)
    foreach(call IN LISTS calls)
      list(APPEND problems "preload/${name} calls ${call}: the preload reaches the kernel through lib/os.h")
    endforeach()
  endforeach()
endif()

if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layers broken:\n  ${text}")
endif()
list(LENGTH lib_headers n)
list(LENGTH lib_sources m)
message(STATUS "layers: ${n} headers and ${m} source files of lib/, preload/, mpi/ and the OS layer keep their include rules; only the OS layer's objects make system calls")
