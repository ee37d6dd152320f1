// orc's native CPU kernels, as XLA FFI custom calls (see orc/_native/__init__.py):
// the sparse reservoir product, the teacher-forced ESN run, the in-place
// update of the ridge statistics and the in-place ridge solve.
//
// Sparse matrix-vector product for reservoir matrices in ELL layout.
//
// A matrix with exactly k entries per row is stored as values[n][k] and
// column indices[n][k]; y[i] = sum_j values[i][j] * x[indices[i][j]].
// XLA's generic gather costs ~2 ns per element on CPU; this loop runs at the
// speed of reading the matrix once (it is called once per reservoir step).
//
// Leading (batch) dimensions broadcast like numpy with equal ranks: an extent
// of 1 is repeated (what jax.ffi.ffi_call(..., vmap_method="expand_dims")
// produces for arguments that are not mapped).

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <thread>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "xla/ffi/api/ffi.h"
#include "orc_native.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ORC_NO_CLONES)
#define ORC_X86_DISPATCH 1
#include <immintrin.h>
#endif

namespace ffi = xla::ffi;

// ---------------------------------------------------------------------------
// BLAS/LAPACK routines, set once when the Python module is imported (from
// SciPy's exported Cython capsules, see module.cc). They used to travel as
// integer attributes of every call, which put process-specific addresses in
// the compiled program: JAX's persistent compilation cache could then never
// hit across processes, and an exported program carried dead pointers.
namespace orc_native {

namespace {
std::atomic<void*> g_routines[kRoutineCount] = {};
}  // namespace

const char* const kRoutineNames[kRoutineCount] = {
    "ssyrk", "dsyrk", "sgemm", "dgemm", "ssyevd", "dsyevd",
};

void SetRoutine(int which, void* fn) {
  if (which >= 0 && which < kRoutineCount) g_routines[which].store(fn, std::memory_order_release);
}

void* GetRoutine(int which) {
  return which >= 0 && which < kRoutineCount ? g_routines[which].load(std::memory_order_acquire)
                                             : nullptr;
}

}  // namespace orc_native

namespace {

// The routine for element type T: `single` for float, the next entry
// (its double-precision twin) for double.
template <typename T>
void* RoutineFor(orc_native::Routine single) {
  return orc_native::GetRoutine(single + (std::is_same_v<T, double> ? 1 : 0));
}

ffi::Error NoRoutines(const char* kernel) {
  return ffi::Error::Internal(std::string("orc ") + kernel +
                              ": BLAS/LAPACK routines were not registered (orc._native "
                              "sets them from SciPy when it is imported)");
}

}  // namespace

// ---------------------------------------------------------------------------
// Index safety. The kernels gather x[idx] with column indices that come from
// the caller: a model built by orc has them in range, but a file, a user's
// edit of the arrays or a traced construction could carry anything. Every
// kernel that gathers checks its whole index buffer once per call with
// ColumnsInRange (one vectorised pass, a few microseconds at res_dim 2000
// against milliseconds of work) and returns an error instead of reading
// outside its buffers. Debug builds (-DORC_DEBUG) also assert it on every
// block of rows they compute.
#ifdef ORC_DEBUG
#include <cstdio>
#define ORC_DEBUG_ASSERT(cond)                                              \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "orc native: assertion failed: %s (%s:%d)\n", \
                   #cond, __FILE__, __LINE__);                              \
      std::abort();                                                         \
    }                                                                       \
  } while (0)
#else
#define ORC_DEBUG_ASSERT(cond) ((void)0)
#endif

namespace {

// Whether every one of the count indices lies in [0, n).
inline bool ColumnsInRange(const int32_t* idx, int64_t count, int64_t n) {
  uint32_t bad = 0;
  if (n > static_cast<int64_t>(std::numeric_limits<int32_t>::max())) {
    for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint32_t>(idx[i] < 0);
  } else {
    const uint32_t bound = static_cast<uint32_t>(n);
    for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint32_t>(idx[i]) >= bound;
  }
  return bad == 0;
}

ffi::Error IndexError(const char* kernel) {
  return ffi::Error::InvalidArgument(
      std::string("orc ") + kernel +
      ": a reservoir column index lies outside [0, res_dim) (a corrupted or edited "
      "matrix); nothing was computed");
}

}  // namespace

// ---------------------------------------------------------------------------
// Threads of the native kernels: one model. Every kernel that uses more than
// its calling thread hands tasks to XLA's CPU thread pool for the call (the
// intra-op pool XLA sizes from the CPUs the process may run on), capped by
// ORC_NATIVE_THREADS; no kernel starts a thread of its own, and none changes
// BLAS's (process-wide) thread count.
//
// A pool task may start late or, when every pool thread is busy (another
// computation, a vmapped call whose pieces run at once), not before the call
// would end. So no call ever waits for a task to *start*: work is claimed
// through atomics, the calling thread takes whatever no task has claimed,
// and a task that starts after its call has ended finds nothing to do and
// touches nothing but the small shared record that tells it so. Which thread
// computes a piece never changes the piece's result (each output element is
// computed by one thread in a fixed order), so results are the same bits on
// any number of threads and whatever the timing.
namespace {

// The cap from ORC_NATIVE_THREADS (a positive integer), 0 when not set.
int64_t ThreadCap() {
  static const int64_t cap = [] {
    const char* env = std::getenv("ORC_NATIVE_THREADS");
    const int64_t v = env != nullptr ? std::atoll(env) : 0;
    return v > 0 ? v : int64_t{0};
  }();
  return cap;
}

// Threads of the last pool a handler was given (for orc.show_config()).
std::atomic<int64_t> g_pool_threads{0};

// Where a call's helper tasks go, and how many threads (this one included)
// may work on it. Default: this thread alone.
class Workers {
 public:
  using Task = std::function<void()>;
  using Scheduler = std::function<void(Task)>;

  Workers() = default;
  Workers(Scheduler schedule, int64_t threads)
      : schedule_(std::move(schedule)), threads_(schedule_ ? std::max<int64_t>(1, threads) : 1) {}

  // XLA's pool of a handler call, capped by ORC_NATIVE_THREADS.
  static Workers Of(ffi::ThreadPool& pool) {
    int64_t threads = std::max<int64_t>(1, pool.num_threads());
    g_pool_threads.store(threads, std::memory_order_relaxed);
    if (ThreadCap() > 0) threads = std::min(threads, ThreadCap());
    return Workers([&pool](Task task) { pool.Schedule(std::move(task)); }, threads);
  }

  int64_t threads() const { return threads_; }
  void Schedule(Task task) const { schedule_(std::move(task)); }

 private:
  Scheduler schedule_;
  int64_t threads_ = 1;
};

inline void SpinPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// One helper task for the duration of a call: `work` runs at most once, on a
// pool thread, and only if that thread claims it before the call gives up on
// it; the call ends (Finish, or the destructor) only once `work` is not
// running and never will. `work` may refer to the caller's locals: it is
// never called after Finish.
class Helper {
 public:
  Helper(const Workers& workers, std::function<void()> work) {
    if (workers.threads() < 2) return;
    shared_ = std::make_shared<Shared>();
    shared_->work = std::move(work);
    shared_->owner = std::this_thread::get_id();
    workers.Schedule([s = shared_] {
      int expected = kPending;
      // A pool that cannot take tasks runs them in the scheduling thread:
      // leave this one to the caller, which would otherwise wait for itself.
      if (std::this_thread::get_id() == s->owner) return;
      if (!s->phase.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel)) return;
      s->work();
      s->phase.store(kDone, std::memory_order_release);
    });
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  ~Helper() { Finish(); }

  // Whether `work` has started (or finished); when it has not, it never
  // will: this call claims it.
  bool Started() {
    if (!shared_) return false;
    int expected = kPending;
    if (shared_->phase.compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel)) {
      return false;
    }
    return expected != kCancelled;
  }

  // Started(), after waiting up to `micros` microseconds for the start.
  bool AwaitStart(int64_t micros) {
    if (!shared_) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    int64_t spins = 0;
    while (shared_->phase.load(std::memory_order_acquire) == kPending) {
      SpinPause();
      if ((++spins & 255) == 0 && std::chrono::steady_clock::now() > until) break;
    }
    return Started();
  }

  // Returns once `work` is over or certain never to run.
  void Finish() {
    if (!Started()) return;
    int64_t spins = 0;
    while (shared_->phase.load(std::memory_order_acquire) != kDone) {
      SpinPause();
      if (++spins > (1 << 12)) {
        std::this_thread::yield();
        spins = 0;
      }
    }
  }

 private:
  enum : int { kPending, kRunning, kDone, kCancelled };
  struct Shared {
    std::atomic<int> phase{kPending};
    std::function<void()> work;
    std::thread::id owner;
  };
  std::shared_ptr<Shared> shared_;
};

// body(unit, worker) for every unit in [0, units), each exactly once, on
// this thread (worker 0) and up to threads - 1 helpers (workers 1, 2, ...);
// returns when every unit is done. Units are claimed in order from one
// counter, so this thread never waits for a unit that no thread holds.
// `worker` indexes per-thread scratch (fewer than workers.threads()).
template <typename F>
void ParallelFor(const Workers& workers, int64_t units, const F& body) {
  if (units <= 0) return;
  const int64_t helpers = std::min<int64_t>(workers.threads() - 1, units - 1);
  if (helpers <= 0) {
    for (int64_t u = 0; u < units; ++u) body(u, int64_t{0});
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&](int64_t worker) {
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < units;) body(u, worker);
  };
  std::vector<std::unique_ptr<Helper>> team;
  team.reserve(static_cast<size_t>(helpers));
  for (int64_t h = 1; h <= helpers; ++h) {
    team.push_back(std::make_unique<Helper>(workers, [&work, h] { work(h); }));
  }
  work(0);
  team.clear();  // waits for the units helpers hold; cancels helpers not started
}

// How long a call that shares every step between two threads (the ESN runs)
// waits for its helper to start before it runs alone: a pool thread that is
// idle starts in microseconds; one that is busy elsewhere may not for long.
constexpr int64_t kJoinMicros = 2000;

}  // namespace

// ---------------------------------------------------------------------------
// Which variant each kernel runs. Without other instructions, the widest
// the CPU has, from its flags. The build measures them instead (Calibrate
// below: `pip install` runs it and installs calibration.txt next to the
// module, which orc._native loads at import), and ORC_NATIVE_VARIANTS
// overrides both ("ell_f64=scalar gram=avx2 ..."). Variants are set before
// any kernel runs and then fixed for the process (each kernel keeps its
// choice from its first call), so every call of a process, and of every
// process using one install, runs the same arithmetic. ORC_NATIVE_SIMD=0
// still forces the portable loops everywhere.
namespace {

enum class Isa : int { kAuto = -1, kBase = 0, kAvx2 = 1, kAvx512 = 2 };

struct Variants {
  Isa ell[2] = {Isa::kAuto, Isa::kAuto};  // float, double
  int64_t ell_min_k[2] = {0, 0};          // shortest rows the vector loop takes
  // The products of the multi-step kernels (ESN runs, fits, forecasts):
  // kAvx2 runs the interleaved loop (EllRowsInterleaved) for rows of
  // run_min_k entries or more, kBase (and kAuto) the row loops of `ell`.
  Isa run[2] = {Isa::kAuto, Isa::kAuto};
  int64_t run_min_k[2] = {0, 0};
  Isa tanh = Isa::kAuto;
  Isa gram = Isa::kAuto;
};

Variants g_variants;
std::atomic<bool> g_variants_fixed{false};

// Whether vector variants may be picked (not with ORC_NATIVE_SIMD=0).
bool SimdAllowed() {
  const char* env = std::getenv("ORC_NATIVE_SIMD");
  return env == nullptr || std::atoi(env) != 0;
}

// Whether this build and CPU can run variant `isa`.
bool CpuRuns(Isa isa) {
  if (isa == Isa::kBase) return true;
#ifdef ORC_X86_DISPATCH
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (isa == Isa::kAvx2) return __builtin_cpu_supports("avx2") && fma;
  if (isa == Isa::kAvx512) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && fma;
  }
#endif
  return false;
}

// The widest variant this CPU runs (kBase with ORC_NATIVE_SIMD=0).
Isa WidestIsa() {
  if (!SimdAllowed()) return Isa::kBase;
  if (CpuRuns(Isa::kAvx512)) return Isa::kAvx512;
  if (CpuRuns(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBase;
}

// The variant a kernel family runs: the one set (within what SIMD allows),
// else `fallback`. Fixes the table for the process.
Isa Resolve(Isa set, Isa fallback) {
  g_variants_fixed.store(true, std::memory_order_release);
  if (!SimdAllowed()) return Isa::kBase;
  return set == Isa::kAuto ? fallback : set;
}

const char* IsaName(Isa isa, bool ell = false) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return ell ? "scalar" : "baseline";
  }
}

bool ParseIsa(const std::string& word, bool ell, Isa& out) {
  for (Isa isa : {Isa::kBase, Isa::kAvx2, Isa::kAvx512}) {
    if (word == IsaName(isa, ell)) {
      out = isa;
      return true;
    }
  }
  return false;
}

}  // namespace

namespace orc_native {

// Sets variants from `spec`: "key=value" words separated by spaces, commas
// or new lines, '#' to the end of a line a comment. Keys: ell_f64 and
// ell_f32 (scalar, avx2:K or avx512:K, K the shortest rows of K entries the
// vector loop takes), run_f64 and run_f32 (rows: the ell loops; or
// interleaved:K, the interleaved loop for rows of K entries or more, which
// needs AVX2 and FMA), tanh and gram (baseline, avx2, avx512). Nothing is
// set unless the whole spec is valid for this CPU. Returns "" or what is
// wrong.
std::string SetVariants(const std::string& spec) {
  if (g_variants_fixed.load(std::memory_order_acquire)) {
    return "the kernels have already run in this process; variants are fixed";
  }
  Variants v = g_variants;
  size_t at = 0;
  while (at < spec.size()) {
    if (spec[at] == '#') {
      while (at < spec.size() && spec[at] != '\n') ++at;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(spec[at])) || spec[at] == ',') {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < spec.size() && !std::isspace(static_cast<unsigned char>(spec[end])) &&
           spec[end] != ',' && spec[end] != '#') {
      ++end;
    }
    const std::string word = spec.substr(at, end - at);
    at = end;
    const size_t eq = word.find('=');
    if (eq == std::string::npos) return "'" + word + "' is not key=value";
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    Isa isa = Isa::kAuto;
    // "name:K" -> name, K (0 when absent); false when K is not a row length
    auto split_rows = [](const std::string& text, std::string& name, int64_t& min_k) {
      const size_t colon = text.find(':');
      name = text.substr(0, colon);
      min_k = 0;
      if (colon == std::string::npos) return true;
      const std::string digits = text.substr(colon + 1);
      if (digits.empty() || digits.size() > 6 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        return false;
      }
      min_k = std::atoll(digits.c_str());
      return true;
    };
    if (key == "run_f64" || key == "run_f32") {
      const int t = key == "run_f64" ? 1 : 0;
      std::string name;
      int64_t min_k = 0;
      const bool counted = split_rows(value, name, min_k);
      if (name == "rows" && value == name) {
        isa = Isa::kBase;
      } else if (name == "interleaved" && counted && value != name) {
        isa = Isa::kAvx2;
      } else {
        return key + ": '" + value + "' is not rows or interleaved:K (K the shortest row it takes)";
      }
      v.run[t] = isa;
      v.run_min_k[t] = min_k;
    } else if (key == "ell_f64" || key == "ell_f32") {
      const int t = key == "ell_f64" ? 1 : 0;
      std::string name;
      int64_t min_k = 0;
      const bool counted = split_rows(value, name, min_k);
      if (!ParseIsa(name, true, isa)) {
        return key + ": '" + name + "' is not one of scalar, avx2, avx512";
      }
      if (!counted) {
        return key + ": '" + value.substr(name.size() + 1) + "' is not a row length";
      }
      if (value == name && isa != Isa::kBase) {
        return key + ": " + name + " needs the shortest row it takes, e.g. " + name + ":16";
      }
      v.ell[t] = isa;
      v.ell_min_k[t] = min_k;
    } else if (key == "tanh" || key == "gram") {
      if (!ParseIsa(value, false, isa)) {
        return key + ": '" + value + "' is not one of baseline, avx2, avx512";
      }
      (key == "tanh" ? v.tanh : v.gram) = isa;
    } else {
      return "unknown key '" + key + "' (ell_f64, ell_f32, run_f64, run_f32, tanh, gram)";
    }
    if (!CpuRuns(isa)) {
      return key + "=" + value + ": this CPU (or build) cannot run " + IsaName(isa, true);
    }
  }
  g_variants = v;
  return "";
}

}  // namespace orc_native

// ---------------------------------------------------------------------------
// Row dot products of an ELL matrix: z[i - i0] = sum_j v[i][j] x[idx[i][j]]
// for rows [i0, i1). Shared by the product and the ESN run. On x86-64 CPUs
// with AVX-512 the gathers run as vector gathers, picked once at load time,
// for rows long enough to gain (see PickEllRows): 8 entries of a row per
// instruction instead of three scalar loads each. The
// order of the additions differs between the variants (vector lanes, then a
// tree), so results agree to rounding, not bit for bit, across CPUs.
namespace {

template <typename T>
void EllRowsScalar(const T* __restrict v, const int32_t* __restrict idx, int64_t k,
                   const T* __restrict x, T* __restrict z, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* vr = v + i * k;
    const int32_t* ir = idx + i * k;
    T acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
    int64_t j = 0;
    // Unrolled, four sums: without unrolling the loop's own bookkeeping, not
    // the three loads per entry, bounds the row (AMD Zen 3, res_dim 2000, 40
    // per row: 1.02 -> 0.51 ns per entry); four sums instead of two gave
    // another 5-10% on a one-thread forecast (no change in training).
#pragma GCC unroll 4
    for (; j + 3 < k; j += 4) {
      acc0 += vr[j] * x[ir[j]];
      acc1 += vr[j + 1] * x[ir[j + 1]];
      acc2 += vr[j + 2] * x[ir[j + 2]];
      acc3 += vr[j + 3] * x[ir[j + 3]];
    }
    for (; j < k; ++j) acc0 += vr[j] * x[ir[j]];
    z[i - i0] = (acc0 + acc1) + (acc2 + acc3);
  }
}

template <typename T>
using EllRowsFn = void (*)(const T*, const int32_t*, int64_t, const T*, T*, int64_t, int64_t);

#ifdef ORC_X86_DISPATCH
// Four rows at a time, each with its own vector accumulator, so the
// horizontal sums of one row overlap the gathers of the next. The rows left
// over (fewer than four) take the same per-row sums, so a row's result does
// not depend on where a range of rows starts or ends (the threads of a run
// split the rows in different places).
__attribute__((target("avx512f,avx512vl"), always_inline)) inline __m512d EllRowAvx512(
    const double* __restrict vr, const int32_t* __restrict ir, int64_t kf, __mmask8 tail,
    const double* __restrict x) {
  __m512d a = _mm512_setzero_pd();
  int64_t j = 0;
  for (; j < kf; j += 8) {
    const __m256i id = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ir + j));
    a = _mm512_fmadd_pd(_mm512_loadu_pd(vr + j), _mm512_i32gather_pd(id, x, 8), a);
  }
  if (tail) {
    const __m256i id = _mm256_maskz_loadu_epi32(tail, ir + j);
    const __m512d xv = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), tail, id, x, 8);
    a = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(tail, vr + j), xv, a);
  }
  return a;
}

__attribute__((target("avx512f,avx512vl"))) void EllRowsAvx512(
    const double* __restrict v, const int32_t* __restrict idx, int64_t k,
    const double* __restrict x, double* __restrict z, int64_t i0, int64_t i1) {
  const int64_t kf = k & ~int64_t{7};
  const __mmask8 tail = static_cast<__mmask8>((1u << (k - kf)) - 1u);
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) {
    __m512d acc[4];
    for (int r = 0; r < 4; ++r) acc[r] = EllRowAvx512(v + (i + r) * k, idx + (i + r) * k, kf, tail, x);
    for (int r = 0; r < 4; ++r) z[i + r - i0] = _mm512_reduce_add_pd(acc[r]);
  }
  for (; i < i1; ++i) {
    z[i - i0] = _mm512_reduce_add_pd(EllRowAvx512(v + i * k, idx + i * k, kf, tail, x));
  }
}

__attribute__((target("avx512f,avx512vl"))) void EllRowsAvx512(
    const float* __restrict v, const int32_t* __restrict idx, int64_t k,
    const float* __restrict x, float* __restrict z, int64_t i0, int64_t i1) {
  const int64_t kf = k & ~int64_t{15};
  const __mmask16 tail = static_cast<__mmask16>((1u << (k - kf)) - 1u);
  for (int64_t i = i0; i < i1; ++i) {
    const float* vr = v + i * k;
    const int32_t* ir = idx + i * k;
    __m512 a = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j < kf; j += 16) {
      const __m512i id = _mm512_loadu_si512(ir + j);
      a = _mm512_fmadd_ps(_mm512_loadu_ps(vr + j), _mm512_i32gather_ps(id, x, 4), a);
    }
    if (tail) {
      const __m512i id = _mm512_maskz_loadu_epi32(tail, ir + j);
      const __m512 xv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), tail, id, x, 4);
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, vr + j), xv, a);
    }
    z[i - i0] = _mm512_reduce_add_ps(a);
  }
}


// AVX2 + FMA (x86-64-v3 CPUs without AVX-512, e.g. AMD Zen 2/3, Intel client
// cores): the loop is bound by its loads, three per entry in the scalar loop
// (value, column, x[column]). Here the columns come two per 64-bit load, the
// values four (f64) or eight (f32) per vector load, and the x[column] are
// loaded one by one into the lanes of a vector that one FMA folds in: 1.75
// loads per entry. AMD Zen 3, res_dim 2000, one thread, f64: 0.35 against
// 0.46 ns per entry at 40 per row, 1.2x at 8-12 per row (f32: 2x from 16 per
// row on; shorter f32 rows and f64 rows of fewer than 4 keep the scalar loop,
// which is as fast or faster there). The hardware gathers of AVX2 are slower
// than either (see below).
__attribute__((target("avx2,fma"))) inline __m256d Lanes4(const double* x, const int32_t* ir) {
  uint64_t p0, p1;
  std::memcpy(&p0, ir, 8);
  std::memcpy(&p1, ir + 2, 8);
  return _mm256_set_pd(x[p1 >> 32], x[static_cast<uint32_t>(p1)], x[p0 >> 32],
                       x[static_cast<uint32_t>(p0)]);
}

__attribute__((target("avx2,fma"))) void EllRowsAvx2(
    const double* __restrict v, const int32_t* __restrict idx, int64_t k,
    const double* __restrict x, double* __restrict z, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const double* vr = v + i * k;
    const int32_t* ir = idx + i * k;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 7 < k; j += 8) {
      a0 = _mm256_fmadd_pd(_mm256_loadu_pd(vr + j), Lanes4(x, ir + j), a0);
      a1 = _mm256_fmadd_pd(_mm256_loadu_pd(vr + j + 4), Lanes4(x, ir + j + 4), a1);
    }
    if (j + 3 < k) {
      a0 = _mm256_fmadd_pd(_mm256_loadu_pd(vr + j), Lanes4(x, ir + j), a0);
      j += 4;
    }
    const __m256d a = _mm256_add_pd(a0, a1);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; j < k; ++j) sum += vr[j] * x[ir[j]];
    z[i - i0] = sum;
  }
}

__attribute__((target("avx2,fma"))) void EllRowsAvx2(
    const float* __restrict v, const int32_t* __restrict idx, int64_t k,
    const float* __restrict x, float* __restrict z, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* vr = v + i * k;
    const int32_t* ir = idx + i * k;
    __m256 a = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 7 < k; j += 8) {
      uint64_t p[4];
      std::memcpy(p, ir + j, 32);
      const __m256 lanes = _mm256_set_ps(
          x[p[3] >> 32], x[static_cast<uint32_t>(p[3])], x[p[2] >> 32],
          x[static_cast<uint32_t>(p[2])], x[p[1] >> 32], x[static_cast<uint32_t>(p[1])],
          x[p[0] >> 32], x[static_cast<uint32_t>(p[0])]);
      a = _mm256_fmadd_ps(_mm256_loadu_ps(vr + j), lanes, a);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    float sum = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
    for (; j < k; ++j) sum += vr[j] * x[ir[j]];
    z[i - i0] = sum;
  }
}

#endif

// The vector variant this CPU runs and the shortest rows it is used for
// (ORC_NATIVE_SIMD=0: none). Measured on Sapphire Rapids, one thread, half a
// reservoir per call, against the scalar loop before it was unrolled: the
// AVX-512 gathers lose on short rows (k = 10: 50 vs 32 ms; k = 12: 103 vs
// 80 ms, the masked tail and the horizontal sum dominate) and win from k = 16
// (81 vs 108 ms) on (k = 40: 386 vs 553 ms). CPUs with AVX2 and FMA but no
// AVX-512 run EllRowsAvx2 (lanes loaded one by one; not measured against the
// AVX-512 gathers, so those keep AVX-512 CPUs). AVX2's hardware gathers are
// not used: on AMD Zen 3 they are 1.6x slower than the unrolled scalar loop
// at k = 40 (0.86 vs 0.52 ns per entry), and on Sapphire Rapids they gained
// only 12% over the loop before it was unrolled (489 vs 553 ms).
template <typename T>
struct EllRowsChoice {
  EllRowsFn<T> vector = nullptr;
  int64_t min_k = 0;
};

// The vector loop of `isa` for T (none for kBase) and, from the CPU flags,
// the shortest rows it gains on.
template <typename T>
EllRowsFn<T> EllRowsOf(Isa isa) {
#ifdef ORC_X86_DISPATCH
  if (isa == Isa::kAvx512) return static_cast<EllRowsFn<T>>(EllRowsAvx512);
  if (isa == Isa::kAvx2) return static_cast<EllRowsFn<T>>(EllRowsAvx2);
#endif
  (void)isa;
  return nullptr;
}

template <typename T>
int64_t EllDefaultMinK(Isa isa) {
  if (isa == Isa::kAvx512) return 16;
  return sizeof(T) == 8 ? 4 : 16;
}

template <typename T>
EllRowsChoice<T> PickEllRows() {
  const int t = sizeof(T) == 8 ? 1 : 0;
  const Isa isa = Resolve(g_variants.ell[t], WidestIsa());
  EllRowsChoice<T> choice;
  choice.vector = EllRowsOf<T>(isa);
  choice.min_k = g_variants.ell[t] == Isa::kAuto ? EllDefaultMinK<T>(isa) : g_variants.ell_min_k[t];
  return choice;
}

template <typename T>
void EllRows(const T* v, const int32_t* idx, int64_t k, const T* x, T* z, int64_t i0,
             int64_t i1) {
  static const EllRowsChoice<T> choice = PickEllRows<T>();
  if (choice.vector != nullptr && k >= choice.min_k) {
    choice.vector(v, idx, k, x, z, i0, i1);
  } else {
    EllRowsScalar<T>(v, idx, k, x, z, i0, i1);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Interleaved rows for the multi-step kernels (ESN runs, fits, forecasts),
// which use one matrix for thousands of products: a copy of each chunk's
// ELL rows, made once per call, with the rows in groups of four and a
// group's entries stored entry j by entry j, the four rows side by side:
//
//   iv[(g k + j) 4 + r] = v[4 g + r][j]   (the same for the columns),
//
// for the n / 4 whole groups of a chunk (the rows after them have no copy).
// One vector then holds a row in each lane: an entry of four rows is one
// vector load of values, two 64-bit loads of columns, four scalar loads of
// x[column] and one FMA, with no horizontal sum at the end of a row (the
// row loops spend most of a short row there). AMD EPYC (Zen 4), one
// thread, float32, 2000 rows: 0.22-0.26 ns per entry at 10 and 40 entries
// per row against 0.42-0.50 for the scalar loop and 0.37 for the AVX2 and
// AVX-512 row loops; float64 0.24 against 0.29-0.32 (AVX2 rows).
//
// Every row is one chain of FMAs in entry order from zero,
// acc = fma(v[i][j], x[idx[i][j]], acc), in a lane or alone (RowFma): the
// rows before the first whole group of a range and after the last (a
// thread's range may start anywhere) take the same chain one at a time, so
// a row's bits do not depend on the range it is computed in.
template <typename T>
struct Interleaved {
  std::vector<T> values;
  std::vector<int32_t> columns;
  int64_t per_chunk = 0;  // entries per chunk: (n / 4) 4 k

  Interleaved() = default;
  Interleaved(const T* v, const int32_t* idx, int64_t chunks, int64_t n, int64_t k)
      : values(chunks * (n / 4) * 4 * k), columns(values.size()), per_chunk((n / 4) * 4 * k) {
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t g = 0; g < n / 4; ++g) {
        for (int64_t j = 0; j < k; ++j) {
          for (int64_t r = 0; r < 4; ++r) {
            const int64_t to = c * per_chunk + (g * k + j) * 4 + r;
            const int64_t from = (c * n + 4 * g + r) * k + j;
            values[to] = v[from];
            columns[to] = idx[from];
          }
        }
      }
    }
  }
  // chunk c's copy (nullptr when there is none)
  const T* ValuesOf(int64_t c) const { return per_chunk ? values.data() + c * per_chunk : nullptr; }
  const int32_t* ColumnsOf(int64_t c) const {
    return per_chunk ? columns.data() + c * per_chunk : nullptr;
  }
};

#ifdef ORC_X86_DISPATCH
template <typename T>
__attribute__((target("avx2,fma"), always_inline)) inline T RowFma(
    const T* __restrict vr, const int32_t* __restrict ir, int64_t k, const T* __restrict x) {
  T acc = 0;
  for (int64_t j = 0; j < k; ++j) acc = std::fma(vr[j], x[ir[j]], acc);
  return acc;
}

// One entry j of a group: the four rows' values, the x of their four
// columns `ir` (two 64-bit loads of column pairs, as Lanes4), one FMA into
// the group's four lanes.
__attribute__((target("avx2,fma"), always_inline)) inline __m128 EntryFma(
    const float* v, const float* x, const int32_t* ir, __m128 a) {
  uint64_t p0, p1;
  std::memcpy(&p0, ir, 8);
  std::memcpy(&p1, ir + 2, 8);
  const __m128 xs = _mm_set_ps(x[p1 >> 32], x[static_cast<uint32_t>(p1)], x[p0 >> 32],
                               x[static_cast<uint32_t>(p0)]);
  return _mm_fmadd_ps(_mm_loadu_ps(v), xs, a);
}

__attribute__((target("avx2,fma"), always_inline)) inline __m256d EntryFma(
    const double* v, const double* x, const int32_t* ir, __m256d a) {
  return _mm256_fmadd_pd(_mm256_loadu_pd(v), Lanes4(x, ir), a);
}

__attribute__((target("avx2,fma"), always_inline)) inline void StoreLanes(float* z, __m128 a) {
  _mm_storeu_ps(z, a);
}

__attribute__((target("avx2,fma"), always_inline)) inline void StoreLanes(double* z, __m256d a) {
  _mm256_storeu_pd(z, a);
}

// The four rows of a group: z[r] for r < 4.
template <typename T>
__attribute__((target("avx2,fma"), always_inline)) inline void GroupFma(
    const T* __restrict vs, const int32_t* __restrict is, int64_t k, const T* __restrict x,
    T* __restrict z) {
  std::conditional_t<sizeof(T) == 4, __m128, __m256d> a{};  // zero
  for (int64_t j = 0; j < k; ++j) a = EntryFma(vs + 4 * j, x, is + 4 * j, a);
  StoreLanes(z, a);
}

// z[i - i0] for rows [i0, i1) of a chunk: v/idx its rows, iv/icol its
// interleaved copy.
template <typename T>
__attribute__((target("avx2,fma"))) void EllRowsInterleaved(
    const T* __restrict v, const int32_t* __restrict idx, const T* __restrict iv,
    const int32_t* __restrict icol, int64_t k, const T* __restrict x, T* __restrict z,
    int64_t i0, int64_t i1) {
  const int64_t first = std::min(i1, (i0 + 3) / 4 * 4);  // the first whole group's row
  int64_t i = i0;
  for (; i < first; ++i) z[i - i0] = RowFma(v + i * k, idx + i * k, k, x);
  for (; i + 4 <= i1; i += 4) GroupFma(iv + i * k, icol + i * k, k, x, z + (i - i0));
  for (; i < i1; ++i) z[i - i0] = RowFma(v + i * k, idx + i * k, k, x);
}
#endif

// Whether this process runs the multi-step products of T with rows of k
// entries interleaved (run_f32 / run_f64; off with ORC_NATIVE_SIMD=0 and
// off by default: the calibration turns it on where it measured faster).
template <typename T>
int64_t InterleavedMinK() {  // the shortest rows interleaved, or 0: never
  static const int64_t min_k = [] {
    const int t = sizeof(T) == 8 ? 1 : 0;
    const Isa isa = Resolve(g_variants.run[t], Isa::kBase);
    return isa == Isa::kAvx2 && CpuRuns(Isa::kAvx2) ? std::max<int64_t>(1, g_variants.run_min_k[t])
                                                    : int64_t{0};
  }();
  return min_k;
}

template <typename T>
bool RunsInterleaved(int64_t k) {
  return InterleavedMinK<T>() > 0 && k >= InterleavedMinK<T>();
}

// Rows [i0, i1) of a chunk of a multi-step call's matrix: interleaved where
// the call made the copy (iv, icol), else the row loops.
template <typename T>
void CallRows(const T* v, const int32_t* idx, const T* iv, const int32_t* icol, int64_t k,
              const T* x, T* z, int64_t i0, int64_t i1) {
#ifdef ORC_X86_DISPATCH
  if (iv != nullptr) {
    EllRowsInterleaved<T>(v, idx, iv, icol, k, x, z, i0, i1);
    return;
  }
#endif
  (void)iv;
  (void)icol;
  EllRows<T>(v, idx, k, x, z, i0, i1);
}

namespace {

constexpr int64_t kParallelNonzeros = 131072;

template <ffi::DataType DT>
ffi::Error EllMatvec(ffi::ThreadPool pool, ffi::Buffer<DT> values,
                     ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> x,
                     ffi::ResultBuffer<DT> y) {
  using T = ffi::NativeType<DT>;
  const auto vdims = values.dimensions();
  const auto xdims = x.dimensions();
  if (vdims.size() < 2 || xdims.size() < 1) {
    return ffi::Error::InvalidArgument("orc ell_matvec: values must be (..., n, k), x (..., n)");
  }
  const int64_t n = vdims[vdims.size() - 2];
  const int64_t k = vdims[vdims.size() - 1];
  if (xdims[xdims.size() - 1] != n || n == 0) {
    return ffi::Error::InvalidArgument("orc ell_matvec: x does not match the matrix size");
  }
  // Leading (batch) dimensions: equal rank for all three buffers, each extent
  // either equal to y's or 1 (broadcast), as vmap_method="expand_dims" makes them.
  const size_t lead = vdims.size() - 2;
  const auto idims = indices.dimensions();
  const auto ydims = y->dimensions();
  if (xdims.size() - 1 != lead || idims.size() != vdims.size() || ydims.size() != xdims.size()) {
    return ffi::Error::InvalidArgument("orc ell_matvec: inconsistent batch ranks");
  }
  int64_t vstride[16], istride[16], xstride[16], extent[16];
  if (lead > 16) return ffi::Error::InvalidArgument("orc ell_matvec: too many batch dims");
  int64_t sv = n * k, si = n * k, sx = n, by = 1;
  for (size_t d = lead; d-- > 0;) {
    extent[d] = ydims[d];
    auto ok = [&](int64_t e) { return e == ydims[d] || e == 1; };
    if (!ok(vdims[d]) || !ok(idims[d]) || !ok(xdims[d]) || idims[d] != vdims[d]) {
      return ffi::Error::InvalidArgument("orc ell_matvec: incompatible batch dimensions");
    }
    vstride[d] = vdims[d] == 1 ? 0 : sv;
    istride[d] = idims[d] == 1 ? 0 : si;
    xstride[d] = xdims[d] == 1 ? 0 : sx;
    sv *= vdims[d];
    si *= idims[d];
    sx *= xdims[d];
    by *= ydims[d];
  }
  const T* V = values.typed_data();
  const int32_t* I = indices.typed_data();
  const T* X = x.typed_data();
  T* Y = y->typed_data();
  if (!ColumnsInRange(I, indices.element_count(), n)) return IndexError("ell_matvec");
  // rows [lo, hi) of the flattened (batch x n) output
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo / n; b * n < hi; ++b) {
      int64_t rem = b, ov = 0, oi = 0, ox = 0;
      for (size_t d = lead; d-- > 0;) {
        const int64_t c = rem % extent[d];
        rem /= extent[d];
        ov += c * vstride[d];
        oi += c * istride[d];
        ox += c * xstride[d];
      }
      const T* xb = X + ox;
      const int64_t i0 = lo > b * n ? lo - b * n : 0;
      const int64_t i1 = hi < (b + 1) * n ? hi - b * n : n;
      ORC_DEBUG_ASSERT(ColumnsInRange(I + oi + i0 * k, (i1 - i0) * k, n));
      if (i1 > i0) EllRows<T>(V + ov, I + oi, k, xb, Y + b * n + i0, i0, i1);
    }
  };
  const int64_t total = by * n;
  // Large products are split in two: one half on a thread of XLA's intra-op
  // pool, the other here (res_dim 4000: 240 -> 92 us per product). Below
  // ~128k non-zeros the hand-off costs more than the split saves.
  const Workers workers = Workers::Of(pool);
  if (total * k >= kParallelNonzeros) {
    const int64_t mid = total / 2;
    ParallelFor(workers, 2, [&](int64_t half, int64_t) {
      if (half == 0) {
        rows(0, mid);
      } else {
        rows(mid, total);
      }
    });
  } else {
    rows(0, total);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEllMatvecF32, EllMatvec<ffi::F32>,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEllMatvecF64, EllMatvec<ffi::F64>,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>());


// ---------------------------------------------------------------------------
// Ridge statistics update by BLAS, in place, without leaving XLA:
//   g += X^T X (syrk) and c += X^T Y (gemm) over the rows [start, stop) of
//   X = x[start:stop] and Y = y[start:stop].
//
// Chunked (chunked = 1): g (..., C, F, F), c (..., C, F, O), x (..., T, C, F),
// y (..., T, C, O); chunk ci uses column block ci of x and y, read with a row
// stride of C F (C O), so the rows never get copied out (neither of a block
// nor of a whole stored state history). Unchunked: the same without the C
// axes. Row-major x rows are the columns of a column-major F x rows matrix A
// (leading dimension C F), so syrk('L', 'N') on A gives X^T X in the lower
// triangle of the column-major g, which is the upper triangle of row-major g
// (the library reads only that one). Row-major c (F, O) is the column-major
// O x F matrix M, and M += Y^T X is gemm('N', 'T') of the column-major O x rows
// matrix (leading dimension C O) with A. The BLAS routines are not linked
// here: SciPy's Fortran-ABI syrk and gemm (scipy.linalg.cython_blas) are
// set once at import (SetRoutine), so the kernel uses the very BLAS
// numpy/SciPy use.
namespace {

template <typename T>
using SyrkFn = void (*)(const char*, const char*, const int*, const int*, const T*,
                        const T*, const int*, const T*, T*, const int*);
template <typename T>
using GemmFn = void (*)(const char*, const char*, const int*, const int*, const int*,
                        const T*, const T*, const int*, const T*, const int*, const T*, T*,
                        const int*);

template <typename T>
struct Blas {
  SyrkFn<T> syrk;
  GemmFn<T> gemm;
};

// Scratch memory of one thread for the Gram kernel below (packed operands),
// kept across the calls of an update so it is allocated and mapped once.
class GramWork {
 public:
  // Room for at least n values of T, 64-byte aligned.
  template <typename T>
  T* Get(size_t n) {
    const size_t doubles = (n * sizeof(T) + sizeof(double) - 1) / sizeof(double);
    if (doubles > size_) {
      raw_.reset(new double[doubles + 8]);
      size_ = doubles;
    }
    const uintptr_t at = (reinterpret_cast<uintptr_t>(raw_.get()) + 63) / 64 * 64;
    return reinterpret_cast<T*>(at);
  }

 private:
  std::unique_ptr<double[]> raw_;
  size_t size_ = 0;
};

// Gram update by orc's own blocked kernel:
//   G[i][l] += sum_t A[t][i] A[t][l]  for rows i in [j0, j1), columns l >= i
// (the upper triangle of row-major G, f x f, row stride ldg), A (k x f) with
// row stride lda; with `sub`, G[i][l] -= the same sum (the Cholesky update
// of the ridge solve).
// Blocking as in BLIS/GotoBLAS: per block of kGramKc steps, the columns
// [j0, f) are packed in panels of Nr (a few MiB, read from L3), the rows of a
// block of about kGramMc in panels of MR (L2), and an MR x Nr tile keeps its
// 2 MR vector sums in registers while it runs over the block (the column
// panel stays in L1 for the whole row block). Tiles across the diagonal or
// the edges go through a small buffer and add only the elements of the
// triangle.
//
// Written once with the compiler's vector extensions (Nr = two vectors of W
// lanes) and compiled for each vector width: AVX-512 (W = 8 doubles, MR =
// 12: 24 sums of its 32 registers), AVX2 + FMA (W = 4, MR = 6: 12 of 16)
// and the baseline (W = 2, MR = 6: SSE2 on x86-64, NEON on ARM). One core
// of an AVX-512 Xeon (float64, 2000 features, blocks of 256 rows): 75
// GFLOP/s with MR = 12 against 57 with MR = 6 and 74 for OpenBLAS's dsyrk
// on one thread; the AVX2 variant 48 there.
// Each element of G is one lane of one accumulator, summed over t in order
// (one multiply-add per step, fused where the variant has FMA): the result
// does not depend on W, nor on which thread computes which rows, so the
// FMA variants agree bit for bit with each other.
//
// Why not BLAS: OpenBLAS runs its Haswell kernel on AMD Zen (36-38 GFLOP/s
// in dsyrk on one Zen 3 core whose FMA peak is 50; this kernel 43-47), and
// the overlapped fit below must run its Gram on one thread beside the
// reservoir without touching BLAS's process-wide thread count.
constexpr int64_t kGramKc = 256, kGramMc = 72;

// The tile: c[i * ldc + j] += sum_p a[p * MR + i] b[p * Nr + j] (-= with
// `sub`), Nr = 2 W, its 2 MR vector sums held in registers for the whole run
// over p (the loops over them fully unrolled).
template <typename T, int W, int MR>
__attribute__((always_inline)) inline void GramTile(int64_t kc, const T* __restrict a,
                                                    const T* __restrict b, T* c, int64_t ldc,
                                                    bool sub) {
  typedef T V __attribute__((vector_size(sizeof(T) * W)));
  constexpr int64_t nr = 2 * W;
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {  // the tile of c is read at the end: fetch it now
    __builtin_prefetch(c + i * ldc);
    __builtin_prefetch(c + i * ldc + nr - 1);
  }
  V lo[MR], hi[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) lo[i] = hi[i] = V{};
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    V b0, b1;
    std::memcpy(&b0, b + p * nr, sizeof(V));
    std::memcpy(&b1, b + p * nr + W, sizeof(V));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T x = a[p * MR + i];
      lo[i] += x * b0;
      hi[i] += x * b1;
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    V c0, c1;
    std::memcpy(&c0, c + i * ldc, sizeof(V));
    std::memcpy(&c1, c + i * ldc + W, sizeof(V));
    if (sub) {
      c0 -= lo[i];
      c1 -= hi[i];
    } else {
      c0 += lo[i];
      c1 += hi[i];
    }
    std::memcpy(c + i * ldc, &c0, sizeof(V));
    std::memcpy(c + i * ldc + W, &c1, sizeof(V));
  }
}

template <typename T, int W, int MR>
__attribute__((always_inline)) inline void GramRowsV(T* G, int64_t ldg, const T* A, int64_t lda,
                                                     int64_t f, int64_t k, int64_t j0, int64_t j1,
                                                     bool sub, GramWork& work) {
  constexpr int64_t nr = 2 * W;
  constexpr int64_t kMc = kGramMc / MR * MR;  // whole row panels
  const int64_t panels = (f - j0 + nr - 1) / nr;  // column panels from j0
  T* bp = work.Get<T>(static_cast<size_t>(kGramKc * nr * panels + kGramKc * kMc));
  T* ap = bp + kGramKc * nr * panels;
  for (int64_t p0 = 0; p0 < k; p0 += kGramKc) {
    const int64_t kc = std::min(kGramKc, k - p0);
    for (int64_t p = 0; p < kc; ++p) {  // columns [j0, f), zero past f
      const T* row = A + (p0 + p) * lda;
      for (int64_t q = 0; q < panels; ++q) {
        T* dst = bp + (q * kc + p) * nr;
        const int64_t l0 = j0 + q * nr;
        for (int64_t c = 0; c < nr; ++c) dst[c] = l0 + c < f ? row[l0 + c] : T(0);
      }
    }
    for (int64_t ic = j0; ic < j1; ic += kMc) {
      const int64_t mc = std::min(kMc, j1 - ic), rpanels = (mc + MR - 1) / MR;
      for (int64_t p = 0; p < kc; ++p) {  // rows [ic, ic + mc), zero past them
        const T* row = A + (p0 + p) * lda;
        for (int64_t r = 0; r < rpanels; ++r) {
          T* dst = ap + (r * kc + p) * MR;
          const int64_t i0 = ic + r * MR;
          for (int64_t i = 0; i < MR; ++i) dst[i] = i0 + i < ic + mc ? row[i0 + i] : T(0);
        }
      }
      for (int64_t q = (ic - j0) / nr; q < panels; ++q) {
        const int64_t l0 = j0 + q * nr;
        for (int64_t r = 0; r < rpanels; ++r) {
          const int64_t i0 = ic + r * MR;
          if (l0 + nr - 1 < i0) continue;  // wholly below the diagonal
          const T* a = ap + r * kc * MR;
          const T* b = bp + q * kc * nr;
          if (i0 + MR - 1 <= l0 && l0 + nr <= f && i0 + MR <= ic + mc) {
            GramTile<T, W, MR>(kc, a, b, G + i0 * ldg + l0, ldg, sub);
            continue;
          }
          alignas(64) T tile[MR * nr] = {};
          GramTile<T, W, MR>(kc, a, b, tile, nr, false);
          for (int64_t i = 0; i < MR && i0 + i < ic + mc; ++i) {
            for (int64_t c = std::max<int64_t>(0, i0 + i - l0); c < nr && l0 + c < f; ++c) {
              T& g = G[(i0 + i) * ldg + l0 + c];
              g = sub ? g - tile[i * nr + c] : g + tile[i * nr + c];
            }
          }
        }
      }
    }
  }
}

// The cross products of the same rows: C[i][q] += sum_t A[t][i] B[t][q] for
// rows i in [j0, j1) of row-major C (f x o), B (k x o) with row stride ldb.
// Summed over t in order, per element, into a transposed copy of the rows'
// block (o x (j1 - j0), contiguous in i, so the inner loop is a vector
// multiply-add whatever o is), added to C at the end.
template <typename T>
__attribute__((always_inline)) inline void CrossRowsV(T* C, const T* A, int64_t lda, const T* B,
                                                      int64_t ldb, int64_t o, int64_t k,
                                                      int64_t j0, int64_t j1, GramWork& work) {
  const int64_t m = j1 - j0;
  if (m <= 0 || o <= 0) return;
  T* acc = work.Get<T>(static_cast<size_t>(o * m));
  // Folded into C every kGramKc rows, as the Gram is (GramRowsV): one running
  // sum over all k rows would let its rounding error grow with k (relative
  // 1.5e-15 at 1000 rows, 9.8e-15 at 16000), where the Gram's stays ~6e-16.
  for (int64_t p0 = 0; p0 < k; p0 += kGramKc) {
    const int64_t kc = std::min(kGramKc, k - p0);
    std::fill(acc, acc + o * m, T(0));
    for (int64_t t = p0; t < p0 + kc; ++t) {
      const T* __restrict x = A + t * lda + j0;
      const T* y = B + t * ldb;
      for (int64_t q = 0; q < o; ++q) {
        const T yq = y[q];
        T* __restrict row = acc + q * m;
        for (int64_t i = 0; i < m; ++i) row[i] += x[i] * yq;
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < o; ++q) C[(j0 + i) * o + q] += acc[q * m + i];
    }
  }
}

template <typename T>
using GramRowsFn = void (*)(T*, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, int64_t,
                            bool, GramWork&);
template <typename T>
using CrossRowsFn = void (*)(T*, const T*, int64_t, const T*, int64_t, int64_t, int64_t,
                             int64_t, int64_t, GramWork&);

// One function per vector width and type: the kernels above inlined under
// the width's target, sums contracted to fused multiply-adds.
#define ORC_GRAM_VARIANT(SUFFIX, ATTRS, WD, WF, MR)                                              \
  ATTRS void GramRows##SUFFIX(double* G, int64_t ldg, const double* A, int64_t lda, int64_t f, \
                              int64_t k, int64_t j0, int64_t j1, bool sub, GramWork& work) {   \
    GramRowsV<double, WD, MR>(G, ldg, A, lda, f, k, j0, j1, sub, work);                          \
  }                                                                                            \
  ATTRS void GramRows##SUFFIX(float* G, int64_t ldg, const float* A, int64_t lda, int64_t f,   \
                              int64_t k, int64_t j0, int64_t j1, bool sub, GramWork& work) {   \
    GramRowsV<float, WF, MR>(G, ldg, A, lda, f, k, j0, j1, sub, work);                           \
  }                                                                                            \
  ATTRS void CrossRows##SUFFIX(double* C, const double* A, int64_t lda, const double* B,     \
                               int64_t ldb, int64_t o, int64_t k, int64_t j0, int64_t j1,    \
                               GramWork& work) {                                             \
    CrossRowsV<double>(C, A, lda, B, ldb, o, k, j0, j1, work);                               \
  }                                                                                          \
  ATTRS void CrossRows##SUFFIX(float* C, const float* A, int64_t lda, const float* B,        \
                               int64_t ldb, int64_t o, int64_t k, int64_t j0, int64_t j1,    \
                               GramWork& work) {                                             \
    CrossRowsV<float>(C, A, lda, B, ldb, o, k, j0, j1, work);                                \
  }

#if defined(__GNUC__) && !defined(__clang__)
#define ORC_CONTRACT optimize("fp-contract=fast")
#else
#define ORC_CONTRACT  // clang contracts a * b + c within an expression already
#endif
ORC_GRAM_VARIANT(Base, __attribute__((ORC_CONTRACT)), 2, 4, 6)
#ifdef ORC_X86_DISPATCH
ORC_GRAM_VARIANT(Avx2, __attribute__((target("avx2,fma"), ORC_CONTRACT)), 4, 8, 6)
ORC_GRAM_VARIANT(Avx512, __attribute__((target("avx512f,avx512vl,fma"), ORC_CONTRACT)), 8, 16, 12)
#endif
#undef ORC_GRAM_VARIANT

// Gram sizes below this stay with BLAS: mostly edge tiles there, and
// BLAS's order of the sums (the one numpy's X.T @ X uses) is kept for them.
constexpr int64_t kGramMinFeatures = 64;

// The Gram kernel's variant: set, or the widest the CPU runs.
Isa PickGramIsa() {
  static const Isa isa = Resolve(g_variants.gram, WidestIsa());
  return isa;
}

// The Gram and cross-product kernels of this CPU's variant.
template <typename T>
struct GramKernels {
  GramRowsFn<T> gram;
  CrossRowsFn<T> cross;
};

template <typename T>
GramKernels<T> GramKernelsOf(Isa isa) {
#ifdef ORC_X86_DISPATCH
  if (isa == Isa::kAvx512) {
    return {static_cast<GramRowsFn<T>>(GramRowsAvx512),
            static_cast<CrossRowsFn<T>>(CrossRowsAvx512)};
  }
  if (isa == Isa::kAvx2) {
    return {static_cast<GramRowsFn<T>>(GramRowsAvx2), static_cast<CrossRowsFn<T>>(CrossRowsAvx2)};
  }
#endif
  (void)isa;
  return {static_cast<GramRowsFn<T>>(GramRowsBase), static_cast<CrossRowsFn<T>>(CrossRowsBase)};
}

template <typename T>
GramKernels<T> PickGramKernels() {
  return GramKernelsOf<T>(PickGramIsa());
}

const char* GramIsaName() { return IsaName(PickGramIsa()); }

// Whether a Gram of f features goes through the kernel above (else BLAS):
// from kGramMinFeatures on, in stats_update as in the fused fit. Its speed
// matches or beats OpenBLAS's on one core (see above), it runs on XLA's
// threads like every other kernel (BLAS would start threads of its own
// beside them), and its sums do not depend on the number of threads.
template <typename T>
bool UsesGramKernel(int64_t f) {
  return f >= kGramMinFeatures;
}

// Adds rows [a, b) of x (T, C, F) and y (T, C, O) to the statistics of every
// chunk, restricted to the column-major columns [j0, j1) of each Gram (its
// row-major rows) and of each cross product: with `own`, orc's kernels
// (GramRows/CrossRows of the CPU's variant), else BLAS (syrk for the
// diagonal block, gemm below it and for the cross product). Calls for
// disjoint column ranges write disjoint memory, so two threads can share one
// update ([0, f) is all of it), each with its own `work`.
template <typename T>
void AddRows(const Blas<T>& blas, bool own, T* G, T* Cr, const T* X, const T* Y, int64_t chunks,
             int64_t f, int64_t o, int64_t a, int64_t b, int64_t j0, int64_t j1,
             GramWork& work) {
  if (b <= a || j1 <= j0) return;
  const char lower = 'L', no = 'N', tr = 'T';
  const int k = static_cast<int>(b - a), nd = static_cast<int>(j1 - j0),
            nb = static_cast<int>(f - j1), m = static_cast<int>(o), ldg = static_cast<int>(f);
  const int lda = static_cast<int>(chunks * f), ldb = static_cast<int>(chunks * o);
  const T one = 1;
  static const GramKernels<T> kernels = PickGramKernels<T>();
  for (int64_t ci = 0; ci < chunks; ++ci) {
    const T* A = X + a * chunks * f + ci * f;
    const T* B = Y + a * chunks * o + ci * o;
    T* Gc = G + ci * f * f;
    T* Cc = Cr + ci * f * o;
    if (own) {
      if (m > 0) kernels.cross(Cc, A, lda, B, ldb, o, k, j0, j1, work);
      kernels.gram(Gc, f, A, lda, f, k, j0, j1, false, work);
      continue;
    }
    if (m > 0) blas.gemm(&no, &tr, &m, &nd, &k, &one, B, &ldb, A + j0, &lda, &one, Cc + j0 * o, &m);
    blas.syrk(&lower, &no, &nd, &k, &one, A + j0, &lda, &one, Gc + j0 * f + j0, &ldg);
    if (nb > 0) {
      blas.gemm(&no, &tr, &nb, &nd, &k, &one, A + j1, &lda, A + j0, &lda, &one, Gc + j0 * f + j1,
                &ldg);
    }
  }
}

// The split s whose rows [0, s) hold the fraction `share` (clamped to
// [0, 1]) of the upper triangle of an f x f Gram: s f - s (s - 1) / 2 =
// share f (f + 1) / 2.
int64_t SplitForShare(int64_t f, double share) {
  share = std::min(1.0, std::max(0.0, share));
  const double b = 2.0 * static_cast<double>(f) + 1.0;
  const double s = 0.5 * (b - std::sqrt(std::max(0.0, b * b - 4.0 * share * f * (f + 1.0))));
  return std::min<int64_t>(f, std::max<int64_t>(0, static_cast<int64_t>(std::lround(s))));
}

// Below this much Gram work (rows x features^2) a second thread is not worth it.
constexpr double kOverlapWork = 1e8;

// AddRows over every column. BLAS (below kGramMinFeatures features) threads
// its routines itself; orc's Gram kernel runs on the call's workers, the
// Gram rows cut into pieces of equal work (two per thread, claimed in
// order; one piece for little work).
template <typename T>
void AddAllRows(const Blas<T>& blas, const Workers& workers, T* G, T* Cr, const T* X,
                const T* Y, int64_t chunks, int64_t f, int64_t o, int64_t a, int64_t b) {
  const double work = static_cast<double>(b - a) * static_cast<double>(f * f) * chunks;
  const bool own = UsesGramKernel<T>(f);
  const int64_t threads = workers.threads();
  const int64_t pieces = (own && work >= kOverlapWork) ? 2 * threads : 1;
  std::vector<GramWork> works(static_cast<size_t>(std::min(threads, pieces)));
  ParallelFor(workers, pieces, [&](int64_t piece, int64_t worker) {
    const int64_t j0 = SplitForShare(f, static_cast<double>(piece) / pieces);
    const int64_t j1 = SplitForShare(f, static_cast<double>(piece + 1) / pieces);
    AddRows(blas, own, G, Cr, X, Y, chunks, f, o, a, b, j0, j1, works[worker]);
  });
}

template <ffi::DataType DT>
ffi::Error StatsUpdate(ffi::ThreadPool pool, ffi::Buffer<DT> g, ffi::Buffer<DT> c, ffi::Buffer<DT> x,
                       ffi::Buffer<DT> y, ffi::ResultBuffer<DT> g_out,
                       ffi::ResultBuffer<DT> c_out, int64_t start, int64_t stop,
                       int64_t chunked) {
  using T = ffi::NativeType<DT>;
  void* const syrk_fn = RoutineFor<T>(orc_native::kSsyrk);
  void* const gemm_fn = RoutineFor<T>(orc_native::kSgemm);
  if (syrk_fn == nullptr || gemm_fn == nullptr) return NoRoutines("stats_update");
  const auto gd = g.dimensions(), cd = c.dimensions(), xd = x.dimensions(),
             yd = y.dimensions();
  const size_t tail = chunked ? 3 : 2;  // (C,) F, F
  const char* shapes =
      "orc stats_update: g (..., [C,] F, F), c (..., [C,] F, O), x (..., T, [C,] F), "
      "y (..., T, [C,] O) with equal leading dimensions";
  if (gd.size() < tail || cd.size() != gd.size() || xd.size() != gd.size() ||
      yd.size() != gd.size()) {
    return ffi::Error::InvalidArgument(shapes);
  }
  const size_t lead = gd.size() - tail;
  int64_t batch = 1;
  for (size_t d = 0; d < lead; ++d) {
    if (cd[d] != gd[d] || xd[d] != gd[d] || yd[d] != gd[d]) {
      return ffi::Error::InvalidArgument(shapes);
    }
    batch *= gd[d];
  }
  const int64_t chunks = chunked ? gd[lead] : 1;
  const int64_t f = gd[gd.size() - 1], o = cd[cd.size() - 1], rows_total = xd[lead];
  if (gd[gd.size() - 2] != f || cd[cd.size() - 2] != f || xd[xd.size() - 1] != f ||
      yd[yd.size() - 1] != o || yd[lead] != rows_total ||
      (chunked && (cd[lead] != chunks || xd[lead + 1] != chunks || yd[lead + 1] != chunks))) {
    return ffi::Error::InvalidArgument(shapes);
  }
  if (start < 0 || stop < start || stop > rows_total) {
    return ffi::Error::InvalidArgument("orc stats_update: rows [start, stop) out of range");
  }
  T* G = g_out->typed_data();
  T* Cr = c_out->typed_data();
  if (G != g.typed_data()) std::memcpy(G, g.typed_data(), sizeof(T) * batch * chunks * f * f);
  if (Cr != c.typed_data()) std::memcpy(Cr, c.typed_data(), sizeof(T) * batch * chunks * f * o);
  if (stop == start || f == 0) return ffi::Error::Success();
  const Blas<T> blas{reinterpret_cast<SyrkFn<T>>(syrk_fn), reinterpret_cast<GemmFn<T>>(gemm_fn)};
  const Workers workers = Workers::Of(pool);
  for (int64_t b = 0; b < batch; ++b) {
    AddAllRows(blas, workers, G + b * chunks * f * f, Cr + b * chunks * f * o,
               x.typed_data() + b * rows_total * chunks * f,
               y.typed_data() + b * rows_total * chunks * o, chunks, f, o, start, stop);
  }
  return ffi::Error::Success();
}

}  // namespace

#define ORC_STATS_UPDATE(NAME, DT)                      \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, StatsUpdate<DT>,  \
                                ffi::Ffi::Bind()        \
                                    .Ctx<ffi::ThreadPool>() \
                                    .Arg<ffi::Buffer<DT>>() \
                                    .Arg<ffi::Buffer<DT>>() \
                                    .Arg<ffi::Buffer<DT>>() \
                                    .Arg<ffi::Buffer<DT>>() \
                                    .Ret<ffi::Buffer<DT>>() \
                                    .Ret<ffi::Buffer<DT>>() \
                                    .Attr<int64_t>("start") \
                                    .Attr<int64_t>("stop")  \
                                    .Attr<int64_t>("chunked"));

ORC_STATS_UPDATE(OrcStatsUpdateF32, ffi::F32)
ORC_STATS_UPDATE(OrcStatsUpdateF64, ffi::F64)

// ---------------------------------------------------------------------------
// Ridge solve (G + beta I) w = B in G's own buffer.
//
// g is (..., F, F) row-major with only its upper triangle meaningful (what
// the Gram update maintains); b is (..., F, O), beta has 1 or `batch`
// elements. The upper triangle is first copied into the lower one (kept for
// the fallback), the diagonal gets + beta, and orc's Cholesky factorisation
// (CholeskyUpper below: deterministic, on XLA's threads) factors the upper
// triangle in place. No copy of the Gram and no factor buffer are made (at
// F = 4000 those cost 256 MB).
//
// When G + beta I is not numerically positive definite (a pivot is not
// positive: long runs with a tiny beta), the minimum-norm solution is
// computed from the symmetric eigen-decomposition (LAPACK's syevd from
// SciPy, eigenvalues below eps * F * max|w| dropped) of the lower triangle's
// copy, again in the same buffer; only then is workspace allocated (2 F^2
// elements for syevd, freed on return). g_out (aliasing g) holds the factor
// or eigenvectors afterwards: callers must not read it.
//
// status[i]: 0 Cholesky; 1 minimum-norm fallback; -1 g or b contains NaN/inf
// (w is NaN); -2 the eigen-decomposition failed too (w is NaN).
namespace {

template <typename T>
using SyevdFn = void (*)(const char*, const char*, const int*, T*, const int*, T*, T*,
                         const int*, int*, const int*, int*);

// Mirror the upper triangle of row-major a (f x f) into the lower one, tile
// by tile (a plain column walk misses the cache on every element at F in the
// thousands); returns whether the upper triangle is finite.
template <typename T>
bool MirrorUpper(T* a, int64_t f) {
  constexpr int64_t kTile = 64;
  bool finite = true;
  for (int64_t i0 = 0; i0 < f; i0 += kTile) {
    const int64_t i1 = std::min(f, i0 + kTile);
    for (int64_t j0 = 0; j0 <= i0; j0 += kTile) {
      const int64_t j1 = std::min(f, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t j = j0; j < std::min(j1, i); ++j) {
          const T v = a[j * f + i];
          finite &= std::isfinite(v);
          a[i * f + j] = v;
        }
      }
    }
  }
  return finite;
}

// Cholesky factor a = U^T U of the symmetric positive definite matrix whose
// upper triangle is row-major a (f x f, row stride f), written over that
// triangle; the lower triangle is neither read nor written. Right-looking,
// in panels of kCholPanel rows: the panel's diagonal block is factored row
// by row on this thread, the panel's rows right of it are solved in column
// pieces on the workers, and the triangle below the panel is updated by the
// Gram kernel (a -= P^T P for the panel's rows P) in row pieces on the
// workers. Every element is computed by one thread in a fixed order, so
// the factor is the same bits on any number of threads (LAPACK's potrf in
// OpenBLAS splits its sums by its thread count: weights then differed in
// the last bits between BLAS thread counts). Returns 0, or j + 1 when pivot
// j is not positive and finite (a not numerically positive definite).
constexpr int64_t kCholPanel = 96;
// Columns per piece of the panel solve and rows of the trailing update per
// thread are cut into pieces; below this much update work one thread does it.
constexpr int64_t kCholPieceColumns = 256;
constexpr double kCholParallelWork = 4e6;
// The substitutions of many outputs go to the threads in column ranges of at
// least this many outputs, from this much work (f^2 o multiply-adds) on.
constexpr int64_t kSolveMinColumns = 8;
constexpr double kSolveParallelWork = 1e8;

template <typename T>
int64_t CholeskyUpper(T* a, int64_t f, const Workers& workers, std::vector<GramWork>& works) {
  static const GramKernels<T> kernels = PickGramKernels<T>();
  T inv[kCholPanel];
  for (int64_t k0 = 0; k0 < f; k0 += kCholPanel) {
    const int64_t k1 = std::min(f, k0 + kCholPanel), kb = k1 - k0;
    // the diagonal block, row by row
    for (int64_t j = k0; j < k1; ++j) {
      T* rj = a + j * f;
      const T d = rj[j];
      if (!(d > T(0)) || !std::isfinite(d)) return j + 1;
      const T s = std::sqrt(d);
      rj[j] = s;
      inv[j - k0] = T(1) / s;
      for (int64_t l = j + 1; l < k1; ++l) rj[l] *= inv[j - k0];
      for (int64_t i = j + 1; i < k1; ++i) {
        T* ri = a + i * f;
        const T u = rj[i];
        for (int64_t l = i; l < k1; ++l) ri[l] -= u * rj[l];
      }
    }
    const int64_t m = f - k1;  // columns right of the panel, rows below it
    if (m == 0) break;
    // the panel's rows right of the block: U[k0:k1, k1:f] = U_kk^-T a[k0:k1, k1:f]
    const bool parallel = static_cast<double>(m) * m * kb >= kCholParallelWork;
    const int64_t col_pieces = (m + kCholPieceColumns - 1) / kCholPieceColumns;
    ParallelFor(parallel ? workers : Workers(), col_pieces, [&](int64_t piece, int64_t) {
      const int64_t c0 = k1 + piece * kCholPieceColumns, c1 = std::min(f, c0 + kCholPieceColumns);
      for (int64_t j = k0; j < k1; ++j) {
        T* __restrict rj = a + j * f;
        const T s = inv[j - k0];
        for (int64_t l = c0; l < c1; ++l) rj[l] *= s;
        for (int64_t i = j + 1; i < k1; ++i) {
          T* __restrict ri = a + i * f;
          const T u = rj[i];
          for (int64_t l = c0; l < c1; ++l) ri[l] -= u * rj[l];
        }
      }
    });
    // the trailing triangle: a[k1:f, k1:f] -= P^T P, P = U[k0:k1, k1:f]
    const int64_t pieces = parallel ? 2 * workers.threads() : 1;
    ParallelFor(parallel ? workers : Workers(), pieces, [&](int64_t piece, int64_t worker) {
      const int64_t j0 = SplitForShare(m, static_cast<double>(piece) / pieces);
      const int64_t j1 = SplitForShare(m, static_cast<double>(piece + 1) / pieces);
      if (j1 > j0) {
        kernels.gram(a + k1 * f + k1, f, a + k0 * f + k1, f, m, kb, j0, j1, true,
                     works[worker]);
      }
    });
  }
  return 0;
}

// Solves U^T U X = B for the factor of CholeskyUpper and o right-hand sides
// at once, in place in x (o columns of a row-major f x ldx matrix, the layout
// of b and w; RidgeSolve gives column ranges to its threads): U^T Z = B
// forward, U X = Z backward, both along U's rows, so U (f^2 elements, 562 MB
// at 8385 features) is read once per pass for all outputs instead of once per
// output, and the inner loops run over the o contiguous outputs. Each
// element sees the operations of a one-vector solve in the same order
// (forward: one subtraction per earlier row; backward: four partial sums by
// column mod 4, combined as (s0 + s1) + (s2 + s3)), so its bits do not
// depend on o. `acc` is scratch for 4 o elements.
template <typename T>
void CholeskySolveUpper(const T* u, int64_t f, int64_t ldx, int64_t o, T* x, T* acc) {
  for (int64_t j = 0; j < f; ++j) {
    const T* __restrict rj = u + j * f;
    T* __restrict zj = x + j * ldx;
    const T d = rj[j];
    for (int64_t c = 0; c < o; ++c) zj[c] = zj[c] / d;
    for (int64_t l = j + 1; l < f; ++l) {
      const T a = rj[l];
      T* __restrict xl = x + l * ldx;
      for (int64_t c = 0; c < o; ++c) xl[c] -= a * zj[c];
    }
  }
  T* __restrict s0 = acc;
  T* __restrict s1 = acc + o;
  T* __restrict s2 = acc + 2 * o;
  T* __restrict s3 = acc + 3 * o;
  for (int64_t j = f - 1; j >= 0; --j) {
    const T* __restrict rj = u + j * f;
    for (int64_t c = 0; c < 4 * o; ++c) acc[c] = 0;
    int64_t l = j + 1;
    for (; l + 4 <= f; l += 4) {
      const T a0 = rj[l], a1 = rj[l + 1], a2 = rj[l + 2], a3 = rj[l + 3];
      const T* __restrict x0 = x + l * ldx;
      for (int64_t c = 0; c < o; ++c) {
        s0[c] += a0 * x0[c];
        s1[c] += a1 * x0[ldx + c];
        s2[c] += a2 * x0[2 * ldx + c];
        s3[c] += a3 * x0[3 * ldx + c];
      }
    }
    for (; l < f; ++l) {
      const T a = rj[l];
      const T* __restrict xl = x + l * ldx;
      for (int64_t c = 0; c < o; ++c) s0[c] += a * xl[c];
    }
    T* __restrict xj = x + j * ldx;
    const T d = rj[j];
    for (int64_t c = 0; c < o; ++c) xj[c] = (xj[c] - ((s0[c] + s1[c]) + (s2[c] + s3[c]))) / d;
  }
}

// Minimum-norm solution of (a) x = b from the eigen-decomposition of the
// symmetric matrix in a's row-major lower triangle (destroyed). b and x are
// column-major f x o. Returns syevd's info.
template <typename T>
int MinNormSolve(SyevdFn<T> syevd, T* a, int64_t f, int64_t o, const T* b, T* x) {
  const int n = static_cast<int>(f);
  const char jobz = 'V', uplo = 'U';
  std::vector<T> w(f);
  T work_query = 0;
  int iwork_query = 0, lwork = -1, liwork = -1, info = 0;
  syevd(&jobz, &uplo, &n, a, &n, w.data(), &work_query, &lwork, &iwork_query, &liwork,
        &info);
  if (info != 0) return info;
  lwork = static_cast<int>(work_query);
  liwork = iwork_query;
  std::vector<T> work(std::max(lwork, 1));
  std::vector<int> iwork(std::max(liwork, 1));
  syevd(&jobz, &uplo, &n, a, &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
        &info);
  if (info != 0) return info;
  T top = 0;
  for (int64_t i = 0; i < f; ++i) top = std::max(top, std::abs(w[i]));
  const T cutoff = std::numeric_limits<T>::epsilon() * static_cast<T>(f) * top;
  // Column-major a now holds eigenvector k in a[k * f : (k + 1) * f].
  std::vector<T> c(o);
  for (int64_t i = 0; i < f * o; ++i) x[i] = 0;
  for (int64_t k = 0; k < f; ++k) {
    if (!(w[k] > cutoff)) continue;
    const T* v = a + k * f;
    for (int64_t j = 0; j < o; ++j) {
      T acc = 0;
      for (int64_t i = 0; i < f; ++i) acc += v[i] * b[j * f + i];
      c[j] = acc / w[k];
    }
    for (int64_t j = 0; j < o; ++j)
      for (int64_t i = 0; i < f; ++i) x[j * f + i] += c[j] * v[i];
  }
  return 0;
}

template <ffi::DataType DT>
ffi::Error RidgeSolve(ffi::ThreadPool pool, ffi::Buffer<DT> g, ffi::Buffer<DT> b,
                      ffi::Buffer<DT> beta, ffi::ResultBuffer<DT> g_out,
                      ffi::ResultBuffer<DT> w, ffi::ResultBuffer<ffi::S32> status) {
  using T = ffi::NativeType<DT>;
  void* const syevd_fn = RoutineFor<T>(orc_native::kSsyevd);
  if (!syevd_fn) return NoRoutines("ridge_solve");
  const auto gd = g.dimensions();
  const auto bd = b.dimensions();
  if (gd.size() < 2 || bd.size() != gd.size()) {
    return ffi::Error::InvalidArgument("orc ridge_solve: g must be (..., F, F), b (..., F, O)");
  }
  const size_t lead = gd.size() - 2;
  const int64_t f = gd[lead], o = bd[lead + 1];
  if (gd[lead + 1] != f || bd[lead] != f) {
    return ffi::Error::InvalidArgument("orc ridge_solve: b's rows must match g");
  }
  int64_t batch = 1;
  for (size_t d = 0; d < lead; ++d) {
    if (gd[d] != bd[d]) return ffi::Error::InvalidArgument("orc ridge_solve: batch dims differ");
    batch *= gd[d];
  }
  const int64_t n_beta = static_cast<int64_t>(beta.element_count());
  if (n_beta != 1 && n_beta != batch) {
    return ffi::Error::InvalidArgument("orc ridge_solve: beta must be a scalar per problem");
  }
  T* G = g_out->typed_data();
  if (G != g.typed_data()) {
    const T* src = g.typed_data();
    for (int64_t i = 0; i < batch * f * f; ++i) G[i] = src[i];
  }
  const auto syevd = reinterpret_cast<SyevdFn<T>>(syevd_fn);
  const Workers workers = Workers::Of(pool);
  std::vector<GramWork> works(static_cast<size_t>(workers.threads()));
  const T* B = b.typed_data();
  T* W = w->typed_data();
  int32_t* S = status->typed_data();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> diag(f), acc(4 * o * workers.threads());
  for (int64_t p = 0; p < batch; ++p) {
    T* gp = G + p * f * f;
    const T* bp = B + p * f * o;
    T* wp = W + p * f * o;
    const T bt = beta.typed_data()[n_beta == 1 ? 0 : p];
    bool finite = std::isfinite(bt);
    for (int64_t i = 0; i < f * o; ++i) finite &= std::isfinite(bp[i]);
    finite &= MirrorUpper(gp, f);  // the lower triangle keeps G for the fallback
    for (int64_t i = 0; i < f; ++i) {
      finite &= std::isfinite(gp[i * f + i]);
      diag[i] = gp[i * f + i] + bt;
      gp[i * f + i] = diag[i];
    }
    if (!finite) {
      for (int64_t i = 0; i < f * o; ++i) wp[i] = nan;
      S[p] = -1;
      continue;
    }
    if (CholeskyUpper(gp, f, workers, works) == 0) {
      for (int64_t i = 0; i < f * o; ++i) wp[i] = bp[i];
      // the outputs in column ranges, one per thread (each column's
      // operations are the same whichever thread solves it)
      const bool parallel = o >= 2 * kSolveMinColumns &&
                            static_cast<double>(f) * f * o >= kSolveParallelWork;
      const int64_t pieces = parallel ? std::min(workers.threads(), o / kSolveMinColumns) : 1;
      ParallelFor(parallel ? workers : Workers(), pieces, [&](int64_t piece, int64_t worker) {
        const int64_t c0 = o * piece / pieces, c1 = o * (piece + 1) / pieces;
        CholeskySolveUpper(gp, f, o, c1 - c0, wp + c0, acc.data() + 4 * o * worker);
      });
      S[p] = 0;
      continue;
    }
    // not positive definite: the minimum-norm solution from G + beta I again
    // (the lower triangle's copy and the saved diagonal)
    std::vector<T> rhs(f * o), sol(f * o);
    for (int64_t i = 0; i < f; ++i)  // row-major (F, O) -> one vector per output
      for (int64_t j = 0; j < o; ++j) rhs[j * f + i] = bp[i * o + j];
    for (int64_t i = 0; i < f; ++i) gp[i * f + i] = diag[i];
    const int info = MinNormSolve(syevd, gp, f, o, rhs.data(), sol.data());
    S[p] = info == 0 ? 1 : -2;
    for (int64_t i = 0; i < f; ++i)
      for (int64_t j = 0; j < o; ++j) wp[i * o + j] = S[p] >= 0 ? sol[j * f + i] : nan;
  }
  return ffi::Error::Success();
}

}  // namespace

#define ORC_RIDGE_SOLVE(NAME, DT)                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, RidgeSolve<DT>,               \
                                ffi::Ffi::Bind()                    \
                                    .Ctx<ffi::ThreadPool>()         \
                                    .Arg<ffi::Buffer<DT>>()         \
                                    .Arg<ffi::Buffer<DT>>()         \
                                    .Arg<ffi::Buffer<DT>>()         \
                                    .Ret<ffi::Buffer<DT>>()         \
                                    .Ret<ffi::Buffer<DT>>()         \
                                    .Ret<ffi::Buffer<ffi::S32>>());

ORC_RIDGE_SOLVE(OrcRidgeSolveF32, ffi::F32)
ORC_RIDGE_SOLVE(OrcRidgeSolveF64, ffi::F64)

// ---------------------------------------------------------------------------
// Teacher-forced run of a discrete leaky-tanh ESN over a block of steps:
//
//   r_t = leak * tanh(W r_{t-1} + p_t) + (1 - leak) * r_{t-1},   t = 0..B-1
//
// with W in ELL layout (values/indices (..., n, k), leading chunk dims), the
// drive p (B, ..., n) computed beforehand by XLA (embedding of the block's
// inputs plus the bias, one product for the whole block), r0 (..., n), and
// the states written to out (B, ..., n). Inside a step the rows are split
// into units that two threads claim in order (this one and a helper thread
// started for the call), so both cores work on every step; a step starts
// only when every unit of the previous one is done. One call covers a block
// of steps, so the per-step cost of XLA's loop, the separate activation pass
// and the thread hand-off of a per-step custom call are all gone.
namespace {

// expm1(y) = exp(y) - 1 for y in [-40, 0], vectorisable (no calls, no
// branches): Cody-Waite reduction y = k ln2 + r, |r| <= ln2/2, a degree-13
// Taylor polynomial for expm1(r) (error below 1e-17 there), then
// expm1(y) = 2^k expm1(r) + (2^k - 1) with 2^k assembled in the exponent
// bits (2^k - 1 is exact): full relative precision near 0.
__attribute__((always_inline)) inline double Expm1NonPositive(double y) {
  constexpr double kLog2e = 1.4426950408889634, kShift = 6755399441055744.0;  // 1.5 * 2^52
  constexpr double kLn2Hi = 0.6931471803691238, kLn2Lo = 1.9082149292705877e-10;
  const double shifted = y * kLog2e + kShift;
  const double kd = shifted - kShift;  // y / ln2 rounded to an integer
  const double r = (y - kd * kLn2Hi) - kd * kLn2Lo;
  double q = 1.0 / 6227020800.0;
  q = q * r + 1.0 / 479001600.0;
  q = q * r + 1.0 / 39916800.0;
  q = q * r + 1.0 / 3628800.0;
  q = q * r + 1.0 / 362880.0;
  q = q * r + 1.0 / 40320.0;
  q = q * r + 1.0 / 5040.0;
  q = q * r + 1.0 / 720.0;
  q = q * r + 1.0 / 120.0;
  q = q * r + 1.0 / 24.0;
  q = q * r + 1.0 / 6.0;
  q = q * r + 0.5;
  q = q * r + 1.0;
  q = q * r;  // expm1(r)
  int64_t sbits, bbits;
  const double base = kShift;
  std::memcpy(&sbits, &shifted, sizeof sbits);
  std::memcpy(&bbits, &base, sizeof bbits);
  // 2^k, k = kd exactly; shifted as unsigned (a NaN y gives garbage bits
  // here, where a signed shift would be undefined; q is NaN then anyway)
  const uint64_t scale_bits = static_cast<uint64_t>((sbits - bbits) + 1023) << 52;
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return scale * q + (scale - 1.0);
}

// tanh(x) = -sign(x) m / (2 + m) with m = expm1(-2|x|); |x| is capped at 20,
// where tanh is 1 to double precision. Relative error a few ulp. A NaN stays
// NaN, as in XLA's tanh: the cap is written so that a NaN passes it (a min
// whose NaN operand wins; `ax < 20 ? ax : 20` would make it 20, so +-1, a
// plausible state hiding a diverged or corrupted input) and every step
// after it carries the NaN. An explicit select costs the loop its
// vectorisation (training N=2000 about 6% slower on Zen 3).
__attribute__((always_inline)) inline double TanhFast(double x) {
  const double ax = std::fabs(x);
  const double a = ax > 20.0 ? 20.0 : ax;
  const double m = Expm1NonPositive(-2.0 * a);
  return std::copysign(-m / (2.0 + m), x);
}

// The activation pass vectorises: on x86-64 it is compiled for AVX-512 and
// for AVX2 with FMA besides the baseline, and the best one the CPU has is
// picked once. FMA matters as much as the width: AMD Zen 3, 2000 values,
// 1.85 ns per value against 3.1 with AVX2 alone (6.9 for the baseline).
using TanhFn = void (*)(double*, int64_t);

__attribute__((always_inline)) inline void TanhLoop(double* __restrict z, int64_t m) {
  for (int64_t i = 0; i < m; ++i) z[i] = TanhFast(z[i]);
}

void TanhBaseline(double* __restrict z, int64_t m) { TanhLoop(z, m); }

#ifdef ORC_X86_DISPATCH
__attribute__((target("avx512f,fma"))) void TanhAvx512(double* __restrict z, int64_t m) {
  TanhLoop(z, m);
}

__attribute__((target("avx2,fma"))) void TanhAvx2(double* __restrict z, int64_t m) {
  TanhLoop(z, m);
}
#endif

TanhFn TanhOf(Isa isa) {
#ifdef ORC_X86_DISPATCH
  if (isa == Isa::kAvx512) return TanhAvx512;
  if (isa == Isa::kAvx2) return TanhAvx2;
#endif
  (void)isa;
  return TanhBaseline;
}

TanhFn PickTanh() { return TanhOf(Resolve(g_variants.tanh, WidestIsa())); }

void TanhInPlace(double* z, int64_t m) {
  static const TanhFn tanh = PickTanh();
  tanh(z, m);
}

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

bool ShareSteps(int64_t nonzeros, int64_t steps, int64_t width) {
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

// Whether two dimension lists are equal.
template <typename A, typename B>
bool SameDims(const A& a, const B& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d] != b[d]) return false;
  }
  return true;
}

// Steps finished by one thread of the run, on a cache line of its own.
struct alignas(64) StepCounter {
  std::atomic<int64_t> steps{0};

  // Spins until `steps` reaches t (yielding now and then, `spins` counts).
  void WaitFor(int64_t t, int64_t& spins) const {
    while (steps.load(std::memory_order_acquire) < t) {
      SpinPause();
      if (++spins > (1 << 16)) {
        std::this_thread::yield();
        spins = 0;
      }
    }
  }
};

// run(w, used) on this thread (w = 0) and, when `share` and the workers
// allow, on one helper task (w = 1) at the same time; `used` is how many
// run it (1 when the helper did not start within kJoinMicros). Both halves
// wait for each other's steps, so the split is fixed before either starts.
template <typename F>
void OnStepThreads(const Workers& workers, bool share, const F& run) {
  if (!share || workers.threads() < 2) {
    run(0, 1);
    return;
  }
  Helper helper(workers, [&run] { run(1, 2); });
  run(0, helper.AwaitStart(kJoinMicros) ? 2 : 1);
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

// Steps [0, steps) of the ESN from r0 into Y (a precomputed drive may be Y itself),
// with two threads sharing every step when the reservoir is large enough.
// Thread w owns the rows [w width / threads, (w + 1) width / threads) of
// every step (counted over all chunks) and, before step t, waits until the
// other thread has finished step t - 1 (whose states it reads). One
// hand-over per step and thread: claiming 128-row units dynamically cost 30
// contended atomic operations per step, a third of the step at res_dim 2000.
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
  StepCounter counters[2];
  PagesAhead pages(Y, steps, width * static_cast<int64_t>(sizeof(T)));
  auto run = [=, &m, &counters, &pages](int w, int used) {
    const int64_t lo = w * width / used, hi = (w + 1) * width / used;
    StepCounter& mine = counters[w];
    StepCounter& other = counters[1 - w];
    int64_t spins = 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (w == 0) pages.Before(t);
      if (used > 1) other.WaitFor(t, spins);
      const T* xs = t == 0 ? R0 : Y + (t - 1) * width;
      EsnStepRows<T>(m, xs, drive, t, Y + t * width, leak, lo, hi);
      mine.steps.store(t + 1, std::memory_order_release);
      if (progress != nullptr && used == 1) progress->store(t + 1, std::memory_order_release);
    }
  };
  OnStepThreads(workers, ShareSteps(m.n * m.k * m.chunks, steps, width), run);
}

// Checks the operands of a run: values/indices (..., n, k) with leading chunk
// dimensions, drive (B, ..., n), r0 (..., n); sets n, k, chunks and steps.
template <typename VB, typename IB, typename DB, typename RB>
ffi::Error EsnShapes(const VB& values, const IB& indices, const DB& drive, const RB& r0,
                     int64_t& n, int64_t& k, int64_t& chunks, int64_t& steps) {
  const auto vd = values.dimensions();
  const auto dd = drive.dimensions();
  const auto rd = r0.dimensions();
  if (vd.size() < 2 || indices.dimensions().size() != vd.size() || dd.size() != vd.size() ||
      rd.size() != vd.size() - 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_run: values/indices (..., n, k), drive (B, ..., n), r0 (..., n), leak ()");
  }
  n = vd[vd.size() - 2];
  k = vd[vd.size() - 1];
  chunks = 1;
  for (size_t d = 0; d + 2 < vd.size(); ++d) {
    if (dd[d + 1] != vd[d] || rd[d] != vd[d] || indices.dimensions()[d] != vd[d]) {
      return ffi::Error::InvalidArgument("orc esn_run: chunk dimensions differ");
    }
    chunks *= vd[d];
  }
  if (dd[dd.size() - 1] != n || rd[rd.size() - 1] != n || indices.dimensions()[vd.size() - 1] != k) {
    return ffi::Error::InvalidArgument("orc esn_run: reservoir sizes differ");
  }
  steps = dd[0];
  return ffi::Error::Success();
}

template <ffi::DataType DT>
ffi::Error EsnRun(ffi::ThreadPool pool, ffi::Buffer<DT> values, ffi::Buffer<ffi::S32> indices,
                  ffi::Buffer<DT> drive, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                  ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  int64_t n, k, chunks, steps;
  if (leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument("orc esn_run: leak must be a scalar");
  }
  ffi::Error shapes = EsnShapes(values, indices, drive, r0, n, k, chunks, steps);
  if (shapes.failure()) return shapes;
  if (!ColumnsInRange(indices.typed_data(), indices.element_count(), n)) {
    return IndexError("esn_run");
  }
  Drive<T> d;
  d.p = drive.typed_data();
  RunEsn<T>(RunMatrix<T>(values.typed_data(), indices.typed_data(), n, k, chunks), steps, d,
            r0.typed_data(), out->typed_data(), leak_buf.typed_data()[0], Workers::Of(pool));
  return ffi::Error::Success();
}

}  // namespace

#define ORC_ESN_RUN(NAME, DT)                                     \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, EsnRun<DT>,                 \
                                ffi::Ffi::Bind()                  \
                                    .Ctx<ffi::ThreadPool>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<ffi::S32>>() \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>());

ORC_ESN_RUN(OrcEsnRunF32, ffi::F32)
ORC_ESN_RUN(OrcEsnRunF64, ffi::F64)

// ---------------------------------------------------------------------------
// Teacher-forced ESN run and ridge statistics in one call, overlapped:
//
//   out = the states of esn_run(values, indices, drive, r0, leak) with the
//         drive of a linear embedding, drive[t][c] = win[c] u[t][c] + bias,
//         computed step by step (win (C, n, w), u (T, C, w): the few input
//         values each chunk sees), so no (T, C, n) drive is ever stored;
//   g += X^T X, c += X^T Y over the rows [start, stop) of X = out, Y = y
//
// with the layouts of esn_run (values (C, n, k), out (T, C, n)) and of the
// chunked stats update (g (C, n, n), c (C, n, O), y (T, C, O)); g and c alias
// g_out and c_out. (Asking for transparent huge pages on the fresh out
// before writing it made the first write of each new 2 MiB page cost more on
// the VMs we measure on, and the run bimodal: 1.3 or 2.2 s; not done.)
//
// The reservoir run is sequential and bound by its loads, the Gram runs at
// the core's arithmetic peak; run one after the other (each on both cores)
// they cost the sum of their times. Here this thread runs the reservoir on
// one core while a helper thread folds the finished rows into the statistics
// on the other (orc's Gram kernel, see below), a block of rows
// at a time (the helper lags: the Gram is about twice the run's work). When
// the run ends, the rows left are split by Gram columns between both threads
// (disjoint memory), sized so that both end together: this thread starts at
// once, into a zeroed copy of its part of the Gram while the helper finishes
// the block it is in, and takes over that much more of the triangle. At
// res_dim 2000 and 20000 steps this takes the wall time from the sum of the
// two to about half of their single-core times added up. (Waiting for the
// helper's block instead cost 40-55 ms, a static split another 0-50 ms.)
//
// The Gram of the overlapped fit is orc's own kernel (GramRows, CrossRows),
// never BLAS: BLAS called beside the run would start its own threads on the
// cores the run uses, and OpenBLAS's thread count can only be changed for
// the whole process (its _local variant, in the builds SciPy ships, too),
// which a library must not do. Below kGramMinFeatures features (little
// work: no overlap), on one core, or with ORC_NATIVE_THREADS=1, the run and
// the statistics follow each other as in esn_run and stats_update.
namespace {

// Rows per statistics update of the helper while the run goes on: syrk's
// throughput at 512 rows is within 3% of one call over all rows.
constexpr int64_t kFitBlock = 512;
// The same for the Gram kernel: one of its blocks of steps (kGramKc).
constexpr int64_t kFitBlockOwn = 256;


template <ffi::DataType DT>
ffi::Error EsnFit(ffi::ThreadPool pool, ffi::Buffer<DT> values, ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win,
                  ffi::Buffer<DT> u, ffi::Buffer<DT> bias_buf, ffi::Buffer<DT> r0,
                  ffi::Buffer<DT> leak_buf, ffi::Buffer<DT> g, ffi::Buffer<DT> c,
                  ffi::Buffer<DT> y, ffi::ResultBuffer<DT> out, ffi::ResultBuffer<DT> g_out,
                  ffi::ResultBuffer<DT> c_out, int64_t start, int64_t stop) {
  using T = ffi::NativeType<DT>;
  void* const syrk_fn = RoutineFor<T>(orc_native::kSsyrk);
  void* const gemm_fn = RoutineFor<T>(orc_native::kSgemm);
  if (syrk_fn == nullptr || gemm_fn == nullptr) return NoRoutines("esn_fit");
  const auto vd = values.dimensions(), wd = win.dimensions(), ud = u.dimensions(),
             rd = r0.dimensions(), gd = g.dimensions(), cd = c.dimensions(),
             yd = y.dimensions(), od = out->dimensions();
  if (vd.size() != 3 || indices.dimensions().size() != 3 || wd.size() != 3 || ud.size() != 3 ||
      rd.size() != 2 || gd.size() != 3 || cd.size() != 3 || yd.size() != 3 || od.size() != 3 ||
      bias_buf.element_count() != 1 || leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_fit: values/indices (C, n, k), win (C, n, w), u (T, C, w), bias (), r0 (C, n), "
        "leak (), g (C, n, n), c (C, n, O), y (T, C, O)");
  }
  const int64_t chunks = vd[0], n = vd[1], k = vd[2], w = wd[2], steps = ud[0], o = cd[2];
  if (!SameDims(indices.dimensions(), vd)) {
    return ffi::Error::InvalidArgument("orc esn_fit: indices must match values");
  }
  if (wd[0] != chunks || wd[1] != n || ud[1] != chunks || ud[2] != w || rd[0] != chunks ||
      rd[1] != n || gd[0] != chunks || gd[1] != n || gd[2] != n || cd[0] != chunks ||
      cd[1] != n || yd[0] != steps || yd[1] != chunks || yd[2] != o || od[0] != steps ||
      od[1] != chunks || od[2] != n) {
    return ffi::Error::InvalidArgument("orc esn_fit: operand sizes differ");
  }
  if (start < 0 || stop < start || stop > steps) {
    return ffi::Error::InvalidArgument("orc esn_fit: rows [start, stop) out of range");
  }
  if (!ColumnsInRange(indices.typed_data(), indices.element_count(), n)) {
    return IndexError("esn_fit");
  }
  const int64_t f = n, width = chunks * n;
  T* X = out->typed_data();
  T* G = g_out->typed_data();
  T* Cr = c_out->typed_data();
  if (G != g.typed_data()) std::memcpy(G, g.typed_data(), sizeof(T) * chunks * f * f);
  if (Cr != c.typed_data()) std::memcpy(Cr, c.typed_data(), sizeof(T) * chunks * f * o);
  if (steps == 0 || width == 0) return ffi::Error::Success();
  const T* V = values.typed_data();
  const int32_t* I = indices.typed_data();
  const T* R0 = r0.typed_data();
  const T* Yv = y.typed_data();
  const T leak = leak_buf.typed_data()[0];
  Drive<T> drive;
  const std::vector<T> win_t = InputsByColumn(win.typed_data(), chunks, n, w);
  drive.win_t = win_t.data();
  drive.u = u.typed_data();
  drive.w = w;
  drive.bias = bias_buf.typed_data()[0];
  const Blas<T> blas{reinterpret_cast<SyrkFn<T>>(syrk_fn), reinterpret_cast<GemmFn<T>>(gemm_fn)};
  const RunMatrix<T> matrix(V, I, n, k, chunks);

  // The statistics are summed in one fixed order whatever the threads and
  // their timing: rows [start, stop) in blocks of `block` rows counted from
  // start, each block's contribution computed separately for the Gram rows
  // (and cross-product rows) [0, split) -- panel 0 -- and [split, f) --
  // panel 1 --, and each panel's blocks added in row order. Which thread
  // computes a (block, panel) pair is then free: the result is the same bit
  // for bit run to run, on one thread or two, and for each chunk whatever
  // the number of chunks (an ensemble equals its members trained alone).
  const bool own = f >= kGramMinFeatures;
  const int64_t block = own ? kFitBlockOwn : kFitBlock;
  const int64_t split = SplitForShare(f, 0.5);
  const int64_t nblocks = (stop - start + block - 1) / block;
  auto add_panel = [&](int64_t j, int p, GramWork& work) {
    const int64_t a = start + j * block, b = std::min(stop, a + block);
    AddRows(blas, own, G, Cr, X, Yv, chunks, f, o, a, b, p == 0 ? 0 : split,
            p == 0 ? split : f, work);
  };
  GramWork mine, theirs;
  const Workers workers = Workers::Of(pool);
  const double work = static_cast<double>(stop - start) * static_cast<double>(f * f) * chunks;
  const bool overlap = own && workers.threads() > 1 && work >= kOverlapWork && nblocks > 0;
  if (!overlap) {
    RunEsn<T>(matrix, steps, drive, R0, X, leak, workers);
    for (int64_t j = 0; j < nblocks; ++j) {
      add_panel(j, 0, mine);
      add_panel(j, 1, mine);
    }
    return ffi::Error::Success();
  }
  std::atomic<int64_t> forced{0};    // steps the run has finished
  std::atomic<int64_t> claim0{0};    // next block of panel 0 to claim
  std::atomic<int64_t> done0{0};     // blocks of panel 0 added
  std::atomic<bool> ended{false};    // the run is over: panel 0 goes to this thread
  // The helper (a task on XLA's pool) adds finished blocks (panel 0 then
  // panel 1) while the run goes on; once the run is over, this thread takes
  // the panel-0 blocks left, in order, and the helper the panel-1 blocks
  // left. A helper that has not started by then never does: this thread
  // adds every block itself, as on one thread.
  auto helper_work = [&]() {
    int64_t j = 0, spins = 0;
    while (j < nblocks && !ended.load(std::memory_order_acquire)) {
      const int64_t end = std::min(stop, start + (j + 1) * block);
      if (forced.load(std::memory_order_acquire) < end) {
        SpinPause();
        if (++spins > (1 << 10)) {
          std::this_thread::yield();
          spins = 0;
        }
        continue;
      }
      int64_t expected = j;
      if (!claim0.compare_exchange_strong(expected, j + 1, std::memory_order_acq_rel)) break;
      add_panel(j, 0, theirs);
      done0.store(j + 1, std::memory_order_release);
      add_panel(j, 1, theirs);
      ++j;
      spins = 0;
    }
    for (; j < nblocks; ++j) add_panel(j, 1, theirs);
  };
  Helper helper(workers, helper_work);
  RunEsn<T>(matrix, steps, drive, R0, X, leak, Workers(), &forced);
  ended.store(true, std::memory_order_release);
  for (;;) {
    int64_t j = claim0.load(std::memory_order_acquire);
    if (j >= nblocks) break;
    if (!claim0.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel)) continue;
    while (done0.load(std::memory_order_acquire) < j) SpinPause();
    add_panel(j, 0, mine);
    done0.store(j + 1, std::memory_order_release);
  }
  if (helper.Started()) {
    helper.Finish();
  } else {
    for (int64_t j = 0; j < nblocks; ++j) add_panel(j, 1, mine);
  }
  return ffi::Error::Success();
}

}  // namespace

#define ORC_ESN_FIT(NAME, DT)                                     \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, EsnFit<DT>,                 \
                                ffi::Ffi::Bind()                  \
                                    .Ctx<ffi::ThreadPool>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<ffi::S32>>() \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>()       \
                                    .Attr<int64_t>("start")       \
                                    .Attr<int64_t>("stop"));

ORC_ESN_FIT(OrcEsnFitF32, ffi::F32)
ORC_ESN_FIT(OrcEsnFitF64, ffi::F64)

// ---------------------------------------------------------------------------
// The ESN run driven by a linear embedding, the drive computed step by step
// inside the run exactly as esn_fit computes it (never stored):
//
//   out = esn_run(values, indices, win @ u + bias, r0, leak)
//
// win (C, n, w), u (T, C, w), bias (), r0 (C, n), leak () -> out (T, C, n).
// force() and the warm-up of forecast_from_IC run it, so that their states
// are the same bits as those a training stores (esn_fit), whose drive XLA
// would sum in another order (fused multiply-adds).
namespace {

template <ffi::DataType DT>
ffi::Error EsnRunLinear(ffi::ThreadPool pool, ffi::Buffer<DT> values,
                        ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win, ffi::Buffer<DT> u,
                        ffi::Buffer<DT> bias_buf, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                        ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto vd = values.dimensions(), wd = win.dimensions(), ud = u.dimensions(),
             rd = r0.dimensions(), od = out->dimensions();
  if (vd.size() != 3 || indices.dimensions().size() != 3 || wd.size() != 3 || ud.size() != 3 ||
      rd.size() != 2 || od.size() != 3 || bias_buf.element_count() != 1 ||
      leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_run_linear: values/indices (C, n, k), win (C, n, w), u (T, C, w), bias (), "
        "r0 (C, n), leak ()");
  }
  const int64_t chunks = vd[0], n = vd[1], k = vd[2], w = wd[2], steps = ud[0];
  if (!SameDims(indices.dimensions(), vd) || wd[0] != chunks || wd[1] != n ||
      ud[1] != chunks || ud[2] != w || rd[0] != chunks || rd[1] != n || od[0] != steps ||
      od[1] != chunks || od[2] != n) {
    return ffi::Error::InvalidArgument("orc esn_run_linear: operand sizes differ");
  }
  if (!ColumnsInRange(indices.typed_data(), indices.element_count(), n)) {
    return IndexError("esn_run_linear");
  }
  if (steps == 0 || chunks * n == 0) return ffi::Error::Success();
  Drive<T> drive;
  const std::vector<T> win_t = InputsByColumn(win.typed_data(), chunks, n, w);
  drive.win_t = win_t.data();
  drive.u = u.typed_data();
  drive.w = w;
  drive.bias = bias_buf.typed_data()[0];
  RunEsn<T>(RunMatrix<T>(values.typed_data(), indices.typed_data(), n, k, chunks), steps, drive,
            r0.typed_data(), out->typed_data(), leak_buf.typed_data()[0], Workers::Of(pool));
  return ffi::Error::Success();
}

}  // namespace

#define ORC_ESN_RUN_LINEAR(NAME, DT)                              \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, EsnRunLinear<DT>,           \
                                ffi::Ffi::Bind()                  \
                                    .Ctx<ffi::ThreadPool>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<ffi::S32>>() \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>());

ORC_ESN_RUN_LINEAR(OrcEsnRunLinearF32, ffi::F32)
ORC_ESN_RUN_LINEAR(OrcEsnRunLinearF64, ffi::F64)

// ---------------------------------------------------------------------------
// Closed-loop forecast of a discrete leaky-tanh ESN with a linear readout and
// a linear embedding of its own output:
//
//   y_t = concat_c(wout[c] r_t[c]),   u_t[c] = y_t[window[c]],
//   r_{t+1}[c] = leak tanh(W_c r_t[c] + win[c] u_t[c] + bias) + (1 - leak) r_t[c],
//
// for t = 0..L-1 from r_0 = r0, writing y_0..y_{L-1} (out (L, C o)). With
// values/indices (C, n, k), win (C, n, w), window (C, w) (indices into y),
// wout (C, o, n). The states live in two alternating buffers; two threads
// share the rows of every step as in RunEsn, and each computes the (small)
// readout of the full state itself, so one hand-over per step suffices:
// thread A writes r_{t+1} into the buffer of r_{t-1} only after B has
// finished step t-1, the last one that read it. The whole forecast is one
// call: no per-step loop overhead, thread hand-off or readout launches.
namespace {

// y[c o + j] = sum_i wout[c][j][i] x[c][i]; four partial sums per output.
template <typename T>
void LinearReadoutRows(const T* __restrict wout, const T* __restrict x, int64_t chunks,
                       int64_t o, int64_t n, T* __restrict y) {
  for (int64_t c = 0; c < chunks; ++c) {
    const T* xc = x + c * n;
    for (int64_t j = 0; j < o; ++j) {
      const T* wr = wout + (c * o + j) * n;
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        a0 += wr[i] * xc[i];
        a1 += wr[i + 1] * xc[i + 1];
        a2 += wr[i + 2] * xc[i + 2];
        a3 += wr[i + 3] * xc[i + 3];
      }
      for (; i < n; ++i) a0 += wr[i] * xc[i];
      y[c * o + j] = (a0 + a1) + (a2 + a3);
    }
  }
}

template <ffi::DataType DT>
ffi::Error EsnForecast(ffi::ThreadPool pool, ffi::Buffer<DT> values, ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win,
                       ffi::Buffer<ffi::S32> window, ffi::Buffer<DT> bias_buf,
                       ffi::Buffer<DT> wout, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                       ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto vd = values.dimensions(), wd = win.dimensions(), xd = window.dimensions(),
             od = wout.dimensions(), rd = r0.dimensions(), yd = out->dimensions();
  if (vd.size() != 3 || indices.dimensions().size() != 3 || wd.size() != 3 || xd.size() != 2 ||
      od.size() != 3 || rd.size() != 2 || yd.size() != 2 || bias_buf.element_count() != 1 ||
      leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_forecast: values/indices (C, n, k), win (C, n, w), window (C, w), bias (), "
        "wout (C, o, n), r0 (C, n), leak (); out (L, C o)");
  }
  const int64_t chunks = vd[0], n = vd[1], k = vd[2], w = wd[2], o = od[1], steps = yd[0];
  const int64_t width = chunks * n, out_dim = chunks * o;
  if (!SameDims(indices.dimensions(), vd)) {
    return ffi::Error::InvalidArgument("orc esn_forecast: indices must match values");
  }
  if (wd[0] != chunks || wd[1] != n || xd[0] != chunks || xd[1] != w || od[0] != chunks ||
      od[2] != n || rd[0] != chunks || rd[1] != n || yd[1] != out_dim) {
    return ffi::Error::InvalidArgument("orc esn_forecast: operand sizes differ");
  }
  if (!ColumnsInRange(indices.typed_data(), indices.element_count(), n)) {
    return IndexError("esn_forecast");
  }
  const int32_t* window_idx = window.typed_data();
  for (int64_t e = 0; e < chunks * w; ++e) {
    if (window_idx[e] < 0 || window_idx[e] >= out_dim) {
      return ffi::Error::InvalidArgument("orc esn_forecast: window index outside the output");
    }
  }
  if (steps == 0) return ffi::Error::Success();
  const T* V = values.typed_data();
  const int32_t* I = indices.typed_data();
  const T* Wout = wout.typed_data();
  const T leak = leak_buf.typed_data()[0];
  T* Y = out->typed_data();
  const RunMatrix<T> matrix(V, I, n, k, chunks);
  std::vector<T> states(2 * width);
  std::copy(r0.typed_data(), r0.typed_data() + width, states.begin());
  Drive<T> base;
  const std::vector<T> win_t = InputsByColumn(win.typed_data(), chunks, n, w);
  base.win_t = win_t.data();
  base.w = w;
  base.bias = bias_buf.typed_data()[0];

  StepCounter counters[2];
  auto run = [&](int me, int used) {
    const int64_t lo = me * width / used, hi = (me + 1) * width / used;
    StepCounter& mine = counters[me];
    StepCounter& other = counters[1 - me];
    std::vector<T> y(out_dim), u(chunks * w);
    Drive<T> drive = base;
    drive.u = u.data();
    int64_t spins = 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (used > 1) other.WaitFor(t, spins);
      const T* x = states.data() + (t % 2) * width;
      LinearReadoutRows<T>(Wout, x, chunks, o, n, y.data());
      if (me == 0) std::copy(y.begin(), y.end(), Y + t * out_dim);
      if (t + 1 == steps) break;
      for (int64_t e = 0; e < chunks * w; ++e) u[e] = y[window_idx[e]];
      EsnStepRows<T>(matrix, x, drive, 0, states.data() + ((t + 1) % 2) * width, leak, lo, hi);
      mine.steps.store(t + 1, std::memory_order_release);
    }
  };
  OnStepThreads(Workers::Of(pool), ShareSteps(n * k * chunks, steps, width), run);
  return ffi::Error::Success();
}

}  // namespace

#define ORC_ESN_FORECAST(NAME, DT)                                \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, EsnForecast<DT>,            \
                                ffi::Ffi::Bind()                  \
                                    .Ctx<ffi::ThreadPool>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<ffi::S32>>() \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<ffi::S32>>() \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Arg<ffi::Buffer<DT>>()       \
                                    .Ret<ffi::Buffer<DT>>());

ORC_ESN_FORECAST(OrcEsnForecastF32, ffi::F32)
ORC_ESN_FORECAST(OrcEsnForecastF64, ffi::F64)

// ---------------------------------------------------------------------------
// What runs on this CPU, for orc.show_config().
namespace orc_native {

const char* EllVariant() {
  const EllRowsChoice<double> choice = PickEllRows<double>();
#ifdef ORC_X86_DISPATCH
  if (choice.vector == static_cast<EllRowsFn<double>>(EllRowsAvx512)) return "avx512";
  if (choice.vector == static_cast<EllRowsFn<double>>(EllRowsAvx2)) return "avx2";
#endif
  (void)choice;
  return "scalar";
}

const char* TanhVariant() {
  const TanhFn tanh = PickTanh();
#ifdef ORC_X86_DISPATCH
  if (tanh == TanhAvx512) return "avx512";
  if (tanh == TanhAvx2) return "avx2";
#endif
  (void)tanh;
  return "baseline";
}

const char* GramVariant() { return GramIsaName(); }

int64_t PoolThreads() { return g_pool_threads.load(std::memory_order_relaxed); }

int64_t ThreadLimit() { return ThreadCap(); }

}  // namespace orc_native

// ---------------------------------------------------------------------------
// Calibration: which variant is fastest on this machine, measured. Run by
// the build (the orc_calibrate program, see CMakeLists.txt), whose output
// becomes calibration.txt next to the module; `orc info --calibrate` runs it
// again and prints what it finds. Each candidate runs on a fixed synthetic
// workload of about a reservoir's size; the best of several repeats counts.
// A few seconds at most.
namespace {

// The variant to run from measured times: times[c] is candidate c's (c = 0
// the portable one); a wider candidate must beat every narrower pick by
// `margin` (a fraction: noise must not flip a choice) to be taken.
size_t ChooseFastest(const std::vector<double>& times, double margin = 0.03) {
  size_t best = 0;
  for (size_t c = 1; c < times.size(); ++c) {
    if (times[c] < times[best] * (1.0 - margin)) best = c;
  }
  return best;
}

// The ELL choice from times[c][j] of candidate c (c = 0 the scalar loop) at
// row lengths ks[j] (increasing): a vector candidate qualifies from the
// shortest length on from which it beats the scalar loop by `margin` at
// every longer one; of those qualifying at the longest length, the fastest
// there is taken, a wider one (later in the list: what the CPU flags would
// pick) also when it is within `margin` of a narrower one (the measurement
// runs the loop alone, where the narrow loops' extra loads cost least: on an
// AVX-512 Xeon the AVX2 loop measured 0.6% faster at 40 entries and trained
// 10% slower at res_dim 2000). Returns {candidate, shortest length} ({0, 0}:
// scalar).
std::pair<size_t, int64_t> ChooseEll(const std::vector<std::vector<double>>& times,
                                     const std::vector<int64_t>& ks, double margin = 0.03) {
  std::pair<size_t, int64_t> pick{0, 0};
  double best = 0;
  const size_t last = ks.size() - 1;
  for (size_t c = 1; c < times.size(); ++c) {
    size_t from = ks.size();
    while (from > 0 && times[c][from - 1] < times[0][from - 1] * (1.0 - margin)) --from;
    if (from == ks.size()) continue;  // loses at the longest rows
    if (pick.first == 0 || times[c][last] < best * (1.0 + margin)) {
      pick = {c, ks[from]};
      best = times[c][last];
    }
  }
  return pick;
}

// Best of `repeats` runs of fn, in microseconds (after one run to warm up).
template <typename F>
double BestMicros(int repeats, const F& fn) {
  fn();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return best;
}

// The candidates this CPU runs, portable first.
std::vector<Isa> Candidates() {
  std::vector<Isa> out = {Isa::kBase};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (SimdAllowed() && CpuRuns(isa)) out.push_back(isa);
  }
  return out;
}

// Deterministic pseudo-random numbers for the workloads (no <random> state
// shared with anything).
struct Lcg {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t Next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
  }
  double Uniform() { return static_cast<double>(Next()) / 9007199254740992.0 - 0.5; }
};

// The ELL row loops (key ell_f32 / ell_f64) and, for the multi-step
// kernels, the interleaved loop against the row loop picked (run_key).
template <typename T>
std::string CalibrateEll(const char* key, const char* run_key, std::string& notes) {
  const int64_t n = 2000;
  const std::vector<int64_t> ks = {4, 8, 12, 16, 24, 40};
  const std::vector<Isa> cands = Candidates();
  Lcg rng;
  std::vector<T> x(n), z(n);
  for (auto& e : x) e = static_cast<T>(rng.Uniform());
  std::vector<std::vector<double>> times(cands.size(), std::vector<double>(ks.size()));
  const bool interleaved = SimdAllowed() && CpuRuns(Isa::kAvx2);
  std::vector<double> il_times(ks.size());
  // Four matrices used in turn: a reservoir's matrix streams from beyond
  // L2 in a real run (the Gram and the states share the caches with it); one
  // matrix timed over and over would sit in L2 and favour the loops that
  // issue more loads (on an AVX-512 Xeon that picked the AVX2 loop, 10%
  // slower than the gathers in training at res_dim 2000).
  constexpr int kMatrices = 4;
  for (size_t j = 0; j < ks.size(); ++j) {
    const int64_t k = ks[j];
    std::vector<T> v(kMatrices * n * k);
    std::vector<int32_t> idx(kMatrices * n * k);
    for (auto& e : v) e = static_cast<T>(rng.Uniform());
    for (auto& e : idx) e = static_cast<int32_t>(rng.Next() % n);
    for (size_t c = 0; c < cands.size(); ++c) {
      const EllRowsFn<T> fn = c == 0 ? static_cast<EllRowsFn<T>>(EllRowsScalar<T>)
                                     : EllRowsOf<T>(cands[c]);
      times[c][j] = BestMicros(9, [&] {
                      for (int m = 0; m < kMatrices; ++m) {
                        fn(v.data() + m * n * k, idx.data() + m * n * k, k, x.data(), z.data(),
                           0, n);
                      }
                    }) / kMatrices;
    }
#ifdef ORC_X86_DISPATCH
    if (interleaved) {
      const Interleaved<T> il(v.data(), idx.data(), kMatrices, n, k);
      il_times[j] = BestMicros(9, [&] {
                      for (int m = 0; m < kMatrices; ++m) {
                        EllRowsInterleaved<T>(v.data() + m * n * k, idx.data() + m * n * k,
                                              il.ValuesOf(m), il.ColumnsOf(m), k, x.data(),
                                              z.data(), 0, n);
                      }
                    }) / kMatrices;
    }
#endif
  }
  const auto pick = ChooseEll(times, ks);
  notes += std::string("# ") + key + ", us per product of 2000 rows, by entries per row:\n";
  for (size_t c = 0; c < cands.size(); ++c) {
    notes += std::string("#   ") + IsaName(cands[c], true);
    for (size_t j = 0; j < ks.size(); ++j) {
      notes += " k" + std::to_string(ks[j]) + "=" + std::to_string(times[c][j]).substr(0, 6);
    }
    notes += "\n";
  }
  std::string line = std::string(key) + "=" + IsaName(cands[pick.first], true);
  if (pick.first != 0) line += ":" + std::to_string(pick.second);
  line += "\n" + std::string(run_key) + "=";
  if (!interleaved) return line + "rows\n";
  // the multi-step kernels: the interleaved loop against the row loop the
  // products run at each length (a copy of the matrix per call, not timed:
  // one product's worth for thousands of steps)
  std::vector<double> rows(ks.size());
  for (size_t j = 0; j < ks.size(); ++j) {
    rows[j] = times[pick.first != 0 && ks[j] >= pick.second ? pick.first : 0][j];
  }
  const auto run_pick = ChooseEll({rows, il_times}, ks);
  notes += std::string("#   interleaved");
  for (size_t j = 0; j < ks.size(); ++j) {
    notes += " k" + std::to_string(ks[j]) + "=" + std::to_string(il_times[j]).substr(0, 6);
  }
  notes += "\n";
  if (run_pick.first == 0) return line + "rows\n";
  return line + "interleaved:" + std::to_string(run_pick.second) + "\n";
}

}  // namespace

namespace orc_native {

std::string Calibrate() {
  std::string notes, lines;
  lines += CalibrateEll<double>("ell_f64", "run_f64", notes);
  lines += CalibrateEll<float>("ell_f32", "run_f32", notes);
  const std::vector<Isa> cands = Candidates();
  {  // the activation over a reservoir's worth of values
    Lcg rng;
    std::vector<double> z(4096), src(4096);
    for (auto& e : src) e = 8 * rng.Uniform();
    std::vector<double> times;
    for (Isa isa : cands) {
      const TanhFn fn = TanhOf(isa);
      times.push_back(BestMicros(30, [&] {
        std::copy(src.begin(), src.end(), z.begin());
        fn(z.data(), static_cast<int64_t>(z.size()));
      }));
    }
    notes += "# tanh, us per 4096 values:";
    for (size_t c = 0; c < cands.size(); ++c) {
      notes += std::string(" ") + IsaName(cands[c]) + "=" + std::to_string(times[c]).substr(0, 6);
    }
    notes += "\n";
    lines += std::string("tanh=") + IsaName(cands[ChooseFastest(times)]) + "\n";
  }
  {  // a Gram update of 256 rows of 512 features, float64
    const int64_t f = 512, k = 256;
    Lcg rng;
    std::vector<double> a(k * f), g(f * f);
    for (auto& e : a) e = rng.Uniform();
    std::vector<double> times;
    GramWork work;
    for (Isa isa : cands) {
      const GramKernels<double> kernels = GramKernelsOf<double>(isa);
      times.push_back(BestMicros(5, [&] {
        kernels.gram(g.data(), f, a.data(), f, f, k, 0, f, false, work);
      }));
    }
    notes += "# gram, us per update of 256 rows x 512 features (float64):";
    for (size_t c = 0; c < cands.size(); ++c) {
      notes += std::string(" ") + IsaName(cands[c]) + "=" + std::to_string(times[c]).substr(0, 7);
    }
    notes += "\n";
    lines += std::string("gram=") + IsaName(cands[ChooseFastest(times)]) + "\n";
  }
  return "# orc native kernel calibration (measured by orc_calibrate at build time)\n" + notes +
         lines;
}

std::string ActiveVariants() {
  const EllRowsChoice<double> d = PickEllRows<double>();
  const EllRowsChoice<float> f = PickEllRows<float>();
  auto ell = [](const char* name, int64_t min_k) {
    return std::string(name) + (std::string(name) == "scalar" ? "" : ":" + std::to_string(min_k));
  };
  const Isa dt = d.vector == nullptr ? Isa::kBase
                 : d.vector == EllRowsOf<double>(Isa::kAvx512) ? Isa::kAvx512
                                                               : Isa::kAvx2;
  const Isa ft = f.vector == nullptr ? Isa::kBase
                 : f.vector == EllRowsOf<float>(Isa::kAvx512) ? Isa::kAvx512
                                                              : Isa::kAvx2;
  auto run = [](int64_t min_k) {
    return min_k > 0 ? "interleaved:" + std::to_string(min_k) : std::string("rows");
  };
  return "ell_f64=" + ell(IsaName(dt, true), d.min_k) + " ell_f32=" + ell(IsaName(ft, true), f.min_k) +
         " run_f64=" + run(InterleavedMinK<double>()) + " run_f32=" + run(InterleavedMinK<float>()) +
         " tanh=" + TanhVariant() + " gram=" + GramIsaName();
}

}  // namespace orc_native

// ---------------------------------------------------------------------------
// Column quantiles (the classifier's "ppv" thresholds):
//   out[j, c] = the q[j]-quantile of column c of x (rows, cols), by linear
//   interpolation between the order statistics at floor and ceil of
//   q[j] (rows - 1), as jnp.quantile(x, q, axis=0) computes it (the same
//   weights; bit for bit where XLA fuses the interpolation into an FMA, as
//   on x86 CPUs with FMA); a column holding a NaN gives NaN, as there. XLA's CPU sort, which jnp.quantile runs, takes ~0.85 s
//   for 10000 x 500 float64 (a compiled comparator called per comparison);
//   std::nth_element on each column is linear.
// ---------------------------------------------------------------------------

namespace {

template <ffi::DataType DT>
ffi::Error ColumnQuantiles(ffi::Buffer<DT> x, ffi::Buffer<DT> q, ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  const auto qd = q.dimensions();
  const auto od = out->dimensions();
  if (xd.size() != 2 || qd.size() != 1 || od.size() != 2 || od[0] != qd[0] || od[1] != xd[1]) {
    return ffi::Error::InvalidArgument(
        "orc column_quantiles: need x (rows, cols), q (m,) and out (m, cols)");
  }
  const int64_t rows = xd[0], cols = xd[1], m = qd[0];
  if (rows < 1) return ffi::Error::InvalidArgument("orc column_quantiles: x has no rows");
  const T* X = x.typed_data();
  const T* Q = q.typed_data();
  T* O = out->typed_data();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T last = static_cast<T>(rows) - T(1);
  // Columns are copied out kBlock at a time, reading x row by row (a column
  // at a time would read every cache line of x once per column).
  constexpr int64_t kBlock = 16;
  std::vector<T> buf(static_cast<size_t>(rows * kBlock));
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t width = std::min(kBlock, cols - c0);
    bool has_nan[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = X + r * cols + c0;
      for (int64_t t = 0; t < width; ++t) {
        has_nan[t] |= std::isnan(row[t]);
        buf[static_cast<size_t>(t * rows + r)] = row[t];
      }
    }
    for (int64_t t = 0; t < width; ++t) {
      const auto first = buf.begin() + t * rows, end = first + rows;
      for (int64_t j = 0; j < m; ++j) {
        T* o = O + j * cols + c0 + t;
        const T pos = Q[j] * last;
        if (has_nan[t] || std::isnan(pos)) {
          *o = nan;
          continue;
        }
        const T low = std::floor(pos), high = std::ceil(pos);
        const T high_weight = pos - low;
        const T low_weight = T(1) - high_weight;
        const int64_t il = static_cast<int64_t>(std::min(std::max(low, T(0)), last));
        const int64_t ih = static_cast<int64_t>(std::min(std::max(high, T(0)), last));
        std::nth_element(first, first + il, end);
        const T low_value = first[il];
        // ih is il or il + 1: the smallest of what nth_element left above il
        const T high_value = ih == il ? low_value : *std::min_element(first + il + 1, end);
        // XLA's CPU code fuses jnp.quantile's low * w_low + high * w_high
        // into fma(low, w_low, high * w_high) on CPUs with FMA: the same
        // rounding here (std::fma is exact everywhere)
        *o = std::fma(low_value, low_weight, high_value * high_weight);
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcColumnQuantilesF32, ColumnQuantiles<ffi::F32>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcColumnQuantilesF64, ColumnQuantiles<ffi::F64>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>());
