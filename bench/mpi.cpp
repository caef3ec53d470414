// SPDX-License-Identifier: BSD-3-Clause
// MPI benchmarks (run under mpiexec with 2 or more ranks):
//   pingpong   ranks 0 and 1, 1 KB - 64 MB: half round-trip latency and bandwidth
//   halo       4-D periodic Cartesian grid, a face to each of +-x,+-y,+-z,+-t
//              with MPI_Isend/Irecv/Waitall, per dimension ("sequential") or
//              all eight at once ("concurrent")
//   allreduce  ring allreduce (reduce-scatter + allgather) whose work buffers
//              are allocated per call, or allocated once and reused
// Buffers: memalign (posix_memalign, 4 KB pages), hugetlb (mmap MAP_HUGETLB),
// hugepool (hugepool_alloc).  Rank 0 prints the JSON lines.
#include "mpi-common.hpp"

namespace hb {

namespace {

int g_rank = 0, g_size = 1;
std::string g_tls;

// The buffer kinds compared (bench_util.hpp's buf_alloc): Page::memalign,
// Page::huge2m ("hugetlb") and Page::hugepool.

void mpi_skip(const std::string &what, const std::string &why) {
  if (g_rank == 0) skip("mpi", what + " tls=" + g_tls, why);
}

Json row(const char *test, Page m, size_t size) {
  Json j;
  j.str("bench", "mpi")
      .str("test", test)
      .str("tls", g_tls)
      .str("mem", page_name(m))
      .integer("size", static_cast<long long>(size))
      .integer("ranks", g_size);
  return j;
}

std::vector<Page> parse_mems(const std::string &s) {
  std::vector<Page> out;
  for (const auto &x : split(s)) {
    if (x == "memalign")
      out.push_back(Page::memalign);
    else if (x == "hugetlb")
      out.push_back(Page::huge2m);
    else if (x == "hugepool") {
      if (have_hugepool())
        out.push_back(Page::hugepool);
      else
        mpi_skip("hugepool buffers", "built without the hugepool library");
    } else
      die("unknown buffer kind " + x);
  }
  return out;
}

// ---------------------------------------------------------------- cases
// One measured configuration, run by run_interleaved (mpi-common.hpp).
class Case {
 public:
  virtual ~Case() = default;
  bool ok = false;                // set up on every rank
  virtual double run_once() = 0;  // one timed block; the value recorded
  virtual void emit(const Summary &s) = 0;
};

// ---------------------------------------------------------------- ping-pong
class PingPong : public Case {
 public:
  PingPong(Page m, size_t size) : m_(m), size_(size), buf_(buf_alloc(m, size)) {
    ok = all_ranks_ok(static_cast<bool>(buf_));
    if (!ok) {
      mpi_skip(std::string("pingpong ") + page_name(m) + " " + size_name(size), "buffer allocation failed");
      return;
    }
    std::memset(buf_.p, g_rank, size);
    page_kb_ = smaps_kb_of(buf_.p, "KernelPageSize");
    iters_ = std::max(4L, std::min(1000L, static_cast<long>(256 * kMB / size)));
  }
  ~PingPong() override { buf_free(buf_); }
  double run_once() override {
    const int n = static_cast<int>(size_);
    const double t0 = MPI_Wtime();
    for (long i = 0; i < iters_; ++i) {
      if (g_rank == 0) {
        MPI_Send(buf_.p, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf_.p, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (g_rank == 1) {
        MPI_Recv(buf_.p, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf_.p, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    return (MPI_Wtime() - t0) / static_cast<double>(iters_) / 2 * 1e6;  // half round trip, µs
  }
  void emit(const Summary &s) override {
    row("pingpong", m_, size_)
        .integer("iters", iters_)
        .integer("page_kb", page_kb_)
        .stats("half_rtt_us", "us", s)
        .emit();
  }

 private:
  Page m_;
  size_t size_;
  Buf buf_;
  long page_kb_ = -1, iters_ = 1;
};

// ---------------------------------------------------------------- halo
class Halo : public Case {
 public:
  Halo(Page m, size_t face, bool concurrent) : m_(m), face_(face), concurrent_(concurrent) {
    int periods[4] = {1, 1, 1, 1};
    MPI_Dims_create(g_size, 4, dims_);
    MPI_Cart_create(MPI_COMM_WORLD, 4, dims_, periods, 0, &cart_);
    bool good = true;
    for (int i = 0; i < 8; ++i) {
      send_[i] = buf_alloc(m, face);
      recv_[i] = buf_alloc(m, face);
      good = good && send_[i] && recv_[i];
      if (send_[i]) std::memset(send_[i].p, i, face);
      if (recv_[i]) std::memset(recv_[i].p, 0, face);
    }
    ok = all_ranks_ok(good);
    if (!ok) {
      mpi_skip(std::string(variant()) + " " + page_name(m) + " " + size_name(face), "buffer allocation failed");
      return;
    }
    for (int d = 0; d < 4; ++d) MPI_Cart_shift(cart_, d, 1, &lo_[d], &hi_[d]);
    iters_ = std::max(3L, std::min(200L, static_cast<long>(128 * kMB / (8 * face))));
  }
  ~Halo() override {
    for (int i = 0; i < 8; ++i) {
      buf_free(send_[i]);
      buf_free(recv_[i]);
    }
    MPI_Comm_free(&cart_);
  }
  const char *variant() const { return concurrent_ ? "halo_concurrent" : "halo_sequential"; }
  double run_once() override {
    const int n = static_cast<int>(face_);
    const double t0 = MPI_Wtime();
    for (long it = 0; it < iters_; ++it) {
      MPI_Request req[16];
      int nreq = 0;
      for (int d = 0; d < 4; ++d) {
        // Face 2d goes down (-d) and arrives from up; face 2d+1 the other way.
        MPI_Irecv(recv_[2 * d].p, n, MPI_BYTE, hi_[d], 2 * d, cart_, &req[nreq++]);
        MPI_Irecv(recv_[2 * d + 1].p, n, MPI_BYTE, lo_[d], 2 * d + 1, cart_, &req[nreq++]);
        MPI_Isend(send_[2 * d].p, n, MPI_BYTE, lo_[d], 2 * d, cart_, &req[nreq++]);
        MPI_Isend(send_[2 * d + 1].p, n, MPI_BYTE, hi_[d], 2 * d + 1, cart_, &req[nreq++]);
        if (!concurrent_) {
          MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
          nreq = 0;
        }
      }
      MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    }
    return (MPI_Wtime() - t0) / static_cast<double>(iters_) * 1e6;  // per exchange, µs
  }
  void emit(const Summary &s) override {
    row(variant(), m_, face_)
        .str("dims", std::to_string(dims_[0]) + "x" + std::to_string(dims_[1]) + "x" + std::to_string(dims_[2]) + "x" +
                         std::to_string(dims_[3]))
        .integer("iters", iters_)
        .stats("exchange_us", "us", s)
        .emit();
  }

 private:
  Page m_;
  size_t face_;
  bool concurrent_;
  int dims_[4] = {0, 0, 0, 0}, lo_[4] = {}, hi_[4] = {};
  MPI_Comm cart_ = MPI_COMM_NULL;
  Buf send_[8], recv_[8];
  long iters_ = 1;
};

// ---------------------------------------------------------------- allreduce
// Ring allreduce of doubles (reduce-scatter, then allgather).  With `fresh`,
// the work vector and the receive chunk are allocated (and given back)
// inside every call, as codes that allocate scratch space per call do.
class Allreduce : public Case {
 public:
  Allreduce(Page m, size_t bytes, bool fresh)
      : m_(m),
        bytes_(bytes),
        fresh_(fresh),
        count_(bytes / sizeof(double)),
        per_((count_ + static_cast<size_t>(g_size) - 1) / static_cast<size_t>(g_size)),
        in_(count_, 1.0 + g_rank),
        out_(count_) {
    if (!fresh_) {
      work_ = buf_alloc(m, work_bytes());
      chunk_ = buf_alloc(m, per_ * sizeof(double));
    }
    ok = all_ranks_ok(fresh_ || (work_ && chunk_));
    if (!ok) mpi_skip(std::string(variant()) + " " + page_name(m) + " " + size_name(bytes), "buffer allocation failed");
    iters_ = std::max(3L, std::min(100L, static_cast<long>(256 * kMB / bytes)));
  }
  ~Allreduce() override {
    buf_free(work_);
    buf_free(chunk_);
  }
  const char *variant() const { return fresh_ ? "allreduce_alloc" : "allreduce_reuse"; }
  double run_once() override {
    const double t0 = MPI_Wtime();
    for (long i = 0; i < iters_ && ok; ++i) ok = call();
    const double t = (MPI_Wtime() - t0) / static_cast<double>(iters_) * 1e6;  // per call, µs
    double expect = 0;
    for (int k = 0; k < g_size; ++k) expect += 1.0 + k;
    correct_ = correct_ && ok && out_[0] == expect && out_[count_ - 1] == expect;
    return t;
  }
  void emit(const Summary &s) override {
    if (!correct_) {
      mpi_skip(std::string(variant()) + " " + page_name(m_) + " " + size_name(bytes_),
               "wrong result or allocation failure");
      return;
    }
    row(variant(), m_, bytes_).integer("iters", iters_).stats("call_us", "us", s).emit();
  }

 private:
  size_t work_bytes() const { return per_ * static_cast<size_t>(g_size) * sizeof(double); }
  bool call() {
    Buf work_buf = fresh_ ? buf_alloc(m_, work_bytes()) : work_;
    Buf chunk_buf = fresh_ ? buf_alloc(m_, per_ * sizeof(double)) : chunk_;
    const bool have = all_ranks_ok(work_buf && chunk_buf);
    auto *work = reinterpret_cast<double *>(work_buf.p), *chunk = reinterpret_cast<double *>(chunk_buf.p);
    if (have) {
      std::memcpy(work, in_.data(), count_ * sizeof(double));
      const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size, n = static_cast<int>(per_);
      for (int step = 0; step < g_size - 1; ++step) {  // reduce-scatter
        const int sb = (g_rank - step + g_size) % g_size, rb = (g_rank - step - 1 + 2 * g_size) % g_size;
        MPI_Sendrecv(work + static_cast<size_t>(sb) * per_, n, MPI_DOUBLE, right, 0, chunk, n, MPI_DOUBLE, left, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double *dst = work + static_cast<size_t>(rb) * per_;
        for (size_t i = 0; i < per_; ++i) dst[i] += chunk[i];
      }
      for (int step = 0; step < g_size - 1; ++step) {  // allgather
        const int sb = (g_rank + 1 - step + g_size) % g_size, rb = (g_rank - step + g_size) % g_size;
        MPI_Sendrecv(work + static_cast<size_t>(sb) * per_, n, MPI_DOUBLE, right, 1,
                     work + static_cast<size_t>(rb) * per_, n, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      std::memcpy(out_.data(), work, count_ * sizeof(double));
    }
    if (fresh_) {
      buf_free(work_buf);
      buf_free(chunk_buf);
    }
    return have;
  }

  Page m_;
  size_t bytes_;
  bool fresh_;
  size_t count_, per_;
  std::vector<double> in_, out_;
  Buf work_, chunk_;
  long iters_ = 1;
  bool correct_ = true;
};

}  // namespace

}  // namespace hb

int main(int argc, char **argv) {
  using namespace hb;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  Args a(argc, argv, 1);
  const char *tls = std::getenv("UCX_TLS");
  g_tls = a.get("tls-label", tls ? tls : "default");
  const auto mems = parse_mems(a.get("mem", "memalign,hugetlb,hugepool"));
  const auto tests = split(a.get("tests", "pingpong,halo,allreduce"));
  const long reps = a.num("reps", 5);
  auto want = [&](const char *t) { return std::find(tests.begin(), tests.end(), t) != tests.end(); };
  if (g_size < 2) {
    mpi_skip("all", "needs at least 2 ranks");
    MPI_Finalize();
    return 0;
  }
  using Cases = std::vector<std::unique_ptr<Case>>;
  if (want("pingpong"))
    for (size_t s : parse_sizes(a.get("pingpong-sizes", "1K,16K,256K,1M,4M,16M"))) {
      Cases cases;
      for (Page m : mems) cases.push_back(std::make_unique<PingPong>(m, s));
      run_interleaved(cases, reps);
    }
  if (want("halo"))
    for (bool conc : {false, true})
      for (size_t s : parse_sizes(a.get("halo-sizes", "256K,2M"))) {
        Cases cases;
        for (Page m : mems) cases.push_back(std::make_unique<Halo>(m, s, conc));
        run_interleaved(cases, reps);
      }
  if (want("allreduce"))
    for (size_t s : parse_sizes(a.get("allreduce-sizes", "1M,16M"))) {
      Cases cases;
      for (Page m : mems) cases.push_back(std::make_unique<Allreduce>(m, s, true));
      for (Page m : mems)
        if (m != Page::hugepool)
          cases.push_back(std::make_unique<Allreduce>(m, s, false));  // reused hugetlb is what hugepool gives
      run_interleaved(cases, reps);
    }
  MPI_Finalize();
  return 0;
}
