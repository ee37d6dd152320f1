// Teacher-forced ESN run and ridge statistics in one call, overlapped:
//
//   out = the states of esn_run(values, indices, drive, r0, leak) with the
//         drive of a linear embedding, drive[t][c] = win[c] u[t][c] + bias,
//         computed step by step (win (C, n, w), u (T, C, w): the few input
//         values each chunk sees), so no (T, C, n) drive is ever stored;
//   g += X^T X, c += X^T Y over the rows [start, stop) of X = out, Y = y
//
// with the layouts of esn_run (values (C, n, k), out (T, C, n)) and of the
// chunked stats update (g (C, n, n), c (C, n, O), y (T, C, O)); g and c alias
// g_out and c_out. (Asking for transparent huge pages on the fresh out
// before writing it made the first write of each new 2 MiB page cost more on
// the VMs we measure on, and the run bimodal: 1.3 or 2.2 s; not done.)
//
// An out of one row (1, C, n) asks for the last state only (a training
// that does not return its states): the rows then go to a ring of up to
// kRingBlocks blocks of statistics rows that both threads empty (fit.h,
// FitRing), so the call holds at most 64 MiB instead of the (T, C, n)
// history, and maps and writes no pages for it. The statistics are the
// same bits either way.
//
// The reservoir run is sequential and bound by its loads, the Gram runs at
// the core's arithmetic peak; run one after the other (each on both cores)
// they cost the sum of their times. Here this thread runs the reservoir on
// one core while a helper thread folds the finished rows into the statistics
// on the other (orc's Gram kernel, gram.h), a block of rows
// at a time (the helper lags: the Gram is about twice the run's work). When
// the run ends, the rows left are split by Gram columns between both threads
// (disjoint memory), sized so that both end together: this thread starts at
// once, into a zeroed copy of its part of the Gram while the helper finishes
// the block it is in, and takes over that much more of the triangle. At
// res_dim 2000 and 20000 steps this takes the wall time from the sum of the
// two to about half of their single-core times added up. (Waiting for the
// helper's block instead cost 40-55 ms, a static split another 0-50 ms.)
//
// The Gram of the overlapped fit is orc's own kernel (GramRows, CrossRows),
// never BLAS: BLAS called beside the run would start its own threads on the
// cores the run uses, and OpenBLAS's thread count can only be changed for
// the whole process (its _local variant, in the builds SciPy ships, too),
// which a library must not do. Below kGramMinFeatures features (little
// work: no overlap), on one core, or with ORC_NATIVE_THREADS=1, the run and
// the statistics follow each other as in esn_run and stats_update.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "bind.h"
#include "checks.h"
#include "esn.h"
#include "fit.h"

namespace orc_native {
namespace {

template <ffi::DataType DT>
ffi::Error EsnFit(ffi::ThreadPool pool, ffi::Buffer<DT> values, ffi::Buffer<ffi::S32> indices,
                  ffi::Buffer<DT> win, ffi::Buffer<DT> u, ffi::Buffer<DT> bias_buf, ffi::Buffer<DT> r0,
                  ffi::Buffer<DT> leak_buf, ffi::Buffer<DT> g, ffi::Buffer<DT> c,
                  ffi::Buffer<DT> y, ffi::ResultBuffer<DT> out, ffi::ResultBuffer<DT> g_out,
                  ffi::ResultBuffer<DT> c_out, ffi::Attr<int64_t, kStart> start_attr,
                  ffi::Attr<int64_t, kStop> stop_attr) {
  using T = ffi::NativeType<DT>;
  const int64_t start = *start_attr, stop = *stop_attr;
  Blas<T> blas;
  if (!LoadBlas(blas)) return NoRoutines("esn_fit");
  const auto ud = u.dimensions(), gd = g.dimensions(), cd = c.dimensions(), yd = y.dimensions(),
             od = out->dimensions();
  LinearEsnSizes s;
  ORC_RETURN_IF_ERROR(CheckLinearEsn(
      "esn_fit",
      "values/indices (C, n, k), win (C, n, w), u (T, C, w), bias (), r0 (C, n), leak (), "
      "g (C, n, n), c (C, n, O), y (T, C, O)",
      ud.size() == 3 && gd.size() == 3 && cd.size() == 3 && yd.size() == 3 && od.size() == 3,
      values, indices, win, r0, bias_buf, leak_buf, s));
  const int64_t chunks = s.chunks, n = s.n, k = s.k, steps = ud[0], o = cd[2];
  if (ud[1] != chunks || ud[2] != s.w || gd[0] != chunks || gd[1] != n || gd[2] != n ||
      cd[0] != chunks || cd[1] != n || yd[0] != steps || yd[1] != chunks || yd[2] != o ||
      (od[0] != steps && od[0] != 1) || od[1] != chunks || od[2] != n) {
    return SizesDiffer("esn_fit");
  }
  if (start < 0 || stop < start || stop > steps) {
    return ffi::Error::InvalidArgument("orc esn_fit: rows [start, stop) out of range");
  }
  ORC_RETURN_IF_ERROR(CheckColumns(indices, n, "esn_fit"));
  const int64_t f = n, width = chunks * n;
  T* X = out->typed_data();
  T* G = g_out->typed_data();
  T* Cr = c_out->typed_data();
  CopyUnlessAliased(G, g.typed_data(), chunks * f * f);
  CopyUnlessAliased(Cr, c.typed_data(), chunks * f * o);
  if (steps == 0 || width == 0) return ffi::Error::Success();
  const T* V = values.typed_data();
  const int32_t* I = indices.typed_data();
  const T* R0 = r0.typed_data();
  const T* Yv = y.typed_data();
  const T leak = leak_buf.typed_data()[0];
  const LinearDrive<T> linear(win.typed_data(), u.typed_data(), bias_buf.typed_data()[0], chunks,
                              n, s.w);
  const Drive<T>& drive = linear.drive;
  const RunMatrix<T> matrix(V, I, n, k, chunks);
  if (od[0] != steps) {  // the last state only
    FitRing(blas, Workers::Of(pool), matrix, drive, R0, leak, steps, G, Cr, Yv, o, start, stop,
            X);
    return ffi::Error::Success();
  }
  // The statistics are summed in one fixed order whatever the threads and
  // their timing: rows [start, stop) in blocks of `block` rows counted from
  // start, each block's contribution computed separately for the Gram rows
  // (and cross-product rows) [0, split) -- panel 0 -- and [split, f) --
  // panel 1 --, and each panel's blocks added in row order. Which thread
  // computes a (block, panel) pair is then free: the result is the same bit
  // for bit run to run, on one thread or two, and for each chunk whatever
  // the number of chunks (an ensemble equals its members trained alone).
  const bool own = f >= kGramMinFeatures;
  const int64_t block = own ? kFitBlockOwn : kFitBlock;
  const int64_t split = SplitForShare(f, 0.5);
  const int64_t nblocks = (stop - start + block - 1) / block;
  auto add_panel = [&](int64_t j, int p, GramWork& work) {
    const int64_t a = start + j * block, b = std::min(stop, a + block);
    AddRows(blas, own, G, Cr, X, Yv, chunks, f, o, a, b, p == 0 ? 0 : split,
            p == 0 ? split : f, work);
  };
  GramWork mine, theirs;
  const Workers workers = Workers::Of(pool);
  const double work = static_cast<double>(stop - start) * static_cast<double>(f * f) * chunks;
  const bool overlap = own && workers.threads() > 1 && work >= kOverlapWork && nblocks > 0;
  if (!overlap) {
    RunEsn<T>(matrix, steps, drive, R0, X, leak, workers);
    for (int64_t j = 0; j < nblocks; ++j) {
      add_panel(j, 0, mine);
      add_panel(j, 1, mine);
    }
    return ffi::Error::Success();
  }
  std::atomic<int64_t> forced{0};    // steps the run has finished
  std::atomic<int64_t> claim0{0};    // next block of panel 0 to claim
  std::atomic<int64_t> done0{0};     // blocks of panel 0 added
  std::atomic<bool> ended{false};    // the run is over: panel 0 goes to this thread
  // The helper (a task on XLA's pool) adds finished blocks (panel 0 then
  // panel 1) while the run goes on; once the run is over, this thread takes
  // the panel-0 blocks left, in order, and the helper the panel-1 blocks
  // left. A helper that has not started by then never does: this thread
  // adds every block itself, as on one thread.
  auto helper_work = [&]() {
    int64_t j = 0, spins = 0;
    while (j < nblocks && !ended.load(std::memory_order_acquire)) {
      const int64_t end = std::min(stop, start + (j + 1) * block);
      if (forced.load(std::memory_order_acquire) < end) {
        SpinRound(spins, 1 << 10);
        continue;
      }
      int64_t expected = j;
      if (!claim0.compare_exchange_strong(expected, j + 1, std::memory_order_acq_rel)) break;
      add_panel(j, 0, theirs);
      done0.store(j + 1, std::memory_order_release);
      add_panel(j, 1, theirs);
      ++j;
      spins = 0;
    }
    for (; j < nblocks; ++j) add_panel(j, 1, theirs);
  };
  Helper helper(workers, helper_work);
  RunEsn<T>(matrix, steps, drive, R0, X, leak, Workers(), &forced);
  ended.store(true, std::memory_order_release);
  for (;;) {
    int64_t j = claim0.load(std::memory_order_acquire);
    if (j >= nblocks) break;
    if (!claim0.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel)) continue;
    while (done0.load(std::memory_order_acquire) < j) SpinPause();
    add_panel(j, 0, mine);
    done0.store(j + 1, std::memory_order_release);
  }
  if (helper.Started()) {
    helper.Finish();
  } else {
    for (int64_t j = 0; j < nblocks; ++j) add_panel(j, 1, mine);
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace orc_native

XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnFitF32, orc_native::EsnFit<ffi::F32>);
XLA_FFI_DEFINE_HANDLER_SYMBOL(OrcEsnFitF64, orc_native::EsnFit<ffi::F64>);
