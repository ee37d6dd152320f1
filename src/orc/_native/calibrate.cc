// Calibration: which variant is fastest on this machine, measured. Run by
// the build (the orc_calibrate program, see CMakeLists.txt), whose output
// becomes calibration.txt next to the module; `orc info --calibrate` runs it
// again and prints what it finds. Each candidate runs on a fixed synthetic
// workload of about a reservoir's size; the best of several repeats counts.
// A few seconds at most.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "esn.h"
#include "gram.h"
#include "isa.h"
#include "orc_native.h"
#include "rows.h"

namespace orc_native {

// The variant to run from measured times: times[c] is candidate c's (c = 0
// the portable one); a wider candidate must beat every narrower pick by
// `margin` (a fraction: noise must not flip a choice) to be taken.
size_t ChooseFastest(const std::vector<double>& times, double margin) {
  size_t best = 0;
  for (size_t c = 1; c < times.size(); ++c) {
    if (times[c] < times[best] * (1.0 - margin)) best = c;
  }
  return best;
}

// The ELL choice from times[c][j] of candidate c (c = 0 the scalar loop) at
// row lengths ks[j] (increasing): a vector candidate qualifies from the
// shortest length on from which it beats the scalar loop by `margin` at
// every longer one; of those qualifying at the longest length, the fastest
// there is taken, a wider one (later in the list: what the CPU flags would
// pick) also when it is within `margin` of a narrower one (the measurement
// runs the loop alone, where the narrow loops' extra loads cost least: on an
// AVX-512 Xeon the AVX2 loop measured 0.6% faster at 40 entries and trained
// 10% slower at res_dim 2000). Returns {candidate, shortest length} ({0, 0}:
// scalar).
std::pair<size_t, int64_t> ChooseEll(const std::vector<std::vector<double>>& times,
                                     const std::vector<int64_t>& ks, double margin) {
  std::pair<size_t, int64_t> pick{0, 0};
  double best = 0;
  const size_t last = ks.size() - 1;
  for (size_t c = 1; c < times.size(); ++c) {
    size_t from = ks.size();
    while (from > 0 && times[c][from - 1] < times[0][from - 1] * (1.0 - margin)) --from;
    if (from == ks.size()) continue;  // loses at the longest rows
    if (pick.first == 0 || times[c][last] < best * (1.0 + margin)) {
      pick = {c, ks[from]};
      best = times[c][last];
    }
  }
  return pick;
}

namespace {

// Best of `repeats` runs of fn, in microseconds (after one run to warm up).
template <typename F>
double BestMicros(int repeats, const F& fn) {
  fn();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return best;
}

// The candidates this CPU runs, portable first.
std::vector<Isa> Candidates() {
  std::vector<Isa> out = {Isa::kBase};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (SimdAllowed() && CpuRuns(isa)) out.push_back(isa);
  }
  return out;
}

// Deterministic pseudo-random numbers for the workloads (no <random> state
// shared with anything).
struct Lcg {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t Next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
  }
  double Uniform() { return static_cast<double>(Next()) / 9007199254740992.0 - 0.5; }
};

// The ELL row loops (key ell_f32 / ell_f64) and, for the multi-step
// kernels, the interleaved loop against the row loop picked (run_key).
template <typename T>
std::string CalibrateEll(const char* key, const char* run_key, std::string& notes) {
  const int64_t n = 2000;
  const std::vector<int64_t> ks = {4, 8, 12, 16, 24, 40};
  const std::vector<Isa> cands = Candidates();
  Lcg rng;
  std::vector<T> x(n), z(n);
  for (auto& e : x) e = static_cast<T>(rng.Uniform());
  std::vector<std::vector<double>> times(cands.size(), std::vector<double>(ks.size()));
  const bool interleaved = SimdAllowed() && CpuRuns(Isa::kAvx2);
  std::vector<double> il_times(ks.size());
  // Four matrices used in turn: a reservoir's matrix streams from beyond
  // L2 in a real run (the Gram and the states share the caches with it); one
  // matrix timed over and over would sit in L2 and favour the loops that
  // issue more loads (on an AVX-512 Xeon that picked the AVX2 loop, 10%
  // slower than the gathers in training at res_dim 2000).
  constexpr int kMatrices = 4;
  for (size_t j = 0; j < ks.size(); ++j) {
    const int64_t k = ks[j];
    std::vector<T> v(kMatrices * n * k);
    std::vector<int32_t> idx(kMatrices * n * k);
    for (auto& e : v) e = static_cast<T>(rng.Uniform());
    for (auto& e : idx) e = static_cast<int32_t>(rng.Next() % n);
    for (size_t c = 0; c < cands.size(); ++c) {
      const EllRowsFn<T> fn = c == 0 ? static_cast<EllRowsFn<T>>(EllRowsScalar<T>)
                                     : EllRowsOf<T>(cands[c]);
      times[c][j] = BestMicros(9, [&] {
                      for (int m = 0; m < kMatrices; ++m) {
                        fn(v.data() + m * n * k, idx.data() + m * n * k, k, x.data(), z.data(),
                           0, n);
                      }
                    }) / kMatrices;
    }
#ifdef ORC_X86_DISPATCH
    if (interleaved) {
      const Interleaved<T> il(v.data(), idx.data(), kMatrices, n, k);
      il_times[j] = BestMicros(9, [&] {
                      for (int m = 0; m < kMatrices; ++m) {
                        EllRowsInterleaved<T>(v.data() + m * n * k, idx.data() + m * n * k,
                                              il.ValuesOf(m), il.ColumnsOf(m), k, x.data(),
                                              z.data(), 0, n);
                      }
                    }) / kMatrices;
    }
#endif
  }
  const auto pick = ChooseEll(times, ks);
  notes += std::string("# ") + key + ", us per product of 2000 rows, by entries per row:\n";
  for (size_t c = 0; c < cands.size(); ++c) {
    notes += std::string("#   ") + IsaName(cands[c], true);
    for (size_t j = 0; j < ks.size(); ++j) {
      notes += " k" + std::to_string(ks[j]) + "=" + std::to_string(times[c][j]).substr(0, 6);
    }
    notes += "\n";
  }
  std::string line = std::string(key) + "=" + IsaName(cands[pick.first], true);
  if (pick.first != 0) line += ":" + std::to_string(pick.second);
  line += "\n" + std::string(run_key) + "=";
  if (!interleaved) return line + "rows\n";
  // the multi-step kernels: the interleaved loop against the row loop the
  // products run at each length (a copy of the matrix per call, not timed:
  // one product's worth for thousands of steps)
  std::vector<double> rows(ks.size());
  for (size_t j = 0; j < ks.size(); ++j) {
    rows[j] = times[pick.first != 0 && ks[j] >= pick.second ? pick.first : 0][j];
  }
  const auto run_pick = ChooseEll({rows, il_times}, ks);
  notes += std::string("#   interleaved");
  for (size_t j = 0; j < ks.size(); ++j) {
    notes += " k" + std::to_string(ks[j]) + "=" + std::to_string(il_times[j]).substr(0, 6);
  }
  notes += "\n";
  if (run_pick.first == 0) return line + "rows\n";
  return line + "interleaved:" + std::to_string(run_pick.second) + "\n";
}

}  // namespace

std::string Calibrate() {
  std::string notes, lines;
  lines += CalibrateEll<double>("ell_f64", "run_f64", notes);
  lines += CalibrateEll<float>("ell_f32", "run_f32", notes);
  const std::vector<Isa> cands = Candidates();
  {  // the activation over a reservoir's worth of values
    Lcg rng;
    std::vector<double> z(4096), src(4096);
    for (auto& e : src) e = 8 * rng.Uniform();
    std::vector<double> times;
    for (Isa isa : cands) {
      const TanhFn fn = TanhOf(isa);
      times.push_back(BestMicros(30, [&] {
        std::copy(src.begin(), src.end(), z.begin());
        fn(z.data(), static_cast<int64_t>(z.size()));
      }));
    }
    notes += "# tanh, us per 4096 values:";
    for (size_t c = 0; c < cands.size(); ++c) {
      notes += std::string(" ") + IsaName(cands[c]) + "=" + std::to_string(times[c]).substr(0, 6);
    }
    notes += "\n";
    lines += std::string("tanh=") + IsaName(cands[ChooseFastest(times)]) + "\n";
  }
  {  // a Gram update of 256 rows of 512 features, float64
    const int64_t f = 512, k = 256;
    Lcg rng;
    std::vector<double> a(k * f), g(f * f);
    for (auto& e : a) e = rng.Uniform();
    std::vector<double> times;
    GramWork work;
    for (Isa isa : cands) {
      const GramKernels<double> kernels = GramKernelsOf<double>(isa);
      times.push_back(BestMicros(5, [&] {
        kernels.gram(g.data(), f, a.data(), f, f, k, 0, f, false, work);
      }));
    }
    notes += "# gram, us per update of 256 rows x 512 features (float64):";
    for (size_t c = 0; c < cands.size(); ++c) {
      notes += std::string(" ") + IsaName(cands[c]) + "=" + std::to_string(times[c]).substr(0, 7);
    }
    notes += "\n";
    lines += std::string("gram=") + IsaName(cands[ChooseFastest(times)]) + "\n";
  }
  return "# orc native kernel calibration (measured by orc_calibrate at build time)\n" + notes +
         lines;
}

}  // namespace orc_native
