// SPDX-License-Identifier: BSD-3-Clause
// fork() with live and cached buffers: the lock stays consistent in the
// child, which can write what it inherited without SIGBUS.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "core_test.hpp"

using namespace test;

TEST_CASE("fork with live and cached buffers: the child works, the parent is unchanged", "[fork]") {
  kv::PoolGuard pool(16);
  fresh_state();
  auto *live = static_cast<char *>(hugepool_alloc(4 * MiB));
  auto *cached = static_cast<char *>(hugepool_alloc(6 * MiB));  // a class the churn below never asks for
  REQUIRE(live != nullptr);
  REQUIRE(cached != nullptr);
  std::memset(live, 'P', 4 * MiB);
  std::memset(cached, 'C', 6 * MiB);
  hugepool_free(cached);

  // Another thread keeps the lock busy while we fork.
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop) {
      void *p = hugepool_alloc(2 * MiB);
      hugepool_free(p);
    }
  });
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);  // a deadlocked child fails the test instead of hanging it
    int bad = 0;
    // The inherited live buffer is readable and writable (copy on write).
    for (size_t i = 0; i < 4 * MiB; i += 4096) bad += live[i] != 'P';
    std::memset(live, 'K', 4 * MiB);
    // The inherited cache was dropped: its mapping is gone in the child.
    bad += mapped_at(cached) ? 100 : 0;
    // The child allocates and frees on its own.
    auto *mine = static_cast<char *>(hugepool_alloc(2 * MiB));
    bad += mine ? 0 : 1000;
    if (mine) {
      std::memset(mine, 'M', 2 * MiB);
      hugepool_free(mine);
    }
    hugepool_free(live);
    _exit(bad > 255 ? 255 : bad);
  }
  stop = true;
  churn.join();
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The child's writes did not reach the parent, and the parent's cache still works.
  CHECK(live[0] == 'P');
  CHECK(live[4 * MiB - 1] == 'P');
  CHECK(mapped_at(cached));
  hugepool_free(live);
  hugepool_trim();
  CHECK(kv::huge_rsvd() == 0);
}

// The child of a fork with the pool exactly full: writing inherited buffers
// must not SIGBUS (HUGEPOOL_FORK=copy moves them to 4 KB pages), and the
// parent's later writes must not take the child's pages away.
TEST_CASE("fork with the pool exactly full: the child writes inherited buffers without SIGBUS", "[fork]") {
  kv::PoolGuard pool(4);
  fresh_state();
  auto *live = static_cast<char *>(hugepool_alloc(8 * MiB));  // every free page
  REQUIRE(live != nullptr);
  std::memset(live, 'P', 8 * MiB);
  REQUIRE(kv::huge_available() == 0);
  int to_child[2];
  REQUIRE(pipe(to_child) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    close(to_child[1]);
    char go;
    if (read(to_child[0], &go, 1) != 1) _exit(90);  // wait until the parent has written
    int bad = 0;
    for (size_t i = 0; i < 8 * MiB; i += 4096) bad += live[i] != 'P';  // the parent's data, not its new writes
    std::memset(live, 'K', 8 * MiB);
    bad += live[8 * MiB - 1] != 'K';
    auto e = kv::smaps_of(live);
    bad += e.field("KernelPageSize") == 4 ? 0 : 100;  // moved to 4 KB pages: nothing needed from the pool
    hugepool_stats st;
    hugepool_get_stats(&st);
    bad += st.fork_moves_small == 1 ? 0 : 50;
    hugepool_free(live);  // a moved buffer is still freed properly
    _exit(bad > 255 ? 255 : bad);
  }
  close(to_child[0]);
  std::memset(live, 'Q', 8 * MiB);  // the parent writes every shared page after the fork
  REQUIRE(write(to_child[1], "g", 1) == 1);
  close(to_child[1]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child status " << status);
  REQUIRE(WIFEXITED(status));  // not killed by SIGBUS
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(live[0] == 'Q');
  CHECK(kv::smaps_of(live).field("KernelPageSize") == 2048);
  hugepool_free(live);
  hugepool_trim();
}

TEST_CASE("fork with room in the pool: the child gets private hugetlb copies", "[fork]") {
  kv::PoolGuard pool(8);
  fresh_state();
  auto *live = static_cast<char *>(hugepool_alloc(4 * MiB));
  REQUIRE(live != nullptr);
  std::memset(live, 'P', 4 * MiB);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    int bad = live[4 * MiB - 1] != 'P';
    auto e = kv::smaps_of(live);
    bad += e.field("KernelPageSize") == 2048 ? 0 : 10;
    bad += e.field("Private_Hugetlb") == 4096 ? 0 : 20;  // its own pages, populated at fork
    hugepool_stats st;
    hugepool_get_stats(&st);
    bad += st.fork_copies_huge == 1 ? 0 : 40;
    _exit(bad);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hugepool_free(live);
  hugepool_trim();
}
