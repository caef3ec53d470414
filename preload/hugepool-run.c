/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-run: runs an unmodified program with its large allocations on
 * hugetlb pages (libhugepool_preload.so) and, unless --mpi off, its
 * MPI_Alloc_mem memory too (libhugepool_mpi_preload.so, preloaded into
 * every program: it does nothing where MPI is absent, and serves a program
 * that loads MPI late as one linked with it).  See preload/README.md.
 *   mpiexec -n 64 hugepool-run --stats-file 'hp.%r.txt' -- ./app args
 *
 * Each option sets one HUGEPOOL_* variable.  Their names, defaults, accepted
 * values and help come from the library's option table (lib/option-table.c)
 * and are checked by the library's own parsers, so what this program accepts
 * and prints is what the preload will read. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cuda-probe.h"
#include "hooks.h"

#ifndef HUGEPOOL_PRELOAD_LIB
#error "HUGEPOOL_PRELOAD_LIB: the path of libhugepool_preload.so, set by preload/CMakeLists.txt"
#endif

/* The command line: each flag names the option it sets. */
typedef struct flag {
  const char *spelling; /* for --help */
  const char *long_name;
  const char *fixed; /* a switch: the value it sets */
  hp_option_id id;
  char short_name; /* 0: none */
  bool takes_value;
} flag;

static const flag flags[] = {
    {"-t, --threshold SIZE", "threshold", NULL, HP_OPT_THRESHOLD, 't', true},
    {"-p, --policy P", "policy", NULL, HP_OPT_POLICY, 'p', true},
    {"-s, --stats[=FORMAT]", "stats", "1", HP_OPT_STATS, 's', false}, /* -s alone: no value */
    {"-o, --stats-file PAT", "stats-file", NULL, HP_OPT_STATS_FILE, 'o', true},
    {"    --small-heap", "small-heap", "1", HP_OPT_SMALL_HEAP, 0, false},
    {"    --fork MODE", "fork", NULL, HP_OPT_FORK, 0, true},
    {"    --hold MODE", "hold", NULL, HP_OPT_HOLD, 0, true},
    {"    --other-heap MODE", "other-heap", NULL, HP_OPT_OTHER_HEAP, 0, true},
    {"    --page-size SIZE", "page-size", NULL, HP_OPT_PAGE_SIZE, 0, true},
    {"    --cache-slots N", "cache-slots", NULL, HP_OPT_CACHE_SLOTS, 0, true},
    {"    --cache-bytes SIZE", "cache-bytes", NULL, HP_OPT_CACHE_BYTES, 0, true},
    {"    --cache-decay MS", "cache-decay", NULL, HP_OPT_CACHE_DECAY, 0, true},
    {"    --mpi MODE", "mpi", NULL, HP_OPT_MPI, 0, true},
    {"    --mpi-win-shared", "mpi-win-shared", "1", HP_OPT_MPI_WIN_SHARED, 0, false},
    {"    --cuda[=MODE]", "cuda", "1", HP_OPT_CUDA, 0, false}, /* --cuda alone: 1 */
    {"-q, --quiet", "quiet", "0", HP_OPT_WARN, 'q', false},
    {"-v, --verbose", "verbose", "1", HP_OPT_VERBOSE, 'v', false},
};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

/* Prints text without Markdown's backticks, wrapped at 79 columns, every
 * line after the first indented by `indent`. */
/* The variables' column is as wide as the longest name. */
static size_t longest_option_name(void) {
  size_t longest = 0;
  for (int id = 0; id < HP_OPT_COUNT; id++) {
    size_t len = strlen(option_desc((hp_option_id)id)->name);
    if (len > longest) longest = len;
  }
  return longest;
}

static void print_wrapped(const char *text, size_t indent, size_t column) {
  const size_t width = 79;
  while (*text) {
    size_t word = strcspn(text, " ");
    size_t shown = 0;
    for (size_t i = 0; i < word; i++) shown += text[i] != '`';
    if (column > indent && column + 1 + shown > width) {
      printf("\n%*s", (int)indent, "");
      column = indent;
    } else if (column > indent) {
      putchar(' ');
      column++;
    }
    for (size_t i = 0; i < word; i++) {
      if (text[i] != '`') putchar(text[i]);
    }
    column += shown;
    text += word;
    while (*text == ' ') text++;
  }
  putchar('\n');
}

static void usage(void) {
  printf(
      "usage: hugepool-run [options] [--] program [args...]\n\n"
      "Runs `program` with libhugepool_preload.so: malloc requests at or above the\n"
      "threshold get memory on hugetlb pages (cached and reused), the rest are\n"
      "served by glibc as before.  In an MPI program (MPICH or Open MPI: the entry\n"
      "points ask the program's MPI library which it is at its first MPI call),\n"
      "MPI_Alloc_mem memory is on hugetlb pages too (--mpi off: not).\n\n"
      "options (each sets the variable named; options win over the environment):\n");
  for (size_t i = 0; i < N_FLAGS; i++) {
    const flag *f = &flags[i];
    printf("  %-24s %s", f->spelling, option_desc(f->id)->name);
    if (f->fixed) printf("=%s", f->fixed);
    if (f->id == HP_OPT_STATS) printf(" (text); --stats=json: json");
    putchar('\n');
  }
  printf("  %-24s this text\n", "-h, --help");
  printf("  %-24s hugepool-run and its version\n\n", "    --version");
  printf(
      "A switch takes no value, or one joined by '=': yes/no, on/off, true/false\n"
      "(any case) or 1/0, as in --small-heap=no.  FORMAT is text or json, joined by\n"
      "'=' too (--stats=json): '-s json' is refused, as json would be the program.\n\n");
  printf("variables (the default under hugepool-run, then what it does):\n");
  const int name_width = (int)longest_option_name();
  for (int id = 0; id < HP_OPT_COUNT; id++) {
    const hp_option_desc *d = option_desc((hp_option_id)id);
    char def[32];
    option_format((hp_option_id)id, d->preload_default, def, sizeof(def));
    int n = printf("  %-*s %-8s ", name_width, d->name, def);
    print_wrapped(d->help, (size_t)name_width + 12, n > 0 ? (size_t)n : 0);
  }
  printf(
      "\nSizes take K, M, G, T suffixes (512M, 2GiB).  Also sets UCX_MEM_MALLOC_HOOKS=n\n"
      "and UCX_MEM_MALLOC_RELOC=n: UCX (MPICH ch4:ucx, Open MPI) would otherwise\n"
      "replace malloc, since a caching allocator does not unmap freed memory.\n");
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  (void)fprintf(stderr, "hugepool-run: ");
  (void)vfprintf(stderr, fmt, ap);
  (void)fprintf(stderr, "\nhugepool-run: try 'hugepool-run --help'\n");
  va_end(ap);
  exit(2);
}

/* Checks `value` with the library's parser and exports it. */
static void set_option(const flag *f, const char *value) {
  const char *name = option_desc(f->id)->name;
  if (f->id == HP_OPT_STATS && strcmp(value, "text") == 0) value = "1";
  char expected[96];
  long long parsed = 0;
  if (*value == '\0') die("option --%s needs a value", f->long_name);
  if (option_parse(f->id, value, true, &parsed, expected, sizeof(expected)) != 0) {
    die("bad value '%s' for --%s (expected %s)", value, f->long_name, expected);
  }
  if (f->id == HP_OPT_POLICY && parsed == HP_POLICY_FALLBACK) {
    /* The preload's default: unset rather than exported, so that a child
     * linked with the library itself (where fallback means nothing) is not
     * handed a value it would warn about. */
    unsetenv(name);
    return;
  }
  char canonical[32];
  if (option_desc(f->id)->type == HP_TYPE_CHOICE) {
    option_format(f->id, parsed, canonical, sizeof(canonical));
    value = canonical;
  }
  if (setenv(name, value, 1) != 0) die("cannot set %s", name);
}

static const flag *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < N_FLAGS; i++) {
    if (strlen(flags[i].long_name) == len && strncmp(flags[i].long_name, name, len) == 0) return &flags[i];
  }
  return NULL;
}

static const flag *find_short(char c) {
  for (size_t i = 0; i < N_FLAGS; i++) {
    if (flags[i].short_name == c) return &flags[i];
  }
  return NULL;
}

/* A switch given a value (--small-heap=no, --quiet=off): the value as
 * HUGEPOOL_* reads it, with the library's own words for yes and no. */
static const char *switch_value(const flag *f, const char *value) {
  long long on = 0;
  char expected[96];
  if (option_parse(HP_OPT_SMALL_HEAP, value, true, &on, expected, sizeof(expected)) != 0)
    die("bad value '%s' for --%s (expected %s)", value, f->long_name, expected);
  if (strcmp(f->fixed, "0") == 0) on = !on; /* --quiet sets HUGEPOOL_WARN=0 */
  return on ? "1" : "0";
}

/* Applies the options; returns the index of the program in argv. */
static int parse_command_line(int argc, char **argv) {
  int i = 1;
  while (i < argc) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) return i + 1;
    if (a[0] != '-') return i;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage();
      exit(0);
    }
    if (strcmp(a, "--version") == 0) {
      printf("hugepool-run %d.%d.%d\n", HUGEPOOL_VERSION_MAJOR, HUGEPOOL_VERSION_MINOR, HUGEPOOL_VERSION_PATCH);
      exit(0);
    }
    const flag *f = NULL;
    const char *inline_value = NULL;
    if (a[1] == '-') {
      const char *eq = strchr(a + 2, '=');
      f = find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
      inline_value = eq ? eq + 1 : NULL;
    } else if (a[1] != '\0' && a[2] == '\0') {
      f = find_short(a[1]);
    }
    if (!f) die("unknown option '%s'", a);
    i++;
    if (f->takes_value && !inline_value) {
      if (i >= argc || argv[i][0] == '\0') die("option %s needs a value", a);
      /* `-o -- prog` would name the file "--" and run prog: a value left out. */
      if (strcmp(argv[i], "--") == 0) die("option %s needs a value before '--'", a);
      inline_value = argv[i++];
    }
    /* `-s json` would run a program called json with text statistics: the
     * format is joined to the option (--stats=json), never the next word. */
    if (f->id == HP_OPT_STATS && !inline_value && i < argc &&
        (strcasecmp(argv[i], "json") == 0 || strcasecmp(argv[i], "text") == 0)) {
      die("%s takes no separate value: write --stats=%s for %s statistics, or '%s -- %s' to run a program "
          "called %s",
          a, argv[i], argv[i], a, argv[i], argv[i]);
    }
    if (!f->takes_value && inline_value && f->id != HP_OPT_STATS && f->id != HP_OPT_CUDA)
      inline_value = switch_value(f, inline_value);
    set_option(f, inline_value ? inline_value : f->fixed);
  }
  return i;
}

/* A library of ours: HUGEPOOL_<variable> if set, else beside an installed
 * copy (its place relative to this program, so an installed tree can be
 * moved), else where it was built or installed to. */
typedef char path_buf[4096];
static const char *library_path(const char *variable, const char *from_bin, const char *built, path_buf buf) {
  const char *set = getenv(variable);
  if (set && *set) return set;
  if (from_bin) {
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(path_buf) - 1);
    if (n > 0) {
      buf[n] = '\0';
      char *slash = strrchr(buf, '/');
      size_t used = slash ? (size_t)(slash - buf) + 1 : 0;
      int m = snprintf(buf + used, sizeof(path_buf) - used, "%s", from_bin);
      if (slash && m > 0 && (size_t)m < sizeof(path_buf) - used && access(buf, R_OK) == 0) return buf;
    }
  }
  return built;
}

#ifndef HUGEPOOL_PRELOAD_LIB_FROM_BIN
#define HUGEPOOL_PRELOAD_LIB_FROM_BIN NULL
#endif
#ifndef HUGEPOOL_MPI_PRELOAD_LIB_FROM_BIN
#define HUGEPOOL_MPI_PRELOAD_LIB_FROM_BIN NULL
#endif
#ifndef HUGEPOOL_MPI_PRELOAD_LIB
#define HUGEPOOL_MPI_PRELOAD_LIB NULL /* built without MPI */
#endif

/* The MPI entry points to preload after the interposer, or NULL: --mpi off
 * (HUGEPOOL_MPI=off), or not built.  A missing library is said once: the
 * program still runs, with MPI's own MPI_Alloc_mem. */
static const char *mpi_library(void) {
  const char *mode = getenv(option_desc(HP_OPT_MPI)->name);
  long long value = HP_MPI_AUTO;
  char expected[96];
  if (mode && option_parse(HP_OPT_MPI, mode, true, &value, expected, sizeof(expected)) != 0) {
    die("bad value '%s' for HUGEPOOL_MPI (expected %s)", mode, expected);
  }
  if (value == HP_MPI_OFF) return NULL;
  static path_buf buf;
  const char *lib =
      library_path("HUGEPOOL_MPI_PRELOAD_LIB", HUGEPOOL_MPI_PRELOAD_LIB_FROM_BIN, HUGEPOOL_MPI_PRELOAD_LIB, buf);
  if (!lib) return NULL;
  if (access(lib, R_OK) != 0) {
    const char *warn = getenv(option_desc(HP_OPT_WARN)->name);
    if (!warn || strcmp(warn, "0") != 0) {
      (void)fprintf(stderr,
                    "hugepool-run: no MPI entry points at %s: MPI_Alloc_mem stays MPI's own "
                    "(set HUGEPOOL_MPI_PRELOAD_LIB, or --mpi off)\n",
                    lib);
    }
    return NULL;
  }
  return lib;
}

#ifndef HUGEPOOL_CUDA_PRELOAD_LIB_FROM_BIN
#define HUGEPOOL_CUDA_PRELOAD_LIB_FROM_BIN NULL
#endif

/* HUGEPOOL_CUDA as set (by --cuda or the environment): HP_CUDA_OFF when
 * unset; a bad value ends the launcher with the expected ones. */
static long long cuda_mode(void) {
  const char *on = getenv(option_desc(HP_OPT_CUDA)->name);
  long long value = HP_CUDA_OFF;
  char expected[128];
  if (on && option_parse(HP_OPT_CUDA, on, true, &value, expected, sizeof(expected)) != 0)
    die("bad value '%s' for HUGEPOOL_CUDA (expected %s)", on, expected);
  return value;
}

/* --cuda on a node without a driver or a device: said in one line; the
 * program runs all the same (every CUDA call it makes fails as it would). */
static void say_cuda_driver(void) {
  const char *warn = getenv(option_desc(HP_OPT_WARN)->name);
  if (warn && strcmp(warn, "0") == 0) return;
  int rc = 0, n = cuda_probe_devices(&rc);
  if (n == -1) {
    (void)fprintf(stderr,
                  "hugepool-run: --cuda: no CUDA driver on this node (libcuda.so.1 not found): nothing to "
                  "register\n");
    return;
  }
  if (n <= 0)
    (void)fprintf(stderr, "hugepool-run: --cuda: the CUDA driver finds no device (%s %d): nothing to register\n",
                  n < 0 ? "CUresult" : "devices", n < 0 ? rc : 0);
}

/* The CUDA interposer, preloaded after the interposer only when CUDA is
 * asked for (a program that did not ask defines no CUDA name). */
static const char *cuda_library(void) {
  if (cuda_mode() == HP_CUDA_OFF) return NULL;
  static path_buf buf;
  const char *lib =
      library_path("HUGEPOOL_CUDA_PRELOAD_LIB", HUGEPOOL_CUDA_PRELOAD_LIB_FROM_BIN, HUGEPOOL_CUDA_PRELOAD_LIB, buf);
  if (access(lib, R_OK) != 0) die("cannot find the CUDA interposer at %s (set HUGEPOOL_CUDA_PRELOAD_LIB)", lib);
  say_cuda_driver();
  return lib;
}

/* Threads PyTorch faults a new pinned block in with before registering it:
 * the largest power of two (its rule) up to 8 and up to the CPUs this
 * process may run on.  One thread zeroes a fresh 1 GiB block in about
 * 150 ms on an H200 node (bench/RESULTS.md). */
static unsigned torch_register_threads(void) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  unsigned n = 1;
  while (n < 8 && (int)(2 * n) <= cpus) n *= 2;
  return n;
}

/* With HUGEPOOL_CUDA on, PyTorch's pin_memory() mallocs and registers
 * (pinned_use_cuda_host_register:True), so its pinned blocks land on
 * hugepool's buffers, whose registration the preload keeps, and faults
 * each new block in from several threads (pinned_num_register_threads).
 * The user's other settings stay; a value of these keys the user gave
 * wins.  PyTorch reads PYTORCH_ALLOC_CONF (2.9 and later) before the older
 * name. */
static void torch_pinned_register(void) {
  if (cuda_mode() == HP_CUDA_OFF) return;
  const char *name = getenv("PYTORCH_ALLOC_CONF") ? "PYTORCH_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
  const char *old = getenv(name);
  if (old && strstr(old, "pinned_use_cuda_host_register")) return;
  char threads[48] = "";
  unsigned n = torch_register_threads();
  if (n > 1 && !(old && strstr(old, "pinned_num_register_threads")))
    (void)snprintf(threads, sizeof(threads), ",pinned_num_register_threads:%u", n);
  char *conf = NULL;
  if (asprintf(&conf, "%s%spinned_use_cuda_host_register:True%s", old && *old ? old : "", old && *old ? "," : "",
               threads) < 0 ||
      setenv(name, conf, 1) != 0)
    die("cannot set %s", name);
  free(conf);
}

int main(int argc, char **argv) {
  int first = parse_command_line(argc, argv);
  if (first >= argc) die("no program given");
  static path_buf buf;
  const char *lib = library_path("HUGEPOOL_PRELOAD_LIB", HUGEPOOL_PRELOAD_LIB_FROM_BIN, HUGEPOOL_PRELOAD_LIB, buf);
  if (access(lib, R_OK) != 0) die("cannot find the interposer at %s (set HUGEPOOL_PRELOAD_LIB)", lib);
  const char *mpi = mpi_library();
  const char *cuda = cuda_library();
  torch_pinned_register();

  /* The interposer first (the MPI and CUDA entry points call into it), then
   * the CUDA and the MPI entry points, then what was there (an allocator
   * there serves what hugepool does not: HUGEPOOL_OTHER_HEAP). */
  const char *old = getenv("LD_PRELOAD");
  char *preload = NULL;
  if (asprintf(&preload, "%s%s%s%s%s%s%s", lib, cuda ? " " : "", cuda ? cuda : "", mpi ? " " : "", mpi ? mpi : "",
               old && *old ? " " : "", old && *old ? old : "") < 0) {
    die("out of memory");
  }
  if (setenv("UCX_MEM_MALLOC_HOOKS", "n", 1) != 0 || setenv("UCX_MEM_MALLOC_RELOC", "n", 1) != 0 ||
      setenv("LD_PRELOAD", preload, 1) != 0) {
    die("cannot set the environment");
  }
  free(preload);
  execvp(argv[first], argv + first);
  int err = errno;
  (void)fprintf(stderr, "hugepool-run: cannot run %s: %s\n", argv[first], strerror(err));
  return err == ENOENT ? 127 : 126;
}
