// The fused fit's blocks of statistics rows, and its fit of a run whose
// states are not kept (esn_fit.cc; FitRing is tested on its own in
// tests/native/kernels_test.cc).
#ifndef ORC_FIT_H_
#define ORC_FIT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "esn.h"
#include "stats.h"
#include "workers.h"

namespace orc_native {

// The statistics are added in blocks of rows counted from the first fitted
// row: kFitBlock rows per BLAS update (syrk's throughput at 512 rows is
// within 3% of one call over all rows), kFitBlockOwn per update of orc's
// Gram kernel (one of its blocks of steps, kGramKc).
constexpr int64_t kFitBlock = 512, kFitBlockOwn = 256;

// Blocks of statistics rows the ring of a last-state-only fit holds: 8
// (res_dim 2000: 33 MB), fewer where they would take more than
// kRingBytes, 2 at least; never more than the fit's rows need.
constexpr int64_t kRingBlocks = 8;
constexpr int64_t kRingBytes = int64_t{64} << 20;

inline int64_t RingBlocks(int64_t block_bytes, int64_t blocks_needed) {
  const int64_t fit = std::max<int64_t>(2, kRingBytes / std::max<int64_t>(block_bytes, 1));
  return std::max<int64_t>(1, std::min({kRingBlocks, fit, blocks_needed}));
}

// The fit of a call that keeps only the last state (into `last`, (C, n)):
// the run writes each step into a ring of RingBlocks blocks of rows, whose
// blocks are added to the statistics by panels (the same blocks and panels
// as the history's fit, each panel's blocks in row order, so the same bits)
// by whichever thread claims them: the helper takes panel 1 first, this
// thread panel 0, and it stops running only when the ring is full, to add
// the oldest block's missing panels. A Gram that costs more than the run
// (N = 2000: twice) is then shared by both threads, and the run by none.
template <typename T>
void FitRing(const Blas<T>& blas, const Workers& workers, const RunMatrix<T>& m,
             const Drive<T>& drive, const T* R0, T leak, int64_t steps, T* G, T* Cr,
             const T* Yv, int64_t o, int64_t start, int64_t stop, T* last) {
  const int64_t chunks = m.chunks, f = m.n, width = chunks * f;
  const bool own = f >= kGramMinFeatures;
  const int64_t block = own ? kFitBlockOwn : kFitBlock;
  const int64_t split = SplitForShare(f, 0.5);
  const int64_t nblocks = (stop - start + block - 1) / block;
  const int64_t block_bytes = block * width * static_cast<int64_t>(sizeof(T));
  const int64_t slots = RingBlocks(block_bytes, (steps - start + block - 1) / block);
  const int64_t ring_rows = slots * block;
  std::vector<T> ring(static_cast<size_t>(ring_rows * width));
  auto row = [&](int64_t t) {
    const int64_t r = ((t - start) % ring_rows + ring_rows) % ring_rows;
    return ring.data() + r * width;
  };
  std::atomic<int64_t> forced{0};         // steps the run has finished
  std::atomic<int64_t> claimed[2] = {0, 0};  // next block of each panel to claim
  std::atomic<int64_t> added[2] = {0, 0};    // blocks of each panel added
  // Adds the next block of panel p if the run has finished it and no thread
  // has claimed it; false when there is none to take now.
  auto take = [&](int p, GramWork& work) {
    int64_t j = claimed[p].load(std::memory_order_acquire);
    if (j >= nblocks) return false;
    const int64_t a = start + j * block, b = std::min(stop, a + block);
    if (forced.load(std::memory_order_acquire) < b) return false;
    if (!claimed[p].compare_exchange_strong(j, j + 1, std::memory_order_acq_rel)) return true;
    while (added[p].load(std::memory_order_acquire) < j) SpinPause();  // the block before
    AddRows(blas, own, G, Cr, row(a), Yv + a * chunks * o, chunks, f, o, 0, b - a,
            p == 0 ? 0 : split, p == 0 ? split : f, work);
    added[p].store(j + 1, std::memory_order_release);
    return true;
  };
  auto all_added = [&] {
    return added[0].load(std::memory_order_acquire) >= nblocks &&
           added[1].load(std::memory_order_acquire) >= nblocks;
  };
  GramWork mine, theirs;
  const double work = static_cast<double>(stop - start) * static_cast<double>(f * f) * chunks;
  const bool overlap = own && workers.threads() > 1 && work >= kOverlapWork && nblocks > 0;
  Helper helper(overlap ? workers : Workers(), [&] {
    int64_t spins = 0;
    while (!all_added()) {
      if (take(1, theirs) || take(0, theirs)) {
        spins = 0;
      } else {
        SpinRound(spins, 1 << 10);
      }
    }
  });
  for (int64_t t = 0; t < steps; ++t) {
    // step t writes over the block `slots` before its own
    const int64_t over = (t - start) / block - slots;
    if (t >= start && over >= 0 && over < nblocks) {
      while (added[0].load(std::memory_order_acquire) <= over ||
             added[1].load(std::memory_order_acquire) <= over) {
        if (!take(0, mine) && !take(1, mine)) SpinPause();
      }
    }
    const T* xs = t == 0 ? R0 : row(t - 1);
    EsnStepRows<T>(m, xs, drive, t, row(t), leak, 0, width);
    forced.store(t + 1, std::memory_order_release);
  }
  while (!all_added()) {
    if (!take(0, mine) && !take(1, mine)) SpinPause();
  }
  helper.Finish();
  std::copy(row(steps - 1), row(steps - 1) + width, last);
}

}  // namespace orc_native

#endif  // ORC_FIT_H_
