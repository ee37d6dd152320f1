// C++ tests of orc's native kernels against scalar references (make
// check-native builds them with AddressSanitizer + UndefinedBehaviorSanitizer
// and with ThreadSanitizer; CMake option ORC_NATIVE_TESTS). The kernels'
// internals live in an anonymous namespace, so this file includes the
// translation unit itself.
//
// Covered: the sparse row sums (every SIMD variant this CPU has, float and
// double, odd sizes, rows of 1..41 entries, zero rows, NaN/inf inputs), the
// activation tanh (every variant: maximum ulp error against std::tanh over
// the float64 range, special values), and the ridge statistics update on two
// threads (orc's Gram kernel where the CPU uses it, else the BLAS path) against
// a plain triple loop, repeated for bit-identical results; orc's Gram and
// cross-product kernels (every vector width this CPU runs, float and double)
// against a long-double reference, split as the threads split them.

#include "kernels.cc"

#include <cinttypes>
#include <cstdio>
#include <random>

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

#ifdef ORC_X86_DISPATCH
// What the variant lists below may run on this CPU (every AVX-512 CPU also
// has AVX-512VL and FMA, which the AVX-512 variants are compiled for).
bool HasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool HasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("fma");
}
#endif

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
#ifdef ORC_X86_DISPATCH
  if (HasAvx2Fma())
    out.push_back({"avx2", static_cast<EllRowsFn<T>>(EllRowsAvx2)});
  if (HasAvx512())
    out.push_back({"avx512", static_cast<EllRowsFn<T>>(EllRowsAvx512)});
#endif
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
#ifdef ORC_X86_DISPATCH
  if (HasAvx2Fma())
    out.push_back({"avx2", TanhAvx2});
  if (HasAvx512()) out.push_back({"avx512", TanhAvx512});
#endif
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
        AddAllRows(blas, G.data(), C.data(), X.data(), Y.data(), chunks, f, o, 0, rows);
        std::vector<double> G2(chunks * f * f, 0.0), C2(chunks * f * o, 0.0);
        AddAllRows(blas, G2.data(), C2.data(), X.data(), Y.data(), chunks, f, o, 0, rows);
        CHECK(std::memcmp(G.data(), G2.data(), G.size() * sizeof(double)) == 0 &&
                  std::memcmp(C.data(), C2.data(), C.size() * sizeof(double)) == 0,
              "stats f=%" PRId64 " rows=%" PRId64 ": two runs differ", f, rows);
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
  std::printf("ridge statistics: %d cases (Gram kernel %s, %d threads)\n", cases,
              UsesGramKernel<double>(97) ? "orc's" : "BLAS", ForceThreads());
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
  std::vector<GramVariant<T>> out = {{"baseline", static_cast<GramRowsFn<T>>(GramRowsBase),
                                      static_cast<CrossRowsFn<T>>(CrossRowsBase), false}};
#ifdef ORC_X86_DISPATCH
  if (HasAvx2Fma())
    out.push_back({"avx2", static_cast<GramRowsFn<T>>(GramRowsAvx2),
                   static_cast<CrossRowsFn<T>>(CrossRowsAvx2), true});
  if (HasAvx512())
    out.push_back({"avx512", static_cast<GramRowsFn<T>>(GramRowsAvx512),
                   static_cast<CrossRowsFn<T>>(CrossRowsAvx512), true});
#endif
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
      const int64_t split = GramSplit(f);
      std::vector<T> first_fma_g, first_fma_c;
      for (const auto& v : variants) {
        for (int pass = 0; pass < 2; ++pass) {  // 0: [0, f) at once, 1: split in two
          std::vector<T> G(f * f, T(-7)), C(f * o, T(-7));  // sentinels below the triangle
          for (int64_t i = 0; i < f; ++i)
            for (int64_t l = i; l < f; ++l) G[i * f + l] = 0;
          std::fill(C.begin(), C.end(), T(0));
          GramWork work;
          if (pass == 0) {
            v.gram(G.data(), A.data(), lda, f, rows, 0, f, work);
            v.cross(C.data(), A.data(), lda, B.data(), ldb, o, rows, 0, f, work);
          } else {
            GramWork other;
            v.gram(G.data(), A.data(), lda, f, rows, split, f, other);
            v.gram(G.data(), A.data(), lda, f, rows, 0, split, work);
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
    v.gram(G.data(), A.data(), f, f, rows, 0, f, work);
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

}  // namespace

int main() {
  TestEllRows<double>("double");
  TestEllRows<float>("float");
  TestTanh();
  TestGram<double>("double");
  TestGram<float>("float");
  TestStats();
  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("all native kernel tests passed\n");
  return 0;
}
