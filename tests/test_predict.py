"""Teacher-forced one-step prediction: ``RCForecasterBase.predict``.

``predict(in_seq, res_state)`` drives the reservoir with the true inputs and
reads out every state, so ``out[t]`` predicts ``in_seq[t + 1]``. The
expectations here are computed independently: the states from ``force`` and
the readout applied step by step in NumPy from the weights, a numerical
Lorenz63 trajectory from a NumPy RK4 (``tests/_helpers.py``), and the
persistence forecast ``u[t + 1] ≈ u[t]`` as the baseline to beat.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import block, count_compiles, lorenz_rk4
from orc.forecaster import (
    CESNForecaster,
    DeepESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    NVARForecaster,
    train_NVARForecaster,
    train_RCForecaster,
)

LORENZ = lorenz_rk4(3000)  # (3000, 3), dt = 0.01, independent of orc.data
#: The length of the input sequences: one length throughout (a program is
#: compiled per shape), where the claims do not depend on it.
N = 120
SCALE = LORENZ.std(axis=0)
DATA6 = np.concatenate([LORENZ, LORENZ[::-1]], axis=1) / np.tile(SCALE, 2)

# name -> (builder, data, ensemble readout?, quadratic readout?)
MODELS = {
    "esn": (lambda: ESNForecaster(3, 40, seed=1), LORENZ / SCALE, False, False),
    "esn_quadratic": (
        lambda: ESNForecaster(3, 40, quadratic=True, seed=2),
        LORENZ / SCALE,
        False,
        True,
    ),
    "esn_parallel": (
        lambda: ESNForecaster(6, 30, chunks=3, locality=1, seed=3),
        DATA6,
        False,
        False,
    ),
    "ensemble": (
        lambda: EnsembleESNForecaster(3, 30, chunks=3, seed=4),
        LORENZ / SCALE,
        True,
        False,
    ),
    "deep_esn": (
        lambda: DeepESNForecaster(3, 25, n_layers=3, seed=5),
        LORENZ / SCALE,
        False,
        False,
    ),
}


def _with_random_readout(model, seed):
    """The model with random readout weights (so every output is non-trivial)."""
    shape = model.readout.wout.shape
    w = np.random.default_rng(seed).normal(size=shape) / np.sqrt(shape[-1])
    return model.set_readout(model.readout.set_wout(jnp.asarray(w)))


def _numpy_readout(wout, states, ensemble, quadratic):
    """``y_t`` from ``wout`` ``(C, P, N)`` and states ``(T, ...)``: per chunk
    ``W_c φ(r_c)`` with ``φ`` squaring the odd-indexed nodes when quadratic,
    then concatenated over chunks (or averaged for an ensemble)."""
    wout = np.asarray(wout)
    n_chunks, per_chunk, n = wout.shape
    r = np.asarray(states).reshape(len(states), n_chunks, n).copy()
    if quadratic:
        r[..., 1::2] = r[..., 1::2] ** 2
    out = np.empty((len(r), n_chunks, per_chunk))
    for t in range(len(r)):
        for c in range(n_chunks):
            out[t, c] = wout[c] @ r[t, c]
    return out.mean(axis=1) if ensemble else out.reshape(len(r), -1)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predict_is_the_readout_of_the_forced_states(name):
    build, data, ensemble, quadratic = MODELS[name]
    model = _with_random_readout(build(), seed=len(name))
    # inputs put on the device from numpy, the slicing in numpy: an eager jnp
    # operation compiles a program per shape; every call below runs on the
    # same (N, dim) inputs, so predict compiles once per start (given or default)
    seq_np = np.asarray(data[:N])
    seq = jax.device_put(seq_np)
    rng = np.random.default_rng(0)
    r0 = jax.device_put(0.1 * rng.normal(size=model.driver.default_state().shape))

    pred = model.predict(seq, r0)
    assert pred.shape == (N, model.out_dim) and pred.dtype == jnp.float64
    pred = np.asarray(pred)
    states = np.asarray(model.force(seq, r0))
    expected = _numpy_readout(model.readout.wout, states, ensemble, quadratic)
    np.testing.assert_allclose(pred, expected, rtol=1e-10, atol=1e-12)

    # The last output is the first step of a forecast from the last state.
    np.testing.assert_allclose(
        pred[-1], np.asarray(model.forecast(1, states[-1]))[0], rtol=1e-10, atol=1e-12
    )
    # Default start: the driver's default state.
    np.testing.assert_array_equal(
        model.predict(seq), model.predict(seq, model.driver.default_state())
    )
    # Teacher forcing: nothing is fed back, so a prefix of the inputs gives a
    # prefix of the outputs, whatever comes later.
    other = seq_np.copy()
    other[60:] = 0.0
    np.testing.assert_allclose(
        np.asarray(model.predict(jax.device_put(other), r0))[:60],
        pred[:60],
        rtol=1e-12,
        atol=1e-14,
    )


def test_trained_lorenz_esn_beats_persistence_by_far():
    """One-step predictions of a trained ESN on unseen Lorenz63 data."""
    esn = ESNForecaster(3, 300, seed=0)
    esn, states = train_RCForecaster(esn, LORENZ[:2000], spinup=100)
    r_last = np.asarray(states)[-1]
    pred = np.asarray(esn.predict(LORENZ[2000:], r_last))  # pred[t] ≈ u[2001 + t]
    truth = LORENZ[2001:]

    def nrmse(p, y):
        return np.sqrt(np.mean(((p - y) / SCALE) ** 2))

    model_err = nrmse(pred[:-1], truth)
    persistence_err = nrmse(LORENZ[2000:-1], truth)
    assert persistence_err > 0.05
    assert model_err < 0.01 * persistence_err, (model_err, persistence_err)


def test_predict_compiles_once_and_composes_with_jax():
    # the "esn" case's shapes (its programs, where that test ran first)
    model = _with_random_readout(ESNForecaster(3, 40, seed=1), seed=0)
    u_np = LORENZ[:N] / SCALE
    u, u2 = jax.device_put((u_np, 2.0 * u_np))
    r0 = model.driver.default_state()
    block(model.predict(u, r0))
    with count_compiles() as c:
        block(model.predict(u2, r0))
    assert c["compiles"] == 0, f"predict recompiled: {c}"

    jitted = jax.jit(lambda m, x, r: m.predict(x, r))(model, u, r0)
    np.testing.assert_allclose(jitted, model.predict(u, r0), rtol=1e-12, atol=1e-14)

    batch = jax.device_put(np.stack([u_np, 2.0 * u_np]))
    mapped = np.asarray(jax.vmap(lambda x: model.predict(x, r0))(batch))
    np.testing.assert_allclose(mapped[1], model.predict(u2, r0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mapped[0], model.predict(u, r0), rtol=1e-12, atol=1e-14)


def test_predict_float32_model():
    model = _with_random_readout(ESNForecaster(3, 40, seed=1, dtype=jnp.float32), 0)
    u = jax.device_put((LORENZ[:N] / SCALE).astype(np.float32))
    pred = model.predict(u)
    assert pred.dtype == jnp.float32
    ref = _numpy_readout(
        model.readout.wout, model.force(u, model.driver.default_state()), False, False
    )
    np.testing.assert_allclose(pred, ref, rtol=1e-4, atol=1e-5)


def test_predict_continuous_time_model_takes_ts():
    model = _with_random_readout(CESNForecaster(3, 30, seed=2), seed=3)
    u, ts = jax.device_put((LORENZ[:60] / SCALE, np.arange(60.0) * 0.01))
    r0 = model.driver.default_state()
    pred = model.predict(u, r0, ts)
    expected = _numpy_readout(model.readout.wout, model.force(u, r0, ts), False, False)
    np.testing.assert_allclose(pred, expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError, match="need ts"):
        model.predict(u, r0)


def test_predict_argument_errors_name_the_argument():
    model = ESNForecaster(3, 20, seed=0)
    # JAX arrays put on the device from numpy (no program per shape)
    u, u2, u0, zeros, ts = jax.device_put(
        (LORENZ[:50], LORENZ[:50, :2], LORENZ[0], np.zeros(20), np.arange(50.0))
    )
    with pytest.raises(ValueError, match="in_seq must have 3 columns"):
        model.predict(u2)
    with pytest.raises(ValueError, match=r"in_seq must be 2-D"):
        model.predict(u0)
    with pytest.raises(ValueError, match=r"res_state must have shape \(1, 20\)"):
        model.predict(u, zeros)
    with pytest.raises(TypeError, match="ts is only for continuous-time"):
        model.predict(u, None, ts)


def test_nvar_predict_is_one_step_of_its_forecast():
    """NVAR has its own ``predict`` (one row per full delay window); each row
    is the first step of a forecast from that window."""
    # the slicing in numpy (an eager slice compiles a program per shape)
    train, test = jax.device_put((LORENZ[:400], LORENZ[400:600]))
    nvar, windows = train_NVARForecaster(NVARForecaster(3, k=2, s=1), train, beta=1e-6)
    pred = nvar.predict(test)
    assert pred.shape == (200 - nvar.window + 1, 3)
    pred = np.asarray(pred)
    w = np.asarray(nvar.windows(test))
    for i in (0, 57, len(w) - 1):
        np.testing.assert_allclose(
            pred[i], np.asarray(nvar.forecast(1, w[i]))[0], rtol=1e-10
        )
    err = np.sqrt(
        np.mean(((pred[:-1] - LORENZ[401 + nvar.window - 1 : 600]) / SCALE) ** 2)
    )
    assert err < 1e-3
