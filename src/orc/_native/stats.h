// The ridge statistics update shared by stats_update.cc and esn_fit.cc:
// g += X^T X and c += X^T Y over rows of X and Y, by BLAS (SciPy's, set at
// import) or by orc's Gram kernel (gram.h), split by Gram rows.
#ifndef ORC_STATS_H_
#define ORC_STATS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "checks.h"
#include "gram.h"
#include "workers.h"

namespace orc_native {

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

// SciPy's syrk and gemm for T (set at import); false when they were not
// registered.
template <typename T>
bool LoadBlas(Blas<T>& blas) {
  blas.syrk = reinterpret_cast<SyrkFn<T>>(RoutineFor<T>(kSsyrk));
  blas.gemm = reinterpret_cast<GemmFn<T>>(RoutineFor<T>(kSgemm));
  return blas.syrk != nullptr && blas.gemm != nullptr;
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

}  // namespace orc_native

#endif  // ORC_STATS_H_
