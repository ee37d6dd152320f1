"""The ``orc`` command line.

``orc demo`` trains an echo state network on Lorenz63, forecasts ten test
windows, prints the valid prediction time in Lyapunov times and writes a
forecast plot. The command line is an application, so unlike the library it
sets JAX's configuration: float64 on, and a persistent compilation cache so a
second run does not recompile.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

LORENZ_LYAPUNOV = 0.906


def _configure_jax() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    cache = Path(
        os.environ.get("ORC_CACHE_DIR", Path.home() / ".cache" / "orc" / "jax")
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except OSError:  # read-only home: run without the cache
        pass


def demo(args: argparse.Namespace) -> int:
    _configure_jax()
    import jax.numpy as jnp
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    import orc

    dt, n_train, warmup, horizon, n_windows = 0.01, args.train_steps, 200, 1000, 10
    print("orc demo: echo state network forecast of the Lorenz63 system")
    t0 = time.perf_counter()
    total = n_train + n_windows * (warmup + horizon) + 1000
    U, _ = orc.data.lorenz63(tN=total * dt, dt=dt)
    U = U[1000:]  # drop the transient onto the attractor
    print(
        f"  data        {U.shape[0]} samples, dt={dt} ({time.perf_counter() - t0:.1f} s)"
    )

    t0 = time.perf_counter()
    esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=args.res_dim, seed=args.seed)
    esn, R = orc.forecaster.train_RCForecaster(esn, U[:n_train], spinup=200)
    R.block_until_ready()
    print(
        f"  training    res_dim={args.res_dim}, {n_train} steps, states {tuple(R.shape)} "
        f"({time.perf_counter() - t0:.1f} s incl. compilation)"
    )

    t0 = time.perf_counter()
    scale = float(jnp.sqrt(jnp.mean(jnp.sum(U[n_train:] ** 2, axis=1))))
    vpts, first = [], None
    for w in range(n_windows):
        start = n_train + warmup + w * (warmup + horizon)
        pred = esn.forecast_from_IC(horizon, U[start - warmup : start])
        truth = U[start : start + horizon]
        vpt = orc.metrics.valid_prediction_time(
            pred, truth, 0.4, dt, LORENZ_LYAPUNOV, scale=scale
        )
        vpts.append(float(vpt))
        if first is None:
            first = (truth, pred)
    vpts = np.array(vpts)
    print(
        f"  forecasting {n_windows} windows of {horizon} steps ({time.perf_counter() - t0:.1f} s)"
    )
    print(
        f"  valid prediction time (error < 0.4): mean {vpts.mean():.2f} Lyapunov times "
        f"(min {vpts.min():.2f}, max {vpts.max():.2f}; window cap {horizon * dt * LORENZ_LYAPUNOV:.2f})"
    )

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "lorenz63_forecast.png"
    fig = orc.utils.visualization.plot_forecast(
        first[0],
        first[1],
        dt=dt,
        lyapunov_exponent=LORENZ_LYAPUNOV,
        state_var_names=["x", "y", "z"],
        title=f"ESN forecast of Lorenz63 (res_dim={args.res_dim}), test window 1",
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"  plot        {path.resolve()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orc", description="Reservoir computing in JAX."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "demo",
        help="train an ESN on Lorenz63, forecast and plot",
        description="Train an echo state network (ORC defaults) on Lorenz63, forecast ten "
        "test windows, report the valid prediction time and save a plot.",
    )
    p.add_argument(
        "--res-dim", type=int, default=500, help="reservoir size (default 500)"
    )
    p.add_argument(
        "--train-steps",
        type=int,
        default=20000,
        help="training samples (default 20000)",
    )
    p.add_argument("--seed", type=int, default=0, help="model seed (default 0)")
    p.add_argument(
        "--out", default="orc-output", help="output folder (default ./orc-output)"
    )
    p.set_defaults(func=demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
