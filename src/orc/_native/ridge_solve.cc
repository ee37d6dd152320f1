// Ridge solve (G + beta I) w = B in G's own buffer.
//
// g is (..., F, F) row-major with only its upper triangle meaningful (what
// the Gram update maintains); b is (..., F, O), beta has 1 or `batch`
// elements. The upper triangle is first copied into the lower one (kept for
// the fallback), the diagonal gets + beta, and orc's Cholesky factorisation
// (CholeskyUpper, cholesky.h: deterministic, on XLA's threads) factors the upper
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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "bind.h"
#include "checks.h"
#include "cholesky.h"

namespace orc_native {
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
  CopyUnlessAliased(G, g.typed_data(), batch * f * f);
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
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcRidgeSolveF32, orc_native::RidgeSolve<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcRidgeSolveF64, orc_native::RidgeSolve<ffi::F64>);
