"""Hyperparameter search throughput: ``orc.tune.search`` against a warm loop
of separate trainings and scorings, side by side in one process.

Lorenz63 (dt = 0.01), ESN with N = 500, T = 20000 training steps, 10
validation windows of ``--horizon`` steps scored by valid prediction time.
The search: ``--seeds`` seeds x ``--draws`` Sobol draws of spectral radius,
leak, input scaling and bias x ``--betas`` ridge strengths (default 4 x 8 x
8 = 256 candidates). The loop trains each candidate with
``train_RCForecaster`` and scores it the same way (teacher forcing over the
validation data, one ``forecast`` per window), every program compiled
before the clock starts; it runs ``--loop-candidates`` of them (default all)
and its rate is extrapolated to the search's count when fewer. Also the
scaling of the search with the population size (1, 8, 64, 256 candidates)
and the same-seed check: the loop's scores against the search's.

With ``--reservoirpy [K]``, also reservoirpy 0.4.2's
``reservoirpy.hyper.parallel_research`` on the same data and windows
(``benchmarks/tune_reservoirpy.py``, run in the peer venv
``benchmarks/.venvs/rpy``, created if missing): K random candidates
(default: as many as the search's; 8 with ``--quick``) on every core,
its rate extrapolated to the search's count when K is fewer.

    python benchmarks/tune.py                # the full comparison (~15 min on 2 cores)
    python benchmarks/tune.py --quick        # N = 100, T = 4000, small search
    python benchmarks/tune.py --reservoirpy  # and reservoirpy's search
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc._matrix import nonzeros_per_row  # noqa: E402
from orc.forecaster import ESNForecaster, train_RCForecaster  # noqa: E402
from orc.tune import Forecast, LogUniform, Uniform  # noqa: E402

SPACE = {
    "Wr_spectral_radius": Uniform(0.2, 1.4),
    "leak_rate": Uniform(0.1, 1.0),
    "embedding_scaling": LogUniform(0.01, 1.0),
    "bias": Uniform(0.0, 2.0),
}
LYAP = 0.906
#: reservoirpy's names of SPACE's hyperparameters (``Reservoir``'s arguments)
RPY_NAMES = {"Wr_spectral_radius": "sr", "leak_rate": "lr",
             "embedding_scaling": "input_scaling", "bias": "bias"}  # fmt: skip
#: The reference candidate both libraries score (a sanity check of the two
#: objectives): reservoirpy with its own matrices and with orc's, whose
#: scores should equal orc's.
REFERENCE = {"Wr_spectral_radius": 0.9, "leak_rate": 0.5, "embedding_scaling": 0.1,
             "bias": 1.0, "seed": 0, "beta": 1e-6}  # fmt: skip


def data(train: int, val: int):
    U, _ = orc.data.lorenz63(tN=(train + val + 1000) * 0.01, dt=0.01)
    U = np.asarray(U)[1000:]
    return U[:train], U[train : train + val]


def loop(task, rows, res_dim):
    """Each candidate trained and scored on its own (public API, warm)."""
    u = jnp.asarray(task.train)
    scale = jnp.sqrt(jnp.mean(jnp.sum(u**2, axis=1)))
    val = jnp.asarray(task.validation)
    starts = task.starts

    @jax.jit
    def score(model):
        states = model.force(val, model.driver.default_state())
        preds = jnp.stack([model.forecast(task.horizon, states[s - 1]) for s in starts])
        truths = jnp.stack([val[s : s + task.horizon] for s in starts])
        vpt = jax.vmap(
            lambda p, t: orc.metrics.valid_prediction_time(
                p, t, dt=0.01, lyapunov_exponent=LYAP, scale=scale
            )
        )(preds, truths)
        return jnp.mean(vpt)

    def one(row):
        kw = {n: row[n] for n in SPACE}
        model = ESNForecaster(3, res_dim, **kw, seed=row["seed"], construction="jax")
        model, _ = train_RCForecaster(model, u, spinup=task.spinup, beta=row["beta"])
        return float(score(model))

    one(rows[0])  # compile the training and the scoring
    t0 = time.perf_counter()
    scores = [one(r) for r in rows]
    return time.perf_counter() - t0, scores


def search(task, res_dim, seeds, draws, betas):
    t0 = time.perf_counter()
    res = orc.tune.search(
        ESNForecaster, SPACE, task, fixed={"data_dim": 3, "res_dim": res_dim},
        draws=draws, seeds=seeds, beta=LogUniform(1e-10, 1e-3), ridge_points=betas,
        progress=False,
    )  # fmt: skip
    return time.perf_counter() - t0, res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--res-dim", type=int, default=500)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--betas", type=int, default=8)
    ap.add_argument("--loop-candidates", type=int, default=None)
    ap.add_argument(
        "--seed-population",
        type=int,
        default=64,
        help="seeds of the different-seeds population (0: skip)",
    )
    ap.add_argument("--only-seed-population", action="store_true")
    ap.add_argument(
        "--reservoirpy",
        type=int,
        nargs="?",
        const=-1,
        default=None,
        metavar="K",
        help="also reservoirpy's parallel_research with K candidates (default: "
        "the search's count, 8 with --quick)",
    )
    ap.add_argument(
        "--rpy-jobs",
        type=int,
        default=-1,
        help="parallel_research's n_jobs (-1: every core)",
    )
    ap.add_argument("--out", default=os.path.join("benchmarks", "runs", "tune.json"))
    a = ap.parse_args()
    if a.quick:
        a.res_dim, a.train, a.horizon, a.seeds, a.draws, a.betas = (
            100,
            4000,
            300,
            2,
            4,
            4,
        )
    train, val = data(a.train, 100 + a.horizon * 3)
    task = Forecast(train, val, spinup=100, warmup=100, horizon=a.horizon,
                    windows=10, dt=0.01, lyapunov_exponent=LYAP)  # fmt: skip
    n = a.seeds * a.draws * a.betas
    print(f"N={a.res_dim} T={a.train} horizon={a.horizon} windows=10, "
          f"{a.seeds} seeds x {a.draws} draws x {a.betas} betas = {n} candidates")  # fmt: skip

    out = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "jax": jax.__version__, "device": jax.devices()[0].platform},
        "settings": vars(a), "candidates": n,
    }  # fmt: skip
    if not a.only_seed_population:
        out.update(throughput(a, task, n))
        out["scaling"] = scaling(a, task, n)
    if a.seed_population:
        out["seed_population"] = seed_population(a, task)
    if a.reservoirpy is not None:
        out["reservoirpy"] = reservoirpy_search(a, task, n, out)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"written {a.out}")


def throughput(a, task, n):
    """The search (twice: the first call compiles) against the warm loop."""
    cold, res = search(task, a.res_dim, a.seeds, a.draws, a.betas)
    warm, res = search(task, a.res_dim, a.seeds, a.draws, a.betas)
    print(f"orc.tune.search: {warm:.1f} s warm ({n / warm:.2f} candidates/s), "
          f"{cold:.1f} s with compilation; {res}")  # fmt: skip
    k = a.loop_candidates or n
    rows = res.rows[:k]
    loop_s, loop_scores = loop(task, rows, a.res_dim)
    loop_rate = k / loop_s
    print(f"warm loop: {loop_s:.1f} s for {k} candidates ({loop_rate:.2f}/s)")
    got = np.array([r["score"] for r in rows])
    ref = np.array(loop_scores)
    both = np.isfinite(got) & np.isfinite(ref)
    # the loop solves by Cholesky (minimum-norm fallback where G + beta I
    # does not factorise), the search by an eigendecomposition: the same
    # weights where the statistics are well-conditioned, others (and other
    # chaotic forecasts) for the smallest strengths
    betas = np.array([r["beta"] for r in rows])
    for label, sel in (("beta >= 1e-6", betas >= 1e-6), ("beta < 1e-6", betas < 1e-6)):
        d = np.abs(got - ref)[both & sel]
        print(f"scores, search vs loop, {label}: {d.size} pairs, max |diff| "
              f"{d.max() if d.size else 0:.3g} Lyapunov times, "
              f"{(d > 0.05).sum()} differ by more than 0.05")  # fmt: skip
    ratio = (n / warm) / loop_rate
    print(f"speed-up of the search over the warm loop: {ratio:.1f}x")
    return {"search_warm_s": warm, "search_cold_s": cold, "loop_s": loop_s,
            "loop_candidates": k, "speedup": ratio, "best": res.best}  # fmt: skip


def reservoirpy_search(a, task, n, out):
    """reservoirpy 0.4.2's ``parallel_research`` on the same data, windows
    and score (``benchmarks/tune_reservoirpy.py`` in the peer venv), after
    both libraries scored REFERENCE."""
    from harness import envs  # benchmarks/harness: the peer venvs

    lib = envs.LIBRARIES["rpy"]
    ok, msg = envs.ensure_env(lib)
    print(f"[setup] rpy: {msg}")
    if not ok:
        return {"error": msg}
    k = a.reservoirpy if a.reservoirpy > 0 else (8 if a.quick else n)
    space = {RPY_NAMES[name]: [type(d).__name__.lower(), float(d.low), float(d.high)]
             for name, d in SPACE.items()}  # fmt: skip
    space["ridge"] = ["loguniform", 1e-10, 1e-3]  # the search's beta
    density = inspect.signature(ESNForecaster).parameters["Wr_density"].default
    spec = {
        "res_dim": a.res_dim,
        # the ESN's default Wr_density as orc draws it: nonzeros per row
        "degree": nonzeros_per_row(a.res_dim, density),
        "spinup": task.spinup, "starts": [int(s) for s in task.starts],
        "horizon": task.horizon, "threshold": task.threshold, "dt": task.dt,
        "lyapunov_exponent": task.lyapunov_exponent,
        "scale": float(task.scale(jnp.float64)), "diverged_scale": 100.0,
        "space": space, "seeds": list(range(a.seeds)), "sampler_seed": 0,
        "candidates": k, "n_jobs": a.rpy_jobs,
        "reference": {**{RPY_NAMES[n]: REFERENCE[n] for n in SPACE},
                      "ridge": REFERENCE["beta"], "seed": REFERENCE["seed"]},
    }  # fmt: skip
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "tune_reservoirpy.py")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="orc-tune-rpy-") as d:
        np.save(os.path.join(d, "train.npy"), np.asarray(task.train))
        np.save(os.path.join(d, "validation.npy"), np.asarray(task.validation))
        with open(os.path.join(d, "task.json"), "w") as f:
            json.dump(spec, f, indent=1)
        ref_orc = reference(task, a.res_dim, os.path.join(d, "reference.npz"))
        cmd = [str(lib.python), script, d]
        env = envs.child_env(lib)
        check = subprocess.run([*cmd, "--check"], env=env, capture_output=True,
                               text=True)  # fmt: skip
        if check.returncode != 0:
            print(check.stderr[-3000:], file=sys.stderr)
            return {"error": f"tune_reservoirpy.py --check exited {check.returncode}"}
        ref_rpy = json.loads(check.stdout.strip().splitlines()[-1])
        same = ref_rpy["orc_matrices"]["vpt"]
        print(f"reference candidate {REFERENCE}: VPT orc {ref_orc:.3f}; "
              f"reservoirpy with orc's matrices {same:.3f} (should be equal), "
              f"with its own {ref_rpy['vpt']:.3f} ({ref_rpy['seconds']:.1f} s in "
              f"one process)")  # fmt: skip
        t0 = time.perf_counter()
        run = subprocess.run(cmd, env=env)
        wall = time.perf_counter() - t0
        if run.returncode != 0:
            return {"error": f"tune_reservoirpy.py exited {run.returncode}"}
        with open(os.path.join(d, "result.json")) as f:
            res = json.load(f)
    res.update(task=spec, subprocess_s=wall,
               reference={"params": REFERENCE, "orc": ref_orc, **ref_rpy})  # fmt: skip
    rate = res["per_second"]
    res["extrapolated"] = k < n
    if k < n:
        print(f"reservoirpy: {k} of the search's {n} candidates run; its rate "
              f"extrapolated: {n / rate:.0f} s for {n}")  # fmt: skip
    rows = [("reservoirpy parallel_research", rate)]
    if "search_warm_s" in out:
        rows = [("orc.tune.search, warm", n / out["search_warm_s"]),
                ("warm loop", out["loop_candidates"] / out["loop_s"]), *rows]  # fmt: skip
        res["search_over_reservoirpy"] = rows[0][1] / rate
        res["loop_over_reservoirpy"] = rows[1][1] / rate
    for label, r in rows:
        print(f"  {label:32s} {r:8.3f} candidates/s  {r / rate:6.2f}x reservoirpy")
    best = res["best"]["vpt"] if res["best"] else float("nan")
    if out.get("best"):
        print(f"best VPT: orc.tune.search {out['best']['score']:.3f} of {n}, "
              f"reservoirpy {best:.3f} of {k}")  # fmt: skip
    return res


def reference(task, res_dim, path):
    """orc's score of REFERENCE (the loop's), its matrices written to
    ``path`` (``W`` dense, ``Win``) for tune_reservoirpy.py's check."""
    _, (score,) = loop(task, [REFERENCE], res_dim)
    kw = {n: REFERENCE[n] for n in SPACE}
    model = ESNForecaster(3, res_dim, **kw, seed=REFERENCE["seed"], construction="jax")
    values = np.asarray(model.driver.wr.values[0])  # (N, k), scaled
    columns = np.asarray(model.driver.wr.columns[0])
    W = np.zeros((res_dim, res_dim))
    np.add.at(W, (np.arange(res_dim)[:, None], columns), values)
    np.savez(path, W=W, Win=np.asarray(model.embedding.win[0]))
    return score


def seed_population(a, task):
    """Different seeds, one draw and one strength each: the population
    shares no matrix and no statistics, only the program and the batched
    validation forecasts; it must not lose to the loop."""
    k = a.seed_population
    search(task, a.res_dim, k, 1, 1)  # compile this shape
    t_pop, pop = search(task, a.res_dim, k, 1, 1)
    t_loop, _ = loop(task, pop.rows, a.res_dim)
    print(f"{k} seeds x 1 draw x 1 strength: search {t_pop:.1f} s, loop "
          f"{t_loop:.1f} s (search {t_loop / t_pop:.2f}x the loop's rate)")  # fmt: skip
    return {"candidates": k, "search_s": t_pop, "loop_s": t_loop,
            "ratio": t_loop / t_pop}  # fmt: skip


def scaling(a, task, n):
    """The search's rate by population size (each size compiled first)."""
    rows = []
    for size in (1, 8, 64, 256):
        if size > n:
            break
        seeds = max(1, size // (a.draws * a.betas)) if size >= a.draws * a.betas else 1
        draws = max(1, min(a.draws, size // a.betas)) if size >= a.betas else 1
        betas = size // (seeds * draws)
        search(task, a.res_dim, seeds, draws, betas)  # compile this shape
        t, _ = search(task, a.res_dim, seeds, draws, betas)
        rows.append({"candidates": size, "seeds": seeds, "draws": draws,
                     "betas": betas, "seconds": t, "per_second": size / t})  # fmt: skip
        print(f"  population {size:4d} ({seeds}x{draws}x{betas}): {t:6.2f} s, "
              f"{size / t:6.2f} candidates/s")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
