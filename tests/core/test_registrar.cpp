// SPDX-License-Identifier: BSD-3-Clause
// Registered buffers (lib/registrar.c): a buffer is registered once per
// mapping, stays registered while hugepool caches it, comes back registered
// with no call, and is unregistered only when its mapping goes back to the
// kernel (trim, eviction, pool pressure, a resize), never in a forked child.
//
// The registrars here are real ones the kernel shows, as a GPU or RDMA
// driver's would be (no mock):
//  - io_uring fixed buffers: the kernel pins the pages (pin_user_pages, as
//    cuMemHostRegister and ibv_reg_mr do), counts them in VmPin of
//    /proc/self/status and lists each buffer in the ring's fdinfo;
//  - mlock, checked from VmLck and smaps `Locked`, on 4 KB pages only: the
//    kernel does not set VM_LOCKED on a hugetlb mapping (mlock returns 0,
//    VmLck and Locked stay 0: measured on kernel 6.18), so it cannot show a
//    registration of hugetlb pages; it is used with the `small` fallback.
#include <dlfcn.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core_test.hpp"
#include "hugepool/allocator.hpp"
#include "uring_registrar.hpp"

using namespace test;
using namespace regtest;

TEST_CASE("a registered buffer stays pinned while cached and comes back with no register call", "[registrar]") {
  kv::PoolGuard pool(40);
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  char *a = static_cast<char *>(hugepool_alloc_registered(64 * MiB, ur.id()));
  REQUIRE(a != nullptr);
  std::memset(a, 1, 64 * MiB);
  CHECK(kv::smaps_of(a).field("KernelPageSize") == 2048);
  CHECK(status_kb("VmPin:") - pin0 == 64 * 1024);
  CHECK(ur.lists(a, 64 * MiB));
  CHECK(hugepool_is_registered(a + 5 * MiB, ur.id()));
  hugepool_free(a);
  CHECK(status_kb("VmPin:") - pin0 == 64 * 1024);  // cached: still pinned
  CHECK(ur.lists(a, 64 * MiB));
  char *b = static_cast<char *>(hugepool_alloc_registered(64 * MiB, ur.id()));
  CHECK(b == a);
  CHECK(ur.regs() == 1);  // the hit made no call
  CHECK(stats_of(ur.id()).registered_hits == 1);
  hugepool_free(b);
  CHECK(hugepool_trim() == 64 * MiB);
  CHECK(status_kb("VmPin:") == pin0);  // the mapping went back: unpinned
  CHECK(ur.listed().empty());
  CHECK(ur.unregs() == 1);
  CHECK_FALSE(mapped_at(a));
  fresh_state();
}

// A miss may take the front of the block freed last (lib/alloc.c
// take_last_freed), but never of a registered one: its registration covers the
// whole mapping, which stays whole, cached and pinned; the request maps.
TEST_CASE("a registered cached buffer is never split to serve a smaller request", "[registrar]") {
  kv::PoolGuard pool(12);
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  char *a = static_cast<char *>(hugepool_alloc_registered(4 * MiB, ur.id()));
  REQUIRE(a != nullptr);
  std::memset(a, 1, 4 * MiB);
  hugepool_free(a);  // cached, registered, the last freed
  char *b = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(b != nullptr);
  CHECK(b != a);  // a new mapping, not a's front
  CHECK(mapped_at(a));
  CHECK(ur.lists(a, 4 * MiB));
  CHECK(status_kb("VmPin:") - pin0 == 4 * 1024);
  CHECK(ur.unregs() == 0);
  char *c = static_cast<char *>(hugepool_alloc_registered(4 * MiB, ur.id()));
  CHECK(c == a);  // whole, and still registered: no call
  CHECK(ur.regs() == 1);
  hugepool_free(c);
  hugepool_free(b);
  hugepool_trim();
  CHECK(status_kb("VmPin:") == pin0);
  fresh_state();
}

TEST_CASE("eviction, pool pressure and a resize unregister exactly the mappings that change", "[registrar]") {
  kv::PoolGuard pool(24);
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  hugepool_set_cache_limits(2, GiB);
  void *p[3];
  for (auto &q : p) REQUIRE((q = hugepool_alloc_registered(4 * MiB, ur.id())) != nullptr);
  for (auto &q : p) hugepool_free(q);  // three into two slots: the oldest is evicted
  CHECK(ur.unregs() == 1);
  CHECK(status_kb("VmPin:") - pin0 == 2 * 4 * 1024);
  CHECK_FALSE(ur.lists(p[0], 4 * MiB));
  CHECK(ur.lists(p[1], 4 * MiB));
  CHECK(ur.lists(p[2], 4 * MiB));
  // Pool pressure: 24 pages, 4 cached; a 44 MB buffer (22 pages) needs 2 of
  // them (more if other processes take pages meanwhile: then the cache goes
  // whole).  Whatever went back was unregistered, what stayed is pinned.
  const long long avail = kv::huge_available();  // 20, unless another process gave pages back meanwhile
  void *big = hugepool_alloc(44 * MiB);
  REQUIRE(big != nullptr);
  if (avail < 22) CHECK(ur.unregs() >= 2);
  CHECK(static_cast<long>(ur.listed().size()) == 3 - ur.unregs());
  CHECK(status_kb("VmPin:") - pin0 == (3 - ur.unregs()) * 4 * 1024);
  hugepool_free(big);
  hugepool_trim();
  CHECK(status_kb("VmPin:") == pin0);
  // A resize that changes the pages drops the registration first.
  void *r = hugepool_alloc_registered(4 * MiB, ur.id());
  REQUIRE(r != nullptr);
  CHECK(status_kb("VmPin:") - pin0 == 4 * 1024);
  void *grown = hugepool_realloc(r, 16 * MiB);
  REQUIRE(grown != nullptr);
  CHECK(status_kb("VmPin:") == pin0);
  CHECK_FALSE(hugepool_is_registered(grown, ur.id()));
  CHECK(hugepool_register(grown, ur.id()) == 0);
  CHECK(status_kb("VmPin:") - pin0 == 16 * 1024);
  hugepool_free(grown);
  fresh_state();
  CHECK(status_kb("VmPin:") == pin0);
  CHECK(ur.regs() == ur.unregs());
}

TEST_CASE("a registered buffer past 1 GB is pinned whole, once", "[registrar][large]") {
  constexpr size_t size = GiB + 256 * MiB;
  kv::PoolGuard pool(size / (2 * MiB) + 64);  // never low: share.c would empty the cache
  fresh_state();
  hugepool_set_cache_limits(64, 2 * GiB);
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  for (int round = 0; round < 3; round++) {
    char *a = static_cast<char *>(hugepool_alloc_registered(size, ur.id()));
    REQUIRE(a != nullptr);
    a[0] = a[size - 1] = static_cast<char>(round);
    CHECK(status_kb("VmPin:") - pin0 == static_cast<long long>(size >> 10));
    CHECK(ur.listed().size() == 2);  // two slots of the ring: 1 GiB + 256 MiB
    hugepool_free(a);
  }
  CHECK(ur.regs() == 1);
  CHECK(stats_of(ur.id()).registered_hits == 2);
  hugepool_trim();
  CHECK(status_kb("VmPin:") == pin0);
  CHECK(ur.unregs() == 1);
  fresh_state();
}

TEST_CASE("a thousand registered buffers in four threads: each registered once, all hits after",
          "[registrar][threads]") {
  constexpr int threads = 4, per_thread = 256;
  kv::PoolGuard pool(threads * per_thread + 96);  // never low: share.c would empty the cache
  fresh_state();
  hugepool_set_cache_limits(2 * threads * per_thread, 4 * GiB);
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  std::atomic<int> bad{0}, arrived{0};
  auto all_arrive = [&](int step) {  // every thread's buffers live at once: 1024 distinct mappings
    arrived++;
    while (arrived < threads * step) std::this_thread::yield();
  };
  auto work = [&] {
    std::vector<void *> mine(per_thread);
    for (int round = 0; round < 3; round++) {
      for (auto &p : mine)
        if (!(p = hugepool_alloc_registered(2 * MiB, ur.id()))) bad++;
      for (auto &p : mine)
        if (p) std::memset(p, round, 64);
      all_arrive(2 * round + 1);
      for (auto &p : mine) hugepool_free(p);
      all_arrive(2 * round + 2);
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; i++) ts.emplace_back(work);
  for (auto &t : ts) t.join();
  CHECK(bad == 0);
  const long total = threads * per_thread;
  CHECK(ur.regs() == total);
  CHECK(stats_of(ur.id()).registered_hits == 2 * total);
  CHECK(status_kb("VmPin:") - pin0 == total * 2048);
  CHECK(static_cast<long>(ur.listed().size()) == total);
  CHECK(ur.unregs() == 0);
  hugepool_trim();
  CHECK(ur.unregs() == total);
  CHECK(status_kb("VmPin:") == pin0);
  CHECK(ur.listed().empty());
  fresh_state();
}

TEST_CASE("a forked child neither unregisters nor registers with its parent's registrar", "[registrar][fork]") {
  kv::PoolGuard pool(24);
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  void *p[4];
  for (auto &q : p) REQUIRE((q = hugepool_alloc_registered(4 * MiB, ur.id())) != nullptr);
  hugepool_free(p[2]);
  hugepool_free(p[3]);  // two cached, two live, all registered
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    hugepool_trim();  // the child drops what it inherited ...
    hugepool_free(p[0]);
    void *again = hugepool_alloc_registered(4 * MiB, ur.id());  // ... and has no registrar
    int err = errno;
    hugepool_trim();
    _exit(ur.calls_in_other_process() == 0 && again == nullptr && err == EINVAL ? 0 : 1);
  }
  int st = 0;
  REQUIRE(waitpid(child, &st, 0) == child);
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  // The ring is shared with the child: an unregister there would show here.
  CHECK(ur.listed().size() == 4);
  CHECK(status_kb("VmPin:") - pin0 == 4 * 4 * 1024);
  CHECK(ur.unregs() == 0);
  hugepool_free(p[0]);
  hugepool_free(p[1]);
  hugepool_trim();
  CHECK(ur.unregs() == 4);
  CHECK(status_kb("VmPin:") == pin0);
  fresh_state();
}

TEST_CASE("removing a registrar unregisters its buffers and its id is refused after", "[registrar]") {
  kv::PoolGuard pool(8);
  fresh_state();
  auto ur = std::make_unique<UringRegistrar>();
  const long long pin0 = status_kb("VmPin:");
  int id = ur->id();
  void *a = hugepool_alloc_registered(4 * MiB, id);
  REQUIRE(a != nullptr);
  CHECK(hugepool_registration(a, id, nullptr, nullptr) != nullptr);
  CHECK(status_kb("VmPin:") - pin0 == 4 * 1024);
  ur.reset();  // hugepool_registrar_remove, then the ring closes
  CHECK(status_kb("VmPin:") == pin0);
  CHECK_FALSE(hugepool_is_registered(a, id));
  errno = 0;
  CHECK(hugepool_alloc_registered(4 * MiB, id) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(hugepool_register(a, id) == -1);
  hugepool_free(a);
  fresh_state();
}

namespace {
std::atomic<long> mlock_calls{0}, munlock_calls{0};
int lock_range(void *, void *addr, size_t len, void **) {
  mlock_calls++;
  return mlock(addr, len) == 0 ? 0 : errno;
}
int unlock_range(void *, void *addr, size_t len, void *) {
  munlock_calls++;
  return munlock(addr, len) == 0 ? 0 : errno;
}
}  // namespace

TEST_CASE("mlock as a registrar on 4 KB pages: locked once, still locked while cached, unlocked at trim",
          "[registrar][mlock]") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  SUCCEED("ASan and TSan make mlock and munlock no-ops: nothing for the kernel to show");
  return;
#endif
  kv::PoolGuard pool(0);
  fresh_state();
  hugepool_set_policy(HUGEPOOL_POLICY_SMALL);  // no pool: 4 KB pages, which mlock marks
  hugepool_registrar r{"mlock", lock_range, unlock_range, nullptr};
  int id = hugepool_registrar_add(&r);
  REQUIRE(id > 0);
  mlock_calls = munlock_calls = 0;
  const long long lck0 = status_kb("VmLck:");
  char *a = static_cast<char *>(hugepool_alloc_registered(64 * MiB, id));
  REQUIRE(a != nullptr);
  CHECK(hugepool_kind_of(a) == HUGEPOOL_KIND_SMALL);
  CHECK(status_kb("VmLck:") - lck0 == 64 * 1024);
  CHECK(kv::smaps_of(a).field("Locked") == 64 * 1024);  // locked faults every page in
  hugepool_free(a);
  CHECK(kv::smaps_of(a).field("Locked") == 64 * 1024);
  char *b = static_cast<char *>(hugepool_alloc_registered(64 * MiB, id));
  CHECK(b == a);
  CHECK(mlock_calls == 1);
  hugepool_free(b);
  hugepool_trim();
  CHECK(munlock_calls == 1);
  CHECK(status_kb("VmLck:") == lck0);
  CHECK(hugepool_registrar_remove(id) == 0);
  fresh_state();
}

// Registration pins the pages it is given and the kernel faults in those
// not yet present one at a time on the registering thread; registrar.c
// faults them in first from one thread per CPU (lib/prefault.c).  The
// registrar here reads, from smaps, how much of the mapping was present
// when it was called: all of it with two CPUs or more, none with one (the
// same code, one thread: the registration faults them).  Bytes written
// before stay, the rest reads zero.
namespace {
struct PresentAtRegister {
  static int reg(void *ctx, void *addr, size_t, void **handle) {
    *static_cast<long long *>(ctx) = kv::smaps_of(addr).field("Private_Hugetlb");
    *handle = addr;
    return 0;
  }
  static int unreg(void *, void *, size_t, void *) { return 0; }
};

// The calling thread's CPUs, put back when it goes (a failed REQUIRE too).
struct AffinityGuard {
  cpu_set_t before;
  AffinityGuard() { REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0); }
  ~AffinityGuard() { sched_setaffinity(0, sizeof(before), &before); }
};

// Returns {present when allocated, present when the registrar was called}.
std::pair<long long, long long> present_kb_at_register(size_t size, bool one_cpu) {
  AffinityGuard guard;
  const cpu_set_t &before = guard.before;
  if (one_cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &before)) {
        CPU_SET(c, &one);
        break;
      }
    REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  }
  long long present_kb = -1;
  hugepool_registrar r{"present-at-register", PresentAtRegister::reg, PresentAtRegister::unreg, &present_kb};
  int id = hugepool_registrar_add(&r);
  REQUIRE(id > 0);
  char *a = static_cast<char *>(hugepool_alloc(size));
  REQUIRE(a != nullptr);
  a[5 * MiB] = 42;  // its byte written (its first pages may be present already: HUGEPOOL_PREFAULT, lib/alloc.c)
  const long long allocated_kb = kv::smaps_of(a).field("Private_Hugetlb");
  CHECK(allocated_kb < static_cast<long long>(size >> 11));
  CHECK(hugepool_register(a, id) == 0);
  CHECK(a[5 * MiB] == 42);
  bool zero = true;
  for (size_t off = 0; off < size; off += 2 * MiB + 4096) zero &= off == 5 * MiB || a[off] == 0;
  CHECK(zero);
  CHECK(kv::smaps_of(a).field("Private_Hugetlb") == static_cast<long long>(size >> 10));
  hugepool_free(a);
  hugepool_trim();
  CHECK(hugepool_registrar_remove(id) == 0);
  return {allocated_kb, present_kb};
}
}  // namespace

TEST_CASE("registration faults a fresh mapping in from several threads first", "[registrar][prefault]") {
  constexpr size_t size = 256 * MiB;
  kv::PoolGuard pool(size / (2 * MiB) + 16);
  fresh_state();
  void *probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(probe != MAP_FAILED);
  const bool populate = madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */) == 0;
  munmap(probe, 4096);
  if (!populate) {
    WARN("skipped: this kernel has no MADV_POPULATE_WRITE (Linux 5.14): registrations fault their own pages");
    return;
  }
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  // On several NUMA nodes the helpers run on the caller's node only, which may hold one CPU of this set.
  const bool one_node = access("/sys/devices/system/node/node1", F_OK) != 0;
  if (CPU_COUNT(&set) >= 2 && one_node)
    CHECK(present_kb_at_register(size, false).second == static_cast<long long>(size >> 10));
  auto one = present_kb_at_register(size, true);  // one CPU: the pages the allocation made present, no more
  CHECK(one.second == one.first);
  fresh_state();
}
