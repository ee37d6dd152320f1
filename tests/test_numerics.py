"""Numerical checks of the building blocks against independent references."""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

from _helpers import assert_fallback_solution
from orc import drivers, embeddings, readouts
from orc._matrix import distinct_columns, nonzeros_per_row
from orc._ridge import RidgeStats, sequence_stats, solve, stats_update, symmetric
from orc._training import fit_readout, teacher_forced_statistics
from orc.utils import max_eig_arnoldi
from orc.utils.regressions import ridge_regression


def _np_ridge(X, Y, beta):
    """Reference: least squares on the augmented system [X; sqrt(beta) I] W^T = [Y; 0]."""
    n = X.shape[1]
    Xa = np.vstack([X, np.sqrt(beta) * np.eye(n)])
    Ya = np.vstack([Y, np.zeros((n, Y.shape[1]))])
    return np.linalg.lstsq(Xa, Ya, rcond=None)[0].T


RNG = np.random.default_rng(0)


def test_ridge_regression_matches_numpy():
    X = RNG.standard_normal((300, 40))
    Y = X @ RNG.standard_normal((40, 3)) + 0.1 * RNG.standard_normal((300, 3))
    for beta in (0.0, 1e-3, 10.0):
        W = ridge_regression(jnp.asarray(X), jnp.asarray(Y), beta)
        np.testing.assert_allclose(W, _np_ridge(X, Y, beta), rtol=1e-8, atol=1e-10)


def test_ridge_fallback_on_singular_gram():
    # rank-deficient features with beta=0: Cholesky fails, the fallback
    # returns the minimum-norm least-squares solution (numpy's pinv) on CPU
    base = RNG.standard_normal((200, 5))
    X = np.hstack([base, base[:, :2]])  # 7 columns, rank 5
    Y = RNG.standard_normal((200, 2))
    W = ridge_regression(jnp.asarray(X), jnp.asarray(Y), 0.0)
    assert_fallback_solution(W, X, (np.linalg.pinv(X) @ Y).T, atol=1e-8)


@functools.partial(jax.jit, static_argnames=("start", "block_size"))
def _stream(X, Y, start=0, block_size=None):
    # one compiled program per call site (eager, every operation compiles)
    return sequence_stats(
        X, Y, lambda x: x, lambda y: y, start=start, block_size=block_size
    )


def test_streamed_blocks_equal_one_shot():
    X = RNG.standard_normal((1037, 30))
    Y = RNG.standard_normal((1037, 4))
    # (the update and the sum under jax.jit, the checks in numpy: eager, every
    # operation compiled a program of its own)
    one = jax.jit(stats_update)(RidgeStats.zeros(30, 4, None, jnp.float64), X, Y)
    one_gram = np.triu(np.asarray(one.gram))
    # one row a block, blocks with a tail (a block of 100 showed nothing a
    # block of 64 does not), the whole sequence, a block longer than it
    for block in (1, 64, 1037, 5000):
        s = _stream(X, Y, block_size=block)
        # the statistics keep the upper triangle of the Gram up to date
        np.testing.assert_allclose(
            np.triu(np.asarray(s.gram)), one_gram, rtol=1e-10, atol=1e-9
        )
        np.testing.assert_allclose(s.cross, one.cross, rtol=1e-10, atol=1e-9)
        assert int(s.count) == 1037
    # start offset = discarding rows
    s = _stream(X, Y, start=37)
    np.testing.assert_allclose(
        jax.jit(symmetric)(s.gram), X[37:].T @ X[37:], rtol=1e-10, atol=1e-9
    )
    # statistics of two halves add up to the whole
    a = _stream(X[:500], Y[:500])
    b = _stream(X[500:], Y[500:])
    total = jax.jit(lambda a, b: a + b)(a, b)
    np.testing.assert_allclose(
        np.triu(np.asarray(total.gram)), one_gram, rtol=1e-10, atol=1e-9
    )


def test_chunked_and_multi_sequence_fit_match_numpy():
    T, C, N, O = 400, 3, 25, 2
    states = RNG.standard_normal((T, C, N))
    targets = RNG.standard_normal((T, C * O))
    ro = readouts.ParallelLinearReadout(C * O, N, chunks=C)
    # each fit one program (eager, every operation of it compiled a program)
    fit = eqx.filter_jit(fit_readout)
    fitted = fit(ro, states, targets, 1e-2, spinup=10)
    for c in range(C):
        ref = _np_ridge(states[10:, c], targets[10:, c * O : (c + 1) * O], 1e-2)
        np.testing.assert_allclose(fitted.wout[c], ref, rtol=1e-8, atol=1e-10)
    # quadratic features: odd nodes squared, per chunk
    qro = readouts.ParallelQuadraticReadout(C * O, N, chunks=C)
    qfit = fit(qro, states, targets, 1e-2)
    feats = states.copy()
    feats[..., 1::2] **= 2
    ref = _np_ridge(feats[:, 1], targets[:, O : 2 * O], 1e-2)
    np.testing.assert_allclose(qfit.wout[1], ref, rtol=1e-8, atol=1e-10)
    # multi-sequence: the same as fitting the concatenation of the trimmed sequences
    # (through the teacher-forcing engine, with a "reservoir" that returns its input)
    multi_states = RNG.standard_normal((3, 150, N))
    multi_targets = RNG.standard_normal((3, 150, O))
    lro = readouts.LinearReadout(O, N)

    @eqx.filter_jit
    def multi_fit(lro, multi_states, multi_targets):
        mstats, _ = teacher_forced_statistics(
            lro,
            lambda u, r: u,
            multi_states,
            multi_targets,
            jnp.zeros((3, N)),
            spinup=20,
            multi_sequence=True,
            keep_states=False,
            block_size=64,
        )
        return lro.set_wout(solve(mstats, jnp.asarray(1e-3, mstats.gram.dtype)))

    mfit = multi_fit(lro, multi_states, multi_targets)
    X = multi_states[:, 20:].reshape(-1, N)
    Y = multi_targets[:, 20:].reshape(-1, O)
    np.testing.assert_allclose(
        mfit.wout[0], _np_ridge(X, Y, 1e-3), rtol=1e-8, atol=1e-10
    )


def test_a_force_that_breaks_the_state_contract_is_named():
    # The engine takes the states' shape and dtype from the start state (it
    # does not trace the model's force for them): a force that returns other
    # rows is refused at trace time, saying what was expected.
    N, O = 6, 2
    lro = readouts.LinearReadout(O, N)
    u = jnp.asarray(RNG.standard_normal((40, N)))
    y = jnp.asarray(RNG.standard_normal((40, O)))
    wrong_dtype = lambda u, r: u.astype(jnp.float32)  # noqa: E731
    wrong_shape = lambda u, r: u[:, :3]  # noqa: E731
    for force in (wrong_dtype, wrong_shape):
        with pytest.raises(
            TypeError, match=r"force must return the states \(40, 6\) float64"
        ):
            teacher_forced_statistics(lro, force, u, y, jnp.zeros(N), keep_states=False)


def test_stored_run_forces_every_block_at_one_size():
    # T = 1037 rows in blocks of 100: the last 37 rows are forced as one more
    # block of 100 that ends at the last row (its first 63 rows again, from
    # the stored state before them), so the model's force is traced at one
    # block size only and a training program holds one copy of it. The
    # states and the fit are those of one run over the whole sequence.
    from orc._training import teacher_forced_stats

    T, N, O = 1037, 12, 2
    W = jnp.asarray(0.9 * RNG.standard_normal((N, N)) / math.sqrt(N))
    Win = jnp.asarray(RNG.standard_normal((N, 1)))
    u = jnp.asarray(RNG.standard_normal((T, 1)))
    y = jnp.asarray(RNG.standard_normal((T, O)))

    def step(r, x):
        r = 0.5 * r + 0.5 * jnp.tanh(W @ r + Win @ x)
        return r, r

    sizes = []

    def force(ub, r):
        sizes.append(ub.shape[0])
        return jax.lax.scan(step, r, ub)[1]

    ro = readouts.LinearReadout(O, N)
    stats, last, history = jax.jit(
        lambda u, y: teacher_forced_stats(
            ro, force, u, y, jnp.zeros(N), spinup=5, block_size=100
        )
    )(u, y)
    assert set(sizes) <= {2, 100}, sizes  # (2: the shape probe)
    reference = jax.jit(lambda u: jax.lax.scan(step, jnp.zeros(N), u)[1])(u)
    # the checks in numpy (eager, every slice compiled a program of its own)
    reference = np.asarray(reference)
    np.testing.assert_allclose(history, reference, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(last, reference[-1], rtol=1e-12, atol=1e-13)
    X, Y = reference[5:], np.asarray(y)[5:]
    # (a bank of one) the statistics keep the Gram's upper triangle
    gram, cross = np.asarray(stats.gram)[0], np.asarray(stats.cross)[0]
    np.testing.assert_allclose(np.triu(gram), np.triu(X.T @ X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(cross, X.T @ Y, rtol=1e-10, atol=1e-10)


def test_solve_raises_on_nonfinite():
    stats = RidgeStats.zeros(3, 1, None, jnp.float64)
    bad = RidgeStats(stats.gram.at[0, 0].set(jnp.nan), stats.cross, stats.count)
    with pytest.raises(Exception, match="NaN"):
        jax.block_until_ready(solve(bad, 1e-3))


# ------------------------------------------------------------------ reservoirs


def test_distinct_columns_are_distinct_and_uniform():
    rng = np.random.default_rng(1)
    cols = distinct_columns(rng, 20000, 10, 4)
    assert all(len(set(row)) == 4 for row in cols[:500])
    counts = np.bincount(cols.ravel(), minlength=10) / cols.size
    np.testing.assert_allclose(counts, 0.1, atol=0.005)  # each column equally likely


# Arnoldi below and above its Krylov dimension (200), and the dense
# eigenvalues (exact at every size: one size)
@pytest.mark.parametrize("n, use_sparse_eigs", [(50, True), (300, True), (50, False)])
def test_spectral_radius_hits_target(n, use_sparse_eigs):
    d = drivers.ParallelESNDriver(
        n,
        spectral_radius=0.7,
        density=0.05,
        chunks=2,
        seed=3,
        use_sparse_eigs=use_sparse_eigs,
    )
    values, columns = np.asarray(d.wr.values), np.asarray(d.wr.columns)
    for c in range(2):
        W = np.zeros((n, n))  # dense, in numpy
        np.add.at(W, (np.arange(n)[:, None], columns[c]), values[c])
        rho = np.max(np.abs(np.linalg.eigvals(W)))
        np.testing.assert_allclose(rho, 0.7, rtol=1e-6)
        assert (np.count_nonzero(W, axis=1) == nonzeros_per_row(n, 0.05)).all()


def test_max_eig_arnoldi_inputs():
    A = np.diag(np.arange(1.0, 6.0)) + np.triu(RNG.standard_normal((5, 5)), 1)
    lam = max_eig_arnoldi(jnp.asarray(A))
    np.testing.assert_allclose(abs(lam), 5.0, rtol=1e-10)
    lam_sp = max_eig_arnoldi(sparse.BCOO.fromdense(jnp.asarray(A)))
    np.testing.assert_allclose(abs(lam_sp), 5.0, rtol=1e-10)
    lam_jit = jax.jit(max_eig_arnoldi)(jnp.asarray(A))
    np.testing.assert_allclose(abs(lam_jit), 5.0, rtol=1e-10)


def test_esn_update_matches_numpy():
    d = drivers.ESNDriver(30, leak=0.3, bias=0.5, seed=0)
    W = np.asarray(d.wr.todense())[0]  # the bank of one
    r = RNG.standard_normal(30) * 0.5
    p = RNG.standard_normal(30) * 0.5
    expected = 0.7 * r + 0.3 * np.tanh(W @ r + p + 0.5)
    np.testing.assert_allclose(
        d.advance(jnp.asarray(p), jnp.asarray(r)), expected, rtol=1e-10, atol=1e-9
    )
    dc = drivers.ESNDriver(30, bias=0.5, mode="continuous", time_const=4.0, seed=0)
    expected = 4.0 * (np.tanh(W @ r + p + 0.5) - r)
    np.testing.assert_allclose(
        dc.advance(jnp.asarray(p), jnp.asarray(r)), expected, rtol=1e-10, atol=1e-9
    )


@pytest.mark.parametrize("n_terms", [0, 1, 2, 3, 4, 5])
def test_taylor_driver_is_the_taylor_polynomial(n_terms):
    d = drivers.TaylorDriver(n_terms, 30, bias=0.4, seed=0)
    r = jnp.asarray(RNG.standard_normal(30) * 0.3)
    p = jnp.asarray(RNG.standard_normal(30) * 0.3)
    z = (d.wr @ r)[0] + p  # the bank of one
    # reference: the derivatives of tanh at the bias, in numpy: with t =
    # tanh(x), d/dx P(t) = P'(t) (1 - t^2), from P_0(t) = t
    t = math.tanh(0.4)
    poly, coeffs = np.polynomial.Polynomial([0.0, 1.0]), []
    for n in range(n_terms + 1):
        coeffs.append(poly(t) / math.factorial(n))
        poly = poly.deriv() * np.polynomial.Polynomial([1.0, 0.0, -1.0])
    z = np.asarray(z)
    expected = sum(c * z**n for n, c in enumerate(coeffs))
    np.testing.assert_allclose(d.advance(p, r), expected, rtol=1e-10, atol=1e-12)
    # the error to the exact update shrinks like |z|^(n_terms+1)
    small = 1e-2
    exact = d.advance_full(small * p, small * r)
    approx = d.advance(small * p, small * r)
    error = np.max(np.abs(np.asarray(exact) - np.asarray(approx)))
    assert error < 10 * small ** (n_terms + 1)


def test_local_embedding_windows():
    u = jnp.arange(8.0)
    per = embeddings.ParallelLinearEmbedding(8, 5, 0.1, chunks=4, locality=1, seed=0)
    np.testing.assert_array_equal(
        per.localize(u), [[7, 0, 1, 2], [1, 2, 3, 4], [3, 4, 5, 6], [5, 6, 7, 0]]
    )
    edge = embeddings.ParallelLinearEmbedding(
        8, 5, 0.1, chunks=4, locality=2, periodic=False, seed=0
    )
    # non-periodic: each edge is extended with its own boundary value
    np.testing.assert_array_equal(edge.localize(u)[0], [0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(edge.localize(u)[-1], [4, 5, 6, 7, 7, 7])
    W = np.asarray(per.win)
    expected = np.stack([W[c] @ np.asarray(per.localize(u))[c] for c in range(4)])
    np.testing.assert_allclose(per.embed(u), expected, rtol=1e-10, atol=1e-9)
    assert np.max(np.abs(np.asarray(per.win))) <= 0.1
    ens = embeddings.EnsembleLinearEmbedding(8, 5, 0.1, chunks=3, seed=0)
    np.testing.assert_allclose(ens.embed(u)[2], np.asarray(ens.win[2]) @ np.arange(8.0))


def test_readout_feature_maps_and_ensemble_mean():
    r = jnp.asarray(RNG.standard_normal(12))
    nl = readouts.NonlinearReadout(2, 12, [jnp.sin, jnp.square])
    f = np.asarray(r).copy()
    f[1::3] = np.sin(f[1::3])
    f[2::3] = f[2::3] ** 2
    np.testing.assert_allclose(nl.nonlinear_transform(r), f, rtol=1e-10, atol=1e-9)
    q = readouts.QuadraticReadout(2, 12)
    g = np.asarray(r).copy()
    g[1::2] **= 2
    np.testing.assert_allclose(q.prepare_train(r[None])[0, 0], g, rtol=1e-10, atol=1e-9)
    ens = readouts.EnsembleLinearReadout(2, 12, chunks=3)
    ens = ens.set_wout(jnp.asarray(RNG.standard_normal((3, 2, 12))))
    rs = jnp.asarray(RNG.standard_normal((3, 12)))
    expected = np.mean(
        [np.asarray(ens.wout[c]) @ np.asarray(rs[c]) for c in range(3)], axis=0
    )
    np.testing.assert_allclose(ens.readout(rs), expected, rtol=1e-10, atol=1e-9)
