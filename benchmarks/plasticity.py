"""Plasticity: ``orc.plasticity`` against reservoirpy 0.4.2, side by side in one run.

Three measurements, written to ``benchmarks/PLASTICITY.md`` and
``benchmarks/plasticity.json``:

1. **Speed.** Intrinsic plasticity (``--epochs`` passes over NARMA10's 1999
   training inputs, spinup/warmup 100) and Oja's rule (one pass) on
   reservoirs of ``--sizes`` nodes: ``orc.plasticity`` (its first call, with
   compilation, and the median of ``--repeats`` later calls) against
   reservoirpy's ``IPReservoir.fit`` and ``LocalPlasticityReservoir.fit``
   (``benchmarks/plasticity_reservoirpy.py`` in the peer venv
   ``benchmarks/.venvs/rpy``, created if missing).
2. **NARMA10**, NRMSE of a ridge readout before and after intrinsic
   plasticity, seeds 0 to 9 (median) and seed 42: reservoirpy's
   ``IPReservoir(100)`` (docs/from-reservoirpy.md, section 6); orc's
   ``ESNRegressor(1, 1, 100)`` with ORC's forecasting scales (bias 1.6,
   saturated on NARMA's inputs), with its own defaults, and section 2's
   reservoir (leak 1, bias 0, input scaling 0.2, sr 0.9).
3. **Lorenz63** (standardised), valid time (Lyapunov times, median of 8
   windows) of a 300-node forecaster before and after intrinsic
   plasticity (5 epochs), seeds 0-3:
   orc's default ``ESNForecaster`` and one with leak 1, bias 0, input
   scaling 0.5, sr 0.9 (orc only).

    python benchmarks/plasticity.py            # ~12 min on 2 cores, 4.5 of them reservoirpy's Oja at 2000 nodes
    python benchmarks/plasticity.py --no-reservoirpy
    python benchmarks/plasticity.py --parts narma   # rerun one part, keep the others
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc._defaults import ESN  # noqa: E402
from orc.forecaster import ESNForecaster, train_RCForecaster  # noqa: E402
from orc.metrics import nrmse, valid_prediction_time  # noqa: E402
from orc.plasticity import intrinsic_plasticity, local_plasticity  # noqa: E402
from orc.regression import ESNRegressor, train_RCRegressor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LYAP = 0.906
#: section 2 of docs/from-reservoirpy.md: a reservoir scaled for NARMA10
SCALED_NARMA = dict(leak_rate=1.0, Wr_spectral_radius=0.9, embedding_scaling=0.2,
                    Wr_density=0.1, bias=0.0)  # fmt: skip
#: ORC 0.4's forecasting scales (the regressor's defaults until it had its own)
FORECASTING = {name: getattr(ESN, name) for name in
               ("leak_rate", "bias", "embedding_scaling", "Wr_spectral_radius")}  # fmt: skip
#: a symmetric reservoir (no bias) for Lorenz63
SYMMETRIC = dict(leak_rate=1.0, bias=0.0, embedding_scaling=0.5, Wr_spectral_radius=0.9)


NARMA_LABELS = {
    "forecasting scales": "`ESNRegressor(1, 1, 100)` with ORC's forecasting scales "
    "(bias 1.6, leak 0.6, input scaling 0.08, sr 0.8)",
    "regressor defaults": "`ESNRegressor(1, 1, 100)` (its defaults: bias 0.2, leak 1, "
    "input scaling 0.4, sr 0.95)",
    "scaled (section 2)": "scaled for NARMA10 (leak 1, bias 0, input scaling 0.2, sr 0.9)",
}
LORENZ_LABELS = {
    "default": "`ESNForecaster(3, 300)` (orc's defaults)",
    "symmetric": "symmetric (leak 1, bias 0, input scaling 0.5, sr 0.9)",
}
SUMMARY = """\
**Reading.** Both libraries run the same rule (with leak 1 and one epoch,
orc's gains and biases equal reservoirpy's to 1e-15 on the same matrices);
orc runs it as one compiled loop, reservoirpy as a Python loop over the
steps, and reservoirpy's local rules also search the sparse matrix at every
step, which is why Oja's rule grows apart with the size. Intrinsic
plasticity helps where a reservoir starts saturated (ORC's forecasting bias
of 1.6 on NARMA's inputs in [0, 0.5]; reservoirpy's biases of +-1 per node)
and costs accuracy where the reservoir is already scaled for the task
(the guide's section 2 reservoir; the regressor's own defaults). It also
removes the bias a Lorenz63 forecaster relies on (IP with `mu=0` centres
every node), and it does not make a symmetric reservoir forecast Lorenz63."""


def timed(fn, repeats):
    """Seconds of the first call and the median of ``repeats`` more."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return first, float(np.median(times))


def speed(x_train, sizes, epochs, repeats):
    out = {}
    for n in sizes:
        model = ESNRegressor(1, 1, n, Wr_spectral_radius=0.95, embedding_scaling=0.2,
                             leak_rate=1.0, bias=0.0, seed=0)  # fmt: skip
        ip = timed(lambda m=model: intrinsic_plasticity(m, x_train, epochs=epochs,
                                                        spinup=100), repeats)  # fmt: skip
        oja = timed(lambda m=model: local_plasticity(m, x_train, spinup=100), repeats)
        out[str(n)] = {"ip": ip, "local": oja}
        print(f"orc N={n}: IP {ip[1]:.4f} s (first {ip[0]:.2f} s), "
              f"Oja {oja[1]:.4f} s (first {oja[0]:.2f} s)", flush=True)  # fmt: skip
    return out


def narma(u, y, seeds, epochs):
    x_train, y_train = u[:1999], y[1:2000]
    x_test, y_test = u[1999:-1], y[2000:]
    out = {}
    configs = (("forecasting scales", FORECASTING), ("regressor defaults", {}),
               ("scaled (section 2)", SCALED_NARMA))  # fmt: skip
    for label, kw in configs:
        scores = []
        for seed in seeds:
            reg = ESNRegressor(1, 1, 100, seed=seed, **kw)
            row = []
            for model in (reg, intrinsic_plasticity(reg, x_train, epochs=epochs,
                                                    spinup=100)):  # fmt: skip
                model, last = train_RCRegressor(model, x_train, y_train, spinup=100,
                                                beta=1e-7)  # fmt: skip
                row.append(float(nrmse(model.predict(x_test, last), y_test)))
            scores.append(row)
        out[label] = scores
        print(f"NARMA10 {label}: {np.median(scores, 0)}", flush=True)
    return out


def lorenz(seeds, epochs):
    U, _ = orc.data.lorenz63(tN=400, dt=0.01)
    U = np.asarray(U[2000:])
    U = (U - U[:10000].mean(0)) / U[:10000].std(0)  # IP's steps grow with the input
    train = U[:10000]
    scale = float(np.sqrt((train**2).sum(1).mean()))

    def valid_time(model):
        model, _ = train_RCForecaster(model, train, spinup=200)
        vts = []
        for w in range(8):
            s = 10000 + 2500 * w
            r = model.force(U[s - 300 : s], model.driver.default_state())[-1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a diverged forecast scores 0
                pred = model.forecast(1500, r)
            vts.append(float(valid_prediction_time(
                pred, U[s : s + 1500], dt=0.01, lyapunov_exponent=LYAP, scale=scale)))  # fmt: skip
        return float(np.median(vts))

    out = {}
    for label, kw in (("default", {}), ("symmetric", SYMMETRIC)):
        rows = []
        for seed in seeds:
            m = ESNForecaster(3, 300, seed=seed, **kw)
            rows.append([valid_time(m), valid_time(
                intrinsic_plasticity(m, train, epochs=epochs, spinup=100))])  # fmt: skip
        out[label] = rows
        print(f"Lorenz63 {label}: {np.median(rows, 0)}", flush=True)
    return out


def reservoirpy(u, y, a):
    sys.path.insert(0, HERE)
    from harness import envs  # benchmarks/harness: the peer venvs

    lib = envs.LIBRARIES["rpy"]
    ok, msg = envs.ensure_env(lib)
    print(f"[setup] rpy: {msg}")
    if not ok:
        return {"error": msg}
    with tempfile.TemporaryDirectory(prefix="orc-plasticity-") as d:
        np.save(os.path.join(d, "narma_u.npy"), u)
        np.save(os.path.join(d, "narma_y.npy"), y)
        task = {"sizes": a.sizes, "epochs": a.epochs, "repeats": a.repeats,
                "seeds": [42, *range(10)]}  # fmt: skip
        with open(os.path.join(d, "task.json"), "w") as f:
            json.dump(task, f)
        script = os.path.join(HERE, "plasticity_reservoirpy.py")
        run = subprocess.run([str(lib.python), script, d], env=envs.child_env(lib))
        if run.returncode != 0:
            return {"error": f"plasticity_reservoirpy.py exited {run.returncode}"}
        with open(os.path.join(d, "reservoirpy.json")) as f:
            return json.load(f)


def report(res, a) -> str:
    rpy = res.get("reservoirpy", {})
    lines = [
        "# Plasticity: orc.plasticity and reservoirpy 0.4.2",
        "",
        f"`python benchmarks/plasticity.py` on {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, orc {orc.__version__}, jax {jax.__version__}, "
        "float64. One run, both libraries side by side.",
        "",
        f"## Speed: seconds per adaptation (NARMA10, 1999 inputs; IP {a.epochs} "
        "epochs, Oja 1)",
        "",
        "orc: median of later calls (first call, with compilation, in brackets). "
        "reservoirpy: `fit` after its matrices are drawn.",
        "",
        "| nodes | IP orc | IP reservoirpy | ratio | Oja orc | Oja reservoirpy | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in a.sizes:
        o = res["speed"][str(n)]
        r = rpy.get("time", {}).get(str(n))
        cells = []
        for key in ("ip", "local"):
            first, warm = o[key]
            theirs = r[key] if r else None
            cells += [f"{warm:.4f} ({first:.2f})",
                      f"{theirs:.3f}" if theirs else "-",
                      f"{theirs / warm:.0f}x" if theirs else "-"]  # fmt: skip
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += ["", "## NARMA10: NRMSE before -> after intrinsic plasticity "
              "(100 nodes, sigma 0.2)", "",
              "Median over seeds 0-9; seed 42 for reservoirpy in brackets (the "
              "guide's printed run).", "",
              "| reservoir | before | after |", "|---|---|---|"]  # fmt: skip
    if "narma" in rpy:
        s42, rest = rpy["narma"][0], np.median(rpy["narma"][1:], 0)
        lines.append(f"| reservoirpy `IPReservoir(100, sr=0.95, input_scaling=0.2)` | "
                     f"{rest[0]:.3f} ({s42[0]:.3f}) | {rest[1]:.3f} ({s42[1]:.3f}) |")  # fmt: skip
    for label, rows in res["narma"].items():
        m = np.median(rows, 0)
        lines.append(
            f"| orc {NARMA_LABELS.get(label, label)} | {m[0]:.3f} | {m[1]:.3f} |"
        )
    lines += ["", "## Lorenz63 (standardised): valid time (Lyapunov times) before -> after "
              "intrinsic plasticity (300 nodes, sigma 0.2, 5 epochs)", "",
              "Median over seeds 0-3 of each seed's median over 8 windows.", "",
              "| reservoir | before | after |", "|---|---|---|"]  # fmt: skip
    for label, rows in res["lorenz"].items():
        m = np.median(rows, 0)
        lines.append(
            f"| orc {LORENZ_LABELS.get(label, label)} | {m[0]:.2f} | {m[1]:.2f} |"
        )
    lines += ["", SUMMARY]
    return "\n".join(lines) + "\n"


PARTS = ["speed", "narma", "lorenz", "reservoirpy"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-reservoirpy", action="store_true")
    p.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS,
                   help="measure these; keep the others from plasticity.json")  # fmt: skip
    p.add_argument("--report-only", action="store_true",
                   help="rewrite PLASTICITY.md from plasticity.json")  # fmt: skip
    a = p.parse_args()
    if a.report_only:
        with open(os.path.join(HERE, "plasticity.json")) as f:
            res = json.load(f)
        a.sizes, a.epochs = [int(n) for n in res["speed"]], res.get("epochs", a.epochs)
        with open(os.path.join(HERE, "PLASTICITY.md"), "w") as f:
            f.write(report(res, a))
        return
    u, y = (np.asarray(x) for x in orc.data.narma(3000, order=10))
    path = os.path.join(HERE, "plasticity.json")
    res = {}
    if set(a.parts) != set(PARTS):
        with open(path) as f:
            res = json.load(f)
    res["epochs"] = a.epochs
    measure = {
        "speed": lambda: speed(u[:1999], a.sizes, a.epochs, a.repeats),
        "narma": lambda: narma(u, y, range(10), a.epochs),
        "lorenz": lambda: lorenz(range(4), 5),
        "reservoirpy": lambda: reservoirpy(u, y, a),
    }
    for part in PARTS:
        if part in a.parts and not (part == "reservoirpy" and a.no_reservoirpy):
            res[part] = measure[part]()
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    a.sizes = [int(n) for n in res["speed"]]
    text = report(res, a)
    with open(os.path.join(HERE, "PLASTICITY.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
