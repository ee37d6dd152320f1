"""ES2NDriver: the edge-of-stability ESN (Ceni & Gallicchio 2024).

The update is checked against numpy from the driver's own matrices, its
orthogonal map against ``O^T O = I``, and the point of the construction
against the paper's finding: near the edge of stability (small proximity)
the reservoir remembers far longer than an ESN of the same size. The
driver contract (jit, vmap, grad, dtypes) is in ``test_contract.py``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import driver_memory, driver_round_trip
from orc.drivers import ES2NDriver, ESNDriver


def test_update_is_the_papers():
    """``r' = (1 - β) O r + β tanh(W r + p + b)``, with ``O`` orthogonal."""
    d = ES2NDriver(30, proximity=0.3, bias=0.2, seed=4)
    O = np.asarray(d.orthogonal)
    np.testing.assert_allclose(O.T @ O, np.eye(30), atol=1e-12)
    W = np.asarray(d.reservoir.wr.todense()).reshape(30, 30)
    rng = np.random.default_rng(0)
    r = rng.standard_normal(30)
    for _ in range(5):
        p = rng.standard_normal(30)
        expected = 0.7 * O @ r + 0.3 * np.tanh(W @ r + p + 0.2)
        r = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
        np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-14)
    rho = np.max(np.abs(np.linalg.eigvals(W)))
    assert rho == pytest.approx(float(d.reservoir.spectral_radius), rel=1e-6)


def test_proximity_is_checked_and_traced():
    for bad in (0.0, 1.5, np.nan):
        with pytest.raises(ValueError, match="ES2NDriver: proximity must"):
            ES2NDriver(10, proximity=bad, seed=0)
    with pytest.raises(ValueError, match="ES2NDriver: construction must be 'orc' or"):
        ES2NDriver(10, seed=0, construction="orc04")
    d = ES2NDriver(10, seed=0)
    steps = jax.vmap(
        lambda beta: eqx.tree_at(lambda m: m.proximity, d, beta).advance(
            jnp.ones(10), jnp.ones(10)
        )
    )(jnp.array([0.5, 1.0]))
    np.testing.assert_allclose(steps[0], d.advance(jnp.ones(10), jnp.ones(10)))
    np.testing.assert_allclose(
        steps[1], d.reservoir.advance(jnp.ones(10), jnp.ones(10)), rtol=1e-14
    )


def test_near_the_edge_of_stability_it_remembers():
    """Ceni & Gallicchio 2024: with a small proximity the orthogonal part
    keeps the input's trace, and the memory capacity of 20 nodes nears 20
    (measured 18.2 at β = 0.1), where an ESN with the same hyperparameters
    keeps ~2.4 and the default β = 0.5 ~7."""
    es2n = driver_memory(ES2NDriver(20, proximity=0.1, seed=0), 20)
    esn = driver_memory(ESNDriver(20, seed=0), 20)
    assert es2n > 0.8 * 20
    assert es2n > 4 * esn


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    """Built as the docstring shows, trained by train_RCForecaster, saved and
    loaded to the same forecast bits."""
    driver_round_trip(ES2NDriver(40, seed=0), tmp_path / "es2n.orc")
