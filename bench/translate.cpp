// SPDX-License-Identifier: BSD-3-Clause
// Translation count: into how many physically-contiguous, power-of-two
// chunks of at most 2 MB a buffer splits — the number of translation entries
// an Omni-Path (hfi1) style driver programs when it registers the buffer.
// Physical addresses come from /proc/self/pagemap (PFNs need root).
//
// "fresh": on the node as it is.  "fragmented": after a fragmenter filled
// memory with 4 KB pages and freed every other one (or a random half), so the
// free lists are full of isolated 4 KB pages.
#include <fcntl.h>

#include <random>

#include "benches.hpp"

namespace hb {

namespace {

constexpr uint64_t kPresent = 1ull << 63, kPfnMask = (1ull << 55) - 1;
constexpr size_t kMaxChunk = 2 * kMB;

// hfi1's rule: split each physically-contiguous run into power-of-two pieces
// of at most 2 MB, largest first.
size_t chunks_in_run(size_t run_bytes) {
  size_t n = 0;
  while (run_bytes) {
    size_t piece = kMaxChunk;
    if (run_bytes < kMaxChunk) {
      piece = 1;
      while (piece * 2 <= run_bytes) piece *= 2;
    }
    run_bytes -= piece;
    ++n;
  }
  return n;
}

// Chunk count of a touched buffer; -1 with `err` set when pagemap gives no PFN.
long count_chunks(int pagemap, const char *p, size_t len, std::string *err) {
  const size_t first = reinterpret_cast<uintptr_t>(p) / kSmallPage, npages = len / kSmallPage;
  std::vector<uint64_t> ent(npages);
  const ssize_t want = static_cast<ssize_t>(npages * sizeof(uint64_t));
  if (pread(pagemap, ent.data(), static_cast<size_t>(want), static_cast<off_t>(first * sizeof(uint64_t))) != want) {
    *err = std::string("pagemap read: ") + std::strerror(errno);
    return -1;
  }
  long chunks = 0;
  size_t run = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < npages; ++i) {
    if (!(ent[i] & kPresent) || (ent[i] & kPfnMask) == 0) {
      *err = "pagemap shows no PFN (not root, or page not present)";
      return -1;
    }
    const uint64_t pfn = ent[i] & kPfnMask;
    if (run && pfn == prev + 1) {
      run += kSmallPage;
    } else {
      chunks += static_cast<long>(chunks_in_run(run));
      run = kSmallPage;
    }
    prev = pfn;
  }
  return chunks + static_cast<long>(chunks_in_run(run));
}

// Holds `bytes` of 4 KB pages, every other one (or a random half) freed again.
class Fragmenter {
 public:
  Fragmenter(size_t bytes, const std::string &mode) : len_(round_up(bytes, kSmallPage)) {
    base_ = static_cast<char *>(mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) die("fragmenter mmap failed");
    madvise(base_, len_, MADV_NOHUGEPAGE);
    touch_pages(base_, len_);
    const size_t n = len_ / kSmallPage;
    std::mt19937_64 rng(12345);
    for (size_t i = 0; i < n; ++i) {
      const bool drop = mode == "random" ? (rng() & 1) : (i & 1);
      if (drop) madvise(base_ + i * kSmallPage, kSmallPage, MADV_DONTNEED);
    }
  }
  ~Fragmenter() { munmap(base_, len_); }
  Fragmenter(const Fragmenter &) = delete;
  Fragmenter &operator=(const Fragmenter &) = delete;

 private:
  size_t len_;
  char *base_;
};

void measure(int pagemap, const std::vector<Page> &pages, const std::vector<size_t> &sizes, long reps,
             const std::string &state) {
  for (Page kind : pages) {
    for (size_t size : sizes) {
      const std::string what = measured_label("translate", kind, size, " " + state);
      if (what.empty()) continue;
      std::vector<double> counts;
      std::string err;
      for (long r = 0; r < reps && err.empty(); ++r) {
        Buf b = buf_alloc(kind, size);
        if (!b) {
          err = std::string("allocation failed: ") + std::strerror(errno);
          break;
        }
        touch_pages(b.p, b.len);
        const long c = count_chunks(pagemap, b.p, b.len, &err);
        if (c >= 0) counts.push_back(static_cast<double>(c));
        buf_free(b);
        page_type_trim(kind);  // the next repetition maps afresh
      }
      if (!err.empty()) {
        skip("translate", what, err);
        continue;
      }
      Json().str("bench", "translate").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
          .str("state", state).num("per_2m_ideal", static_cast<double>(round_up(size, kHuge2M) / kHuge2M))
          .stats("chunks", "count", summarise(counts)).emit();
    }
  }
}

}  // namespace

int bench_translate(const Args &a) {
  const auto pages = parse_pages(a.get("pages", "4k,thp,hugetlb,hugepool"));
  const auto sizes = parse_sizes(a.get("sizes", "2M,64M"));
  const long reps = a.num("reps", 3);
  const std::string mode = a.get("frag-mode", "alternate");
  size_t largest = 0;
  for (size_t s : sizes) largest = std::max(largest, s);
  // Twice the largest buffer, so the freed half can hold all of a 4 KB buffer.
  const size_t frag = a.get("frag", "").empty() ? 2 * largest + 64 * kMB : parse_size(a.get("frag", ""));

  const int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0) {
    skip("translate", "all", std::string("/proc/self/pagemap: ") + std::strerror(errno));
    return 0;
  }
  if (a.num("fresh", 1)) measure(pagemap, pages, sizes, reps, "fresh");
  {
    Fragmenter f(frag, mode);
    Json().str("bench", "translate").str("info", "fragmenter").integer("bytes", static_cast<long long>(frag))
        .str("mode", mode).emit();
    measure(pagemap, pages, sizes, reps, "fragmented-" + mode);
  }
  close(pagemap);
  return 0;
}

}  // namespace hb
