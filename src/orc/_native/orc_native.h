// What the Python module (module.cc) needs from the kernels (config.cc,
// calibrate.cc and the handlers' sources):
// the BLAS/LAPACK routine table, a description of the variants picked on
// this CPU, and the XLA FFI handler symbols.
#ifndef ORC_NATIVE_H_
#define ORC_NATIVE_H_

#include <cstdint>
#include <string>

#include "xla/ffi/api/c_api.h"

namespace orc_native {

// BLAS/LAPACK routines (Fortran ABI), single precision first, its double
// twin right after it.
enum Routine {
  kSsyrk, kDsyrk, kSgemm, kDgemm, kSsyevd, kDsyevd,
  kRoutineCount
};
extern const char* const kRoutineNames[kRoutineCount];
void SetRoutine(int which, void* fn);
void* GetRoutine(int which);

// The sparse-row variant picked for float64 ("avx512", "avx2", "scalar"),
// the activation's ("avx512", "avx2", "baseline"), the Gram kernel's
// ("avx512", "avx2", "baseline"; statistics of 64 features or more and the
// Cholesky factorisation run it), the threads of XLA's pool at the last
// kernel call (0 before any) and the cap ORC_NATIVE_THREADS puts on them (0:
// none).
const char* EllVariant();
const char* TanhVariant();
const char* GramVariant();
int64_t PoolThreads();
int64_t ThreadLimit();

// The variants every kernel runs, as a spec SetVariants takes
// ("ell_f64=avx512:16 ell_f32=... tanh=... gram=...").
std::string ActiveVariants();
// Sets variants from a spec (calibration.txt, ORC_NATIVE_VARIANTS) before
// any kernel runs; "" or what is wrong (then nothing is set).
std::string SetVariants(const std::string& spec);
// Measures the variants this CPU runs; a spec with the fastest, its
// measurements as comments.
std::string Calibrate();

// The NVRTC library the GPU forecast (cuda_cluster.cc) compiles its kernel
// with: a path, tried before the default names.
void SetNvrtcPath(const char* path);

}  // namespace orc_native

// XLA FFI handlers (extern "C", defined by XLA_FFI_DEFINE_HANDLER_SYMBOL).
#define ORC_NATIVE_HANDLERS(X)                                              \
  X(orc_ell_matvec_f32, OrcEllMatvecF32)                                    \
  X(orc_ell_matvec_f64, OrcEllMatvecF64)                                    \
  X(orc_stats_update_f32, OrcStatsUpdateF32)                                \
  X(orc_stats_update_f64, OrcStatsUpdateF64)                                \
  X(orc_ridge_solve_f32, OrcRidgeSolveF32)                                  \
  X(orc_ridge_solve_f64, OrcRidgeSolveF64)                                  \
  X(orc_esn_run_f32, OrcEsnRunF32)                                          \
  X(orc_esn_run_f64, OrcEsnRunF64)                                          \
  X(orc_esn_fit_f32, OrcEsnFitF32)                                          \
  X(orc_esn_fit_f64, OrcEsnFitF64)                                          \
  X(orc_esn_run_linear_f32, OrcEsnRunLinearF32)                             \
  X(orc_esn_run_linear_f64, OrcEsnRunLinearF64)                             \
  X(orc_esn_forecast_f32, OrcEsnForecastF32)                                \
  X(orc_esn_forecast_f64, OrcEsnForecastF64)                                \
  X(orc_esn_forecast_batch_f32, OrcEsnForecastBatchF32)                     \
  X(orc_esn_forecast_batch_f64, OrcEsnForecastBatchF64)                     \
  X(orc_column_quantiles_f32, OrcColumnQuantilesF32)                        \
  X(orc_column_quantiles_f64, OrcColumnQuantilesF64)

// For the CUDA platform (cuda_cluster.cc): the closed-loop forecast as one
// thread-block cluster.
#define ORC_CUDA_HANDLERS(X)                                      \
  X(orc_esn_forecast_cluster_f32, OrcEsnForecastClusterF32)       \
  X(orc_esn_forecast_cluster_f64, OrcEsnForecastClusterF64)

#define ORC_DECLARE_HANDLER(target, symbol) \
  extern "C" XLA_FFI_Error* symbol(XLA_FFI_CallFrame* call_frame);
ORC_NATIVE_HANDLERS(ORC_DECLARE_HANDLER)
ORC_CUDA_HANDLERS(ORC_DECLARE_HANDLER)
#undef ORC_DECLARE_HANDLER

#endif  // ORC_NATIVE_H_
