// SPDX-License-Identifier: BSD-3-Clause
// GPU host registration: what registering host memory costs per GB by page
// kind, the driver's own pinned allocation, copy rates registered and not,
// a data loader's allocate/register/copy/free loop, and the targets a GPU
// node must meet.  The CUDA driver is opened with dlopen("libcuda.so.1"):
// this builds without CUDA, and exits 77 with "skip: REASON" where there is
// no driver or no device.  bench/suites/gpu drives it (and gpu-torch.py).
//
//   hugepool-bench-gpu all [--sizes 64M,1G] [--reps 7]   tables and targets
//   hugepool-bench-gpu loop [--reps 9]   the 256 MB loop, plain calls (run it
//                                        under hugepool-run --cuda too)
//   hugepool-bench-gpu unmodified        1 GB copies from malloc (run it under
//                                        hugepool-run --cuda=all)
//   hugepool-bench-gpu nocontext         hugepool never creates a context
//   hugepool-bench-gpu probe             exit 0 with a driver and a device, else 77
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "hugepool/hugepool.h"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;

struct Driver {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(int *, int);
  CUresult (*device_count)(int *);
  CUresult (*device_name)(char *, int, int);
  CUresult (*primary_retain)(CUcontext *, int);
  CUresult (*primary_state)(int, unsigned *, int *);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_synchronize)();
  CUresult (*mem_alloc)(CUdeviceptr *, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*host_alloc)(void **, size_t, unsigned);
  CUresult (*free_host)(void *);
  CUresult (*host_register)(void *, size_t, unsigned);  // through the global scope: the preload's under --cuda
  CUresult (*host_unregister)(void *);
  CUresult (*htod)(CUdeviceptr, const void *, size_t);
  CUresult (*dtoh)(void *, CUdeviceptr, size_t);
};
Driver cu;

[[noreturn]] void skip(const std::string &why) {
  std::printf("skip: %s\n", why.c_str());
  std::exit(77);
}

template <class F>
void resolve(void *lib, F *slot, const char *name, bool global = false) {
  void *p = global ? dlsym(RTLD_DEFAULT, name) : dlsym(lib, name);
  if (!p) skip(std::string("libcuda.so.1 has no ") + name);
  std::memcpy(static_cast<void *>(slot), &p, sizeof(p));
}

void open_driver() {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) skip(std::string("no CUDA driver (") + dlerror() + ")");
  resolve(lib, &cu.init, "cuInit");
  resolve(lib, &cu.device_get, "cuDeviceGet");
  resolve(lib, &cu.device_count, "cuDeviceGetCount");
  resolve(lib, &cu.device_name, "cuDeviceGetName");
  resolve(lib, &cu.primary_retain, "cuDevicePrimaryCtxRetain");
  resolve(lib, &cu.primary_state, "cuDevicePrimaryCtxGetState");
  resolve(lib, &cu.ctx_set_current, "cuCtxSetCurrent");
  resolve(lib, &cu.ctx_get_current, "cuCtxGetCurrent");
  resolve(lib, &cu.ctx_synchronize, "cuCtxSynchronize");
  resolve(lib, &cu.mem_alloc, "cuMemAlloc_v2");
  resolve(lib, &cu.mem_free, "cuMemFree_v2");
  resolve(lib, &cu.host_alloc, "cuMemHostAlloc");
  resolve(lib, &cu.free_host, "cuMemFreeHost");
  resolve(lib, &cu.host_register, "cuMemHostRegister_v2", true);
  resolve(lib, &cu.host_unregister, "cuMemHostUnregister", true);
  resolve(lib, &cu.htod, "cuMemcpyHtoD_v2");
  resolve(lib, &cu.dtoh, "cuMemcpyDtoH_v2");
  int n = 0;
  if (cu.init(0) != 0 || cu.device_count(&n) != 0 || n == 0) skip("the CUDA driver sees no device");
}

void check(CUresult rc, const char *what) {
  if (rc != 0) {
    std::fprintf(stderr, "hugepool-bench-gpu: %s: CUDA error %d\n", what, rc);
    std::exit(1);
  }
}

void make_context() {
  int dev;
  CUcontext ctx;
  check(cu.device_get(&dev, 0), "cuDeviceGet");
  check(cu.primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.ctx_set_current(ctx), "cuCtxSetCurrent");
  char name[128] = "";
  cu.device_name(name, sizeof(name), dev);
  std::printf("device: %s\n", name);
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Stat {
  double median, min, max;
};
Stat summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v.front(), v.back()};
}
void report(const std::string &what, const std::vector<double> &samples, const char *unit) {
  Stat s = summarise(samples);
  std::printf("%-58s %10.2f %10.2f %10.2f  %s (n=%zu)\n", what.c_str(), s.median, s.min, s.max, unit, samples.size());
}

// ---- host buffers of each page kind -------------------------------------
enum class Kind { small, thp, huge2m, huge1g, hugepool };
const char *kind_name(Kind k) {
  switch (k) {
    case Kind::small: return "4 KB pages";
    case Kind::thp: return "THP";
    case Kind::huge2m: return "hugetlb 2 MB (mmap)";
    case Kind::huge1g: return "hugetlb 1 GB (mmap)";
    case Kind::hugepool: return "hugepool_alloc";
  }
  return "?";
}

void *map_kind(Kind k, size_t size) {
  if (k == Kind::hugepool) return hugepool_alloc(size);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (k == Kind::huge2m) flags |= MAP_HUGETLB | (21 << MAP_HUGE_SHIFT);
  if (k == Kind::huge1g) flags |= MAP_HUGETLB | (30 << MAP_HUGE_SHIFT);
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (k == Kind::small) madvise(p, size, MADV_NOHUGEPAGE);
  if (k == Kind::thp) madvise(p, size, MADV_HUGEPAGE);
  return p;
}
void unmap_kind(Kind k, void *p, size_t size) {
  if (k == Kind::hugepool) {
    hugepool_free(p);
    hugepool_trim();
  } else {
    size_t page = k == Kind::huge1g ? size_t{1} << 30 : k == Kind::huge2m ? size_t{2} << 20 : 1;
    munmap(p, (size + page - 1) / page * page);  // a hugetlb length is whole pages, or munmap fails
  }
}

double per_gb(double ms, size_t size) { return ms * double(size_t{1} << 30) / double(size); }

struct Results {
  double reg_small_1g = 0, reg_hugepool_1g = 0, hostalloc_1g = 0, first_use_1g = 0, hit_1g = 0;
  double copy_alone_ms = 0, loop_ms = 0;
};
Results res;

void registration_by_kind(const std::vector<size_t> &sizes, int reps) {
  std::printf("\n== registration, ms per GB (touched buffers)           median        min        max\n");
  for (size_t size : sizes) {
    for (Kind k : {Kind::small, Kind::thp, Kind::huge2m, Kind::huge1g, Kind::hugepool}) {
      std::vector<double> reg, unreg;
      for (int r = 0; r < reps; r++) {
        void *p = map_kind(k, size);
        if (!p) break;
        std::memset(p, 1, size);
        double t0 = now_ms();
        check(cu.host_register(p, size, 0), "cuMemHostRegister");
        double t1 = now_ms();
        check(cu.host_unregister(p), "cuMemHostUnregister");
        double t2 = now_ms();
        reg.push_back(per_gb(t1 - t0, size));
        unreg.push_back(per_gb(t2 - t1, size));
        unmap_kind(k, p, size);
      }
      std::string tag = std::string(kind_name(k)) + ", " + std::to_string(size >> 20) + " MiB";
      if (reg.empty()) {
        std::printf("%-58s skipped (no pages of this kind)\n", tag.c_str());
        continue;
      }
      report("register " + tag, reg, "ms/GB");
      report("unregister " + tag, unreg, "ms/GB");
      if (size == (size_t{1} << 30) && k == Kind::small) res.reg_small_1g = summarise(reg).median;
      if (size == (size_t{1} << 30) && k == Kind::hugepool) res.reg_hugepool_1g = summarise(reg).median;
    }
  }
}

// The driver's pinned allocation against hugepool's registered buffer: the
// first use (fresh mapping, faulted in by the registration) and a cache hit.
void pinned_allocation(size_t size, int reps, int cuda_id) {
  std::printf("\n== a pinned buffer, ms per GB all in\n");
  std::vector<double> host_alloc, first, hit;
  for (int r = 0; r < reps; r++) {
    void *p = nullptr;
    double t0 = now_ms();
    check(cu.host_alloc(&p, size, 0), "cuMemHostAlloc");
    host_alloc.push_back(per_gb(now_ms() - t0, size));
    cu.free_host(p);
    hugepool_trim();
    t0 = now_ms();
    void *q = hugepool_alloc_registered(size, cuda_id);
    first.push_back(per_gb(now_ms() - t0, size));
    if (!q) skip("hugepool_alloc_registered failed: is the pool large enough? (bench/run gpu sets it)");
    hugepool_free(q);
    t0 = now_ms();
    q = hugepool_alloc_registered(size, cuda_id);
    hit.push_back(per_gb(now_ms() - t0, size));
    hugepool_free(q);
  }
  hugepool_trim();
  report("cuMemHostAlloc", host_alloc, "ms/GB");
  report("hugepool_alloc_registered, first use", first, "ms/GB");
  report("hugepool_alloc_registered, cache hit", hit, "ms/GB");
  res.hostalloc_1g = summarise(host_alloc).median;
  res.first_use_1g = summarise(first).median;
  res.hit_1g = summarise(hit).median;
}

double copy_ms(CUdeviceptr dev, void *host, size_t size, bool to_device) {
  double t0 = now_ms();
  check(to_device ? cu.htod(dev, host, size) : cu.dtoh(host, dev, size), "cuMemcpy");
  check(cu.ctx_synchronize(), "cuCtxSynchronize");
  return now_ms() - t0;
}

void copy_rates(size_t size, int reps) {
  std::printf("\n== copy rates, GB/s\n");
  CUdeviceptr dev;
  check(cu.mem_alloc(&dev, size), "cuMemAlloc");
  void *host = hugepool_alloc(size);
  if (!host) skip("hugepool_alloc of the copy buffer failed (pool too small)");
  std::memset(host, 1, size);
  for (bool registered : {false, true}) {
    if (registered) check(cu.host_register(host, size, 0), "cuMemHostRegister");
    for (bool h2d : {true, false}) {
      std::vector<double> gbs;
      for (int r = 0; r < reps; r++) gbs.push_back(double(size) / 1e6 / copy_ms(dev, host, size, h2d));
      report(std::string(h2d ? "H2D " : "D2H ") + (registered ? "registered" : "unregistered"), gbs, "GB/s");
    }
  }
  check(cu.host_unregister(host), "cuMemHostUnregister");
  hugepool_free(host);
  cu.mem_free(dev);
}

// A data loader: allocate, fill, register, copy, unregister, free 256 MB,
// every iteration, through the driver's exported symbols (as a program that
// links libcuda calls them): under hugepool-run --cuda the registrations are
// served by the cache.  Against the copy alone, from a buffer registered once.
void loop(int reps) {
  const size_t size = size_t{256} << 20;
  CUdeviceptr dev;
  check(cu.mem_alloc(&dev, size), "cuMemAlloc");
  std::vector<double> alone, iter;
  void *fixed = std::malloc(size);
  std::memset(fixed, 2, size);
  check(cu.host_register(fixed, size, 0), "cuMemHostRegister");
  for (int r = 0; r < reps; r++) alone.push_back(copy_ms(dev, fixed, size, true));
  check(cu.host_unregister(fixed), "cuMemHostUnregister");
  std::free(fixed);
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now_ms();
    void *p = std::malloc(size);
    std::memset(p, r, 4096);  // a loader writes its batch; the copy reads it all
    check(cu.host_register(p, size, 0), "cuMemHostRegister");
    copy_ms(dev, p, size, true);
    check(cu.host_unregister(p), "cuMemHostUnregister");
    std::free(p);
    if (r > 0) iter.push_back(now_ms() - t0);  // the first maps the buffer: not the steady state
  }
  cu.mem_free(dev);
  std::printf("\n== 256 MB loop (malloc, register, copy H2D, unregister, free), ms an iteration\n");
  report("copy alone (registered once)", alone, "ms");
  report("loop", iter, "ms");
  res.copy_alone_ms = summarise(alone).median;
  res.loop_ms = summarise(iter).median;
  std::printf("loop/copy: %.2f\n", res.loop_ms / res.copy_alone_ms);
}

void target(const char *what, bool pass, const std::string &detail) {
  std::printf("target: %-4s %s (%s)\n", pass ? "PASS" : "FAIL", what, detail.c_str());
}

// "A vs B UNIT" with `digits` decimals for A.
std::string versus(double a, double b, int digits, const char *unit) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%.*f vs %.1f %s", digits, a, b, unit);
  return buf;
}

void targets() {
  std::printf("\n== targets\n");
  if (res.hostalloc_1g > 0) {
    target("registered buffer >= 2x faster per GB than cuMemHostAlloc, first use",
           res.first_use_1g * 2 <= res.hostalloc_1g, versus(res.first_use_1g, res.hostalloc_1g, 1, "ms/GB"));
    target("cache hit < 1% of cuMemHostAlloc", res.hit_1g < 0.01 * res.hostalloc_1g,
           versus(res.hit_1g, res.hostalloc_1g, 3, "ms/GB"));
  }
  if (res.reg_small_1g > 0 && res.reg_hugepool_1g > 0)
    target("registration per GB <= 0.55x that of 4 KB pages (1 GiB)", res.reg_hugepool_1g <= 0.55 * res.reg_small_1g,
           versus(res.reg_hugepool_1g, res.reg_small_1g, 1, "ms/GB"));
}

// An unmodified program's 1 GB H2D copies from a malloc'd buffer, through
// the driver's exported cuMemcpyHtoD_v2 (under hugepool-run --cuda=all the
// buffer is registered at the first copy).
int unmodified(int reps) {
  const size_t size = size_t{1} << 30;
  using htod_fn = CUresult (*)(CUdeviceptr, const void *, size_t);
  htod_fn htod;
  resolve(nullptr, &htod, "cuMemcpyHtoD_v2", true);
  CUdeviceptr dev;
  check(cu.mem_alloc(&dev, size), "cuMemAlloc");
  void *host = std::malloc(size);
  std::memset(host, 3, size);
  std::vector<double> gbs;
  for (int r = 0; r <= reps; r++) {
    double t0 = now_ms();
    check(htod(dev, host, size), "cuMemcpyHtoD");
    check(cu.ctx_synchronize(), "cuCtxSynchronize");
    if (r > 0) gbs.push_back(double(size) / 1e6 / (now_ms() - t0));  // the first pays the registration
  }
  std::free(host);
  cu.mem_free(dev);
  report("unmodified program, 1 GiB H2D from malloc", gbs, "GB/s");
  double median = summarise(gbs).median;
  target("an unmodified program's 1 GB H2D copy >= 45 GB/s (hugepool-run --cuda=all)", median >= 45,
         versus(median, 45, 1, "GB/s"));
  return 0;
}

// hugepool asked to register with no context in the process: refused, and
// still no context afterwards (the primary context of every device inactive).
int nocontext() {
  int id = hugepool_registrar_cuda();
  if (id < 0) skip("hugepool_registrar_cuda: no driver or device");
  void *p = hugepool_alloc_registered(size_t{4} << 20, id);
  int err = errno;
  int n = 0, active_any = 0;
  cu.device_count(&n);
  for (int d = 0; d < n; d++) {
    unsigned flags;
    int active = 0, dev;
    cu.device_get(&dev, d);
    cu.primary_state(dev, &flags, &active);
    active_any |= active;
  }
  CUcontext cur = nullptr;
  cu.ctx_get_current(&cur);
  bool pass = !p && err == ENXIO && !active_any && !cur;
  target("no CUDA context created in a process that did not create one", pass,
         p ? "registered without a context?" : "refused with ENXIO, no context");
  return pass ? 0 : 1;
}

std::vector<size_t> parse_sizes(const char *s) {
  std::vector<size_t> out;
  while (*s) {
    char *end;
    size_t v = std::strtoull(s, &end, 10);
    if (*end == 'M')
      v <<= 20, end++;
    else if (*end == 'G')
      v <<= 30, end++;
    out.push_back(v);
    s = *end == ',' ? end + 1 : end;
    if (end == s && *s) break;
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  std::vector<size_t> sizes = {size_t{64} << 20, size_t{1} << 30};
  int reps = 7;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sizes") == 0) sizes = parse_sizes(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  }
  open_driver();
  if (mode == "probe") {  // a driver and a device: the gpu suite goes on
    std::printf("a CUDA driver with a device\n");
    return 0;
  }
  if (mode == "nocontext") return nocontext();
  make_context();
  if (mode == "loop") {
    loop(reps);
    return 0;
  }
  if (mode == "unmodified") return unmodified(reps);
  if (mode != "all") {
    std::fprintf(stderr, "usage: hugepool-bench-gpu all|loop|unmodified|nocontext|probe [--sizes 64M,1G] [--reps N]\n");
    return 2;
  }
  int id = hugepool_registrar_cuda();
  if (id < 0) skip("hugepool_registrar_cuda failed");
  registration_by_kind(sizes, reps);
  pinned_allocation(size_t{1} << 30, reps, id);
  copy_rates(size_t{1} << 30, reps);
  loop(reps);
  targets();
  return 0;
}
