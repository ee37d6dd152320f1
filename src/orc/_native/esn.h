// The ESN steps every multi-step kernel runs (esn_run.cc, esn_fit.cc,
// esn_forecast.cc): the activation (its variants in tanh.cc), the drive of a
// step, the rows of a step, and the run of many steps from a state on one
// or two threads.
#ifndef ORC_ESN_H_
#define ORC_ESN_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "checks.h"
#include "isa.h"
#include "rows.h"
#include "workers.h"

namespace orc_native {

// The activation pass vectorises: on x86-64 it is compiled for AVX-512 and
// for AVX2 with FMA besides the baseline, and the best one the CPU has is
// picked once. FMA matters as much as the width: AMD Zen 3, 2000 values,
// 1.85 ns per value against 3.1 with AVX2 alone (6.9 for the baseline).
using TanhFn = void (*)(double*, int64_t);

// The variants (tanh.cc): the portable loop, and for AVX2 and AVX-512 with
// FMA where this build has them; TanhOf(isa) is variant isa's.
void TanhBaseline(double* __restrict z, int64_t m);
#ifdef ORC_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void TanhAvx512(double* __restrict z, int64_t m);
__attribute__((target("avx2,fma"))) void TanhAvx2(double* __restrict z, int64_t m);
#endif
TanhFn TanhOf(Isa isa);

inline TanhFn PickTanh() { return TanhOf(Resolve(g_variants.tanh, WidestIsa())); }

inline void TanhInPlace(double* z, int64_t m) {
  static const TanhFn tanh = PickTanh();
  tanh(z, m);
}

// Rows per unit of a step (EsnRows).
constexpr int64_t kUnitRows = 128;

// Whether a run or forecast of `steps` steps with `nonzeros` entries per
// step shares every step between two threads (a hand-over per step, and a
// helper to start: up to ~0.1 ms on a busy pool). Measured on an AMD EPYC
// (Zen 4, 2 cores), 2000-step forecasts, float32 / float64: res_dim 100 (200
// non-zeros) even; res_dim 200 (800) 1.98 / 2.52 -> 1.73 / 2.12 ms; res_dim
// 300 2.84 / 3.62 -> 2.23 / 3.02 ms; res_dim 500 5.23 / 6.27 -> 3.62 / 4.52
// ms; a 50-step call is 30-100 us slower with a helper. (The former bound,
// 16384 non-zeros per step, predates the one-call forecast.)
constexpr int64_t kEsnParallelNonzeros = 512;
constexpr int64_t kEsnParallelWork = int64_t{1} << 20;  // non-zeros x steps

inline bool ShareSteps(int64_t nonzeros, int64_t steps, int64_t width) {
  return width >= 2 && nonzeros >= kEsnParallelNonzeros &&
         static_cast<double>(nonzeros) * static_cast<double>(steps) >= kEsnParallelWork;
}

// The drive of a run: precomputed rows p (steps x width), or computed step by
// step from a linear embedding: p[t][c][i] = (sum_j win[c][i][j] u[t][c][j])
// + bias, with input weights win (C, n, w) and input windows u (steps, C, w)
// (the sum in j order from 0, then the bias: the order of XLA's drive). The
// weights are held input by input, win_t[c][j][i] = win[c][i][j] (a copy
// per call, InputsByColumn), so that a unit's drive is w vector passes over
// contiguous weights; row by row, the w products of a row were scalar code
// (about 0.8 us of a 3.3 us forecast step at res_dim 500, float64).
template <typename T>
struct Drive {
  const T* p = nullptr;
  const T* win_t = nullptr;  // (C, w, n)
  const T* u = nullptr;
  int64_t w = 0, n = 0;
  T bias = 0;

  // The drive of chunk c at step t (a view with p, win_t and u moved there).
  Drive At(int64_t t, int64_t c, int64_t n, int64_t chunks) const {
    Drive d = *this;
    d.n = n;
    if (p != nullptr) {
      d.p = p + (t * chunks + c) * n;
    } else {
      d.win_t = win_t + c * w * n;
      d.u = u + (t * chunks + c) * w;
    }
    return d;
  }
};

// win (C, n, w) input by input: (C, w, n).
template <typename T>
std::vector<T> InputsByColumn(const T* win, int64_t chunks, int64_t n, int64_t w) {
  std::vector<T> out(chunks * n * w);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < w; ++j) out[(c * w + j) * n + i] = win[(c * n + i) * w + j];
    }
  }
  return out;
}

// Rows [i0, i1) (at most kUnitRows) of one reservoir for one step:
// y = leak tanh(W x + p) + (1 - leak) x, with p the step's drive d (at the
// chunk). A precomputed drive may share its rows with y (the run overwrites
// the drive with the states): every p is read into z before any y of the
// unit is written.
template <typename T>
void EsnRows(const T* __restrict v, const int32_t* __restrict idx, const T* iv,
             const int32_t* icol, int64_t k, const T* __restrict x, const Drive<T>& d, T* y,
             int64_t i0, int64_t i1, T leak) {
  T dots[kUnitRows];
  double z[kUnitRows];
  const int64_t m = i1 - i0;
  CallRows<T>(v, idx, iv, icol, k, x, dots, i0, i1);
  if (d.p != nullptr) {
    for (int64_t i = 0; i < m; ++i) z[i] = static_cast<double>(dots[i] + d.p[i0 + i]);
  } else {
    T e[kUnitRows];
    for (int64_t i = 0; i < m; ++i) e[i] = 0;
    for (int64_t j = 0; j < d.w; ++j) {
      const T* __restrict wj = d.win_t + j * d.n + i0;
      const T uj = d.u[j];
      for (int64_t i = 0; i < m; ++i) e[i] += wj[i] * uj;
    }
    for (int64_t i = 0; i < m; ++i) z[i] = static_cast<double>(dots[i] + (e[i] + d.bias));
  }
  TanhInPlace(z, m);
  for (int64_t i = 0; i < m; ++i) {
    y[i0 + i] = leak * static_cast<T>(z[i]) + (1 - leak) * x[i0 + i];
  }
}

// The reservoir matrices of a multi-step call: values/indices (chunks, n, k)
// and, where this process runs them interleaved (RunsInterleaved), their
// interleaved copy, made once for the call.
template <typename T>
struct RunMatrix {
  const T* V;
  const int32_t* I;
  int64_t n, k, chunks;
  Interleaved<T> il;

  // interleave: 1 or 0 to force the copy or the row loops (tests), -1 as
  // this process runs them
  RunMatrix(const T* V, const int32_t* I, int64_t n, int64_t k, int64_t chunks,
            int interleave = -1)
      : V(V), I(I), n(n), k(k), chunks(chunks) {
#ifdef ORC_X86_DISPATCH
    if (interleave > 0 || (interleave < 0 && RunsInterleaved<T>(k))) {
      il = Interleaved<T>(V, I, chunks, n, k);
    }
#endif
  }
};

// Rows [lo, hi) of step t, counted over all chunks of the state (width
// chunks * n): pieces within one chunk, kUnitRows at most.
template <typename T>
void EsnStepRows(const RunMatrix<T>& m, const T* xs, const Drive<T>& drive, int64_t t, T* y,
                 T leak, int64_t lo, int64_t hi) {
  const int64_t n = m.n, k = m.k;
  for (int64_t g = lo; g < hi;) {
    const int64_t c = g / n, i0 = g % n;
    const int64_t i1 = std::min({n, i0 + kUnitRows, hi - c * n});
    ORC_DEBUG_ASSERT(ColumnsInRange(m.I + (c * n + i0) * k, (i1 - i0) * k, n));
    EsnRows<T>(m.V + c * n * k, m.I + c * n * k, m.il.ValuesOf(c), m.il.ColumnsOf(c), k,
               xs + c * n, drive.At(t, c, n, m.chunks), y + c * n, i0, i1, leak);
    g = c * n + i1;
  }
}

// Maps the pages of a run's fresh output a few MiB ahead of the steps that
// write them. XLA hands every call a new buffer, so each of its pages is
// mapped on first write: one trap per 4 KiB page, 0.2-0.3 s for the 320 MB
// of states at res_dim 2000 and 20000 steps, taken by the thread that runs
// the reservoir between its steps. Asking Linux to map a range at once
// (MADV_POPULATE_WRITE, Linux 5.14 and newer) costs less (0.15 s for those
// 320 MB on the KVM machines we measure on) and leaves the zeroed pages in
// cache for the steps that follow. Pages that are already mapped (the output
// may be the drive it overwrites) are left as they are; the request never
// changes memory contents, and where it is not supported the pages are
// mapped on first write as before.
#if defined(__linux__)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
class PagesAhead {
 public:
  // `rows` rows of `row_bytes` bytes each from `base`.
  PagesAhead(void* base, int64_t rows, int64_t row_bytes)
      : base_(static_cast<char*>(base)), rows_(rows), row_bytes_(row_bytes) {
    if (row_bytes > 0) block_ = std::max<int64_t>(1, kBytes / row_bytes);
  }

  // Before row t is written: map the block after the one t starts (and, at
  // t = 0, the first block too).
  void Before(int64_t t) {
    if (block_ == 0 || rows_ * row_bytes_ < 2 * kBytes || t % block_ != 0) return;
    if (t == 0) Map(0, block_);
    Map(t + block_, t + 2 * block_);
  }

 private:
  static constexpr int64_t kBytes = int64_t{4} << 20;

  void Map(int64_t r0, int64_t r1) {
    r1 = std::min(r1, rows_);
    if (r0 >= r1) return;
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    // whole pages inside the rows only
    const uintptr_t first = reinterpret_cast<uintptr_t>(base_ + r0 * row_bytes_);
    const uintptr_t lo = (first + page - 1) / page * page;
    const uintptr_t hi = reinterpret_cast<uintptr_t>(base_ + r1 * row_bytes_) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
  }

  char* base_;
  int64_t rows_, row_bytes_, block_ = 0;
};
#else
class PagesAhead {
 public:
  PagesAhead(void*, int64_t, int64_t) {}
  void Before(int64_t) {}
};
#endif

// Steps [0, steps) of the ESN from r0 into Y (a precomputed drive may be Y
// itself), with two threads sharing every step when the reservoir is large
// enough (SharedSteps: rows split between them, one hand-over per step).
// The second thread is a helper task on the workers; when it has not
// started within kJoinMicros (a busy pool), this thread runs every row. With
// one worker (or a small reservoir) this thread runs every row and, when
// `progress` is given, publishes the number of finished steps there after
// each step.
template <typename T>
void RunEsn(const RunMatrix<T>& m, int64_t steps, const Drive<T>& drive, const T* R0, T* Y,
            T leak, const Workers& workers, std::atomic<int64_t>* progress = nullptr) {
  const int64_t width = m.chunks * m.n;  // state elements per step
  if (steps == 0 || width == 0) return;
  PagesAhead pages(Y, steps, width * static_cast<int64_t>(sizeof(T)));
  auto make_step = [=, &m](int, int used) {
    return [=, &m](int64_t t, int64_t lo, int64_t hi) {
      const T* xs = t == 0 ? R0 : Y + (t - 1) * width;
      EsnStepRows<T>(m, xs, drive, t, Y + t * width, leak, lo, hi);
      if (progress != nullptr && used == 1) progress->store(t + 1, std::memory_order_release);
      return true;
    };
  };
  auto map_pages = [&pages](int64_t t, int w) {
    if (w == 0) pages.Before(t);
  };
  SharedSteps(workers, ShareSteps(m.n * m.k * m.chunks, steps, width), steps, width, make_step,
              map_pages);
}

// The drive of a linear embedding, win (C, n, w) and bias, with its copy of
// win input by input (InputsByColumn), for the inputs u (T, C, w) (nullptr:
// the kernel sets them per step). `drive` points into this object.
template <typename T>
struct LinearDrive {
  std::vector<T> win_t;
  Drive<T> drive;

  LinearDrive(const T* win, const T* u, T bias, int64_t chunks, int64_t n, int64_t w)
      : win_t(InputsByColumn(win, chunks, n, w)) {
    drive.win_t = win_t.data();
    drive.u = u;
    drive.w = w;
    drive.bias = bias;
  }
  LinearDrive(const LinearDrive&) = delete;
  LinearDrive& operator=(const LinearDrive&) = delete;
};

}  // namespace orc_native

#endif  // ORC_ESN_H_
