// SPDX-License-Identifier: BSD-3-Clause
// Node-shared segments: the kernel's view (smaps Shared_Hugetlb, meminfo
// HugePages_Free, numa_maps) in the creating and in separate mapping
// processes, kills at any moment, other users, a short pool.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core_test.hpp"

using test::MiB;

namespace {

// A hugepool-segment-peer process: stdin to end it, stdout to read its lines.
class Peer {
 public:
  explicit Peer(const std::vector<std::string> &args, uid_t uid = 0) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[0]);
      close(in[1]);
      close(out[0]);
      close(out[1]);
      if (uid != 0 && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) _exit(3);
      std::vector<char *> argv;
      std::string exe = HUGEPOOL_SEGMENT_PEER;
      argv.push_back(exe.data());
      std::vector<std::string> copy = args;
      for (auto &a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(exe.c_str(), argv.data());
      _exit(4);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  Peer(const Peer &) = delete;
  Peer &operator=(const Peer &) = delete;
  ~Peer() {
    if (pid_ > 0) kill_now();
    if (stdout_ >= 0) close(stdout_);
  }
  std::string line() {
    std::string s;
    char c;
    while (::read(stdout_, &c, 1) == 1 && c != '\n') s += c;
    return s;
  }
  // Ends it normally (end of its stdin); returns its exit status.
  int finish() {
    close(stdin_);
    stdin_ = -1;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void kill_now() {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
};

std::vector<std::string> handle_args(const hugepool_segment_handle &h) {
  return {std::to_string(h.pid), std::to_string(h.fd),   std::to_string(h.ino),
          std::to_string(h.dev), std::to_string(h.size), std::to_string(h.page_size)};
}

// "handle PID FD ..." from a creating peer, as arguments for a mapping peer.
std::vector<std::string> parse_handle_line(const std::string &line) {
  std::istringstream in(line);
  std::string word;
  in >> word;
  REQUIRE(word == "handle");
  std::vector<std::string> out;
  while (in >> word) out.push_back(word);
  REQUIRE(out.size() == 6);
  return out;
}

std::vector<std::string> map_args(const std::vector<std::string> &handle, const char *fill = nullptr) {
  std::vector<std::string> a{"map"};
  a.insert(a.end(), handle.begin(), handle.end());
  if (fill) a.emplace_back(fill);
  return a;
}

}  // namespace

TEST_CASE("a segment is on hugetlb pages in its creator and in other processes, and takes its pages once",
          "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(8);
  const long long free0 = kv::huge_free();
  hugepool_segment seg;
  REQUIRE(hugepool_segment_create(5 * MiB, nullptr, &seg) == 0);  // rounds up to 3 pages
  CHECK(seg.size == 6 * MiB);
  CHECK(seg.created == 1);
  // Alone, the kernel counts the pages as Private_Hugetlb (mapped once);
  // once peers map them, as Shared_Hugetlb.
  auto mine = kv::smaps_of(seg.addr);
  CHECK(mine.field("Private_Hugetlb") + mine.field("Shared_Hugetlb") == 6 * 1024);
  CHECK(mine.field("KernelPageSize") == 2048);
  CHECK(kv::vmflags_of(seg.addr).find(" sh") != std::string::npos);
  CHECK(kv::huge_free() == free0 - 3);  // populated at creation
  std::memset(seg.addr, 0x5A, seg.size);

  {
    // Two other processes map it at once: the pool does not move.
    Peer a(map_args(handle_args(seg.handle)));
    CHECK(a.line() == "mapped 90 6144");  // read before b writes its pattern
    Peer b(map_args(handle_args(seg.handle), "0x3c"));
    CHECK(b.line() == "mapped 90 6144");
    CHECK(kv::smaps_of(seg.addr).field("Shared_Hugetlb") == 6 * 1024);
    CHECK(kv::huge_free() == free0 - 3);
    CHECK(kv::huge_available() == pool.available());
    CHECK(static_cast<unsigned char *>(seg.addr)[seg.size - 1] == 0x3c);  // b's writes seen here
    CHECK(a.finish() == 0);
    CHECK(b.finish() == 0);
  }
  CHECK(kv::huge_free() == free0 - 3);
  REQUIRE(hugepool_segment_unmap(&seg) == 0);
  CHECK(kv::huge_free() == free0);
}

TEST_CASE("killing the creator or a mapper with SIGKILL leaves the pool where it was", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(8);
  const long long free0 = kv::huge_free();
  for (bool creator_first : {true, false}) {
    CAPTURE(creator_first);
    Peer creator({"create", std::to_string(4 * MiB)});
    auto handle = parse_handle_line(creator.line());
    CHECK(kv::huge_free() == free0 - 2);
    Peer mapper(map_args(handle));
    CHECK(mapper.line() == "mapped 193 4096");
    if (creator_first) {
      creator.kill_now();
      CHECK(kv::huge_free() == free0 - 2);  // the mapper still holds the file
      mapper.kill_now();
    } else {
      mapper.kill_now();
      CHECK(kv::huge_free() == free0 - 2);
      creator.kill_now();
    }
    CHECK(kv::huge_free() == free0);
    CHECK(kv::huge_available() == 8);
  }
}

TEST_CASE("another user cannot map a segment, the same user can", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(4);
  const long long free0 = kv::huge_free();
  const uid_t owner = 1;      // daemon
  const uid_t other = 65534;  // nobody
  Peer creator({"create", std::to_string(2 * MiB)}, owner);
  auto handle = parse_handle_line(creator.line());
  {
    Peer intruder(map_args(handle, "0"), other);
    std::string got = intruder.line();
    CHECK((got == "error " + std::to_string(EPERM) || got == "error " + std::to_string(EACCES)));
    CHECK(intruder.finish() == 1);
  }
  {
    Peer same(map_args(handle), owner);
    CHECK(same.line() == "mapped 193 2048");  // positive control: the test can tell
    CHECK(same.finish() == 0);
  }
  {
    // root reaches the descriptor but refuses a file that is not its user's
    Peer root(map_args(handle));
    CHECK(root.line() == "error " + std::to_string(EPERM));
    CHECK(root.finish() == 1);
  }
  CHECK(creator.finish() == 0);
  CHECK(kv::huge_free() == free0);
}

TEST_CASE("a handle that names another file is refused", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(4);
  hugepool_segment seg, other;
  REQUIRE(hugepool_segment_create(2 * MiB, nullptr, &seg) == 0);
  hugepool_segment_handle h = seg.handle;
  h.ino += 1;
  errno = 0;
  CHECK(hugepool_segment_map(&h, &other) == -1);
  CHECK(errno == ESTALE);
  h = seg.handle;
  h.size *= 2;  // bigger than the file: mapping it would SIGBUS beyond its end
  CHECK(hugepool_segment_map(&h, &other) == -1);
  CHECK(errno == EINVAL);
  h = seg.handle;
  h.fd = 0;  // stdin: not a hugetlb file
  CHECK(hugepool_segment_map(&h, &other) == -1);
  CHECK(errno == EINVAL);
  h = seg.handle;
  REQUIRE(hugepool_segment_map(&h, &other) == 0);  // the real handle maps, in this process too
  static_cast<char *>(seg.addr)[7] = 42;
  CHECK(static_cast<char *>(other.addr)[7] == 42);
  CHECK(hugepool_segment_unmap(&other) == 0);
  CHECK(hugepool_segment_unmap(&seg) == 0);
}

TEST_CASE("a short pool is ENOMEM at creation, with one line, and nothing taken", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(2);
  const long long free0 = kv::huge_free();
  hugepool_segment seg;
  std::string err;
  {
    test::StderrCapture cap;
    errno = 0;
    CHECK(hugepool_segment_create(6 * MiB, nullptr, &seg) == -1);
    CHECK(errno == ENOMEM);
    err = cap.text();
  }
  CHECK(err.find("cannot create a 6 MiB shared segment on 2 MB hugetlb pages: need 3 pages, 2 free") !=
        std::string::npos);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(kv::huge_free() == free0);
  CHECK(kv::huge_available() == 2);
  REQUIRE(hugepool_segment_create(4 * MiB, nullptr, &seg) == 0);  // what fits still works
  CHECK(hugepool_segment_unmap(&seg) == 0);
}

TEST_CASE("a segment bound to a node has its pages there", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(4);
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  opts.node = 0;
  hugepool_segment seg;
  REQUIRE(hugepool_segment_create(4 * MiB, &opts, &seg) == 0);
  std::string line;
  std::istringstream in(kv::read_file("/proc/self/numa_maps"));
  char want[32];
  std::snprintf(want, sizeof(want), "%lx ", reinterpret_cast<unsigned long>(seg.addr));
  while (std::getline(in, line) && line.rfind(want, 0) != 0) {
  }
  CHECK(line.find("bind:0") != std::string::npos);
  CHECK(line.find("huge") != std::string::npos);
  CHECK(line.find("N0=2") != std::string::npos);
  CHECK(hugepool_segment_unmap(&seg) == 0);
  opts.node = 4000;
  CHECK(hugepool_segment_create(4 * MiB, &opts, &seg) == -1);
  CHECK(errno == EINVAL);
}

TEST_CASE("a segment on a hugetlbfs mount leaves no file there, even when its creator is killed", "[segment]") {
  test::fresh_state();
  kv::PoolGuard pool(4);
  const long long free0 = kv::huge_free();
  char dir[] = "/tmp/hugepool-mnt-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  if (mount("none", dir, "hugetlbfs", 0, "pagesize=2M,mode=0755") != 0) {
    WARN("cannot mount hugetlbfs: " << std::strerror(errno));
    rmdir(dir);
    return;
  }
  struct Unmount {
    const char *dir;
    ~Unmount() {
      umount2(dir, MNT_DETACH);
      rmdir(dir);
    }
  } unmount{dir};
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  opts.hugetlbfs = dir;
  hugepool_segment seg;
  REQUIRE(hugepool_segment_create(4 * MiB, &opts, &seg) == 0);
  CHECK(kv::smaps_of(seg.addr).field("Private_Hugetlb") == 4096);
  CHECK(kv::huge_free() == free0 - 2);
  auto entries = [&] {
    int n = 0;
    DIR *d = opendir(dir);
    while (dirent *e = d ? readdir(d) : nullptr) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
  };
  CHECK(entries() == 0);
  {
    Peer mapper(map_args(handle_args(seg.handle)));
    CHECK(mapper.line() == "mapped 0 4096");
    mapper.kill_now();
  }
  CHECK(hugepool_segment_unmap(&seg) == 0);
  CHECK(kv::huge_free() == free0);
  {
    Peer creator({"create", std::to_string(4 * MiB), dir});
    parse_handle_line(creator.line());
    CHECK(kv::huge_free() == free0 - 2);
    CHECK(entries() == 0);
    creator.kill_now();
  }
  CHECK(kv::huge_free() == free0);
  opts.hugetlbfs = "";  // the first mount of 2 MB pages in /proc/self/mountinfo
  REQUIRE(hugepool_segment_create(2 * MiB, &opts, &seg) == 0);
  CHECK(entries() == 0);
  CHECK(hugepool_segment_unmap(&seg) == 0);
  CHECK(kv::huge_free() == free0);
}
