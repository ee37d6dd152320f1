"""Training checks its own fit (issue 19): a forecaster whose readout
explains little of its one-step training targets warns PoorFitWarning,
eagerly and under jax.jit; a good fit does not."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc import forecaster as F

# One data length and model per kind of training run, so that the runs share
# their compiled programs: one trajectory of T rows (Lorenz or white noise),
# two of T // 2 rows.
T = 2000


def _kinds(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, {c.category for c in caught}


@pytest.fixture(scope="module")
def lorenz():
    return jnp.asarray(lorenz_rk4(T))  # (T, 3), dt = 0.01


def _noise(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape))


def test_a_good_fit_is_quiet(lorenz):
    (model, states), kinds = _kinds(
        lambda: F.train_RCForecaster(F.ESNForecaster(3, 100), lorenz, spinup=100)
    )
    assert orc.PoorFitWarning not in kinds
    # the check's premise, computed independently: the one-step fit is close
    u = np.asarray(lorenz)  # sliced in numpy: no eager programs
    pred = np.asarray(model.readout(np.asarray(states)[100:-1]))
    err = np.sqrt(np.mean((pred - u[101:]) ** 2, axis=0))
    assert np.all(err / u[101:].std(axis=0) < 0.05)


def test_white_noise_cannot_be_fitted_and_says_so():
    data = _noise((T, 3))
    _, kinds = _kinds(
        lambda: F.train_RCForecaster(F.ESNForecaster(3, 100), data, spinup=100)
    )
    assert orc.PoorFitWarning in kinds
    train = jax.jit(lambda m, d: F.train_RCForecaster(m, d, spinup=100)[0])
    _, kinds = _kinds(lambda: train(F.ESNForecaster(3, 100), data))
    assert orc.PoorFitWarning in kinds


def test_the_check_covers_several_trajectories(lorenz):
    good = jnp.asarray(np.asarray(lorenz).reshape(2, T // 2, 3))  # two halves
    _, kinds = _kinds(
        lambda: F.train_RCForecaster(
            F.ESNForecaster(3, 100), good, spinup=50, multi_sequence=True
        )
    )
    assert orc.PoorFitWarning not in kinds
    _, kinds = _kinds(
        lambda: F.train_RCForecaster(
            F.ESNForecaster(3, 100),
            _noise((2, T // 2, 3)),
            spinup=50,
            multi_sequence=True,
        )
    )
    assert orc.PoorFitWarning in kinds


def test_a_constant_dimension_is_left_out(lorenz):
    # a dimension that never changes has no variance to explain
    data = jnp.asarray(np.c_[np.asarray(lorenz), np.ones(T)])
    _, kinds = _kinds(
        lambda: F.train_RCForecaster(F.ESNForecaster(4, 100), data, spinup=100)
    )
    assert orc.PoorFitWarning not in kinds


def test_the_check_needs_no_stored_states():
    # from the ridge statistics: streaming training is checked too
    _, kinds = _kinds(
        lambda: F.train_RCForecaster(
            F.ESNForecaster(3, 100), _noise((T, 3)), spinup=100, return_states=False
        )
    )
    assert orc.PoorFitWarning in kinds


@pytest.mark.parametrize("beta", [0.0, 1e-3, 10.0])
def test_fit_nrmse_from_statistics_is_the_residual_of_the_fit(beta):
    # orc._ridge.fit_nrmse against the residual computed on the rows
    from orc import _ridge

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 12))
    y = np.stack([x @ rng.normal(size=12), np.ones(400)], axis=1)
    y[:, 0] += 0.5 * rng.normal(size=400) + 3.0  # noise and an offset
    w = np.linalg.solve(x.T @ x + beta * np.eye(12), x.T @ y).T  # (2, 12)
    stats = _ridge.RidgeStats(
        jnp.asarray(x.T @ x), jnp.asarray(x.T @ y), jnp.asarray(400.0)
    )
    # jitted (beta traced): one program for the three betas, as in training
    got = np.asarray(
        jax.jit(_ridge.fit_nrmse, static_argnums=5)(
            stats,
            jnp.asarray(w),
            beta,
            jnp.asarray((y**2).sum(0)),
            jnp.asarray(y.sum(0)),
            400,
        )
    )
    want = np.sqrt(np.mean((x @ w[0] - y[:, 0]) ** 2)) / y[:, 0].std()
    np.testing.assert_allclose(got[0], want, rtol=1e-9)
    assert np.isnan(got[1])  # a constant output has no variance to explain
