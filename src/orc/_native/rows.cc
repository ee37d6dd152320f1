// The vector variants of the ELL row loops (rows.h): per-function x86
// targets, picked at run time (isa.h). A build without them (ORC_NO_CLONES,
// not x86-64) has the portable loop only.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rows.h"

#ifdef ORC_X86_DISPATCH
namespace orc_native {

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

ORC_ELL_ROWS("avx512f,avx512vl", EllRowsAvx512, double) {
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

ORC_ELL_ROWS("avx512f,avx512vl", EllRowsAvx512, float) {
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
// than either (see EllRowsChoice in rows.h).
__attribute__((target("avx2,fma"))) inline __m256d Lanes4(const double* x, const int32_t* ir) {
  uint64_t p0, p1;
  std::memcpy(&p0, ir, 8);
  std::memcpy(&p1, ir + 2, 8);
  return _mm256_set_pd(x[p1 >> 32], x[static_cast<uint32_t>(p1)], x[p0 >> 32],
                       x[static_cast<uint32_t>(p0)]);
}

ORC_ELL_ROWS("avx2,fma", EllRowsAvx2, double) {
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

ORC_ELL_ROWS("avx2,fma", EllRowsAvx2, float) {
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

// The interleaved loop (rows.h): every row one chain of FMAs in entry order.
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

template __attribute__((target("avx2,fma"))) void EllRowsInterleaved<float>(
    const float* __restrict, const int32_t* __restrict, const float* __restrict,
    const int32_t* __restrict, int64_t, const float* __restrict, float* __restrict, int64_t,
    int64_t);
template __attribute__((target("avx2,fma"))) void EllRowsInterleaved<double>(
    const double* __restrict, const int32_t* __restrict, const double* __restrict,
    const int32_t* __restrict, int64_t, const double* __restrict, double* __restrict, int64_t,
    int64_t);

}  // namespace orc_native
#endif  // ORC_X86_DISPATCH
