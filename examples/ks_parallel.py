"""Forecast the Kuramoto-Sivashinsky equation with parallel reservoirs.

The scheme of Pathak, Hunt, Girvan, Lu & Ott (2018, Phys. Rev. Lett. 120,
024102): the periodic grid is cut into ``CHUNKS`` contiguous patches and each
patch gets its own reservoir. A reservoir is driven by its patch plus
``LOCALITY`` grid points on each side (the overlap carries information across
patch borders) and its readout predicts only its own patch. The patches'
predictions are put back together into the next field, which is fed back to
every reservoir in closed loop. Each reservoir therefore only has to learn the
local dynamics, so the cost grows linearly with the size of the domain.

Here: KS on a periodic domain of length L = 22 with 64 grid points, 8 reservoirs
of 1000 nodes, each driven by its 8 points plus 6 neighbours on each side
(Pathak et al.'s patch size and overlap). The forecasts are scored by the valid
prediction time on 20 held-out windows, in Lyapunov times.

    python examples/ks_parallel.py            # full run (about 20-30 s on 2 cores)
    python examples/ks_parallel.py --small    # small, fast version (the tests)

Environment: ``ORC_EXAMPLE_SMALL=1`` is the same as ``--small``;
``ORC_EXAMPLE_OUT`` is the folder for the figures (default
``examples/output/``).
"""

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax

# --8<-- [start:x64]
jax.config.update("jax_enable_x64", True)  # before any model or array is made
# --8<-- [end:x64]

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # write files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402

# ------------------------------------------------------------ the problem
# --8<-- [start:setup]
L = 22.0  # length of the periodic domain
NX = 64  # grid points (distinct; the periodic end point is not repeated)
DT = 0.25  # time between samples
# Largest Lyapunov exponent of KS at L = 22. Published values are 0.043
# (Edson, Bunder, Mattner & Roberts 2019, ANZIAM J. 61, 270; used by Vlachas et
# al. 2020, Neural Networks 126, 191) to 0.048 (Cvitanovic, Davidchack &
# Siminos 2010, SIAM J. Appl. Dyn. Syst. 9, 1). We take the smaller one, which
# gives the smaller (more conservative) number of Lyapunov times.
LYAPUNOV = 0.043
CHUNKS = 8  # parallel reservoirs, 64 / 8 = 8 grid points each
LOCALITY = 6  # neighbours seen on each side of a patch
THRESHOLD = 0.4  # valid prediction time: normalised error below this
# --8<-- [end:setup]


@dataclass(frozen=True)
class Config:
    """Sizes of one run; the hyperparameters below were chosen by experiment."""

    res_dim: int  # nodes per reservoir
    n_train: int  # training samples
    n_windows: int  # held-out test windows
    horizon: int  # forecast steps per window
    warmup: int = 200  # samples that synchronise the reservoir before a forecast
    spinup: int = 200  # first training states left out of the fit
    transient: int = 1000  # samples dropped while the flow settles on the attractor


FULL = Config(res_dim=1000, n_train=20000, n_windows=20, horizon=1000)
SMALL = Config(res_dim=400, n_train=8000, n_windows=3, horizon=300)


# ------------------------------------------------------------------- data
# --8<-- [start:data]
def ks_trajectory(n_samples: int, seed: int = 2018) -> np.ndarray:
    """``(n_samples, NX)`` samples of KS, spacing ``DT``, from a random start.

    ``orc.data.KS_1D`` follows ORC's grid convention: ``Nx`` counts the repeated
    periodic end point. ``Nx = NX + 1`` and dropping the last column leave the
    ``NX`` distinct points ``x_j = j L / NX``.
    """
    rng = np.random.default_rng(seed)
    u0 = 0.5 * rng.standard_normal(NX + 1)
    u0 -= u0[:NX].mean()  # KS conserves the mean; start (and stay) at zero mean
    U, _ = orc.data.KS_1D(tN=n_samples * DT, u0=u0, dt=DT, domain=(0, L), Nx=NX + 1)
    return np.asarray(U[:, :NX])


# --8<-- [end:data]


# ------------------------------------------------------ model and training
# --8<-- [start:model]
def build_esn(cfg: Config, seed: int = 0) -> orc.forecaster.ESNForecaster:
    """8 reservoirs, each seeing its 8 grid points plus 6 on either side."""
    return orc.forecaster.ESNForecaster(
        data_dim=NX,
        res_dim=cfg.res_dim,  # nodes per reservoir
        chunks=CHUNKS,
        locality=LOCALITY,
        periodic=True,  # the patches wrap around the periodic domain
        leak_rate=1.0,  # no leak: r' = tanh(W r + W_in u + b)
        Wr_spectral_radius=0.6,
        Wr_density=0.02,  # 20 connections per node at res_dim=1000
        embedding_scaling=0.1,  # W_in ~ U(-0.1, 0.1), 20 inputs per node
        bias=0.5,
        seed=seed,
    )


def train(esn, U_train, cfg: Config):
    """Teacher forcing + ridge regression, one readout per reservoir.

    ``return_states=False`` accumulates the regression statistics while the
    reservoirs run instead of storing every state (here that would be
    n_train x 8 x res_dim numbers), and returns only the last state.
    ``input_noise`` adds a little Gaussian noise to the forcing inputs (not to
    the targets): the readout then learns to pull slightly perturbed states
    back, which keeps the closed loop on the attractor.
    """
    esn, _ = orc.forecaster.train_ESNForecaster(
        esn,
        U_train,
        spinup=cfg.spinup,
        beta=1e-6,
        return_states=False,
        input_noise=3e-4,
        noise_seed=0,
    )
    return esn


# --8<-- [end:model]


# ------------------------------------------------------------- evaluation
@dataclass
class Result:
    esn: orc.forecaster.ESNForecaster
    vpts: np.ndarray  # (n_windows,) valid prediction times in Lyapunov times
    persistence_vpts: np.ndarray  # same for the forecast "nothing changes"
    errors: np.ndarray  # (n_windows, horizon) normalised error of each forecast
    truths: np.ndarray  # (n_windows, horizon, NX)
    preds: np.ndarray  # (n_windows, horizon, NX)
    train_seconds: float


def run_experiment(cfg: Config, seed: int = 0) -> Result:
    """Generate data, train, and forecast every held-out window."""
    window = cfg.warmup + cfg.horizon
    U = ks_trajectory(cfg.transient + cfg.n_train + cfg.n_windows * window)
    U = U[cfg.transient :]
    U_train, U_test = U[: cfg.n_train], U[cfg.n_train :]

    t0 = time.perf_counter()
    esn = train(build_esn(cfg, seed), U_train, cfg)
    jax.block_until_ready(esn)
    train_seconds = time.perf_counter() - t0

    # --8<-- [start:evaluate]
    # The size of the attractor, sqrt(mean ||u_t||^2) over the training data:
    # one scale for every window, so their errors are comparable.
    scale = np.sqrt(np.mean(np.sum(U_train**2, axis=1)))

    def vpt(pred, truth):
        return float(
            orc.metrics.valid_prediction_time(
                pred, truth, THRESHOLD, DT, LYAPUNOV, scale=scale
            )
        )

    vpts, persistence, errors, truths, preds = [], [], [], [], []
    for w in range(cfg.n_windows):
        warm = U_test[w * window : w * window + cfg.warmup]
        truth = U_test[w * window + cfg.warmup : (w + 1) * window]
        # Drive the reservoirs with the warm-up samples from rest, then run
        # closed loop: pred[0] predicts truth[0], the sample after `warm`.
        pred = np.asarray(esn.forecast_from_IC(cfg.horizon, warm))
        vpts.append(vpt(pred, truth))
        # Baseline: the last warm-up sample, held constant.
        persistence.append(vpt(np.broadcast_to(warm[-1], truth.shape), truth))
        errors.append(np.asarray(orc.metrics.normalised_error(pred, truth, scale)))
        truths.append(truth)
        preds.append(pred)
    # --8<-- [end:evaluate]
    return Result(
        esn,
        np.array(vpts),
        np.array(persistence),
        np.array(errors),
        np.array(truths),
        np.array(preds),
        train_seconds,
    )


# ---------------------------------------------------------------- figures
def save_figures(result: Result, cfg: Config, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    t = DT * np.arange(cfg.horizon)  # time since the forecast started
    lyap_t = LYAPUNOV * t

    # Truth / forecast / error for the window with the median valid prediction
    # time (a typical window, not the best one).
    # --8<-- [start:plot]
    w = int(np.argsort(result.vpts)[len(result.vpts) // 2])
    fig = orc.utils.visualization.plot_spatiotemporal_forecast(
        result.truths[w],
        result.preds[w],
        t=t,
        domain=(0, L),
        lyapunov_exponent=LYAPUNOV,
        title=(
            f"KS (L={L:g}, {NX} points): {CHUNKS} parallel reservoirs of "
            f"{cfg.res_dim} nodes, test window {w + 1}"
        ),
    )
    for ax in fig.axes[:3]:  # the three image panels
        ax.axvline(result.vpts[w], color="k", ls="--", lw=1.2)
    fig.axes[0].text(
        result.vpts[w],
        L,
        f" valid prediction time {result.vpts[w]:.2f} Λt",
        va="top",
        ha="left",
        fontsize="small",
        bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
    )
    forecast_png = out_dir / "ks_parallel_forecast.png"
    fig.savefig(forecast_png, dpi=100)
    # --8<-- [end:plot]
    plt.close(fig)

    # Every window: valid prediction time and normalised error against time.
    fig, (ax_bar, ax_err) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    idx = np.arange(1, len(result.vpts) + 1)
    ax_bar.bar(idx, result.vpts, color="tab:blue", label="parallel ESN")
    ax_bar.bar(idx, result.persistence_vpts, color="tab:gray", label="persistence")
    ax_bar.axhline(
        result.vpts.mean(),
        color="tab:red",
        ls="--",
        label=f"ESN mean {result.vpts.mean():.2f} Λt",
    )
    ax_bar.set_xlabel("test window")
    ax_bar.set_ylabel(r"valid prediction time (Lyapunov times $\Lambda t$)")
    ax_bar.set_xticks(idx)
    ax_bar.set_title(f"valid prediction time, error threshold {THRESHOLD}")
    ax_bar.legend(loc="upper left", fontsize="small")
    for err in result.errors:
        ax_err.plot(lyap_t, err, color="tab:blue", alpha=0.35, lw=1)
    ax_err.plot(lyap_t, np.median(result.errors, axis=0), color="k", label="median")
    ax_err.axhline(THRESHOLD, color="tab:red", ls="--", label=f"threshold {THRESHOLD}")
    ax_err.set_ylim(0, 2.0)
    ax_err.set_xlim(0, lyap_t[-1])
    ax_err.set_xlabel(r"Lyapunov times $\Lambda t$")
    ax_err.set_ylabel(
        r"normalised error $\|\hat u - u\| / \sqrt{\langle\|u\|^2\rangle}$"
    )
    ax_err.set_title("error of each window's forecast")
    ax_err.legend(loc="upper left", fontsize="small")
    vpt_png = out_dir / "ks_parallel_vpt.png"
    fig.savefig(vpt_png, dpi=100)
    plt.close(fig)
    return [forecast_png, vpt_png]


# ------------------------------------------------------------------- main
def main(small: bool = False, out_dir: str | Path | None = None) -> np.ndarray:
    """Run the example; returns the per-window valid prediction times (Λt)."""
    cfg = SMALL if small else FULL
    if out_dir is None:
        default = Path(__file__).parent / "output"
        out_dir = os.environ.get("ORC_EXAMPLE_OUT", default)
    t_start = time.perf_counter()
    result = run_experiment(cfg)
    print(
        f"KS L={L:g}, {NX} points, dt={DT}: {CHUNKS} reservoirs x {cfg.res_dim} "
        f"nodes, locality {LOCALITY}, {cfg.n_train} training samples "
        f"(trained in {result.train_seconds:.1f} s)"
    )
    cap = cfg.horizon * DT * LYAPUNOV
    print(f"valid prediction time per window (Lyapunov times, cap {cap:.2f}):")
    for w, (v, p) in enumerate(zip(result.vpts, result.persistence_vpts, strict=True)):
        print(f"  window {w + 1:2d}: {v:5.2f}   (persistence {p:.2f})")
    print(
        f"mean {result.vpts.mean():.2f} Λt (median {np.median(result.vpts):.2f}, "
        f"min {result.vpts.min():.2f}, max {result.vpts.max():.2f}); "
        f"persistence mean {result.persistence_vpts.mean():.2f} Λt"
    )
    for path in save_figures(result, cfg, Path(out_dir)):
        print(f"wrote {path}")
    print(f"wall time {time.perf_counter() - t_start:.1f} s")
    return result.vpts


if __name__ == "__main__":
    main(small="--small" in sys.argv[1:] or os.environ.get("ORC_EXAMPLE_SMALL") == "1")
