"""The one training front (orc._fit): solvers as objects, beta checked once,
problems built once per call, and the many-strength solver sharing one run."""

import functools
import inspect

import equinox as eqx
import jax
import numpy as np
import pytest

import orc
from _helpers import (
    BATCHED,
    ON_CPU,
    assert_fallback_solution,
    lorenz_rk4,
    on_device,
)
from orc import _fit
from orc._ridge import RESULTS, RidgeStats
from orc.forecaster.train import Forecasting

# Lorenz63 samples, made in numpy (orc.data.lorenz63 compiled its ODE solve,
# ~3.5 s, in every process that imported this file); the slices the tests
# train on are taken in numpy and transferred: an eager jnp slice compiles a
# program per shape, jax.device_put compiles nothing.
_U = lorenz_rk4(1200)
U100, U300, U600 = (on_device(_U[:n]) for n in (100, 300, 600))


def _numpy_ridge(f, y, beta):
    """Weights (O, F) of min ||F w - y||^2 + beta ||w||^2, by numpy lstsq on
    the augmented system (independent of orc's normal equations)."""
    n = f.shape[1]
    a = np.vstack([f, np.sqrt(beta) * np.eye(n)])
    b = np.vstack([y, np.zeros((n, y.shape[1]))])
    return np.linalg.lstsq(a, b, rcond=None)[0].T


def _gram_stats(f, y):
    return RidgeStats(on_device(f.T @ f), on_device(f.T @ y), on_device(len(f)))


@functools.partial(jax.jit, static_argnames="method")
def _compute(solver, stats, method):
    """``solver.compute(stats)`` as one compiled program (eagerly, each of
    its jnp operations compiled a program of its own per shape). ``method``
    (the ``path_method`` fixture's) only keys the cache: RidgePath reads
    EIGH_MIN_STRENGTHS when it is traced, so each method has its program."""
    del method
    return solver.compute(stats)


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
    stats = _gram_stats(f, y)
    w, result = _compute(_fit.RidgePath(on_device(betas)), stats, path_method)
    assert w.shape == (5, 3, 12)
    w = np.asarray(w)  # indexed in numpy below (an eager slice compiles)
    ok = np.asarray(result == RESULTS.successful)
    assert ok.shape == (5,) and ok.all()
    for i, beta in enumerate(betas):
        np.testing.assert_allclose(
            w[i], _numpy_ridge(f, y, beta), rtol=1e-9, atol=1e-12
        )
        # and the same as the one-strength solver (Cholesky)
        w1, r1 = _compute(_fit.Ridge(on_device(beta)), stats, "one strength")
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
    stats = RidgeStats(on_device(r), on_device(z), on_device(300.0), form="qr")
    betas = np.array([1e-8, 1e-3, 10.0])
    w, result = _compute(_fit.RidgePath(on_device(betas)), stats, path_method)
    assert w.shape == (3, 2, 2, 8)
    w = np.asarray(w)
    assert np.asarray(result == RESULTS.successful).all()
    for i, beta in enumerate(betas):
        for c in range(2):
            np.testing.assert_allclose(
                w[i, c], _numpy_ridge(fs[c], ys[c], beta), rtol=1e-8, atol=1e-10
            )


def test_ridge_path_fallback_is_min_norm_and_nonfinite_reported(path_method):
    rng = np.random.default_rng(2)
    base = rng.normal(size=(200, 3))
    f = np.hstack([base, base[:, :1]])  # a repeated column: singular Gram
    y = base @ np.array([[1.0], [2.0], [-1.0]])
    path = _fit.RidgePath(on_device([0.0, 1e-3]))
    w, result = _compute(path, _gram_stats(f, y), path_method)
    np.testing.assert_array_equal(result == RESULTS.fallback, [True, False])
    np.testing.assert_array_equal(result == RESULTS.successful, [False, True])
    w0 = np.asarray(w)[0]
    assert_fallback_solution(w0, f, (np.linalg.pinv(f) @ y).T, atol=1e-8)
    bad = RidgeStats(
        on_device(np.full((4, 4), np.nan)), on_device(np.zeros((4, 1))), on_device(1.0)
    )
    w, result = _compute(_fit.RidgePath(on_device([1e-3])), bad, path_method)
    np.testing.assert_array_equal(result == RESULTS.nonfinite, [True])


def test_fit_with_ridge_path_is_the_separate_fits_stacked(path_method):
    """One run of the reservoir for every strength (the tuning solver): the
    population equals one train_RCForecaster call per strength."""
    model = orc.forecaster.ESNForecaster(3, 60, seed=3)
    seq = U600
    betas = [1e-8, 1e-5, 1e-2]
    # the owner (a static field) names the method: fit's program cache does
    # not know EIGH_MIN_STRENGTHS, so without it the eigh case ran the
    # Cholesky case's program
    owner = f"RidgePath ({path_method})"
    problem = Forecasting(
        owner=owner, train_seq=seq, target_seq=None, force_kwargs={},
        init=model.driver.default_state(), spinup=20, multi=False,
    )  # fmt: skip
    opts = _fit.options(owner, model.dtype)
    population, states = _fit.fit(
        model, problem, _fit.RidgePath(on_device(betas)), opts
    )
    assert population.readout.wout.shape == (3,) + model.readout.wout.shape
    wouts = np.asarray(population.readout.wout)  # indexed in numpy below
    rows = np.asarray(states)[20:-1, 0]  # the regression rows (bank of one)
    targets = _U[21:600]
    sv = np.linalg.svd(rows, compute_uv=False)
    for i, beta in enumerate(betas):
        single, r = orc.forecaster.train_RCForecaster(model, seq, spinup=20, beta=beta)
        np.testing.assert_array_equal(states, r)
        # both solves against numpy's least squares on the augmented rows
        # (accurate to cond(F), not cond(F)^2)
        want = _numpy_ridge(rows, targets, beta)
        err_path = np.abs(wouts[i, 0] - want).max()
        err_chol = np.abs(np.asarray(single.readout.wout)[0] - want).max()
        # rounding's reach in a solve of G + beta I: eps cond(G + beta I) |w|
        # (5.6e-3 at beta 1e-8 here, 2e-9 at 1e-2)
        reach = np.finfo(np.float64).eps * (sv[0] ** 2 + beta) / (sv[-1] ** 2 + beta)
        reach *= np.abs(want).max()
        if ON_CPU:
            if path_method == "cholesky":  # the same solve: the same bits
                np.testing.assert_array_equal(wouts[i], single.readout.wout)
            # the eigen-solve is as good as the Cholesky solve
            assert err_path <= 10 * err_chol + 1e-9 * np.abs(want).max(), (
                beta,
                err_path,
                err_chol,
            )
        else:
            # a GPU's solvers round otherwise, batched or not (an H200, beta
            # 1e-8: the eigen path 0.0149 from numpy's, the Cholesky 3.4e-4,
            # the batched Cholesky 2.9e-4 from the single one): both within
            # a small multiple of the conditioning's reach
            assert max(err_path, err_chol) <= 10 * reach, (beta, err_path, err_chol)
        pred = rows @ wouts[i, 0].T
        np.testing.assert_allclose(
            pred, rows @ want.T, atol=1e-6 * np.abs(targets).max()
        )
    # the population forecasts under vmap like any stacked models
    last = on_device(np.asarray(states)[-1])
    fc = eqx.filter_vmap(lambda m: m.forecast(5, last))(population)
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
        orc.forecaster.train_RCForecaster(model, U100, beta=beta)
    assert words in str(info.value)


@pytest.mark.parametrize("name", ["return_states", "multi_sequence", "progress"])
def test_flags_refuse_strings(name):
    model = orc.forecaster.ESNForecaster(3, 20, seed=0)
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        orc.forecaster.train_RCForecaster(model, U100, **{name: "no"})


def test_traced_beta_equals_eager():
    model = orc.forecaster.ESNForecaster(3, 30, seed=0)

    def wout(beta):
        return orc.forecaster.train_RCForecaster(model, U300, beta=beta)[0].readout.wout

    np.testing.assert_array_equal(jax.jit(wout)(1e-6), wout(1e-6))
    stacked = jax.vmap(wout)(on_device([1e-6, 1e-4]))
    np.testing.assert_allclose(stacked[1], wout(1e-4), **BATCHED)


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


def _checked_names(program, *args):
    """The argument names the error checks of ``program`` (a ``jax.jit`` of
    ``orc.capture_errors``) are about when called with ``args``. The checks a
    program holds are fixed when it is traced (their messages are the static
    ``entries`` of the ``Errors`` it returns), so it is traced, by
    ``jax.eval_shape``, and not compiled (~6 s for a CESN's)."""
    _, errors = jax.eval_shape(program, *args)
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
    names = _checked_names(program, model, *args)
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
    owner = type(model).__name__
    assert _checked_names(program, model, u) == [f"{owner}: spinup_data"]
