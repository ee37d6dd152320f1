"""Per-node leak rates: an ESN reservoir whose nodes leak at their own rates
(a multi-timescale reservoir), from the driver to the models."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc.classifier import ESNClassifier, train_RCClassifier
from orc.drivers import ESNDriver, ParallelESNDriver
from orc.forecaster import ESNForecaster, train_RCForecaster

N = 40


@functools.cache
def _lorenz() -> np.ndarray:
    """Lorenz63 at dt = 0.02, normalised (numpy: its slices compile nothing);
    the forecasters below train on its first 1200 rows, the same program."""
    u = np.asarray(lorenz_rk4(1500, dt=0.02))
    return (u - u.mean(0)) / u.std(0)


def _dense(wr, chunk=0):
    """The reservoir matrix of one chunk as a dense NumPy array."""
    values = np.asarray(wr.values)[chunk]  # indexed in numpy: no eager programs
    columns = np.asarray(wr.columns)[chunk]
    w = np.zeros((values.shape[0], values.shape[0]))
    for i in range(values.shape[0]):
        np.add.at(w[i], columns[i], values[i])
    return w


def test_driver_step_matches_numpy_per_node():
    rates = np.geomspace(0.02, 1.0, N)
    d = ESNDriver(N, leak=rates, bias=0.3, seed=1)
    assert d.leak.shape == (1, N)
    rng = np.random.default_rng(0)
    r, p = rng.normal(size=N), rng.normal(size=N)
    got = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
    want = rates * np.tanh(_dense(d.wr) @ r + p + 0.3) + (1 - rates) * r
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_equal_rates_are_the_scalar_leak():
    """One rate repeated on every node is the scalar leak, bit for bit in a
    step, and the same trained model (native fused path vs XLA's loop)."""
    vec = ESNDriver(N, leak=np.full(N, 0.3), seed=2)
    one = ESNDriver(N, leak=0.3, seed=2)
    r, p = jnp.asarray(np.linspace(-1, 1, N)), jnp.asarray(np.linspace(0.5, -0.5, N))
    assert np.array_equal(vec.advance(p, r), one.advance(p, r))

    U = _lorenz()
    models = [
        ESNForecaster(3, N, leak_rate=leak, seed=3) for leak in (np.full(N, 0.3), 0.3)
    ]
    (vec_model, vec_states), (one_model, one_states) = (
        train_RCForecaster(m, jnp.asarray(U[:1200])) for m in models
    )
    # the states agree to rounding (native tanh vs XLA's); the weights of the
    # nearly unregularised fit (beta 8e-8) amplify that, so compare what they
    # predict on the same states
    np.testing.assert_allclose(vec_states, one_states, rtol=0, atol=1e-13)
    fit = [np.asarray(m.readout(one_states)) for m in (vec_model, one_model)]
    np.testing.assert_allclose(fit[0], fit[1], rtol=0, atol=1e-6)


def test_parallel_rates_per_reservoir_and_node():
    rates = np.random.default_rng(4).uniform(0.1, 1.0, (3, N))
    d = ParallelESNDriver(N, leak=rates, chunks=3, bias=0.0, seed=5)
    rng = np.random.default_rng(6)
    r, p = rng.normal(size=(3, N)), rng.normal(size=(3, N))
    got = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
    for c in range(3):
        want = rates[c] * np.tanh(_dense(d.wr, c) @ r[c] + p[c]) + (1 - rates[c]) * r[c]
        np.testing.assert_allclose(got[c], want, rtol=1e-12, atol=1e-14)
    shared = ParallelESNDriver(N, leak=rates[0], chunks=3, seed=5)
    assert np.array_equal(shared.leak, np.broadcast_to(rates[0], (3, N)))


def test_from_matrices_takes_rates():
    w = 0.1 * np.random.default_rng(7).normal(size=(N, N))
    rates = np.linspace(0.1, 1.0, N)
    d = ESNDriver.from_matrices(w, leak=rates, bias=0.0)
    r = np.linspace(-1, 1, N)
    got = np.asarray(d.advance(jnp.zeros(N), jnp.asarray(r)))
    np.testing.assert_allclose(got, rates * np.tanh(w @ r) + (1 - rates) * r, 1e-12)


@pytest.mark.parametrize(
    "rates, match",
    [
        (np.zeros(N), r"leak must lie in \(0, 1\] for every node, got 0.0 at index 0"),
        (np.r_[np.ones(N - 1), 1.5], r"got 1.5 at index 39"),
        (np.r_[np.nan, np.ones(N - 1)], "got nan at index 0"),
        (np.ones(N + 1), r"one rate per node, shape \(res_dim,\) with res_dim = 40"),
        (np.ones((2, N)), r"got shape \(2, 40\)"),
    ],
)
def test_bad_rates_are_named(rates, match):
    with pytest.raises(ValueError, match=match):
        ESNDriver(N, leak=rates, seed=0)


def test_bad_rates_at_model_level_name_leak_rate():
    with pytest.raises(ValueError, match="ESNForecaster: leak_rate must be a number"):
        ESNForecaster(3, N, leak_rate=np.ones(4))
    with pytest.raises(TypeError, match="leak_rate must be real numbers"):
        ESNClassifier(1, 2, N, leak_rate=np.ones(N, complex))
    with pytest.raises(ValueError, match=r"ESNForecaster: leak_rate must lie in \(0"):
        ESNForecaster(3, N, leak_rate=np.full(N, -0.1))


def test_model_with_rates_saves_loads_and_jits(tmp_path):
    rates = np.geomspace(0.05, 1.0, N)
    U = _lorenz()
    model, _ = train_RCForecaster(
        ESNForecaster(3, N, leak_rate=rates, seed=0), jnp.asarray(U[:1200])
    )
    path = orc.io.save(tmp_path / "multi.eqx", model)
    back = orc.io.load(path)
    np.testing.assert_array_equal(back.driver.leak, model.driver.leak)
    ic = jnp.asarray(U[1200:1250])
    want = np.asarray(model.forecast_from_IC(50, ic))
    assert np.all(np.isfinite(want))
    np.testing.assert_array_equal(np.asarray(back.forecast_from_IC(50, ic)), want)
    jitted = jax.jit(lambda m, x: m.forecast_from_IC(50, x))
    np.testing.assert_allclose(np.asarray(jitted(model, ic)), want, rtol=1e-12)


def test_classifier_with_rates():
    """A multi-timescale classifier trains and its features follow the
    per-node update (the bidirectional PPV recipe's reservoir)."""
    rng = np.random.default_rng(8)
    t = np.linspace(0, 4 * np.pi, 60)
    slow = np.sin(t)[None, :, None] + 0.1 * rng.normal(size=(20, 60, 1))
    fast = np.sin(5 * t)[None, :, None] + 0.1 * rng.normal(size=(20, 60, 1))
    x = jnp.asarray(np.concatenate([slow, fast]))
    y = jnp.asarray(np.r_[np.zeros(20, int), np.ones(20, int)])
    model = ESNClassifier(
        1, 2, N, leak_rate=np.geomspace(0.03, 1.0, N), state_repr="bi_ppv",
        input_differences=True,
    )  # fmt: skip
    trained = train_RCClassifier(model, x, y, spinup=6, beta=1e-3)
    pred = np.argmax(jax.vmap(lambda s: trained.classify(s, None, 6))(x), 1)
    assert float(np.mean(pred == np.asarray(y))) == 1.0
