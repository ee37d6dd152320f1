"""What a search is worth: the best candidate of ``benchmarks/tune.py``'s
256-candidate search at N = 500 against orc's default ESN at N = 2000 (and
at N = 500), scored on held-out test windows that no selection saw.

Lorenz63 (dt = 0.01, the first 1000 samples dropped): T = 20000 training
samples, then a validation stretch of ``--val-windows`` windows of
``--horizon`` steps (the search selects on it), then a test stretch of
``--test-windows`` windows (windows do not overlap; 100 samples of warm-up
before the first of each stretch). A model is scored on a stretch as the
search scores it: the reservoir forced from the zero state over the
stretch, each window forecast from the state after the sample before it,
its valid prediction time (threshold 0.4, Lyapunov times, the training
data's scale) averaged over windows. The horizon must exceed what the
models reach (a VPT is capped at ``horizon x dt x 0.906``: at 1000 steps,
tune.py's throughput setting, every good model scores the cap, 9.06). The
search is tune.py's: 4 seeds x 8 Sobol draws of spectral radius, leak,
input scaling, bias x 8 ridge strengths. The default models are
``ESNForecaster(3, N, seed=s)`` with every other argument at ORC 0.4's
default, trained by ``train_ESNForecaster`` (spinup 100, default ridge),
for the search's 4 seeds, shown per seed and averaged. With
``--refine-steps S`` (default 30; 0 skips it) the search's best is then
refined by ``orc.tune.refine`` (S Adam steps on its short-horizon
validation loss, from the best candidate) and the refined model is scored
on the same test windows beside it.

    python benchmarks/tune_quality.py    # ~3 min on 2 cores (TUNE.md's figures)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import equinox as eqx
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc.forecaster import ESNForecaster, train_ESNForecaster  # noqa: E402
from orc.tune import Forecast, LogUniform  # noqa: E402
from tune import LYAP, SPACE  # noqa: E402  (benchmarks/tune.py, this folder)

DT = 0.01


def series(train: int, val: int, test: int):
    U, _ = orc.data.lorenz63(tN=(train + val + test + 1000) * DT, dt=DT)
    U = np.asarray(U)[1000:]
    return U[:train], U[train : train + val], U[train + val : train + val + test]


def scorer(task: Forecast):
    """The mean VPT of a model over ``task``'s windows of its validation
    stretch, as the search scores a candidate."""
    u = jnp.asarray(task.train)
    scale = jnp.sqrt(jnp.mean(jnp.sum(u**2, axis=1)))
    data = jnp.asarray(task.validation)
    starts = task.starts
    truths = jnp.stack([data[s : s + task.horizon] for s in starts])

    @eqx.filter_jit
    def score(model, data, truths):
        states = model.force(data, model.driver.default_state())
        preds = jnp.stack([model.forecast(task.horizon, states[s - 1]) for s in starts])
        vpt = jax.vmap(
            lambda p, t: orc.metrics.valid_prediction_time(
                p,
                t,
                dt=task.dt,
                lyapunov_exponent=task.lyapunov_exponent,
                scale=scale,
            )
        )(preds, truths)
        return vpt

    return lambda model: np.asarray(score(model, data, truths))


def stretches(a, series, dt: float, lyap: float):
    """The training data and the validation and test tasks of a study with
    options ``a``: ``series(train, val, test)`` cut into three stretches,
    each window stretch 100 samples of warm-up and windows that do not
    overlap. Returns ``(train, task, test_task)``."""
    val_len = 100 + a.val_windows * a.horizon
    test_len = 100 + a.test_windows * a.horizon
    train, val, test = series(a.train, val_len, test_len)
    common = dict(spinup=100, warmup=100, horizon=a.horizon, dt=dt,
                  lyapunov_exponent=lyap)  # fmt: skip
    task = Forecast(train, val, windows=a.val_windows, **common)
    return train, task, Forecast(train, test, windows=a.test_windows, **common)


def study_arguments(doc: str, name: str, **defaults) -> argparse.ArgumentParser:
    """The options of a tuned-against-default study (training length,
    windows, search budget, output file), with ``defaults`` of its own."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    options = dict(train=20000, horizon=2500, val_windows=30, test_windows=30,
                   seeds=4, draws=8, betas=8)  # fmt: skip
    for option, value in {**options, **defaults}.items():
        ap.add_argument("--" + option.replace("_", "-"), type=int, default=value)
    out = os.path.join("benchmarks", "runs", f"{name}.json")
    ap.add_argument("--out", default=out)
    return ap


def main():
    ap = study_arguments(__doc__, "tune_quality")
    ap.add_argument("--default-sizes", default="2000,500")
    ap.add_argument("--refine-steps", type=int, default=30)
    a = ap.parse_args()
    train, task, test_task = stretches(a, series, DT, LYAP)
    on_val, on_test = scorer(task), scorer(test_task)
    val_len, test_len = len(task.validation), len(test_task.validation)
    print(f"Lorenz63: train {a.train}, validation {val_len} ({a.val_windows} "
          f"windows), test {test_len} ({a.test_windows} windows of {a.horizon} "
          "steps)")  # fmt: skip

    t0 = time.perf_counter()
    res = orc.tune.search(
        ESNForecaster, SPACE, task, fixed={"data_dim": 3, "res_dim": 500},
        draws=a.draws, seeds=a.seeds, beta=LogUniform(1e-10, 1e-3),
        ridge_points=a.betas, progress=False,
    )  # fmt: skip
    search_s = time.perf_counter() - t0
    best = res.best_model
    val_check = float(np.mean(on_val(best)))
    tuned = on_test(best)
    n = a.seeds * a.draws * a.betas
    print(f"search: {n} candidates in {search_s:.1f} s; best on validation "
          f"{res.best['score']:.3f} (rescored {val_check:.3f}); {res.best}")  # fmt: skip
    rows = [{"model": "tuned N=500", "params": _plain(res.best),
             "validation": val_check, "test": float(np.mean(tuned)),
             "test_windows": tuned.tolist()}]  # fmt: skip
    if a.refine_steps:
        fixed = {"data_dim": 3, "res_dim": 500}
        rows.append(refined_row("tuned+refined N=500", task, res.best, fixed,
                                a.refine_steps, on_val, on_test))  # fmt: skip
    for size in [int(s) for s in a.default_sizes.split(",")]:
        per_seed = []
        for seed in range(a.seeds):
            model = ESNForecaster(3, size, seed=seed)
            model, _ = train_ESNForecaster(model, jnp.asarray(train), spinup=100)
            per_seed.append(on_test(model))
        means = [float(np.mean(v)) for v in per_seed]
        rows.append({"model": f"default N={size}", "seeds": list(range(a.seeds)),
                     "test_per_seed": means, "test": float(np.mean(means))})  # fmt: skip
    print(f"\nmean VPT over {a.test_windows} held-out test windows (Lyapunov times)")
    for r in rows:
        extra = (f" (seeds {', '.join(f'{m:.2f}' for m in r['test_per_seed'])})"
                 if "test_per_seed" in r else "")  # fmt: skip
        print(f"  {r['model']:16s} {r['test']:6.2f}{extra}")
    write_report(a.out, settings=vars(a), search_s=search_s, rows=rows)


def refined_row(name, task, best, fixed, steps, on_val, on_test, **refine) -> dict:
    """``orc.tune.refine`` from the search's ``best`` (``steps`` Adam steps;
    ``refine``: its other options, e.g. ``horizon``), the refined model scored
    on the validation and test windows: a row of the report, with the
    validation loss before and after."""
    t0 = time.perf_counter()
    ref = orc.tune.refine(
        ESNForecaster, task, best, fixed=fixed, steps=steps, progress=False, **refine
    )
    refine_s = time.perf_counter() - t0
    refined = ref.models[0]
    refined_test = on_test(refined)
    print(f"refine: {steps} steps in {refine_s:.1f} s; validation loss "
          f"{ref.start_loss[0]:.4g} -> {ref.loss[0]:.4g}; {ref.points[0]}",
          flush=True)  # fmt: skip
    return {"model": name, "params": _plain(ref.points[0]), "refine": refine,
            "validation": float(np.mean(on_val(refined))),
            "test": float(np.mean(refined_test)),
            "test_windows": refined_test.tolist(),
            "loss": [float(ref.start_loss[0]), float(ref.loss[0])],
            "refine_s": refine_s}  # fmt: skip


def write_report(path: str, **fields) -> None:
    """``fields`` and the machine's facts as JSON at ``path``."""
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "jax": jax.__version__}  # fmt: skip
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"machine": machine, **fields}, f, indent=1)
    print(f"written {path}")


def _plain(row):
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}


if __name__ == "__main__":
    main()
