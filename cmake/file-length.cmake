# SPDX-License-Identifier: BSD-3-Clause
# Every C and C++ source and header of lib/, preload/, setuid-helper/, mpi/
# and tools/ stays within LIMIT lines (450): one concern a file, short
# enough to read in one sitting.  A file that grows past it is split by
# concern, each part named for what it does (lib/README.md's file table).
#   cmake -DROOT=<source dir> [-DLIMIT=450] -P file-length.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> [-DLIMIT=450] -P file-length.cmake")
endif()
if(NOT LIMIT)
  set(LIMIT 450)
endif()
set(files "")
foreach(dir lib preload setuid-helper mpi tools)
  file(GLOB_RECURSE found ${ROOT}/${dir}/*.c ${ROOT}/${dir}/*.h ${ROOT}/${dir}/*.cpp ${ROOT}/${dir}/*.hpp
       ${ROOT}/${dir}/*.cc)
  list(APPEND files ${found})
endforeach()
set(problems "")
foreach(file IN LISTS files)
  # file(STRINGS) drops empty lines: count newlines instead.
  file(READ ${file} text)
  string(REGEX REPLACE "[^\n]" "" newlines "${text}")
  string(LENGTH "${newlines}" n)
  if(n GREATER LIMIT)
    file(RELATIVE_PATH rel ${ROOT} ${file})
    list(APPEND problems "${rel}: ${n} lines (at most ${LIMIT}: split it by concern)")
  endif()
endforeach()
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "files too long:\n  ${text}")
endif()
list(LENGTH files count)
message(STATUS "file-length: ${count} C/C++ files of lib/, preload/, setuid-helper/, mpi/ and tools/ within ${LIMIT} lines")
