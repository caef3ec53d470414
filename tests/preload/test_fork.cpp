// SPDX-License-Identifier: BSD-3-Clause
// fork() under the preload: with and without exec, with a full and a nearly
// empty pool, in the default mode (HUGEPOOL_FORK=copy) and in keep mode.
#include <catch2/catch.hpp>

#include <csignal>

#include "preload_test.hpp"

static constexpr size_t MiB = size_t(1) << 20;

TEST_CASE("fork without exec: the child reads and writes inherited buffers, still on hugetlb", "[default]") {
  kv::PoolGuard pool(16);
  auto *buf = static_cast<unsigned char *>(malloc(8 * MiB));
  pl::fill(buf, 8 * MiB, 5);
  int st = pl::in_child([&] {
    if (!pl::check(buf, 8 * MiB, 5)) return 1;
    pl::fill(buf, 8 * MiB, 6);
    if (!pl::check(buf, 8 * MiB, 6)) return 2;
    if (!pl::on_hugetlb(buf)) return 3;
    void *more = malloc(2 * MiB); /* the child's own allocations work too */
    if (!more) return 4;
    free(more);
    free(buf);
    return 0;
  });
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(pl::check(buf, 8 * MiB, 5)); /* the parent's copy is its own */
  CHECK(pl::on_hugetlb(buf));
  free(buf);
}

TEST_CASE("fork without exec, nearly empty pool: no SIGBUS, the child's copy moves to 4 KB pages", "[default]") {
  kv::PoolGuard pool(4);
  auto *buf = static_cast<unsigned char *>(malloc(8 * MiB)); /* takes the last 4 pages */
  pl::fill(buf, 8 * MiB, 7);
  auto *untouched = static_cast<unsigned char *>(malloc(2 * MiB)); /* falls back: pool empty */
  REQUIRE(kv::huge_available() == 0);
  int st = pl::in_child([&] {
    if (!pl::check(buf, 8 * MiB, 7)) return 1;
    if (pl::page_kb(buf) != 4) return 2;
    pl::fill(buf, 8 * MiB, 8); /* would be SIGBUS without the copy */
    if (!pl::check(buf, 8 * MiB, 8)) return 3;
    untouched[0] = 1;
    free(buf);
    return 0;
  });
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(pl::check(buf, 8 * MiB, 7));
  pl::fill(buf, 8 * MiB, 9); /* the parent keeps its pages and reservation */
  CHECK(pl::check(buf, 8 * MiB, 9));
  CHECK(pl::on_hugetlb(buf));
  free(buf);
  free(untouched);
}

TEST_CASE("fork then exec works with an empty pool", "[default][keep]") {
  kv::PoolGuard pool(2);
  auto *buf = static_cast<unsigned char *>(malloc(4 * MiB));
  pl::fill(buf, 4 * MiB, 1);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", "exit 0", static_cast<char *>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(system("true") == 0); /* posix_spawn path */
  CHECK(pl::check(buf, 4 * MiB, 1));
  free(buf);
}

TEST_CASE("HUGEPOOL_FORK=keep: a child writing shared pages with an empty pool gets SIGBUS (why copy is the default)",
          "[keep]") {
  kv::PoolGuard pool(4);
  auto *buf = static_cast<unsigned char *>(malloc(8 * MiB));
  pl::fill(buf, 8 * MiB, 3);
  int reader = pl::in_child([&] { return pl::check(buf, 8 * MiB, 3) && pl::page_kb(buf) == 2048 ? 0 : 1; });
  CHECK(WIFEXITED(reader));
  CHECK(WEXITSTATUS(reader) == 0); /* reading shared pages needs no pool page */
  int writer = pl::in_child([&] {
    static_cast<volatile unsigned char *>(buf)[0] = 1;
    return static_cast<volatile unsigned char *>(buf)[0] == 1 ? 0 : 1;
  });
  CHECK(WIFSIGNALED(writer));
  CHECK(WTERMSIG(writer) == SIGBUS);
  CHECK(pl::check(buf, 8 * MiB, 3));
  free(buf);
}
