// The closed-loop forecasts of many columns of one reservoir in one call
// (esn_forecast_batch): the validation forecasts of a tuning trajectory,
// S start states x B readouts (ridge strengths) of one model. The columns
// share the reservoir (values/indices), the input matrix, the bias and the
// leak rate; each has its own state and one of the B readouts.
//
// The state is kept column-minor (element g of every column side by side),
// so that each non-zero of the sparse matrix, each input weight and each
// readout weight is read once per step for all K = B * S columns and the
// inner loops run over contiguous columns (vectorised by the compiler). Per
// column the arithmetic is the one-column kernel's (esn_forecast): the
// sparse dot, then the input term plus the bias, tanh, the leaky update;
// the order of the sums within a dot differs, so the two agree to rounding,
// not bit for bit. Both threads of a step share its rows; each computes the
// (small) readouts of every column, as esn_forecast does. Results do not
// depend on the number of threads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "bind.h"
#include "checks.h"
#include "esn.h"

namespace orc_native {
namespace {

template <typename T>
struct Batch {
  const T* V;
  const int32_t* I;
  const T* Win;   // (C, n, w)
  const T* Wout;  // (B, C, o, n)
  int64_t chunks, n, k, w, o, nb, ns, cols;
  T bias, leak;
};

// y[(c o + j) cols + b ns + s] = wout[b, c, j, :] . x[c, :, b ns + s]
template <typename T>
__attribute__((always_inline)) inline void ReadoutsBody(const Batch<T>& p,
                                                        const T* __restrict x,
                                                        T* __restrict y) {
  const int64_t n = p.n, cols = p.cols, ns = p.ns;
  for (int64_t b = 0; b < p.nb; ++b) {
    for (int64_t c = 0; c < p.chunks; ++c) {
      for (int64_t j = 0; j < p.o; ++j) {
        T* __restrict yr = y + (c * p.o + j) * cols + b * ns;
        const T* __restrict wr = p.Wout + ((b * p.chunks + c) * p.o + j) * n;
        for (int64_t s = 0; s < ns; ++s) yr[s] = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T wv = wr[i];
          const T* __restrict xr = x + (c * n + i) * cols + b * ns;
          for (int64_t s = 0; s < ns; ++s) yr[s] += wv * xr[s];
        }
      }
    }
  }
}

// rows [lo, hi) of the next states of every column; u: the fed-back inputs
// (C w, cols); a, e and z (cols each) are the row's scratch
template <typename T>
__attribute__((always_inline)) inline void RowsBody(const Batch<T>& p, const T* __restrict x,
                                                    const T* __restrict u, T* __restrict next,
                                                    T* __restrict a, T* __restrict e,
                                                    double* __restrict z, int64_t lo,
                                                    int64_t hi) {
  const int64_t n = p.n, k = p.k, w = p.w, cols = p.cols;
  for (int64_t g = lo; g < hi; ++g) {
    const int64_t c = g / n;
    const T* __restrict vr = p.V + g * k;
    const int32_t* __restrict ir = p.I + g * k;
    for (int64_t col = 0; col < cols; ++col) a[col] = 0;
    for (int64_t col = 0; col < cols; ++col) e[col] = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const T v = vr[kk];
      const T* __restrict xs = x + (c * n + ir[kk]) * cols;
      for (int64_t col = 0; col < cols; ++col) a[col] += v * xs[col];
    }
    const T* __restrict wr = p.Win + g * w;
    for (int64_t jj = 0; jj < w; ++jj) {
      const T wv = wr[jj];
      const T* __restrict ur = u + (c * w + jj) * cols;
      for (int64_t col = 0; col < cols; ++col) e[col] += wv * ur[col];
    }
    for (int64_t col = 0; col < cols; ++col) {
      z[col] = static_cast<double>(a[col] + (e[col] + p.bias));
    }
    TanhInPlace(z, cols);
    const T* __restrict xg = x + g * cols;
    T* __restrict ng = next + g * cols;
    for (int64_t col = 0; col < cols; ++col) {
      ng[col] = p.leak * static_cast<T>(z[col]) + (1 - p.leak) * xg[col];
    }
  }
}

// the two loops compiled for the baseline ISA and for AVX2 (the loops over
// columns vectorise 4 doubles wide there), chosen once per process
template <typename T>
struct BatchLoops {
  void (*readouts)(const Batch<T>&, const T*, T*);
  void (*rows)(const Batch<T>&, const T*, const T*, T*, T*, T*, double*, int64_t, int64_t);
};

#define ORC_BATCH_VARIANT(T, SUFFIX, ATTR)                                                   \
  ATTR void Readouts##SUFFIX(const Batch<T>& p, const T* x, T* y) { ReadoutsBody<T>(p, x, y); } \
  ATTR void Rows##SUFFIX(const Batch<T>& p, const T* x, const T* u, T* next, T* a, T* e,    \
                         double* z, int64_t lo, int64_t hi) {                               \
    RowsBody<T>(p, x, u, next, a, e, z, lo, hi);                                            \
  }
ORC_BATCH_VARIANT(float, BaseF, )
ORC_BATCH_VARIANT(double, BaseD, )
#ifdef ORC_X86_DISPATCH
ORC_BATCH_VARIANT(float, Avx2F, __attribute__((target("avx2,fma"))))
ORC_BATCH_VARIANT(double, Avx2D, __attribute__((target("avx2,fma"))))
#endif
#undef ORC_BATCH_VARIANT

template <typename T>
BatchLoops<T> PickBatchLoops() {
  constexpr bool single = sizeof(T) == sizeof(float);
#ifdef ORC_X86_DISPATCH
  if (WidestIsa() != Isa::kBase) {
    if constexpr (single) return {ReadoutsAvx2F, RowsAvx2F};
    else return {ReadoutsAvx2D, RowsAvx2D};
  }
#endif
  if constexpr (single) return {ReadoutsBaseF, RowsBaseF};
  else return {ReadoutsBaseD, RowsBaseD};
}

template <ffi::DataType DT>
ffi::Error EsnForecastBatch(ffi::ThreadPool pool, ffi::Buffer<DT> values,
                            ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win,
                            ffi::Buffer<ffi::S32> window, ffi::Buffer<DT> bias_buf,
                            ffi::Buffer<DT> wout, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                            ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  static const BatchLoops<T> loops = PickBatchLoops<T>();
  const auto vd = values.dimensions(), wd = win.dimensions(), xd = window.dimensions();
  const auto od = wout.dimensions(), rd = r0.dimensions(), yd = out->dimensions();
  if (vd.size() != 3 || !SameDims(indices.dimensions(), vd) || wd.size() != 3 ||
      xd.size() != 2 || od.size() != 4 || rd.size() != 3 || yd.size() != 4 ||
      bias_buf.element_count() != 1 || leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_forecast_batch: values/indices (C, n, k), win (C, n, w), window (C, w), "
        "bias (), wout (B, C, o, n), r0 (S, C, n), leak (); out (B, S, L, C o)");
  }
  const int64_t chunks = vd[0], n = vd[1], k = vd[2], w = wd[2];
  const int64_t nb = od[0], o = od[2], ns = rd[0], steps = yd[2];
  const int64_t width = chunks * n, out_dim = chunks * o, cols = nb * ns;
  if (wd[0] != chunks || wd[1] != n || xd[0] != chunks || xd[1] != w || od[1] != chunks ||
      od[3] != n || rd[1] != chunks || rd[2] != n || yd[0] != nb || yd[1] != ns ||
      yd[3] != out_dim) {
    return SizesDiffer("esn_forecast_batch");
  }
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "esn_forecast_batch"));
  ORC_RETURN_IF_ERROR(CheckWindow(window, out_dim, "esn_forecast_batch"));
  const int32_t* window_idx = window.typed_data();
  if (steps == 0 || cols == 0) return ffi::Error::Success();
  const Batch<T> p{values.typed_data(), indices.typed_data(), win.typed_data(),
                   wout.typed_data(), chunks, n, k, w, o, nb, ns, cols,
                   bias_buf.typed_data()[0], leak_buf.typed_data()[0]};
  T* Y = out->typed_data();

  // the states, column-minor: states[(t % 2) * width * cols + g * cols + col];
  // column col = b * ns + s starts from r0[s]
  std::vector<T> states(2 * width * cols);
  const T* R0 = r0.typed_data();
  for (int64_t s = 0; s < ns; ++s) {
    for (int64_t g = 0; g < width; ++g) {
      for (int64_t b = 0; b < nb; ++b) states[g * cols + b * ns + s] = R0[s * width + g];
    }
  }

  auto make_step = [&](int me, int) {
    return [&, me, y = std::vector<T>(out_dim * cols), u = std::vector<T>(chunks * w * cols),
            a = std::vector<T>(cols), e = std::vector<T>(cols),
            z = std::vector<double>(cols)](int64_t t, int64_t lo, int64_t hi) mutable {
      const T* x = states.data() + (t % 2) * width * cols;
      loops.readouts(p, x, y.data());
      if (me == 0) {
        for (int64_t col = 0; col < cols; ++col) {
          T* row = Y + (col * steps + t) * out_dim;
          for (int64_t q = 0; q < out_dim; ++q) row[q] = y[q * cols + col];
        }
      }
      if (t + 1 == steps) return false;
      for (int64_t q = 0; q < chunks * w; ++q) {
        std::copy_n(y.data() + window_idx[q] * cols, cols, u.data() + q * cols);
      }
      T* next = states.data() + ((t + 1) % 2) * width * cols;
      loops.rows(p, x, u.data(), next, a.data(), e.data(), z.data(), lo, hi);
      return true;
    };
  };
  SharedSteps(Workers::Of(pool), ShareSteps(n * k * chunks * cols, steps, width), steps, width,
              make_step, [](int64_t, int) {});
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnForecastBatchF32, orc_native::EsnForecastBatch<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnForecastBatchF64, orc_native::EsnForecastBatch<ffi::F64>);
