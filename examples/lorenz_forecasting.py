"""Forecast the Lorenz63 system with an echo state network.

Trains an ESN by teacher forcing on one long trajectory, forecasts autonomously
(closed loop) from the end of the training data and from ten held-out windows,
scores the forecasts by valid prediction time in Lyapunov times, compares the
long-term climate (per-variable statistics and the attractor's shape), and
saves/loads the model.

    python examples/lorenz_forecasting.py

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a small, fast version (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for figures and the model file
(default ``examples/output/``).
"""

import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import orc

jax.config.update("jax_enable_x64", True)  # before any model or array is made

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
OUT.mkdir(parents=True, exist_ok=True)

LYAPUNOV = 0.906  # largest Lyapunov exponent of Lorenz63 (rho=28, sigma=10, beta=8/3)
DT = 0.01
RES_DIM = 100 if SMALL else 1000
N_TRAIN = 4000 if SMALL else 20000
N_WINDOWS = 3 if SMALL else 10
WARMUP, HORIZON = 200, 1500  # per test window: warm-up samples, forecast steps

# ---------------------------------------------------------------- data
n_total = 1000 + N_TRAIN + N_WINDOWS * (WARMUP + HORIZON)
U, t = orc.data.lorenz63(tN=n_total * DT, dt=DT)  # U: (n_total, 3)
U = U[1000:]  # drop the transient: start on the attractor
U_train, U_test = U[:N_TRAIN], U[N_TRAIN:]
print(f"data: {U.shape[0]} samples of Lorenz63, dt={DT}")

# ------------------------------------------------------- build and train
esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=RES_DIM, seed=0)
esn, R = orc.forecaster.train_RCForecaster(esn, U_train, spinup=200)
print("states:", R.shape)  # (N_TRAIN, 1, RES_DIM): time, chunk, node

# ------------------------------------------------------------- forecast
U_pred = esn.forecast(fcast_len=HORIZON, res_state=R[-1])  # (HORIZON, 3)
truth = U_test[:HORIZON]  # U_pred[0] predicts U_test[0], the sample after training
scale = jnp.sqrt(jnp.mean(jnp.sum(U_test**2, axis=1)))  # attractor scale
vpt = orc.metrics.valid_prediction_time(
    U_pred, truth, threshold=0.4, dt=DT, lyapunov_exponent=LYAPUNOV, scale=scale
)
print(f"valid prediction time after training: {float(vpt):.2f} Lyapunov times")

# Held-out windows: warm the reservoir up on WARMUP samples, then forecast.
vpts = []
for w in range(N_WINDOWS):
    start = N_TRAIN + WARMUP + w * (WARMUP + HORIZON)
    pred = esn.forecast_from_IC(HORIZON, U[start - WARMUP : start])
    vpts.append(
        float(
            orc.metrics.valid_prediction_time(
                pred, U[start : start + HORIZON], 0.4, DT, LYAPUNOV, scale=scale
            )
        )
    )
vpts = np.array(vpts)
print(
    f"valid prediction time over {N_WINDOWS} held-out windows: mean {vpts.mean():.2f}, "
    f"min {vpts.min():.2f}, max {vpts.max():.2f} Lyapunov times "
    f"(window cap {HORIZON * DT * LYAPUNOV:.2f})"
)

# Climate: long after the trajectories separate, does the forecast stay on the
# attractor? Compare the statistics of each variable (and see the 3-D plot).
long_pred = esn.forecast(U_test.shape[0], R[-1])
for i, name in enumerate("xyz"):
    print(
        f"{name}: mean {float(long_pred[:, i].mean()):6.2f} (truth "
        f"{float(U_test[:, i].mean()):6.2f}), std {float(long_pred[:, i].std()):5.2f} "
        f"(truth {float(U_test[:, i].std()):5.2f}) over {U_test.shape[0]} steps"
    )

# ----------------------------------------------------------------- plots
fig = orc.utils.visualization.plot_forecast(
    truth,
    U_pred,
    dt=DT,
    lyapunov_exponent=LYAPUNOV,
    state_var_names=["x", "y", "z"],
    title=f"ESN forecast of Lorenz63 (res_dim={RES_DIM})",
)
fig.savefig(OUT / "lorenz_forecast.png", dpi=100)
plt.close(fig)

fig = orc.utils.visualization.plot_attractor(
    [U_test, long_pred],
    labels=["truth", "ESN forecast"],
    title="Lorenz63 attractor: truth and long closed-loop forecast",
)
fig.savefig(OUT / "lorenz_attractor.png", dpi=100)
plt.close(fig)

# ------------------------------------------------------------ save / load
path = orc.save(OUT / "lorenz_esn.orc", esn, extras={"last_state": R[-1]})
esn2, extras = orc.load(path, return_extras=True)
U_again = esn2.forecast(HORIZON, extras["last_state"])
assert bool(jnp.all(U_again == U_pred))  # bit-exact round trip
print(f"saved and reloaded {path.name}: identical forecast")

# ------------------------------------------------ compiled: the second call
t0 = time.perf_counter()
esn.forecast(HORIZON, R[-1]).block_until_ready()
print(f"warm forecast of {HORIZON} steps: {1e3 * (time.perf_counter() - t0):.1f} ms")
print(f"figures in {OUT}")
