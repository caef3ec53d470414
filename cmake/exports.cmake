# SPDX-License-Identifier: BSD-3-Clause
# What every installed library exports.  The build tree is installed into a
# temporary prefix (cmake --install), and each installed shared object
# (nm -D) and static archive (nm) is read: a global defined symbol must be
# hugepool_*, or one of the few names its kind of library must export:
#   libhugepool_preload.so    the malloc family it interposes, dlopen and
#                             dlmopen, mprotect, pkey_mprotect and madvise,
#                             __asan_default_options (preload/other-heap.c)
#                             (preload/exports.map), no CUDA name
#   libhugepool_cuda_preload.so the CUDA registration and copy calls of
#                             --cuda (preload/cuda.c), nothing else: not
#                             even hugepool_* (it is loaded with --cuda only)
#   libhugepool_mpi_preload.so the MPI entry points it interposes (mpi/)
#   libhugepool_fortran*.so   the Fortran modules' procedures and types, as
#                             gfortran names them: __hugepool_MOD_*,
#                             __hugepool_mpi_MOD_*
#   _core*.so (Python)        PyInit__core
#   hugepool_spank.so         what Slurm looks up: plugin_name, plugin_type,
#                             plugin_version, spank_plugin_version,
#                             spank_options, slurm_spank_*
# Anything else (an internal of the core with a generic name, the helper's
# functions) could collide with a user's own symbol or be bound by one.
#   cmake -DBUILD=<build dir> -DNM=nm -DPREFIX=<scratch dir> -P exports.cmake
#   cmake -DINSTALLED=<an installed tree> -DNM=nm -P exports.cmake
cmake_minimum_required(VERSION 3.25)
if(INSTALLED AND NM)
  set(PREFIX ${INSTALLED}) # read as it is, kept
elseif(BUILD AND NM AND PREFIX)
  file(REMOVE_RECURSE ${PREFIX})
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX}
    OUTPUT_QUIET RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake --install ${BUILD} failed: ${err}")
  endif()
else()
  message(FATAL_ERROR "usage: cmake -DBUILD=<build dir> -DNM=nm -DPREFIX=<scratch dir> -P exports.cmake\n"
                      "   or: cmake -DINSTALLED=<an installed tree> -DNM=nm -P exports.cmake")
endif()

set(malloc_family "malloc|free|cfree|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc")
string(APPEND malloc_family "|pvalloc|malloc_usable_size")
# --cuda (preload/cuda.c, its own object): the CUDA driver and runtime calls
# it serves from registrations kept with the cache.
set(cuda_calls "cuGetProcAddress|cuGetProcAddress_v2|cuMemHostRegister|cuMemHostRegister_v2|cuMemHostUnregister")
string(APPEND cuda_calls "|cuMemcpyHtoD_v2|cuMemcpyDtoH_v2|cuMemcpyHtoDAsync_v2|cuMemcpyDtoHAsync_v2")
string(APPEND cuda_calls "|cuMemcpyHtoD_v2_ptds|cuMemcpyDtoH_v2_ptds|cuMemcpyHtoDAsync_v2_ptsz|cuMemcpyDtoHAsync_v2_ptsz")
string(APPEND cuda_calls "|cudaGetDriverEntryPoint|cudaGetDriverEntryPointByVersion")
string(APPEND cuda_calls "|cudaGetDriverEntryPoint_ptsz|cudaGetDriverEntryPointByVersion_ptsz")
string(APPEND cuda_calls "|cudaHostAlloc|cudaMallocHost|cudaFreeHost|cuMemHostAlloc|cuMemAllocHost_v2|cuMemFreeHost")
string(APPEND cuda_calls "|cudaHostRegister|cudaHostUnregister|cudaMemcpy|cudaMemcpyAsync|cudaMemcpy_ptds")
string(APPEND cuda_calls "|cudaMemcpyAsync_ptsz|cudaMemcpy2D|cudaMemcpy2D_ptds|cudaMemcpy2DAsync|cudaMemcpy2DAsync_ptsz")
set(allowed_libhugepool_preload.so "^(${malloc_family}|dlopen|dlmopen|mprotect|pkey_mprotect|madvise|__asan_default_options)$")
set(allowed_libhugepool_cuda_preload.so "^(${cuda_calls})$")
set(mpi_calls "MPI_Alloc_mem|MPI_Free_mem|MPI_Win_allocate_shared|MPI_Win_free|MPI_Win_get_attr")
string(APPEND mpi_calls "|MPI_Win_shared_query|MPI_Finalize")
set(allowed_libhugepool_mpi_preload.so "^(${mpi_calls})$")
set(allowed_fortran "^__hugepool(_mpi)?_MOD_")
set(allowed_python "^PyInit__core$")
set(allowed_hugepool_spank.so
    "^(plugin_name|plugin_type|plugin_version|spank_plugin_version|spank_options|slurm_spank_[a-z_]+)$")

# The pattern a library's extra names must match (never: only hugepool_*).
function(allowed_for name out)
  set(pattern "^$")
  if(DEFINED allowed_${name})
    set(pattern "${allowed_${name}}")
  elseif(name MATCHES "^libhugepool_fortran")
    set(pattern "${allowed_fortran}")
  elseif(name MATCHES "^_core.*\\.so$")
    set(pattern "${allowed_python}")
  endif()
  set(${out} "${pattern}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE installed LIST_DIRECTORIES false ${PREFIX}/*.so ${PREFIX}/*.so.* ${PREFIX}/*.a)
set(problems "")
set(count 0)
foreach(file IN LISTS installed)
  if(IS_SYMLINK ${file})
    continue()
  endif()
  get_filename_component(name ${file} NAME)
  set(dynamic -D)
  if(name MATCHES "\\.a$")
    set(dynamic "")
  endif()
  execute_process(COMMAND ${NM} ${dynamic} -g -P --defined-only ${file} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(APPEND problems "${NM} ${dynamic} -g -P --defined-only ${name} failed")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  string(REGEX REPLACE "\\.so\\.[0-9.]+$" ".so" base "${name}")
  allowed_for(${base} pattern)
  string(REPLACE "\n" ";" lines "${out}")
  foreach(line IN LISTS lines)
    # "name type [value size]"; an archive's member headers end in ':'.
    if(NOT line MATCHES "^([^ ]+) [A-Za-z]( |$)")
      continue()
    endif()
    string(REGEX REPLACE "@.*$" "" symbol "${CMAKE_MATCH_1}")
    if(symbol MATCHES "^hugepool_" OR symbol MATCHES "${pattern}")
      continue()
    endif()
    file(RELATIVE_PATH rel ${PREFIX} ${file})
    list(APPEND problems "${rel}: ${symbol}")
  endforeach()
endforeach()
if(NOT INSTALLED)
  file(REMOVE_RECURSE ${PREFIX})
endif()
if(count EQUAL 0)
  message(FATAL_ERROR "no library found in the installed tree")
endif()
if(problems)
  list(LENGTH problems n)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "${n} installed symbols outside hugepool_* and the names each library must export:\n  ${text}")
endif()
message(STATUS "exports: ${count} installed libraries export hugepool_* and their documented names alone")
