"""Parity of ``orc.utils.regressions`` / ``orc.utils.numerics`` with ORC 0.4.

``tests/data/orc04_utils/fixtures.npz`` holds the outputs of ORC 0.4's own
helpers on small seeded inputs (written by ``make_fixtures.py`` next to it, in
a separate environment with ``openreservoircomputing==0.4.0``); ORC is not
needed here.

Tolerances. Both implementations solve the same normal equations
``(X^T X + beta I) W^T = X^T Y`` with backward-stable factorisations (ORC: a
symmetric LU solve, ours: Cholesky), so they differ by at most about
``cond * F * eps``; the fixture's systems have ``cond < 10`` (asserted below),
i.e. ~1e-14 in float64 (3e-16 measured). ``rtol = 1e-9`` leaves room for other
BLAS summation orders and is still fine enough to tell ``beta = 1e-7`` from
``beta = 0`` (checked below), so a dropped or rescaled regularisation, a
transposed or permuted result would fail. The Arnoldi outputs (modified
Gram–Schmidt in ORC, twice-applied classical Gram–Schmidt here) agree to
rounding for these short, well-conditioned Krylov runs (1e-15 measured).
float32 results are compared at ``rtol = 1e-5`` (float32 eps 6e-8 times the
same small condition numbers and sums of 50 terms).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import jax
import numpy as np
import pytest

from _helpers import count_compiles
from orc.utils import numerics, regressions
from orc.utils.numerics import _arnoldi_iteration, max_eig_arnoldi
from orc.utils.regressions import (
    _solve_all_ridge_reg,
    _solve_all_ridge_reg_batched,
    ridge_regression,
)

FIXTURES = np.load(Path(__file__).parent / "data" / "orc04_utils" / "fixtures.npz")
RTOL, RTOL32 = 1e-9, 1e-5

# The inputs are JAX arrays, as ORC's callers pass them, put on the device
# from numpy (jnp.asarray, eager slicing, astype and stacking would each be a
# program of their own); the slices and casts the tests take are made here.
_X = FIXTURES["x_int"] / 1000.0  # (50, 3, 8)
_Y = FIXTURES["y_int"] / 1000.0  # (50, 3, 2)
_A = FIXTURES["a_int"] / 4000.0  # (20, 20)
X, Y, A = jax.device_put((_X, _Y, _A))
XC = [jax.device_put(_X[:, c]) for c in range(_X.shape[1])]  # X[:, c]
YC = [jax.device_put(_Y[:, c]) for c in range(_Y.shape[1])]  # Y[:, c]
X32, Y32, A32 = jax.device_put(
    (_X.astype(np.float32), _Y.astype(np.float32), _A.astype(np.float32))
)
BETAS = [float(b) for b in FIXTURES["betas"]]
ARNOLDI = [(int(k), int(s)) for k, s in FIXTURES["arnoldi"]]
K0, SEED0 = ARNOLDI[0]


def _close(ours, ref, rtol=RTOL):
    """Same shape and dtype, and values within ``rtol`` of the largest entry."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.shape == ref.shape
    assert ours.dtype == ref.dtype
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol * np.max(np.abs(ref)))


def _signature(fn) -> str:
    return ",".join(
        p.name if p.default is p.empty else f"{p.name}={p.default!r}"
        for p in inspect.signature(fn).parameters.values()
    )


def test_every_orc_helper_exists_with_orc_signature():
    modules = (regressions, numerics)
    for entry in FIXTURES["signatures"]:
        name, sig = str(entry)[:-1].split("(", 1)
        fn = next(getattr(m, name) for m in modules if hasattr(m, name))
        assert _signature(fn) == sig, name


def test_fixture_systems_are_well_conditioned():
    # the premise of RTOL (see the module docstring)
    for c in range(X.shape[1]):
        x = _X[:, c]
        assert np.linalg.cond(x.T @ x) < 10


# ----------------------------------------------------------------- regressions


def test_ridge_regression():
    _close(ridge_regression(XC[0], YC[0], 1e-2), FIXTURES["ridge_chunk0"])


@pytest.mark.parametrize("i", range(len(BETAS)))
def test_solve_all_ridge_reg(i):
    _close(_solve_all_ridge_reg(X, Y, BETAS[i]), FIXTURES["all"][i])


def test_solve_all_ridge_reg_default_beta_and_keywords():
    assert BETAS[0] == 1e-7  # the default
    _close(_solve_all_ridge_reg(X, Y), FIXTURES["all"][0])
    _close(_solve_all_ridge_reg(res_seq=X, target_seq=Y, beta=1e-7), FIXTURES["all"][0])
    # the tolerance resolves the default regularisation
    unregularised = np.asarray(_solve_all_ridge_reg(X, Y, 0.0))
    ref = FIXTURES["all"][0]
    assert np.max(np.abs(unregularised - ref)) > 4 * RTOL * np.max(np.abs(ref))


def test_solve_all_ridge_reg_float32():
    w = _solve_all_ridge_reg(X32, Y32, 1e-2)
    _close(w, FIXTURES["all_f32"], RTOL32)


def test_solve_all_ridge_reg_is_per_chunk_ridge_regression():
    w = np.asarray(_solve_all_ridge_reg(X, Y, 1e-2))
    for c in range(X.shape[1]):
        _close(w[c], ridge_regression(XC[c], YC[c], 1e-2))


@pytest.mark.parametrize("i", range(len(FIXTURES["batches"])))
def test_solve_all_ridge_reg_batched(i):
    bs = int(FIXTURES["batches"][i])
    _close(_solve_all_ridge_reg_batched(X, Y, 1e-2, bs), FIXTURES["batched"][i])


@pytest.mark.parametrize("bs", [3, 4, 100])
def test_solve_all_ridge_reg_batched_at_or_above_chunks(bs):
    # the batched and unbatched fits come out equal in ORC (index 1: beta 1e-2)
    _close(FIXTURES["batched"][0], FIXTURES["all"][1])
    _close(_solve_all_ridge_reg_batched(X, Y, 1e-2, bs), FIXTURES["all"][1])


def test_a_regression_is_one_program_per_shape_for_every_beta():
    """Called eagerly, as ORC's users call them, a helper's fit compiles one
    program per shape: a new ``beta`` is an argument of it, not a constant
    that compiles it again (6 programs per value before), and the weights
    are still the per-beta reference's."""
    _solve_all_ridge_reg(X, Y, BETAS[0])  # the shape's program
    with count_compiles() as c:
        for i in range(1, len(BETAS)):
            _close(_solve_all_ridge_reg(X, Y, BETAS[i]), FIXTURES["all"][i])
    assert c["compiles"] == 0, c


def test_regressions_under_jit_and_vmap():
    ref = FIXTURES["all"][1]
    _close(jax.jit(_solve_all_ridge_reg)(X, Y, 1e-2), ref)
    batched = jax.jit(_solve_all_ridge_reg_batched, static_argnames="batch_size")
    _close(batched(X, Y, 1e-2, batch_size=2), ref)
    # the vmaps run under jax.jit (one program each; eagerly, one per
    # operation)
    stacked = jax.device_put((np.stack([_X, 2 * _X]), np.stack([_Y, 2 * _Y])))
    w = jax.jit(jax.vmap(_solve_all_ridge_reg, in_axes=(0, 0, None)))(*stacked, 1e-2)
    _close(np.asarray(w)[0], ref)
    wb = jax.jit(jax.vmap(lambda x, y: _solve_all_ridge_reg_batched(x, y, 1e-2, 2)))(
        *stacked
    )
    _close(wb, w)
    # beyond ORC, whose filter_vmap tries to map a traced or array beta:
    # beta may be an array, traced, or vmapped over
    wbeta = jax.jit(jax.vmap(_solve_all_ridge_reg, in_axes=(None, None, 0)))(
        X, Y, jax.device_put(np.asarray(BETAS))
    )
    _close(wbeta, FIXTURES["all"])


def test_regressions_reject_bad_input():
    y2 = jax.device_put(_Y[:, :2])  # two of the three chunks
    with pytest.raises(ValueError, match="3-D"):
        _solve_all_ridge_reg(XC[0], YC[0])
    with pytest.raises(ValueError, match="same number of rows and chunks"):
        _solve_all_ridge_reg(X, y2)
    with pytest.raises(ValueError, match="same number of rows and chunks"):
        _solve_all_ridge_reg_batched(X, y2, 1e-2, 2)
    for bs in (0, -1):
        with pytest.raises(ValueError, match="batch_size"):
            _solve_all_ridge_reg_batched(X, Y, 1e-2, bs)


# -------------------------------------------------------------------- numerics


def test_arnoldi_iteration():
    q, h = _arnoldi_iteration(A, K0, SEED0)
    _close(q, FIXTURES["arnoldi_q"])
    _close(h, FIXTURES["arnoldi_h"])


def test_arnoldi_iteration_float32():
    q, h = _arnoldi_iteration(A32, K0, SEED0)
    assert q.dtype == str(FIXTURES["arnoldi_q_f32_dtype"])
    assert q.shape == FIXTURES["arnoldi_q"].shape
    _close(h, FIXTURES["arnoldi_h_f32"], RTOL32)


@pytest.mark.parametrize("i", range(len(ARNOLDI)))
def test_max_eig_arnoldi(i):
    k, seed = ARNOLDI[i]
    _close(max_eig_arnoldi(A, k, seed), FIXTURES["max_eig"][i])


def test_max_eig_arnoldi_defaults_and_float32():
    # max_iters=200 > n: ours stops at n (the exact eigenvalue); ORC runs on
    # past n, on rounding noise, which here still gave the right value
    _close(max_eig_arnoldi(A), FIXTURES["max_eig_default"])
    lam = max_eig_arnoldi(A32, 6, 0)
    _close(lam, FIXTURES["max_eig_f32"], RTOL32)


def test_numerics_under_jit_and_vmap():
    arn = jax.jit(_arnoldi_iteration, static_argnames="max_iters")
    # a traced seed, as ORC
    q, h = arn(A, max_iters=K0, seed=jax.device_put(np.asarray(SEED0)))
    _close(q, FIXTURES["arnoldi_q"])
    _close(h, FIXTURES["arnoldi_h"])
    eig = jax.jit(max_eig_arnoldi, static_argnames="max_iters")
    for i, (k, seed) in enumerate(ARNOLDI):
        _close(eig(A, k, jax.device_put(np.asarray(seed))), FIXTURES["max_eig"][i])
    # the vmaps under jax.jit, as above
    stack = jax.device_put(np.stack([_A, 2 * _A]))
    qs, hs = jax.jit(jax.vmap(lambda a: _arnoldi_iteration(a, K0, SEED0)))(stack)
    _close(np.asarray(qs)[0], FIXTURES["arnoldi_q"])
    _close(np.asarray(hs)[1], 2 * FIXTURES["arnoldi_h"])
    lams = jax.jit(jax.vmap(lambda a: max_eig_arnoldi(a, K0, SEED0)))(stack)
    _close(lams, np.array([1, 2]) * FIXTURES["max_eig"][0])


def test_arnoldi_iteration_past_the_matrix_size():
    # ORC fills the columns past n from rounding noise (NaN when it is exactly
    # zero); ours keeps ORC's shapes and pads them with zeros, so H is Q^T A Q
    # and its eigenvalues are A's, plus zeros.
    a = jax.device_put(_A[:8, :8])
    q, h = _arnoldi_iteration(a, 12)
    q, h = np.asarray(q), np.asarray(h)  # checked in numpy
    assert q.shape == (8, 12) and h.shape == (12, 12)
    assert not np.any(q[:, 8:]) and not np.any(h[8:]) and not np.any(h[:, 8:])
    np.testing.assert_allclose(q[:, :8].T @ q[:, :8], np.eye(8), atol=1e-13)
    np.testing.assert_allclose(q.T @ _A[:8, :8] @ q, h, atol=1e-13)
    eigs = np.linalg.eigvals(_A[:8, :8])
    lam = max_eig_arnoldi(a, 12)
    np.testing.assert_allclose(abs(lam), np.max(np.abs(eigs)), rtol=1e-12)
    # breakdown (the start vector spans an invariant subspace) also pads zeros
    q, h = _arnoldi_iteration(jax.device_put(np.eye(5)), 3)
    np.testing.assert_allclose(h, np.diag([1.0, 0.0, 0.0]), atol=1e-15)
    assert not np.any(np.asarray(q)[:, 1:])


def test_numerics_reject_bad_input():
    with pytest.raises(ValueError, match="square"):
        _arnoldi_iteration(jax.device_put(np.ones((3, 4))), 2)
    with pytest.raises(ValueError, match="max_iters"):
        _arnoldi_iteration(A, 0)
    with pytest.raises(TypeError, match="real"):
        max_eig_arnoldi(jax.device_put(_A.astype(np.complex128)))
