// The ELL row loops every product of the reservoir matrix runs: the
// portable loop, the dispatch to the vector variants (rows.cc) picked for
// this process, and the interleaved copy of the multi-step kernels (ESN
// runs, fits, forecasts) with the loop that reads it.
#ifndef ORC_ROWS_H_
#define ORC_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "isa.h"

// Row dot products of an ELL matrix: z[i - i0] = sum_j v[i][j] x[idx[i][j]]
// for rows [i0, i1). Shared by the product and the ESN run. On x86-64 CPUs
// with AVX-512 the gathers run as vector gathers, picked once at load time,
// for rows long enough to gain (see PickEllRows): 8 entries of a row per
// instruction instead of three scalar loads each. The
// order of the additions differs between the variants (vector lanes, then a
// tree), so results agree to rounding, not bit for bit, across CPUs.
namespace orc_native {

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
// The vector loops (rows.cc): AVX-512 gathers, and AVX2 + FMA with the
// x[column] loaded lane by lane.
// ORC_ELL_ROWS writes their signature once, for the declarations here and
// the definitions there; a declaration carries its definition's target (GCC
// takes a function declared with other targets for another version of it).
#define ORC_ELL_ROWS(TARGET, NAME, T)                                  \
  __attribute__((target(TARGET))) void NAME(                           \
      const T* __restrict v, const int32_t* __restrict idx, int64_t k, \
      const T* __restrict x, T* __restrict z, int64_t i0, int64_t i1)
ORC_ELL_ROWS("avx512f,avx512vl", EllRowsAvx512, double);
ORC_ELL_ROWS("avx512f,avx512vl", EllRowsAvx512, float);
ORC_ELL_ROWS("avx2,fma", EllRowsAvx2, double);
ORC_ELL_ROWS("avx2,fma", EllRowsAvx2, float);
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
// z[i - i0] for rows [i0, i1) of a chunk: v/idx its rows, iv/icol its
// interleaved copy (rows.cc, for float and double; AVX2 + FMA).
template <typename T>
__attribute__((target("avx2,fma"))) void EllRowsInterleaved(
    const T* __restrict v, const int32_t* __restrict idx, const T* __restrict iv,
    const int32_t* __restrict icol, int64_t k, const T* __restrict x, T* __restrict z,
    int64_t i0, int64_t i1);
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

}  // namespace orc_native

#endif  // ORC_ROWS_H_
