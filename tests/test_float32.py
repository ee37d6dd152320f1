"""float32 models train with float64 accuracy (issue 19, item 2).

With x64 on, a float32 fit accumulates and solves in float64; with x64 off
its statistics are kept in QR form (``orc._ridge``). Both are checked against
a float64 numpy solution of the same float32 features; a float32 Lorenz63
forecaster with x64 off (a subprocess) must keep >= 90% of the float64
model's valid prediction time (the float64 model runs in the test process),
where float32 normal equations lose most of it.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import assert_fallback_solution, lorenz_rk4
from orc import _ridge


def _problem(rows=400, f=30, o=3, seed=0, cond=1e4):
    """Float32 features with a chosen condition number (a constant column
    first) and targets; the float64 ridge solution as the reference."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((rows, f)))
    v, _ = np.linalg.qr(rng.standard_normal((f, f)))
    X = (q * np.geomspace(1.0, 1.0 / cond, f)) @ v.T * np.sqrt(rows)
    X[:, 0] = 1.0
    X = X.astype(np.float32)
    Y = (X.astype(np.float64) @ rng.standard_normal((f, o))).astype(np.float32)
    Y += 0.01 * rng.standard_normal(Y.shape).astype(np.float32)
    return X, Y


def _ref(X, Y, beta, intercept=False):
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    if intercept:
        Xc, Yc = X[:, 1:] - X[:, 1:].mean(0), Y - Y.mean(0)
        W = np.linalg.solve(Xc.T @ Xc + beta * np.eye(X.shape[1] - 1), Xc.T @ Yc).T
        b = Y.mean(0) - W @ X[:, 1:].mean(0)
        return np.concatenate([b[:, None], W], 1)
    return np.linalg.solve(X.T @ X + beta * np.eye(X.shape[1]), X.T @ Y).T


# The ridge engine's functions run under jax.jit here, as they do in a fit:
# run eagerly, each of their operations is a program of its own per shape
# (most of this file's compilations). The one eager call left is the
# reference of the jit check (test_qr_form_chunks_jit_vmap_grad_and_errors).
_update = jax.jit(_ridge.stats_update, static_argnames=("start", "stop"))
_add = jax.jit(operator.add)
_solve_with_result = jax.jit(
    _ridge.solve_with_result, static_argnames=("batch_size", "intercept")
)


@jax.jit
def _fit(stats, X, Y, beta):
    """``_ridge.solve`` of ``stats`` updated with all rows of X, Y."""
    return _ridge.solve(_ridge.stats_update(stats, X, Y), beta)


@jax.jit
def _fit_with_result(stats, X, Y, beta):
    """``_ridge.solve_with_result`` of ``stats`` updated with all rows of X, Y."""
    return _ridge.solve_with_result(_ridge.stats_update(stats, X, Y), beta)


def _qr_stats(f, o, chunks=None):
    lead = () if chunks is None else (chunks,)
    z = np.float32
    # zeros put on the device from numpy (jnp.zeros compiles a program per shape)
    return _ridge.RidgeStats(
        *jax.device_put(
            (np.zeros(lead + (f, f), z), np.zeros(lead + (f, o), z), np.zeros((), z))
        ),
        form="qr",
        weights_dtype=jnp.dtype(z),
    )


def test_accumulation_policy():
    assert _ridge.accumulation(jnp.float64) == (jnp.dtype(jnp.float64), "gram")
    # the suite runs with x64 on: float32 statistics are float64
    assert jax.config.jax_enable_x64
    assert _ridge.accumulation(jnp.float32) == (jnp.dtype(jnp.float64), "gram")
    s = _ridge.RidgeStats.zeros(4, 2, None, jnp.float32)
    assert s.gram.dtype == jnp.float64 and s.weights_dtype == jnp.float32


def test_float32_features_with_x64_on_solve_in_float64():
    X, Y = _problem(cond=1e5)
    beta = 1e-6
    W = _fit(_ridge.RidgeStats.zeros(30, 3, None, jnp.float32), X, Y, beta)
    assert W.dtype == jnp.float32
    W = np.asarray(W)
    ref = _ref(X, Y, beta)
    # float64 accuracy, rounded to float32 once
    np.testing.assert_allclose(W, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    # float32 normal equations on the same problem are far off (in numpy's
    # float32, the same on every platform)
    G = X.T @ X + np.float32(beta) * np.eye(30, dtype=np.float32)
    W32 = np.linalg.solve(G, X.T @ Y).T
    assert W32.dtype == np.float32
    assert np.abs(W32 - ref).max() > 100 * np.abs(W - ref).max()


@pytest.mark.parametrize("intercept", [False, True])
def test_qr_form_matches_the_float64_solution(intercept):
    # QR's error grows like eps * cond(X) (1e-4 here), the float32 normal
    # equations' like eps * cond(X)**2 (0.1)
    X, Y = _problem(cond=1e3)
    beta = 1e-8
    ref = _ref(X, Y, beta, intercept)
    # (the premise in numpy's float32, the same on every platform)
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    G = X32.T @ X32 + np.float32(beta) * np.eye(30, dtype=np.float32)
    W32 = np.linalg.solve(G, X32.T @ Y32).T
    assert np.abs(W32 - ref).max() > 1e-2 * np.abs(ref).max()
    # in blocks, in one call, and as the sum of two halves' statistics (equal
    # halves: one program for both)
    s = _qr_stats(30, 3)
    blocks = _update(_update(s, X, Y, 0, 200), X, Y, 200, 400)
    whole = _update(s, X, Y)
    halves = _add(_update(s, X[:200], Y[:200]), _update(s, X[200:], Y[200:]))
    assert float(whole.count) == 400 and float(halves.count) == 400
    for stats in (blocks, whole, halves):
        W, result = _solve_with_result(stats, beta, intercept=intercept)
        assert W.dtype == jnp.float32 and result == _ridge.RESULTS.successful
        np.testing.assert_allclose(W, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
    # R^T R is the Gram of the rows
    G = np.asarray(whole.gram, np.float64).T @ np.asarray(whole.gram, np.float64)
    np.testing.assert_allclose(G, X.T.astype(np.float64) @ X, rtol=1e-4, atol=1e-2)


def test_qr_form_chunks_jit_vmap_grad_and_errors():
    X, Y = _problem(f=12)
    beta = 1e-3
    Xc, Yc = np.stack([X, X[::-1] * 2], 1), np.stack([Y, Y[::-1]], 1)
    W = np.asarray(_fit(_qr_stats(12, 3, chunks=2), Xc, Yc, beta))
    assert W.shape == (2, 3, 12)
    np.testing.assert_allclose(W[0], _ref(X, Y, beta), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        W[1], _ref(X[::-1] * 2, Y[::-1], beta), rtol=1e-4, atol=1e-4
    )

    def fit(X, Y):
        return _ridge.solve(_ridge.stats_update(_qr_stats(12, 3), X, Y), beta)

    # the one eager call: the reference of jax.jit (the other transformations
    # are traced inside a jax.jit each, as in a fit)
    jit_fit = jax.jit(fit)
    np.testing.assert_allclose(jit_fit(X, Y), fit(X, Y), rtol=1e-6, atol=1e-6)
    batched = jax.jit(jax.vmap(fit))(np.stack([X, 2 * X]), np.stack([Y, Y]))
    np.testing.assert_allclose(
        np.asarray(batched)[1], jit_fit(2 * X, Y), rtol=1e-5, atol=1e-5
    )
    # derivative against a float64 finite difference of the reference
    d = np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)
    _, jvp = jax.jit(lambda X, d: jax.jvp(lambda X: fit(X, Y).sum(), (X,), (d,)))(X, d)
    h = 1e-4
    fd = (_ref(X + h * d, Y, beta).sum() - _ref(X - h * d, Y, beta).sum()) / (2 * h)
    np.testing.assert_allclose(float(jvp), fd, rtol=1e-2)
    # a collinear, unpenalised fit falls back to the minimum-norm solution (the
    # last column a copy of column 1: 12 columns, the program of the check below)
    Xs = np.concatenate([X[:, :-1], X[:, 1:2]], 1)
    Ws, result = _fit_with_result(_qr_stats(12, 3), Xs, Y, 0.0)
    assert result == _ridge.RESULTS.fallback
    ref = np.linalg.lstsq(Xs.astype(np.float64), Y, rcond=None)[0].T
    assert_fallback_solution(Ws, Xs, ref, atol=1e-3)
    # non-finite rows are reported, not solved
    Xn = X.copy()
    Xn[5, 3] = np.nan
    _, result = _fit_with_result(_qr_stats(12, 3), Xn, Y, beta)
    assert result == _ridge.RESULTS.nonfinite
    with pytest.raises(ValueError, match="form"):
        _ = _qr_stats(12, 3) + _ridge.RidgeStats.zeros(12, 3, None, jnp.float64)


# The valid prediction times of a Lorenz63 forecaster of ``dtype`` (and its
# readout's dtype): run by the test process itself for the float64 baseline
# (x64 on, as the suite runs) and by a subprocess with x64 off for float32.
_VPTS = r"""
def vpts(U, dtype):
    import warnings
    import numpy as np
    import jax.numpy as jnp
    import orc
    from orc.forecaster import ESNForecaster, train_RCForecaster
    n_train, warm, hor = 6000, 200, 1200
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ESNForecaster(3, res_dim=200, seed=0, dtype=dtype)
        m, _ = train_RCForecaster(m, jnp.asarray(U[:n_train], dtype), spinup=200)
    scale = float(np.sqrt(np.mean(np.sum(U[n_train:] ** 2, 1))))
    v = []
    for w in range(5):
        s = n_train + warm + w * (warm + hor)
        p = m.forecast_from_IC(hor, jnp.asarray(U[s - warm:s], dtype))
        p = np.asarray(p, np.float64)
        v.append(float(orc.metrics.valid_prediction_time(
            p, U[s:s + hor], 0.4, 0.01, 0.906, scale=scale)))
    return v, str(m.readout.wout.dtype)
"""

_X64_OFF = (
    r"""
import json, sys
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", False)
"""
    + _VPTS
    + r"""
v, wout = vpts(np.load(sys.argv[1]), jnp.float32)
print(json.dumps({"vpt": v, "wout": wout, "x64": jax.config.jax_enable_x64}))
"""
)


def test_float32_lorenz63_forecaster_with_x64_off_keeps_its_vpt(tmp_path):
    # Lorenz63 by the tests' RK4 (dt = 0.01, on the attractor)
    U = lorenz_rk4(14000)
    np.save(tmp_path / "u.npy", U)
    env = dict(os.environ)
    env.pop("JAX_ENABLE_X64", None)
    # the float32 model (x64 off) in a subprocess, while this process runs
    # the float64 baseline
    proc = subprocess.Popen(
        [sys.executable, "-c", _X64_OFF, str(tmp_path / "u.npy")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        namespace = {}
        exec(_VPTS, namespace)
        v64, wout64 = namespace["vpts"](U, jnp.float64)
    finally:
        stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    out = {"1": {"vpt": v64, "wout": wout64}}
    out["0"] = json.loads(stdout.strip().splitlines()[-1])
    assert jax.config.jax_enable_x64 and wout64 == "float64"
    assert out["0"]["x64"] is False and out["0"]["wout"] == "float32"
    v64, v32 = np.mean(out["1"]["vpt"]), np.mean(out["0"]["vpt"])
    assert v64 > 3.0, out  # a working float64 baseline
    assert v32 >= 0.9 * v64, out


def test_float64_without_x64_warns_at_the_callers_line():
    """Asking for float64 with x64 off builds float32 and warns, attributed
    to the line that built the model or component (not to orc's code),
    whichever constructor it passes through."""
    import warnings

    builders = [
        lambda: orc.forecaster.ESNForecaster(3, 10),
        lambda: orc.classifier.ESNClassifier(3, 2, 10),
        lambda: orc.drivers.ESNDriver(10, seed=0),
        lambda: orc.readouts.LinearReadout(3, 10),
    ]
    with jax.enable_x64(False):
        for build in builders:
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                built = build()
            ours = [w for w in record if "jax_enable_x64 is off" in str(w.message)]
            assert len(ours) == 1, [str(w.message) for w in record]
            assert ours[0].filename == __file__, ours[0].filename
            assert built.dtype == jnp.float32
