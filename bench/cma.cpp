// SPDX-License-Identifier: BSD-3-Clause
// Cross-process copy: process_vm_readv / process_vm_writev between this
// process and a child, the single-copy (CMA) path intra-node MPI uses for
// large messages.  The kernel pins the remote pages for every call, so the
// remote buffer's page type matters; the local one is written/read by a
// plain copy.  A same-process memcpy gives the copy limit.
#include <sys/uio.h>
#include <sys/wait.h>

#include "benches.hpp"

namespace hb {

namespace {

struct Child {
  pid_t pid = -1;
  int to_child = -1, from_child = -1;
  uintptr_t addr = 0;
};

// Fork a child that allocates and touches `bytes` of `kind`, reports the
// address, and waits until told to exit.
bool spawn_remote(Page kind, size_t bytes, Child *c, std::string *err) {
  int down[2], up[2];
  if (pipe(down) || pipe(up)) {
    *err = "pipe failed";
    return false;
  }
  std::fflush(stdout);
  c->pid = fork();
  if (c->pid < 0) {
    *err = "fork failed";
    return false;
  }
  if (c->pid == 0) {
    close(down[1]);
    close(up[0]);
    Buf b = buf_alloc(kind, bytes);
    uintptr_t addr = 0;
    if (b) {
      std::memset(b.p, 7, b.len);
      addr = reinterpret_cast<uintptr_t>(b.p);
    }
    if (write(up[1], &addr, sizeof addr) != sizeof addr) _exit(1);
    char x;
    while (read(down[0], &x, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  c->to_child = down[1];
  c->from_child = up[0];
  if (read(c->from_child, &c->addr, sizeof c->addr) != sizeof c->addr || c->addr == 0) {
    *err = "remote allocation failed";
    return false;
  }
  return true;
}

void reap(Child &c) {
  if (c.pid <= 0) return;
  if (c.to_child >= 0) {
    const char x = 'q';
    (void)!write(c.to_child, &x, 1);
    close(c.to_child);
  }
  if (c.from_child >= 0) close(c.from_child);
  int st = 0;
  waitpid(c.pid, &st, 0);
  c = Child{};
}

void one_pair(Page local, Page remote, size_t size, long reps) {
  const std::string what = std::string(page_name(local)) + "<-" + page_name(remote) + " " + size_name(size);
  // Both buffers may come from the same 2 MB pool.
  const int from_pool = (local == Page::huge2m || local == Page::hugepool) + (remote == Page::huge2m || remote == Page::hugepool);
  for (Page kind : {local, remote})
    if (auto why = unavailable(kind, size, kind == Page::huge2m || kind == Page::hugepool ? from_pool : 1);
        !why.empty()) {
      skip("cma", what, why);
      return;
    }
  // Nothing of hugepool's cache may be inherited by the child (a private
  // hugetlb page written after fork needs a copy from the pool).
  page_type_trim(Page::hugepool);
  Child c;
  std::string err;
  if (!spawn_remote(remote, size, &c, &err)) {
    reap(c);
    skip("cma", what, err);
    return;
  }
  Buf b = buf_alloc(local, size);
  if (!b) {
    reap(c);
    skip("cma", what, std::string("local allocation failed: ") + std::strerror(errno));
    return;
  }
  std::memset(b.p, 1, b.len);
  std::vector<double> rd, wr;
  for (long r = 0; r < reps + 1 && err.empty(); ++r) {
    iovec l{b.p, size}, rem{reinterpret_cast<void *>(c.addr), size};
    const uint64_t t0 = now_ns();
    const ssize_t n1 = process_vm_readv(c.pid, &l, 1, &rem, 1, 0);
    const uint64_t t1 = now_ns();
    const ssize_t n2 = process_vm_writev(c.pid, &l, 1, &rem, 1, 0);
    const uint64_t t2 = now_ns();
    if (n1 != static_cast<ssize_t>(size) || n2 != static_cast<ssize_t>(size)) {
      err = std::string("process_vm_readv/writev: ") + std::strerror(errno);
      break;
    }
    if (r) {
      rd.push_back(static_cast<double>(t1 - t0));
      wr.push_back(static_cast<double>(t2 - t1));
    }
  }
  buf_free(b);
  reap(c);
  page_type_trim(Page::hugepool);
  if (!err.empty()) {
    skip("cma", what, err);
    return;
  }
  for (auto [metric, v] : {std::make_pair("readv_ns", &rd), std::make_pair("writev_ns", &wr)})
    Json().str("bench", "cma").str("local", page_name(local)).str("remote", page_name(remote))
        .integer("size", static_cast<long long>(size)).stats(metric, "ns", summarise(*v)).emit();
}

void memcpy_limit(Page kind, size_t size, long reps) {
  const std::string what = std::string(page_name(kind)) + " memcpy " + size_name(size);
  if (auto why = unavailable(kind, size, 2); !why.empty()) {
    skip("cma", what, why);
    return;
  }
  Buf s = buf_alloc(kind, size), d = buf_alloc(kind, size);
  if (!s || !d) {
    buf_free(s);
    buf_free(d);
    skip("cma", what, "allocation failed");
    return;
  }
  std::memset(s.p, 1, size);
  std::memset(d.p, 2, size);
  std::vector<double> t;
  for (long r = 0; r < reps + 1; ++r) {
    const uint64_t t0 = now_ns();
    std::memcpy(d.p, s.p, size);
    const uint64_t t1 = now_ns();
    if (r) t.push_back(static_cast<double>(t1 - t0));
  }
  buf_free(s);
  buf_free(d);
  page_type_trim(kind);
  Json().str("bench", "cma").str("local", page_name(kind)).str("remote", "same-process")
      .integer("size", static_cast<long long>(size)).stats("memcpy_ns", "ns", summarise(t)).emit();
}

}  // namespace

int bench_cma(const Args &a) {
  const auto pages = parse_pages(a.get("pages", "4k,thp,hugetlb,hugepool"));
  const auto sizes = parse_sizes(a.get("sizes", "2M,16M"));
  const auto matrix_sizes = parse_sizes(a.get("matrix-sizes", "16M"));
  const long reps = a.num("reps", 5);
  // Same page type on both sides, over the sizes.
  for (Page kind : pages)
    for (size_t size : sizes) {
      if (kind == Page::huge1g) continue;
      one_pair(kind, kind, size, reps);
    }
  // Every local x remote combination at the matrix sizes.
  for (size_t size : matrix_sizes)
    for (Page local : pages)
      for (Page remote : pages) {
        if (local == Page::huge1g || remote == Page::huge1g) continue;
        if (local == remote && std::find(sizes.begin(), sizes.end(), size) != sizes.end()) continue;
        one_pair(local, remote, size, reps);
      }
  for (size_t size : sizes) memcpy_limit(Page::huge2m, size, reps);
  return 0;
}

}  // namespace hb
