// Ridge statistics update by BLAS, in place, without leaving XLA:
//   g += X^T X (syrk) and c += X^T Y (gemm) over the rows [start, stop) of
//   X = x[start:stop] and Y = y[start:stop].
//
// Chunked (chunked = 1): g (..., C, F, F), c (..., C, F, O), x (..., T, C, F),
// y (..., T, C, O); chunk ci uses column block ci of x and y, read with a row
// stride of C F (C O), so the rows never get copied out (neither of a block
// nor of a whole stored state history). Unchunked: the same without the C
// axes. Row-major x rows are the columns of a column-major F x rows matrix A
// (leading dimension C F), so syrk('L', 'N') on A gives X^T X in the lower
// triangle of the column-major g, which is the upper triangle of row-major g
// (the library reads only that one). Row-major c (F, O) is the column-major
// O x F matrix M, and M += Y^T X is gemm('N', 'T') of the column-major O x rows
// matrix (leading dimension C O) with A. The BLAS routines are not linked
// here: SciPy's Fortran-ABI syrk and gemm (scipy.linalg.cython_blas) are
// set once at import (SetRoutine), so the kernel uses the very BLAS
// numpy/SciPy use.
#include <cstdint>

#include "bind.h"
#include "checks.h"
#include "stats.h"
#include "workers.h"

namespace orc_native {
namespace {

constexpr char kChunked[] = "chunked";  // the attribute: 1 with the C axes, 0 without

template <ffi::DataType DT>
ffi::Error StatsUpdate(ffi::ThreadPool pool, ffi::Buffer<DT> g, ffi::Buffer<DT> c, ffi::Buffer<DT> x,
                       ffi::Buffer<DT> y, ffi::ResultBuffer<DT> g_out,
                       ffi::ResultBuffer<DT> c_out, ffi::Attr<int64_t, kStart> start_attr,
                       ffi::Attr<int64_t, kStop> stop_attr,
                       ffi::Attr<int64_t, kChunked> chunked_attr) {
  using T = ffi::NativeType<DT>;
  const int64_t start = *start_attr, stop = *stop_attr, chunked = *chunked_attr;
  Blas<T> blas;
  if (!LoadBlas(blas)) return NoRoutines("stats_update");
  const auto gd = g.dimensions(), cd = c.dimensions(), xd = x.dimensions(),
             yd = y.dimensions();
  const size_t tail = chunked ? 3 : 2;  // (C,) F, F
  const char* shapes =
      "orc stats_update: g (..., [C,] F, F), c (..., [C,] F, O), x (..., T, [C,] F), "
      "y (..., T, [C,] O) with equal leading dimensions";
  if (gd.size() < tail || cd.size() != gd.size() || xd.size() != gd.size() ||
      yd.size() != gd.size()) {
    return ffi::Error::InvalidArgument(shapes);
  }
  const size_t lead = gd.size() - tail;
  int64_t batch = 1;
  for (size_t d = 0; d < lead; ++d) {
    if (cd[d] != gd[d] || xd[d] != gd[d] || yd[d] != gd[d]) {
      return ffi::Error::InvalidArgument(shapes);
    }
    batch *= gd[d];
  }
  const int64_t chunks = chunked ? gd[lead] : 1;
  const int64_t f = gd[gd.size() - 1], o = cd[cd.size() - 1], rows_total = xd[lead];
  if (gd[gd.size() - 2] != f || cd[cd.size() - 2] != f || xd[xd.size() - 1] != f ||
      yd[yd.size() - 1] != o || yd[lead] != rows_total ||
      (chunked && (cd[lead] != chunks || xd[lead + 1] != chunks || yd[lead + 1] != chunks))) {
    return ffi::Error::InvalidArgument(shapes);
  }
  if (start < 0 || stop < start || stop > rows_total) {
    return ffi::Error::InvalidArgument("orc stats_update: rows [start, stop) out of range");
  }
  T* G = g_out->typed_data();
  T* Cr = c_out->typed_data();
  CopyUnlessAliased(G, g.typed_data(), batch * chunks * f * f);
  CopyUnlessAliased(Cr, c.typed_data(), batch * chunks * f * o);
  if (stop == start || f == 0) return ffi::Error::Success();
  const Workers workers = Workers::Of(pool);
  for (int64_t b = 0; b < batch; ++b) {
    AddAllRows(blas, workers, G + b * chunks * f * f, Cr + b * chunks * f * o,
               x.typed_data() + b * rows_total * chunks * f,
               y.typed_data() + b * rows_total * chunks * o, chunks, f, o, start, stop);
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcStatsUpdateF32, orc_native::StatsUpdate<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcStatsUpdateF64, orc_native::StatsUpdate<ffi::F64>);
