"""CESN with a fixed-step solver (Euler + ConstantStepSize) on Lorenz-63.

With ``time_const * dt = 50 * 0.02 = 1`` an Euler step of the CESN is exactly
one step of a discrete ESN with leak 1, so the fixed-step solver must take its
steps on the sample times, in teacher forcing (which the training runs in
blocks of 1024 samples, each with its own ``ts``) and in the forecast. A
spacing such as ``20.5 - 20.48 = 0.019999999999999574`` once made diffrax take
one step more than there are samples, every step ``n / (n + 1)`` too short: the
states of that block did not come from the map the forecast iterates, and the
closed loop diverged (error ~1e2 instead of ~1e-3).
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc

DT = 0.02


@pytest.fixture(scope="module")
def lorenz():
    U, t = orc.data.lorenz63(tN=100, dt=DT, u0=(0.05, 1, 1.05))
    assert U.shape == (5000, 3) and t.shape == (5000,)
    return U, t, int(0.8 * len(U))


def euler_cesn(res_dim=200):
    return orc.forecaster.CESNForecaster(
        data_dim=3,
        res_dim=res_dim,
        seed=0,
        time_const=50.0,  # ORC 0.4's constant (what "auto" gives at this DT)
        solver=diffrax.Euler(),
        stepsize_controller=diffrax.ConstantStepSize(),
    )


@pytest.fixture(scope="module")
def trained_euler(lorenz):
    U, t, n = lorenz
    return orc.forecaster.train_CESNForecaster(euler_cesn(), U[:n], t[:n])


def test_euler_force_steps_on_the_samples(lorenz):
    # The block of the training run that starts at t = 20.48: its forced states
    # are the discrete recurrence r <- r + dt * dr/dt with the sample u_k.
    U, t, _ = lorenz
    model = euler_cesn(res_dim=50)
    a, length = 1024, 64
    assert float(t[a + 1] - t[a]) != DT  # the rounded spacing of the bug

    def step(r, u):
        r = r + DT * model.driver.advance(model.embedding.embed(u), r)
        return r, r

    r0 = 0.1 * jnp.ones((1, 50))
    _, expected = jax.lax.scan(step, r0, U[a : a + length])
    forced = model.force(U[a : a + length], r0, t[a : a + length])
    np.testing.assert_allclose(forced, expected, rtol=0, atol=1e-11)


def test_euler_cesn_forecasts_lorenz(lorenz, trained_euler):
    U, t, n = lorenz
    model, R = trained_euler
    pred = model.forecast(ts=jnp.arange(100.0) * DT, res_state=R[-1])
    # ORC 0.4 (other random weights): 1.0e-3; ours: 7.8e-4. Before the fix: 1.0e2.
    err = float(jnp.linalg.norm(pred - U[n : n + 100]) / 100)
    assert err < 1e-2, err
    # out[0] predicts the first sample after the training window
    assert float(jnp.linalg.norm(pred[0] - U[n])) < 1e-2
    assert float(jnp.linalg.norm(pred[0] - U[n - 1])) > 0.5

    long = model.forecast(ts=jnp.arange(2000.0) * DT, res_state=R[-1])
    assert not bool(jnp.any(jnp.isnan(long)))
    assert float(jnp.max(jnp.abs(long))) < 60  # on the attractor (|z| < ~48)


def test_euler_forecast_on_absolute_times(lorenz, trained_euler):
    # ts = t[n : n + 100] has a spacing rounded below 0.02 too; the forecast
    # must take the same 99 steps as on jnp.arange(100.0) * DT.
    U, t, n = lorenz
    model, R = trained_euler
    rel = model.forecast(ts=jnp.arange(100.0) * DT, res_state=R[-1])
    absolute = model.forecast(ts=t[n : n + 100], res_state=R[-1])
    np.testing.assert_allclose(absolute, rel, rtol=0, atol=1e-8)


def test_adaptive_cesn_forecasts_lorenz(lorenz):
    # Default solver (Tsit5 + PIDController(rtol=1e-3, atol=1e-6)).
    U, t, n = lorenz
    model = orc.forecaster.CESNForecaster(data_dim=3, res_dim=200, seed=0)
    model, R = orc.forecaster.train_CESNForecaster(model, U[:n], t[:n])
    pred = model.forecast(ts=jnp.arange(50.0) * DT, res_state=R[-1])
    err = float(jnp.linalg.norm(pred - U[n : n + 50]) / 50)
    # Measured with the default time_const="auto" (ORC's 50 at this DT):
    # 0.008 (seed 0; seeds 0-4: 0.006-0.015; ORC 0.4 on the same case,
    # seeds 0-4: 0.003-0.012). The same forecast compared with the data
    # shifted by one sample gives 0.21, a diverging one ~1e2: 0.05 separates
    # them with room for BLAS / platform differences.
    assert err < 0.05, err
