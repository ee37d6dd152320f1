// The threads of the native kernels: XLA's pool for a call (Workers), one
// helper task (Helper), units claimed from a counter (ParallelFor), and the
// per-step hand-over of the multi-step kernels (SharedSteps).
#ifndef ORC_WORKERS_H_
#define ORC_WORKERS_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Threads of the native kernels: one model. Every kernel that uses more than
// its calling thread hands tasks to XLA's CPU thread pool for the call (the
// intra-op pool XLA sizes from the CPUs the process may run on), capped by
// ORC_NATIVE_THREADS; no kernel starts a thread of its own, and none changes
// BLAS's (process-wide) thread count.
//
// A pool task may start late or, when every pool thread is busy (another
// computation, a vmapped call whose pieces run at once), not before the call
// would end. So no call ever waits for a task to *start*: work is claimed
// through atomics, the calling thread takes whatever no task has claimed,
// and a task that starts after its call has ended finds nothing to do and
// touches nothing but the small shared record that tells it so. Which thread
// computes a piece never changes the piece's result (each output element is
// computed by one thread in a fixed order), so results are the same bits on
// any number of threads and whatever the timing.
namespace orc_native {

// The cap from ORC_NATIVE_THREADS (a positive integer), 0 when not set.
inline int64_t ThreadCap() {
  static const int64_t cap = [] {
    const char* env = std::getenv("ORC_NATIVE_THREADS");
    const int64_t v = env != nullptr ? std::atoll(env) : 0;
    return v > 0 ? v : int64_t{0};
  }();
  return cap;
}

// Threads of the last pool a handler was given (for orc.show_config()).
inline std::atomic<int64_t> g_pool_threads{0};

// Where a call's helper tasks go, and how many threads (this one included)
// may work on it. Default: this thread alone.
class Workers {
 public:
  using Task = std::function<void()>;
  using Scheduler = std::function<void(Task)>;

  Workers() = default;
  Workers(Scheduler schedule, int64_t threads)
      : schedule_(std::move(schedule)), threads_(schedule_ ? std::max<int64_t>(1, threads) : 1) {}

  // XLA's pool of a handler call, capped by ORC_NATIVE_THREADS.
  static Workers Of(ffi::ThreadPool& pool) {
    int64_t threads = std::max<int64_t>(1, pool.num_threads());
    g_pool_threads.store(threads, std::memory_order_relaxed);
    if (ThreadCap() > 0) threads = std::min(threads, ThreadCap());
    return Workers([&pool](Task task) { pool.Schedule(std::move(task)); }, threads);
  }

  int64_t threads() const { return threads_; }
  void Schedule(Task task) const { schedule_(std::move(task)); }

 private:
  Scheduler schedule_;
  int64_t threads_ = 1;
};

inline void SpinPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// One round of a spin-wait: a pause and, every `limit` rounds, a yield of
// the thread (so that on a crowded machine the thread waited for can run).
inline void SpinRound(int64_t& spins, int64_t limit) {
  SpinPause();
  if (++spins > limit) {
    std::this_thread::yield();
    spins = 0;
  }
}

// One helper task for the duration of a call: `work` runs at most once, on a
// pool thread, and only if that thread claims it before the call gives up on
// it; the call ends (Finish, or the destructor) only once `work` is not
// running and never will. `work` may refer to the caller's locals: it is
// never called after Finish.
class Helper {
 public:
  Helper(const Workers& workers, std::function<void()> work) {
    if (workers.threads() < 2) return;
    shared_ = std::make_shared<Shared>();
    shared_->work = std::move(work);
    shared_->owner = std::this_thread::get_id();
    workers.Schedule([s = shared_] {
      int expected = kPending;
      // A pool that cannot take tasks runs them in the scheduling thread:
      // leave this one to the caller, which would otherwise wait for itself.
      if (std::this_thread::get_id() == s->owner) return;
      if (!s->phase.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel)) return;
      s->work();
      s->phase.store(kDone, std::memory_order_release);
    });
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  ~Helper() { Finish(); }

  // Whether `work` has started (or finished); when it has not, it never
  // will: this call claims it.
  bool Started() {
    if (!shared_) return false;
    int expected = kPending;
    if (shared_->phase.compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel)) {
      return false;
    }
    return expected != kCancelled;
  }

  // Started(), after waiting up to `micros` microseconds for the start.
  bool AwaitStart(int64_t micros) {
    if (!shared_) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    int64_t spins = 0;
    while (shared_->phase.load(std::memory_order_acquire) == kPending) {
      SpinPause();
      if ((++spins & 255) == 0 && std::chrono::steady_clock::now() > until) break;
    }
    return Started();
  }

  // Returns once `work` is over or certain never to run.
  void Finish() {
    if (!Started()) return;
    int64_t spins = 0;
    while (shared_->phase.load(std::memory_order_acquire) != kDone) SpinRound(spins, 1 << 12);
  }

 private:
  enum : int { kPending, kRunning, kDone, kCancelled };
  struct Shared {
    std::atomic<int> phase{kPending};
    std::function<void()> work;
    std::thread::id owner;
  };
  std::shared_ptr<Shared> shared_;
};

// body(unit, worker) for every unit in [0, units), each exactly once, on
// this thread (worker 0) and up to threads - 1 helpers (workers 1, 2, ...);
// returns when every unit is done. Units are claimed in order from one
// counter, so this thread never waits for a unit that no thread holds.
// `worker` indexes per-thread scratch (fewer than workers.threads()).
template <typename F>
void ParallelFor(const Workers& workers, int64_t units, const F& body) {
  if (units <= 0) return;
  const int64_t helpers = std::min<int64_t>(workers.threads() - 1, units - 1);
  if (helpers <= 0) {
    for (int64_t u = 0; u < units; ++u) body(u, int64_t{0});
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&](int64_t worker) {
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < units;) body(u, worker);
  };
  std::vector<std::unique_ptr<Helper>> team;
  team.reserve(static_cast<size_t>(helpers));
  for (int64_t h = 1; h <= helpers; ++h) {
    team.push_back(std::make_unique<Helper>(workers, [&work, h] { work(h); }));
  }
  work(0);
  team.clear();  // waits for the units helpers hold; cancels helpers not started
}

// How long a call that shares every step between two threads (the ESN runs)
// waits for its helper to start before it runs alone: a pool thread that is
// idle starts in microseconds; one that is busy elsewhere may not for long.
constexpr int64_t kJoinMicros = 2000;

// Steps finished by one thread of the run, on a cache line of its own.
struct alignas(64) StepCounter {
  std::atomic<int64_t> steps{0};

  // Spins until `steps` reaches t (yielding now and then, `spins` counts).
  void WaitFor(int64_t t, int64_t& spins) const {
    while (steps.load(std::memory_order_acquire) < t) SpinRound(spins, 1 << 16);
  }
};

// run(w, used) on this thread (w = 0) and, when `share` and the workers
// allow, on one helper task (w = 1) at the same time; `used` is how many
// run it (1 when the helper did not start within kJoinMicros). Both halves
// wait for each other's steps, so the split is fixed before either starts.
template <typename F>
void OnStepThreads(const Workers& workers, bool share, const F& run) {
  if (!share || workers.threads() < 2) {
    run(0, 1);
    return;
  }
  Helper helper(workers, [&run] { run(1, 2); });
  run(0, helper.AwaitStart(kJoinMicros) ? 2 : 1);
}

// Steps [0, steps) of a computation whose every step reads the whole of the
// step before it (the ESN runs and forecasts), the `width` rows of each step
// shared between this thread and, when `share` and the workers allow, one
// helper task (OnStepThreads). Thread w of `used` owns the rows [w width /
// used, (w + 1) width / used) of every step and, before step t, waits until
// the other thread has finished step t - 1. One hand-over per step and
// thread: claiming 128-row units dynamically cost 30 contended atomic
// operations per step, a third of the step at res_dim 2000.
//
// make_step(w, used) is called on thread w, once, and returns its step function
// (whose scratch is then that thread's own memory): step(t, lo, hi) computes
// rows [lo, hi) of step t and returns whether the loop goes on (false: step t
// was the last, and nothing waits for it). before(t, w) runs on thread w
// before it waits for step t - 1 (work that does not read that step).
template <typename MakeStep, typename Before>
void SharedSteps(const Workers& workers, bool share, int64_t steps, int64_t width,
                 const MakeStep& make_step, const Before& before) {
  StepCounter counters[2];
  OnStepThreads(workers, share, [&](int w, int used) {
    const int64_t lo = w * width / used, hi = (w + 1) * width / used;
    StepCounter& mine = counters[w];
    const StepCounter& other = counters[1 - w];
    auto step = make_step(w, used);
    int64_t spins = 0;
    for (int64_t t = 0; t < steps; ++t) {
      before(t, w);
      if (used > 1) other.WaitFor(t, spins);
      if (!step(t, lo, hi)) break;
      mine.steps.store(t + 1, std::memory_order_release);
    }
  });
}
}  // namespace orc_native

#endif  // ORC_WORKERS_H_
