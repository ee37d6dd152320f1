// What the handlers check before they compute: the BLAS/LAPACK routines
// they call were registered, the shapes they are given agree, and the
// column indices they gather with are in range.
#ifndef ORC_CHECKS_H_
#define ORC_CHECKS_H_

#include <cstdint>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "orc_native.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Index safety. The kernels gather x[idx] with column indices that come from
// the caller: a model built by orc has them in range, but a file, a user's
// edit of the arrays or a traced construction could carry anything. Every
// kernel that gathers checks its whole index buffer once per call with
// ColumnsInRange (one vectorised pass, a few microseconds at res_dim 2000
// against milliseconds of work) and returns an error instead of reading
// outside its buffers. Debug builds (-DORC_DEBUG) also assert it on every
// block of rows they compute.
#ifdef ORC_DEBUG
#include <cstdio>
#define ORC_DEBUG_ASSERT(cond)                                              \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "orc native: assertion failed: %s (%s:%d)\n", \
                   #cond, __FILE__, __LINE__);                              \
      std::abort();                                                         \
    }                                                                       \
  } while (0)
#else
#define ORC_DEBUG_ASSERT(cond) ((void)0)
#endif

namespace orc_native {

// The BLAS/LAPACK routine for element type T: `single` for float, the next
// entry (its double-precision twin) for double. Set once at import
// (SetRoutine, config.cc).
template <typename T>
void* RoutineFor(Routine single) {
  return GetRoutine(single + (std::is_same_v<T, double> ? 1 : 0));
}

inline ffi::Error NoRoutines(const char* kernel) {
  return ffi::Error::Internal(std::string("orc ") + kernel +
                              ": BLAS/LAPACK routines were not registered (orc._native "
                              "sets them from SciPy when it is imported)");
}

// Whether every one of the count indices lies in [0, n).
inline bool ColumnsInRange(const int32_t* idx, int64_t count, int64_t n) {
  uint32_t bad = 0;
  if (n > static_cast<int64_t>(std::numeric_limits<int32_t>::max())) {
    for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint32_t>(idx[i] < 0);
  } else {
    const uint32_t bound = static_cast<uint32_t>(n);
    for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint32_t>(idx[i]) >= bound;
  }
  return bad == 0;
}

inline ffi::Error IndexError(const char* kernel) {
  return ffi::Error::InvalidArgument(
      std::string("orc ") + kernel +
      ": a reservoir column index lies outside [0, res_dim) (a corrupted or edited "
      "matrix); nothing was computed");
}

// Returns from the calling handler with the error `expr` gives, if any.
#define ORC_RETURN_IF_ERROR(expr)               \
  do {                                          \
    ffi::Error orc_error_ = (expr);             \
    if (orc_error_.failure()) return orc_error_; \
  } while (0)

// The column indices of a matrix of n rows, checked once per call.
inline ffi::Error CheckColumns(const ffi::Buffer<ffi::S32>& indices, int64_t n,
                               const char* kernel) {
  if (ColumnsInRange(indices.typed_data(), indices.element_count(), n)) {
    return ffi::Error::Success();
  }
  return IndexError(kernel);
}

// A forecast's feedback window: each entry an index into the output row
// of out_dim values, checked once per call.
inline ffi::Error CheckWindow(const ffi::Buffer<ffi::S32>& window, int64_t out_dim,
                              const char* kernel) {
  if (ColumnsInRange(window.typed_data(), window.element_count(), out_dim)) {
    return ffi::Error::Success();
  }
  return ffi::Error::InvalidArgument(std::string("orc ") + kernel +
                                     ": window index outside the output");
}

// Whether two dimension lists are equal.
template <typename A, typename B>
bool SameDims(const A& a, const B& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d] != b[d]) return false;
  }
  return true;
}

inline ffi::Error SizesDiffer(const char* kernel) {
  return ffi::Error::InvalidArgument(std::string("orc ") + kernel + ": operand sizes differ");
}

// The in-place kernels' start: an output that XLA did not alias to its
// input gets the input's count values first.
template <typename T>
void CopyUnlessAliased(T* out, const T* in, int64_t count) {
  if (out != in) std::memcpy(out, in, sizeof(T) * static_cast<size_t>(count));
}

// The operands every kernel with a linear embedding takes (esn_fit,
// esn_run_linear, esn_forecast): values and indices (C, n, k), win (C, n, w),
// r0 (C, n), bias and leak scalars.
struct LinearEsnSizes {
  int64_t chunks = 0, n = 0, k = 0, w = 0;
};

// Checks those operands and sets their sizes: their ranks and the scalars
// (and `ranks_ok`, the kernel's check of the ranks of its other operands;
// else the error `usage`), indices the shape of values, win and r0 sized
// by them. The kernel then checks its other operands (SizesDiffer) and the
// column indices (CheckColumns).
template <ffi::DataType DT>
ffi::Error CheckLinearEsn(const char* kernel, const char* usage, bool ranks_ok,
                          const ffi::Buffer<DT>& values, const ffi::Buffer<ffi::S32>& indices,
                          const ffi::Buffer<DT>& win, const ffi::Buffer<DT>& r0,
                          const ffi::Buffer<DT>& bias, const ffi::Buffer<DT>& leak,
                          LinearEsnSizes& sizes) {
  const auto vd = values.dimensions(), wd = win.dimensions(), rd = r0.dimensions();
  if (!ranks_ok || vd.size() != 3 || indices.dimensions().size() != 3 || wd.size() != 3 ||
      rd.size() != 2 || bias.element_count() != 1 || leak.element_count() != 1) {
    return ffi::Error::InvalidArgument(std::string("orc ") + kernel + ": " + usage);
  }
  if (!SameDims(indices.dimensions(), vd)) {
    return ffi::Error::InvalidArgument(std::string("orc ") + kernel +
                                       ": indices must match values");
  }
  sizes.chunks = vd[0];
  sizes.n = vd[1];
  sizes.k = vd[2];
  sizes.w = wd[2];
  if (wd[0] != sizes.chunks || wd[1] != sizes.n || rd[0] != sizes.chunks || rd[1] != sizes.n) {
    return SizesDiffer(kernel);
  }
  return ffi::Error::Success();
}
}  // namespace orc_native

#endif  // ORC_CHECKS_H_
