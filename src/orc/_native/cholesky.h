// The ridge solve's Cholesky factorisation and substitutions (ridge_solve.cc),
// on XLA's threads and the Gram kernel, deterministic whatever the threads.
#ifndef ORC_CHOLESKY_H_
#define ORC_CHOLESKY_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gram.h"
#include "workers.h"

namespace orc_native {

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

}  // namespace orc_native

#endif  // ORC_CHOLESKY_H_
