"""EuSNDriver (Gallicchio 2024) and ResESNDriver (Ceni & Gallicchio 2024).

Each update is checked against numpy from the driver's own matrices; the
Euler state network against the property it is built for (an antisymmetric
recurrent matrix: to first order a step keeps the state's norm, the
reservoir neither forgets nor blows up) and the memory it buys; the residual
ESN against ES2N, which it is with ``alpha = 1 - beta`` and a random
orthogonal skip. The driver contract (jit, vmap, grad, dtypes) is in
``test_contract.py``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_memory, driver_round_trip
from orc.drivers import ES2NDriver, ESNDriver, EuSNDriver, ResESNDriver


def _dense(driver):
    n = driver.res_dim
    return np.asarray(driver.reservoir.wr.todense()).reshape(n, n)


def test_eusn_update_is_an_euler_step():
    """``r' = r + eps tanh((W - W^T - gamma I) r + p + b)``."""
    d = EuSNDriver(30, step_size=0.3, diffusion=0.05, bias=0.2, seed=4)
    W = _dense(d)
    A = W - W.T - 0.05 * np.eye(30)
    rng = np.random.default_rng(0)
    r = rng.standard_normal(30)
    for _ in range(5):
        p = rng.standard_normal(30)
        expected = r + 0.3 * np.tanh(A @ r + p + 0.2)
        r = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
        np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
    # W is the ESN's of the same seed, at the EuSN's own default radius
    np.testing.assert_array_equal(
        d.reservoir.wr.values,
        ESNDriver(30, 1.0, spectral_radius=0.1, bias=0.2, seed=4).wr.values,
    )


def test_eusn_keeps_the_norm_to_first_order():
    """Without diffusion, input and bias, ``r' = r + eps tanh(A r)`` with
    ``A`` antisymmetric: ``|r'|^2 - |r|^2 = 2 eps r.tanh(A r) + O(eps^2)``,
    and ``r.A r = 0``, so a small state keeps its norm to third order in its
    size (tanh(x) = x - x^3/3)."""
    d = EuSNDriver(40, step_size=0.5, diffusion=0.0, bias=0.0, spectral_radius=0.9,
                   seed=1)  # fmt: skip
    r = 1e-3 * np.random.default_rng(3).standard_normal(40)
    new = np.asarray(d.advance(jnp.zeros(40), jnp.asarray(r)))
    W = _dense(d)
    step = new - r
    assert abs(r @ step) < 1e-6 * np.linalg.norm(r) * np.linalg.norm(step)
    np.testing.assert_allclose(step, 0.5 * np.tanh((W - W.T) @ r), rtol=1e-12)
    # a dissipative ESN of the same matrix shrinks such a state
    esn = np.asarray(
        ESNDriver(40, 1.0, 0.9, bias=0.0, seed=1).advance(jnp.zeros(40), jnp.asarray(r))
    )
    assert np.linalg.norm(esn) < 0.95 * np.linalg.norm(r)


def test_eusn_remembers_more_than_the_esn():
    """50 nodes: memory capacity 13.0 at the defaults, the ESN at orc's 2.8
    (orc._defaults)."""
    eusn = driver_memory(EuSNDriver(50, seed=0), 50)
    esn = driver_memory(ESNDriver(50, seed=0), 50)
    assert eusn > 10 and eusn > 3 * esn


def test_resesn_update_for_each_skip_map():
    """``r' = alpha O r + beta tanh(W r + p + b)``."""
    rng = np.random.default_rng(0)
    r, p = rng.standard_normal(25), rng.standard_normal(25)
    for kind in ("random", "cycle", "identity"):
        d = ResESNDriver(25, alpha=0.8, beta=0.3, orthogonal=kind, bias=0.1, seed=2)
        O = {
            "random": np.asarray(d.orthogonal_map) if kind == "random" else None,
            "cycle": np.roll(np.eye(25), 1, axis=0),
            "identity": np.eye(25),
        }[kind]
        np.testing.assert_allclose(O.T @ O, np.eye(25), atol=1e-12)
        expected = 0.8 * O @ r + 0.3 * np.tanh(_dense(d) @ r + p + 0.1)
        got = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    assert ResESNDriver(25, orthogonal="cycle", seed=2).orthogonal_map is None


def test_resesn_with_tied_weights_is_es2n():
    res = ResESNDriver(30, alpha=0.6, beta=0.4, seed=5)
    es2n = ES2NDriver(30, proximity=0.4, seed=5)
    np.testing.assert_array_equal(res.orthogonal_map, es2n.orthogonal)
    p = jnp.asarray(np.random.default_rng(1).standard_normal((40, 30)))
    np.testing.assert_allclose(
        res.advance_seq(p, res.default_state()),
        es2n.advance_seq(p, es2n.default_state()),
        rtol=1e-13, atol=1e-15,
    )  # fmt: skip


def test_arguments_are_checked_and_traceable():
    with pytest.raises(ValueError, match="EuSNDriver: step_size must lie in"):
        EuSNDriver(10, step_size=0.0, seed=0)
    with pytest.raises(ValueError, match="EuSNDriver: diffusion must lie in"):
        EuSNDriver(10, diffusion=-0.1, seed=0)
    with pytest.raises(ValueError, match="ResESNDriver: orthogonal must be one of"):
        ResESNDriver(10, orthogonal="hadamard", seed=0)
    with pytest.raises(ValueError, match="ResESNDriver: beta must lie in"):
        ResESNDriver(10, beta=0.0, seed=0)
    d = EuSNDriver(10, seed=0)
    r, p = jnp.full(10, 0.1), jnp.ones(10)

    def step(eps, gamma):
        return eqx.tree_at(
            lambda m: (m.step_size, m.diffusion), d, (eps, gamma)
        ).advance(p, r)

    out = jax.jit(jax.vmap(step))(jnp.array([1.0, 0.5]), jnp.array([0.1, 0.0]))
    np.testing.assert_allclose(out[0], d.advance(p, r), rtol=1e-14)
    W = _dense(d)
    np.testing.assert_allclose(
        out[1], 0.1 + 0.5 * np.tanh((W - W.T) @ np.full(10, 0.1) + 1 + 1.6), rtol=1e-13
    )


@pytest.mark.parametrize(
    "driver",
    [
        lambda: EuSNDriver(40, seed=0),
        lambda: ResESNDriver(40, seed=0),
        lambda: ResESNDriver(40, orthogonal="cycle", seed=0),
    ],
    ids=["eusn", "resesn", "resesn-cycle"],
)
def test_a_forecaster_around_it_trains_and_round_trips(driver, tmp_path):
    driver_round_trip(driver(), tmp_path / "model.orc")
