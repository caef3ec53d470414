# SPDX-License-Identifier: BSD-3-Clause
# Where a production hugepool-reserve, its Slurm plugin and `hugepool
# doctor` find the site config, the lock and grant table, and the Slurm job
# registry: set here once, written into one generated header,
# <build>/setuid-helper/helper-paths.h (from setuid-helper/helper-paths.h.in),
# which helper.h and tools/doctor-helper.c include.  The test variants of
# the helper pass their own trees' paths instead (setuid-helper/CMakeLists.txt).
# Included by setuid-helper/ and tools/ (a build may have either alone).
include_guard(GLOBAL)

set(HUGEPOOL_RESERVE_CONF /etc/hugepool/reserve.conf CACHE STRING "hugepool-reserve site config")
set(HUGEPOOL_RESERVE_STATE_DIR /var/lib/hugepool CACHE STRING "hugepool-reserve lock and grant table")
set(HUGEPOOL_RESERVE_JOBS_DIR /run/hugepool/jobs CACHE STRING "Slurm job registry")
set(HUGEPOOL_HELPER_PATHS_DIR ${PROJECT_BINARY_DIR}/setuid-helper CACHE INTERNAL "where helper-paths.h is generated")
configure_file(${PROJECT_SOURCE_DIR}/setuid-helper/helper-paths.h.in ${HUGEPOOL_HELPER_PATHS_DIR}/helper-paths.h @ONLY)
