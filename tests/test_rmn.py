"""RMNDriver, the reservoir memory network (Gallicchio and Ceni 2024).

The update is checked against numpy from the driver's own matrices; the
ring against what it is for (the memory holds the recent drives, each
scaled by the memory weight per step, and nothing older than a ring's turn
at weight 0); the memory it buys against the ESN's; the paper's unit ring
weight against the failure the docstring names. The driver contract (jit,
vmap, grad, dtypes) is in ``test_contract.py``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_memory, driver_round_trip
from orc.drivers import ES2NDriver, ESNDriver, RMNDriver


def _dense(driver):
    n = driver.reservoir.res_dim
    return np.asarray(driver.reservoir.wr.todense()).reshape(n, n)


def test_update_against_numpy():
    """``m' = w P m + p_m``, ``x' = (1 - a) x + a tanh(W x + V m' + p_x + b)``."""
    d = RMNDriver(30, 12, leak=0.4, memory_weight=0.8, coupling=0.3, bias=0.2, seed=4)
    W, V = _dense(d), np.asarray(d.coupling_map)
    assert W.shape == (18, 18) and V.shape == (18, 12)
    assert 0 < np.abs(V).max() <= 0.3
    P = np.roll(np.eye(12), 1, axis=0)  # unit i to unit i + 1, the last to the first
    rng = np.random.default_rng(0)
    x, m = rng.standard_normal(18), rng.standard_normal(12)
    for _ in range(5):
        p = rng.standard_normal(30)
        m_new = 0.8 * P @ m + p[18:]
        x_new = 0.6 * x + 0.4 * np.tanh(W @ x + V @ m_new + p[:18] + 0.2)
        got = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(np.r_[x, m])))
        np.testing.assert_allclose(got, np.r_[x_new, m_new], rtol=1e-12, atol=1e-14)
        x, m = x_new, m_new
    # W is drawn as ES2N's and the residual ESN's of the same seed and size
    np.testing.assert_array_equal(
        d.reservoir.wr.values, ES2NDriver(18, bias=0.2, seed=4).reservoir.wr.values
    )


def test_the_ring_holds_the_recent_drives():
    """Driven by one pulse into memory unit 0, the memory carries it one unit
    along per step, scaled by ``w`` each time; at ``w = 0`` the memory is only
    the current drive."""
    d = RMNDriver(20, 8, memory_weight=0.5, seed=1)
    pulse = jnp.zeros((6, 20)).at[0, 12].set(1.0)
    states = np.asarray(d.advance_seq(pulse, d.default_state()))
    memory = states[:, 12:]
    np.testing.assert_array_equal(memory, np.eye(6, 8) * 0.5 ** np.arange(6)[:, None])
    forgetful = eqx.tree_at(lambda m: m.memory_weight, d, jnp.asarray(0.0))
    p = jnp.asarray(np.random.default_rng(2).standard_normal((4, 20)))
    states = np.asarray(forgetful.advance_seq(p, forgetful.default_state()))
    np.testing.assert_array_equal(states[:, 12:], np.asarray(p)[:, 12:])


def test_it_remembers_far_more_than_the_esn():
    """50 nodes, 25 of them memory: a capacity of 26.1 at the defaults, the
    ESN at orc's 2.8 (orc._defaults)."""
    rmn = driver_memory(RMNDriver(50, 25, seed=0), 50)
    esn = driver_memory(ESNDriver(50, seed=0), 50)
    assert rmn > 20 and rmn > 5 * esn


def test_a_unit_ring_never_forgets():
    """The paper's ``w = 1``: the memory sums every drive a whole number of
    turns back, so a constant drive grows it without bound (orc's default
    forgets, and stays bounded by ``1 / (1 - w)``)."""
    for w, bound in ((1.0, None), (0.9, 1 / 0.1)):
        d = RMNDriver(10, 4, memory_weight=w, seed=0)
        p = jnp.ones((400, 10))
        memory = np.asarray(d.advance_seq(p, d.default_state()))[:, 6:]
        if bound is None:
            np.testing.assert_array_equal(memory[-1], np.full(4, 400.0))
        else:
            assert memory.max() < bound


def test_arguments_are_checked_and_traceable():
    with pytest.raises(ValueError, match="RMNDriver: memory_dim must be <= 9"):
        RMNDriver(10, 10, seed=0)
    with pytest.raises(ValueError, match="RMNDriver: memory_dim must be >= 1"):
        RMNDriver(10, 0, seed=0)
    with pytest.raises(ValueError, match="RMNDriver: memory_weight must lie in"):
        RMNDriver(10, 3, memory_weight=1.1, seed=0)
    with pytest.raises(ValueError, match="RMNDriver: leak must lie in"):
        RMNDriver(10, 3, leak=0.0, seed=0)
    with pytest.raises(ValueError, match="RMNDriver: coupling must lie in"):
        RMNDriver(10, 3, coupling=-1.0, seed=0)
    with pytest.raises(ValueError, match=r"RMNDriver.advance: proj_vars"):
        RMNDriver(10, 3, seed=0).advance(jnp.zeros(7), jnp.zeros(10))
    d = RMNDriver(10, 4, seed=0)
    r, p = jnp.full(10, 0.1), jnp.ones(10)

    def step(w, a):
        return eqx.tree_at(lambda m: (m.memory_weight, m.leak), d, (w, a)).advance(p, r)

    out = jax.jit(jax.vmap(step))(
        jnp.stack([d.memory_weight, 0.0]), jnp.stack([d.leak, 1.0])
    )
    np.testing.assert_allclose(out[0], d.advance(p, r), rtol=1e-14)
    np.testing.assert_array_equal(out[1][6:], np.ones(4))


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    driver_round_trip(RMNDriver(40, 15, seed=0), tmp_path / "model.orc")
