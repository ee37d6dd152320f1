"""The ridge solve's fallback off CPU needs no eigen-solver workspace.

On a GPU, a branch of ``lax.cond`` reserves its memory whether it is taken or
not: an eigen-decomposition fallback made every training program reserve
cuSOLVER's ``syevd`` workspace and eigenvector matrix (N=32000 then failed
to train on an 80 GB H100 with "Unable to allocate device workspace for
syevBatched"). Off CPU the fallback is a shifted Cholesky solve (normal
equations) or one more QR fold (QR form, float32 without x64). These tests
check the programs lowered for CUDA (lowering needs no GPU) and the two
fallbacks' numbers against numpy.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from orc import _ridge, _strategy
from orc._ridge import RidgeStats, stats_update

# The fallbacks run inside the training programs: here too they run compiled,
# one program per function and shape (eagerly, every operation would be a
# program of its own)
_shift_for = jax.jit(_ridge._shift_for)
_shifted_solve = jax.jit(_ridge._shifted_solve)
_qr_shifted_solve = jax.jit(_ridge._qr_shifted_solve)


def _cuda_custom_calls(fn, *args) -> set[str]:
    with _strategy.lowering_for("any"):  # traced here for a GPU
        exported = jax.export.export(jax.jit(fn), platforms=["cuda"])(*args)
    return set(re.findall(r"custom_call @([A-Za-z0-9_]+)", exported.mlir_module()))


@pytest.mark.parametrize("backend", ["native", "xla"])
def test_cuda_solve_has_no_eigen_solver(backend):
    g = jnp.asarray(np.eye(30) + 0.1)  # from numpy: no eager programs
    c = jnp.asarray(np.ones((30, 2)))
    with _strategy.use_backend(backend):
        calls = _cuda_custom_calls(lambda g, c: _ridge._solve_one(g, c, 1e-6), g, c)
        grad_calls = _cuda_custom_calls(
            jax.grad(lambda g, c: _ridge._solve_one(g, c, 1e-6)[0].sum()), g, c
        )
    assert "cusolver_potrf_ffi" in calls  # the Cholesky solve is there
    for found in (calls, grad_calls):
        assert not [c for c in found if "syev" in c or "gesv" in c], found


def test_cuda_qr_form_solve_has_no_svd():
    x = np.random.default_rng(0).standard_normal((60, 12)).astype(np.float32)
    stats = RidgeStats(
        jnp.asarray(np.zeros((12, 12), np.float32)),
        jnp.asarray(np.zeros((12, 2), np.float32)),
        jnp.asarray(np.zeros((), np.float32)),
        form="qr",
    )
    # the lowering needs the statistics' shapes only: traced, not run
    stats = jax.eval_shape(stats_update, stats, x, x[:, :2])
    calls = _cuda_custom_calls(lambda s: _ridge.solve_with_result(s, 0.0)[0], stats)
    assert "cusolver_geqrf_ffi" in calls
    assert not [c for c in calls if "gesv" in c or "syev" in c], calls


def _rank_deficient(seed=0, rows=80, n=20, rank=10):
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((rows, rank)) @ rng.standard_normal((rank, n))
    y = rng.standard_normal((rows, 3))
    return f, y


def test_shift_grows_until_the_factorisation_succeeds():
    n = 20
    eps = np.finfo(np.float64).eps
    base = np.diag(np.linspace(1.0, 2.0, n))
    delta0 = n * eps * 2.0
    # positive definite: the first (smallest) shift
    assert float(_shift_for(jnp.asarray(base))) == pytest.approx(delta0)
    # an eigenvalue of -5 delta0 needs a shift above 5 delta0: 100 delta0
    bent = base.copy()
    bent[3, 3] = -5 * delta0
    shift = float(_shift_for(jnp.asarray(bent)))
    assert shift == pytest.approx(delta0 * _ridge.SHIFT_GROWTH)
    # indefinite at the matrix's own scale: no tried shift works -> NaN
    bent[3, 3] = -1.0
    assert np.isnan(float(_shift_for(jnp.asarray(bent))))


def test_shifted_solve_against_numpy():
    # rank 10 of 24 features and no ridge: G is singular and its Cholesky
    # fails; the shifted solve must give the minimum-norm solution's fit
    f, y = _rank_deficient()
    gram, cross = f.T @ f, f.T @ y
    x = np.asarray(_shifted_solve(jnp.asarray(np.triu(gram)), jnp.asarray(cross), 0.0))
    delta = float(_shift_for(jnp.asarray(gram)))
    assert np.all(np.isfinite(x)) and 0 < delta < 1e-9 * np.abs(gram).max()
    # it solves the shifted system (backward error at rounding level) ...
    resid = (gram + delta * np.eye(len(gram))) @ x - cross
    assert np.linalg.norm(resid) <= 1e-12 * np.linalg.norm(cross)
    # ... whose fit is the minimum-norm fit, with about its norm
    pinv = np.linalg.pinv(f) @ y
    np.testing.assert_allclose(f @ x, f @ pinv, rtol=1e-9, atol=1e-9)
    assert np.linalg.norm(x) == pytest.approx(np.linalg.norm(pinv), rel=1e-2)


def test_shifted_solve_derivatives_hold_the_shift():
    # an eigenvalue of -1e-3 (at scale 2): the shift found is ~9e-3, and the
    # shifted system is well conditioned, so derivatives compare tightly
    n = 20
    lhs = np.diag(np.linspace(1.0, 2.0, n))
    lhs[4, 4] = -1e-3
    rng = np.random.default_rng(3)
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    gram = q @ lhs @ q.T
    gram = (gram + gram.T) / 2
    cross = rng.standard_normal((n, 2))
    delta = float(_shift_for(jnp.asarray(gram)))
    assert 1e-3 < delta < 1e-1
    a = gram + delta * np.eye(n)
    x = np.linalg.solve(a, cross)

    def loss(c, beta):
        return jnp.sum(_shifted_solve(jnp.asarray(gram), c, beta) ** 2)

    dc, dbeta = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(cross), 0.0)
    # d/dc |A^-1 c|^2 = 2 A^-1 x; d/dbeta = -2 x . A^-1 x (the shift held)
    np.testing.assert_allclose(dc, 2 * np.linalg.solve(a, x), rtol=1e-8)
    np.testing.assert_allclose(dbeta, -2 * np.sum(x * np.linalg.solve(a, x)), rtol=1e-8)


def test_qr_shifted_solve_against_numpy():
    rng = np.random.default_rng(2)
    f = rng.standard_normal((50, 4)) @ rng.standard_normal((4, 9))
    y = rng.standard_normal((50, 2))
    r = np.linalg.qr(f, mode="r")
    z = np.linalg.qr(f)[0].T @ y
    tiny = 1e-6
    x = np.asarray(_qr_shifted_solve(jnp.asarray(r), jnp.asarray(z), tiny))
    stacked = np.vstack([r, tiny * np.eye(9)])
    expect = np.linalg.lstsq(stacked, np.vstack([z, np.zeros((9, 2))]))[0]
    np.testing.assert_allclose(x, expect, rtol=1e-6, atol=1e-9)
