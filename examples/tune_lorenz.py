"""Tune an echo state network on Lorenz63 with ``orc.tune.search``.

A population of candidates (seeds x Sobol draws of spectral radius, leak,
input scaling and bias x ridge strengths) is trained on 20 000 samples and
scored by valid prediction time on held-out validation windows; the best
model is then scored on test windows the search never saw, beside ORC's
default model of the same size.

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a small, fast version (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for the table, the report and the
best model (default ``examples/output``).
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import orc  # noqa: E402
from orc.forecaster import ESNForecaster, train_RCForecaster  # noqa: E402
from orc.tune import Forecast, LogUniform, Uniform  # noqa: E402

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
RES_DIM = 60 if SMALL else 500
N_TRAIN = 2000 if SMALL else 20000
HORIZON = 150 if SMALL else 1000
SEEDS, DRAWS, BETAS = (1, 2, 2) if SMALL else (4, 8, 8)
LYAP, DT = 0.906, 0.01


def test_vpt(model, test, scale, starts):
    """Mean valid prediction time over test windows (Lyapunov times)."""
    states = model.force(test, model.driver.default_state())
    vpts = [
        orc.metrics.valid_prediction_time(
            model.forecast(HORIZON, states[s - 1]),
            test[s : s + HORIZON],
            dt=DT,
            lyapunov_exponent=LYAP,
            scale=scale,
        )  # fmt: skip
        for s in starts
    ]
    return float(np.mean(vpts))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    n_val = 100 + 3 * HORIZON
    U, _ = orc.data.lorenz63(tN=(N_TRAIN + 2 * n_val + 1000) * DT, dt=DT)
    U = jnp.asarray(U)[1000:]
    train, val = U[:N_TRAIN], U[N_TRAIN : N_TRAIN + n_val]
    test = U[N_TRAIN + n_val : N_TRAIN + 2 * n_val]

    task = Forecast(train, val, spinup=100, warmup=100, horizon=HORIZON,
                    windows=10, dt=DT, lyapunov_exponent=LYAP)  # fmt: skip
    space = {
        "Wr_spectral_radius": Uniform(0.2, 1.4),
        "leak_rate": Uniform(0.1, 1.0),
        "embedding_scaling": LogUniform(0.01, 1.0),
        "bias": Uniform(0.0, 2.0),
    }
    result = orc.tune.search(
        ESNForecaster, space, task, fixed={"data_dim": 3, "res_dim": RES_DIM},
        seeds=SEEDS, draws=DRAWS, beta=LogUniform(1e-10, 1e-3), ridge_points=BETAS,
    )  # fmt: skip
    print(result)
    best = result.best
    print("best:", {k: best[k] for k in (*space, "seed", "beta", "vpt")})
    result.to_csv(OUT / "tune_lorenz.csv")
    result.plot(OUT / "tune_lorenz.png")

    scale = jnp.sqrt(jnp.mean(jnp.sum(train**2, axis=1)))
    starts = task.starts  # the same window layout, on the test data
    tuned = result.best_model
    default, _ = train_RCForecaster(
        ESNForecaster(3, RES_DIM, seed=0), train, spinup=100
    )
    print(f"test VPT (Lyapunov times, {len(starts)} windows never used to select): "
          f"tuned {test_vpt(tuned, test, scale, starts):.2f}, "
          f"default {test_vpt(default, test, scale, starts):.2f}")  # fmt: skip
    orc.save(OUT / "tune_lorenz_best.orc", tuned)
    print(f"written {OUT / 'tune_lorenz.csv'}, {OUT / 'tune_lorenz.png'}, "
          f"{OUT / 'tune_lorenz_best.orc'}")  # fmt: skip


if __name__ == "__main__":
    main()
