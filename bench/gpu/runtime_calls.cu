// SPDX-License-Identifier: BSD-3-Clause
// How a CUDA program built with nvcc reaches host registration and copies,
// and whether hugepool-run --cuda serves them: bench/suites/gpu builds it
// with the node's nvcc three ways (the runtime linked shared, static, and
// shared with the per-thread default stream) and runs each plain and under
// hugepool-run --cuda / --cuda=all.  Every path prints one line:
//
//   path NAME first_ms SECOND_ms ok|BAD
//
// first_ms: the first registration of a 256 MiB malloc'd buffer; second_ms:
// the same buffer registered again after its unregister (a served
// registration is a cache hit: microseconds; the driver's costs what the
// first did).  Copy lines give GB/s of 1 GiB from malloc'd memory, not
// registered by the program, and check the bytes.  Exits 1 when a copy
// returns wrong bytes or a call fails.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
int failures;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

bool ok(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess) return true;
  std::printf("error %s: %s\n", what, cudaGetErrorString(rc));
  failures++;
  return false;
}

typedef CUresult (*drv_register_fn)(void *, size_t, unsigned);
typedef CUresult (*drv_unregister_fn)(void *);

// Registers p twice through reg/unreg; prints first and second time.
template <class R, class U>
void twice(const char *name, void *p, size_t n, R reg, U unreg) {
  double t0 = now_ms();
  bool good = reg(p, n);
  double first = now_ms() - t0;
  good = good && unreg(p);
  t0 = now_ms();
  good = good && reg(p, n);
  double second = now_ms() - t0;
  good = good && unreg(p);
  std::printf("path %-34s %9.3f %9.3f %s\n", name, first, second, good ? "ok" : "BAD");
  if (!good) failures++;
}

void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
  p[n - 1] = (unsigned char)seed;
}

bool same(const unsigned char *a, const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i += 4096)
    if (a[i] != b[i]) return false;
  return a[n - 1] == b[n - 1];
}

// cudaHostAlloc of n bytes, a copy from it, cudaFreeHost; twice: the time
// of each allocation (the second follows the first's free) and the rate.
void host_alloc_twice(size_t n) {
  double ms[2] = {0, 0}, gbs = 0;
  bool good = true;
  void *d = nullptr;
  if (!ok(cudaMalloc(&d, n), "cudaMalloc")) return;
  for (int r = 0; r < 2; r++) {
    void *q = nullptr;
    double t0 = now_ms();
    good &= ok(cudaHostAlloc(&q, n, cudaHostAllocDefault), "cudaHostAlloc");
    ms[r] = now_ms() - t0;
    if (!q) break;
    fill(static_cast<unsigned char *>(q), n, 5);
    t0 = now_ms();
    good &= ok(cudaMemcpy(d, q, n, cudaMemcpyHostToDevice), "cudaMemcpy from cudaHostAlloc");
    gbs = double(n) / 1e6 / (now_ms() - t0);
    unsigned char *back = static_cast<unsigned char *>(std::calloc(n, 1));
    good &= back && ok(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H") &&
            same(static_cast<unsigned char *>(q), back, n);
    std::free(back);
    good &= ok(cudaFreeHost(q), "cudaFreeHost");
  }
  cudaFree(d);
  std::printf("path %-34s %9.3f %9.3f %s  (copy %.1f GB/s)\n", "cudaHostAlloc/cudaFreeHost", ms[0], ms[1],
              good ? "ok" : "BAD", gbs);
  if (!good) failures++;
}

// 1 GiB H2D then D2H from malloc'd memory, the bytes compared.
void copies(const char *name, bool async, int reps) {
  const size_t n = size_t{1} << 30;
  unsigned char *h = static_cast<unsigned char *>(std::malloc(n));
  unsigned char *back = static_cast<unsigned char *>(std::malloc(n));
  std::memset(h, 7, n);
  std::memset(back, 0, n);
  fill(h, n, 3);
  void *d = nullptr;
  if (!ok(cudaMalloc(&d, n), "cudaMalloc")) return;
  cudaStream_t s;
  ok(cudaStreamCreate(&s), "cudaStreamCreate");
  double best = 0, first = 0;
  for (int r = 0; r <= reps; r++) {
    double t0 = now_ms();
    if (async) {
      ok(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
      ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    } else {
      ok(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    double gbs = double(n) / 1e6 / (now_ms() - t0);
    if (r == 0) first = gbs;
    else if (gbs > best) best = gbs;
  }
  ok(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  bool good = same(h, back, n);
  // a 2D copy: 1000 rows of 1 MiB out of a 1 GiB host pitch... a column block
  const size_t width = size_t{1} << 20, pitch = 2 * width, rows = 400;
  std::memset(back, 0, n);
  ok(cudaMemcpy2D(d, width, h, pitch, width, rows, cudaMemcpyHostToDevice), "cudaMemcpy2D H2D");
  ok(cudaMemcpy2D(back, pitch, d, width, width, rows, cudaMemcpyDeviceToHost), "cudaMemcpy2D D2H");
  for (size_t r = 0; r < rows && good; r++) good = same(h + r * pitch, back + r * pitch, width);
  std::printf("copy %-34s first %7.1f best %7.1f GB/s %s\n", name, first, best, good ? "ok" : "BAD");
  if (!good) failures++;
  cudaStreamDestroy(s);
  cudaFree(d);
  std::free(h);
  std::free(back);
}
}  // namespace

int main(int argc, char **argv) {
  const char *variant = argc > 1 ? argv[1] : "?";
  ok(cudaSetDevice(0), "cudaSetDevice");
  ok(cudaFree(nullptr), "cudaFree(0)");  // the context
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  std::printf("variant %s runtime %d driver %d\n", variant, rt, drv);
  const size_t n = size_t{256} << 20;
  unsigned char *p = static_cast<unsigned char *>(std::malloc(n));
  std::memset(p, 1, n);
  twice("cudaHostRegister", p, n,
        [](void *q, size_t m) { return ok(cudaHostRegister(q, m, cudaHostRegisterDefault), "cudaHostRegister"); },
        [](void *q) { return ok(cudaHostUnregister(q), "cudaHostUnregister"); });
  twice("cuMemHostRegister (linked)", p, n,
        [](void *q, size_t m) { return cuMemHostRegister(q, m, 0) == CUDA_SUCCESS; },
        [](void *q) { return cuMemHostUnregister(q) == CUDA_SUCCESS; });
  static drv_register_fn reg = nullptr;
  static drv_unregister_fn unreg = nullptr;
  cudaDriverEntryPointQueryResult st;
  if (ok(cudaGetDriverEntryPointByVersion("cuMemHostRegister", reinterpret_cast<void **>(&reg), 12000,
                                          cudaEnableDefault, &st), "cudaGetDriverEntryPointByVersion") &&
      ok(cudaGetDriverEntryPointByVersion("cuMemHostUnregister", reinterpret_cast<void **>(&unreg), 12000,
                                          cudaEnableDefault, &st), "cudaGetDriverEntryPointByVersion"))
    twice("cudaGetDriverEntryPointByVersion", p, n, [](void *q, size_t m) { return reg(q, m, 0) == CUDA_SUCCESS; },
          [](void *q) { return unreg(q) == CUDA_SUCCESS; });
  CUdriverProcAddressQueryResult dst;
  if (cuGetProcAddress("cuMemHostRegister", reinterpret_cast<void **>(&reg), 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                       &dst) == CUDA_SUCCESS &&
      cuGetProcAddress("cuMemHostUnregister", reinterpret_cast<void **>(&unreg), 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                       &dst) == CUDA_SUCCESS)
    twice("cuGetProcAddress (linked)", p, n, [](void *q, size_t m) { return reg(q, m, 0) == CUDA_SUCCESS; },
          [](void *q) { return unreg(q) == CUDA_SUCCESS; });
  std::free(p);
  host_alloc_twice(n);
  copies("cudaMemcpy", false, 3);
  copies("cudaMemcpyAsync", true, 3);
  std::printf("failures %d\n", failures);
  return failures ? 1 : 0;
}
