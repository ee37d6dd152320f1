"""NLATReadout: products of neighbouring nodes (ReservoirComputing.jl's NLAT2, NLAT3).

The transformations are checked against the examples ReservoirComputing.jl
publishes in its documentation, and the readout's training and output
against numpy (a ridge solve on the transformed states, written here).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.forecaster import ESNForecaster, train_RCForecaster
from orc.readouts import (
    NLATReadout,
    ParallelQuadraticReadout,
    QuadraticReadout,
    nlat2,
    nlat3,
)
from orc.regression import ESNRegressor, train_RCRegressor

# ReservoirComputing.jl's documented examples: x = 0:9, and a 7 x 3 matrix
# whose rows are the nodes (states as columns); here the nodes are the last axis.
RCJL = {
    nlat2: ([0, 1, 0, 3, 6, 5, 20, 7, 42, 9], [[1, 2, 3], [4, 5, 6], [4, 10, 18],
            [10, 11, 12], [70, 88, 108], [16, 17, 18], [19, 20, 21]]),
    nlat3: ([0, 1, 3, 3, 15, 5, 35, 7, 63, 9], [[1, 2, 3], [4, 5, 6], [40, 55, 72],
            [10, 11, 12], [160, 187, 216], [16, 17, 18], [19, 20, 21]]),
}  # fmt: skip


@pytest.mark.parametrize("fn", [nlat2, nlat3], ids=["nlat2", "nlat3"])
def test_transforms_are_reservoircomputing_jls(fn):
    vector, matrix = RCJL[fn]
    np.testing.assert_array_equal(fn(jnp.arange(10.0)), vector)
    states = jnp.arange(1.0, 22.0).reshape(7, 3).T  # 3 states of 7 nodes
    np.testing.assert_array_equal(fn(states).T, matrix)


def _numpy_ridge(F, Y, beta):
    return np.linalg.solve(F.T @ F + beta * np.eye(F.shape[1]), F.T @ Y).T


def test_a_forecaster_and_a_regressor_train_on_the_transformed_states():
    t = 0.05 * np.arange(400)[:, None]
    u = np.sin(t * np.array([1.0, 1.7, 2.3]) + np.array([0.0, 0.5, 1.0]))
    # a forecaster's driver is a bank of one (states (1, 40)), a regressor's
    # a single reservoir (states (40,)): the readout reads both
    esn = ESNForecaster(3, 40, seed=1).set_readout(NLATReadout(3, 40, "nlat3"))
    esn, R = train_RCForecaster(esn, u, spinup=50, beta=1e-2)
    F = np.asarray(nlat3(R[50:-1, 0]))
    W = _numpy_ridge(F, u[51:], 1e-2)
    np.testing.assert_allclose(esn.readout.wout[0], W, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(
        esn.readout(R[-1]), W @ np.asarray(nlat3(R[-1, 0])), rtol=1e-10
    )
    forecast = esn.forecast(5, R[-1])
    assert forecast.shape == (5, 3) and np.all(np.isfinite(forecast))

    reg = ESNRegressor(3, 1, 40, seed=1, readout_bias=False)
    reg = reg.set_readout(NLATReadout(1, 40, "nlat2"))
    y = (u[:, :1] * u[:, 1:2]) ** 2
    reg, _ = train_RCRegressor(reg, u, y, spinup=50, beta=1e-2)
    states = np.asarray(reg.force(u, reg.driver.default_state()))
    W = _numpy_ridge(np.asarray(nlat2(states[50:])), y[50:], 1e-2)
    np.testing.assert_allclose(reg.readout.wout[0], W, rtol=1e-7, atol=1e-9)


def test_a_bank_reads_each_reservoir_through_its_own_matrix(tmp_path):
    ro = NLATReadout(4, 9, "nlat2", chunks=2)
    rng = np.random.default_rng(0)
    W = rng.standard_normal((2, 2, 9))
    ro = ro.set_wout(jnp.asarray(W))
    r = rng.standard_normal((2, 9))
    expected = np.concatenate([W[c] @ np.asarray(nlat2(r[c])) for c in range(2)])
    np.testing.assert_allclose(ro.readout(jnp.asarray(r)), expected, rtol=1e-12)

    model = ESNForecaster(4, 9, chunks=2, seed=0).set_readout(ro)
    orc.save(tmp_path / "nlat.orc", model)
    loaded = orc.load(tmp_path / "nlat.orc")
    assert loaded.readout.transform == "nlat2"
    np.testing.assert_array_equal(loaded.readout.wout, ro.wout)


def test_a_single_quadratic_readout_in_a_forecaster_trains_as_the_parallel_one():
    """set_readout of a single reservoir's readout into an ESNForecaster
    (whose states are a bank of one) trains to the weights of the readout
    the forecaster builds itself."""
    u = np.sin(0.05 * np.arange(300)[:, None] * np.array([1.0, 1.7, 2.3]))
    own, _ = train_RCForecaster(ESNForecaster(3, 30, seed=2, quadratic=True), u)
    assert isinstance(own.readout, ParallelQuadraticReadout)
    swapped = ESNForecaster(3, 30, seed=2).set_readout(QuadraticReadout(3, 30))
    swapped, _ = train_RCForecaster(swapped, u)
    np.testing.assert_allclose(swapped.readout.wout, own.readout.wout, rtol=1e-10)


def test_bad_readouts_are_refused_by_name():
    with pytest.raises(ValueError, match="transform must be one of"):
        NLATReadout(3, 40, "nlat4")
    with pytest.raises(
        ValueError, match=r"set_readout: NLATReadout reads states of shape \(30,\)"
    ):
        ESNForecaster(3, 40, seed=0).set_readout(NLATReadout(3, 30, "nlat2"))
