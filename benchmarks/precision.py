"""float32 against float64: valid prediction time of a Lorenz63 ESN.

One data set (Lorenz63, dt 0.01, 20000 training samples, windows of 200
warm-up + 1500 forecast samples), one reservoir (``ESNForecaster(3, N,
seed=0)``, ORC's defaults), four ways of training it, each in its own process
because JAX's x64 switch is process-wide:

- ``float64``: the model and the fit in float64 (x64 on).
- ``float32, x64 on``: a float32 model; the fit accumulates its statistics and
  solves in float64 (``orc._ridge.accumulation``), the weights are float32.
- ``float32, x64 off``: a float32 model where no float64 exists (ORC's default
  for a plain script); the fit keeps its statistics in QR form (TSQR).
- ``float32 normal equations``: for reference, what a float32 fit by the
  normal equations gives (``G = F^T F`` and its Cholesky in float32, as orc
  did before issue 19 and as ORC does): the same float32 states, the readout
  solved that way.

Reported: mean (min, max) VPT over the windows in Lyapunov times (error
threshold 0.4, normalised by the test data's RMS norm), the ratio to float64,
and the warm training time. Run::

    .venv/bin/python benchmarks/precision.py [--res-dim 1000] [--windows 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DT, LYAPUNOV, TRAIN, WARMUP, HORIZON = 0.01, 0.906, 20000, 200, 1500

WORKER = r"""
import json, sys, time, warnings
import numpy as np
import equinox as eqx
import jax, jax.numpy as jnp
mode, n, data_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jax.config.update("jax_enable_x64", mode in ("float64", "float32_x64"))
import orc
from orc.forecaster import ESNForecaster, train_RCForecaster
DT, LYAP, TRAIN, WARMUP, HORIZON = 0.01, 0.906, 20000, 200, 1500
U = np.load(data_file)
dtype = jnp.float64 if mode == "float64" else jnp.float32
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = ESNForecaster(3, res_dim=n, seed=0, dtype=dtype)
    train = jnp.asarray(U[:TRAIN], dtype)
    times = []
    for _ in range(2):  # the first call compiles
        t0 = time.perf_counter()
        fitted, states = train_RCForecaster(model, train, spinup=200)
        states.block_until_ready()
        times.append(time.perf_counter() - t0)
    if mode == "float32_normal":  # the readout re-solved by float32 normal equations
        ro = fitted.readout
        X = ro.prepare_train(states[200:-1]).reshape(TRAIN - 201, -1)
        Y = ro.prepare_target(train[201:]).reshape(X.shape[0], -1)
        G = X.T @ X + jnp.float32(8e-8) * jnp.eye(X.shape[1], dtype=X.dtype)
        W = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(G), True), X.T @ Y).T
        fitted = eqx.tree_at(lambda m: m.readout, fitted, ro.set_wout(W.reshape(ro.wout.shape)))
    scale = float(np.sqrt(np.mean(np.sum(U[TRAIN:] ** 2, 1))))
    vpts, windows = [], (len(U) - TRAIN) // (WARMUP + HORIZON)
    for w in range(windows):
        s = TRAIN + WARMUP + w * (WARMUP + HORIZON)
        p = np.asarray(fitted.forecast_from_IC(HORIZON, jnp.asarray(U[s - WARMUP:s], dtype)), np.float64)
        vpts.append(float(orc.metrics.valid_prediction_time(p, U[s:s + HORIZON], 0.4, DT, LYAP, scale=scale)))
print(json.dumps({"vpt": vpts, "train_s": times[1], "dtype": str(fitted.readout.wout.dtype)}))
"""  # the constants repeat the module's: keep them equal

MODES = {
    "float64": "float64 (x64 on)",
    "float32_x64": "float32 model, x64 on: float64 statistics",
    "float32": "float32 model, x64 off: QR-form statistics",
    "float32_normal": "float32 normal equations (before; ORC's way)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res-dim", type=int, default=1000)
    ap.add_argument("--windows", type=int, default=10)
    args = ap.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import orc

    total = TRAIN + args.windows * (WARMUP + HORIZON) + 1000
    U = np.asarray(orc.data.lorenz63(tN=total * DT, dt=DT)[0])[1000:]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lorenz63.npy"
        np.save(path, U)
        env = dict(os.environ)
        env.pop("JAX_ENABLE_X64", None)
        for mode in MODES:
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", WORKER, mode, str(args.res_dim), str(path)],
                capture_output=True,
                text=True,
                env=env,
            )
            if out.returncode:
                sys.exit(f"{mode} failed:\n{out.stderr[-3000:]}")
            rows[mode] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {mode}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    ref = np.mean(rows["float64"]["vpt"])
    print(
        f"Lorenz63 ESN, N={args.res_dim}, {args.windows} windows of {HORIZON} steps; "
        "VPT in Lyapunov times"
    )
    print("| training | weights | mean VPT (min, max) | / float64 | warm training |")
    print("| :--- | :--- | ---: | ---: | ---: |")
    for mode, label in MODES.items():
        v = np.asarray(rows[mode]["vpt"])
        print(
            f"| {label} | {rows[mode]['dtype']} | {v.mean():.2f} ({v.min():.2f}, "
            f"{v.max():.2f}) | {v.mean() / ref:.0%} | {rows[mode]['train_s']:.2f} s |"
        )


if __name__ == "__main__":
    main()
