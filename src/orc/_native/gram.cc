// orc's Gram and cross-product kernels (gram.h), written once with the
// compiler's vector extensions and compiled for each vector width.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gram.h"

namespace orc_native {
namespace {

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
// the overlapped fit (esn_fit.cc) must run its Gram on one thread beside the
// reservoir without touching BLAS's process-wide thread count.

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

}  // namespace

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

template GramKernels<float> GramKernelsOf<float>(Isa isa);
template GramKernels<double> GramKernelsOf<double>(Isa isa);

}  // namespace orc_native
