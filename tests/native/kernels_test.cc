// C++ tests of orc's native kernels against scalar references (make
// check-native builds them with AddressSanitizer + UndefinedBehaviorSanitizer
// and with ThreadSanitizer; CMake option ORC_NATIVE_TESTS). The kernels'
// internals are in the shared headers of src/orc/_native (namespace
// orc_native); the kernel sources are compiled into this program with its
// flags.
//
// Covered: the sparse row sums (every SIMD variant this CPU has, float and
// double, odd sizes, rows of 1..41 entries, zero rows, NaN/inf inputs), the
// activation tanh (every variant: maximum ulp error against std::tanh over
// the float64 range, special values), and the ridge statistics update on two
// threads (orc's Gram kernel where the CPU uses it, else the BLAS path) against
// a plain triple loop, repeated for bit-identical results; orc's Gram and
// cross-product kernels (every vector width this CPU runs, float and double)
// against a long-double reference, split as the threads split them; the fit
// of a run whose states are not kept (FitRing) against the run's history and
// the same blocks added in order, on one thread and with helpers.

#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <random>

#include "cholesky.h"
#include "esn.h"
#include "fit.h"
#include "gram.h"
#include "isa.h"
#include "rows.h"
#include "stats.h"
#include "workers.h"

using namespace orc_native;  // the kernels' internals

namespace {

int g_failures = 0;

#define CHECK(cond, ...)                                             \
  do {                                                               \
    if (!(cond)) {                                                   \
      ++g_failures;                                                  \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                             \
      std::fprintf(stderr, "\n");                                    \
    }                                                                \
  } while (0)

// The vector variants the lists below test: those this CPU and build run
// (the kernels' own CpuRuns, whatever ORC_NATIVE_SIMD says).
std::vector<Isa> VectorIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (CpuRuns(isa)) out.push_back(isa);
  }
  return out;
}

// ------------------------------------------------------------------ workers
// Schedulers standing in for XLA's pool: a thread per task (joined when the
// scheduler goes), tasks kept and run only after the call has returned (a
// pool whose threads were all busy), and tasks dropped unrun.
class ThreadScheduler {
 public:
  ~ThreadScheduler() { Join(); }
  Workers Make(int64_t threads) {
    return Workers([this](Workers::Task task) {
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.emplace_back(std::move(task));
    }, threads);
  }
  void Join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

class LateScheduler {
 public:
  Workers Make(int64_t threads) {
    return Workers([this](Workers::Task task) { tasks_.push_back(std::move(task)); }, threads);
  }
  // Runs what was scheduled; returns how many tasks there were.
  size_t RunAll() {
    const size_t n = tasks_.size();
    for (auto& t : tasks_) t();
    tasks_.clear();
    return n;
  }

 private:
  std::vector<Workers::Task> tasks_;
};

Workers DroppingWorkers(int64_t threads) {
  return Workers([](Workers::Task) {}, threads);
}

// Every unit exactly once, whoever runs it; a helper that never starts or
// starts after the call changes nothing; a task run by the scheduling thread
// itself (a pool that cannot take tasks) is left to the caller.
void TestWorkers() {
  int cases = 0;
  for (int64_t units : {0, 1, 2, 7, 100}) {
    for (int kind = 0; kind < 4; ++kind) {
      ThreadScheduler threads;
      LateScheduler late;
      Workers inline_workers([](Workers::Task task) { task(); }, 3);
      const Workers workers = kind == 0   ? threads.Make(4)
                              : kind == 1 ? late.Make(3)
                              : kind == 2 ? DroppingWorkers(5)
                                          : inline_workers;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(units));
      std::atomic<int64_t> bad_worker{0};
      ParallelFor(workers, units, [&](int64_t u, int64_t w) {
        hits[u].fetch_add(1);
        if (w < 0 || w >= workers.threads()) bad_worker.fetch_add(1);
      });
      bool once = true;
      for (auto& h : hits) once &= h.load() == 1;
      CHECK(once && bad_worker.load() == 0, "ParallelFor kind %d units %" PRId64, kind, units);
      late.RunAll();  // after the call: they must find nothing to do
      for (auto& h : hits) once &= h.load() == 1;
      CHECK(once, "ParallelFor kind %d units %" PRId64 ": a late task ran a unit", kind, units);
      ++cases;
    }
  }
  {  // a helper that has not started is claimed by the call and never runs
    LateScheduler late;
    int runs = 0;
    {
      Helper helper(late.Make(2), [&runs] { ++runs; });
      CHECK(!helper.Started(), "a helper never scheduled reports a start");
    }
    CHECK(late.RunAll() == 1 && runs == 0, "a cancelled helper ran");
    ThreadScheduler threads;
    std::atomic<int> ran{0};
    {
      Helper helper(threads.Make(2), [&ran] { ran.fetch_add(1); });
      CHECK(helper.AwaitStart(5000000), "a thread-per-task helper did not start in 5 s");
    }
    CHECK(ran.load() == 1, "a started helper did not run once");
    ++cases;
  }
  std::printf("workers: %d cases\n", cases);
}

// ------------------------------------------------------------------ sparse rows
template <typename T>
void EllReference(const T* v, const int32_t* idx, int64_t k, const T* x, T* z, int64_t i0,
                  int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    long double acc = 0;
    for (int64_t j = 0; j < k; ++j) acc += static_cast<long double>(v[i * k + j]) * x[idx[i * k + j]];
    z[i - i0] = static_cast<T>(acc);
  }
}

template <typename T>
std::vector<std::pair<const char*, EllRowsFn<T>>> EllVariants() {
  std::vector<std::pair<const char*, EllRowsFn<T>>> out = {
      {"scalar", static_cast<EllRowsFn<T>>(EllRowsScalar<T>)},
      {"dispatch", static_cast<EllRowsFn<T>>(EllRows<T>)}};
  for (Isa isa : VectorIsas()) out.push_back({IsaName(isa), EllRowsOf<T>(isa)});
  return out;
}

template <typename T>
void TestEllRows(const char* type) {
  std::mt19937_64 rng(1234);
  std::normal_distribution<double> normal;
  const T tol = sizeof(T) == 8 ? T(1e-12) : T(2e-5);
  int cases = 0;
  for (const auto& [name, fn] : EllVariants<T>()) {
    for (int64_t n : {1, 3, 7, 33, 130}) {
      for (int64_t k : {1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 41}) {
        std::vector<T> v(n * k), x(n), z(n + 1), ref(n);
        std::vector<int32_t> idx(n * k);
        for (auto& e : v) e = static_cast<T>(normal(rng));
        for (auto& e : x) e = static_cast<T>(normal(rng));
        for (auto& e : idx) e = static_cast<int32_t>(rng() % n);
        const T guard = T(12345);
        z[n] = guard;
        // a row range starting past 0, and the empty range
        const int64_t i0 = n > 2 ? 1 : 0;
        fn(v.data(), idx.data(), k, x.data(), z.data(), i0, n);
        fn(v.data(), idx.data(), k, x.data(), z.data(), n, n);  // zero rows: writes nothing
        EllReference(v.data(), idx.data(), k, x.data(), ref.data(), i0, n);
        for (int64_t i = 0; i < n - i0; ++i) {
          T scale = 0;
          for (int64_t j = 0; j < k; ++j) scale += std::abs(v[(i + i0) * k + j] * x[idx[(i + i0) * k + j]]);
          CHECK(std::abs(z[i] - ref[i]) <= tol * (scale + 1), "%s %s n=%" PRId64 " k=%" PRId64
                " row %" PRId64 ": %g vs %g", type, name, n, k, i, double(z[i]), double(ref[i]));
        }
        CHECK(z[n] == guard, "%s %s wrote past its rows", type, name);
        // a row's sum does not depend on the range it is computed in (the
        // threads of a run split the rows anywhere): one row at a time
        // gives the same bits
        for (int64_t i = i0; i < n; ++i) {
          T one;
          fn(v.data(), idx.data(), k, x.data(), &one, i, i + 1);
          CHECK(std::memcmp(&one, &z[i - i0], sizeof(T)) == 0,
                "%s %s n=%" PRId64 " k=%" PRId64 " row %" PRId64 ": alone %g, in a range %g",
                type, name, n, k, i, double(one), double(z[i - i0]));
        }
        // NaN and inf in x reach exactly the rows that read them
        x[idx[0]] = std::numeric_limits<T>::quiet_NaN();
        fn(v.data(), idx.data(), k, x.data(), z.data(), 0, n);
        CHECK(std::isnan(z[0]), "%s %s: NaN input did not propagate", type, name);
        x[idx[0]] = std::numeric_limits<T>::infinity();
        fn(v.data(), idx.data(), k, x.data(), z.data(), 0, n);
        CHECK(!std::isfinite(z[0]), "%s %s: inf input gave a finite sum", type, name);
        ++cases;
      }
    }
  }
  std::printf("sparse rows %-6s %d cases\n", type, cases);
}

// The interleaved rows of the multi-step kernels: the same checks, on the
// second chunk of a two-chunk copy (its offsets), for ranges that start and
// end inside a group of four; every row is one FMA chain in entry order, so
// it equals a scalar std::fma loop bit for bit, alone or in any range.
template <typename T>
void TestEllInterleaved(const char* type) {
#ifdef ORC_X86_DISPATCH
  if (!CpuRuns(Isa::kAvx2)) {
    std::printf("interleaved rows %-6s skipped (no AVX2 + FMA)\n", type);
    return;
  }
  std::mt19937_64 rng(99);
  std::normal_distribution<double> normal;
  const T tol = sizeof(T) == 8 ? T(1e-12) : T(2e-5);
  int cases = 0;
  for (int64_t n : {1, 3, 4, 5, 7, 33, 130}) {
    for (int64_t k : {1, 2, 3, 4, 5, 8, 10, 15, 16, 17, 40, 41}) {
      std::vector<T> v(2 * n * k), x(n), z(n + 1), ref(n);
      std::vector<int32_t> idx(2 * n * k);
      for (auto& e : v) e = static_cast<T>(normal(rng));
      for (auto& e : x) e = static_cast<T>(normal(rng));
      for (auto& e : idx) e = static_cast<int32_t>(rng() % n);
      const Interleaved<T> il(v.data(), idx.data(), 2, n, k);
      const T* v1 = v.data() + n * k;  // chunk 1
      const int32_t* i1 = idx.data() + n * k;
      if (n < 4) {  // no whole group: no copy (CallRows runs the row loops)
        CHECK(il.ValuesOf(1) == nullptr, "%s n=%" PRId64 ": a copy without a group", type, n);
        continue;
      }
      auto rows = [&](T* out, int64_t a, int64_t b) {
        EllRowsInterleaved<T>(v1, i1, il.ValuesOf(1), il.ColumnsOf(1), k, x.data(), out, a, b);
      };
      const T guard = T(12345);
      for (int64_t i0 : {int64_t{0}, std::min<int64_t>(1, n), std::min<int64_t>(2, n)}) {
        for (int64_t end : {n, std::max(i0, n - 1)}) {
          z[end - i0] = guard;
          rows(z.data(), i0, end);
          EllReference(v1, i1, k, x.data(), ref.data(), i0, end);
          for (int64_t i = 0; i < end - i0; ++i) {
            T scale = 0;
            for (int64_t j = 0; j < k; ++j) scale += std::abs(v1[(i + i0) * k + j] * x[i1[(i + i0) * k + j]]);
            CHECK(std::abs(z[i] - ref[i]) <= tol * (scale + 1),
                  "%s interleaved n=%" PRId64 " k=%" PRId64 " row %" PRId64 ": %g vs %g", type,
                  n, k, i + i0, double(z[i]), double(ref[i]));
            T chain = 0;
            for (int64_t j = 0; j < k; ++j) chain = std::fma(v1[(i + i0) * k + j], x[i1[(i + i0) * k + j]], chain);
            T one;
            rows(&one, i + i0, i + i0 + 1);
            CHECK(std::memcmp(&one, &z[i], sizeof(T)) == 0 && std::memcmp(&chain, &z[i], sizeof(T)) == 0,
                  "%s interleaved n=%" PRId64 " k=%" PRId64 " row %" PRId64
                  ": in a range %a, alone %a, fma chain %a", type, n, k, i + i0, double(z[i]),
                  double(one), double(chain));
          }
          CHECK(z[end - i0] == guard, "%s interleaved wrote past its rows", type);
          ++cases;
        }
      }
      z[0] = guard;
      rows(z.data(), n, n);  // zero rows: writes nothing
      CHECK(z[0] == guard, "%s interleaved: an empty range wrote", type);
      // NaN and inf reach exactly the rows that read them, in a group and alone
      for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity()}) {
        const int64_t row = n - 1, col = i1[row * k];
        const T saved = x[col];
        x[col] = bad;
        rows(z.data(), 0, n);
        CHECK(!std::isfinite(z[row]), "%s interleaved: %g in x gave a finite row", type, double(bad));
        for (int64_t i = 0; i < n; ++i) {
          bool reads = false;
          for (int64_t j = 0; j < k; ++j) reads |= i1[i * k + j] == col;
          CHECK(reads || std::isfinite(z[i]), "%s interleaved: row %" PRId64 " does not read %g but is not finite",
                type, i, double(bad));
        }
        x[col] = saved;
      }
    }
  }
  std::printf("interleaved rows %-6s %d cases\n", type, cases);
#else
  std::printf("interleaved rows %-6s not in this build (no x86 SIMD targets)\n", type);
#endif
}

// ------------------------------------------------------------------------ tanh
int64_t OrderedBits(double x) {
  int64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b < 0 ? std::numeric_limits<int64_t>::min() - b : b;
}

double UlpDistance(double a, double b) {
  return std::abs(static_cast<double>(OrderedBits(a) - OrderedBits(b)));
}

std::vector<std::pair<const char*, TanhFn>> TanhVariants() {
  std::vector<std::pair<const char*, TanhFn>> out = {{"baseline", TanhBaseline}};
  for (Isa isa : VectorIsas()) out.push_back({IsaName(isa), TanhOf(isa)});
  return out;
}

void TestTanh() {
  // every binade of float64 from 2^-1074 (denormal) to 2^9, 4096 points in
  // each, both signs; plus a dense grid over [-21, 21]
  std::vector<double> xs;
  std::mt19937_64 rng(99);
  for (int e = -1074; e <= 9; ++e) {
    for (int i = 0; i < 4096; ++i) {
      const double m = 1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52);
      const double x = std::ldexp(m, e);
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  for (int i = -2100000; i <= 2100000; ++i) xs.push_back(i * 1e-5);
  std::printf("tanh: %zu values; max error against std::tanh in ulp\n", xs.size());
  std::printf("  %-9s %10s %10s %10s %10s\n", "variant", "|x|<1e-8", "<0.5", "<5", "all");
  for (const auto& [name, fn] : TanhVariants()) {
    std::vector<double> z = xs;
    fn(z.data(), static_cast<int64_t>(z.size()));
    double worst[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < xs.size(); ++i) {
      const double ulp = UlpDistance(z[i], std::tanh(xs[i]));
      const double ax = std::abs(xs[i]);
      const int band = ax < 1e-8 ? 0 : ax < 0.5 ? 1 : ax < 5 ? 2 : 3;
      for (int b = band; b < 4; ++b) worst[b] = std::max(worst[b], ulp);
      worst[3] = std::max(worst[3], ulp);
    }
    std::printf("  %-9s %10.0f %10.0f %10.0f %10.0f\n", name, worst[0], worst[1], worst[2],
                worst[3]);
    CHECK(worst[3] <= 4, "tanh %s: %g ulp", name, worst[3]);
    double special[] = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity(),
                        std::numeric_limits<double>::quiet_NaN(), 1e308, -1e308};
    fn(special, 7);
    CHECK(special[0] == 0 && !std::signbit(special[0]), "tanh(+0) = %g", special[0]);
    CHECK(special[1] == 0 && std::signbit(special[1]), "tanh(-0) = %g", special[1]);
    CHECK(special[2] == 1 && special[3] == -1, "tanh(+-inf) = %g %g", special[2], special[3]);
    CHECK(std::isnan(special[4]), "tanh(NaN) = %g, not NaN", special[4]);
    CHECK(special[5] == 1 && special[6] == -1, "tanh(+-1e308) = %g %g", special[5], special[6]);
  }
}

// ------------------------------------------------------------ ridge statistics
// Fortran-ABI reference BLAS (column-major), enough for AddRows' calls.
void RefDsyrk(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
              const double* a, const int* lda, const double* beta, double* c, const int* ldc) {
  // lower triangle of C = alpha A A^T + beta C, A n x k (trans 'N')
  (void)uplo;
  (void)trans;
  for (int j = 0; j < *n; ++j)
    for (int i = j; i < *n; ++i) {
      double acc = 0;
      for (int p = 0; p < *k; ++p) acc += a[i + p * *lda] * a[j + p * *lda];
      c[i + j * *ldc] = *alpha * acc + *beta * c[i + j * *ldc];
    }
}

void RefDgemm(const char* ta, const char* tb, const int* m, const int* n, const int* k,
              const double* alpha, const double* a, const int* lda, const double* b,
              const int* ldb, const double* beta, double* c, const int* ldc) {
  // C = alpha A B^T + beta C with A m x k ('N') and B n x k ('T')
  (void)ta;
  (void)tb;
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) {
      double acc = 0;
      for (int p = 0; p < *k; ++p) acc += a[i + p * *lda] * b[j + p * *ldb];
      c[i + j * *ldc] = *alpha * acc + *beta * c[i + j * *ldc];
    }
}

void TestStats() {
  const Blas<double> blas{RefDsyrk, RefDgemm};
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  int cases = 0;
  for (int64_t chunks : {1, 2}) {
    for (int64_t f : {1, 5, 64, 97}) {
      for (int64_t rows : {0, 1, 13, 700}) {
        const int64_t o = 3;
        std::vector<double> X(rows * chunks * f), Y(rows * chunks * o);
        for (auto& e : X) e = normal(rng);
        for (auto& e : Y) e = normal(rng);
        std::vector<double> G(chunks * f * f, 0.0), C(chunks * f * o, 0.0);
        AddAllRows(blas, Workers(), G.data(), C.data(), X.data(), Y.data(), chunks, f, o, 0,
                   rows);
        for (int64_t threads : {2, 3, 4}) {  // same bits on any number of threads
          ThreadScheduler sched;
          LateScheduler late;
          for (const Workers& workers : {sched.Make(threads), late.Make(threads)}) {
            std::vector<double> G2(chunks * f * f, 0.0), C2(chunks * f * o, 0.0);
            AddAllRows(blas, workers, G2.data(), C2.data(), X.data(), Y.data(), chunks, f, o, 0,
                       rows);
            late.RunAll();
            CHECK(std::memcmp(G.data(), G2.data(), G.size() * sizeof(double)) == 0 &&
                      std::memcmp(C.data(), C2.data(), C.size() * sizeof(double)) == 0,
                  "stats f=%" PRId64 " rows=%" PRId64 ": %" PRId64 " threads differ from one",
                  f, rows, threads);
          }
        }
        for (int64_t c = 0; c < chunks; ++c)
          for (int64_t i = 0; i < f; ++i) {
            for (int64_t l = i; l < f; ++l) {  // upper triangle of row-major G
              double ref = 0, scale = 0;
              for (int64_t t = 0; t < rows; ++t) {
                const double p = X[(t * chunks + c) * f + i] * X[(t * chunks + c) * f + l];
                ref += p;
                scale += std::abs(p);
              }
              const double got = G[c * f * f + i * f + l];
              CHECK(std::abs(got - ref) <= 1e-12 * (scale + 1), "Gram c=%" PRId64 " (%" PRId64
                    ",%" PRId64 ") f=%" PRId64 " rows=%" PRId64 ": %g vs %g", c, i, l, f, rows,
                    got, ref);
            }
            for (int64_t j = 0; j < o; ++j) {
              double ref = 0;
              for (int64_t t = 0; t < rows; ++t)
                ref += X[(t * chunks + c) * f + i] * Y[(t * chunks + c) * o + j];
              const double got = C[c * f * o + i * o + j];
              CHECK(std::abs(got - ref) <= 1e-10 * (1 + std::abs(ref)),
                    "cross c=%" PRId64 " (%" PRId64 ",%" PRId64 "): %g vs %g", c, i, j, got, ref);
            }
          }
        ++cases;
      }
    }
  }
  std::printf("ridge statistics: %d cases (1-4 threads, bit-identical)\n", cases);
}

// ------------------------------------------------------------------ Gram kernel
template <typename T>
struct GramVariant {
  const char* name;
  GramRowsFn<T> gram;
  CrossRowsFn<T> cross;
  bool fma;
};

template <typename T>
std::vector<GramVariant<T>> GramVariants() {
  const GramKernels<T> base = GramKernelsOf<T>(Isa::kBase);
  std::vector<GramVariant<T>> out = {{"baseline", base.gram, base.cross, false}};
  for (Isa isa : VectorIsas()) {
    const GramKernels<T> k = GramKernelsOf<T>(isa);
    out.push_back({IsaName(isa), k.gram, k.cross, true});
  }
  return out;
}

// Every variant of the Gram and cross-product kernels, float and double,
// against a long-double reference: odd sizes around the 6 x 2W tiles, rows
// across the 256-step blocks (and none), row ranges [j0, j1) as the threads
// split them; nothing written outside the upper triangle of those rows; the
// two halves of a split equal the whole bit for bit, and so do all FMA
// variants (each element is summed in the same order whatever the width);
// a NaN or inf in one feature reaches exactly that feature's row and column.
template <typename T>
void TestGram(const char* type) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const T eps = std::numeric_limits<T>::epsilon();
  int cases = 0;
  const auto variants = GramVariants<T>();
  for (int64_t f : {1, 5, 17, 64, 97, 130}) {
    for (int64_t rows : {0, 1, 13, 300, 700}) {
      const int64_t lda = f + 3, o = 3, ldb = o + 1;  // strided rows, as in chunked data
      std::vector<T> A(std::max<int64_t>(rows, 1) * lda), B(std::max<int64_t>(rows, 1) * ldb);
      for (auto& e : A) e = static_cast<T>(normal(rng));
      for (auto& e : B) e = static_cast<T>(normal(rng));
      const int64_t split = SplitForShare(f, 0.5);
      std::vector<T> first_fma_g, first_fma_c;
      for (const auto& v : variants) {
        for (int pass = 0; pass < 2; ++pass) {  // 0: [0, f) at once, 1: split in two
          std::vector<T> G(f * f, T(-7)), C(f * o, T(-7));  // sentinels below the triangle
          for (int64_t i = 0; i < f; ++i)
            for (int64_t l = i; l < f; ++l) G[i * f + l] = 0;
          std::fill(C.begin(), C.end(), T(0));
          GramWork work;
          if (pass == 0) {
            v.gram(G.data(), f, A.data(), lda, f, rows, 0, f, false, work);
            v.cross(C.data(), A.data(), lda, B.data(), ldb, o, rows, 0, f, work);
          } else {
            GramWork other;
            v.gram(G.data(), f, A.data(), lda, f, rows, split, f, false, other);
            v.gram(G.data(), f, A.data(), lda, f, rows, 0, split, false, work);
            v.cross(C.data(), A.data(), lda, B.data(), ldb, o, rows, split, f, other);
            v.cross(C.data(), A.data(), lda, B.data(), ldb, o, rows, 0, split, work);
          }
          for (int64_t i = 0; i < f; ++i) {
            for (int64_t l = 0; l < i; ++l)
              CHECK(G[i * f + l] == T(-7), "%s %s gram f=%" PRId64 ": wrote below the diagonal",
                    type, v.name, f);
            for (int64_t l = i; l < f; ++l) {
              long double ref = 0, scale = 0;
              for (int64_t t = 0; t < rows; ++t) {
                const long double p = static_cast<long double>(A[t * lda + i]) * A[t * lda + l];
                ref += p;
                scale += std::fabs(p);
              }
              CHECK(std::fabs(G[i * f + l] - ref) <= (rows + 2) * eps * scale + eps,
                    "%s %s gram f=%" PRId64 " rows=%" PRId64 " (%" PRId64 ",%" PRId64 ")", type,
                    v.name, f, rows, i, l);
            }
            for (int64_t q = 0; q < o; ++q) {
              long double ref = 0, scale = 0;
              for (int64_t t = 0; t < rows; ++t) {
                const long double p = static_cast<long double>(A[t * lda + i]) * B[t * ldb + q];
                ref += p;
                scale += std::fabs(p);
              }
              CHECK(std::fabs(C[i * o + q] - ref) <= (rows + 2) * eps * scale + eps,
                    "%s %s cross f=%" PRId64 " rows=%" PRId64, type, v.name, f, rows);
            }
          }
          if (!v.fma) continue;
          if (first_fma_g.empty()) {
            first_fma_g = G;
            first_fma_c = C;
          } else {
            CHECK(std::memcmp(G.data(), first_fma_g.data(), G.size() * sizeof(T)) == 0 &&
                      std::memcmp(C.data(), first_fma_c.data(), C.size() * sizeof(T)) == 0,
                  "%s %s f=%" PRId64 " rows=%" PRId64 " pass %d: not bit for bit the first FMA "
                  "variant's whole update",
                  type, v.name, f, rows, pass);
          }
        }
      }
      ++cases;
    }
  }
  // NaN and inf: feature 3 of row 5 is NaN, feature 7 of row 9 is +inf
  for (const auto& v : variants) {
    const int64_t f = 97, rows = 300, o = 2;
    std::vector<T> A(rows * f), B(rows * o);
    for (auto& e : A) e = static_cast<T>(normal(rng));
    for (auto& e : B) e = static_cast<T>(normal(rng));
    A[5 * f + 3] = std::numeric_limits<T>::quiet_NaN();
    A[9 * f + 7] = std::numeric_limits<T>::infinity();
    std::vector<T> G(f * f, T(0)), C(f * o, T(0));
    GramWork work;
    v.gram(G.data(), f, A.data(), f, f, rows, 0, f, false, work);
    v.cross(C.data(), A.data(), f, B.data(), o, o, rows, 0, f, work);
    for (int64_t i = 0; i < f; ++i)
      for (int64_t l = i; l < f; ++l) {
        const bool nan = i == 3 || l == 3, inf_row = i == 7 || l == 7;
        const T g = G[i * f + l];
        // inf * inf = +inf on the diagonal; inf times a random sign elsewhere
        if (nan)
          CHECK(std::isnan(g), "%s %s: NaN lost at (%" PRId64 ",%" PRId64 ")", type, v.name, i, l);
        else if (inf_row)
          CHECK(std::isinf(g) || std::isnan(g), "%s %s: inf lost at (%" PRId64 ",%" PRId64 ")",
                type, v.name, i, l);
        else
          CHECK(std::isfinite(g), "%s %s: non-finite at (%" PRId64 ",%" PRId64 ")", type,
                v.name, i, l);
      }
    for (int64_t i = 0; i < f; ++i)
      for (int64_t q = 0; q < o; ++q)
        CHECK((i == 3 ? std::isnan(C[i * o + q]) : i == 7 ? std::isinf(C[i * o + q])
                                                            : std::isfinite(C[i * o + q])),
              "%s %s: cross row %" PRId64, type, v.name, i);
    CHECK(std::isinf(G[7 * f + 7]) && G[7 * f + 7] > 0, "%s %s: inf^2 not +inf", type, v.name);
  }
  std::printf("Gram kernel (%s): %d cases, variants", type, cases);
  for (const auto& v : variants) std::printf(" %s", v.name);
  std::printf(" (picked: %s)\n", GramIsaName());
}


// ------------------------------------------------------------------ Cholesky
// orc's Cholesky factor and solve (the ridge solve) against long-double
// references: U^T U reproduces the matrix and the solve its right-hand side;
// the factor is the same bits alone, on 2-4 threads and when the helpers
// start late or never; the lower triangle (the fallback's copy) is left as
// it was; a matrix that is not positive definite, or holds a NaN, reports a
// bad pivot.
template <typename T>
void TestCholesky(const char* type) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const long double eps = std::numeric_limits<T>::epsilon();
  int cases = 0;
  for (int64_t f : {1, 2, 5, 64, 97, 200, 301}) {
    const int64_t rows = f + 10;
    std::vector<double> X(rows * f);
    for (auto& e : X) e = normal(rng);
    std::vector<long double> M(f * f);
    long double top = 0;
    for (int64_t i = 0; i < f; ++i)
      for (int64_t l = 0; l < f; ++l) {
        long double acc = i == l ? 0.1L : 0.0L;
        for (int64_t t = 0; t < rows; ++t) acc += static_cast<long double>(X[t * f + i]) * X[t * f + l] / rows;
        M[i * f + l] = acc;
        top = std::max(top, std::fabs(acc));
      }
    std::vector<T> a(f * f, T(-7));
    for (int64_t i = 0; i < f; ++i)
      for (int64_t l = i; l < f; ++l) a[i * f + l] = static_cast<T>(M[i * f + l]);
    std::vector<T> u = a;
    std::vector<GramWork> works(4);
    CHECK(CholeskyUpper(u.data(), f, Workers(), works) == 0, "%s cholesky f=%" PRId64 " failed",
          type, f);
    for (int64_t threads : {2, 4}) {
      ThreadScheduler sched;
      LateScheduler late;
      for (const Workers& workers : {sched.Make(threads), late.Make(threads), DroppingWorkers(threads)}) {
        std::vector<T> u2 = a;
        CHECK(CholeskyUpper(u2.data(), f, workers, works) == 0, "%s cholesky failed", type);
        late.RunAll();
        CHECK(std::memcmp(u.data(), u2.data(), u.size() * sizeof(T)) == 0,
              "%s cholesky f=%" PRId64 ": %" PRId64 " threads differ from one", type, f, threads);
      }
    }
    bool lower_kept = true;
    long double worst = 0;
    for (int64_t i = 0; i < f; ++i) {
      for (int64_t l = 0; l < i; ++l) lower_kept &= u[i * f + l] == T(-7);
      for (int64_t l = i; l < f; ++l) {
        long double acc = 0;
        for (int64_t p = 0; p <= i; ++p) acc += static_cast<long double>(u[p * f + i]) * u[p * f + l];
        worst = std::max(worst, std::fabs(acc - M[i * f + l]));
      }
    }
    CHECK(lower_kept, "%s cholesky f=%" PRId64 ": wrote into the lower triangle", type, f);
    CHECK(worst <= 4 * (f + 2) * eps * top, "%s cholesky f=%" PRId64 ": |U^T U - M| = %Lg",
          type, f, worst);
    // the solve, o = 3 right-hand sides at once (row-major f x o): residual
    // of M x = b relative to |M| |x| + |b| per column, and each column the
    // same bits as its solve alone (o = 1)
    const int64_t o = 3;
    std::vector<T> x(f * o), acc(4 * o);
    std::vector<long double> b(f * o);
    for (int64_t i = 0; i < f * o; ++i) x[i] = static_cast<T>(normal(rng));
    for (int64_t i = 0; i < f * o; ++i) b[i] = x[i];
    std::vector<T> part(f * o);  // columns 1..2 alone, in place in the f x o layout
    for (int64_t i = 0; i < f * o; ++i) part[i] = x[i];
    CholeskySolveUpper(u.data(), f, o, o, x.data(), acc.data());
    CholeskySolveUpper(u.data(), f, o, o - 1, part.data() + 1, acc.data());
    bool same_part = true;
    for (int64_t i = 0; i < f; ++i)
      for (int64_t c = 1; c < o; ++c) same_part &= part[i * o + c] == x[i * o + c];
    CHECK(same_part, "%s cholesky solve f=%" PRId64 ": a column range differs", type, f);
    for (int64_t c = 0; c < o; ++c) {
      long double res = 0, scale = 0;
      for (int64_t i = 0; i < f; ++i) {
        long double sum = 0, mag = 0;
        for (int64_t l = 0; l < f; ++l) {
          sum += M[i * f + l] * x[l * o + c];
          mag += std::fabs(M[i * f + l] * x[l * o + c]);
        }
        res = std::max(res, std::fabs(sum - b[i * o + c]));
        scale = std::max(scale, mag + std::fabs(b[i * o + c]));
      }
      CHECK(res <= 64 * (f + 2) * eps * scale,
            "%s cholesky solve f=%" PRId64 " column %" PRId64 ": residual %Lg of %Lg", type, f, c,
            res, scale);
      std::vector<T> alone(f), acc1(4);
      for (int64_t i = 0; i < f; ++i) alone[i] = static_cast<T>(b[i * o + c]);
      CholeskySolveUpper(u.data(), f, int64_t{1}, int64_t{1}, alone.data(), acc1.data());
      bool same = true;
      for (int64_t i = 0; i < f; ++i) same &= alone[i] == x[i * o + c];
      CHECK(same, "%s cholesky solve f=%" PRId64 ": column %" PRId64 " differs from its solve alone",
            type, f, c);
    }
    ++cases;
  }
  {  // indefinite: pivot 4 (index 3) is -1; a NaN reaches a later pivot
    const int64_t f = 97;
    std::vector<T> a(f * f, T(0));
    for (int64_t i = 0; i < f; ++i) a[i * f + i] = T(2);
    a[3 * f + 3] = T(-1);
    std::vector<GramWork> works(1);
    CHECK(CholeskyUpper(a.data(), f, Workers(), works) == 4, "%s: indefinite pivot not found", type);
    for (int64_t i = 0; i < f; ++i)
      for (int64_t l = i; l < f; ++l) a[i * f + l] = i == l ? T(2) : T(0);
    a[2 * f + 50] = std::numeric_limits<T>::quiet_NaN();
    CHECK(CholeskyUpper(a.data(), f, Workers(), works) == 51, "%s: NaN did not stop pivot 51", type);
    ++cases;
  }
  std::printf("Cholesky (%s): %d cases, bit-identical on 1-4 threads\n", type, cases);
}

// ------------------------------------------------------------------ ESN run
// A random reservoir run's operands: values (scale x standard normal) and
// columns (chunks, n, k), a precomputed drive (steps, chunks, n) and a
// start state (chunks, n), all drawn from `seed`.
struct RandomRun {
  std::vector<double> V, P, R0;
  std::vector<int32_t> I;
  Drive<double> drive;

  RandomRun(uint64_t seed, int64_t chunks, int64_t n, int64_t k, int64_t steps, double scale)
      : V(chunks * n * k), P(steps * chunks * n), R0(chunks * n), I(V.size()) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    std::uniform_int_distribution<int32_t> column(0, static_cast<int32_t>(n - 1));
    for (auto& e : V) e = scale * normal(rng);
    for (auto& e : I) e = column(rng);
    for (auto& e : P) e = normal(rng);
    for (auto& e : R0) e = normal(rng);
    drive.p = P.data();
  }
  RandomRun(const RandomRun&) = delete;
  RandomRun& operator=(const RandomRun&) = delete;
};

// The teacher-forced run shares every step between two threads when the
// reservoir is large: the states are the same bits alone, with a helper, and
// with a helper that starts late or never (this thread then runs alone
// after kJoinMicros), and match a long-double reference; with the row loops
// and with the interleaved copy (whose groups of four the threads' split at
// row 150 cuts).
void TestRunEsn() {
  const int64_t n = 300, k = 60, steps = 60;  // ShareSteps(n k, steps, n)
  CHECK(ShareSteps(n * k, steps, n), "esn run: the test's run is not shared");
  const RandomRun run(3, 1, n, k, steps, 0.02);
  const std::vector<double>&V = run.V, &P = run.P, &R0 = run.R0;
  const std::vector<int32_t>& I = run.I;
  const Drive<double>& drive = run.drive;
  const double leak = 0.6;
  int cases = 0;
  double worst = 0;
  const bool interleaved = CpuRuns(Isa::kAvx2);
  for (int layout = 0; layout < (interleaved ? 2 : 1); ++layout) {
    const RunMatrix<double> m(V.data(), I.data(), n, k, 1, layout);
    CHECK(m.il.ValuesOf(0) != nullptr || layout == 0, "esn run: no interleaved copy");
    std::vector<double> Y(steps * n);
    RunEsn<double>(m, steps, drive, R0.data(), Y.data(), leak, Workers());
    ThreadScheduler sched;
    LateScheduler late;
    for (const Workers& workers : {sched.Make(2), sched.Make(8), late.Make(2), DroppingWorkers(2)}) {
      std::vector<double> Y2(steps * n);
      RunEsn<double>(m, steps, drive, R0.data(), Y2.data(), leak, workers);
      late.RunAll();
      CHECK(std::memcmp(Y.data(), Y2.data(), Y.size() * sizeof(double)) == 0,
            "esn run (layout %d): workers case %d differs from one thread", layout, cases);
      ++cases;
    }
    std::vector<long double> x(R0.begin(), R0.end()), y(n);
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        long double acc = P[t * n + i];
        for (int64_t j = 0; j < k; ++j) acc += V[i * k + j] * x[I[i * k + j]];
        y[i] = leak * std::tanh(acc) + (1 - leak) * x[i];
        worst = std::max(worst, static_cast<double>(std::fabs(y[i] - Y[t * n + i])));
      }
      x = y;
    }
  }
  CHECK(worst < 1e-12, "esn run: %g from the reference", worst);
  std::printf("ESN run: %d schedules (%s), bit-identical, %.2g from a long-double reference\n",
              cases, interleaved ? "rows and interleaved" : "rows", worst);
}

// ------------------------------------------------------------------ fit ring
// The fit that keeps only the last state (FitRing: the run's rows pass
// through a ring of kRingBlocks blocks that both threads empty) gives the
// statistics of the whole history added block by block and panel by panel
// in order, and its last state, bit for bit: on one thread, with a helper,
// with one that starts after the call and with one that never starts; with
// the statistics' rows starting before, inside and after the ring's first
// lap, and rows run after them.
void TestFitRing() {
  const int64_t chunks = 2, n = 160, k = 10, o = 3, steps = 2700;
  const RandomRun run(5, chunks, n, k, steps, 0.05);
  std::mt19937_64 rng(6);
  std::normal_distribution<double> normal;
  std::vector<double> Yt(steps * chunks * o);
  for (auto& e : Yt) e = normal(rng);
  const double leak = 0.7;
  const Drive<double>& drive = run.drive;
  const double* R0 = run.R0.data();
  const RunMatrix<double> m(run.V.data(), run.I.data(), n, k, chunks);
  const Blas<double> blas{RefDsyrk, RefDgemm};
  std::vector<double> X(steps * chunks * n);
  RunEsn<double>(m, steps, drive, R0, X.data(), leak, Workers());
  const int64_t f = n, split = SplitForShare(f, 0.5), block = kFitBlockOwn;
  CHECK(f >= kGramMinFeatures && (2400.0 * f * f * chunks) >= kOverlapWork,
        "fit ring: the test's fit does not overlap");
  int cases = 0;
  for (auto [start, stop] : {std::pair<int64_t, int64_t>{100, 2500}, {2200, 2700}, {0, 1}}) {
    std::vector<double> G(chunks * f * f, 0.0), C(chunks * f * o, 0.0);
    GramWork work;
    for (int64_t a = start; a < stop; a += block) {
      const int64_t b = std::min(stop, a + block);
      AddRows(blas, true, G.data(), C.data(), X.data(), Yt.data(), chunks, f, o, a, b, 0, split,
              work);
      AddRows(blas, true, G.data(), C.data(), X.data(), Yt.data(), chunks, f, o, a, b, split, f,
              work);
    }
    ThreadScheduler sched;
    LateScheduler late;
    for (const Workers& workers :
         {Workers(), sched.Make(2), sched.Make(4), late.Make(2), DroppingWorkers(2)}) {
      std::vector<double> G2(G.size(), 0.0), C2(C.size(), 0.0), last(chunks * n);
      FitRing<double>(blas, workers, m, drive, R0, leak, steps, G2.data(), C2.data(),
                      Yt.data(), o, start, stop, last.data());
      late.RunAll();
      CHECK(std::memcmp(G.data(), G2.data(), G.size() * sizeof(double)) == 0 &&
                std::memcmp(C.data(), C2.data(), C.size() * sizeof(double)) == 0,
            "fit ring [%" PRId64 ", %" PRId64 "): case %d's statistics differ", start, stop,
            cases);
      CHECK(std::memcmp(last.data(), X.data() + (steps - 1) * chunks * n,
                        last.size() * sizeof(double)) == 0,
            "fit ring [%" PRId64 ", %" PRId64 "): case %d's last state differs", start, stop,
            cases);
      ++cases;
    }
  }
  std::printf("fit ring: %d schedules, the history's statistics and last state, bit-identical\n",
              cases);
}

// ------------------------------------------------------------------ variants
// The choice from measured times (made-up tables: the logic, not this
// machine), and the spec parser of calibration.txt / ORC_NATIVE_VARIANTS.
void TestVariantChoice() {
  int cases = 0;
  // fastest, with a 3% margin before a wider candidate is taken
  CHECK(ChooseFastest({10.0, 5.0, 6.0}) == 1, "fastest: 5 of 10, 5, 6");
  CHECK(ChooseFastest({10.0, 9.9, 9.8}) == 0, "fastest: within the margin keeps the first");
  CHECK(ChooseFastest({10.0, 12.0, 9.0}) == 2, "fastest: 9 of 10, 12, 9");
  CHECK(ChooseFastest({1.0}) == 0, "fastest: one candidate");
  cases += 4;
  const std::vector<int64_t> ks = {4, 8, 16, 40};
  // gathers lose on short rows, win from 16 on: taken from 16
  auto pick = ChooseEll({{1, 2, 4, 10}, {2, 3, 3, 6}}, ks);
  CHECK(pick.first == 1 && pick.second == 16, "ell: from 16 (got %zu:%" PRId64 ")", pick.first,
        pick.second);
  // a vector loop slower than the scalar one at long rows (the AMD EPYC
  // gathers of the issue): scalar
  pick = ChooseEll({{1, 2, 4, 10}, {0.5, 1, 3, 12}}, ks);
  CHECK(pick.first == 0, "ell: gathers that lose on long rows must not be taken");
  // two candidates: the faster at the longest rows, each from its own length
  pick = ChooseEll({{1, 2, 4, 10}, {0.5, 1, 2, 7}, {2, 3, 3, 5}}, ks);
  CHECK(pick.first == 2 && pick.second == 16, "ell: avx512 from 16 (got %zu:%" PRId64 ")",
        pick.first, pick.second);
  // two candidates within the margin at the longest rows: the wider
  pick = ChooseEll({{1, 2, 4, 10}, {0.5, 1, 2, 5.0}, {2, 3, 3, 5.1}}, ks);
  CHECK(pick.first == 2, "ell: a wider candidate within the margin is taken");
  // winning everywhere: from the shortest length
  pick = ChooseEll({{1, 2, 4, 10}, {0.5, 1, 2, 5}}, ks);
  CHECK(pick.first == 1 && pick.second == 4, "ell: from 4");
  // a win that is not kept at every longer length starts after the loss
  pick = ChooseEll({{1, 2, 4, 10}, {0.5, 2.5, 2, 5}}, ks);
  CHECK(pick.first == 1 && pick.second == 16, "ell: a loss at 8 moves the start to 16");
  cases += 5;
  // the spec parser (nothing is set when anything is wrong)
  const Variants saved = g_variants;
  CHECK(orc_native::SetVariants("ell_f64=scalar, tanh=baseline # comment\ngram=baseline").empty(),
        "a valid spec was refused");
  CHECK(g_variants.ell[1] == Isa::kBase && g_variants.tanh == Isa::kBase &&
            g_variants.gram == Isa::kBase, "a valid spec was not applied");
  g_variants = saved;
  if (CpuRuns(Isa::kAvx2)) {
    CHECK(orc_native::SetVariants("run_f32=interleaved:4 run_f64=rows").empty(),
          "a valid run spec was refused");
    CHECK(g_variants.run[0] == Isa::kAvx2 && g_variants.run_min_k[0] == 4 &&
              g_variants.run[1] == Isa::kBase, "a valid run spec was not applied");
    g_variants = saved;
    ++cases;
  }
  for (const char* bad : {"ell_f64", "ell_f64=gather", "ell_f64=avx2", "ell_f64=avx2:x",
                          "tanh=avx1024", "colour=blue", "gram=scalar", "run_f32=interleaved",
                          "run_f32=rows:4", "run_f32=gather:4", "run_f64=interleaved:x",
                          "run_f64=avx2:4"}) {
    const Variants before = g_variants;
    const std::string error = orc_native::SetVariants(std::string("tanh=baseline ") + bad);
    CHECK(!error.empty(), "spec '%s' was accepted", bad);
    CHECK(g_variants.tanh == before.tanh, "spec '%s' set tanh although it failed", bad);
    ++cases;
  }
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (CpuRuns(isa)) continue;
    CHECK(!orc_native::SetVariants(std::string("gram=") + IsaName(isa)).empty(),
          "%s accepted by a CPU or build without it", IsaName(isa));
  }
  g_variants = saved;
  std::printf("variant choice: %d cases\n", cases + 4);
}

}  // namespace

int main() {
  TestVariantChoice();  // first: the kernels below fix the variants
  TestWorkers();
  TestEllRows<double>("double");
  TestEllRows<float>("float");
  TestEllInterleaved<double>("double");
  TestEllInterleaved<float>("float");
  TestTanh();
  TestGram<double>("double");
  TestGram<float>("float");
  TestStats();
  TestCholesky<double>("double");
  TestCholesky<float>("float");
  TestRunEsn();
  TestFitRing();
  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("all native kernel tests passed\n");
  return 0;
}
