"""The one training front (orc._fit): solvers as objects, beta checked once,
problems built once per call, and the many-strength solver sharing one run."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import _fit
from orc._ridge import RESULTS, RidgeStats
from orc.forecaster.train import Forecasting

U = jnp.asarray(orc.data.lorenz63(tN=12, dt=0.01)[0])


def _numpy_ridge(f, y, beta):
    """Weights (O, F) of min ||F w - y||^2 + beta ||w||^2, by numpy lstsq on
    the augmented system (independent of orc's normal equations)."""
    n = f.shape[1]
    a = np.vstack([f, np.sqrt(beta) * np.eye(n)])
    b = np.vstack([y, np.zeros((n, y.shape[1]))])
    return np.linalg.lstsq(a, b, rcond=None)[0].T


def _gram_stats(f, y):
    return RidgeStats(jnp.asarray(f.T @ f), jnp.asarray(f.T @ y), jnp.asarray(len(f)))


@pytest.fixture(params=["cholesky", "eigh"])
def path_method(request, monkeypatch):
    """RidgePath's two methods: one Cholesky solve per strength (below
    EIGH_MIN_STRENGTHS strengths) and one eigendecomposition for all."""
    if request.param == "eigh":
        monkeypatch.setattr(_fit, "EIGH_MIN_STRENGTHS", 1)
    return request.param


def test_ridge_path_equals_numpy_per_strength(path_method):
    rng = np.random.default_rng(0)
    f = rng.normal(size=(400, 12))
    y = f @ rng.normal(size=(12, 3)) + 0.1 * rng.normal(size=(400, 3))
    betas = np.array([0.0, 1e-6, 1e-2, 1.0, 30.0])
    w, result = _fit.RidgePath(jnp.asarray(betas)).compute(_gram_stats(f, y))
    assert w.shape == (5, 3, 12)
    ok = np.asarray(result == RESULTS.successful)
    assert ok.shape == (5,) and ok.all()
    for i, beta in enumerate(betas):
        np.testing.assert_allclose(
            w[i], _numpy_ridge(f, y, beta), rtol=1e-9, atol=1e-12
        )
        # and the same as the one-strength solver (Cholesky)
        w1, r1 = _fit.Ridge(jnp.asarray(beta)).compute(_gram_stats(f, y))
        assert r1 == RESULTS.successful
        np.testing.assert_allclose(w[i], w1, rtol=1e-9, atol=1e-12)


def test_ridge_path_qr_form_and_chunks(path_method):
    """Statistics in QR form (R, Q^T Y) and a bank of chunks."""
    rng = np.random.default_rng(1)
    fs = [rng.normal(size=(300, 8)) for _ in range(2)]
    ys = [f @ rng.normal(size=(8, 2)) for f in fs]
    qr = [np.linalg.qr(np.hstack([f, y])) for f, y in zip(fs, ys, strict=True)]
    r = np.stack([rr[:8, :8] for _, rr in qr])
    z = np.stack([rr[:8, 8:] for _, rr in qr])
    stats = RidgeStats(jnp.asarray(r), jnp.asarray(z), jnp.asarray(300.0), form="qr")
    betas = jnp.asarray([1e-8, 1e-3, 10.0])
    w, result = _fit.RidgePath(betas).compute(stats)
    assert w.shape == (3, 2, 2, 8)
    assert np.asarray(result == RESULTS.successful).all()
    for i, beta in enumerate(np.asarray(betas)):
        for c in range(2):
            np.testing.assert_allclose(
                w[i, c], _numpy_ridge(fs[c], ys[c], beta), rtol=1e-8, atol=1e-10
            )


def test_ridge_path_fallback_is_min_norm_and_nonfinite_reported(path_method):
    rng = np.random.default_rng(2)
    base = rng.normal(size=(200, 3))
    f = np.hstack([base, base[:, :1]])  # a repeated column: singular Gram
    y = base @ np.array([[1.0], [2.0], [-1.0]])
    w, result = _fit.RidgePath(jnp.asarray([0.0, 1e-3])).compute(_gram_stats(f, y))
    np.testing.assert_array_equal(result == RESULTS.fallback, [True, False])
    np.testing.assert_array_equal(result == RESULTS.successful, [False, True])
    np.testing.assert_allclose(w[0], (np.linalg.pinv(f) @ y).T, rtol=1e-7, atol=1e-9)
    bad = RidgeStats(jnp.full((4, 4), jnp.nan), jnp.zeros((4, 1)), jnp.asarray(1.0))
    w, result = _fit.RidgePath(jnp.asarray([1e-3])).compute(bad)
    np.testing.assert_array_equal(result == RESULTS.nonfinite, [True])


def test_fit_with_ridge_path_is_the_separate_fits_stacked(path_method):
    """One run of the reservoir for every strength (the tuning solver): the
    population equals one train_RCForecaster call per strength."""
    model = orc.forecaster.ESNForecaster(3, 60, seed=3)
    seq = U[:600]
    betas = [1e-8, 1e-5, 1e-2]
    problem = Forecasting(
        owner="t", train_seq=seq, target_seq=None, force_kwargs={},
        init=model.driver.default_state(), spinup=20, multi=False,
    )  # fmt: skip
    opts = _fit.options("t", model.dtype)
    population, states = _fit.fit(
        model, problem, _fit.RidgePath(jnp.asarray(betas)), opts
    )
    assert population.readout.wout.shape == (3,) + model.readout.wout.shape
    rows = np.asarray(states[20:-1, 0])  # the regression rows (bank of one)
    targets = np.asarray(seq[21:])
    for i, beta in enumerate(betas):
        single, r = orc.forecaster.train_RCForecaster(model, seq, spinup=20, beta=beta)
        np.testing.assert_array_equal(states, r)
        if path_method == "cholesky":  # the same solve: the same bits
            np.testing.assert_array_equal(
                population.readout.wout[i], single.readout.wout
            )
        # both solves against numpy's least squares on the augmented rows
        # (accurate to cond(F), not cond(F)^2): the eigen-solve is as good
        # as the Cholesky solve, to the conditioning's accuracy
        want = _numpy_ridge(rows, targets, beta)
        err_path = np.abs(np.asarray(population.readout.wout[i, 0]) - want).max()
        err_chol = np.abs(np.asarray(single.readout.wout[0]) - want).max()
        assert err_path <= 10 * err_chol + 1e-9 * np.abs(want).max(), (
            beta,
            err_path,
            err_chol,
        )
        pred = rows @ np.asarray(population.readout.wout[i, 0]).T
        np.testing.assert_allclose(
            pred, rows @ want.T, atol=1e-6 * np.abs(targets).max()
        )
    # the population forecasts under vmap like any stacked models
    fc = eqx.filter_vmap(lambda m: m.forecast(5, states[-1]))(population)
    assert fc.shape == (3, 5, 3)


@pytest.mark.parametrize(
    "beta, error, words",
    [
        ("1e-8", TypeError, "beta must be a real number"),
        (True, TypeError, "beta must be a real number"),
        (np.array([1e-8, 1e-6]), ValueError, "shape (2,)"),
        (-1.0, ValueError, "beta"),
        (float("nan"), ValueError, "beta"),
        (np.array(1e-8 + 0j), TypeError, "beta must be a real number"),
    ],
)
def test_beta_checked_once_with_a_clear_answer(beta, error, words):
    model = orc.forecaster.ESNForecaster(3, 20, seed=0)
    with pytest.raises(error, match="train_RCForecaster") as info:
        orc.forecaster.train_RCForecaster(model, U[:100], beta=beta)
    assert words in str(info.value)


@pytest.mark.parametrize("name", ["return_states", "multi_sequence", "progress"])
def test_flags_refuse_strings(name):
    model = orc.forecaster.ESNForecaster(3, 20, seed=0)
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        orc.forecaster.train_RCForecaster(model, U[:100], **{name: "no"})


def test_traced_beta_equals_eager():
    model = orc.forecaster.ESNForecaster(3, 30, seed=0)

    def wout(beta):
        return orc.forecaster.train_RCForecaster(model, U[:300], beta=beta)[
            0
        ].readout.wout

    np.testing.assert_array_equal(jax.jit(wout)(1e-6), wout(1e-6))
    stacked = jax.vmap(wout)(jnp.asarray([1e-6, 1e-4]))
    np.testing.assert_allclose(stacked[1], wout(1e-4), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(
    "front",
    [
        orc.forecaster.train_RCForecaster,
        orc.forecaster.train_ESNForecaster,
        orc.forecaster.train_CESNForecaster,
        orc.forecaster.train_EnsembleESNForecaster,
        orc.control.train_RCController,
        orc.control.train_ESNController,
        orc.regression.train_RCRegressor,
    ],
)
def test_training_fronts_are_thin(front):
    """Each teacher-forced front is a short function over _fit.fit: at most
    15 lines of code after its docstring."""
    source = inspect.getsource(front)
    body = source.split('"""')[-1].strip().splitlines()
    code = [line for line in body if line.strip() and not line.strip().startswith("#")]
    assert len(code) <= 15, (front.__name__, len(code))


def _checked_names(errors):
    """The argument names the error checks of a program's ``Errors`` are about."""
    names = []
    for kind, msgs, _ in errors.entries:
        text = msgs.fmt if hasattr(msgs, "fmt") else msgs[0]
        if kind == "error" and "contains NaN or inf" in text:
            names.append(text.split(" contains")[0])
    return names


@pytest.mark.parametrize("family", ["forecaster", "controller", "regressor"])
def test_the_training_data_is_checked_once(family):
    """A fit checks its data at its top level and forces the reservoir with
    the model's ``force`` without that entry point checking the same data
    again (each check is compiled into the training program)."""
    rng = np.random.default_rng(0)
    u = rng.standard_normal((60, 3))
    if family == "forecaster":
        model = orc.forecaster.ESNForecaster(3, 20, seed=0)
        train = orc.forecaster.train_RCForecaster
        args = (u,)
    elif family == "controller":
        model = orc.control.ESNController(3, 1, 20, seed=0)
        train = orc.control.train_RCController
        args = (u, rng.standard_normal((60, 1)))
    else:
        model = orc.regression.ESNRegressor(3, 1, 20, seed=0)
        train = orc.regression.train_RCRegressor
        args = (u, rng.standard_normal((60, 1)))
    program = jax.jit(orc.capture_errors(lambda m, *a: train(m, *a)))
    _, errors = program(model, *args)
    names = _checked_names(errors)
    owner = train.__name__
    assert sorted(names) == sorted(
        {
            "forecaster": [f"{owner}: train_seq", f"{owner}: initial_res_state"],
            "controller": [
                f"{owner}: train_seq",
                f"{owner}: control_seq",
                f"{owner}: initial_res_state",
            ],
            "regressor": [
                f"{owner}: in_seq",
                f"{owner}: target_seq",
                f"{owner}: initial_res_state",
            ],
        }[family]
    ), names


@pytest.mark.parametrize("family", ["esn", "cesn"])
def test_the_warm_up_data_is_checked_once(family):
    """``forecast_from_IC`` checks its warm-up data and warms the reservoir
    up with the model's ``force``, which does not check it again."""
    u = np.random.default_rng(0).standard_normal((40, 3))
    if family == "esn":
        model = orc.forecaster.ESNForecaster(3, 20, seed=0)
        program = jax.jit(orc.capture_errors(lambda m, u: m.forecast_from_IC(5, u)))
    else:
        model = orc.forecaster.CESNForecaster(3, 20, seed=0)
        ts = np.arange(5.0) * 0.01
        program = jax.jit(orc.capture_errors(lambda m, u: m.forecast_from_IC(ts, u)))
    _, errors = program(model, u)
    owner = type(model).__name__
    assert _checked_names(errors) == [f"{owner}: spinup_data"]
