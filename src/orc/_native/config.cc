// What the kernels run in this process, set once and then fixed: the
// BLAS/LAPACK routines lent by SciPy, the variant table (SetVariants), and
// what orc.show_config() reports of them.
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "esn.h"
#include "gram.h"
#include "isa.h"
#include "orc_native.h"
#include "rows.h"
#include "workers.h"

// BLAS/LAPACK routines, set once when the Python module is imported (from
// SciPy's exported Cython capsules, see module.cc). They used to travel as
// integer attributes of every call, which put process-specific addresses in
// the compiled program: JAX's persistent compilation cache could then never
// hit across processes, and an exported program carried dead pointers.
namespace orc_native {

namespace {
std::atomic<void*> g_routines[kRoutineCount] = {};
}  // namespace

const char* const kRoutineNames[kRoutineCount] = {
    "ssyrk", "dsyrk", "sgemm", "dgemm", "ssyevd", "dsyevd",
};

void SetRoutine(int which, void* fn) {
  if (which >= 0 && which < kRoutineCount) g_routines[which].store(fn, std::memory_order_release);
}

void* GetRoutine(int which) {
  return which >= 0 && which < kRoutineCount ? g_routines[which].load(std::memory_order_acquire)
                                             : nullptr;
}

// The variant table (isa.h).
Variants g_variants;
std::atomic<bool> g_variants_fixed{false};

namespace {

bool ParseIsa(const std::string& word, bool ell, Isa& out) {
  for (Isa isa : {Isa::kBase, Isa::kAvx2, Isa::kAvx512}) {
    if (word == IsaName(isa, ell)) {
      out = isa;
      return true;
    }
  }
  return false;
}

}  // namespace


// Sets variants from `spec`: "key=value" words separated by spaces, commas
// or new lines, '#' to the end of a line a comment. Keys: ell_f64 and
// ell_f32 (scalar, avx2:K or avx512:K, K the shortest rows of K entries the
// vector loop takes), run_f64 and run_f32 (rows: the ell loops; or
// interleaved:K, the interleaved loop for rows of K entries or more, which
// needs AVX2 and FMA), tanh and gram (baseline, avx2, avx512). Nothing is
// set unless the whole spec is valid for this CPU. Returns "" or what is
// wrong.
std::string SetVariants(const std::string& spec) {
  if (g_variants_fixed.load(std::memory_order_acquire)) {
    return "the kernels have already run in this process; variants are fixed";
  }
  Variants v = g_variants;
  size_t at = 0;
  while (at < spec.size()) {
    if (spec[at] == '#') {
      while (at < spec.size() && spec[at] != '\n') ++at;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(spec[at])) || spec[at] == ',') {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < spec.size() && !std::isspace(static_cast<unsigned char>(spec[end])) &&
           spec[end] != ',' && spec[end] != '#') {
      ++end;
    }
    const std::string word = spec.substr(at, end - at);
    at = end;
    const size_t eq = word.find('=');
    if (eq == std::string::npos) return "'" + word + "' is not key=value";
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    Isa isa = Isa::kAuto;
    // "name:K" -> name, K (0 when absent); false when K is not a row length
    auto split_rows = [](const std::string& text, std::string& name, int64_t& min_k) {
      const size_t colon = text.find(':');
      name = text.substr(0, colon);
      min_k = 0;
      if (colon == std::string::npos) return true;
      const std::string digits = text.substr(colon + 1);
      if (digits.empty() || digits.size() > 6 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        return false;
      }
      min_k = std::atoll(digits.c_str());
      return true;
    };
    if (key == "run_f64" || key == "run_f32") {
      const int t = key == "run_f64" ? 1 : 0;
      std::string name;
      int64_t min_k = 0;
      const bool counted = split_rows(value, name, min_k);
      if (name == "rows" && value == name) {
        isa = Isa::kBase;
      } else if (name == "interleaved" && counted && value != name) {
        isa = Isa::kAvx2;
      } else {
        return key + ": '" + value + "' is not rows or interleaved:K (K the shortest row it takes)";
      }
      v.run[t] = isa;
      v.run_min_k[t] = min_k;
    } else if (key == "ell_f64" || key == "ell_f32") {
      const int t = key == "ell_f64" ? 1 : 0;
      std::string name;
      int64_t min_k = 0;
      const bool counted = split_rows(value, name, min_k);
      if (!ParseIsa(name, true, isa)) {
        return key + ": '" + name + "' is not one of scalar, avx2, avx512";
      }
      if (!counted) {
        return key + ": '" + value.substr(name.size() + 1) + "' is not a row length";
      }
      if (value == name && isa != Isa::kBase) {
        return key + ": " + name + " needs the shortest row it takes, e.g. " + name + ":16";
      }
      v.ell[t] = isa;
      v.ell_min_k[t] = min_k;
    } else if (key == "tanh" || key == "gram") {
      if (!ParseIsa(value, false, isa)) {
        return key + ": '" + value + "' is not one of baseline, avx2, avx512";
      }
      (key == "tanh" ? v.tanh : v.gram) = isa;
    } else {
      return "unknown key '" + key + "' (ell_f64, ell_f32, run_f64, run_f32, tanh, gram)";
    }
    if (!CpuRuns(isa)) {
      return key + "=" + value + ": this CPU (or build) cannot run " + IsaName(isa, true);
    }
  }
  g_variants = v;
  return "";
}

// What runs on this CPU, for orc.show_config().
const char* EllVariant() {
  const EllRowsChoice<double> choice = PickEllRows<double>();
#ifdef ORC_X86_DISPATCH
  if (choice.vector == static_cast<EllRowsFn<double>>(EllRowsAvx512)) return "avx512";
  if (choice.vector == static_cast<EllRowsFn<double>>(EllRowsAvx2)) return "avx2";
#endif
  (void)choice;
  return "scalar";
}

const char* TanhVariant() {
  const TanhFn tanh = PickTanh();
#ifdef ORC_X86_DISPATCH
  if (tanh == TanhAvx512) return "avx512";
  if (tanh == TanhAvx2) return "avx2";
#endif
  (void)tanh;
  return "baseline";
}

const char* GramVariant() { return GramIsaName(); }

int64_t PoolThreads() { return g_pool_threads.load(std::memory_order_relaxed); }

int64_t ThreadLimit() { return ThreadCap(); }

// The variants every kernel runs, as a spec SetVariants takes.
std::string ActiveVariants() {
  const EllRowsChoice<double> d = PickEllRows<double>();
  const EllRowsChoice<float> f = PickEllRows<float>();
  auto ell = [](const char* name, int64_t min_k) {
    return std::string(name) + (std::string(name) == "scalar" ? "" : ":" + std::to_string(min_k));
  };
  const Isa dt = d.vector == nullptr ? Isa::kBase
                 : d.vector == EllRowsOf<double>(Isa::kAvx512) ? Isa::kAvx512
                                                               : Isa::kAvx2;
  const Isa ft = f.vector == nullptr ? Isa::kBase
                 : f.vector == EllRowsOf<float>(Isa::kAvx512) ? Isa::kAvx512
                                                              : Isa::kAvx2;
  auto run = [](int64_t min_k) {
    return min_k > 0 ? "interleaved:" + std::to_string(min_k) : std::string("rows");
  };
  return "ell_f64=" + ell(IsaName(dt, true), d.min_k) + " ell_f32=" + ell(IsaName(ft, true), f.min_k) +
         " run_f64=" + run(InterleavedMinK<double>()) + " run_f32=" + run(InterleavedMinK<float>()) +
         " tanh=" + TanhVariant() + " gram=" + GramIsaName();
}

}  // namespace orc_native
