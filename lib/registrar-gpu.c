/* SPDX-License-Identifier: BSD-3-Clause */
/* The GPU drivers as registrars (registrar.h): CUDA's cuMemHostRegister and
 * ROCm's hipHostRegister, each opened with dlopen on the first call that
 * asks for it, never before: no build dependency, and a program that does
 * not ask never loads a driver.
 *
 * Rules (the CUDA driver API, cuda.h of CUDA 12/13; the few declarations
 * needed are written here):
 *  1. hugepool never creates a CUDA context.  A registration uses the
 *     calling thread's current context (cuCtxGetCurrent); else a device's
 *     primary context that the program made active already
 *     (cuDevicePrimaryCtxGetState), pushed for the call and popped after;
 *     else it fails with ENXIO and one line.
 *  2. Registered portable and mapped (CU_MEMHOSTREGISTER_PORTABLE |
 *     CU_MEMHOSTREGISTER_DEVICEMAP): usable from every context, and what
 *     cudaHostRegister's default gives with unified addressing.
 *  3. The driver's errors become errno values, with the driver's name of
 *     the error in one line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "registrar.h"

typedef int CUresult; /* CUDA_SUCCESS 0 */
typedef void *CUcontext;
typedef int CUdevice;
#define CU_MEMHOSTREGISTER_PORTABLE 0x01u
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02u

static struct {
  CUresult (*init)(unsigned flags);
  CUresult (*ctx_get_current)(CUcontext *ctx);
  CUresult (*device_get_count)(int *count);
  CUresult (*device_get)(CUdevice *dev, int ordinal);
  CUresult (*primary_state)(CUdevice dev, unsigned *flags, int *active);
  CUresult (*primary_retain)(CUcontext *ctx, CUdevice dev);
  CUresult (*primary_release)(CUdevice dev);
  CUresult (*ctx_push)(CUcontext ctx);
  CUresult (*ctx_pop)(CUcontext *ctx);
  CUresult (*host_register)(void *p, size_t bytes, unsigned flags);
  CUresult (*host_unregister)(void *p);
  CUresult (*error_name)(CUresult err, const char **name);
  CUresult (*ctx_synchronize)(void);
} cu;

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int cuda_id, hip_id; /* 0: not added yet; -1: failed */
static _Atomic long owner_pid_a;    /* the process that added them */

static const char *cu_error(CUresult rc) {
  const char *name = NULL;
  if (!cu.error_name || cu.error_name(rc, &name) != 0 || !name) return "CUDA error";
  return name;
}

static int cu_errno(CUresult rc) {
  switch (rc) {
    case 0: return 0;
    case 1: return EINVAL;    /* CUDA_ERROR_INVALID_VALUE */
    case 2: return ENOMEM;    /* CUDA_ERROR_OUT_OF_MEMORY */
    case 100: return ENODEV;  /* CUDA_ERROR_NO_DEVICE */
    case 712: return EEXIST;  /* CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED */
    case 713: return ENOENT;  /* CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED */
    case 801: return ENOTSUP; /* CUDA_ERROR_NOT_SUPPORTED */
    default: return EIO;
  }
}

/* A context for the call, never a new one: the current one, else an active
 * primary context (pushed; *pushed_dev says which to release).  0, or
 * ENXIO when the program has none. */
/* Device ordinal i's primary context, retained (*dev, *ctx), if the
 * program made it active: retaining an active one creates nothing. */
static bool retain_active_primary(int i, CUdevice *dev, CUcontext *ctx) {
  unsigned flags;
  int active = 0;
  return cu.device_get(dev, i) == 0 && cu.primary_state(*dev, &flags, &active) == 0 && active &&
         cu.primary_retain(ctx, *dev) == 0;
}

static int cu_enter(int *pushed_dev) {
  CUcontext ctx = NULL;
  *pushed_dev = -1;
  if (cu.ctx_get_current(&ctx) == 0 && ctx) return 0;
  int count = 0;
  if (cu.device_get_count(&count) != 0) return ENXIO;
  for (int i = 0; i < count; i++) {
    CUdevice dev;
    if (!retain_active_primary(i, &dev, &ctx)) continue;
    if (cu.ctx_push(ctx) == 0) {
      *pushed_dev = dev;
      return 0;
    }
    cu.primary_release(dev);
  }
  return ENXIO;
}

static void cu_leave(int pushed_dev) {
  if (pushed_dev < 0) return;
  CUcontext ctx;
  cu.ctx_pop(&ctx);
  cu.primary_release(pushed_dev);
}

static int cuda_reg(void *context, void *addr, size_t len, void **handle) {
  (void)context;
  int dev;
  static atomic_bool said;
  if (cu_enter(&dev) != 0) {
    if (!atomic_exchange(&said, true))
      hp_warn(
          "CUDA registrar: no CUDA context in this process (hugepool never creates one): initialise CUDA first "
          "(cudaSetDevice(), cudaFree(0) or cuCtxCreate())");
    return ENXIO;
  }
  CUresult rc = cu.host_register(addr, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  cu_leave(dev);
  if (rc != 0) hp_warn("CUDA registrar: cuMemHostRegister of %zu MiB at %p: %s", len >> 20, addr, cu_error(rc));
  *handle = addr;
  return cu_errno(rc);
}

static int cuda_unreg(void *context, void *addr, size_t len, void *handle) {
  (void)context, (void)len, (void)handle;
  int dev;
  if (cu_enter(&dev) != 0) return 0; /* every context is gone, and its registrations with it */
  CUresult rc = cu.host_unregister(addr);
  cu_leave(dev);
  return rc == 713 ? 0 : cu_errno(rc); /* not registered (any more): nothing to drop */
}

static bool cu_resolve(void *lib) {
  struct {
    void **slot;
    const char *name;
  } syms[] = {
      {(void **)&cu.init, "cuInit"},
      {(void **)&cu.ctx_get_current, "cuCtxGetCurrent"},
      {(void **)&cu.device_get_count, "cuDeviceGetCount"},
      {(void **)&cu.device_get, "cuDeviceGet"},
      {(void **)&cu.primary_state, "cuDevicePrimaryCtxGetState"},
      {(void **)&cu.primary_retain, "cuDevicePrimaryCtxRetain"},
      {(void **)&cu.primary_release, "cuDevicePrimaryCtxRelease_v2"},
      {(void **)&cu.ctx_push, "cuCtxPushCurrent_v2"},
      {(void **)&cu.ctx_pop, "cuCtxPopCurrent_v2"},
      {(void **)&cu.host_register, "cuMemHostRegister_v2"},
      {(void **)&cu.host_unregister, "cuMemHostUnregister"},
      {(void **)&cu.error_name, "cuGetErrorName"},
      {(void **)&cu.ctx_synchronize, "cuCtxSynchronize"},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!(*syms[i].slot = dlsym(lib, syms[i].name))) return false;
  return true;
}

static int open_cuda(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    hp_warn("CUDA registrar: no CUDA driver on this machine (%s)", dlerror());
    return -1;
  }
  if (!cu_resolve(lib)) {
    hp_warn("CUDA registrar: libcuda.so.1 lacks the driver API hugepool needs (CUDA 11.3 or later)");
    return -1;
  }
  CUresult rc = cu.init(0);
  if (rc != 0) {
    hp_warn("CUDA registrar: cuInit: %s, %d (no usable CUDA device)", cu_error(rc), rc);
    return -1;
  }
  hugepool_registrar r = {.name = "cuMemHostRegister", .reg = cuda_reg, .unreg = cuda_unreg};
  return registrar_add(&r);
}

/* ---- ROCm (HIP runtime) ----------------------------------------------- */
static struct {
  int (*get_device_count)(int *count);
  int (*host_register)(void *p, size_t bytes, unsigned flags);
  int (*host_unregister)(void *p);
} hip;
#define HIP_HOST_REGISTER_PORTABLE 0x1u
#define HIP_HOST_REGISTER_MAPPED 0x2u

static int hip_reg(void *context, void *addr, size_t len, void **handle) {
  (void)context;
  int rc = hip.host_register(addr, len, HIP_HOST_REGISTER_PORTABLE | HIP_HOST_REGISTER_MAPPED);
  if (rc != 0) hp_warn("HIP registrar: hipHostRegister of %zu MiB at %p: error %d", len >> 20, addr, rc);
  *handle = addr;
  return rc == 0 ? 0 : rc == 1 ? EINVAL : rc == 2 ? ENOMEM : rc == 712 ? EEXIST : EIO;
}

static int hip_unreg(void *context, void *addr, size_t len, void *handle) {
  (void)context, (void)len, (void)handle;
  int rc = hip.host_unregister(addr);
  return rc == 0 || rc == 713 ? 0 : EIO;
}

static int open_hip(void) {
  static const char *names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  void *lib = NULL;
  for (size_t i = 0; i < 3 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    hp_warn("HIP registrar: no ROCm runtime on this machine (libamdhip64.so not found)");
    return -1;
  }
  *(void **)&hip.get_device_count = dlsym(lib, "hipGetDeviceCount");
  *(void **)&hip.host_register = dlsym(lib, "hipHostRegister");
  *(void **)&hip.host_unregister = dlsym(lib, "hipHostUnregister");
  int count = 0;
  if (!hip.get_device_count || !hip.host_register || !hip.host_unregister || hip.get_device_count(&count) != 0 ||
      count == 0) {
    hp_warn("HIP registrar: no usable ROCm device");
    return -1;
  }
  hugepool_registrar r = {.name = "hipHostRegister", .reg = hip_reg, .unreg = hip_unreg};
  return registrar_add(&r);
}

/* Opens a driver once; a failure is remembered (later calls fail the same
 * way, without a line: the machine will not grow a GPU meanwhile).  A
 * forked child inherits the id of a registrar it does not have
 * (registrar_child_forget): it is refused. */

static int added_once(_Atomic int *id, int (*open_fn)(void)) {
  int out = atomic_load(id);
  if (out > 0 && atomic_load(&owner_pid_a) != os_pid()) {
    hp_warn("GPU registrar: a forked child cannot use its parent's driver registrations");
    errno = ENODEV;
    return -1;
  }
  pthread_mutex_lock(&open_lock);
  if (atomic_load(id) == 0) {
    int got = open_fn();
    atomic_store(&owner_pid_a, os_pid());
    atomic_store(id, got > 0 ? got : -1);
  }
  out = atomic_load(id);
  pthread_mutex_unlock(&open_lock);
  if (out < 0) errno = ENODEV;
  return out;
}

int registrar_cuda(void) { return added_once(&cuda_id, open_cuda); }

/* The CUDA registrar added by this process (never a forked child's parent:
 * CUDA does not work across fork). */
static bool cuda_ours(void) { return atomic_load(&cuda_id) > 0 && atomic_load(&owner_pid_a) == os_pid(); }

bool registrar_cuda_context(void) {
  int dev;
  if (!cuda_ours() || cu_enter(&dev) != 0) return false;
  cu_leave(dev);
  return true;
}

/* Every context that may be using a portable buffer: the calling thread's,
 * and each device's primary context that is active. */
int registrar_cuda_synchronize(void) {
  if (!cuda_ours()) return 0;
  int first_error = 0, count = 0;
  CUcontext cur = NULL;
  if (cu.ctx_get_current(&cur) == 0 && cur) first_error = cu.ctx_synchronize();
  if (cu.device_get_count(&count) != 0) return first_error;
  for (int i = 0; i < count; i++) {
    CUdevice dev;
    CUcontext ctx;
    if (!retain_active_primary(i, &dev, &ctx)) continue;
    if (ctx != cur && cu.ctx_push(ctx) == 0) {
      int err = cu.ctx_synchronize();
      if (!first_error) first_error = err;
      cu.ctx_pop(&ctx);
    }
    cu.primary_release(dev);
  }
  return first_error;
}

int registrar_hip(void) { return added_once(&hip_id, open_hip); }
