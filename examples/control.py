"""Model-predictive control of a pendulum through a reservoir surrogate.

A damped pendulum driven by a torque ``u`` (``θ'' = -sin θ - 0.6 θ' + u``,
sampled every 0.1 time units) is excited with random torques; an
``ESNController`` learns its response from that record alone. The trained
surrogate then steers the *true* pendulum to a new angle in receding horizon:
optimise the next 40 torques through the differentiable closed loop
(``compute_control``), apply the first 10 to the pendulum, re-synchronise the
reservoir with the measured response (``force``), repeat.

    python examples/control.py

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a small, fast version (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for figures (default
``examples/output/``).
"""

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import orc

jax.config.update("jax_enable_x64", True)

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
OUT.mkdir(parents=True, exist_ok=True)

DT, DAMPING = 0.1, 0.6
N_TRAIN = 1500 if SMALL else 6000
RES_DIM = 200 if SMALL else 500
HORIZON, APPLY = 40, 10  # optimise 40 torques, apply the first 10, repeat
ROUNDS = 3 if SMALL else 8
TARGET = 1.0  # radians


def pendulum_step(x, u, substeps=10):
    """Advance ``x = (θ, ω)`` by DT under constant torque ``u`` (RK4)."""

    def f(x):
        return np.array([x[1], -np.sin(x[0]) - DAMPING * x[1] + u])

    h = DT / substeps
    for _ in range(substeps):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def run_plant(x0, controls):
    """States ``(len(controls) + 1, 2)`` of the pendulum from ``x0``."""
    xs = [np.asarray(x0, dtype=float)]
    for u in np.asarray(controls).reshape(-1):
        xs.append(pendulum_step(xs[-1], u))
    return np.array(xs)


# ------------------------------------------------------ system identification
rng = np.random.default_rng(0)
# random torques in [-1, 1], each held for 5 to 20 steps: slow and fast moves,
# never strong enough to swing the pendulum over the top
levels = rng.uniform(-1.0, 1.0, size=N_TRAIN)
holds = rng.integers(5, 21, size=N_TRAIN)
U_train = np.repeat(levels, holds)[:N_TRAIN, None]  # (N_TRAIN, 1)
X_train = run_plant([0.0, 0.0], U_train)  # (N_TRAIN + 1, 2); X[t+1] = f(X[t], U[t])
print(f"identification record: {N_TRAIN} steps, θ in [{X_train[:, 0].min():.2f}, "
      f"{X_train[:, 0].max():.2f}] rad")  # fmt: skip

ctrl = orc.control.ESNController(
    data_dim=2, control_dim=1, res_dim=RES_DIM, embedding_scaling=0.3, seed=0
)
# The state after (X[t], U[t]) is trained to predict X[t + 1]; the last state
# predicts X[N_TRAIN], the current measurement, so control can start from it.
ctrl, R = orc.control.train_RCController(
    ctrl, jnp.asarray(X_train[:-1]), jnp.asarray(U_train), spinup=100, beta=1e-6
)
print("states:", R.shape)

# one-step surrogate error on the identification record
pred = ctrl.readout(R[100:-1])
err = float(orc.metrics.nrmse(pred, X_train[101:-1]))
print(f"one-step NRMSE of the surrogate on its training record: {err:.2e}")

# ------------------------------------------------------ receding-horizon control
x, r = X_train[-1], R[-1]
steps = ROUNDS * APPLY + HORIZON
t_ref = np.arange(1, steps + 1)
ramp = np.clip(t_ref / 30.0, 0.0, 1.0)
smooth = ramp**2 * (3 - 2 * ramp)  # smoothstep from the current angle to TARGET
theta_ref = x[0] + (TARGET - x[0]) * smooth
omega_ref = np.gradient(theta_ref, DT)
ref_all = jnp.asarray(np.stack([theta_ref, omega_ref], axis=1))

guess = jnp.zeros((HORIZON, 1))
applied, measured = [], [x]
for k in range(ROUNDS):
    ref = ref_all[k * APPLY : k * APPLY + HORIZON]
    result = ctrl.compute_control(guess, r, ref, throw=False, return_info=True)
    if k == 0:
        print(
            f"round 0: penalty J of zero torque {float(result.initial_penalty):.2f}, "
            f"optimised {float(result.penalty):.3f} ({int(result.num_steps)} L-BFGS "
            f"steps, converged={bool(result.success)})"
        )
        first_plan = ctrl.apply_control(result.control, r)  # surrogate's prediction
        first_true = run_plant(x, result.control)[1:]  # the pendulum's response
    c = np.asarray(result.control[:APPLY])
    xs = run_plant(x, c)  # apply to the real pendulum
    # keep the reservoir in step with the measured pendulum
    r = ctrl.force(jnp.asarray(xs[:-1]), jnp.asarray(c), r)[-1]
    x = xs[-1]
    applied.append(c)
    measured.extend(xs[1:])
    guess = jnp.concatenate(
        [result.control[APPLY:], jnp.repeat(result.control[-1:], APPLY, 0)]
    )

applied = np.concatenate(applied)
measured = np.array(measured)
n = applied.shape[0]
free = run_plant(measured[0], np.zeros(n))  # the same pendulum without control
track = np.sqrt(np.mean((measured[1:, 0] - theta_ref[:n]) ** 2))
track_free = np.sqrt(np.mean((free[1:, 0] - theta_ref[:n]) ** 2))
plan_err = float(jnp.max(jnp.abs(first_plan[:, 0] - first_true[:, 0])))
print(
    f"surrogate vs pendulum over the first plan ({HORIZON} steps): max |Δθ| {plan_err:.3f} rad"
)
print(f"θ tracking RMSE over {n} steps: controlled {track:.3f} rad, "
      f"uncontrolled {track_free:.3f} rad; final θ {measured[-1, 0]:.3f} (target {TARGET})")  # fmt: skip

# ------------------------------------------------------------------ figure
t = DT * np.arange(n + 1)
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, layout="constrained")
ax1.plot(t[1:], theta_ref[:n], "k:", lw=2, label="reference")
ax1.plot(t, measured[:, 0], "tab:red", lw=1.8, label="pendulum, controlled")
ax1.plot(t, free[:, 0], "tab:gray", lw=1.2, label="pendulum, no control")
t_plan = DT * np.arange(1, HORIZON + 1)
ax1.plot(t_plan, first_plan[:, 0], "tab:blue", ls="--", lw=1.2,
         label="surrogate's first plan")  # fmt: skip
ax1.set_ylabel("angle θ (rad)")
ax1.legend(loc="lower right", fontsize=9)
ax1.set_title("Receding-horizon control of a pendulum through an ESN surrogate")
ax2.step(t[:-1], applied[:, 0], where="post", color="tab:red")
ax2.set_ylabel("torque u")
ax2.set_xlabel("time")
fig.savefig(OUT / "control_pendulum.png", dpi=100)
plt.close(fig)
print(f"figures in {OUT}")
