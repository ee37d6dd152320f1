"""reservoirpy 0.4.2's hyperparameter search on ``benchmarks/tune.py``'s task.

Run by the interpreter of ``benchmarks/.venvs/rpy`` (``tune.py --reservoirpy``
starts it); imports numpy and reservoirpy (``reservoirpy.hyper`` brings joblib
and tqdm), never orc or JAX. ``TASK_DIR`` holds what ``tune.py`` wrote:
``train.npy`` and ``validation.npy`` (the series orc's search uses) and
``task.json`` (reservoir size, spinup, window starts, horizon, VPT settings,
the data's scale, the search space and the number of candidates).

The objective is written the way ``reservoirpy.hyper`` documents it: build
``Reservoir(...) >> Ridge(...)`` from the sampled hyperparameters, ``fit`` on
the training series (``warmup`` = the spinup), score, return
``{"loss": ...}``. The score is orc's (``orc.tune.Forecast`` with
``metric="vpt"``): the reservoir is forced from the zero state over the
validation series; each window starts from the state after the samples
before it and runs ``horizon`` steps in closed loop (the output fed back);
its valid prediction time is ``orc.metrics.valid_prediction_time``'s (the
first step whose error ``||pred - truth|| / scale`` is not <= the
threshold, or the horizon; times dt times the Lyapunov exponent); the
candidate's VPT is the mean over windows. A window that leaves 100 times the
data's scale or is not finite fails the candidate (as orc's search fails
it): its loss is 0 (no valid time). ``loss = -mean VPT``.

The search is ``reservoirpy.hyper.parallel_research`` (``"hp_method":
"random"``, the one method it has; joblib's loky processes, ``n_jobs`` of
them), called once with ``n_jobs`` candidates to start the workers, then
timed on ``candidates`` candidates.

    python tune_reservoirpy.py TASK_DIR           # the search; TASK_DIR/result.json
    python tune_reservoirpy.py TASK_DIR --check   # the reference candidate
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import time
import warnings

import numpy as np


def valid_prediction_time(pred, truth, scale, threshold, dt, lyapunov_exponent):
    """``orc.metrics.valid_prediction_time`` (``normalization="mean_norm"``
    with a given scale), in NumPy."""
    err = np.linalg.norm(pred - truth, axis=1) / scale
    crossed = ~(err <= threshold)  # NaN is a crossing
    steps = int(np.argmax(crossed)) if crossed.any() else err.shape[0]
    return steps * dt * lyapunov_exponent


def build(task, *, sr, lr, input_scaling, bias, seed):
    """A ``Reservoir`` with orc's ``ESNForecaster`` layout: ``degree``
    normal weights in every row of ``W`` (orc: ``round(density N)`` per row),
    rescaled to spectral radius ``sr``, a dense ``Win`` uniform in
    ``[-input_scaling, input_scaling]``, the same scalar bias on every
    unit; its weights drawn from ``seed``."""
    from reservoirpy.mat_gen import normal, uniform
    from reservoirpy.nodes import Reservoir

    return Reservoir(
        units=task["res_dim"],
        sr=sr,
        lr=lr,
        input_scaling=input_scaling,
        bias=float(bias),
        W=normal(degree=task["degree"], direction="in"),
        Win=uniform,
        input_connectivity=1.0,
        seed=int(seed),
    )


def forecast_windows(esn, reservoir, validation, starts, horizon):
    """``(W, horizon, D)``: each window's closed loop from the state forced
    over the validation samples before its start."""
    esn.reset()  # force from the zero state, as orc does
    states = reservoir.run(validation)  # states[t]: after validation[t]
    zero = np.zeros(reservoir.units)
    preds = np.empty((len(starts), horizon, validation.shape[1]))
    for w, s in enumerate(starts):
        # from the state after validation[s - 2], feed validation[s - 1]: the
        # reservoir reaches states[s - 1] and the readout predicts sample s;
        # then each output is the next input
        reservoir.state = {"out": (states[s - 2] if s >= 2 else zero).copy()}
        x = validation[s - 1]
        for k in range(horizon):
            x = esn(x)
            preds[w, k] = x
    return preds


def score(preds, validation, task):
    """``(mean VPT, per-window VPTs, diverged)`` as ``orc.tune.Forecast``."""
    scale, horizon = task["scale"], task["horizon"]
    vpts = np.array([
        valid_prediction_time(p, validation[s : s + horizon], scale,
                              task["threshold"], task["dt"],
                              task["lyapunov_exponent"])
        for p, s in zip(preds, task["starts"], strict=True)
    ])  # fmt: skip
    big = np.max(np.abs(preds), axis=(1, 2))
    diverged = bool(np.any(~(big <= task["diverged_scale"] * scale)))
    return float(np.mean(vpts)), vpts, diverged


def evaluate(dataset, reservoir, ridge):
    """``(mean VPT, per-window VPTs, diverged)`` of ``reservoir >>
    Ridge(ridge)`` trained on the training series."""
    from reservoirpy.nodes import Ridge
    from scipy.linalg import LinAlgWarning

    train, validation, task = dataset
    esn = reservoir >> Ridge(ridge=ridge, fit_bias=False)
    with warnings.catch_warnings():
        # the smallest strengths are ill-conditioned: solved anyway
        warnings.simplefilter("ignore", LinAlgWarning)
        esn.fit(train[:-1], train[1:], warmup=task["spinup"])
    preds = forecast_windows(esn, reservoir, validation, task["starts"],
                             task["horizon"])  # fmt: skip
    return score(preds, validation, task)


def objective(dataset, config, *, sr, lr, input_scaling, bias, ridge, seed):
    """``reservoirpy.hyper``'s objective: ``loss = -mean VPT`` (0 for a
    failed candidate)."""
    try:
        reservoir = build(dataset[2], sr=sr, lr=lr, input_scaling=input_scaling,
                          bias=bias, seed=seed)  # fmt: skip
        vpt, per, diverged = evaluate(dataset, reservoir, ridge)
    except Exception as exc:  # parallel_research re-raises: one would end the search
        return {"loss": 0.0, "vpt": float("nan"), "failed": True, "reason": repr(exc)}
    reason = "forecast diverged" if diverged else None
    return {"loss": 0.0 if diverged else -vpt, "vpt": vpt, "failed": diverged,
            "reason": reason, "windows": per.tolist()}  # fmt: skip


def check(dataset, task_dir):
    """The reference candidate (task.json's ``reference``): scored with
    reservoirpy's own matrices (its seed), and with orc's matrices of it
    (``reference.npz``, if written), whose VPTs should equal orc's."""
    from reservoirpy.nodes import Reservoir
    from scipy import sparse

    ref = dataset[2]["reference"]
    t0 = time.perf_counter()
    out = objective(dataset, {}, **ref)
    out["seconds"] = time.perf_counter() - t0
    path = os.path.join(task_dir, "reference.npz")
    if os.path.exists(path):
        mats = np.load(path)
        reservoir = Reservoir(W=sparse.csr_array(mats["W"]), Win=mats["Win"],
                              bias=float(ref["bias"]), lr=ref["lr"])  # fmt: skip
        vpt, per, _ = evaluate(dataset, reservoir, ref["ridge"])
        out["orc_matrices"] = {"vpt": vpt, "windows": per.tolist()}
    return out


def load(task_dir):
    with open(os.path.join(task_dir, "task.json")) as f:
        task = json.load(f)
    train = np.load(os.path.join(task_dir, "train.npy"))
    validation = np.load(os.path.join(task_dir, "validation.npy"))
    scale = float(np.sqrt(np.mean(np.sum(train**2, axis=1))))
    if not np.isclose(scale, task["scale"], rtol=1e-12, atol=0):
        raise SystemExit(f"scale {scale} of train.npy differs from task.json's "
                         f"{task['scale']}")  # fmt: skip
    if min(task["starts"]) < 1 or max(task["starts"]) + task["horizon"] > len(
        validation
    ):
        raise SystemExit(
            f"window starts {task['starts']} do not fit the validation data"
        )
    return train, validation, task


def search(dataset, task, task_dir, n, exp, n_jobs):
    """One ``parallel_research`` of ``n`` candidates; ``(seconds, rows, best)``."""
    from reservoirpy.hyper import parallel_research

    space = dict(task["space"])
    space["seed"] = ["choice", *task["seeds"]]
    config = {"exp": exp, "hp_method": "random", "hp_max_evals": n,
              "seed": task["sampler_seed"], "hp_space": space}  # fmt: skip
    path = os.path.join(task_dir, f"{exp}.config.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    reports = os.path.join(task_dir, "reports")
    t0 = time.perf_counter()
    best_params, best_loss = parallel_research(
        objective, dataset, path, report_path=reports, n_jobs=n_jobs
    )
    seconds = time.perf_counter() - t0
    rows = []
    for name in sorted(glob.glob(os.path.join(reports, exp, "results", "*.json"))):
        with open(name) as f:
            rec = json.load(f)
        ret = rec["returned_dict"]
        rows.append({**rec["current_params"], "vpt": ret.get("vpt"),
                     "failed": ret.get("failed"), "reason": ret.get("reason"),
                     "seconds": ret.get("duration")})  # fmt: skip
    return seconds, rows, {"params": best_params, "loss": best_loss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task_dir")
    ap.add_argument("--check", action="store_true",
                    help="score task.json's reference candidate")  # fmt: skip
    a = ap.parse_args()
    train, validation, task = load(a.task_dir)
    dataset = (train, validation, task)
    import joblib
    import reservoirpy

    if a.check:
        print(json.dumps(check(dataset, a.task_dir)))
        return
    n, n_jobs = task["candidates"], task["n_jobs"]
    jobs = joblib.cpu_count() if n_jobs == -1 else n_jobs
    # start the loky workers (their imports) with one candidate each; the
    # timed call reuses them
    first_s, _, _ = search(dataset, task, a.task_dir, jobs, "start", n_jobs)
    seconds, rows, best = search(dataset, task, a.task_dir, n, "timed", n_jobs)
    ok = [r for r in rows if not r["failed"]]
    best_row = max(ok, key=lambda r: r["vpt"]) if ok else None
    busy = sum(r["seconds"] or 0.0 for r in rows)
    result = {
        "reservoirpy": reservoirpy.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "cpus": joblib.cpu_count(),
        "n_jobs": n_jobs, "workers": jobs, "candidates": n, "evaluated": len(rows),
        "ok": len(ok), "seconds": seconds, "per_second": n / seconds,
        "start_call": {"candidates": jobs, "seconds": first_s},
        "objective_seconds_mean": busy / max(len(rows), 1),
        "parallel_efficiency": busy / (seconds * jobs),
        "best": best_row, "best_loss": best["loss"], "rows": rows,
    }  # fmt: skip
    with open(os.path.join(a.task_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    best_vpt = "none" if best_row is None else f"{best_row['vpt']:.3f}"
    print(f"reservoirpy {reservoirpy.__version__} parallel_research: {n} candidates "
          f"({len(rows)} evaluated, {len(ok)} ok) in {seconds:.1f} s on {jobs} "
          f"workers = {n / seconds:.3f} candidates/s; best VPT {best_vpt}",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
