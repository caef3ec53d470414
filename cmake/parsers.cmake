# SPDX-License-Identifier: BSD-3-Clause
# The pure parsers the privileged programs link (no I/O): parse.c, the
# helper's config parser, and lib/size.c, the project's one size parser,
# compiled once in lib/ (hugepool_size_objects) with the same hardening
# (hardening.cmake) and position independent.  The helper, the Slurm
# plugin, the unit tests and the doctor link this library.  parse.c includes
# lib/size.h by its relative path: nothing puts lib/ on a privileged include
# path.  Included by setuid-helper/ and, in a build without the helper, by
# tools/ (the doctor judges the config as the helper does).
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/hardening.cmake)

add_library(hugepool_reserve_parse STATIC ${PROJECT_SOURCE_DIR}/setuid-helper/parse.c $<TARGET_OBJECTS:hugepool_size_objects>)
target_compile_options(hugepool_reserve_parse PRIVATE ${HUGEPOOL_HARDEN_C})
set_target_properties(hugepool_reserve_parse PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(hugepool_reserve_parse PUBLIC ${PROJECT_SOURCE_DIR}/setuid-helper)
