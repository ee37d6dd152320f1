// orc's Gram and cross-product kernels (gram.cc): X^T X and X^T Y over
// blocks of rows, one function per vector width, deterministic whatever the
// threads. The ridge statistics (stats.h), the fused fit and the Cholesky
// factorisation of the ridge solve run them.
#ifndef ORC_GRAM_H_
#define ORC_GRAM_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "isa.h"

namespace orc_native {

// Scratch memory of one thread for the Gram kernels (packed operands),
// kept across the calls of an update so it is allocated and mapped once.
class GramWork {
 public:
  // Room for at least n values of T, 64-byte aligned.
  template <typename T>
  T* Get(size_t n) {
    const size_t doubles = (n * sizeof(T) + sizeof(double) - 1) / sizeof(double);
    if (doubles > size_) {
      raw_.reset(new double[doubles + 8]);
      size_ = doubles;
    }
    const uintptr_t at = (reinterpret_cast<uintptr_t>(raw_.get()) + 63) / 64 * 64;
    return reinterpret_cast<T*>(at);
  }

 private:
  std::unique_ptr<double[]> raw_;
  size_t size_ = 0;
};

// Steps per block of the Gram kernel (its sums are folded into G once per
// block) and rows per row block (gram.cc).
constexpr int64_t kGramKc = 256, kGramMc = 72;

template <typename T>
using GramRowsFn = void (*)(T*, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, int64_t,
                            bool, GramWork&);
template <typename T>
using CrossRowsFn = void (*)(T*, const T*, int64_t, const T*, int64_t, int64_t, int64_t,
                             int64_t, int64_t, GramWork&);

// The Gram and cross-product kernels of one variant.
template <typename T>
struct GramKernels {
  GramRowsFn<T> gram;
  CrossRowsFn<T> cross;
};

// The kernels of variant `isa` (gram.cc, for float and double).
template <typename T>
GramKernels<T> GramKernelsOf(Isa isa);

// Gram sizes below this stay with BLAS: mostly edge tiles there, and
// BLAS's order of the sums (the one numpy's X.T @ X uses) is kept for them.
constexpr int64_t kGramMinFeatures = 64;

// The Gram kernel's variant: set, or the widest the CPU runs.
inline Isa PickGramIsa() {
  static const Isa isa = Resolve(g_variants.gram, WidestIsa());
  return isa;
}

// The kernels of that variant.
template <typename T>
GramKernels<T> PickGramKernels() {
  return GramKernelsOf<T>(PickGramIsa());
}

inline const char* GramIsaName() { return IsaName(PickGramIsa()); }

// Whether a Gram of f features goes through orc's kernel (else BLAS):
// from kGramMinFeatures on, in stats_update as in the fused fit. Its speed
// matches or beats OpenBLAS's on one core (see gram.cc), it runs on XLA's
// threads like every other kernel (BLAS would start threads of its own
// beside them), and its sums do not depend on the number of threads.
template <typename T>
bool UsesGramKernel(int64_t f) {
  return f >= kGramMinFeatures;
}

// The split s whose rows [0, s) hold the fraction `share` (clamped to
// [0, 1]) of the upper triangle of an f x f Gram: s f - s (s - 1) / 2 =
// share f (f + 1) / 2.
inline int64_t SplitForShare(int64_t f, double share) {
  share = std::min(1.0, std::max(0.0, share));
  const double b = 2.0 * static_cast<double>(f) + 1.0;
  const double s = 0.5 * (b - std::sqrt(std::max(0.0, b * b - 4.0 * share * f * (f + 1.0))));
  return std::min<int64_t>(f, std::max<int64_t>(0, static_cast<int64_t>(std::lround(s))));
}

}  // namespace orc_native

#endif  // ORC_GRAM_H_
