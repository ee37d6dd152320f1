// Closed-loop forecast of a discrete leaky-tanh ESN with a linear readout and
// a linear embedding of its own output:
//
//   y_t = concat_c(wout[c] r_t[c]),   u_t[c] = y_t[window[c]],
//   r_{t+1}[c] = leak tanh(W_c r_t[c] + win[c] u_t[c] + bias) + (1 - leak) r_t[c],
//
// for t = 0..L-1 from r_0 = r0, writing y_0..y_{L-1} (out (L, C o)). With
// values/indices (C, n, k), win (C, n, w), window (C, w) (indices into y),
// wout (C, o, n). The states live in two alternating buffers; two threads
// share the rows of every step as in RunEsn, and each computes the (small)
// readout of the full state itself, so one hand-over per step suffices:
// thread A writes r_{t+1} into the buffer of r_{t-1} only after B has
// finished step t-1, the last one that read it. The whole forecast is one
// call: no per-step loop overhead, thread hand-off or readout launches.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "bind.h"
#include "checks.h"
#include "esn.h"

namespace orc_native {
namespace {

// y[c o + j] = sum_i wout[c][j][i] x[c][i]; four partial sums per output.
template <typename T>
void LinearReadoutRows(const T* __restrict wout, const T* __restrict x, int64_t chunks,
                       int64_t o, int64_t n, T* __restrict y) {
  for (int64_t c = 0; c < chunks; ++c) {
    const T* xc = x + c * n;
    for (int64_t j = 0; j < o; ++j) {
      const T* wr = wout + (c * o + j) * n;
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        a0 += wr[i] * xc[i];
        a1 += wr[i + 1] * xc[i + 1];
        a2 += wr[i + 2] * xc[i + 2];
        a3 += wr[i + 3] * xc[i + 3];
      }
      for (; i < n; ++i) a0 += wr[i] * xc[i];
      y[c * o + j] = (a0 + a1) + (a2 + a3);
    }
  }
}

template <ffi::DataType DT>
ffi::Error EsnForecast(ffi::ThreadPool pool, ffi::Buffer<DT> values,
                       ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win,
                       ffi::Buffer<ffi::S32> window, ffi::Buffer<DT> bias_buf,
                       ffi::Buffer<DT> wout, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                       ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto xd = window.dimensions(), od = wout.dimensions(), yd = out->dimensions();
  LinearEsnSizes s;
  ORC_RETURN_IF_ERROR(CheckLinearEsn(
      "esn_forecast",
      "values/indices (C, n, k), win (C, n, w), window (C, w), bias (), wout (C, o, n), "
      "r0 (C, n), leak (); out (L, C o)",
      xd.size() == 2 && od.size() == 3 && yd.size() == 2, values, indices, win, r0, bias_buf,
      leak_buf, s));
  const int64_t chunks = s.chunks, n = s.n, k = s.k, w = s.w, o = od[1], steps = yd[0];
  const int64_t width = chunks * n, out_dim = chunks * o;
  if (xd[0] != chunks || xd[1] != w || od[0] != chunks || od[2] != n || yd[1] != out_dim) {
    return SizesDiffer("esn_forecast");
  }
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "esn_forecast"));
  ORC_RETURN_IF_ERROR(CheckWindow(window, out_dim, "esn_forecast"));
  const int32_t* window_idx = window.typed_data();
  if (steps == 0) return ffi::Error::Success();
  const T* V = values.typed_data();
  const int32_t* I = indices.typed_data();
  const T* Wout = wout.typed_data();
  const T leak = leak_buf.typed_data()[0];
  T* Y = out->typed_data();
  const RunMatrix<T> matrix(V, I, n, k, chunks);
  std::vector<T> states(2 * width);
  std::copy(r0.typed_data(), r0.typed_data() + width, states.begin());
  const LinearDrive<T> base(win.typed_data(), nullptr, bias_buf.typed_data()[0], chunks, n, w);

  // Each thread computes the readout of the whole state into its own y (and
  // the inputs u it gives), allocated on that thread.
  auto make_step = [&](int me, int) {
    return [&, me, y = std::vector<T>(out_dim), u = std::vector<T>(chunks * w)](
               int64_t t, int64_t lo, int64_t hi) mutable {
      const T* x = states.data() + (t % 2) * width;
      LinearReadoutRows<T>(Wout, x, chunks, o, n, y.data());
      if (me == 0) std::copy(y.begin(), y.end(), Y + t * out_dim);
      if (t + 1 == steps) return false;
      for (int64_t e = 0; e < chunks * w; ++e) u[e] = y[window_idx[e]];
      Drive<T> drive = base.drive;
      drive.u = u.data();
      EsnStepRows<T>(matrix, x, drive, 0, states.data() + ((t + 1) % 2) * width, leak, lo, hi);
      return true;
    };
  };
  SharedSteps(Workers::Of(pool), ShareSteps(n * k * chunks, steps, width), steps, width,
              make_step, [](int64_t, int) {});
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnForecastF32, orc_native::EsnForecast<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnForecastF64, orc_native::EsnForecast<ffi::F64>);
