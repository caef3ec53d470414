/* SPDX-License-Identifier: BSD-3-Clause */
/* hugetlb_neighbour: a hostile neighbour's shapes, for reserve_neighbour.sh.
 *   attack VMAS CLONES FORKS FDS
 *       maps and touches one 2 MB hugetlb page (MAP_SHARED), splits VMAS
 *       4 kB pages of anonymous memory into VMAS mappings (alternating
 *       protections), starts CLONES processes sharing its address space
 *       (clone(CLONE_VM)) and FORKS plain forks (each a copy of it, which
 *       touches the page: HugetlbPages counts it only then), then
 *       opens FDS descriptors (19,000 at most a process: the parent's,
 *       then the forks'); prints "ready" and holds all of it until stdin
 *       closes (the children die with it).
 *   give SOCKET N
 *       faults N hugetlb pages into a memfd, sends the memfd over the unix
 *       socket SOCKET (SCM_RIGHTS), then unmaps, closes and exits.
 *   take SOCKET map|nomap
 *       listens on SOCKET, receives a memfd, maps and reads it (map) or only
 *       holds it open (nomap); prints "taken KB" (its size) and holds it until stdin
 *       closes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define HPAGE (2UL << 20)

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void wait_stdin(void) {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

static volatile char *hpage;

/* A fork maps the hugetlb page only once it touches it (HugetlbPages). */
static int child_hold(void *arg) {
  (void)arg;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  (void)hpage[0];
  for (;;) pause();
  return 0;
}

static void split_vmas(unsigned long vmas) {
  char *m = mmap(NULL, vmas * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned long i;
  if (m == MAP_FAILED) die("mmap vmas");
  for (i = 1; i < vmas; i += 2)
    if (mprotect(m + i * 4096, 4096, PROT_READ) != 0) die("mprotect");
}

static void open_fds(unsigned long n) {
  unsigned long i;
  for (i = 0; i < n; i++)
    if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0) die("open");
}

/* FDS is spread over the parent and the forks, FDS_EACH at most each (the
 * open-file limit). */
#define FDS_EACH 19000UL

static int attack(unsigned long vmas, unsigned long clones, unsigned long forks, unsigned long fds) {
  char *page = mmap(NULL, HPAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  unsigned long i, left = fds, mine = fds < FDS_EACH ? fds : FDS_EACH;
  int done[2];
  char c;
  if (page == MAP_FAILED || pipe(done) != 0) die("mmap hugetlb");
  memset(page, 1, HPAGE);
  hpage = page;
  split_vmas(vmas);
  for (i = 0; i < clones; i++) {
    char *stack = malloc(16384); /* one each: they share the address space */
    if (stack == NULL || clone(child_hold, stack + 16384, CLONE_VM | SIGCHLD, NULL) < 0) die("clone");
  }
  left -= mine;
  for (i = 0; i < forks; i++) {
    unsigned long n = left < FDS_EACH ? left : FDS_EACH;
    pid_t p = fork();
    left -= n;
    if (p < 0) die("fork");
    if (p == 0) {
      open_fds(n);
      if (write(done[1], "x", 1) != 1) die("write");
      child_hold(NULL);
    }
  }
  open_fds(mine);
  for (i = 0; i < forks; i++)
    if (read(done[0], &c, 1) != 1) die("read");
  printf("ready\n");
  fflush(stdout);
  wait_stdin();
  return 0;
}

static int sock_at(const char *path, int listening) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || strlen(path) >= sizeof a.sun_path) die("socket");
  strcpy(a.sun_path, path);
  if (listening) {
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || chmod(path, 0777) != 0 || listen(s, 1) != 0) die("bind");
  } else if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    die("connect");
  }
  return s;
}

static int give(const char *path, unsigned long n) {
  char cbuf[CMSG_SPACE(sizeof(int))], byte = 'f';
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  int fd = memfd_create("neighbour", MFD_HUGETLB | MFD_CLOEXEC), s;
  char *m;
  if (fd < 0 || ftruncate(fd, (off_t)(n * HPAGE)) != 0) die("memfd");
  m = mmap(NULL, n * HPAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die("mmap memfd");
  memset(m, 1, n * HPAGE);
  s = sock_at(path, 0);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(s, &msg, 0) != 1) die("sendmsg");
  munmap(m, n * HPAGE);
  close(fd);
  return read(s, &byte, 1) < 0; /* until the receiver has it */
}

static int take(const char *path, int map) {
  char cbuf[CMSG_SPACE(sizeof(int))], byte;
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct stat st;
  int s = sock_at(path, 1), c = accept(s, NULL, NULL), fd;
  if (c < 0 || recvmsg(c, &msg, 0) != 1 || CMSG_FIRSTHDR(&msg) == NULL) die("recvmsg");
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fd);
  if (fstat(fd, &st) != 0) die("fstat");
  if (map) { /* mapped and read: its pages are in the receiver's smaps */
    volatile char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    off_t off;
    if (m == MAP_FAILED) die("mmap taken");
    for (off = 0; off < st.st_size; off += (off_t)HPAGE) (void)m[off];
  }
  close(c);
  printf("taken %lld\n", (long long)st.st_size / 1024);
  fflush(stdout);
  wait_stdin();
  return 0;
}

int main(int argc, char *argv[]) {
  if (argc == 6 && strcmp(argv[1], "attack") == 0)
    return attack(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10),
                  strtoul(argv[5], NULL, 10));
  if (argc == 4 && strcmp(argv[1], "give") == 0) return give(argv[2], strtoul(argv[3], NULL, 10));
  if (argc == 4 && strcmp(argv[1], "take") == 0) return take(argv[2], strcmp(argv[3], "map") == 0);
  fprintf(stderr, "usage: hugetlb_neighbour attack VMAS CLONES FORKS FDS | give SOCKET N | take SOCKET map|nomap\n");
  return 2;
}
