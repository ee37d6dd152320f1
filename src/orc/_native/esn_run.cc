// Teacher-forced run of a discrete leaky-tanh ESN over a block of steps:
//
//   r_t = leak * tanh(W r_{t-1} + p_t) + (1 - leak) * r_{t-1},   t = 0..B-1
//
// with W in ELL layout (values/indices (..., n, k), leading chunk dims), the
// drive p (B, ..., n) computed beforehand by XLA (embedding of the block's
// inputs plus the bias, one product for the whole block), r0 (..., n), and
// the states written to out (B, ..., n). Inside a step the rows are split
// into units that two threads claim in order (this one and a helper thread
// started for the call), so both cores work on every step; a step starts
// only when every unit of the previous one is done. One call covers a block
// of steps, so the per-step cost of XLA's loop, the separate activation pass
// and the thread hand-off of a per-step custom call are all gone.
//
// esn_run_linear below is the same run with the drive of a linear embedding.
#include <cstdint>
#include <vector>

#include "bind.h"
#include "checks.h"
#include "esn.h"

namespace orc_native {
namespace {

// Checks the operands of a run: values/indices (..., n, k) with leading chunk
// dimensions, drive (B, ..., n), r0 (..., n); sets n, k, chunks and steps.
template <typename VB, typename IB, typename DB, typename RB>
ffi::Error EsnShapes(const VB& values, const IB& indices, const DB& drive, const RB& r0,
                     int64_t& n, int64_t& k, int64_t& chunks, int64_t& steps) {
  const auto vd = values.dimensions();
  const auto dd = drive.dimensions();
  const auto rd = r0.dimensions();
  if (vd.size() < 2 || indices.dimensions().size() != vd.size() || dd.size() != vd.size() ||
      rd.size() != vd.size() - 1) {
    return ffi::Error::InvalidArgument(
        "orc esn_run: values/indices (..., n, k), drive (B, ..., n), r0 (..., n), leak ()");
  }
  n = vd[vd.size() - 2];
  k = vd[vd.size() - 1];
  chunks = 1;
  for (size_t d = 0; d + 2 < vd.size(); ++d) {
    if (dd[d + 1] != vd[d] || rd[d] != vd[d] || indices.dimensions()[d] != vd[d]) {
      return ffi::Error::InvalidArgument("orc esn_run: chunk dimensions differ");
    }
    chunks *= vd[d];
  }
  if (dd[dd.size() - 1] != n || rd[rd.size() - 1] != n || indices.dimensions()[vd.size() - 1] != k) {
    return ffi::Error::InvalidArgument("orc esn_run: reservoir sizes differ");
  }
  steps = dd[0];
  return ffi::Error::Success();
}

template <ffi::DataType DT>
ffi::Error EsnRun(ffi::ThreadPool pool, ffi::Buffer<DT> values, ffi::Buffer<ffi::S32> indices,
                  ffi::Buffer<DT> drive, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                  ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  int64_t n, k, chunks, steps;
  if (leak_buf.element_count() != 1) {
    return ffi::Error::InvalidArgument("orc esn_run: leak must be a scalar");
  }
  ORC_RETURN_IF_ERROR(EsnShapes(values, indices, drive, r0, n, k, chunks, steps));
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "esn_run"));
  Drive<T> d;
  d.p = drive.typed_data();
  RunEsn<T>(RunMatrix<T>(values.typed_data(), indices.typed_data(), n, k, chunks), steps, d,
            r0.typed_data(), out->typed_data(), leak_buf.typed_data()[0], Workers::Of(pool));
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnRunF32, orc_native::EsnRun<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnRunF64, orc_native::EsnRun<ffi::F64>);

// The ESN run driven by a linear embedding, the drive computed step by step
// inside the run exactly as esn_fit computes it (never stored):
//
//   out = esn_run(values, indices, win @ u + bias, r0, leak)
//
// win (C, n, w), u (T, C, w), bias (), r0 (C, n), leak () -> out (T, C, n).
// force() and the warm-up of forecast_from_IC run it, so that their states
// are the same bits as those a training stores (esn_fit), whose drive XLA
// would sum in another order (fused multiply-adds).
namespace orc_native {
namespace {

template <ffi::DataType DT>
ffi::Error EsnRunLinear(ffi::ThreadPool pool, ffi::Buffer<DT> values,
                        ffi::Buffer<ffi::S32> indices, ffi::Buffer<DT> win, ffi::Buffer<DT> u,
                        ffi::Buffer<DT> bias_buf, ffi::Buffer<DT> r0, ffi::Buffer<DT> leak_buf,
                        ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto ud = u.dimensions(), od = out->dimensions();
  LinearEsnSizes s;
  ORC_RETURN_IF_ERROR(CheckLinearEsn(
      "esn_run_linear",
      "values/indices (C, n, k), win (C, n, w), u (T, C, w), bias (), r0 (C, n), leak ()",
      ud.size() == 3 && od.size() == 3, values, indices, win, r0, bias_buf, leak_buf, s));
  const int64_t chunks = s.chunks, n = s.n, k = s.k, steps = ud[0];
  if (ud[1] != chunks || ud[2] != s.w || od[0] != steps || od[1] != chunks || od[2] != n) {
    return SizesDiffer("esn_run_linear");
  }
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "esn_run_linear"));
  if (steps == 0 || chunks * n == 0) return ffi::Error::Success();
  const LinearDrive<T> drive(win.typed_data(), u.typed_data(), bias_buf.typed_data()[0], chunks,
                             n, s.w);
  RunEsn<T>(RunMatrix<T>(values.typed_data(), indices.typed_data(), n, k, chunks), steps,
            drive.drive, r0.typed_data(), out->typed_data(), leak_buf.typed_data()[0],
            Workers::Of(pool));
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnRunLinearF32, orc_native::EsnRunLinear<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnRunLinearF64, orc_native::EsnRunLinear<ffi::F64>);
