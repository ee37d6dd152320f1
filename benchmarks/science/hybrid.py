"""Hybrid forecasting (Pathak et al. 2018): valid time against reservoir size.

Run from the repository root with our interpreter (nothing else needed)::

    .venv/bin/python benchmarks/science/hybrid.py              # the full table
    .venv/bin/python benchmarks/science/hybrid.py --sizes 50,100 --seeds 2

Pathak et al. (Chaos 28, 041101, 2018) join an imperfect model to a reservoir
and find that the hybrid forecasts Lorenz63 longer than either part, and that
a small hybrid outlasts a much larger reservoir alone (their Fig. 3). This
script measures that with :class:`orc.forecaster.HybridESNForecaster`:

- data: Lorenz63 (``orc.data.lorenz63``, ``dt = 0.01``), 10000 training
  samples after a transient, then ``--windows`` test windows of 3000 samples
  (27.2 Lyapunov times, the most a forecast can score), each forecast from a
  100-sample warm-up of the true series (``forecast_from_IC``);
- the imperfect model: one RK4 step of the Lorenz equations with ``rho``
  multiplied by ``1 + eps``, for each ``eps`` of ``--eps``;
- reservoirs of each size in ``--sizes`` with orc's defaults, ``--seeds``
  seeds each: the ESN alone (``ESNForecaster``) and the hybrid for each
  ``eps``, both trained with ``beta = 1e-6`` after a 100-sample spin-up;
- score: the valid prediction time (error above 0.4 of the training data's
  RMS norm, as ``orc``'s command line scores), in Lyapunov times (0.906);
  the imperfect model alone is scored on the same windows from the true
  state.

It writes ``benchmarks/science/HYBRID.md`` (medians and quartiles over
windows and seeds), ``hybrid.json`` (every score) and ``hybrid.png``.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402

HERE = Path(__file__).resolve().parent
DT, LYAPUNOV, THRESHOLD = 0.01, 0.906, 0.4
TRAIN, WARMUP, HORIZON, SPINUP, BETA = 10000, 100, 3000, 100, 1e-6


def lorenz(u, rho):
    x, y, z = u
    return jnp.stack([10.0 * (y - x), x * (rho - z) - y, x * y - 8 / 3 * z])


def knowledge_step(u, eps):
    """One RK4 step of the Lorenz equations with rho = 28 (1 + eps)."""
    f = functools.partial(lorenz, rho=28.0 * (1 + eps))
    k1 = f(u)
    k2 = f(u + DT / 2 * k1)
    k3 = f(u + DT / 2 * k2)
    k4 = f(u + DT * k3)
    return u + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def data(n_windows):
    """Training samples, and the test windows: (warm-up, truth) pairs."""
    need = TRAIN + n_windows * (WARMUP + HORIZON)
    U, _ = orc.data.lorenz63(tN=(need + 1000) * DT, dt=DT)
    U = np.asarray(U)[1000 : 1000 + need]
    train, rest = U[:TRAIN], U[TRAIN:]
    windows = []
    for w in range(n_windows):
        chunk = rest[w * (WARMUP + HORIZON) : (w + 1) * (WARMUP + HORIZON)]
        windows.append((chunk[:WARMUP], chunk[WARMUP:]))
    return train, windows


def scores(forecast, windows, scale):
    """Valid times (Lyapunov times) of ``forecast(warmup)`` on each window."""
    out = []
    for warmup, truth in windows:
        pred = forecast(warmup)
        vpt = orc.metrics.valid_prediction_time(
            pred, truth, THRESHOLD, dt=DT, lyapunov_exponent=LYAPUNOV, scale=scale
        )
        out.append(float(vpt))
    return out


def knowledge_only(eps, windows, scale):
    @jax.jit
    def run(u0):
        def step(u, _):
            u = knowledge_step(u, eps)
            return u, u

        return jax.lax.scan(step, u0, length=HORIZON)[1]

    # the first prediction is of the sample after the warm-up
    return scores(lambda warmup: run(jnp.asarray(warmup[-1])), windows, scale)


def measure(sizes, seeds, eps_list, n_windows):
    train, windows = data(n_windows)
    scale = float(np.sqrt(np.mean(np.sum(train**2, axis=1))))
    results = {"equations": {}, "esn": {}, "hybrid": {}}
    for eps in eps_list:
        results["equations"][str(eps)] = knowledge_only(eps, windows, scale)
    for n in sizes:
        for seed in range(seeds):
            t0 = time.perf_counter()
            esn, _ = orc.forecaster.train_RCForecaster(
                orc.forecaster.ESNForecaster(3, n, seed=seed),
                train, spinup=SPINUP, beta=BETA,
            )  # fmt: skip
            key = f"{n}"
            results["esn"].setdefault(key, []).extend(
                scores(lambda w, m=esn: m.forecast_from_IC(HORIZON, w), windows, scale)
            )
            for eps in eps_list:
                hybrid, _ = orc.forecaster.train_RCForecaster(
                    orc.forecaster.HybridESNForecaster(
                        3, n, functools.partial(knowledge_step, eps=eps), seed=seed
                    ),
                    train, spinup=SPINUP, beta=BETA,
                )  # fmt: skip
                results["hybrid"].setdefault(f"{eps}/{n}", []).extend(
                    scores(
                        lambda w, m=hybrid: m.forecast_from_IC(HORIZON, w),
                        windows,
                        scale,
                    )
                )
            print(f"N={n} seed={seed}: {time.perf_counter() - t0:.1f} s", flush=True)
    return results


def quartiles(values):
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{med:.1f} ({q1:.1f}-{q3:.1f})"


def report(results, sizes, seeds, eps_list, n_windows, seconds):
    lines = [
        "# Hybrid forecasting: valid time against reservoir size",
        "",
        "`benchmarks/science/hybrid.py` (protocol in its docstring), "
        f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
        f"{seconds / 60:.1f} min. Lorenz63, `dt = 0.01`, {TRAIN} training samples; "
        f"{n_windows} test windows of {HORIZON} samples; {seeds} seeds per size; "
        "orc's default hyperparameters. The imperfect model is RK4 on the "
        "Lorenz equations with `rho = 28 (1 + eps)`.",
        "",
        "Valid time in Lyapunov times (error above 0.4 of the training data's "
        f"RMS norm; at most {HORIZON * DT * LYAPUNOV:.1f}, the window): median "
        "(quartiles) over windows and seeds.",
        "",
    ]
    header = "| reservoir nodes | ESN alone | " + " | ".join(
        f"hybrid, eps = {e}" for e in eps_list
    )
    lines += [header + " |", "|" + "---|" * (2 + len(eps_list))]
    for n in sizes:
        row = [str(n), quartiles(results["esn"][str(n)])]
        row += [quartiles(results["hybrid"][f"{e}/{n}"]) for e in eps_list]
        lines.append("| " + " | ".join(row) + " |")
    row = ["the equations alone", "-"]
    row += [quartiles(results["equations"][str(e)]) for e in eps_list]
    lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "![valid time against reservoir size](hybrid.png)",
        "",
    ]
    return "\n".join(lines)


def plot(results, sizes, eps_list, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))

    def band(values_by_size, label, style):
        q = np.array([np.percentile(v, [25, 50, 75]) for v in values_by_size])
        line = ax.plot(sizes, q[:, 1], style, label=label)[0]
        ax.fill_between(sizes, q[:, 0], q[:, 2], color=line.get_color(), alpha=0.15)
        return line.get_color()

    band([results["esn"][str(n)] for n in sizes], "ESN alone", "o-")
    for eps in eps_list:
        color = band(
            [results["hybrid"][f"{eps}/{n}"] for n in sizes],
            f"hybrid, eps = {eps}",
            "s-",
        )
        ax.axhline(np.median(results["equations"][str(eps)]), color=color, ls=":", lw=1)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_xlabel("reservoir nodes")
    ax.set_ylabel("valid time (Lyapunov times)")
    ax.set_title("Lorenz63: dotted, the imperfect equations alone")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100,200,400,800")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eps", default="0.01,0.05,0.2")
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    eps_list = [float(e) for e in args.eps.split(",")]
    warnings.simplefilter("ignore")  # diverged forecasts are scored, not reported
    t0 = time.perf_counter()
    results = measure(sizes, args.seeds, eps_list, args.windows)
    seconds = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hybrid.json").write_text(json.dumps(results, indent=1))
    plot(results, sizes, eps_list, args.out / "hybrid.png")
    text = report(results, sizes, args.seeds, eps_list, args.windows, seconds)
    (args.out / "HYBRID.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
