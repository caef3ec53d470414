// SPDX-License-Identifier: BSD-3-Clause
// The paper's halo-exchange table and the ring allreduce, in one run
// (mpiexec -n 2 or more; all on one node for the "shared" column):
//   halo       4-D periodic grid, a face to each of +-x,+-y,+-z,+-t, columns
//                seq_memalign / seq_huge       MPI_Isend/Irecv, one dimension at a time
//                conc_memalign / conc_huge     all eight faces at once
//                threaded_huge                 one thread per face direction, each on its
//                                              own duplicated communicator (MPI_THREAD_MULTIPLE)
//                shared_huge                   node peers copy their faces straight into the
//                                              neighbour's receive buffer in a hugepool node-shared
//                                              segment, with several threads; a node barrier ends it
//              ("huge" = hugepool buffers, "memalign" = posix_memalign, 4 KB pages)
//   allreduce  Baidu's ring allreduce (reduce-scatter + allgather of doubles), columns
//                original        work buffers allocated (malloc) and freed per call
//                cached          allocated once and reused
//                hugepool        hugepool_alloc/free per call (served by its cache)
//                hugepool_threads  hugepool, each ring step's sendrecv split over threads
//                                  on duplicated communicators
// Rank 0 prints JSON lines: median/min/max over --reps interleaved repetitions.
#include <omp.h>

#include "hugepool/hugepool.h"
#include "hugepool/mpi.h"
#include "mpi-common.hpp"

namespace {

int g_rank = 0, g_size = 1;

void *buf_alloc(bool huge, size_t n) {
  if (huge) return hugepool_alloc(n);
  void *p = nullptr;
  return posix_memalign(&p, 4096, n) == 0 ? p : nullptr;
}
void buf_free(bool huge, void *p) {
  if (huge)
    hugepool_free(p);
  else
    std::free(p);
}

// ---------------------------------------------------------------- halo
enum class HaloKind { seq_memalign, seq_huge, conc_memalign, conc_huge, threaded_huge, shared_huge };
const char *halo_name(HaloKind k) {
  switch (k) {
    case HaloKind::seq_memalign: return "seq_memalign";
    case HaloKind::seq_huge: return "seq_huge";
    case HaloKind::conc_memalign: return "conc_memalign";
    case HaloKind::conc_huge: return "conc_huge";
    case HaloKind::threaded_huge: return "threaded_huge";
    case HaloKind::shared_huge: return "shared_huge";
  }
  return "?";
}

class Halo {
 public:
  Halo(HaloKind kind, size_t face, int threads) : kind_(kind), face_(face), threads_(threads) {
    int periods[4] = {1, 1, 1, 1};
    MPI_Dims_create(g_size, 4, dims_);
    MPI_Cart_create(MPI_COMM_WORLD, 4, dims_, periods, 0, &cart_);
    for (int d = 0; d < 4; ++d) MPI_Cart_shift(cart_, d, 1, &lo_[d], &hi_[d]);
    const bool huge = kind != HaloKind::seq_memalign && kind != HaloKind::conc_memalign;
    bool good = true;
    for (int i = 0; i < 8; ++i) {
      send_[i] = static_cast<char *>(buf_alloc(huge, face));
      good = good && send_[i];
      if (send_[i]) std::memset(send_[i], 1 + i + 16 * g_rank, face);
    }
    if (kind == HaloKind::shared_huge) {
      good = hb::all_ranks_ok(good) && setup_shared();
    } else {
      for (int i = 0; i < 8; ++i) {
        recv_[i] = static_cast<char *>(buf_alloc(huge, face));
        good = good && recv_[i];
        if (recv_[i]) std::memset(recv_[i], 0, face);
      }
    }
    if (kind == HaloKind::threaded_huge)
      for (auto &c : dup_) MPI_Comm_dup(cart_, &c);
    ok = hb::all_ranks_ok(good);
    if (!ok && g_rank == 0) hb::skip("halo", std::string(halo_name(kind)) + " " + hb::size_name(face), why_);
    iters_ = std::max(3L, std::min(100L, static_cast<long>(64 * hb::kMB / (8 * face))));
  }
  ~Halo() {
    const bool huge = kind_ != HaloKind::seq_memalign && kind_ != HaloKind::conc_memalign;
    for (int i = 0; i < 8; ++i) {
      if (send_[i]) buf_free(huge, send_[i]);
      if (kind_ != HaloKind::shared_huge && recv_[i]) buf_free(huge, recv_[i]);
    }
    if (shared_) hugepool_mpi_segments_free(&segs_);
    for (auto &c : dup_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    MPI_Comm_free(&cart_);
  }
  bool ok = false;

  double run_once() {
    const double t0 = MPI_Wtime();
    for (long it = 0; it < iters_; ++it) exchange();
    return (MPI_Wtime() - t0) / static_cast<double>(iters_) * 1e6;  // per exchange, µs
  }
  // Every face arrived with its sender's pattern.
  bool check() {
    exchange();
    bool good = true;
    for (int d = 0; d < 4; ++d) {
      int from_hi = 0, from_lo = 0;
      MPI_Group cg, wg;
      MPI_Comm_group(cart_, &cg);
      MPI_Comm_group(MPI_COMM_WORLD, &wg);
      MPI_Group_translate_ranks(cg, 1, &hi_[d], wg, &from_hi);
      MPI_Group_translate_ranks(cg, 1, &lo_[d], wg, &from_lo);
      MPI_Group_free(&cg);
      MPI_Group_free(&wg);
      good = good && static_cast<unsigned char>(recv_[2 * d][face_ - 1]) == ((1 + 2 * d + 16 * from_hi) & 0xff);
      good = good && static_cast<unsigned char>(recv_[2 * d + 1][0]) == ((1 + 2 * d + 1 + 16 * from_lo) & 0xff);
    }
    return hb::all_ranks_ok(good);
  }
  void emit(const hb::Summary &s) const {
    hb::Json()
        .str("bench", "halo")
        .str("test", "halo")
        .str("column", halo_name(kind_))
        .integer("size", static_cast<long long>(face_))
        .integer("ranks", g_size)
        .integer("threads", kind_ == HaloKind::shared_huge     ? threads_
                            : kind_ == HaloKind::threaded_huge ? 8
                                                               : 1)
        .str("dims", std::to_string(dims_[0]) + "x" + std::to_string(dims_[1]) + "x" + std::to_string(dims_[2]) + "x" +
                         std::to_string(dims_[3]))
        .integer("iters", iters_)
        .stats("exchange_us", "us", s)
        .num("gbytes_per_s", 16.0 * static_cast<double>(face_) / s.median / 1e3)
        .emit();
  }

 private:
  // Receive faces in this rank's segment; send targets in the neighbours'.
  bool setup_shared() {
    if (hugepool_mpi_segments_create(cart_, 8 * face_, nullptr, &segs_) != 0) {
      why_ = "no node-shared segments (pool short?)";
      return false;
    }
    shared_ = true;
    MPI_Group cg, ng;
    MPI_Comm_group(cart_, &cg);
    MPI_Comm_group(segs_.node_comm, &ng);
    bool on_node = true;
    for (int d = 0; d < 4; ++d) {
      int nl = MPI_UNDEFINED, nh = MPI_UNDEFINED;
      MPI_Group_translate_ranks(cg, 1, &lo_[d], ng, &nl);
      MPI_Group_translate_ranks(cg, 1, &hi_[d], ng, &nh);
      if (nl == MPI_UNDEFINED || nh == MPI_UNDEFINED) {
        on_node = false;
        continue;
      }
      // face 2d goes to lo and lands in its recv slot 2d; face 2d+1 to hi, slot 2d+1
      target_[2 * d] = static_cast<char *>(segs_.peers[nl]) + 2 * d * face_;
      target_[2 * d + 1] = static_cast<char *>(segs_.peers[nh]) + (2 * d + 1) * face_;
    }
    MPI_Group_free(&cg);
    MPI_Group_free(&ng);
    for (int i = 0; i < 8; ++i) recv_[i] = static_cast<char *>(segs_.local) + i * face_;
    if (!on_node) why_ = "a neighbour is on another node";
    return on_node;
  }

  void exchange() {
    const int n = static_cast<int>(face_);
    switch (kind_) {
      case HaloKind::seq_memalign:
      case HaloKind::seq_huge:
      case HaloKind::conc_memalign:
      case HaloKind::conc_huge: {
        const bool seq = kind_ == HaloKind::seq_memalign || kind_ == HaloKind::seq_huge;
        MPI_Request req[16];
        int nreq = 0;
        for (int d = 0; d < 4; ++d) {
          MPI_Irecv(recv_[2 * d], n, MPI_BYTE, hi_[d], 2 * d, cart_, &req[nreq++]);
          MPI_Irecv(recv_[2 * d + 1], n, MPI_BYTE, lo_[d], 2 * d + 1, cart_, &req[nreq++]);
          MPI_Isend(send_[2 * d], n, MPI_BYTE, lo_[d], 2 * d, cart_, &req[nreq++]);
          MPI_Isend(send_[2 * d + 1], n, MPI_BYTE, hi_[d], 2 * d + 1, cart_, &req[nreq++]);
          if (seq) {
            MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
            nreq = 0;
          }
        }
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        break;
      }
      case HaloKind::threaded_huge:
#pragma omp parallel for num_threads(8) schedule(static, 1)
        for (int f = 0; f < 8; ++f) {
          const int d = f / 2;
          const int to = f % 2 ? hi_[d] : lo_[d], from = f % 2 ? lo_[d] : hi_[d];
          MPI_Sendrecv(send_[f], n, MPI_BYTE, to, f, recv_[f], n, MPI_BYTE, from, f, dup_[f], MPI_STATUS_IGNORE);
        }
        break;
      case HaloKind::shared_huge: {
        // The neighbours have read last time's faces (the barrier that ended
        // it), so the slots are free; copy in chunks over the threads.
        const size_t chunk = std::max<size_t>(64 * 1024, face_ / static_cast<size_t>(threads_));
        const long per_face = static_cast<long>((face_ + chunk - 1) / chunk);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (long job = 0; job < 8 * per_face; ++job) {
          const int f = static_cast<int>(job / per_face);
          const size_t off = static_cast<size_t>(job % per_face) * chunk;
          std::memcpy(target_[f] + off, send_[f] + off, std::min(chunk, face_ - off));
        }
        MPI_Barrier(segs_.node_comm);
        break;
      }
    }
  }

  HaloKind kind_;
  size_t face_;
  int threads_;
  int dims_[4] = {0, 0, 0, 0}, lo_[4] = {}, hi_[4] = {};
  MPI_Comm cart_ = MPI_COMM_NULL;
  MPI_Comm dup_[8] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                      MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  char *send_[8] = {}, *recv_[8] = {}, *target_[8] = {};
  hugepool_mpi_segments segs_{};
  bool shared_ = false;
  std::string why_ = "buffer allocation failed";
  long iters_ = 1;
};

// ---------------------------------------------------------------- allreduce
enum class RingKind { original, cached, hugepool, hugepool_threads };
const char *ring_name(RingKind k) {
  switch (k) {
    case RingKind::original: return "original";
    case RingKind::cached: return "cached";
    case RingKind::hugepool: return "hugepool";
    case RingKind::hugepool_threads: return "hugepool_threads";
  }
  return "?";
}

class Ring {
 public:
  Ring(RingKind kind, size_t bytes, int threads) : kind_(kind), n_(bytes / sizeof(double)), threads_(threads) {
    data_ = static_cast<double *>(buf_alloc(false, n_ * sizeof(double)));
    if (kind == RingKind::cached) {
      out_ = static_cast<double *>(buf_alloc(false, n_ * sizeof(double)));
      tmp_ = static_cast<double *>(buf_alloc(false, chunk_bytes()));
    }
    if (kind == RingKind::hugepool_threads)
      for (int t = 0; t < threads; ++t) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        dup_.push_back(c);
      }
    for (size_t i = 0; i < n_; ++i) data_[i] = static_cast<double>(g_rank + 1) * static_cast<double>(i % 1000);
    ok = hb::all_ranks_ok(data_ && (kind != RingKind::cached || (out_ && tmp_)));
    iters_ = std::max(2L, std::min(50L, static_cast<long>(64 * hb::kMB / bytes)));
  }
  ~Ring() {
    buf_free(false, data_);
    if (out_) buf_free(false, out_);
    if (tmp_) buf_free(false, tmp_);
    for (auto &c : dup_) MPI_Comm_free(&c);
  }
  bool ok = false;
  double run_once() {
    const double t0 = MPI_Wtime();
    for (long it = 0; it < iters_; ++it) {
      if (!allreduce()) correct_ = false;
    }
    return (MPI_Wtime() - t0) / static_cast<double>(iters_) * 1e6;
  }
  bool correct() const { return correct_; }
  void emit(const hb::Summary &s) const {
    hb::Json()
        .str("bench", "halo")
        .str("test", "ring_allreduce")
        .str("column", ring_name(kind_))
        .integer("size", static_cast<long long>(n_ * sizeof(double)))
        .integer("ranks", g_size)
        .integer("threads", kind_ == RingKind::hugepool_threads ? threads_ : 1)
        .integer("iters", iters_)
        .stats("allreduce_us", "us", s)
        .emit();
  }

 private:
  size_t chunk_elems() const { return (n_ + static_cast<size_t>(g_size) - 1) / static_cast<size_t>(g_size); }
  size_t chunk_bytes() const { return chunk_elems() * sizeof(double); }

  // One sendrecv of `count` doubles, split over threads when asked.
  void step(const double *send, int to, double *recv, int from, size_t count) {
    if (kind_ != RingKind::hugepool_threads) {
      MPI_Sendrecv(send, static_cast<int>(count), MPI_DOUBLE, to, 0, recv, static_cast<int>(count), MPI_DOUBLE, from, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return;
    }
    const size_t per = (count + static_cast<size_t>(threads_) - 1) / static_cast<size_t>(threads_);
#pragma omp parallel for num_threads(threads_) schedule(static, 1)
    for (int t = 0; t < threads_; ++t) {
      const size_t lo = std::min(count, static_cast<size_t>(t) * per), hi = std::min(count, lo + per);
      MPI_Sendrecv(send + lo, static_cast<int>(hi - lo), MPI_DOUBLE, to, 0, recv + lo, static_cast<int>(hi - lo),
                   MPI_DOUBLE, from, 0, dup_[static_cast<size_t>(t)], MPI_STATUS_IGNORE);
    }
  }

  // Ring allreduce of data_ into a result buffer; checks the result.
  bool allreduce() {
    const bool huge = kind_ == RingKind::hugepool || kind_ == RingKind::hugepool_threads;
    double *out = out_, *tmp = tmp_;
    if (kind_ != RingKind::cached) {  // per call, as the original does
      out = static_cast<double *>(huge ? hugepool_alloc(n_ * sizeof(double)) : std::malloc(n_ * sizeof(double)));
      tmp = static_cast<double *>(huge ? hugepool_alloc(chunk_bytes()) : std::malloc(chunk_bytes()));
      if (!out || !tmp) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    std::memcpy(out, data_, n_ * sizeof(double));
    const int p = g_size, r = g_rank, right = (r + 1) % p, left = (r + p - 1) % p;
    const size_t ce = chunk_elems();
    auto lo = [&](int c) { return std::min(n_, static_cast<size_t>(c) * ce); };
    auto len = [&](int c) { return std::min(n_, lo(c) + ce) - lo(c); };
    for (int s = 0; s < p - 1; ++s) {  // reduce-scatter
      const int sc = (r - s + p) % p, rc = (r - s - 1 + p) % p;
      step(out + lo(sc), right, tmp, left, std::max(len(sc), len(rc)));
      for (size_t i = 0; i < len(rc); ++i) out[lo(rc) + i] += tmp[i];
    }
    for (int s = 0; s < p - 1; ++s) {  // allgather
      const int sc = (r + 1 - s + p) % p, rc = (r - s + p) % p;
      step(out + lo(sc), right, tmp, left, std::max(len(sc), len(rc)));
      std::memcpy(out + lo(rc), tmp, len(rc) * sizeof(double));
    }
    const double factor = static_cast<double>(p) * (p + 1) / 2.0;
    const bool good = out[n_ - 1] == factor * static_cast<double>((n_ - 1) % 1000) && out[1] == factor;
    if (kind_ != RingKind::cached) {
      if (huge) {
        hugepool_free(out);
        hugepool_free(tmp);
      } else {
        std::free(out);
        std::free(tmp);
      }
    }
    return good;
  }

  RingKind kind_;
  size_t n_;
  int threads_;
  double *data_ = nullptr, *out_ = nullptr, *tmp_ = nullptr;
  std::vector<MPI_Comm> dup_;
  long iters_ = 1;
  bool correct_ = true;
};

}  // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  hb::Args a(argc, argv, 1);
  const long reps = a.num("reps", 5);
  const int threads = static_cast<int>(a.num("threads", 4));
  const auto tests = hb::split(a.get("tests", "halo,allreduce"));
  auto want = [&](const char *t) { return std::find(tests.begin(), tests.end(), t) != tests.end(); };
  if (provided < MPI_THREAD_MULTIPLE && g_rank == 0) hb::skip("halo", "threaded columns", "no MPI_THREAD_MULTIPLE");
  if (want("halo"))
    for (size_t face : hb::parse_sizes(a.get("halo-sizes", "49152,393216,3145728,10616832,25165824"))) {
      std::vector<std::unique_ptr<Halo>> cases;
      for (HaloKind k : {HaloKind::seq_huge, HaloKind::seq_memalign, HaloKind::conc_memalign, HaloKind::conc_huge,
                         HaloKind::threaded_huge, HaloKind::shared_huge}) {
        if (k == HaloKind::threaded_huge && provided < MPI_THREAD_MULTIPLE) continue;
        cases.push_back(std::make_unique<Halo>(k, face, threads));
        if (cases.back()->ok && !cases.back()->check()) {
          if (g_rank == 0) hb::skip("halo", std::string(halo_name(k)) + " " + hb::size_name(face), "wrong data");
          cases.back()->ok = false;
        }
      }
      hb::run_interleaved(cases, reps);
    }
  if (want("allreduce"))
    for (size_t bytes : hb::parse_sizes(a.get("allreduce-sizes", "1M,16M,64M"))) {
      std::vector<std::unique_ptr<Ring>> cases;
      for (RingKind k : {RingKind::original, RingKind::cached, RingKind::hugepool, RingKind::hugepool_threads}) {
        if (k == RingKind::hugepool_threads && provided < MPI_THREAD_MULTIPLE) continue;
        cases.push_back(std::make_unique<Ring>(k, bytes, threads));
      }
      hb::run_interleaved(cases, reps);
      for (auto &c : cases)
        if (c->ok && !hb::all_ranks_ok(c->correct()) && g_rank == 0) hb::skip("halo", "ring_allreduce", "wrong result");
    }
  MPI_Finalize();
  return 0;
}
