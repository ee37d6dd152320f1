"""StateDelayDriver and InputDelayDriver: a driver with its last states,
or fed its last inputs (Fleddermann et al. 2025).

The states are checked against the wrapped driver's own run: shifted (zero
before the start), or driven by the delayed sum of the drives, step by step;
forecasters around them train, save and load; wrong drivers are refused.
The driver contract (jit, vmap, grad, dtypes) is in ``test_contract.py``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_round_trip
from orc.drivers import (
    ESNDriver,
    InputDelayDriver,
    ParallelESNDriver,
    StateDelayDriver,
)


def test_states_are_the_drivers_and_its_predecessors():
    inner = ESNDriver(15, seed=3)
    d = StateDelayDriver(inner, num_delays=3)
    assert d.res_dim == 60
    p = jnp.asarray(np.random.default_rng(0).standard_normal((30, 15)))
    own = np.asarray(inner.advance_seq(p, inner.default_state()))
    states = np.asarray(d.advance_seq(p, d.default_state()))
    padded = np.concatenate([np.zeros((3, 15)), own])
    # block k is the state k steps back (to rounding: the ESN runs a known
    # sequence through its fused kernel, the wrapper steps it one by one)
    for k in range(4):
        np.testing.assert_allclose(states[:, 15 * k : 15 * (k + 1)],
                                   padded[3 - k : 33 - k], rtol=1e-13, atol=1e-15)  # fmt: skip


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    d = StateDelayDriver(ESNDriver(20, seed=0), num_delays=2)
    loaded = driver_round_trip(d, tmp_path / "model.orc", drive_dim=20)
    assert loaded.driver.num_delays == 2 and loaded.readout.res_dim == 60


def test_input_delays_drive_the_driver_with_the_delayed_sum():
    """``r_t = driver.advance(p0_t + p1_{t-1} + p2_{t-2}, r_{t-1})``, the
    waiting sums ``s1_t = p1_t + p2_{t-1}`` and ``s2_t = p2_t``."""
    inner = ESNDriver(12, seed=4)
    d = InputDelayDriver(inner, num_delays=2)
    assert d.res_dim == 36
    p = np.random.default_rng(1).standard_normal((25, 36))
    p0, p1, p2 = p[:, :12], p[:, 12:24], p[:, 24:]
    states = np.asarray(d.advance_seq(jnp.asarray(p), d.default_state()))
    r = np.zeros(12)
    for t in range(25):
        drive = p0[t] + (p1[t - 1] if t >= 1 else 0) + (p2[t - 2] if t >= 2 else 0)
        r = np.asarray(inner.advance(jnp.asarray(drive), jnp.asarray(r)))
        np.testing.assert_allclose(states[t, :12], r, rtol=1e-13, atol=1e-15)
        s1 = p1[t] + (p2[t - 1] if t >= 1 else 0)
        np.testing.assert_allclose(states[t, 12:24], s1, rtol=1e-15)
        np.testing.assert_array_equal(states[t, 24:], p2[t])


def test_an_input_delayed_forecaster_trains_and_round_trips(tmp_path):
    d = InputDelayDriver(ESNDriver(20, seed=0), num_delays=2)
    loaded = driver_round_trip(d, tmp_path / "model.orc")
    assert loaded.driver.num_delays == 2 and loaded.embedding.res_dim == 60


def test_wrong_drivers_and_delays_are_refused():
    with pytest.raises(TypeError, match="StateDelayDriver: driver must be a driver"):
        StateDelayDriver(np.eye(3))
    with pytest.raises(ValueError, match="StateDelayDriver: num_delays must be >= 1"):
        StateDelayDriver(ESNDriver(10, seed=0), num_delays=0)
    with pytest.raises(ValueError, match="states \\(res_dim,\\)"):
        StateDelayDriver(ParallelESNDriver(10, chunks=2, seed=0))
    with pytest.raises(ValueError, match="discrete mode"):
        StateDelayDriver(ESNDriver(10, mode="continuous", seed=0))
    d = StateDelayDriver(ESNDriver(10, seed=0))
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(10,\)"):
        d.advance(jnp.zeros(30), d.default_state())
    with pytest.raises(ValueError, match="InputDelayDriver: num_delays must be >= 1"):
        InputDelayDriver(ESNDriver(10, seed=0), num_delays=0)
    d = InputDelayDriver(ESNDriver(10, seed=0))
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(30,\)"):
        d.advance(jnp.zeros(10), d.default_state())
