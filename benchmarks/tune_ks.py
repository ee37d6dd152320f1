"""What a search is worth on Kuramoto-Sivashinsky with parallel reservoirs:
the best candidate of an ``orc.tune.search`` against orc's default ESN of
the same size, both scored on held-out test windows no selection saw.

KS on a periodic domain L = 22 with 64 grid points, sampled every 0.25
(``examples/ks_parallel.py``'s data: the first 1000 samples dropped), the
largest Lyapunov exponent 0.043 (one Lyapunov time ~ 93 samples). The
models are ``ESNForecaster(64, res_dim, chunks=8, locality=6,
periodic=True)``: 8 reservoirs of ``--res-dim`` nodes, each driven by its 8
grid points and 6 on either side (Pathak et al. 2018's scheme). The
default is that model with every other argument at its default (ORC 0.4's
hyperparameters), trained by ``train_ESNForecaster`` (spinup 100, the
default ridge strength), for each of the search's seeds. The search: those
seeds x ``--draws`` Sobol draws of spectral radius, leak, input scaling and
bias (``benchmarks/tune.py``'s space) x ``--betas`` ridge strengths
(log-uniform 1e-10 to 1e-3), selected on the validation stretch; the test
stretch comes after it. Scores as in ``benchmarks/tune_quality.py``: the
reservoir forced from the zero state over the stretch, each window
forecast from the state before it, its valid prediction time (threshold
0.4, the training data's scale) in Lyapunov times, averaged over windows.
With ``--refine-steps S`` (default 0: skipped) the search's best is then
refined by ``orc.tune.refine`` (``benchmarks/tune_quality.py``'s
``refined_row``) and scored beside it; ``--refine-from RUN.json`` takes the
best from an earlier run's report instead of searching again (the defaults
are scored again, the search's row is copied); ``--refine-horizon`` sets
the closed-loop steps of its loss. At the default sizes (8 x 500 nodes,
T = 20000) 10 steps take ~7 min and peak at 9-10 GB (TUNE.md, "Gradient
refinement on KS"); it is off by default because it did not raise the test
VPT there.

    python benchmarks/tune_ks.py     # ~10 min on 2 cores, plus the refinement
"""

from __future__ import annotations

import json
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc.forecaster import ESNForecaster, train_ESNForecaster  # noqa: E402
from orc.tune import LogUniform  # noqa: E402
from tune import SPACE  # noqa: E402  (benchmarks/tune.py, this folder)
from tune_quality import (  # noqa: E402
    _plain,
    refined_row,
    scorer,
    stretches,
    study_arguments,
    write_report,
)

L, NX, DT, LYAP = 22.0, 64, 0.25, 0.043
CHUNKS, LOCALITY = 8, 6


def series(train: int, val: int, test: int, seed: int = 2018):
    """``examples/ks_parallel.py``'s trajectory, cut into three stretches."""
    n = 1000 + train + val + test
    rng = np.random.default_rng(seed)
    u0 = 0.5 * rng.standard_normal(NX + 1)
    u0 -= u0[:NX].mean()
    U, _ = orc.data.KS_1D(tN=n * DT, u0=u0, dt=DT, domain=(0, L), Nx=NX + 1)
    U = np.asarray(U)[1000:, :NX]
    return U[:train], U[train : train + val], U[train + val : train + val + test]


def main():
    ap = study_arguments(
        __doc__, "tune_ks", horizon=1000, val_windows=20, test_windows=20,
        res_dim=500, seeds=2, draws=16, refine_steps=0,
    )  # fmt: skip
    ap.add_argument("--refine-from", default=None)
    ap.add_argument(
        "--refine-horizon", type=int, default=20,
        help="closed-loop steps per window in the refinement's loss",
    )  # fmt: skip
    a = ap.parse_args()
    train, task, test_task = stretches(a, series, DT, LYAP)
    on_val, on_test = scorer(task), scorer(test_task)
    val_len, test_len = len(task.validation), len(test_task.validation)
    fixed = dict(data_dim=NX, res_dim=a.res_dim, chunks=CHUNKS, locality=LOCALITY,
                 periodic=True)  # fmt: skip
    print(f"KS L={L}: train {a.train}, validation {val_len} ({a.val_windows} "
          f"windows), test {test_len} ({a.test_windows} windows of {a.horizon} "
          f"steps, {a.horizon * DT * LYAP:.2f} Lyapunov times)", flush=True)  # fmt: skip

    rows = []
    for seed in range(a.seeds):
        model = ESNForecaster(**fixed, seed=seed)
        t0 = time.perf_counter()
        model, _ = train_ESNForecaster(model, train, spinup=100, return_states=False)
        train_s = time.perf_counter() - t0
        val_v, test_v = on_val(model), on_test(model)
        rows.append({"model": f"default seed {seed}", "validation": float(val_v.mean()),
                     "test": float(test_v.mean()), "test_windows": test_v.tolist(),
                     "train_s": train_s})  # fmt: skip
        print(f"default seed {seed}: validation {val_v.mean():.3f}, test "
              f"{test_v.mean():.3f} (training {train_s:.1f} s)", flush=True)  # fmt: skip

    if a.refine_from:  # the search's row of an earlier run
        with open(a.refine_from) as f:
            earlier = json.load(f)
        search_s, failed = earlier["search_s"], earlier["failed"]
        rows.append(next(r for r in earlier["rows"] if r["model"] == "tuned"))
        best = rows[-1]["params"]
        print(f"search: from {a.refine_from}; best {best}", flush=True)
    else:
        t0 = time.perf_counter()
        res = orc.tune.search(
            ESNForecaster, SPACE, task, fixed=fixed, draws=a.draws, seeds=a.seeds,
            beta=LogUniform(1e-10, 1e-3), ridge_points=a.betas, progress=False,
        )  # fmt: skip
        search_s = time.perf_counter() - t0
        best = res.best
        val_check, tuned = (
            float(np.mean(on_val(res.best_model))),
            on_test(res.best_model),
        )
        n = a.seeds * a.draws * a.betas
        failed = sum(r["status"] != "ok" for r in res.rows)
        print(f"search: {n} candidates ({failed} failed) in {search_s:.1f} s; best "
              f"on validation {best['score']:.3f} (rescored {val_check:.3f}); "
              f"{best}", flush=True)  # fmt: skip
        rows.append({"model": "tuned", "params": _plain(best), "validation": val_check,
                     "test": float(np.mean(tuned)), "test_windows": tuned.tolist()})  # fmt: skip
    if a.refine_steps:
        rows.append(refined_row("tuned+refined", task, best, fixed, a.refine_steps,
                                on_val, on_test, horizon=a.refine_horizon))  # fmt: skip
    default = float(
        np.mean([r["test"] for r in rows if r["model"].startswith("default")])
    )
    ratio = next(r["test"] for r in rows if r["model"] == "tuned") / default
    print(f"\nmean VPT over {a.test_windows} held-out test windows (Lyapunov times)")
    for r in rows:
        print(f"  {r['model']:16s} {r['test']:6.3f}")
    print(f"  tuned / default mean: {ratio:.2f}x")
    write_report(a.out, settings=vars(a), search_s=search_s, failed=failed,
                 default_mean=default, tuned_over_default=ratio, rows=rows)  # fmt: skip


if __name__ == "__main__":
    main()
