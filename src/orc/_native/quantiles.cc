// Column quantiles (the classifier's "ppv" thresholds):
//   out[j, c] = the q[j]-quantile of column c of x (rows, cols), by linear
//   interpolation between the order statistics at floor and ceil of
//   q[j] (rows - 1), as jnp.quantile(x, q, axis=0) computes it (the same
//   weights; bit for bit where XLA fuses the interpolation into an FMA, as
//   on x86 CPUs with FMA); a column holding a NaN gives NaN, as there. XLA's CPU sort, which jnp.quantile runs, takes ~0.85 s
//   for 10000 x 500 float64 (a compiled comparator called per comparison);
//   std::nth_element on each column is linear.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "bind.h"
#include "checks.h"

namespace orc_native {
namespace {

template <ffi::DataType DT>
ffi::Error ColumnQuantiles(ffi::Buffer<DT> x, ffi::Buffer<DT> q, ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  const auto qd = q.dimensions();
  const auto od = out->dimensions();
  if (xd.size() != 2 || qd.size() != 1 || od.size() != 2 || od[0] != qd[0] || od[1] != xd[1]) {
    return ffi::Error::InvalidArgument(
        "orc column_quantiles: need x (rows, cols), q (m,) and out (m, cols)");
  }
  const int64_t rows = xd[0], cols = xd[1], m = qd[0];
  if (rows < 1) return ffi::Error::InvalidArgument("orc column_quantiles: x has no rows");
  const T* X = x.typed_data();
  const T* Q = q.typed_data();
  T* O = out->typed_data();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T last = static_cast<T>(rows) - T(1);
  // Columns are copied out kBlock at a time, reading x row by row (a column
  // at a time would read every cache line of x once per column).
  constexpr int64_t kBlock = 16;
  std::vector<T> buf(static_cast<size_t>(rows * kBlock));
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t width = std::min(kBlock, cols - c0);
    bool has_nan[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = X + r * cols + c0;
      for (int64_t t = 0; t < width; ++t) {
        has_nan[t] |= std::isnan(row[t]);
        buf[static_cast<size_t>(t * rows + r)] = row[t];
      }
    }
    for (int64_t t = 0; t < width; ++t) {
      const auto first = buf.begin() + t * rows, end = first + rows;
      for (int64_t j = 0; j < m; ++j) {
        T* o = O + j * cols + c0 + t;
        const T pos = Q[j] * last;
        if (has_nan[t] || std::isnan(pos)) {
          *o = nan;
          continue;
        }
        const T low = std::floor(pos), high = std::ceil(pos);
        const T high_weight = pos - low;
        const T low_weight = T(1) - high_weight;
        const int64_t il = static_cast<int64_t>(std::min(std::max(low, T(0)), last));
        const int64_t ih = static_cast<int64_t>(std::min(std::max(high, T(0)), last));
        std::nth_element(first, first + il, end);
        const T low_value = first[il];
        // ih is il or il + 1: the smallest of what nth_element left above il
        const T high_value = ih == il ? low_value : *std::min_element(first + il + 1, end);
        // XLA's CPU code fuses jnp.quantile's low * w_low + high * w_high
        // into fma(low, w_low, high * w_high) on CPUs with FMA: the same
        // rounding here (std::fma is exact everywhere)
        *o = std::fma(low_value, low_weight, high_value * high_weight);
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcColumnQuantilesF32, orc_native::ColumnQuantiles<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcColumnQuantilesF64, orc_native::ColumnQuantiles<ffi::F64>);
