"""orc.tune.refine: gradients through build, training and solve against
finite differences; the refined points lower the validation loss, which an
independent numpy computation of the refined models confirms."""

from __future__ import annotations

import functools
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc.forecaster import ESNForecaster, train_RCForecaster
from orc.tune import Forecast
from orc.tune._refine import REFINABLE, loss_function

pytest.importorskip("optax")

U = np.asarray(lorenz_rk4(1300))
TASK = Forecast(U[:700], U[700:], spinup=50, warmup=60, horizon=60, windows=3,
                dt=0.01, lyapunov_exponent=0.906)  # fmt: skip
FIXED = {"data_dim": 3, "res_dim": 30}
ROW = {"seed": 0, "beta": 1e-3, "Wr_spectral_radius": 0.8, "leak_rate": 0.6,
       "embedding_scaling": 0.1, "bias": 1.0}  # fmt: skip
NAMES = [n for n in REFINABLE if n in ROW]


def _theta(row):
    return jnp.asarray([REFINABLE[n][0](jnp.asarray(float(row[n]))) for n in NAMES])


@functools.cache
def _value_and_grad():
    """refine's loss of a candidate (ROW's names over FIXED) and its
    gradient, as one compiled program shared by the tests that evaluate it
    (a forward program of its own would compile as long again)."""
    loss = loss_function(ESNForecaster, TASK, NAMES, FIXED, 20, 1.0)
    return jax.jit(jax.value_and_grad(loss))


def _numpy_loss(model, horizon=20, weight=1.0):
    """The validation loss of a trained model, by the public API and numpy."""
    u, val = np.asarray(TASK.train), np.asarray(TASK.validation)
    scale2 = np.mean(np.sum(u**2, axis=1))
    states = model.force(jnp.asarray(val), model.driver.default_state())
    errs = []
    for s in TASK.starts:
        pred = np.asarray(model.forecast(horizon, states[s - 1]))
        errs.append(np.sum((pred - val[s : s + horizon]) ** 2, axis=-1))
    closed = np.mean(errs) / scale2
    w = TASK.warmup
    one = np.asarray(model.readout.batch_readout(states[w - 1 : -1]))
    teacher = np.mean(np.sum((one - val[w:]) ** 2, axis=-1)) / scale2
    return closed + weight * teacher


def test_gradient_matches_finite_differences():
    # one program gives the gradient and the values the differences take
    value_and_grad = _value_and_grad()
    theta = _theta(ROW)
    grad = np.asarray(value_and_grad(theta, 0)[1])
    eps = 1e-5
    for i, name in enumerate(NAMES):
        up = float(value_and_grad(theta.at[i].add(eps), 0)[0])
        down = float(value_and_grad(theta.at[i].add(-eps), 0)[0])
        fd = (up - down) / (2 * eps)
        assert grad[i] == pytest.approx(fd, rel=2e-3, abs=1e-9 * abs(up)), name


def test_refine_lowers_the_validation_loss_of_each_start():
    starts = [ROW, dict(ROW, seed=1, beta=1e-5)]
    res = orc.tune.refine(ESNForecaster, TASK, starts, fixed=FIXED, steps=4)
    assert res.history.shape == (5, 2)
    np.testing.assert_array_equal(res.history[0], res.start_loss)
    assert np.all(res.loss < res.start_loss)
    np.testing.assert_array_equal(res.loss, np.nanmin(res.history, axis=0))
    for point, model, value in zip(res.points, res.models, res.loss, strict=True):
        assert isinstance(model, ESNForecaster)
        assert float(model.driver.spectral_radius) == pytest.approx(
            point["Wr_spectral_radius"]
        )
        # the refined model, trained and scored independently
        assert _numpy_loss(model) == pytest.approx(value, rel=1e-6)
    assert [p["seed"] for p in res.points] == [0, 1]


def test_the_start_loss_is_the_start_models_loss():
    model, _ = train_RCForecaster(
        ESNForecaster(**FIXED, **{n: ROW[n] for n in NAMES if n != "beta"},
                      seed=0, construction="jax"),
        jnp.asarray(TASK.train), spinup=TASK.spinup, beta=ROW["beta"],
    )  # fmt: skip
    # the loss compiled with its gradient, as refine's step evaluates it
    loss = float(_value_and_grad()(_theta(ROW), 0)[0])
    assert loss == pytest.approx(_numpy_loss(model), rel=1e-9)


@pytest.mark.parametrize(
    "start, kwargs, error, words",
    [
        ({"seed": 0, "bias": 1.0}, {}, ValueError, "'seed' and 'beta'"),
        ([ROW, dict(ROW, res_dim=20)], {}, ValueError, "same others"),
        (ROW, {"horizon": 500}, ValueError, "task.horizon"),
        (ROW, {"steps": -1}, ValueError, "steps must be an int"),
        ("best", {}, TypeError, "search row"),
    ],
)
def test_bad_starts_are_refused(start, kwargs, error, words):
    with pytest.raises(error, match=words):
        orc.tune.refine(ESNForecaster, TASK, start, fixed=FIXED, **kwargs)


def test_without_optax_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "optax", None)
    with pytest.raises(ImportError, match=r"orc\[tune\]"):
        orc.tune.refine(ESNForecaster, TASK, ROW, fixed=FIXED)


def test_gradient_through_training_keeps_a_state_per_step_not_its_neighbours():
    """A reverse pass through the forced run (refine's gradients) keeps about
    one state per step: the run's steps are rematerialised, so the gathered
    neighbours (``k`` per node, 8 here) and tanh's output are recomputed, not
    stored for every step (97 bytes per step and node before, 26 after, in
    float64: the states the Gram reads, the drive and the carried state)."""
    n = 400
    # the reservoir's values scaled inside the loss (as the spectral radius
    # scales them when refine builds the model): the derivative flows
    # through the same run, and the model is built once, outside the program
    # (its construction's derivative holds no per-step memory)
    model = ESNForecaster(3, n, seed=0)

    def loss(sr, u, model):
        model = eqx.tree_at(
            lambda m: m.driver.wr.values, model, model.driver.wr.values * sr
        )
        trained, _ = train_RCForecaster(model, u, spinup=100, return_states=False)
        return jnp.sum(trained.readout.wout**2)

    def temp_bytes(steps):
        program = jax.jit(jax.grad(loss)).lower(0.9, jnp.zeros((steps, 3)), model)
        return program.compile().memory_analysis().temp_size_in_bytes

    k = ESNForecaster(3, n, seed=0).driver.wr.values.shape[-1]
    per_step_node = (temp_bytes(2000) - temp_bytes(1000)) / (1000 * n)
    assert k >= 8 and per_step_node <= 6 * 8, (k, per_step_node)
