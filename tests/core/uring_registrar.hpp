// SPDX-License-Identifier: BSD-3-Clause
// A registrar whose registrations the kernel shows, for the registrar tests
// (test_registrar.cpp, test_registrar_api.cpp): io_uring fixed buffers.  The
// kernel pins the pages (pin_user_pages, as cuMemHostRegister and ibv_reg_mr
// do), counts them in VmPin of /proc/self/status and lists each buffer in
// the ring's fdinfo.
#pragma once

#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core_test.hpp"

namespace regtest {

using test::MiB;

constexpr size_t GiB = size_t{1} << 30;
constexpr int HP_TEST_NO_REGISTRAR = 7;  // an id no test adds

inline long long status_kb(const char *key) {
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

inline hugepool_registrar_stats stats_of(int id) {
  hugepool_registrar_stats st{};
  REQUIRE(hugepool_registrar_get_stats(id, &st) == 0);
  return st;
}

}  // namespace regtest
