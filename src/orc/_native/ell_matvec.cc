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
#include <cstdint>

#include "bind.h"
#include "checks.h"
#include "rows.h"
#include "workers.h"

namespace orc_native {
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
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "ell_matvec"));
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
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEllMatvecF32, orc_native::EllMatvec<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEllMatvecF64, orc_native::EllMatvec<ffi::F64>);

