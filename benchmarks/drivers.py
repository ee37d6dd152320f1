"""orc's drivers side by side, each at its defaults, on three standard tasks.

Every driver of :mod:`orc.drivers` that builds from a seed, at its own
defaults, around the same input layer and a ridge readout, in one run:

- ``memory``: short-term memory capacity of 50 nodes, delays 1-100
  (:func:`orc.metrics.memory_capacity`, reservoirpy's protocol, 5000
  samples of ``U(-0.8, 0.8)``, 1000 held out; higher is better), input
  scaling 0.1;
- ``narma10``: NARMA10 by 300 nodes, NRMSE on 2000 held-out steps after
  training on 4000 (lower is better), input scaling 0.1;
- ``lorenz63``: valid prediction time of closed-loop forecasts by 300
  nodes, in Lyapunov times (threshold 0.4 of the attractor's scale; higher
  is better): trained on 10000 samples at dt 0.01, then forecasting five
  windows of 2000 steps (18 Lyapunov times), each from the state the model
  reaches by teacher forcing up to it, and the median of the five; input
  scaling 0.08 (orc's default for raw Lorenz data);
- ``train s``: the seconds to train that forecaster once compiled (its
  second training), to compare the drivers' cost per step.

The spiking reservoir is embedded with 10 times the scaling (its neurons
must reach the firing threshold; ``orc.drivers.LIFDriver``); the reservoir
memory network keeps 25 of 50 and 100 of 300 nodes as memory; the
state-delay and input-delay drivers wrap an ESN of a third of the nodes
(16 and 100) with two delays and the deep ESN has two layers of half the
nodes (their readouts read as many features as the others', 48 for 50);
the input-delay driver's three drives are scaled a third each (the sum the
size of the others' one). Medians and the values of seeds 0-2; results in
``benchmarks/DRIVERS.md`` and ``drivers.json``.

    python benchmarks/drivers.py     # ~5 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)
import equinox as eqx  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc import drivers  # noqa: E402
from orc.embeddings import LinearEmbedding  # noqa: E402
from orc.readouts import LinearReadout  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LYAPUNOV, DT = 0.906, 0.01
WINDOWS, WINDOW = 5, 2000

#: name -> (driver of n nodes and a seed, input scaling factor, the drive's size)
DRIVERS = {
    "ESNDriver": (lambda n, s: drivers.ESNDriver(n, seed=s), 1.0, None),
    "ES2NDriver": (lambda n, s: drivers.ES2NDriver(n, seed=s), 1.0, None),
    "MRNNDriver": (lambda n, s: drivers.MRNNDriver(n, seed=s), 1.0, None),
    "EuSNDriver": (lambda n, s: drivers.EuSNDriver(n, seed=s), 1.0, None),
    "ResESNDriver": (lambda n, s: drivers.ResESNDriver(n, seed=s), 1.0, None),
    "RMNDriver": (
        lambda n, s: drivers.RMNDriver(n, 25 if n == 50 else n // 3, seed=s),
        1.0,
        None,
    ),
    "EIESNDriver": (lambda n, s: drivers.EIESNDriver(n, seed=s), 1.0, None),
    "LIFDriver": (lambda n, s: drivers.LIFDriver(n, seed=s), 10.0, None),
    "StateDelayDriver": (
        lambda n, s: drivers.StateDelayDriver(drivers.ESNDriver(n // 3, seed=s), 2),
        1.0,
        lambda n: n // 3,
    ),
    "InputDelayDriver": (
        lambda n, s: drivers.InputDelayDriver(drivers.ESNDriver(n // 3, seed=s), 2),
        1 / 3,
        None,
    ),
    "DeepESNDriver": (
        lambda n, s: drivers.DeepESNDriver(n // 2, seed=s),
        1.0,
        lambda n: n // 2,
    ),  # fmt: skip
}
TASKS = ("memory", "narma10", "lorenz63", "train s")


def regressor(name, n, seed, scaling):
    """An ``ESNRegressor`` (1 -> 1) around the driver ``name`` of ``n`` nodes."""
    build, factor, drive = DRIVERS[name]
    d = build(n, seed)
    m = drive(n) if drive else d.res_dim
    reg = orc.regression.ESNRegressor(1, 1, d.res_dim, seed=seed)
    return eqx.tree_at(
        lambda r: (r.driver, r.embedding),
        reg,
        (d, LinearEmbedding(1, m, scaling * factor, seed=seed + 100)),
    )


def memory(name, seed):
    u = np.random.default_rng(0).uniform(-0.8, 0.8, 5000)
    reg = regressor(name, 50, seed, 0.1)
    return float(orc.metrics.memory_capacity(reg, 100, series=u, test_size=1000))


def narma10(name, seed, data):
    u, y = data
    reg = regressor(name, 300, seed, 0.1)
    reg, _ = orc.regression.train_RCRegressor(reg, u[:4000], y[:4000], spinup=100)
    pred = np.asarray(reg.predict(u[4000:]))[100:]
    true = y[4000:][100:]
    return float(np.sqrt(np.mean((pred - true) ** 2)) / np.std(true))


def lorenz63(name, seed, data):
    """Valid prediction time (Lyapunov times) and the second training's seconds."""
    train, test, scale = data
    build, factor, drive = DRIVERS[name]
    d = build(300, seed)
    m = drive(300) if drive else d.res_dim
    model = orc.forecaster.RCForecasterBase(
        driver=d,
        readout=LinearReadout(3, d.res_dim),
        embedding=LinearEmbedding(3, m, 0.08 * factor, seed=seed + 100),
    )
    trained, R = orc.forecaster.train_RCForecaster(model, train, spinup=200)
    start = time.perf_counter()
    orc.forecaster.train_RCForecaster(model, train, spinup=200)[1].block_until_ready()
    seconds = time.perf_counter() - start
    vpts = []
    for k in range(WINDOWS):
        lead = test[: k * WINDOW]  # teacher-forced up to the window
        state = trained.force(lead, R[-1])[-1] if k else R[-1]
        window = test[k * WINDOW : (k + 1) * WINDOW]
        pred = trained.forecast(WINDOW, state)
        vpts.append(orc.metrics.valid_prediction_time(
            pred, window, scale=scale, dt=DT, lyapunov_exponent=LYAPUNOV
        ))  # fmt: skip
    return float(np.median(vpts)), seconds


def run(seeds):
    u, y = (np.asarray(a) for a in orc.data.narma(6000, seed=1))
    U, _ = orc.data.lorenz63(tN=11000 * DT + WINDOWS * WINDOW * DT, dt=DT)
    U = np.asarray(U)[1000:]
    train, test = U[:10000], U[10000 : 10000 + WINDOWS * WINDOW]
    scale = float(np.sqrt(np.mean(np.sum(train**2, axis=1))))
    res = {}
    for name in DRIVERS:
        runs = []
        for s in seeds:
            vpt, seconds = lorenz63(name, s, (train, test, scale))
            runs.append({"memory": memory(name, s), "narma10": narma10(name, s, (u, y)),
                         "lorenz63": vpt, "train s": seconds})  # fmt: skip
        res[name] = {t: [r[t] for r in runs] for t in TASKS}
        row = res[name]
        print(name + ": " + ", ".join(f"{t} {np.median(row[t]):.3g}" for t in TASKS),
              flush=True)  # fmt: skip
    return res


def report(res, seeds):
    def cell(values, digits):
        med = np.median(values)
        each = ", ".join(f"{v:.{digits}f}" for v in values)
        return f"**{med:.{digits}f}** ({each})"

    lines = [
        "# orc's drivers side by side",
        "",
        f"`python benchmarks/drivers.py` on {platform.machine()}, orc "
        f"{orc.__version__}, jax {jax.__version__}, float64, one run. Each "
        f"driver at its defaults; median (seeds {', '.join(map(str, seeds))}).",
        "",
        "- memory: memory capacity of 50 nodes, delays 1-100 (higher is better);",
        "- narma10: NRMSE of 300 nodes on NARMA10 (lower is better);",
        "- lorenz63: valid prediction time of 300 nodes on Lorenz63, in "
        "Lyapunov times, the median of five windows (higher is better);",
        "- train s: seconds of one training of that forecaster (10000 samples), "
        "compiled.",
        "",
        "The reservoir memory network keeps 25 of 50 and 100 of 300 nodes as "
        "memory; the state- and input-delay drivers an ESN of 100 nodes with "
        "two delays (300 features; for memory an ESN of 16, 48 features); the "
        "deep ESN two "
        "layers of 150 (25 for memory); the input-delay driver's three drives "
        "are scaled a third each; the "
        "spiking reservoir's input is scaled 10 times the others' (its neurons "
        "must reach the threshold). The script's docstring has the protocol.",
        "",
        "| driver | memory | narma10 | lorenz63 | train s |",
        "|---|---|---|---|---|",
    ]
    for name, row in res.items():
        lines.append(
            f"| `{name}` | {cell(row['memory'], 1)} | {cell(row['narma10'], 3)} | "
            f"{cell(row['lorenz63'], 1)} | {cell(row['train s'], 2)} |"
        )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    res = run(seeds)
    with open(os.path.join(HERE, "drivers.json"), "w") as f:
        json.dump({"seeds": seeds, "results": res}, f, indent=1)
    with open(os.path.join(HERE, "DRIVERS.md"), "w") as f:
        f.write(report(res, seeds))


if __name__ == "__main__":
    main()
