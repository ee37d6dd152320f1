// Sparse matrix-vector product for reservoir matrices in ELL layout, as an XLA
// FFI custom call on CPU.
//
// A matrix with exactly k entries per row is stored as values[n][k] and
// column indices[n][k]; y[i] = sum_j values[i][j] * x[indices[i][j]].
// XLA's generic gather costs ~2 ns per element on CPU; this loop runs at the
// speed of reading the matrix once (it is called once per reservoir step).
//
// Leading (batch) dimensions broadcast like numpy with equal ranks: an extent
// of 1 is repeated (what jax.ffi.ffi_call(..., vmap_method="expand_dims")
// produces for arguments that are not mapped).

#include <atomic>
#include <cstdint>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

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
      for (int64_t i = i0; i < i1; ++i) {
        const T* vr = V + ov + i * k;
        const int32_t* ir = I + oi + i * k;
        T acc0 = 0, acc1 = 0;
        int64_t j = 0;
        for (; j + 1 < k; j += 2) {
          acc0 += vr[j] * xb[ir[j]];
          acc1 += vr[j + 1] * xb[ir[j + 1]];
        }
        if (j < k) acc0 += vr[j] * xb[ir[j]];
        Y[b * n + i] = acc0 + acc1;
      }
    }
  };
  const int64_t total = by * n;
  // Large products are split in two: one half on a thread of XLA's intra-op
  // pool, the other here (res_dim 4000: 240 -> 92 us per product). Below
  // ~128k non-zeros the hand-off, and the pool thread left spinning while
  // BLAS wants both cores for the Gram, cost more than the split saves.
  if (total * k >= kParallelNonzeros && pool.num_threads() > 1) {
    const int64_t mid = total / 2;
    std::atomic<bool> done{false};
    pool.Schedule([&rows, &done, mid, total]() {
      rows(mid, total);
      done.store(true, std::memory_order_release);
    });
    rows(0, mid);
    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
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
// Gram update g += x^T x by BLAS syrk, in place, without leaving XLA.
//
// g is (..., F, F) and x (..., B, F), row-major. A row-major x is the
// column-major F x B matrix A, so syrk with trans = 'N' gives A A^T = x^T x.
// uplo = 'L' updates the lower triangle of the column-major result, which is
// the upper triangle of row-major g (the library reads only that one). The
// BLAS routine is not linked here: its address (SciPy's Fortran-ABI syrk,
// from scipy.linalg.cython_blas) arrives as the attribute `fn`, so the kernel
// uses the very BLAS numpy/SciPy use, with no copy of x or g.
namespace {

template <typename T>
using SyrkFn = void (*)(const char*, const char*, const int*, const int*, const T*,
                        const T*, const int*, const T*, T*, const int*);

template <ffi::DataType DT>
ffi::Error SyrkUpdate(ffi::Buffer<DT> g, ffi::Buffer<DT> x, ffi::ResultBuffer<DT> out,
                      int64_t fn) {
  using T = ffi::NativeType<DT>;
  const auto gd = g.dimensions();
  const auto xd = x.dimensions();
  if (gd.size() < 2 || xd.size() != gd.size() || fn == 0) {
    return ffi::Error::InvalidArgument("orc syrk_update: g must be (..., F, F), x (..., B, F)");
  }
  const size_t lead = gd.size() - 2;
  const int64_t f = gd[lead];
  const int64_t b = xd[lead];
  if (gd[lead + 1] != f || xd[lead + 1] != f) {
    return ffi::Error::InvalidArgument("orc syrk_update: x's last axis must match g");
  }
  int64_t batch = 1;
  for (size_t d = 0; d < lead; ++d) {
    if (gd[d] != xd[d]) {
      return ffi::Error::InvalidArgument("orc syrk_update: batch dimensions differ");
    }
    batch *= gd[d];
  }
  T* C = out->typed_data();
  const T* G = g.typed_data();
  if (C != G) {
    for (int64_t i = 0; i < batch * f * f; ++i) C[i] = G[i];
  }
  if (b == 0 || f == 0) return ffi::Error::Success();
  const SyrkFn<T> syrk = reinterpret_cast<SyrkFn<T>>(fn);
  const char uplo = 'L', trans = 'N';
  const int n = static_cast<int>(f), k = static_cast<int>(b), lda = n, ldc = n;
  const T one = 1;
  const T* X = x.typed_data();
  for (int64_t i = 0; i < batch; ++i) {
    syrk(&uplo, &trans, &n, &k, &one, X + i * b * f, &lda, &one, C + i * f * f, &ldc);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcSyrkUpdateF32, SyrkUpdate<ffi::F32>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("fn"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcSyrkUpdateF64, SyrkUpdate<ffi::F64>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Attr<int64_t>("fn"));
