# SPDX-License-Identifier: BSD-3-Clause
# The hardening of everything that runs privileged.  Included by the top
# CMakeLists.txt before lib/, whose size parser (lib/size.c) the privileged
# programs link and which is built with it (cmake/parsers.cmake).
include_guard(GLOBAL)

# -O2 is needed by _FORTIFY_SOURCE.
set(HUGEPOOL_HARDEN_C -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3 -O2 -fstack-protector-strong
    -fstack-clash-protection -fcf-protection)
set(HUGEPOOL_HARDEN_LINK -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)
