// SPDX-License-Identifier: BSD-3-Clause
// Registered buffers through the C++ allocator, the GPU registrars where
// there is no GPU, and a split of a registered buffer's page (the rest:
// test_registrar.cpp).  Registrations are read from the kernel (VmPin, the
// io_uring ring's fdinfo: uring_registrar.hpp).
#include <dlfcn.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core_test.hpp"
#include "hugepool/allocator.hpp"
#include "uring_registrar.hpp"

using namespace test;
using namespace regtest;

extern "C" int split_ends(void *addr, size_t len); /* lib/hooks.h (C, internal): the preload's mprotect */

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
