"""dysts panel: forecast skill on the chaotic flows of the dysts database.

Run from the repository root with our interpreter::

    .venv/bin/python benchmarks/science/dysts_panel.py --flows all --seeds 3
    .venv/bin/python benchmarks/science/dysts_panel.py --quick      # smoke run
    .venv/bin/python benchmarks/science/dysts_panel.py --report-only

Each library runs in its own interpreter through the side-by-side harness
(``benchmarks/harness/envs.py`` for the virtualenvs, ``benchmarks/run.py``'s
``run_job`` for the subprocesses): dysts in ``benchmarks/.venvs/dysts``, ours in
``.venv`` (``PYTHONPATH=src``), ORC 0.4.0 in ``benchmarks/.venvs/orc04`` and
reservoirpy 0.4.2 in ``benchmarks/.venvs/rpy``.  Outputs:
``benchmarks/science/dysts_results.csv`` (one row per flow),
``dysts_results.md`` (tables) and ``dysts_panel.png`` (figure), all written
from the cached forecasts, so ``--report-only`` rebuilds them without
retraining.  Caches live under ``benchmarks/.cache/dysts``; an interrupted run
resumes where it stopped.

Protocol
--------
1. Flows: dysts' continuous-time list (``get_attractor_list("continuous")``),
   ``--flows all`` or the first ``K`` of that list in a fixed shuffled order
   (``numpy.random.default_rng(0).permutation`` of the sorted names), or names.
2. Data: ``make_trajectory(N_POINTS, pts_per_period=100, resample=True)`` from
   the flow's stored initial condition (dysts' own integrator wrapper, with
   ``method="DOP853", rtol=atol=1e-10`` instead of its default Radau at 1e-12,
   which is ~100x slower without a stiff problem; a per-flow limit of
   ``INTEGRATE_TIMEOUT_S``).  The sampling step ``dt`` is period / 100.  The
   first ``N_TRANSIENT`` points are dropped, the next ``N_TRAIN`` are the
   training split, the rest hold ``N_WINDOWS`` disjoint test windows of
   ``SPINUP`` spin-up points followed by ``horizon`` points to forecast.
   A flow is rejected, with its reason, when it has no stored positive
   Lyapunov exponent or period, the integration does not finish, times out,
   produces a NaN/inf or ``|x| > 1e8``, a coordinate is constant on the
   training split, or the test split is not stationary (a per-dimension std
   outside [1/2, 2] times the training split's: collapse onto a fixed point,
   or a transient still growing).
3. Standardisation: every split is standardised with the training split's
   per-dimension mean and standard deviation.
4. Horizon: ``min(MAX_HORIZON, ceil(MAX_LYAP_TIMES / (lambda * dt)))`` steps,
   ``lambda`` dysts' stored ``maximum_lyapunov_estimated``.
5. Score: valid prediction time with ``orc.metrics.valid_prediction_time(...,
   normalization="feature_std", scale=1, threshold=0.4)`` (each dimension
   divided by its training standard deviation, which is 1 after step 3), in
   Lyapunov times (steps * dt * lambda).  A non-finite forecast counts as a
   crossing.  Per (flow, seed): the mean over the windows; per flow: the mean
   over the reservoir seeds.  A window that never crosses is capped at the
   horizon (counted in the report).
6. Columns:
   ``esn``: ours, ``ESNForecaster(data_dim, res_dim=N, seed=s)`` with its
   defaults (ORC 0.4's hyperparameters), ``train_RCForecaster``,
   ``forecast_from_IC``;
   ``esn_orc04``: the same with ``construction="orc04"`` (ORC 0.4's exact
   random matrices: an ablation of the random draw);
   ``orc04``: ORC 0.4.0's ``ESNForecaster`` defaults in its own environment;
   ``rpy``: reservoirpy 0.4.2 with ORC's default hyperparameters
   (``benchmarks/workloads/reservoirpy_api.py``'s model);
   ``nvar``: ours ``NVARForecaster(dim)`` with its defaults (k=2,
   ``s="auto"``, ``order="auto"``: 3 on every panel flow) and
   ``train_NVARForecaster``'s (beta 2.5e-6, standardised features,
   ``input_noise="auto"``: 1e-3 to 1e-1 of each dimension's std, chosen by
   ``orc.forecaster.select_input_noise`` on the last 20% of the training
   split); ``s="auto"`` is ``orc.forecaster.nvar_stride``:
   ``s = max(1, round(P / NVAR_TAPS_PER_PERIOD))`` (30) where ``P`` (in
   samples) is the dominant period of the training data
   (``orc.metrics.dominant_period``: the peak of the power spectrum averaged
   over dimensions, among periods of at most a tenth of the record, 1000
   samples);
   ``nvar_paper``: the same with Gauthier et al.'s ``order=2`` and no input
   noise (the library's defaults until 2026-11).
   ``tuned``: ours, the ``esn`` model (same ``res_dim``, seeds, training
   and forecasts) with spectral radius, leak, input scaling, bias and ridge
   strength chosen per flow by ``orc.tune.search`` on the training split
   alone (``workloads/orc_forecast.py``'s ``tune``: fit on its first 7000
   samples, 4 validation windows in the last 3000; 1 seed x 16 Sobol draws x
   8 strengths = 128 candidates per flow); the test windows are never seen
   by the selection. The chosen values are saved beside the forecasts
   (``ours_tuned_<flow>.json``) and listed in the CSV.
   ESN columns use reservoir seeds 0..seeds-1; NVAR is deterministic.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as _dt
import hashlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH_DIR))

from harness import envs  # noqa: E402
from harness.report import md_table  # noqa: E402
from orc.forecaster import nvar_stride  # noqa: E402
from orc.forecaster.nvar import TAPS_PER_PERIOD  # noqa: E402
from orc.metrics import dominant_period  # noqa: E402

SCIENCE_DIR = BENCH_DIR / "science"
CACHE_DIR = BENCH_DIR / ".cache" / "dysts"

# ---------------------------------------------------------------- protocol
PTS_PER_PERIOD = 100
INTEGRATOR = {"method": "DOP853", "rtol": 1e-10, "atol": 1e-10, "seed": 0}
INTEGRATE_TIMEOUT_S = 120  # default limit per flow; --integrate-timeout raises it
N_TRANSIENT = 1000
N_TRAIN = 10000
N_WINDOWS = 5
SPINUP = 200
MAX_LYAP_TIMES = 20.0
MAX_HORIZON = 3000
N_POINTS = N_TRANSIENT + N_TRAIN + N_WINDOWS * (SPINUP + MAX_HORIZON)
THRESHOLD = 0.4
RES_DIM = 1000
# NVAR stride: the library's s="auto" rule (orc.forecaster.nvar_stride), ~30 taps
# per dominant period; the value is part of the forecast cache's key
NVAR_TAPS_PER_PERIOD = TAPS_PER_PERIOD
STATIONARITY = 2.0  # test-split std must be within this factor of the training std
DIVERGED = 1e3  # a standardised forecast beyond this is counted as diverged
DYSTS_VERSION = "0.96"

# Columns: key -> (library key in envs.LIBRARIES / here, column in its workload)
COLUMNS = {
    "esn": ("ours", "esn"),
    "esn_orc04": ("ours", "esn_orc04"),
    "orc04": ("orc04", "esn"),
    "rpy": ("rpy", "esn"),
    "nvar": ("ours", "nvar_defaults"),
    "nvar_paper": ("ours", "nvar_paper"),
    "tuned": ("ours", "tuned"),
}
LABELS = {
    "esn": "ours ESN (default)",
    "esn_orc04": 'ours ESN, construction="orc04"',
    "orc04": "ORC 0.4.0 ESN (default)",
    "rpy": "reservoirpy 0.4.2 ESN",
    "nvar": 'ours NVAR (defaults: k=2, order 3, input noise "auto", s="auto")',
    "nvar_paper": 'ours NVAR (paper: order 2, no noise, s="auto")',
    "tuned": "ours ESN, tuned per flow (orc.tune.search, 128 candidates)",
}
SHORT = {
    "esn": "ours ESN",
    "esn_orc04": "ours ESN\n(ORC 0.4 draw)",
    "orc04": "ORC 0.4.0",
    "rpy": "reservoirpy",
    "nvar": "ours NVAR",
    "nvar_paper": "ours NVAR\n(paper setting)",
    "tuned": "ours ESN\n(tuned)",
}
#: the tuned column's chosen values, listed per flow in the CSV
TUNED_PARAMS = ("Wr_spectral_radius", "leak_rate", "embedding_scaling", "bias", "beta")

DYSTS_LIB = envs.Library(
    key="dysts",
    label=f"dysts {DYSTS_VERSION}",
    workload_file="../science/workloads/dysts_data.py",
    workloads=(),
    dist="dysts",
    version=DYSTS_VERSION,
    import_name="dysts",
)
FORECAST_SCRIPTS = {
    "ours": "../science/workloads/orc_forecast.py",
    "orc04": "../science/workloads/orc_forecast.py",
    "rpy": "../science/workloads/rpy_forecast.py",
}


def forecast_lib(key: str) -> envs.Library:
    """The harness's library record with the panel's workload script."""
    return dataclasses.replace(envs.LIBRARIES[key], workload_file=FORECAST_SCRIPTS[key])


# ------------------------------------------------------- pure functions
def select_flows(names, spec: str) -> list[str]:
    """``all``, a count ``K`` (first K of a fixed shuffle) or comma-separated names."""
    names = sorted(names)
    if spec == "all":
        return names
    if spec.isdigit():
        order = np.random.default_rng(0).permutation(len(names))
        return [names[i] for i in order[: int(spec)]]
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise ValueError(f"unknown flows: {unknown}")
    return wanted


def standardise(train: np.ndarray, rest: np.ndarray):
    """Standardise both with the training split's mean and std (per dimension)."""
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    if np.any(~np.isfinite(std)) or np.any(std < 1e-10 * max(1.0, np.abs(mean).max())):
        raise ValueError("a coordinate is constant on the training split")
    return (train - mean) / std, (rest - mean) / std, mean, std


def stationarity_problem(train_z: np.ndarray, test_z: np.ndarray) -> str | None:
    """Why the standardised splits do not look like one attractor, or None.

    The test split's per-dimension standard deviation must lie within a factor
    ``STATIONARITY`` of the training split's (1 after standardisation): a flow
    that collapses onto a fixed point or is still in a transient fails.
    """
    ratio = test_z.std(axis=0) / train_z.std(axis=0)
    if np.all(ratio >= 1 / STATIONARITY) and np.all(ratio <= STATIONARITY):
        return None
    kind = (
        "collapses (fixed point or decay)"
        if ratio.min() < 1 / STATIONARITY
        else ("still growing (transient)")
    )
    return (
        f"not stationary: test/train std ratio {ratio.min():.2g}..{ratio.max():.2g} "
        f"outside [1/{STATIONARITY:g}, {STATIONARITY:g}], {kind}"
    )


def horizon_steps(lyapunov: float, dt: float) -> int:
    """Forecast length: MAX_LYAP_TIMES Lyapunov times, at most MAX_HORIZON steps."""
    return int(min(MAX_HORIZON, math.ceil(MAX_LYAP_TIMES / (lyapunov * dt))))


def window_starts(n_windows: int, spinup: int, horizon: int) -> list[int]:
    """Starts (in the test split) of disjoint (spin-up + horizon) windows."""
    return [i * (spinup + horizon) for i in range(n_windows)]


def window_vpts(forecasts, test, starts, spinup, dt, lyapunov, threshold=THRESHOLD):
    """VPT (Lyapunov times) and capped flag of each window.

    ``forecasts``: ``(n_windows, horizon, dim)``; ``forecasts[w][k]`` predicts
    ``test[starts[w] + spinup + k]``.  Uses ``orc.metrics.valid_prediction_time``
    with ``normalization="feature_std"`` and unit scale (standardised data).
    """
    import jax

    jax.config.update("jax_enable_x64", True)  # float64 like the workloads
    from orc.metrics import valid_prediction_time

    forecasts = np.asarray(forecasts, dtype=np.float64)
    horizon, dim = forecasts.shape[1:]
    out = []
    for fc, start in zip(forecasts, starts, strict=True):
        truth = test[start + spinup : start + spinup + horizon]
        vpt, capped = valid_prediction_time(
            fc,
            truth,
            threshold=threshold,
            dt=dt,
            lyapunov_exponent=lyapunov,
            scale=np.ones(dim),
            normalization="feature_std",
            return_capped=True,
        )
        out.append((float(vpt), bool(capped)))
    return out


def diverged(forecast: np.ndarray) -> bool:
    """A forecast that leaves the attractor's scale (non-finite or |x| > 1e3)."""
    f = np.asarray(forecast)
    return bool(~np.all(np.isfinite(f)) or np.max(np.abs(f)) > DIVERGED)


def quartiles(values) -> dict:
    """n, median and quartiles of the finite values (NaN when there are none)."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if v.size == 0:
        return {"n": 0, "median": math.nan, "q25": math.nan, "q75": math.nan}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {
        "n": int(v.size),
        "median": float(med),
        "q25": float(q25),
        "q75": float(q75),
    }


def win_loss(a: dict, b: dict, tol: float = 0.0) -> dict:
    """Per-flow comparison of two ``{flow: vpt}`` maps on their common flows."""
    common = [f for f in a if f in b and np.isfinite(a[f]) and np.isfinite(b[f])]
    diff = np.array([a[f] - b[f] for f in common])
    return {
        "n": len(common),
        "wins": int(np.sum(diff > tol)),
        "losses": int(np.sum(diff < -tol)),
        "ties": int(np.sum(np.abs(diff) <= tol)),
        "median_diff": float(np.median(diff)) if diff.size else math.nan,
    }


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign-test p-value of ``wins`` vs ``losses`` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def config_hash(params: dict) -> str:
    blob = json.dumps(params, sort_keys=True).encode()
    return hashlib.sha1(blob).hexdigest()[:10]


# ------------------------------------------------------------ data stage
def data_params() -> dict:
    """What an integrated trajectory depends on: the cache's key. The time
    limit is not part of it (a flow that finishes gives the same data under
    any limit); a flow that ran out of time is recorded with its limit and
    retried under a longer one (:func:`generate`)."""
    return {
        "dysts": DYSTS_VERSION,
        "n_points": N_POINTS,
        "n_transient": N_TRANSIENT,
        "pts_per_period": PTS_PER_PERIOD,
        **INTEGRATOR,
    }


def timed_out_under(meta: dict) -> float | None:
    """The limit a cached flow ran out of, or None if it did not."""
    if meta.get("ok") or "timeout_s" not in meta:
        return None
    return float(meta["timeout_s"])


def run_child(lib: envs.Library, cfg: dict, timeout: float) -> dict:
    """One workload subprocess through the benchmark harness (``run.run_job``)."""
    import run  # benchmarks/run.py

    cfg = {"workload": "dysts", "size": cfg.get("res_dim", 0), **cfg}
    return run.run_job(lib, cfg, timeout)


def list_flows() -> list[str]:
    res = run_child(
        DYSTS_LIB,
        {"library": "dysts", "list_only": True, "out_dir": str(CACHE_DIR)},
        600,
    )
    if not res.get("ok"):
        raise RuntimeError(f"could not list the dysts flows: {res.get('error')}")
    return res["names"]


def generate(
    flows: list[str], timeout_s: float = INTEGRATE_TIMEOUT_S, log=print
) -> dict:
    """Integrate (or reuse) each flow, ``timeout_s`` seconds at most for
    one; return ``{flow: meta}``. A cached flow that ran out of a shorter
    limit is integrated again."""
    params = data_params()
    data_dir = CACHE_DIR / f"data_{config_hash(params)}"
    data_dir.mkdir(parents=True, exist_ok=True)
    metas, todo = {}, []
    for name in flows:
        meta_file = data_dir / f"{name}.json"
        meta = json.loads(meta_file.read_text()) if meta_file.exists() else None
        limit = None if meta is None else timed_out_under(meta)
        if meta is not None and (limit is None or limit >= timeout_s):
            metas[name] = meta
        else:
            todo.append(name)
    for i in range(0, len(todo), 10):
        chunk = todo[i : i + 10]
        log(f"[data] integrating {', '.join(chunk)} ({timeout_s:.0f} s at most each)")
        cfg = {
            "library": "dysts",
            "flows": chunk,
            "out_dir": str(data_dir),
            "timeout_s": timeout_s,
            **params,
        }
        res = run_child(DYSTS_LIB, cfg, 60 + 2 * timeout_s * len(chunk))
        for name in chunk:
            meta = res.get("flows", {}).get(name) or {
                "flow": name,
                "ok": False,
                "reason": f"integrator process failed: {res.get('error', '?')}"[:300],
            }
            metas[name] = meta
            # a crashed child is not cached, so the next run retries it
            if name in res.get("flows", {}):
                (data_dir / f"{name}.json").write_text(json.dumps(meta))
    return metas


def prepare(meta: dict) -> dict:
    """Split, standardise and lay out the windows of one integrated flow."""
    if not meta.get("ok"):
        return meta
    traj = np.load(meta["file"])
    train, rest = traj[:N_TRAIN], traj[N_TRAIN:]
    try:
        train_z, test_z, _, _ = standardise(train, rest)
    except ValueError as exc:
        return {**meta, "ok": False, "reason": str(exc)}
    problem = stationarity_problem(train_z, test_z)
    if problem:
        return {**meta, "ok": False, "reason": problem}
    dt, lyap = meta["dt"], meta["lyapunov"]
    horizon = horizon_steps(lyap, dt)
    period = dominant_period(train_z)  # samples; the record's tenth at most
    stem = Path(meta["file"]).with_suffix("")
    files = {"train": f"{stem}_train_z.npy", "test": f"{stem}_test_z.npy"}
    if not Path(files["test"]).exists():
        np.save(files["train"], train_z)
        np.save(files["test"], test_z)
    return {
        **meta,
        **files,
        "horizon": horizon,
        "spinup": SPINUP,
        "starts": window_starts(N_WINDOWS, SPINUP, horizon),
        "period_samples": period,
        "stride": nvar_stride(train_z),
    }


# -------------------------------------------------------- forecast stage
def forecast_dir(res_dim: int, seeds: list[int]) -> Path:
    key = config_hash(
        {
            **data_params(),
            "n_train": N_TRAIN,
            "n_windows": N_WINDOWS,
            "spinup": SPINUP,
            "max_lyap_times": MAX_LYAP_TIMES,
            "max_horizon": MAX_HORIZON,
            "res_dim": res_dim,
            "seeds": seeds,
            "nvar_taps": NVAR_TAPS_PER_PERIOD,
        }
    )
    return CACHE_DIR / f"forecasts_{key}"


def column_file(out_dir: Path, lib: str, col: str, task: dict) -> Path:
    """Forecasts of one (library, workload column, flow); the NVAR's name
    carries its stride, so a changed stride rule never reuses stale forecasts.
    (Same names as the workloads save.)"""
    if col.startswith("nvar"):
        return out_dir / f"{lib}_{col}-s{task['stride']}_{task['flow']}.npy"
    return out_dir / f"{lib}_{col}_{task['flow']}.npy"


def forecast_file(out_dir: Path, column: str, task: dict) -> Path:
    lib, col = COLUMNS[column]
    return column_file(out_dir, lib, col, task)


def run_forecasts(tasks, columns, res_dim, seeds, out_dir, timeout, log=print):
    """Run every missing (library, column, flow) in the library's interpreter."""
    errors = {}
    by_lib: dict[str, list[str]] = {}
    for c in columns:
        if c in COLUMNS:
            by_lib.setdefault(COLUMNS[c][0], []).append(COLUMNS[c][1])
    for lib_key, cols in by_lib.items():
        todo = [
            t
            for t in tasks
            if not all(column_file(out_dir, lib_key, col, t).exists() for col in cols)
        ]
        if not todo:
            continue
        lib = forecast_lib(lib_key)
        log(f"[{lib_key}] {', '.join(cols)} on {len(todo)} flows")
        t0 = time.perf_counter()
        cfg = {
            "library": lib_key,
            "columns": cols,
            "seeds": seeds,
            "res_dim": res_dim,
            "out_dir": str(out_dir),
            "tasks": [
                {
                    k: t[k]
                    for k in (
                        "flow",
                        "train",
                        "test",
                        "horizon",
                        "spinup",
                        "starts",
                        "stride",
                        "dt",
                        "lyapunov",
                    )
                }
                for t in todo
            ],
        }
        res = run_child(lib, cfg, timeout * len(todo))
        if not res.get("ok"):
            log(f"[{lib_key}] ERROR {str(res.get('error'))[:300]}")
        for flow, recs in res.get("tasks", {}).items():
            for col, rec in recs.items():
                if not rec.get("ok"):
                    errors[(lib_key, col, flow)] = rec.get("error")
                    log(f"[{lib_key}] {col} {flow}: {rec.get('error')}")
        log(f"[{lib_key}] done in {time.perf_counter() - t0:.0f} s")
    return errors


# ---------------------------------------------------------------- scores
def score(prepared: dict, columns, out_dir: Path) -> list[dict]:
    """One row per flow: status, layout and per-column VPT (per seed and mean)."""
    rows = []
    for name, meta in prepared.items():
        row = {
            "flow": name,
            "status": "ok" if meta.get("ok") else "failed",
            "reason": meta.get("reason", ""),
            "dim": meta.get("dim"),
            "dt": meta.get("dt"),
            "lyapunov": meta.get("lyapunov"),
            "period_samples": meta.get("period_samples"),
            "nvar_stride": meta.get("stride"),
            "horizon_steps": meta.get("horizon"),
            "horizon_lyap": (
                meta["horizon"] * meta["dt"] * meta["lyapunov"]
                if meta.get("ok")
                else None
            ),
        }
        if meta.get("ok"):
            test = np.load(meta["test"])
            for column in columns:
                path = forecast_file(out_dir, column, meta)
                if not path.exists():
                    row[column] = math.nan
                    continue
                stack = np.load(path)  # (n_seeds, n_windows, horizon, dim)
                per_seed, capped, div = [], 0, 0
                for seed_fc in stack:
                    scores = window_vpts(
                        seed_fc,
                        test,
                        meta["starts"],
                        SPINUP,
                        meta["dt"],
                        meta["lyapunov"],
                    )
                    per_seed.append(float(np.mean([v for v, _ in scores])))
                    capped += sum(c for _, c in scores)
                    div += sum(diverged(fc) for fc in seed_fc)
                row[column] = float(np.mean(per_seed))
                row[f"{column}_seed_sd"] = (
                    float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else math.nan
                )
                row[f"{column}_windows"] = int(stack.shape[0] * stack.shape[1])
                row[f"{column}_seeds"] = " ".join(f"{v:.3f}" for v in per_seed)
                row[f"{column}_capped"] = capped
                row[f"{column}_diverged"] = div
                if column == "tuned":
                    with open(path.with_suffix(".json")) as fh:
                        search = json.load(fh)
                    for k in TUNED_PARAMS:
                        row[f"tuned_{k}"] = search["best"][k]
                    row["tuned_search_s"] = search["search_s"]
        rows.append(row)
    return rows


def write_csv(rows, path: Path, columns) -> None:
    fields = [
        "flow", "status", "reason", "dim", "dt", "lyapunov", "period_samples",
        "nvar_stride", "horizon_steps", "horizon_lyap",
    ]  # fmt: skip
    for c in columns:
        fields += [c, f"{c}_seeds", f"{c}_seed_sd", f"{c}_capped", f"{c}_diverged"]
        fields += [f"{c}_windows"]
    if "tuned" in columns:
        fields += [f"tuned_{k}" for k in (*TUNED_PARAMS, "search_s")]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def _fmt(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}"


def complete(rows, columns) -> list[dict]:
    """Integrated flows that have a score in every ESN column (the NVAR may fail
    on a flow, e.g. a window longer than the spin-up; an interrupted run leaves
    flows without some columns): the summary tables compare like with like."""
    esn_cols = [c for c in columns if not c.startswith("nvar")]
    return [
        r
        for r in rows
        if r["status"] == "ok"
        and all(np.isfinite(r.get(c, math.nan)) for c in esn_cols)
    ]


def report_md(rows, columns, header: dict) -> str:
    ok = complete(rows, columns)
    n_int = sum(r["status"] == "ok" for r in rows)
    cols = list(columns)
    lines = [
        "# dysts panel: results (generated by `benchmarks/science/dysts_panel.py`)",
        "",
        *(f"* {k}: {v}" for k, v in header.items()),
        "",
        "## Valid prediction time (Lyapunov times), per-flow mean over seeds",
        "",
        f"Over the {len(ok)} flows (of {n_int} integrated) scored in every ESN column.",
        "",
    ]
    table = []
    for c in cols:
        q = quartiles([r.get(c, math.nan) for r in ok])
        capped = sum(r.get(f"{c}_capped", 0) or 0 for r in ok)
        div = sum(r.get(f"{c}_diverged", 0) or 0 for r in ok)
        total = sum(r.get(f"{c}_windows", 0) or 0 for r in ok)
        sd = quartiles([r.get(f"{c}_seed_sd", math.nan) for r in ok])["median"]
        scored = [r for r in ok if r.get(f"{c}_windows")]
        calm = sum(not r.get(f"{c}_diverged") for r in scored)
        table.append(
            [LABELS.get(c, c), q["n"], _fmt(q["median"]), _fmt(q["q25"]),
             _fmt(q["q75"]), _fmt(sd), f"{capped}/{total}", f"{div}/{total}",
             f"{calm}/{len(scored)}"]
        )  # fmt: skip
    head = ["column", "flows", "median", "25%", "75%", "seed sd (median)",
            "windows capped", "windows diverged",
            "flows without a diverged window"]  # fmt: skip
    lines.append(md_table(head, table))
    lines += ["", "## Head to head (per flow, mean over seeds)", ""]
    lines += [
        "Equal: |A - B| <= 1e-9 (e.g. both capped at the horizon). p: two-sided "
        "exact sign test on the unequal flows.",
        "",
    ]
    pairs = [("esn", "orc04"), ("esn_orc04", "orc04"), ("esn", "esn_orc04"),
             ("esn", "rpy"), ("nvar", "esn"), ("nvar_paper", "esn"),
             ("nvar", "nvar_paper"), ("tuned", "esn")]  # fmt: skip
    table = []
    for a, b in pairs:
        if a in columns and b in columns:
            va = {r["flow"]: r.get(a, math.nan) for r in ok}
            vb = {r["flow"]: r.get(b, math.nan) for r in ok}
            wl = win_loss(va, vb, tol=1e-9)
            table.append(
                [f"{a} vs {b}", wl["n"], wl["wins"], wl["losses"], wl["ties"],
                 _fmt(wl["median_diff"]), f"{sign_test(wl['wins'], wl['losses']):.2f}"]
            )  # fmt: skip
    head = ["A vs B", "flows", "A better", "B better", "equal", "median(A - B)", "p"]
    lines.append(md_table(head, table))
    lines += ["", "## Per flow", ""]
    head = ["flow", "dim", "λ·dt", "horizon (LT)", "NVAR stride", *cols]
    table = [
        [r["flow"], r["dim"], f"{r['lyapunov'] * r['dt']:.4f}",
         f"{r['horizon_lyap']:.1f}", r["nvar_stride"],
         *(_fmt(r.get(c, math.nan)) for c in cols)]
        for r in ok
    ]  # fmt: skip
    lines.append(md_table(head, table))
    failed = [r for r in rows if r["status"] != "ok"]
    lines += ["", f"## Flows rejected ({len(failed)})", ""]
    lines += [f"* {r['flow']}: {r['reason']}" for r in failed] or ["(none)"]
    return "\n".join(lines) + "\n"


def plot(rows, columns, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = complete(rows, columns)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    data, names = [], []
    for c in columns:
        v = [r.get(c, math.nan) for r in ok]
        v = [x for x in v if np.isfinite(x)]
        if v:
            data.append(v)
            names.append(SHORT[c])
    if data:
        ax1.boxplot(data, showmeans=True)
        ax1.set_xticks(range(1, len(names) + 1), names, fontsize=8)
    ax1.set_ylabel("VPT (Lyapunov times), mean over seeds and windows")
    ax1.set_title(f"dysts panel: {len(ok)} flows (box: quartiles, ▲: mean)")
    if "esn" in columns and "orc04" in columns:
        x = np.array([r.get("orc04", math.nan) for r in ok])
        for c, mk in (("esn", "o"), ("esn_orc04", "x")):
            if c in columns:
                y = np.array([r.get(c, math.nan) for r in ok])
                ax2.scatter(x, y, marker=mk, label=LABELS[c], alpha=0.8)
        hi = np.nanmax(np.r_[x, 1.0]) * 1.05
        ax2.plot([0, hi], [0, hi], "k--", lw=0.8)
        ax2.set_xlabel("ORC 0.4.0 VPT (Lyapunov times)")
        ax2.set_ylabel("ours VPT (Lyapunov times)")
        ax2.legend(fontsize=8)
        ax2.set_title("per flow, mean over seeds")
    elif "esn" in columns and "tuned" in columns:
        x = np.array([r.get("esn", math.nan) for r in ok])
        y = np.array([r.get("tuned", math.nan) for r in ok])
        ax2.scatter(x, y, alpha=0.8)
        hi = np.nanmax(np.r_[x, y, 1.0]) * 1.05
        ax2.plot([0, hi], [0, hi], "k--", lw=0.8)
        ax2.set_xlabel(f"{LABELS['esn']}: VPT (Lyapunov times)")
        ax2.set_ylabel("tuned per flow: VPT (Lyapunov times)")
        ax2.set_title("per flow, mean over seeds (above the line: tuning helped)")
    else:
        ax2.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------ main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flows", default="all", help="'all', a count K, or names")
    p.add_argument("--seeds", type=int, default=3, help="reservoir seeds 0..S-1")
    p.add_argument("--res-dim", type=int, default=RES_DIM)
    p.add_argument(
        "--columns", default=",".join(COLUMNS), help="subset of " + ",".join(COLUMNS)
    )
    p.add_argument("--chunk", type=int, default=5, help="flows per workload process")
    p.add_argument(
        "--timeout", type=float, default=900, help="seconds per flow and library"
    )
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 3 flows, N=100, 1 seed"
    )
    p.add_argument(
        "--report-only", action="store_true", help="score cached forecasts only"
    )
    p.add_argument(
        "--data-only", action="store_true", help="integrate the flows, no forecasts"
    )
    p.add_argument("--no-setup", action="store_true", help="never create the venvs")
    p.add_argument(
        "--integrate-timeout",
        type=float,
        default=INTEGRATE_TIMEOUT_S,
        help="seconds to integrate one flow; flows that ran out of a shorter "
        "limit before are integrated again",
    )
    p.add_argument(
        "--recompute",
        default="",
        help="comma-separated columns whose cached forecasts (of the selected "
        "flows) are deleted first: the cache is keyed by the protocol, not by "
        "the libraries' code, so rerun a column this way after changing it",
    )
    p.add_argument("--out-dir", type=Path, default=SCIENCE_DIR)
    args = p.parse_args(argv)
    if args.quick:
        args.flows, args.seeds, args.res_dim = "Lorenz,Rossler,Aizawa", 1, 100
        if args.out_dir == SCIENCE_DIR:
            args.out_dir = CACHE_DIR / "quick"
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    recompute = [c.strip() for c in args.recompute.split(",") if c.strip()]
    bad = [c for c in columns + recompute if c not in COLUMNS]
    if bad:
        raise SystemExit(f"unknown columns {bad}; choose from {list(COLUMNS)}")
    columns += [c for c in recompute if c not in columns]
    seeds = list(range(args.seeds))
    libs = {COLUMNS[c][0] for c in columns}
    if not args.no_setup and not args.report_only:
        for lib in [DYSTS_LIB, *(envs.LIBRARIES[k] for k in sorted(libs))]:
            ok, msg = envs.ensure_env(lib)
            print(f"[setup] {lib.key}: {msg}")
            if not ok:
                return 1
    t_start = time.perf_counter()
    flows = select_flows(list_flows(), args.flows)
    print(
        f"[panel] {len(flows)} flows, N={args.res_dim}, seeds={seeds}, columns={columns}"
    )
    metas = generate(flows, args.integrate_timeout)
    prepared = {name: prepare(metas[name]) for name in flows}
    n_ok = sum(m.get("ok", False) for m in prepared.values())
    print(f"[panel] {n_ok} flows integrated cleanly, {len(flows) - n_ok} rejected")
    out_dir = forecast_dir(args.res_dim, seeds)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = [m for m in prepared.values() if m.get("ok")]
    if args.data_only:
        for name, m in prepared.items():
            if not m.get("ok"):
                print(f"[data] rejected {name}: {m.get('reason')}")
        return 0
    for column in recompute:
        gone = 0
        for task in tasks:
            path = forecast_file(out_dir, column, task)
            gone += path.exists()
            path.unlink(missing_ok=True)
        print(f"[panel] {column}: {gone} cached forecasts deleted (--recompute)")
    if not args.report_only:
        for i in range(0, len(tasks), args.chunk):
            run_forecasts(
                tasks[i : i + args.chunk],
                columns,
                args.res_dim,
                seeds,
                out_dir,
                args.timeout,
            )
    # the report covers every column with forecasts for all selected flows,
    # not only those run now, so rerunning one column keeps the others' rows
    columns = [
        c
        for c in COLUMNS
        if c in columns or all(forecast_file(out_dir, c, t).exists() for t in tasks)
    ]
    rows = score(prepared, columns, out_dir)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out_dir / "dysts_results.csv", columns)
    header = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {platform.processor() or '?'}",
        "command": "dysts_panel.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "flows": f"{len(flows)} requested, {n_ok} integrated cleanly",
        "ESN": f"N={args.res_dim}, seeds {seeds}",
        "protocol": "see the module docstring / DYSTS.md",
        "wall time": f"{time.perf_counter() - t_start:.0f} s",
    }
    (args.out_dir / "dysts_results.md").write_text(report_md(rows, columns, header))
    plot(rows, columns, args.out_dir / "dysts_panel.png")
    print(f"[panel] wrote {args.out_dir}/dysts_results.{{csv,md}} and dysts_panel.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
