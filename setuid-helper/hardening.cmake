# SPDX-License-Identifier: BSD-3-Clause
# The hardening of everything that runs privileged, and the one library the
# privileged programs link, built with it.  Included by setuid-helper/ and,
# in a build without the helper, by tools/ (the doctor uses the same parser).
include_guard(GLOBAL)

# -O2 is needed by _FORTIFY_SOURCE.
set(HUGEPOOL_HARDEN_C -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3 -O2 -fstack-protector-strong
    -fstack-clash-protection -fcf-protection)
set(HUGEPOOL_HARDEN_LINK -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)

# The pure parsers (parse.c, and lib/size.c, the project's one size parser:
# no I/O), compiled once with the hardening above and position independent:
# the helper, the Slurm plugin, the unit tests and the doctor link these same
# objects.  parse.c includes lib/size.h by its relative path: nothing puts
# lib/ on a privileged include path.
add_library(hugepool_reserve_parse STATIC ${CMAKE_CURRENT_LIST_DIR}/parse.c ${PROJECT_SOURCE_DIR}/lib/size.c)
target_compile_options(hugepool_reserve_parse PRIVATE ${HUGEPOOL_HARDEN_C})
set_target_properties(hugepool_reserve_parse PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(hugepool_reserve_parse PUBLIC ${CMAKE_CURRENT_LIST_DIR})
