"""JAX transformations on orc models: jit, vmap and grad.

Models are Equinox modules, i.e. JAX pytrees whose arrays are the weights and
whose Python settings are static. So they can be passed to ``jax.jit`` as
ordinary arguments, mapped over with ``jax.vmap`` and differentiated with
``jax.grad``, including through training (teacher forcing plus the ridge solve).

1. ``jax.jit`` with the model as an explicit argument: a retrained model of
   the same shape reuses the compiled program.
2. ``jax.vmap`` over initial conditions: an ensemble of forecasts from
   perturbed warm-up data in one call.
3. ``jax.vmap`` over a hyperparameter: train and score several leak rates in
   one compiled program.
4. ``jax.grad`` of a validation loss with respect to the leak rate, through
   training and the closed-loop forecast, checked against finite differences.

    python examples/jit_patterns.py

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a small, fast version (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for figures (default
``examples/output/``).
"""

import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import orc

jax.config.update("jax_enable_x64", True)

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
OUT.mkdir(parents=True, exist_ok=True)

DT, LYAPUNOV = 0.01, 0.906
RES_DIM = 100 if SMALL else 300
N_TRAIN = 2000 if SMALL else 6000
N_VAL = 200  # validation forecast length of the loss (1.8 Lyapunov times)
N_ENSEMBLE = 8 if SMALL else 32
N_LEAKS = 4 if SMALL else 12
BETA = 1e-6

U, _ = orc.data.lorenz63(tN=(1000 + N_TRAIN + 2000) * DT, dt=DT)
U = U[1000:]
U_train, U_after = U[:N_TRAIN], U[N_TRAIN:]
esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=RES_DIM, seed=0)

# ------------------------------------------------------------- 1. jax.jit
traces = []


@eqx.filter_jit  # arrays are traced; Python ints (fcast_len) and settings are static
def train_and_forecast(model, train_seq, beta, fcast_len):
    traces.append(1)  # runs only while tracing
    model, R = orc.forecaster.train_RCForecaster(
        model, train_seq, spinup=100, beta=beta
    )
    return model.forecast(fcast_len, R[-1]), R[-1]


# beta as an array is traced: a new value reuses the compiled program (a Python
# float would be static, and each new value would compile anew)
pred_a, _ = train_and_forecast(esn, U_train, jnp.asarray(1e-6), 500)
pred_b, _ = train_and_forecast(esn, U_train, jnp.asarray(1e-4), 500)
print(f"1. jit: two trainings + forecasts, traced {len(traces)} time(s)")

# plain jax.jit works too when the loop length is marked static
forecast = jax.jit(lambda model, r, n: model.forecast(n, r), static_argnums=2)
trained, R = orc.forecaster.train_RCForecaster(esn, U_train, spinup=100, beta=BETA)
assert bool(jnp.allclose(forecast(trained, R[-1], 500), trained.forecast(500, R[-1])))

# ----------------------------------------------- 2. vmap over initial conditions
WARMUP, HORIZON = 200, 1000
warm = U_after[:WARMUP]
truth = U_after[WARMUP : WARMUP + HORIZON]
noise = 1e-3 * jax.random.normal(jax.random.key(0), (N_ENSEMBLE,) + warm.shape)
ensemble = jax.vmap(lambda w: trained.forecast_from_IC(HORIZON, w))(warm + noise)
scale = jnp.sqrt(jnp.mean(jnp.sum(U_after**2, axis=1)))
vpts = jax.vmap(
    lambda p: orc.metrics.valid_prediction_time(p, truth, 0.4, DT, LYAPUNOV, scale)
)(ensemble)
print(
    f"2. vmap: {N_ENSEMBLE} forecasts from perturbed warm-ups {tuple(ensemble.shape)}, "
    f"valid prediction time {float(vpts.min()):.2f} to {float(vpts.max()):.2f} "
    f"Lyapunov times"
)


# ------------------------------------------ 3. vmap over a hyperparameter
def val_loss(leak, model):
    """Mean squared error of an N_VAL-step forecast after training with ``leak``."""
    model = eqx.tree_at(lambda m: m.driver.leak, model, leak)
    model, R = orc.forecaster.train_RCForecaster(model, U_train, spinup=100, beta=BETA)
    pred = model.forecast(N_VAL, R[-1])
    return jnp.mean((pred - U_after[:N_VAL]) ** 2)


leaks = jnp.linspace(0.1, 1.0, N_LEAKS)
losses = jax.jit(jax.vmap(val_loss, in_axes=(0, None)))(leaks, esn)
best = int(jnp.argmin(losses))
print(
    f"3. vmap: {N_LEAKS} leak rates trained in one program; best leak "
    f"{float(leaks[best]):.2f} (validation MSE {float(losses[best]):.2e})"
)

# --------------------------------------------------------------- 4. jax.grad
loss_and_grad = jax.jit(jax.value_and_grad(val_loss))
loss_only = jax.jit(val_loss)
checks = []
for leak in (0.4, 0.7):
    value, grad = loss_and_grad(jnp.asarray(leak), esn)
    eps = 1e-3
    fd = (loss_only(leak + eps, esn) - loss_only(leak - eps, esn)) / (2 * eps)
    checks.append((leak, float(value), float(grad)))
    print(
        f"4. grad: d loss / d leak at {leak}: {float(grad):+.3e} "
        f"(central difference {float(fd):+.3e})"
    )

# ------------------------------------------------------------------ figure
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
lt = DT * LYAPUNOV * np.arange(HORIZON)
ax1.plot(lt, np.asarray(ensemble[:, :, 0]).T, color="tab:red", lw=0.6, alpha=0.5)
ax1.plot(lt, np.asarray(truth[:, 0]), "k", lw=1.5, label="truth")
ax1.plot([], [], color="tab:red", lw=0.6, label=f"{N_ENSEMBLE} forecasts (vmap)")
ax1.set_xlabel(r"Lyapunov times $\Lambda t$")
ax1.set_ylabel("x")
ax1.set_title("vmap over perturbed warm-up data")
ax1.legend(loc="upper left", fontsize=9)

ax2.plot(np.asarray(leaks), np.asarray(losses), "o-", label="loss (vmap over leak)")
for leak, value, grad in checks:
    dx = 0.08
    xs = np.array([leak - dx, leak + dx])
    ax2.plot(xs, value + grad * (xs - leak), "tab:green", lw=2)
    ax2.plot([leak], [value], "s", color="tab:green")
ax2.plot([], [], "tab:green", lw=2, label="tangent from jax.grad")
ax2.set_xlabel("leak rate")
ax2.set_ylabel(f"validation MSE ({N_VAL}-step forecast)")
ax2.set_title("Training differentiated end to end")
ax2.legend(fontsize=9)
fig.savefig(OUT / "jit_patterns.png", dpi=100)
plt.close(fig)
print(f"figures in {OUT}")
