"""Divergence is reported, never returned as a result: forecasts that blow up
warn with the step and the cause, the valid prediction time of a NaN forecast
ends at the NaN, and NVAR with its defaults is stable on Lorenz63."""

from __future__ import annotations

import functools
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import forecaster as F
from orc.forecaster.nvar import _raw_weights


@functools.cache
def _lorenz63(dt: float) -> np.ndarray:
    """80 time units of Lorenz63 at spacing ``dt``: one integration per
    spacing for the whole file, and one compiled program for both spacings:
    each solve saves 8000 samples (orc.data pads its output grid to a power
    of two, so the padded grids and the programs are the same), of which the
    first 80 time units are kept. A solve's samples do not depend on where it
    ends: they are the bits of ``lorenz63(tN=80, dt=dt)``."""
    u, _ = orc.data.lorenz63(tN=8000 * dt, dt=dt)
    return np.asarray(u)[: int(round(80 / dt))]


def _doubling_nvar():
    """A linear NVAR whose forecast doubles every step: x_{t+1} = 2 x_t."""
    m = F.NVARForecaster(1, k=1, order=1, constant=False, target="direct")
    return eqx.tree_at(lambda q: q.wout, m, jnp.array([[2.0]]))


def test_forecast_blow_up_warns_with_the_step():
    m = _doubling_nvar()
    with pytest.warns(
        F.DivergenceWarning, match=r"at step 3 of 20: its magnitude reached 16"
    ):
        out = m.forecast(20, jnp.array([[1.0]]))
    # 2, 4, 8, 16: the first value above 10 x the starting scale (1) is step 3
    np.testing.assert_array_equal(np.asarray(out)[:4, 0], [2.0, 4.0, 8.0, 16.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.forecast(3, jnp.array([[1.0]]))  # 2, 4, 8: within bounds, silent


def test_esn_forecast_that_leaves_the_attractor_warns():
    # numpy data, states and weights (the library converts them): the slices
    # and the scaled readout compile no eager programs
    u = _lorenz63(0.01)[500:3000]
    model, states = F.train_RCForecaster(F.ESNForecaster(3, 100, seed=0), u[:1500])
    with warnings.catch_warnings():
        warnings.simplefilter("error", F.DivergenceWarning)
        model.forecast(300, np.asarray(states)[-1])
        model.forecast_from_IC(300, u[1300:1500])
    # a readout scaled up 1e4 drives the output far off the attractor
    wout = jnp.asarray(np.asarray(model.readout.wout) * 1e4)
    wild = eqx.tree_at(lambda q: q.readout.wout, model, wout)
    with pytest.warns(
        F.DivergenceWarning, match="forecast_from_IC: the forecast diverged at step 0"
    ):
        # 300 steps as above: the same compiled forecast, other weights
        wild.forecast_from_IC(300, u[1300:1500])


def test_check_forecast_names_the_first_bad_step_and_works_under_jit():
    fc = np.ones((30, 2))
    fc[7, 1] = np.nan
    with pytest.raises(ValueError, match="at step 7 of 30: it became non-finite"):
        F.check_forecast(fc)
    with pytest.warns(F.DivergenceWarning, match="step 7"):
        F.check_forecast(fc, error=False)
    big = np.ones((30, 2))
    big[12] = 50.0
    F.check_forecast(big)  # 50 < 100 x the first steps' scale
    with pytest.raises(ValueError, match="at step 12 of 30: its magnitude reached 50"):
        F.check_forecast(big, reference=np.ones((5, 2)))  # 50 > 10 x the warm-up's
    ok = jax.jit(F.check_forecast)(jnp.ones((30, 2)))
    assert ok.shape == (30, 2)
    with pytest.raises(
        Exception, match="forecast diverged"
    ):  # via jax.jit: XLA wraps it
        jax.block_until_ready(jax.jit(F.check_forecast)(jnp.asarray(fc)))


def test_valid_prediction_time_of_a_nan_forecast_ends_at_the_nan():
    truth = np.ones((50, 3))
    pred = truth.copy()
    pred[20:] = np.nan
    # NaN compares false with the threshold: it must count as a crossing
    assert float(orc.metrics.valid_prediction_time(pred, truth)) == 20.0
    assert float(orc.metrics.valid_prediction_time(truth, truth)) == 50.0


@pytest.mark.parametrize(
    "k,s,order,constant,target",
    [
        (2, 1, 2, True, "increment"),
        (3, 2, 3, True, "direct"),
        (2, 1, 2, False, "increment"),
    ],
)
def test_nvar_standardised_weights_are_the_same_polynomial(
    k, s, order, constant, target
):
    """The raw-unit weights reproduce, on raw data, what the standardised
    weights predict on standardised data (computed independently here)."""
    rng = np.random.default_rng(0)
    m = F.NVARForecaster(2, k=k, s=s, order=order, constant=constant, target=target)
    u = rng.normal(size=(40, 2)) * [3.0, 0.5] + [10.0, -2.0]
    mu = np.array([10.0, -2.0]) if constant else np.zeros(2)
    sigma = np.array([3.0, 0.5])
    w_z = rng.normal(size=(2, m.n_features))
    z = (u - mu) / sigma
    step = np.asarray(m.features(jnp.asarray(z))) @ w_z.T
    pred_z = z[m.window - 1 :] + step if target == "increment" else step
    # one compiled program per case (eagerly, each of its jnp operations
    # compiled a program of its own: ~20 per case)
    raw = eqx.tree_at(
        lambda q: q.wout,
        m,
        eqx.filter_jit(_raw_weights)(
            m, jnp.asarray(w_z), jnp.asarray(mu), jnp.asarray(sigma)
        ),
    )
    np.testing.assert_allclose(
        raw.predict(jnp.asarray(u)), pred_z * sigma + mu, rtol=1e-10, atol=1e-9
    )


@pytest.mark.parametrize("dt,n_train", [(0.01, 2000), (0.025, 800)])
def test_nvar_defaults_are_stable_on_lorenz63(dt, n_train):
    """Gauthier et al.'s setup (k=2, quadratic, beta=2.5e-6, no noise) on
    accurately integrated Lorenz63: with the paper's raw features and s=1 the
    closed loop diverges (reported); with the defaults (standardised,
    s="auto", cubic, input_noise="auto") it forecasts well."""
    u = _lorenz63(dt)[int(10 / dt) :]  # tN = n_train * dt + 60 = 80
    lyap_steps = int(round(1 / (0.906 * dt)))
    model, _ = F.train_NVARForecaster(F.NVARForecaster(3), jnp.asarray(u[:n_train]))
    # s="auto": ~30 taps per Lorenz oscillation (period ~0.75): the paper's s=1
    # at dt 0.025; at dt 0.01 this record's spectral peak is ~70 samples: s=2
    assert model.s == {0.01: 2, 0.025: 1}[dt]
    vpts = []
    for w in range(5):
        s0 = n_train + w * 2 * lyap_steps
        with warnings.catch_warnings():
            warnings.simplefilter("error", F.DivergenceWarning)
            fc = model.forecast_from_IC(2 * lyap_steps, jnp.asarray(u[s0 - 10 : s0]))
        vpts.append(
            float(
                orc.metrics.valid_prediction_time(
                    fc, u[s0 : s0 + 2 * lyap_steps], dt=dt, lyapunov_exponent=0.906
                )
            )
        )
    assert np.all(np.isfinite(vpts)) and np.mean(vpts) > 1.0, vpts
    paper, _ = F.train_NVARForecaster(
        F.NVARForecaster(3, s=1, order=2),
        jnp.asarray(u[:n_train]),
        standardize=False,
        input_noise=0,
    )
    with pytest.warns(F.DivergenceWarning):
        for w in range(5):
            s0 = n_train + w * 2 * lyap_steps
            paper.forecast_from_IC(20 * lyap_steps, jnp.asarray(u[s0 - 10 : s0]))
