"""MRNNDriver: the multiple-activation ESN (Lun et al. 2015; ReservoirComputing.jl's
MRNN).

The update is checked against numpy from the driver's own matrix and bias,
against the ESN it reduces to with tanh alone, and against an invariant of
its form: with the logistic sigmoid alone the new state is a convex mix of
the old one and numbers in (0, 1), so states started in [0, 1] stay there.
The driver contract (jit, vmap, grad, dtypes) is in ``test_contract.py``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_round_trip
from orc.drivers import ESNDriver, MRNNDriver


def _numpy(name, z):
    return {
        "tanh": np.tanh,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "relu": lambda v: np.maximum(v, 0),
        "identity": lambda v: v,
    }[name](z)


def test_update_is_the_sum_of_the_activations():
    """``r' = (1 - a) r + sum_d λ_d f_d(W r + p + b)``."""
    names = ("tanh", "sigmoid", "relu", "identity")
    lam = np.array([0.3, 0.5, 0.2, 0.05])
    d = MRNNDriver(30, names, scaling=lam, leak=0.7, bias=0.2, seed=4)
    W = np.asarray(d.reservoir.wr.todense()).reshape(30, 30)
    rng = np.random.default_rng(0)
    r = rng.standard_normal(30)
    for _ in range(5):
        p = rng.standard_normal(30)
        z = W @ r + p + 0.2
        expected = 0.3 * r + sum(
            w * _numpy(f, z) for w, f in zip(lam, names, strict=True)
        )
        r = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
        np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
    # W is an ESN's of the same seed, scaled to the spectral radius
    np.testing.assert_array_equal(
        d.reservoir.wr.values, ESNDriver(30, 1.0, bias=0.2, seed=4).wr.values
    )
    rho = np.max(np.abs(np.linalg.eigvals(W)))
    assert rho == pytest.approx(float(d.reservoir.spectral_radius), rel=1e-6)


def test_tanh_alone_is_the_esn():
    mrnn = MRNNDriver(40, ("tanh",), scaling=(0.6,), leak=0.6, seed=3)
    esn = ESNDriver(40, 0.6, seed=3)
    rng = np.random.default_rng(1)
    r = jnp.asarray(rng.standard_normal(40))
    p = jnp.asarray(rng.standard_normal((50, 40)))
    np.testing.assert_allclose(
        mrnn.advance_seq(p, r), esn.advance_seq(p, r), rtol=1e-13, atol=1e-15
    )


def test_sigmoid_alone_keeps_states_in_the_unit_interval():
    d = MRNNDriver(50, ("sigmoid",), leak=0.8, spectral_radius=1.5, seed=0)
    drive = jnp.asarray(20 * np.random.default_rng(2).standard_normal((300, 50)))
    states = np.asarray(d.advance_seq(drive, d.default_state()))
    assert states.min() >= 0 and states.max() <= 1
    assert states.max() > 0.9 and states.min() < 0.1  # driven hard: it uses the range


def test_default_scaling_is_the_leak_and_arguments_are_checked():
    d = MRNNDriver(10, leak=0.4, seed=0)
    assert d.activations == ("tanh", "sigmoid")
    np.testing.assert_array_equal(d.scaling, [0.4, 0.4])
    with pytest.raises(ValueError, match="MRNNDriver: activations must be one or more"):
        MRNNDriver(10, ("tanh", "softplus"), seed=0)
    with pytest.raises(ValueError, match="activations must be one or more"):
        MRNNDriver(10, (), seed=0)
    with pytest.raises(TypeError, match="activations must be a tuple of names"):
        MRNNDriver(10, "tanh", seed=0)
    with pytest.raises(
        ValueError, match=r"scaling must hold one weight per activation"
    ):
        MRNNDriver(10, ("tanh", "sigmoid"), scaling=(0.5,), seed=0)
    for bad in (0.0, 1.5, np.nan):
        with pytest.raises(ValueError, match="MRNNDriver: leak must"):
            MRNNDriver(10, leak=bad, seed=0)


def test_scaling_and_leak_are_traceable():
    d = MRNNDriver(10, seed=0)
    r, p = jnp.full(10, 0.1), jnp.ones(10)

    def step(lam, a):
        return eqx.tree_at(lambda m: (m.scaling, m.leak), d, (lam, a)).advance(p, r)

    lams = jnp.array([[0.6, 0.6], [1.0, 0.0]])
    out = jax.jit(jax.vmap(step))(lams, jnp.array([0.6, 1.0]))
    np.testing.assert_allclose(out[0], d.advance(p, r), rtol=1e-14)
    z = np.asarray(d.reservoir.wr.todense()).reshape(10, 10) @ np.asarray(r) + 1 + 1.6
    np.testing.assert_allclose(out[1], np.tanh(z), rtol=1e-13)


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    """Built as the docstring shows, trained by train_RCForecaster, saved and
    loaded to the same forecast bits (the file names the activations)."""
    loaded = driver_round_trip(MRNNDriver(40, seed=0), tmp_path / "mrnn.orc")
    assert loaded.driver.activations == ("tanh", "sigmoid")
