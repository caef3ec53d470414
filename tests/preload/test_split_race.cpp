// SPDX-License-Identifier: BSD-3-Clause
// A 2 MB page split to 4 KB pages (lib/split.c) while other threads write
// into it: no write may be lost, and the program's own SIGSEGV handling is
// untouched.  Writer threads store increasing numbers into their own slots
// spread over four 2 MB pages and read each slot back before the next store:
// a store that lands in the hugetlb page after the split copied that byte is
// gone once the 4 KB copy replaces the page, and the next read sees the older
// value.  Meanwhile the main thread sets guard pages and MADV_DONTNEED in three
// of the four pages (each a split under the preload), round after round.
// Placement is read from smaps: 4 KB where split, hugetlb in the fourth page.
// The same checks run on plain glibc ([plain]), which has no such window.
#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstddef>
#include <thread>
#include <vector>

#include "preload_test.hpp"

namespace {
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t KiB4 = 4096;
constexpr size_t Page2M = 2 * MiB;
constexpr int kWriters = 4;
constexpr size_t kPages = 4;       // 2 MB pages in a round's buffer; the last is never cut
constexpr size_t kSlotPages = 16;  // 4 KB pages with slots in each 2 MB page (even indices)
constexpr size_t kGuard = 33;      // 4 KB page index made PROT_NONE in 2 MB page 1 (odd: no slots)
constexpr size_t kDontneed = 7;    // 4 KB page index dropped in 2 MB page 0 (odd: no slots)

size_t slot_page(size_t j) { return 2 + 32 * j; }  // 2, 34, ..., 482: even, never 0, 7 or 33

struct round_state {
  unsigned char *base = nullptr;
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::atomic<long long> lost{0};
  std::atomic<long long> stores{0};
  std::atomic<long long> wrong_at_end{0};
};

// One writer: its slots, one per slot page of every 2 MB page, each read back
// before the next store; at the end each must hold the last value stored.
void writer(round_state &s, int w) {
  std::vector<volatile uint64_t *> slots;
  for (size_t p = 0; p < kPages; p++)
    for (size_t j = 0; j < kSlotPages; j++)
      slots.push_back(
          reinterpret_cast<volatile uint64_t *>(s.base + p * Page2M + slot_page(j) * KiB4 + size_t(w) * 64));
  std::vector<uint64_t> last(slots.size(), 0);
  uint64_t seq = 0;
  long long lost = 0, n = 0;
  s.started.fetch_add(1);
  while (!s.stop.load(std::memory_order_relaxed)) {
    for (size_t i = 0; i < slots.size(); i++) {
      if (*slots[i] != last[i]) lost++;
      *slots[i] = ++seq;
      last[i] = seq;
      n++;
    }
  }
  long long wrong = 0;
  for (size_t i = 0; i < slots.size(); i++) wrong += *slots[i] != last[i];
  s.lost += lost;
  s.stores += n;
  s.wrong_at_end += wrong;
}

// What one round found.
struct round_result {
  long long lost, stores, wrong_at_end;
  bool placement_ok, bytes_ok;
};

// One round: a fresh buffer, writers on it, three of its 2 MB pages cut by
// guard pages and MADV_DONTNEED while they write.
round_result one_round() {
  void *raw = malloc(kPages * Page2M + KiB4);
  REQUIRE(raw);
  auto *base = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(raw) + KiB4 - 1) & ~(KiB4 - 1));
  memset(base, 0, kPages * Page2M);
  round_state s;
  s.base = base;
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; w++) ts.emplace_back(writer, std::ref(s), w);
  while (s.started.load() < kWriters) std::this_thread::yield();
  usleep(200); /* the writers are storing */

  unsigned char *guard = base + Page2M + kGuard * KiB4;
  unsigned char *dropped = base + kDontneed * KiB4;
  unsigned char *at2m = base + 2 * Page2M; /* a 2 MB boundary under the preload */
  bool calls_ok = true;
  /* each cutting call splits its 2 MB page the first time; the repeats find it split */
  for (int rep = 0; rep < 3; rep++) {
    calls_ok &= mprotect(guard, KiB4, PROT_NONE) == 0;
    calls_ok &= madvise(dropped, KiB4, MADV_DONTNEED) == 0;
    calls_ok &= madvise(at2m, KiB4, MADV_DONTNEED) == 0;
    if (rep < 2) calls_ok &= mprotect(guard, KiB4, PROT_READ | PROT_WRITE) == 0;
  }
  usleep(200); /* the writers read their slots back from the 4 KB pages */
  s.stop = true;
  for (auto &t : ts) t.join();
  CHECK(calls_ok);

  round_result r{s.lost.load(), s.stores.load(), s.wrong_at_end.load(), true, true};
  if (pl::preloaded()) {
    r.placement_ok = pl::page_kb(guard) == 4 && pl::page_kb(dropped) == 4 && pl::page_kb(at2m) == 4 &&
                     pl::on_hugetlb(base + 3 * Page2M);
  }
  for (size_t i = 0; i < KiB4; i++) r.bytes_ok &= dropped[i] == 0 && at2m[i] == 0;
  REQUIRE(mprotect(guard, KiB4, PROT_READ | PROT_WRITE) == 0);
  for (size_t i = 0; i < KiB4; i++) r.bytes_ok &= guard[i] == 0;
  free(raw);
  return r;
}

long long split_counter() {
  return pl::preloaded() ? pl::counter("preload: 2 MB pages split to 4 KB") : 0;
}

// Runs the split rounds of the first test on a thread of its own (used by
// the signal tests: splits happen while the program's handler is in use).
struct splitter {
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::atomic<long long> lost{0};
  std::thread t;
  void start(int at_most) {
    t = std::thread([this, at_most] {
      for (int i = 0; i < at_most && !stop.load(); i++) {
        round_result r = one_round();
        lost += r.lost + r.wrong_at_end;
        rounds++;
      }
    });
  }
  void finish() {
    stop = true;
    if (t.joinable()) t.join();
  }
};

// The program's own handler: a fault on its guard page opens that page and
// counts; any other fault is not its business (default action, re-raised).
unsigned char *g_guard;
std::atomic<long> g_caught{0};
void own_handler(int sig, siginfo_t *si, void *) {
  auto *a = static_cast<unsigned char *>(si->si_addr);
  if (sig == SIGSEGV && a >= g_guard && a < g_guard + KiB4) {
    g_caught.fetch_add(1);
    syscall(SYS_mprotect, g_guard, KiB4, PROT_READ | PROT_WRITE);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}
}  // namespace

TEST_CASE("writes by other threads into a 2 MB page while it is split are never lost", "[default][smallheap][plain]") {
  kv::PoolGuard pool(32);
  long long split_before = split_counter();
  constexpr int kRounds = 100; /* 300 splits under the preload */
  long long lost = 0, wrong = 0, stores = 0;
  int rounds_losing = 0, misplaced = 0, bad_bytes = 0;
  for (int i = 0; i < kRounds; i++) {
    round_result r = one_round();
    lost += r.lost;
    wrong += r.wrong_at_end;
    stores += r.stores;
    rounds_losing += r.lost + r.wrong_at_end > 0;
    misplaced += !r.placement_ok;
    bad_bytes += !r.bytes_ok;
  }
  INFO("stores " << stores << ", rounds that lost a write " << rounds_losing << " of " << kRounds);
  CHECK(stores > 0);
  CHECK(lost == 0);  /* a slot read back older than the thread's last store */
  CHECK(wrong == 0); /* a slot not holding the thread's last store at the end */
  CHECK(misplaced == 0);
  CHECK(bad_bytes == 0);
  if (pl::preloaded()) CHECK(split_counter() - split_before == 3 * kRounds);
}

TEST_CASE("a program's own SIGSEGV handler works and stays its own while pages are split",
          "[default][smallheap][plain]") {
  kv::PoolGuard pool(32);
  struct sigaction mine {
  }, before{}, seen{};
  mine.sa_sigaction = own_handler;
  mine.sa_flags = SA_SIGINFO;
  sigemptyset(&mine.sa_mask);
  REQUIRE(sigaction(SIGSEGV, &mine, &before) == 0); /* before: the test framework's */
  g_guard =
      static_cast<unsigned char *>(mmap(nullptr, KiB4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(g_guard != MAP_FAILED);
  g_caught = 0;

  splitter sp;
  sp.start(40);
  long faults = 0, handler_changed = 0;
  while (sp.rounds.load() < 40 && faults < 1000000) {
    REQUIRE(mprotect(g_guard, KiB4, PROT_NONE) == 0);
    g_guard[faults % KiB4] = 1; /* faults; the handler opens the page; the store is retried */
    faults++;
    if (sigaction(SIGSEGV, nullptr, &seen) != 0 || seen.sa_sigaction != own_handler || !(seen.sa_flags & SA_SIGINFO))
      handler_changed++;
  }
  sp.finish();
  REQUIRE(sigaction(SIGSEGV, nullptr, &seen) == 0);
  bool still_mine = seen.sa_sigaction == own_handler && (seen.sa_flags & SA_SIGINFO);
  sigaction(SIGSEGV, &before, nullptr);
  munmap(g_guard, KiB4);
  INFO("guard-page faults " << faults << ", split rounds " << sp.rounds.load());
  CHECK(sp.rounds.load() == 40);
  CHECK(sp.lost.load() == 0);
  CHECK(g_caught.load() == faults);
  CHECK(handler_changed == 0);
  CHECK(still_mine);
}

TEST_CASE("without a handler of its own, a program still dies by SIGSEGV on a guard page after splits",
          "[default][smallheap][plain]") {
  kv::PoolGuard pool(32);
  int st = pl::in_child([] {
    signal(SIGSEGV, SIG_DFL); /* the test framework's handler would report it */
    for (int i = 0; i < 5; i++) {
      round_result r = one_round(); /* threads and splits in this process too */
      if (r.lost || r.wrong_at_end) return 3;
    }
    struct sigaction seen {};
    if (sigaction(SIGSEGV, nullptr, &seen) != 0 || seen.sa_handler != SIG_DFL) return 4;
    void *raw = malloc(4 * MiB);
    auto *p = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(raw) + MiB) & ~(KiB4 - 1));
    if (mprotect(p, KiB4, PROT_NONE) != 0) return 5;
    volatile unsigned char *v = p;
    v[5] = 1; /* dies here */
    return 0;
  });
  CHECK(WIFSIGNALED(st));
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV));
  if (!WIFSIGNALED(st)) CHECK(WEXITSTATUS(st) == 0); /* which step failed */
}

namespace {
// Denies userfaultfd to this process (a forked child) as a seccomp filter
// of a container may.
bool deny_userfaultfd() {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(f) / sizeof(f[0])), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
}  // namespace

TEST_CASE("without userfaultfd a page is split only where no other thread can write to it",
          "[default][smallheap][plain]") {
  kv::PoolGuard pool(32);
  int st = pl::in_child([] {
    if (!deny_userfaultfd()) return 10;
    void *raw = malloc(kPages * Page2M + KiB4);
    auto *base = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(raw) + KiB4 - 1) & ~(KiB4 - 1));
    pl::fill(base, kPages * Page2M, 3);
    /* the only thread: split as before */
    unsigned char *g0 = base + 5 * KiB4;
    if (mprotect(g0, KiB4, PROT_NONE) != 0) return 11;
    if (pl::preloaded() && pl::page_kb(g0) != 4) return 12;
    if (mprotect(g0, KiB4, PROT_READ | PROT_WRITE) != 0) return 13;
    /* another thread writes into page 1: refused (ENOMEM), nothing changed */
    std::atomic<bool> stop{false};
    std::atomic<long> lost{0};
    volatile uint64_t *slot = reinterpret_cast<volatile uint64_t *>(base + Page2M + 2 * KiB4);
    std::thread w([&] {
      uint64_t last = *slot;
      while (!stop.load(std::memory_order_relaxed)) {
        if (*slot != last) lost++;
        *slot = ++last;
      }
    });
    unsigned char *g1 = base + Page2M + 9 * KiB4;
    errno = 0;
    int rc = mprotect(g1, KiB4, PROT_NONE);
    int err = errno;
    /* a read-only 2 MB page: nobody can write to it, split even with threads */
    unsigned char *ro = base + 2 * Page2M;
    int rc_ro = mprotect(ro, Page2M, PROT_READ);
    if (rc_ro == 0) rc_ro = mprotect(ro + 9 * KiB4, KiB4, PROT_NONE);
    stop = true;
    w.join();
    if (lost.load() != 0) return 14;
    if (pl::preloaded()) {
      if (rc != -1 || err != ENOMEM) return 15;
      if (!pl::on_hugetlb(g1)) return 16;
      if (rc_ro != 0 || pl::page_kb(ro + 9 * KiB4) != 4) return 17;
    } else if (rc != 0 || rc_ro != 0) {
      return 18; /* glibc's memory: always */
    }
    mprotect(g1, KiB4, PROT_READ | PROT_WRITE);
    mprotect(ro, Page2M, PROT_READ | PROT_WRITE);
    for (size_t i = Page2M + 2 * KiB4; i < Page2M + 2 * KiB4 + 8; i++) /* the slot's bytes as pl::fill made them */
      base[i] = static_cast<unsigned char>((i * 131 + 3) >> 3);
    return pl::check(base, kPages * Page2M, 3) ? 0 : 19;
  });
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

namespace {
// Is a userfaultfd open in this process (a split in its window)?
bool uffd_open_now() {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return false;
  bool found = false;
  char link[64];
  while (struct dirent *e = readdir(d)) {
    ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
    if (n > 0) {
      link[n] = '\0';
      if (strstr(link, "userfaultfd")) found = true;
    }
  }
  closedir(d);
  return found;
}
}  // namespace

TEST_CASE("a child forked while a page is split does not hold up the parent's writers", "[default][smallheap]") {
  kv::PoolGuard pool(64); /* each child copies the live buffers (HUGEPOOL_FORK=copy) */
  int hold[2];
  REQUIRE(pipe(hold) == 0);
  std::atomic<bool> stop{false};
  std::vector<pid_t> children;
  /* forks whenever a split is in its window: the child inherits the descriptor and keeps it
   * (it waits for the end of the pipe) until the test ends */
  std::thread forker([&] {
    while (!stop.load() && children.size() < 8) {
      if (!uffd_open_now()) continue;
      pid_t pid = fork();
      if (pid == 0) {
        close(hold[1]);
        char c;
        while (read(hold[0], &c, 1) > 0) {
        }
        _exit(0);
      }
      if (pid > 0) children.push_back(pid);
    }
  });
  splitter sp;
  sp.start(20);
  /* the rounds must go on: a writer held until the children exit stops them */
  for (int i = 0; i < 600 && sp.rounds.load() < 20; i++) usleep(100000);
  int rounds = sp.rounds.load();
  stop = true;
  forker.join();
  close(hold[1]); /* the children exit; anything still held is let go */
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  close(hold[0]);
  sp.finish();
  INFO("children forked in a split's window: " << children.size());
  CHECK(children.size() > 0);
  CHECK(rounds == 20);
  CHECK(sp.lost.load() == 0);
}
