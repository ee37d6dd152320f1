"""EIESNDriver, the excitatory-inhibitory ESN (Panahi et al. 2025).

Both forms are checked against numpy from the driver's own matrix; the
degenerate case the docstring names (equal biases: the zero state is a fixed
point whatever the input) against its arithmetic; the memory at orc's
defaults against the ESN's. The driver contract (jit, vmap, grad, dtypes) is
in ``test_contract.py``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_memory, driver_round_trip
from orc.drivers import EIESNDriver, ESNDriver


def _dense(driver):
    n = driver.res_dim
    return np.asarray(driver.reservoir.wr.todense()).reshape(n, n)


@pytest.mark.parametrize("additive", [False, True])
def test_update_against_numpy(additive):
    d = EIESNDriver(30, exc_recurrence=0.7, inh_recurrence=0.3, exc_output=1.2,
                    inh_output=0.8, exc_bias=0.4, inh_bias=-0.1, additive=additive,
                    seed=2)  # fmt: skip
    W = _dense(d)
    rng = np.random.default_rng(0)
    r = rng.standard_normal(30)
    for _ in range(4):
        p = rng.standard_normal(30)
        inside = 0.0 if additive else p
        expected = 1.2 * np.tanh(inside + 0.7 * W @ r + 0.4) - 0.8 * np.tanh(
            inside + 0.3 * W @ r - 0.1
        )
        if additive:
            expected = expected + p
        r = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
        np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
    # W is the ESN's of the same seed
    np.testing.assert_array_equal(
        d.reservoir.wr.values, ESNDriver(30, seed=2).wr.values
    )


def test_equal_biases_keep_the_zero_state_at_rest():
    """ReservoirComputing.jl's defaults (biases 0, equal output scales): from
    the zero state, ``tanh(p) - tanh(p) = 0`` for every input, so the state
    never moves; the additive form, and orc's default biases, move."""
    p = jnp.asarray(np.random.default_rng(1).standard_normal((20, 25)))
    rest = EIESNDriver(25, exc_bias=0.0, inh_bias=0.0, seed=0)
    np.testing.assert_array_equal(rest.advance_seq(p, rest.default_state()), 0.0)
    for moving in (EIESNDriver(25, exc_bias=0.0, additive=True, seed=0),
                   EIESNDriver(25, seed=0)):  # fmt: skip
        states = np.asarray(moving.advance_seq(p, moving.default_state()))
        assert np.abs(states[-1]).min() > 0


def test_it_remembers_more_than_the_esn():
    """50 nodes: memory capacity 4.8 at the defaults, the ESN at orc's 2.8
    (orc._defaults)."""
    eiesn = driver_memory(EIESNDriver(50, seed=0), 50)
    esn = driver_memory(ESNDriver(50, seed=0), 50)
    assert eiesn > 4 and eiesn > 1.5 * esn


def test_arguments_are_checked_and_traceable():
    with pytest.raises(ValueError, match="EIESNDriver: exc_bias must be finite"):
        EIESNDriver(10, exc_bias=float("nan"), seed=0)
    with pytest.raises(TypeError, match="EIESNDriver: additive must be a bool"):
        EIESNDriver(10, additive=1, seed=0)
    d = EIESNDriver(10, seed=0)
    r, p = jnp.full(10, 0.1), jnp.ones(10)

    def step(a_e, b_i):
        return eqx.tree_at(
            lambda m: (m.exc_recurrence, m.inh_output), d, (a_e, b_i)
        ).advance(p, r)

    out = jax.jit(jax.vmap(step))(
        jnp.stack([d.exc_recurrence, 0.0]), jnp.stack([d.inh_output, 0.0])
    )
    np.testing.assert_allclose(out[0], d.advance(p, r), rtol=1e-14)
    np.testing.assert_allclose(out[1], np.tanh(1 + 1.6), rtol=1e-14)


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    driver_round_trip(EIESNDriver(40, seed=0), tmp_path / "model.orc")
