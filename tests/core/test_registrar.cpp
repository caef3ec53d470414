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

using namespace test;

extern "C" int split_ends(void *addr, size_t len); /* lib/hooks.h (C, internal): the preload's mprotect */

namespace {

constexpr size_t GiB = size_t{1} << 30;
constexpr int HP_TEST_NO_REGISTRAR = 7;  // an id no test adds

long long status_kb(const char *key) {
  std::istringstream in(kv::read_file("/proc/self/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::strlen(key));
  return -1;
}

// io_uring fixed buffers as a registrar: a sparse table of slots, a buffer
// of more than 1 GiB (the kernel's limit per slot) in several slots.
class UringRegistrar {
 public:
  static constexpr unsigned kSlots = 4096;
  UringRegistrar() {
    if (io_uring_queue_init(4, &ring_, 0) != 0) throw std::runtime_error("io_uring_queue_init");
    if (io_uring_register_buffers_sparse(&ring_, kSlots) != 0) throw std::runtime_error("register_buffers_sparse");
    used_.assign(kSlots, false);
    hugepool_registrar r{"io_uring", reg, unreg, this};
    id_ = hugepool_registrar_add(&r);
    if (id_ < 1) throw std::runtime_error("hugepool_registrar_add");
    pid_ = getpid();
  }
  ~UringRegistrar() {
    if (id_ > 0) hugepool_registrar_remove(id_);
    io_uring_queue_exit(&ring_);
  }
  int id() const { return id_; }
  long regs() const { return regs_; }
  long unregs() const { return unregs_; }
  long calls_in_other_process() const { return foreign_; }
  // Buffers the kernel lists as registered in the ring (fdinfo), and
  // whether one starts at addr with len bytes.
  std::vector<std::string> listed() const {
    std::istringstream in(kv::read_file("/proc/self/fdinfo/" + std::to_string(ring_.ring_fd)));
    std::string line;
    std::vector<std::string> out;
    while (std::getline(in, line))
      if (line.find(": 0x") != std::string::npos) out.push_back(line.substr(line.find("0x")));
    return out;
  }
  bool lists(const void *addr, size_t len) const {
    char want[64];
    std::snprintf(want, sizeof(want), "%p/%zu", addr, len < GiB ? len : GiB);
    for (auto &l : listed())
      if (l == want) return true;
    return false;
  }

 private:
  static int reg(void *ctx, void *addr, size_t len, void **handle) {
    auto *self = static_cast<UringRegistrar *>(ctx);
    if (getpid() != self->pid_) self->foreign_++;
    std::lock_guard<std::mutex> hold(self->lock_);
    unsigned n = static_cast<unsigned>((len + GiB - 1) / GiB), first = 0, run = 0;
    for (unsigned i = 0; i < kSlots && run < n; i++) {
      run = self->used_[i] ? 0 : run + 1;
      if (run == 1) first = i;
    }
    if (run < n) return ENOSPC;
    std::vector<iovec> iov(n);
    for (unsigned i = 0; i < n; i++) {
      size_t off = size_t{i} * GiB;
      iov[i] = {static_cast<char *>(addr) + off, len - off < GiB ? len - off : GiB};
    }
    int rc = io_uring_register_buffers_update_tag(&self->ring_, first, iov.data(), nullptr, n);
    if (rc < 0) return -rc;
    for (unsigned i = 0; i < n; i++) self->used_[first + i] = true;
    *handle = reinterpret_cast<void *>(uintptr_t{first} + 1);
    self->regs_++;
    return 0;
  }
  static int unreg(void *ctx, void *, size_t len, void *handle) {
    auto *self = static_cast<UringRegistrar *>(ctx);
    if (getpid() != self->pid_) self->foreign_++;
    std::lock_guard<std::mutex> hold(self->lock_);
    unsigned n = static_cast<unsigned>((len + GiB - 1) / GiB);
    unsigned first = static_cast<unsigned>(reinterpret_cast<uintptr_t>(handle) - 1);
    std::vector<iovec> none(n, iovec{nullptr, 0});
    int rc = io_uring_register_buffers_update_tag(&self->ring_, first, none.data(), nullptr, n);
    for (unsigned i = 0; i < n; i++) self->used_[first + i] = false;
    self->unregs_++;
    return rc < 0 ? -rc : 0;
  }

  io_uring ring_{};
  std::mutex lock_;
  std::vector<bool> used_;
  int id_ = -1;
  pid_t pid_;
  std::atomic<long> regs_{0}, unregs_{0}, foreign_{0};
};

hugepool_registrar_stats stats_of(int id) {
  hugepool_registrar_stats st{};
  REQUIRE(hugepool_registrar_get_stats(id, &st) == 0);
  return st;
}

}  // namespace

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

TEST_CASE("removing a registrar unregisters its buffers; its id is refused after", "[registrar]") {
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

TEST_CASE("a machine without a GPU driver gets ENODEV and one line from the GPU registrars", "[registrar][gpu]") {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    SUCCEED("a CUDA driver is installed: the GPU tests (bench/gpu) cover it");
    return;
  }
  StderrCapture err;
  errno = 0;
  CHECK(hugepool_registrar_cuda() == -1);
  CHECK(errno == ENODEV);
  CHECK(hugepool_registrar_cuda() == -1);  // remembered: no second line
  CHECK(errno == ENODEV);
  std::string text = err.text();
  CHECK(text.find("no CUDA driver") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  errno = 0;
  CHECK(hugepool_alloc_registered(2 * MiB, -1) == nullptr);
  CHECK(errno == EINVAL);
  void *hip = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (hip) {
    dlclose(hip);
    return;
  }
  StderrCapture hip_err;
  errno = 0;
  CHECK(hugepool_registrar_hip() == -1);
  CHECK(errno == ENODEV);
  CHECK(hip_err.text().find("no ROCm runtime") != std::string::npos);
}

TEST_CASE("hugepool::registered_vector: pinned once, reused pinned, unpinned at trim", "[registrar][allocator]") {
  kv::PoolGuard pool(24);  // 16 used, 8 free: never low (share.c would empty the cache)
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  hugepool::registered_allocator<double> pinned(ur.id());
  const double *first = nullptr;
  for (int round = 0; round < 4; round++) {
    hugepool::registered_vector<double> v(size_t{4} << 20, 1.0, pinned);  // 32 MiB
    if (!first) first = v.data();
    CHECK(v.data() == first);
    CHECK(status_kb("VmPin:") - pin0 == 32 * 1024);
    CHECK(ur.lists(v.data(), 32 * MiB));
  }
  CHECK(ur.regs() == 1);
  CHECK(pinned == hugepool::registered_allocator<int>(ur.id()));
  CHECK(pinned != hugepool::registered_allocator<double>(ur.id() + 1));
  hugepool_trim();
  CHECK(status_kb("VmPin:") == pin0);
  hugepool::registered_allocator<char> nobody(HP_TEST_NO_REGISTRAR);
  CHECK_THROWS_AS(nobody.allocate(10), std::system_error);
  fresh_state();
}

TEST_CASE("hugepool::cuda_registrar throws ENODEV where there is no driver", "[registrar][allocator][gpu]") {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    SUCCEED("a CUDA driver is installed");
    return;
  }
  StderrCapture quiet;
  try {
    (void)hugepool::cuda_registrar();
    FAIL("no exception");
  } catch (const std::system_error &e) {
    CHECK(e.code().value() == ENODEV);
  }
}

TEST_CASE("a registered buffer whose page is split to 4 KB is unregistered first", "[registrar][split]") {
  kv::PoolGuard pool(8);
  fresh_state();
  UringRegistrar ur;
  const long long pin0 = status_kb("VmPin:");
  char *a = static_cast<char *>(hugepool_alloc_registered(4 * MiB, ur.id()));
  REQUIRE(a != nullptr);
  std::memset(a, 5, 4 * MiB);
  CHECK(status_kb("VmPin:") - pin0 == 4 * 1024);
  CHECK(split_ends(a + 4096, 4096) == 1);  // what the preload's mprotect of one 4 KB page does
  CHECK(kv::smaps_of(a).field("KernelPageSize") == 4);
  CHECK(status_kb("VmPin:") == pin0);  // the pinned 2 MB page is gone: so is its registration
  CHECK(ur.unregs() == 1);
  CHECK_FALSE(hugepool_is_registered(a, ur.id()));
  CHECK(a[4096] == 5);
  hugepool_free(a);  // a split buffer is unmapped, not cached
  CHECK(ur.regs() == 1);
  fresh_state();
}
