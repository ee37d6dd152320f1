// Which variant each kernel family runs (the ISA variants of the ELL rows,
// the multi-step products, the activation and the Gram kernel): the
// process-wide table set from calibration.txt / ORC_NATIVE_VARIANTS
// (SetVariants, config.cc) or from the CPU flags, and what this CPU and
// build can run. The variants themselves are in rows.cc, tanh.cc and
// gram.cc; calibrate.cc measures them.
#ifndef ORC_ISA_H_
#define ORC_ISA_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ORC_NO_CLONES)
#define ORC_X86_DISPATCH 1
#include <immintrin.h>
#endif

// Which variant each kernel runs. Without other instructions, the widest
// the CPU has, from its flags. The build measures them instead (Calibrate
// in calibrate.cc: `pip install` runs it and installs calibration.txt next to the
// module, which orc._native loads at import), and ORC_NATIVE_VARIANTS
// overrides both ("ell_f64=scalar gram=avx2 ..."). Variants are set before
// any kernel runs and then fixed for the process (each kernel keeps its
// choice from its first call), so every call of a process, and of every
// process using one install, runs the same arithmetic. ORC_NATIVE_SIMD=0
// still forces the portable loops everywhere.
namespace orc_native {

enum class Isa : int { kAuto = -1, kBase = 0, kAvx2 = 1, kAvx512 = 2 };

struct Variants {
  Isa ell[2] = {Isa::kAuto, Isa::kAuto};  // float, double
  int64_t ell_min_k[2] = {0, 0};          // shortest rows the vector loop takes
  // The products of the multi-step kernels (ESN runs, fits, forecasts):
  // kAvx2 runs the interleaved loop (EllRowsInterleaved) for rows of
  // run_min_k entries or more, kBase (and kAuto) the row loops of `ell`.
  Isa run[2] = {Isa::kAuto, Isa::kAuto};
  int64_t run_min_k[2] = {0, 0};
  Isa tanh = Isa::kAuto;
  Isa gram = Isa::kAuto;
};

// The table (config.cc), and whether a kernel has read it: from then on
// SetVariants refuses to change it.
extern Variants g_variants;
extern std::atomic<bool> g_variants_fixed;

// Whether vector variants may be picked (not with ORC_NATIVE_SIMD=0).
inline bool SimdAllowed() {
  const char* env = std::getenv("ORC_NATIVE_SIMD");
  return env == nullptr || std::atoi(env) != 0;
}

// Whether this build and CPU can run variant `isa`.
inline bool CpuRuns(Isa isa) {
  if (isa == Isa::kBase) return true;
#ifdef ORC_X86_DISPATCH
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (isa == Isa::kAvx2) return __builtin_cpu_supports("avx2") && fma;
  if (isa == Isa::kAvx512) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && fma;
  }
#endif
  return false;
}

// The widest variant this CPU runs (kBase with ORC_NATIVE_SIMD=0).
inline Isa WidestIsa() {
  if (!SimdAllowed()) return Isa::kBase;
  if (CpuRuns(Isa::kAvx512)) return Isa::kAvx512;
  if (CpuRuns(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBase;
}

// The variant a kernel family runs: the one set (within what SIMD allows),
// else `fallback`. Fixes the table for the process.
inline Isa Resolve(Isa set, Isa fallback) {
  g_variants_fixed.store(true, std::memory_order_release);
  if (!SimdAllowed()) return Isa::kBase;
  return set == Isa::kAuto ? fallback : set;
}

inline const char* IsaName(Isa isa, bool ell = false) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    default:
      return ell ? "scalar" : "baseline";
  }
}

// Calibration's choice rules (calibrate.cc; the C++ tests check them).
size_t ChooseFastest(const std::vector<double>& times, double margin = 0.03);
std::pair<size_t, int64_t> ChooseEll(const std::vector<std::vector<double>>& times,
                                     const std::vector<int64_t>& ks, double margin = 0.03);

}  // namespace orc_native

#endif  // ORC_ISA_H_
