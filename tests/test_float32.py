"""float32 models train with float64 accuracy (issue 19, item 2).

With x64 on, a float32 fit accumulates and solves in float64; with x64 off
its statistics are kept in QR form (``orc._ridge``). Both are checked against
a float64 numpy solution of the same float32 features; a float32 Lorenz63
forecaster with x64 off (a subprocess) must keep >= 90% of the float64
model's valid prediction time, where float32 normal equations lose most of it.
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
from _helpers import assert_fallback_solution
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
    z = jnp.float32
    return _ridge.RidgeStats(
        jnp.zeros(lead + (f, f), z),
        jnp.zeros(lead + (f, o), z),
        jnp.zeros((), z),
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
    # in blocks, in one call, and as the sum of two halves' statistics
    s = _qr_stats(30, 3)
    blocks = _update(_update(s, X, Y, 0, 150), X, Y, 150, 400)
    whole = _update(s, X, Y)
    halves = _add(_update(s, X[:150], Y[:150]), _update(s, X[150:], Y[150:]))
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
    # a collinear, unpenalised fit falls back to the minimum-norm solution
    Xs = np.concatenate([X, X[:, 1:2]], 1)
    Ws, result = _fit_with_result(_qr_stats(13, 3), Xs, Y, 0.0)
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


_LORENZ = r"""
import json, sys, warnings
import numpy as np
import jax, jax.numpy as jnp
x64 = sys.argv[1] == "1"
jax.config.update("jax_enable_x64", x64)
import orc
from orc.forecaster import ESNForecaster, train_RCForecaster
U = np.load(sys.argv[2]); dtype = jnp.float64 if x64 else jnp.float32
n_train, warm, hor = 6000, 200, 1200
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    m = ESNForecaster(3, res_dim=200, seed=0, dtype=dtype)
    m, _ = train_RCForecaster(m, jnp.asarray(U[:n_train], dtype), spinup=200)
scale = float(np.sqrt(np.mean(np.sum(U[n_train:] ** 2, 1))))
v = []
for w in range(5):
    s = n_train + warm + w * (warm + hor)
    p = np.asarray(m.forecast_from_IC(hor, jnp.asarray(U[s - warm:s], dtype)), np.float64)
    v.append(float(orc.metrics.valid_prediction_time(p, U[s:s + hor], 0.4, 0.01, 0.906, scale=scale)))
print(json.dumps({"vpt": v, "wout": str(m.readout.wout.dtype), "x64": jax.config.jax_enable_x64}))
"""


def test_float32_lorenz63_forecaster_with_x64_off_keeps_its_vpt(tmp_path):
    U = np.asarray(orc.data.lorenz63(tN=150, dt=0.01)[0])[1000:]
    np.save(tmp_path / "u.npy", U)
    env = dict(os.environ)
    env.pop("JAX_ENABLE_X64", None)
    out = {}
    for x64 in ("1", "0"):
        proc = subprocess.run(
            [sys.executable, "-c", _LORENZ, x64, str(tmp_path / "u.npy")],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[x64] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["0"]["x64"] is False and out["0"]["wout"] == "float32"
    v64, v32 = np.mean(out["1"]["vpt"]), np.mean(out["0"]["vpt"])
    assert v64 > 3.0, out  # a working float64 baseline
    assert v32 >= 0.9 * v64, out
