# SPDX-License-Identifier: BSD-3-Clause
# Tests that hold the machine-wide pool lock (tests/pool/pool-lock, through
# kv::PoolGuard, tests/pool/pool-lock.sh or tests/preload/with-pool).
#
# ctest's TIMEOUT cannot pause, and a test that waited for a lock another
# process held ran out of time before it had run.  So such a test runs
# under `pool-lock limit SECONDS`: SECONDS is the test's own limit, time its
# processes spend waiting for a lock held outside the test not counted, and
# it gives up after HUGEPOOL_TEST_LOCK_WAIT seconds of waiting, naming the
# holder.  ctest's TIMEOUT is only the outer net: SECONDS + the wait + 60.
#
#   hugepool_pool_test(NAME n LIMIT s COMMAND cmd... [PROPERTIES p...])
#       add_test with the launcher, the net and RESOURCE_LOCK hugepool_pool
#       (one such test at a time in one ctest); a property whose value is
#       a list (LABELS "a;b") is set after, with set_tests_properties
#       (the first word of COMMAND is a path or a generator expression).
#   hugepool_pool_emulator(target s [inner-emulator])
#       the same for the Catch2 tests of `target` (catch_discover_tests runs
#       a target's CROSSCOMPILING_EMULATOR before every test).
#   hugepool_pool_launcher(var s)
#       the words to put before a test's command (then TIMEOUT: the net).
#   hugepool_pool_timeout(var s)
#       the outer net for a limit of s seconds.
include_guard(GLOBAL)

set(HUGEPOOL_TEST_LOCK_WAIT 3600 CACHE STRING
  "Seconds a test may wait for the machine-wide pool lock (another process holds it) before it gives up")
set(HUGEPOOL_POOL_LOCK_TOOL ${CMAKE_CURRENT_LIST_DIR}/../tests/pool/pool-lock)
cmake_path(NORMAL_PATH HUGEPOOL_POOL_LOCK_TOOL)
set(HUGEPOOL_POOL_LOCK_TOOL ${HUGEPOOL_POOL_LOCK_TOOL} CACHE INTERNAL "tests/pool/pool-lock")

function(hugepool_pool_timeout var seconds)
  math(EXPR _net "${seconds} + ${HUGEPOOL_TEST_LOCK_WAIT} + 60")
  set(${var} ${_net} PARENT_SCOPE)
endfunction()

function(hugepool_pool_launcher var seconds)
  set(${var} ${HUGEPOOL_POOL_LOCK_TOOL} limit ${seconds} --wait ${HUGEPOOL_TEST_LOCK_WAIT} -- PARENT_SCOPE)
endfunction()

function(hugepool_pool_test)
  cmake_parse_arguments(T "" "NAME;LIMIT" "COMMAND;PROPERTIES" ${ARGN})
  hugepool_pool_timeout(_net ${T_LIMIT})
  hugepool_pool_launcher(_launcher ${T_LIMIT})
  add_test(NAME ${T_NAME} COMMAND ${_launcher} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES RESOURCE_LOCK hugepool_pool TIMEOUT ${_net} ${T_PROPERTIES})
endfunction()

function(hugepool_pool_emulator target seconds)
  set(_script ${CMAKE_CURRENT_BINARY_DIR}/${target}-pool-limit)
  file(GENERATE OUTPUT ${_script}
    CONTENT "#!/bin/sh\nexec ${HUGEPOOL_POOL_LOCK_TOOL} limit ${seconds} --wait ${HUGEPOOL_TEST_LOCK_WAIT} -- ${ARGN} \"$@\"\n"
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  set_target_properties(${target} PROPERTIES CROSSCOMPILING_EMULATOR ${_script})
endfunction()
