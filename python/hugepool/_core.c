/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hugepool._core: the C half of the Python package.
 *
 * A Buffer owns one hugepool buffer (hugepool_alloc) or one node-shared
 * segment (hugepool_segment_create / _map) and exports it through the
 * buffer protocol, writable and C-contiguous.  numpy arrays are made over it
 * with numpy.frombuffer (hugepool/__init__.py): each array (and each view of
 * it, each memoryview, each MPI request holding it) keeps a reference to the
 * Buffer, so the memory goes back to hugepool's cache (or is unmapped) only
 * when the last of them is gone, and nothing is ever copied.
 *
 * Every library call that may wait (a map, a populate, a release) runs with
 * the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hugepool/hugepool.h"

typedef struct {
  PyObject_HEAD void *addr;
  size_t size;           /* bytes usable: whole pages */
  size_t requested;      /* bytes asked for */
  int is_segment;        /* 1: seg is a segment (created or mapped here) */
  hugepool_segment seg;
  Py_ssize_t exports;
} Buffer;

/* The reason for a failed request of `bytes` bytes, with the pool's state for
 * a shortage: the text of the exception. */
static void failure_text(char *buf, size_t len, const char *what, int err, size_t bytes) {
  size_t page = hugepool_get_page_size();
  if (err == ENOMEM && page) {
    long free_pages = hugepool_pool_free_pages(HUGEPOOL_ANY_NODE);
    size_t need = bytes / page + (bytes % page != 0);
    snprintf(buf, len,
             "hugepool: cannot %s %zu bytes on %zu MB pages: %zu pages needed, %ld free in the pool, policy %s "
             "(%s); reserve more (hugepool-reserve, /proc/sys/vm/nr_hugepages) or allow a fallback "
             "(hugepool.set_policy('thp'), HUGEPOOL_POLICY=thp)",
             what, bytes, page >> 20, need, free_pages, hugepool_policy_name(hugepool_get_policy()), strerror(err));
  } else {
    snprintf(buf, len, "hugepool: cannot %s %zu bytes (%s)", what, bytes, strerror(err));
  }
}

/* MemoryError for ENOMEM, ValueError for EINVAL, OSError(errno) otherwise. */
static PyObject *raise_errno(const char *what, int err, size_t bytes) {
  char text[768];
  failure_text(text, sizeof(text), what, err, bytes);
  if (err == ENOMEM) {
    PyErr_SetString(PyExc_MemoryError, text);
  } else if (err == EINVAL) {
    PyErr_SetString(PyExc_ValueError, text);
  } else {
    PyObject *args = Py_BuildValue("(is)", err, text);
    if (args) {
      PyErr_SetObject(PyExc_OSError, args);
      Py_DECREF(args);
    }
  }
  return NULL;
}

static void Buffer_dealloc(Buffer *self) {
  if (self->addr) {
    Py_BEGIN_ALLOW_THREADS;
    if (self->is_segment) {
      hugepool_segment_unmap(&self->seg);
    } else {
      hugepool_free(self->addr);
    }
    Py_END_ALLOW_THREADS;
    self->addr = NULL;
  }
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Buffer_getbuffer(Buffer *self, Py_buffer *view, int flags) {
  if (!self->addr) {
    PyErr_SetString(PyExc_BufferError, "hugepool: the buffer was released");
    view->obj = NULL;
    return -1;
  }
  if (PyBuffer_FillInfo(view, (PyObject *)self, self->addr, (Py_ssize_t)self->size, 0, flags) < 0) return -1;
  self->exports++;
  return 0;
}

static void Buffer_releasebuffer(Buffer *self, Py_buffer *view) {
  (void)view;
  self->exports--;
}

static PyBufferProcs Buffer_as_buffer = {
    .bf_getbuffer = (getbufferproc)Buffer_getbuffer,
    .bf_releasebuffer = (releasebufferproc)Buffer_releasebuffer,
};

static PyObject *Buffer_address(Buffer *self, void *closure) {
  (void)closure;
  return PyLong_FromVoidPtr(self->addr);
}

static PyObject *Buffer_nbytes(Buffer *self, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(self->size);
}

static PyObject *Buffer_kind(Buffer *self, void *closure) {
  (void)closure;
  if (self->is_segment) return PyUnicode_FromString(self->seg.created ? "segment" : "mapped segment");
  return PyUnicode_FromString(hugepool_kind_name(hugepool_kind_of(self->addr)));
}

/* A segment's handle, as the bytes of hugepool_segment_handle (48 bytes). */
static PyObject *Buffer_handle(Buffer *self, void *closure) {
  (void)closure;
  if (!self->is_segment) Py_RETURN_NONE;
  return PyBytes_FromStringAndSize((const char *)&self->seg.handle, sizeof(self->seg.handle));
}

static PyGetSetDef Buffer_getset[] = {
    {"address", (getter)Buffer_address, NULL, "The buffer's address in this process.", NULL},
    {"nbytes", (getter)Buffer_nbytes, NULL, "Its usable size in bytes: a whole number of huge pages.", NULL},
    {"kind", (getter)Buffer_kind, NULL,
     "The memory behind it: 'huge-2M', 'huge-1G', 'thp', 'small' (a fallback), 'segment', 'mapped segment'.", NULL},
    {"handle", (getter)Buffer_handle, NULL, "For a segment: the bytes to send to the processes that map it.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hugepool._core.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory on hugetlb pages owned by hugepool, exported through the buffer protocol; given back to "
              "hugepool's cache (or unmapped, for a segment) when the last reference to it goes.",
    .tp_getset = Buffer_getset,
};

static Buffer *buffer_new(void) { return PyObject_New(Buffer, &BufferType); }

static PyObject *core_alloc(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t nbytes;
  int zero = 0, registrar = 0;
  if (!PyArg_ParseTuple(args, "n|pi", &nbytes, &zero, &registrar)) return NULL;
  if (nbytes <= 0) {
    PyErr_SetString(PyExc_ValueError, "hugepool: a buffer needs at least one byte");
    return NULL;
  }
  void *p;
  int err;
  Py_BEGIN_ALLOW_THREADS;
  errno = 0;
  if (registrar > 0) {
    p = hugepool_alloc_registered((size_t)nbytes, registrar);
    if (p && zero) memset(p, 0, (size_t)nbytes);
  } else {
    p = zero ? hugepool_calloc(1, (size_t)nbytes) : hugepool_alloc((size_t)nbytes);
  }
  err = p ? 0 : (errno ? errno : ENOMEM);
  Py_END_ALLOW_THREADS;
  if (!p) return raise_errno("allocate", err, (size_t)nbytes);
  Buffer *b = buffer_new();
  if (!b) {
    hugepool_free(p);
    return NULL;
  }
  b->addr = p;
  b->size = hugepool_usable_size(p);
  b->requested = (size_t)nbytes;
  b->is_segment = 0;
  b->exports = 0;
  memset(&b->seg, 0, sizeof(b->seg));
  return (PyObject *)b;
}

static PyObject *segment_buffer(const hugepool_segment *seg) {
  Buffer *b = buffer_new();
  if (!b) {
    hugepool_segment seg_copy = *seg;
    hugepool_segment_unmap(&seg_copy);
    return NULL;
  }
  b->seg = *seg;
  b->addr = seg->addr;
  b->size = seg->size;
  b->requested = seg->size;
  b->is_segment = 1;
  b->exports = 0;
  return (PyObject *)b;
}

static PyObject *core_segment_create(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t nbytes;
  int node = HUGEPOOL_ANY_NODE;
  if (!PyArg_ParseTuple(args, "n|i", &nbytes, &node)) return NULL;
  if (nbytes <= 0) {
    PyErr_SetString(PyExc_ValueError, "hugepool: a segment needs at least one byte");
    return NULL;
  }
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  opts.node = node;
  hugepool_segment seg;
  int rc, err;
  Py_BEGIN_ALLOW_THREADS;
  rc = hugepool_segment_create((size_t)nbytes, &opts, &seg);
  err = rc ? errno : 0;
  Py_END_ALLOW_THREADS;
  if (rc) return raise_errno("create a segment of", err, (size_t)nbytes);
  return segment_buffer(&seg);
}

static PyObject *core_segment_map(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_buffer h;
  if (!PyArg_ParseTuple(args, "y*", &h)) return NULL;
  if (h.len != (Py_ssize_t)sizeof(hugepool_segment_handle)) {
    PyBuffer_Release(&h);
    PyErr_Format(PyExc_ValueError, "hugepool: a segment handle is %zu bytes, not %zd", sizeof(hugepool_segment_handle),
                 h.len);
    return NULL;
  }
  hugepool_segment_handle handle;
  memcpy(&handle, h.buf, sizeof(handle));
  PyBuffer_Release(&h);
  hugepool_segment seg;
  int rc, err;
  Py_BEGIN_ALLOW_THREADS;
  rc = hugepool_segment_map(&handle, &seg);
  err = rc ? errno : 0;
  Py_END_ALLOW_THREADS;
  if (rc) {
    PyObject *args2 = Py_BuildValue("(is)", err, "hugepool: cannot map the segment of that handle");
    if (args2) {
      PyErr_SetObject(PyExc_OSError, args2);
      Py_DECREF(args2);
    }
    return NULL;
  }
  return segment_buffer(&seg);
}

static PyObject *core_stats(PyObject *mod, PyObject *noargs) {
  (void)mod;
  (void)noargs;
  hugepool_stats s;
  hugepool_get_stats(&s);
  return Py_BuildValue(
      "{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}", "allocs", s.allocs, "frees", s.frees, "failures",
      s.failures, "cache_hits", s.cache_hits, "cache_misses", s.cache_misses, "cache_evictions", s.cache_evictions,
      "trims", s.trims, "fallbacks_thp", s.fallbacks_thp, "fallbacks_small", s.fallbacks_small, "maps", s.maps, "unmaps",
      s.unmaps, "bytes_mapped", s.bytes_mapped, "bytes_mapped_peak", s.bytes_mapped_peak, "bytes_live", s.bytes_live,
      "bytes_requested", s.bytes_requested, "bytes_slack", s.bytes_slack, "bytes_cached", s.bytes_cached,
      "live_buffers", s.live_buffers, "cached_buffers", s.cached_buffers, "cache_max_slots", s.cache_max_slots,
      "cache_max_bytes", s.cache_max_bytes, "fork_copies_huge", s.fork_copies_huge, "fork_moves_small",
      s.fork_moves_small, "realloc_grows", s.realloc_grows, "realloc_shrinks", s.realloc_shrinks, "realloc_copies",
      s.realloc_copies);
}

static PyObject *core_stats_text(PyObject *mod, PyObject *args) {
  (void)mod;
  int json = 0;
  if (!PyArg_ParseTuple(args, "|p", &json)) return NULL;
  hugepool_stats_format f = json ? HUGEPOOL_STATS_JSON : HUGEPOOL_STATS_TEXT;
  int n = hugepool_stats_snprint(NULL, 0, f);
  if (n < 0) return PyErr_NoMemory();
  char *buf = PyMem_Malloc((size_t)n + 1);
  if (!buf) return PyErr_NoMemory();
  hugepool_stats_snprint(buf, (size_t)n + 1, f);
  PyObject *s = PyUnicode_FromStringAndSize(buf, n);
  PyMem_Free(buf);
  return s;
}

static PyObject *core_trim(PyObject *mod, PyObject *noargs) {
  (void)mod;
  (void)noargs;
  size_t r;
  Py_BEGIN_ALLOW_THREADS;
  r = hugepool_trim();
  Py_END_ALLOW_THREADS;
  return PyLong_FromSize_t(r);
}

static PyObject *core_pool_free_pages(PyObject *mod, PyObject *args) {
  (void)mod;
  int node = HUGEPOOL_ANY_NODE;
  if (!PyArg_ParseTuple(args, "|i", &node)) return NULL;
  return PyLong_FromLong(hugepool_pool_free_pages(node));
}

static PyObject *core_set_policy(PyObject *mod, PyObject *args) {
  (void)mod;
  int p;
  if (!PyArg_ParseTuple(args, "i", &p)) return NULL;
  if (hugepool_set_policy((hugepool_policy)p) != 0) return raise_errno("set policy for", errno, 0);
  Py_RETURN_NONE;
}

static PyObject *core_get_policy(PyObject *mod, PyObject *noargs) {
  (void)mod;
  (void)noargs;
  return PyLong_FromLong(hugepool_get_policy());
}

static PyObject *core_policy_name(PyObject *mod, PyObject *args) {
  (void)mod;
  int p;
  if (!PyArg_ParseTuple(args, "i", &p)) return NULL;
  return PyUnicode_FromString(hugepool_policy_name((hugepool_policy)p));
}

static PyObject *core_set_page_size(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t bytes;
  if (!PyArg_ParseTuple(args, "n", &bytes)) return NULL;
  if (bytes <= 0 || hugepool_set_page_size((size_t)bytes) != 0) {
    int err = bytes <= 0 ? EINVAL : errno;
    PyObject *a = Py_BuildValue("(is)", err, err == ENOTSUP ? "hugepool: this kernel has no such huge page size"
                                                            : "hugepool: the page size must be 2 MB or 1 GB");
    if (a) {
      PyErr_SetObject(err == EINVAL ? PyExc_ValueError : PyExc_OSError, a);
      Py_DECREF(a);
    }
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *core_get_page_size(PyObject *mod, PyObject *noargs) {
  (void)mod;
  (void)noargs;
  return PyLong_FromSize_t(hugepool_get_page_size());
}

static PyObject *core_set_cache_limits(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t slots, bytes;
  if (!PyArg_ParseTuple(args, "nn", &slots, &bytes)) return NULL;
  if (slots < 0 || bytes < 0 || hugepool_set_cache_limits((size_t)slots, (size_t)bytes) != 0) {
    PyErr_SetString(PyExc_ValueError, "hugepool: invalid cache limits");
    return NULL;
  }
  Py_RETURN_NONE;
}

/* The CUDA driver's registrar id; OSError(ENODEV) where there is none. */
static PyObject *core_registrar_cuda(PyObject *mod, PyObject *noargs) {
  (void)mod, (void)noargs;
  int id = hugepool_registrar_cuda();
  if (id > 0) return PyLong_FromLong(id);
  PyObject *args = Py_BuildValue("(is)", errno,
                                 "hugepool: pinned=True registers the buffer with the CUDA driver, and this process "
                                 "cannot reach one (no libcuda.so.1, or no device: the line on stderr says which)");
  if (args) {
    PyErr_SetObject(PyExc_OSError, args);
    Py_DECREF(args);
  }
  return NULL;
}

static PyObject *core_is_registered(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_ssize_t address;
  int registrar;
  if (!PyArg_ParseTuple(args, "ni", &address, &registrar)) return NULL;
  return PyBool_FromLong(hugepool_is_registered((const void *)address, registrar));
}

static PyMethodDef core_methods[] = {
    {"registrar_cuda", core_registrar_cuda, METH_NOARGS, "registrar_cuda() -> id (OSError ENODEV: no driver)"},
    {"is_registered", core_is_registered, METH_VARARGS, "is_registered(address, registrar) -> bool"},
    {"alloc", core_alloc, METH_VARARGS, "alloc(nbytes, zero=False, registrar=0) -> Buffer"},
    {"segment_create", core_segment_create, METH_VARARGS, "segment_create(nbytes, node=-1) -> Buffer"},
    {"segment_map", core_segment_map, METH_VARARGS, "segment_map(handle) -> Buffer"},
    {"stats", core_stats, METH_NOARGS, "stats() -> dict"},
    {"stats_text", core_stats_text, METH_VARARGS, "stats_text(json=False) -> str"},
    {"trim", core_trim, METH_NOARGS, "trim() -> bytes released"},
    {"pool_free_pages", core_pool_free_pages, METH_VARARGS, "pool_free_pages(node=-1) -> int"},
    {"set_policy", core_set_policy, METH_VARARGS, "set_policy(int)"},
    {"get_policy", core_get_policy, METH_NOARGS, "get_policy() -> int"},
    {"policy_name", core_policy_name, METH_VARARGS, "policy_name(int) -> str"},
    {"set_page_size", core_set_page_size, METH_VARARGS, "set_page_size(bytes)"},
    {"get_page_size", core_get_page_size, METH_NOARGS, "get_page_size() -> bytes"},
    {"set_cache_limits", core_set_cache_limits, METH_VARARGS, "set_cache_limits(slots, bytes)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "hugepool._core", "The C half of the hugepool package (see help(hugepool)).", -1,
    core_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void);
PyMODINIT_FUNC PyInit__core(void) {
  if (PyType_Ready(&BufferType) < 0) return NULL;
  PyObject *m = PyModule_Create(&core_module);
  if (!m) return NULL;
  Py_INCREF(&BufferType);
  if (PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0) {
    Py_DECREF(&BufferType);
    Py_DECREF(m);
    return NULL;
  }
  if (PyModule_AddIntConstant(m, "SEGMENT_HANDLE_BYTES", (long)sizeof(hugepool_segment_handle)) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
