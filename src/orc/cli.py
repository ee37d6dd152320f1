"""The ``orc`` command line.

Commands::

    orc demo                                   # ESN on Lorenz63: train, forecast, plot
    orc data lorenz63 --out l63.csv            # export a built-in system
    orc train l63.csv --res-dim 500 --out esn.orc
    orc forecast esn.orc --steps 1000 --out fc.csv --plot fc.png
    orc evaluate esn.orc l63_test.csv --dt 0.01 --lyapunov 0.906

Data files are CSV (a header row of column names is allowed) or ``.npy``,
one row per time step and one column per feature. Every command reads its
options also from a TOML file given with ``--config`` (keys are the option
names with dashes or underscores). Errors are one line on stderr with exit
code 2 (bad input) or 1 (failure while running).

The command line is an application, so unlike the library it sets JAX's
configuration: float64 on, and a persistent compilation cache so a second run
does not recompile.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click
import tomllib

LORENZ_LYAPUNOV = 0.906
SYSTEMS = (
    "lorenz63",
    "rossler",
    "sakaraya",
    "colpitts",
    "hyper_lorenz63",
    "hyper_xu",
    "double_pendulum",
    "lorenz96",
    "KS_1D",
    "double_scroll",
    "multiscroll",
)
# Discrete series: sampled on their own grid, sized by a number of steps.
SERIES = ("mackey_glass", "narma", "henon_map", "logistic_map", "mso")


def _configure_jax() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    cache = (
        Path(os.environ.get("ORC_CACHE_DIR", Path.home() / ".cache" / "orc")) / "jax"
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except OSError:  # read-only home: run without the cache
        pass


def _load_config(ctx: click.Context, _param, value):
    if value is None:
        return value
    try:
        with open(value, "rb") as f:
            cfg = tomllib.load(f)
    except OSError as err:
        raise click.BadParameter(f"cannot read {value}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise click.BadParameter(f"{value} is not valid TOML: {err}") from err
    ctx.default_map = {k.replace("-", "_"): v for k, v in cfg.items()}
    return value


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False),
    callback=_load_config,
    is_eager=True,
    expose_value=False,
    help="TOML file with option values (command-line options win).",
)


def _read_data(path: str):
    """``(T, d)`` float64 array from CSV or .npy, with clear errors."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise click.UsageError(f"data file not found: {path}")
    try:
        if p.suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        else:
            with open(p) as f:
                first = f.readline()
            skip = 1 if any(c.isalpha() and c not in "eE" for c in first) else 0
            data = np.loadtxt(p, delimiter=",", skiprows=skip, ndmin=2)
    except ValueError as err:
        raise click.UsageError(f"{path}: cannot parse as numbers ({err})") from err
    data = np.asarray(data, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 2:
        raise click.UsageError(
            f"{path}: expected a (time, features) table, got shape {data.shape}"
        )
    bad = ~np.isfinite(data).all(axis=1)
    if bad.any():
        rows = np.nonzero(bad)[0]
        raise click.UsageError(
            f"{path}: {bad.sum()} row(s) contain NaN or inf (first at data row {rows[0]}); "
            "remove or interpolate them"
        )
    return data


def _write_table(path: str, data, header: list[str]) -> None:
    import numpy as np

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".npy":
        np.save(p, np.asarray(data))
    else:
        np.savetxt(
            p, np.asarray(data), delimiter=",", header=",".join(header), comments=""
        )


def _columns(n: int) -> list[str]:
    return [f"u{i}" for i in range(n)]


def _load_model(path: str):
    import orc

    if not Path(path).is_file():
        raise click.UsageError(f"model file not found: {path}")
    try:
        forecasters = (orc.forecaster.RCForecasterBase, orc.forecaster.NVARForecaster)
        return orc.load(path, cls=forecasters, return_extras=True)
    except orc.io.ModelFileError as err:
        raise click.UsageError(str(err)) from err


def _check_width(data, model, what: str):
    if data.shape[1] != model.in_dim:
        raise click.UsageError(
            f"{what} has {data.shape[1]} columns but the model expects {model.in_dim}"
        )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Reservoir computing in JAX: train, forecast and evaluate echo state networks."""


# ---------------------------------------------------------------------- demo
@cli.command()
@click.option("--res-dim", default=500, show_default=True, help="Reservoir size.")
@click.option(
    "--train-steps", default=20000, show_default=True, help="Training samples."
)
@click.option("--seed", default=0, show_default=True, help="Model seed.")
@click.option("--out", default="orc-output", show_default=True, help="Output folder.")
@config_option
def demo(res_dim: int, train_steps: int, seed: int, out: str) -> None:
    """Train an ESN (ORC defaults) on Lorenz63, forecast ten test windows,
    report the valid prediction time and save a forecast plot."""
    _configure_jax()
    import jax.numpy as jnp
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    import orc

    dt, warmup, horizon, n_windows = 0.01, 200, 1500, 10
    click.echo("orc demo: echo state network forecast of the Lorenz63 system")
    t0 = time.perf_counter()
    total = train_steps + n_windows * (warmup + horizon) + 1000
    U, _ = orc.data.lorenz63(tN=total * dt, dt=dt)
    U = U[1000:]  # drop the transient onto the attractor
    click.echo(
        f"  data        {U.shape[0]} samples, dt={dt} ({time.perf_counter() - t0:.1f} s)"
    )

    t0 = time.perf_counter()
    esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=res_dim, seed=seed)
    esn, R = orc.forecaster.train_RCForecaster(esn, U[:train_steps], spinup=200)
    R.block_until_ready()
    click.echo(
        f"  training    res_dim={res_dim}, {train_steps} steps, states {tuple(R.shape)} "
        f"({time.perf_counter() - t0:.1f} s incl. compilation)"
    )
    t0 = time.perf_counter()
    scale = float(jnp.sqrt(jnp.mean(jnp.sum(U[train_steps:] ** 2, axis=1))))
    vpts, first = [], None
    for w in range(n_windows):
        start = train_steps + warmup + w * (warmup + horizon)
        pred = esn.forecast_from_IC(horizon, U[start - warmup : start])
        truth = U[start : start + horizon]
        vpts.append(
            float(
                orc.metrics.valid_prediction_time(
                    pred, truth, 0.4, dt, LORENZ_LYAPUNOV, scale=scale
                )
            )
        )
        first = first or (truth, pred)
    vpts = np.array(vpts)
    click.echo(
        f"  forecasting {n_windows} windows of {horizon} steps ({time.perf_counter() - t0:.1f} s)"
    )
    click.echo(
        f"  valid prediction time (error < 0.4): mean {vpts.mean():.2f} Lyapunov times "
        f"(min {vpts.min():.2f}, max {vpts.max():.2f}; window cap "
        f"{horizon * dt * LORENZ_LYAPUNOV:.2f})"
    )
    path = Path(out) / "lorenz63_forecast.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = orc.utils.visualization.plot_forecast(
        first[0],
        first[1],
        dt=dt,
        lyapunov_exponent=LORENZ_LYAPUNOV,
        state_var_names=["x", "y", "z"],
        title=f"ESN forecast of Lorenz63 (res_dim={res_dim}), test window 1",
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    click.echo(f"  plot        {path.resolve()}")


# ---------------------------------------------------------------------- data
@cli.command()
@click.argument("name", type=click.Choice(SYSTEMS + SERIES))
@click.option("--out", required=True, help="Output file (.csv or .npy).")
@click.option("--tn", "tN", default=100.0, show_default=True, help="Final time.")
@click.option(
    "--dt", default=0.01, show_default=True, help="Sampling step (KS_1D: 0.25)."
)
@click.option(
    "--steps",
    default=None,
    type=click.IntRange(min=2),
    help="Length of a discrete series (mackey_glass, narma, henon_map, "
    "logistic_map, mso); default tN/dt.",
)
@click.option(
    "--transient", default=0, show_default=True, help="Leading samples to drop."
)
@config_option
def data(name: str, out: str, tN: float, dt: float, steps, transient: int) -> None:
    """Export a built-in dynamical system as a (time, features) table.

    ODEs and KS_1D are integrated up to --tn and sampled every --dt; the
    discrete series (mackey_glass sampled every 1 time unit, narma's input u
    and output y, the maps, mso) have --steps rows.
    """
    _configure_jax()
    import numpy as np

    import orc

    fn = getattr(orc.data, name)
    try:
        if name in SERIES:
            n = steps if steps is not None else int(round(tN / dt))
            U = fn(n)
            U = np.concatenate([np.asarray(a) for a in U], 1) if name == "narma" else U
        else:
            U, t = fn(tN, dt=dt) if name == "KS_1D" else fn(tN, dt)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    U = np.asarray(U)[transient:]
    names = {
        "lorenz63": ["x", "y", "z"],
        "rossler": ["x", "y", "z"],
        "narma": ["u", "y"],
        "henon_map": ["x", "y"],
    }.get(name, _columns(U.shape[1]))
    _write_table(out, U, names)
    click.echo(f"wrote {U.shape[0]} samples x {U.shape[1]} features of {name} to {out}")


# --------------------------------------------------------------------- train
@cli.command()
@click.argument("data_file", metavar="DATA")
@click.option(
    "--model",
    type=click.Choice(["esn", "deep-esn", "nvar"]),
    default="esn",
    show_default=True,
    help="esn: echo state network (parallel with --chunks); deep-esn: stacked "
    "reservoirs (--layers); nvar: next-generation RC (--k, --order).",
)
@click.option(
    "--res-dim", default=500, show_default=True, help="Reservoir size per chunk/layer."
)
@click.option("--layers", default=2, show_default=True, help="deep-esn: layers.")
@click.option("--k", default=2, show_default=True, help="nvar: delayed samples.")
@click.option("--order", default=2, show_default=True, help="nvar: monomial order.")
@click.option(
    "--input-noise",
    default=0.0,
    show_default=True,
    help="Std of noise added to the training inputs (stabilises closed loops).",
)
@click.option("--leak-rate", default=0.6, show_default=True)
@click.option("--spectral-radius", default=0.8, show_default=True)
@click.option("--density", default=0.02, show_default=True)
@click.option("--bias", default=1.6, show_default=True)
@click.option("--embedding-scaling", default=0.08, show_default=True)
@click.option("--chunks", default=1, show_default=True, help="Parallel reservoirs.")
@click.option("--locality", default=0, show_default=True)
@click.option(
    "--beta",
    default=None,
    type=float,
    help="Ridge regularisation [default: 8e-8; nvar 2.5e-6].",
)
@click.option(
    "--spinup", default=100, show_default=True, help="Transient states dropped."
)
@click.option(
    "--val-fraction",
    default=0.0,
    show_default=True,
    help="Trailing fraction held out and forecast for validation.",
)
@click.option(
    "--dt", default=None, type=float, help="Sample spacing (to report VPT in time)."
)
@click.option("--lyapunov", default=None, type=float, help="Largest Lyapunov exponent.")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", required=True, help="Model file to write.")
@config_option
def train(data_file, model, res_dim, layers, k, order, input_noise, leak_rate,
          spectral_radius, density, bias, embedding_scaling, chunks, locality, beta,
          spinup, val_fraction, dt, lyapunov, seed, out) -> None:  # fmt: skip
    """Train a forecaster on DATA (CSV or .npy, time x features) and save it."""
    U = _read_data(data_file)
    if not 0.0 <= val_fraction < 1.0:
        raise click.UsageError("--val-fraction must be in [0, 1)")
    n_val = int(round(val_fraction * U.shape[0]))
    n_train = U.shape[0] - n_val
    if spinup >= n_train - 1:
        raise click.UsageError(
            f"--spinup ({spinup}) must be less than the training length ({n_train})"
        )
    _configure_jax()
    import jax.numpy as jnp

    import orc

    esn_args = dict(
        data_dim=U.shape[1], res_dim=res_dim, leak_rate=leak_rate, bias=bias,
        embedding_scaling=embedding_scaling, Wr_density=density,
        Wr_spectral_radius=spectral_radius, seed=seed,
    )  # fmt: skip
    fc = orc.forecaster
    try:
        if model == "esn":
            esn = fc.ESNForecaster(**esn_args, chunks=chunks, locality=locality)
            what = f"res_dim={res_dim}, chunks={chunks}"
        elif model == "deep-esn":
            esn = fc.DeepESNForecaster(**esn_args, n_layers=layers)
            what = f"res_dim={res_dim}, layers={layers}"
        else:
            esn = fc.NVARForecaster(U.shape[1], k=k, order=order)
            what = f"k={k}, order={order}, {esn.n_features} features"
    except (ValueError, TypeError) as err:
        raise click.UsageError(str(err)) from err
    t0 = time.perf_counter()
    train_fn = fc.train_NVARForecaster if model == "nvar" else fc.train_RCForecaster
    if beta is None:
        beta = 2.5e-6 if model == "nvar" else 8e-8
    esn, last = train_fn(
        esn,
        jnp.asarray(U[:n_train]),
        spinup=spinup,
        beta=beta,
        return_states=False,
        input_noise=input_noise,
        noise_seed=seed,
    )
    last.block_until_ready()
    click.echo(
        f"trained {model} ({what}) on {n_train} samples x "
        f"{U.shape[1]} features in {time.perf_counter() - t0:.1f} s"
    )
    if n_val:
        pred = esn.forecast(n_val, last)
        _report(pred, jnp.asarray(U[n_train:]), dt, lyapunov, "validation")
    orc.save(out, esn, extras={"last_state": last})
    click.echo(f"saved {out}")


def _report(pred, truth, dt, lyapunov, label):
    import orc

    nrmse = float(orc.metrics.nrmse(pred, truth))
    steps = float(orc.metrics.valid_prediction_time(pred, truth, 0.4))
    line = f"{label}: {truth.shape[0]} steps, NRMSE {nrmse:.4g}, valid prediction {steps:.0f} steps"
    if dt is not None:
        line += f" = {steps * dt:.3g} time units"
        if lyapunov is not None:
            line += f" = {steps * dt * lyapunov:.3g} Lyapunov times"
    click.echo(line)


# ------------------------------------------------------------------ forecast
@cli.command()
@click.argument("model_file", metavar="MODEL")
@click.option(
    "--steps", required=True, type=click.IntRange(min=1), help="Samples to forecast."
)
@click.option("--warmup", default=None, help="Data to warm the reservoir up on (default: "
              "continue from the end of training).")  # fmt: skip
@click.option("--out", required=True, help="Forecast file (.csv or .npy).")
@click.option("--plot", default=None, help="Also plot the forecast to this PNG.")
@config_option
def forecast(model_file, steps, warmup, out, plot) -> None:
    """Forecast STEPS samples with a saved model."""
    _configure_jax()
    import jax.numpy as jnp

    model, extras = _load_model(model_file)
    if warmup is not None:
        W = _read_data(warmup)
        _check_width(W, model, warmup)
        pred = model.forecast_from_IC(steps, jnp.asarray(W))
    elif "last_state" in extras:
        pred = model.forecast(steps, extras["last_state"])
    else:
        raise click.UsageError(f"{model_file} stores no last state; pass --warmup DATA")
    _write_table(out, pred, _columns(pred.shape[1]))
    click.echo(f"wrote {steps} forecast steps to {out}")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import orc

        fig = orc.utils.visualization.plot_time_series(
            pred,
            x_label="step",
            title=f"forecast by {Path(model_file).name}",
            figsize=(12, 6),
        )
        fig.savefig(plot, dpi=110, bbox_inches="tight")
        click.echo(f"wrote plot {plot}")


# ------------------------------------------------------------------ evaluate
@cli.command()
@click.argument("model_file", metavar="MODEL")
@click.argument("data_file", metavar="DATA")
@click.option(
    "--warmup", default=200, show_default=True, help="Leading rows used to warm up."
)
@click.option("--dt", default=None, type=float, help="Sample spacing.")
@click.option("--lyapunov", default=None, type=float, help="Largest Lyapunov exponent.")
@config_option
def evaluate(model_file, data_file, warmup, dt, lyapunov) -> None:
    """Warm up on the first rows of DATA, forecast the rest, print NRMSE and VPT."""
    U = _read_data(data_file)
    _configure_jax()
    import jax.numpy as jnp

    model, _ = _load_model(model_file)
    _check_width(U, model, data_file)
    if not 0 < warmup < U.shape[0]:
        raise click.UsageError(f"--warmup must be in (0, {U.shape[0]}), got {warmup}")
    pred = model.forecast_from_IC(U.shape[0] - warmup, jnp.asarray(U[:warmup]))
    _report(pred, jnp.asarray(U[warmup:]), dt, lyapunov, "evaluation")


# ---------------------------------------------------------------------- info
@cli.command()
@click.option(
    "--calibrate",
    is_flag=True,
    help="Also measure the native kernel variants on this machine now and print "
    "the fastest (as ORC_NATIVE_VARIANTS takes them) with their times.",
)
def info(calibrate) -> None:
    """Show which implementation runs here: native kernels or XLA, SIMD, threads, BLAS."""
    _configure_jax()
    from ._config import show_config

    show_config()
    if calibrate:
        from . import _native

        click.echo(
            "\nMeasured now (the build measured the variants in use the same way):"
        )
        click.echo(_native.calibrate().rstrip())


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="orc", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as err:
        click.echo(f"orc: error: {err.format_message()}", err=True)
        return 2
    except Exception as err:  # noqa: BLE001 - one line for the user, not a traceback
        first = (
            str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        )
        click.echo(f"orc: error: {first}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
