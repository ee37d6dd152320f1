"""Every fast path computes what the plain path computes.

- the native ELL product (C++ FFI kernel) vs the gathered sum in numpy,
  including nested vmap and derivatives (their closed forms), and whole
  models vs the plain path;
- the update of the ridge statistics (native, rows read in place, or XLA's
  products) vs numpy's products;
- the in-place LAPACK ridge solve vs numpy, its fallback and derivatives;
- the fused native ESN run (two threads per step) vs the per-step run in
  numpy, and the scalar, single-thread kernels (``ORC_NATIVE_SIMD=0``,
  ``ORC_NATIVE_THREADS=1``) vs the same references;
- the overlapped run + statistics of forecaster training (``esn_run_stats``:
  reservoir on one thread, Gram on the other) vs the drive, run and products
  in numpy, with chunks, spin-up, under jit, vmap and grad, and the BLAS
  thread count restored after it;
- the closed-loop forecast in one native call (``esn_forecast``: two
  threads per step, readout and feedback inside) vs numpy, vs the models'
  per-step loop, under vmap and grad, and the fall-back for models it
  does not cover;
- streaming training (no state history) vs training on the stored states.
"""

from __future__ import annotations

import functools
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import on_cpu
from orc import _native
from orc._kernels import (
    esn_forecast,
    esn_forecasts,
    esn_run,
    esn_run_stats,
    kernels,
)
from orc._matrix import distinct_columns
from orc._ridge import (
    RidgeStats,
    solve,
    stats_update,
    symmetric,
)


def ell_matvec(values, indices, x, native):
    """The sparse product of one backend's kernels (programs for the CPU)."""
    return kernels("native" if native else "xla", "cpu").matvec(values, indices, x)


@functools.cache
def _lorenz_record():
    """Lorenz63 at dt 0.01 for tN = 45, integrated once, as a numpy array. The
    tests take its first rows: every distinct tN was a diffrax program of its
    own (six programs, ~30 s of a loaded run); a prefix equals the shorter
    integration's record to rounding (bit for bit at tN = 6, 12, 20). (numpy:
    each slice of a JAX array compiles a program of its own.)"""
    U, _ = orc.data.lorenz63(tN=45, dt=0.01)
    return np.asarray(U)


def _lorenz(tn):
    return _lorenz_record()[: int(round(tn / 0.01))]


RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _cpu_device():
    """These tests are about the CPU kernels: run them on the CPU device also
    where the default device is a GPU."""
    with on_cpu():
        yield


pytestmark = pytest.mark.skipif(
    not _native.native_available(),
    reason="native kernels off here (not installed, or ORC_NATIVE=0)",
)

# The references below are numpy's: the tests' inputs, slicing and
# arithmetic are numpy too (every eager JAX operation on a new shape compiles
# a program of its own), and each check under test is one jitted program.


def _ell(n, k, lead=()):
    """An ELL bank ``(*lead, n, k)`` in numpy: float64 values, int32 columns."""
    cols = np.stack([distinct_columns(RNG, n, n, k) for _ in range(int(np.prod(lead)))])
    vals = RNG.standard_normal(cols.shape)
    return vals.reshape(lead + (n, k)), cols.reshape(lead + (n, k)).astype(np.int32)


def _np_matvec(values, indices, x):
    """``y[..., i] = sum_j values[..., i, j] x[..., indices[..., i, j]]`` in
    float64 numpy (leading axes of ``values``/``indices`` and ``x`` alike)."""
    v, idx = np.asarray(values, np.float64), np.asarray(indices)
    x = np.asarray(x, np.float64)
    lead = np.broadcast_shapes(v.shape[:-2], x.shape[:-1])
    v = np.broadcast_to(v, lead + v.shape[-2:])
    idx = np.broadcast_to(idx, v.shape)
    x = np.broadcast_to(x, lead + x.shape[-1:])
    gathered = np.take_along_axis(x[..., None, :], idx.reshape(lead + (1, -1)), -1)
    return np.sum(v * gathered.reshape(idx.shape), axis=-1)


def _np_run(values, indices, drive, r0, leak):
    """The leaky-tanh run ``r <- leak tanh(W r + drive[t]) + (1 - leak) r`` of
    a bank ``values (C, n, k)`` over ``drive (T, C, n)`` in float64 numpy."""
    r = np.asarray(r0, np.float64)
    drive = np.asarray(drive, np.float64)
    states = np.empty(drive.shape)
    for t in range(drive.shape[0]):
        r = leak * np.tanh(_np_matvec(values, indices, r) + drive[t]) + (1 - leak) * r
        states[t] = r
    return states


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("n,k", [(300, 7), (301, 16), (203, 40), (64, 33)])
def test_native_matvec_equals_gather(dtype, n, k):
    """Row lengths below, at and past the vector widths (8 doubles, 16
    floats), with and without a masked tail, and row counts that are not a
    multiple of the four rows the vector kernel does at a time: the native
    product equals the gathered sum (numpy's)."""
    V, C = _ell(n, k)
    V = V.astype(dtype)
    x = RNG.standard_normal(n).astype(dtype)
    tol = 1e-5 if dtype == jnp.float32 else 1e-13
    fast = jax.jit(lambda V, C, x: ell_matvec(V, C, x, native=True))(V, C, x)
    assert fast.dtype == dtype
    np.testing.assert_allclose(fast, _np_matvec(V, C, x), rtol=tol, atol=tol)


def test_native_matvec_nested_vmap_and_broadcast():
    V, C = _ell(50, 3, (4,))  # 4 chunks
    xs = RNG.standard_normal((5, 4, 50))  # 5 trajectories x 4 chunks

    @jax.jit
    def fast(V, C, xs):
        per_chunk = jax.vmap(lambda v, c, x: ell_matvec(v, c, x, native=True))
        nested = jax.vmap(per_chunk, in_axes=(None, None, 0))(V, C, xs)
        # a mapped vector against one unmapped matrix
        mapped = jax.vmap(lambda x: ell_matvec(V[0], C[0], x, native=True))(xs[:, 0])
        return nested, mapped

    nested, mapped = fast(V, C, xs)
    ref = _np_matvec(V[None], C[None], xs)  # (5, 4, 50)
    np.testing.assert_allclose(nested, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(mapped, ref[:, 0], rtol=1e-13)


def test_native_matvec_derivatives():
    """Derivatives of ``sum(sin(W x))`` with respect to the values and to x,
    and the tangent in x, equal their closed forms in numpy."""
    V, C = _ell(40, 4)
    x = RNG.standard_normal(40)

    def loss(v, x):
        return jnp.sum(jnp.sin(ell_matvec(v, C, x, native=True)))

    @jax.jit
    def derivatives(V, x):
        tangent = jax.jvp(lambda x: ell_matvec(V, C, x, native=True), (x,), (x,))[1]
        return jax.grad(loss, (0, 1))(V, x), tangent

    (g_v, g_x), t_fast = derivatives(V, x)
    y = _np_matvec(V, C, x)
    ref_v = np.cos(y)[:, None] * x[C]  # d/dv[i, j] = cos(y_i) x[c_ij]
    ref_x = np.zeros(40)  # d/dx[m] = sum over c_ij = m of cos(y_i) v_ij
    np.add.at(ref_x, C, np.cos(y)[:, None] * V)
    np.testing.assert_allclose(g_v, ref_v, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(g_x, ref_x, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(t_fast, y, rtol=1e-12)  # the product is linear in x


def test_models_agree_with_and_without_native_kernel():
    """A model trained and run with the native kernels has the states of the
    plain path (XLA's per-step run), the readout numpy's ridge regression
    gives on them, and forecasts what the plain path forecasts."""
    U = _lorenz(12)
    esn = orc.forecaster.ESNForecaster(3, 120, chunks=3, locality=1)
    fast_model, fast_R = orc.forecaster.train_RCForecaster(
        esn, U, beta=1e-6, backend="native"
    )
    fast_R = np.asarray(fast_R)
    fast_fc = np.asarray(fast_model.forecast(50, fast_R[-1]))
    # the backend is resolved when an entry point is called (here while the
    # user's jax.jit traces) and is a static argument of the compiled program
    with orc.use_backend("xla"):
        slow_R = jax.jit(lambda m, u: m.force(u, m.driver.default_state()))(esn, U)
        slow_R = np.asarray(slow_R)
        slow_fc = jax.jit(lambda m, r: m.forecast(50, r))(fast_model, fast_R[-1])
        slow_fc = np.asarray(slow_fc)
    # the two really are different programs (no cache hit across backends)
    assert not np.array_equal(fast_R, slow_R) or not np.array_equal(fast_fc, slow_fc)
    np.testing.assert_allclose(fast_R, slow_R, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(fast_fc, slow_fc, rtol=1e-6, atol=1e-6)
    # chunk c (locality 1 feeds it, but its readout sees its own states)
    # predicts coordinate c of the next step
    wout = np.asarray(fast_model.readout.wout)
    for c in range(3):
        x = slow_R[:-1, c]
        w = np.linalg.solve(x.T @ x + 1e-6 * np.eye(120), x.T @ U[1:, c])
        np.testing.assert_allclose(
            fast_R[:, c] @ wout[c, 0], slow_R[:, c] @ w, rtol=1e-7, atol=1e-7
        )


def _updated(stats, x, y, start, stop):
    """stats_update, and the symmetric Gram it leaves (one program)."""
    got = stats_update(stats, x, y, start, stop)
    return got, symmetric(got.gram)


@pytest.mark.parametrize("path", ["native", "xla"])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_cpu_stats_update_equals_numpy(path, dtype):
    """The update of the ridge statistics (native FFI call in place, or XLA's
    products, which the native backend also runs without its kernels) adds
    exactly rows start:stop:
    the Gram's upper triangle and the cross term equal numpy's products of
    those rows, with and without chunks (whose rows are strided in memory),
    batched under vmap and jit, and it differentiates like the plain
    products (their derivatives in closed form, numpy's). The two large
    cases have enough work for the native float64
    Gram kernel (CPUs with AVX2 and FMA) to split the rows of the Gram between
    two threads, over several blocks of steps, with sizes that are multiples
    of neither tile side (6 x 8); those two on the native path only (XLA's
    products have no size threshold, and every case is more to compile)."""
    tol = 1e-12 if dtype == jnp.float64 else 1e-4
    cases = [((257, 30), 3, (0, 257)), ((257, 30), 2, (17, 200))]
    cases += [((100, 3, 20), 4, (5, 99))]
    if path == "native":  # the Gram kernel's two-thread split (work >= 1e8)
        cases += [((700, 397), 3, (3, 690)), ((260, 3, 397), 2, (1, 258))]
    cases += [((60, 2, 7), 1, (60, 60))]  # last: the error case below uses it
    inputs, refs = [], []
    for shape, out, (start, stop) in cases:
        x = RNG.standard_normal(shape)
        y = RNG.standard_normal(shape[:-1] + (out,))
        xt = np.moveaxis(x[start:stop], 1, 0) if x.ndim == 3 else x[start:stop]
        yt = np.moveaxis(y[start:stop], 1, 0) if y.ndim == 3 else y[start:stop]
        g0 = RNG.standard_normal(xt.shape[:-2] + (shape[-1],) * 2)
        g0 = g0 + np.swapaxes(g0, -1, -2)
        c0 = RNG.standard_normal(xt.shape[:-2] + (shape[-1], out))
        refs.append(
            (g0 + np.swapaxes(xt, -1, -2) @ xt, c0 + np.swapaxes(xt, -1, -2) @ yt)
        )
        stats = RidgeStats(g0.astype(dtype), c0.astype(dtype), np.asarray(2.0, dtype))
        inputs.append((stats, x.astype(dtype), y.astype(dtype)))
    bounds = [rows for _, _, rows in cases]
    with orc.use_backend("xla" if path == "xla" else "native"):
        # every case in one program (fewer programs to compile than one per
        # case); a fresh function: traced under this test's backend
        updated = jax.jit(
            lambda inputs: [
                _updated(*args, start, stop)
                for args, (start, stop) in zip(inputs, bounds, strict=True)
            ]
        )(inputs)
        for (got, sym), (ref_g, ref_c), (start, stop) in zip(
            updated, refs, bounds, strict=True
        ):
            assert got.gram.dtype == dtype and got.cross.dtype == dtype
            assert float(got.count) == 2 + stop - start
            np.testing.assert_allclose(sym, ref_g, rtol=tol, atol=tol * 30)
            np.testing.assert_allclose(
                np.triu(np.asarray(got.gram)), np.triu(ref_g), rtol=tol, atol=tol * 30
            )
            np.testing.assert_allclose(got.cross, ref_c, rtol=tol, atol=tol * 30)
        stats, x, y = inputs[-1]
        with pytest.raises(ValueError, match="rows"):
            stats_update(stats, x, y, 3, 61)
        if dtype == jnp.float64:
            x = RNG.standard_normal((30, 6))
            y = RNG.standard_normal((30, 2))

            def loss(x, y):
                z = RidgeStats(jnp.zeros((6, 6)), jnp.zeros((6, 2)), jnp.zeros(()))
                s = stats_update(z, x, y, 4, 25)
                return jnp.sum(jnp.cos(symmetric(s.gram))) + jnp.sum(jnp.sin(s.cross))

            gx, gy = jax.jit(jax.grad(loss, (0, 1)))(x, y)
            # the plain products' loss sum(cos(xs^T xs)) + sum(sin(xs^T ys)) of
            # rows 4:25 differentiated by hand
            xs, ys = x[4:25], y[4:25]
            ref_x, ref_y = np.zeros_like(x), np.zeros_like(y)
            ref_x[4:25] = -2 * xs @ np.sin(xs.T @ xs) + ys @ np.cos(xs.T @ ys).T
            ref_y[4:25] = xs @ np.cos(xs.T @ ys)
            np.testing.assert_allclose(gx, ref_x, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(gy, ref_y, rtol=1e-12, atol=1e-12)
        xs = RNG.standard_normal((3, 40, 5)).astype(dtype)
        ys = RNG.standard_normal((3, 40, 2)).astype(dtype)

        @jax.jit
        def batched(xs, ys):
            zero = RidgeStats(
                jnp.zeros((5, 5), dtype), jnp.zeros((5, 2), dtype), jnp.zeros((), dtype)
            )
            return jax.vmap(lambda x, y: _updated(zero, x, y, 1, 39))(xs, ys)

        got, sym = jax.tree.map(np.asarray, batched(xs, ys))
        x2, y2 = (
            np.asarray(xs[2, 1:39], np.float64),
            np.asarray(ys[2, 1:39], np.float64),
        )
        np.testing.assert_allclose(sym[2], x2.T @ x2, rtol=tol, atol=tol * 30)
        np.testing.assert_allclose(got.cross[2], x2.T @ y2, rtol=tol, atol=tol * 30)


def _stats(x, y, stale=True):
    """Statistics (numpy) whose lower triangle is junk, as the Gram update
    leaves it."""
    g = x.T @ x
    if stale:
        g = np.triu(g) + np.tril(RNG.standard_normal(g.shape), -1)
    return RidgeStats(g, x.T @ y, np.asarray(len(x), g.dtype))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_native_ridge_solve_equals_numpy(dtype):
    """The LAPACK solve inside the Gram's buffer reads the upper triangle only
    and equals numpy's solve; batched (vmap, chunks) and jitted too."""
    assert _native.ridge_solve_target(dtype) is not None
    x, y = RNG.standard_normal((400, 60)), RNG.standard_normal((400, 3))
    beta = 1e-2
    ref = np.linalg.solve(x.T @ x + beta * np.eye(60), x.T @ y).T
    stats = jax.tree.map(lambda a: a.astype(dtype), _stats(x, y))
    tol = 1e-10 if dtype == jnp.float64 else 2e-3
    got = jax.jit(solve)(stats, beta)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    twice = jax.tree.map(lambda a: np.stack([a, 2 * a]), stats)
    ref2 = np.linalg.solve(2 * x.T @ x + beta * np.eye(60), 2 * x.T @ y).T
    batched = jax.jit(lambda t: (jax.vmap(lambda s: solve(s, beta))(t), solve(t, beta)))
    for got in batched(twice):  # vmapped, and as chunks
        got = np.asarray(got)
        np.testing.assert_allclose(got[0], ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(got[1], ref2, rtol=tol, atol=tol)


def test_native_ridge_solve_fallback_and_errors():
    """A Gram that is not positive definite gets the minimum-norm solution from
    the Gram the kernel left intact (alone and under vmap, next to a problem
    that factors); NaN statistics raise; derivatives match the closed form."""
    x, y = RNG.standard_normal((20, 50)), RNG.standard_normal((20, 2))  # rank 20
    pinv = (np.linalg.pinv(x.T @ x) @ x.T @ y).T
    stats = _stats(x, y)
    solve_jit = jax.jit(solve)  # one program for the three problems of its size
    np.testing.assert_allclose(solve_jit(stats, 0.0), pinv, atol=1e-8)
    full = _stats(RNG.standard_normal((200, 50)), RNG.standard_normal((200, 2)))
    both = jax.tree.map(lambda a, b: np.stack([a, b]), stats, full)
    got = np.asarray(jax.jit(jax.vmap(lambda s: solve(s, 0.0)))(both))
    np.testing.assert_allclose(got[0], pinv, atol=1e-8)
    np.testing.assert_allclose(got[1], solve_jit(full, 0.0), rtol=1e-12)
    gram = stats.gram.copy()
    gram[3, 7] = np.nan
    bad = RidgeStats(gram, stats.cross, stats.count)
    with pytest.raises(Exception, match="contain NaN/inf"):
        jax.block_until_ready(solve_jit(bad, 1e-3))

    g = np.triu(full.gram)
    fast = jax.jit(  # (jitted: eager, every operation of the derivative compiles)
        jax.grad(
            lambda g: jnp.sum(
                jnp.sin(solve(RidgeStats(g, full.cross, full.count), 1e-2))
            )
        )
    )(g)
    # the closed form in numpy: X = A^-1 B with A = sym(triu(g)) + beta I,
    # dL/dA = -A^-1 cos(X) X^T, and an entry above the diagonal is both A_ij
    # and A_ji (the entries below it are not read: zero)
    a = g + np.triu(g, 1).T + 1e-2 * np.eye(50)
    x = np.linalg.solve(a, full.cross)
    m = -np.linalg.solve(a, np.cos(x)) @ x.T
    np.testing.assert_allclose(
        fast, np.triu(m) + np.triu(m.T, 1), rtol=1e-9, atol=1e-12
    )


def test_native_esn_activation_is_tanh():
    """With W = 0 and leak 1 the fused run returns tanh(drive): the kernel's
    own tanh agrees with numpy's to a few ulp (relative) from 1e-300 to
    beyond saturation, with the sign of its argument."""
    grid = np.concatenate([[0.0, 1e-300, -1e-12, 1e-6], np.linspace(-40, 40, 4001)])
    # a bank of one reservoir of 3 nodes, in the pass's layout: drive (T, C, n)
    drive = grid.reshape(-1, 1, 1) * np.ones((1, 1, 3))
    zeros, idx = np.zeros((1, 3, 2)), np.zeros((1, 3, 2), np.int32)
    with on_cpu():  # the native kernel's tanh (a GPU would run XLA's)
        got = jax.jit(esn_run)(zeros, idx, drive, np.zeros((1, 3)), 1.0)
    got = np.asarray(got)[:, 0, 0]
    np.testing.assert_allclose(got, np.tanh(grid), rtol=1e-15, atol=0)
    assert np.all(np.sign(got) == np.sign(grid))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("n,lead", [(1000, (1,)), (60, (1,)), (701, (3,))])
def test_native_esn_run_equals_scan(dtype, n, lead):
    """The fused run (two threads at 1000 nodes x 20 non-zeros and at 3 chunks
    of 701 x 14, where the two halves meet inside the middle chunk; one thread
    at 60 nodes) equals the per-step run (numpy's), for one and several
    reservoirs in the bank, under jit and vmap. (A case of 3 chunks of 300 x 6
    was dropped: 5400 non-zeros x 333 steps is two threads too, as the 701
    case.)"""
    k = max(1, n // 50)
    values, indices = _ell(n, k, lead)
    values = (values * 0.8 / np.sqrt(k)).astype(dtype)
    drive = RNG.standard_normal((333,) + lead + (n,)).astype(dtype)
    r0 = RNG.uniform(-1, 1, lead + (n,)).astype(dtype)
    tol = 1e-13 if dtype == jnp.float64 else 2e-6

    @jax.jit
    def run(values, indices, drive, r0):
        one = esn_run(values, indices, drive, r0, 0.6)
        two = jnp.stack([r0, -r0])
        batched = jax.vmap(lambda r: esn_run(values, indices, drive, r, 0.6))(two)
        return one, batched

    got, batched = run(values, indices, drive, r0)
    assert got.dtype == dtype and got.shape == drive.shape
    np.testing.assert_allclose(
        got, _np_run(values, indices, drive, r0, 0.6), rtol=tol, atol=tol
    )
    np.testing.assert_allclose(
        np.asarray(batched)[1],
        _np_run(values, indices, drive, -r0, 0.6),
        rtol=tol,
        atol=tol,
    )


_SCALAR_CHECK = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from orc._kernels import ell_matvec, esn_forecast, esn_run, esn_run_stats
from orc._matrix import distinct_columns
from orc._ridge import RidgeStats
rng = np.random.default_rng(5)
# the fused run + statistics: here run and update follow each other
n, c, t = 300, 3, 400
idx = np.stack([distinct_columns(rng, n, n, 6) for _ in range(c)]).astype(np.int32)
v = rng.standard_normal((c, n, 6)) * 0.3
win = rng.uniform(-1, 1, (c, n, 2))
u = rng.standard_normal((t, c, 2))
y = rng.standard_normal((t, c, 2))
r0 = np.zeros((c, n))
# (each check is one compiled program: eager, every operation compiles)
@jax.jit
def fit(v, idx, win, u, r0, y):
    stats0 = RidgeStats.zeros(n, 2, c, jnp.float64)
    return esn_run_stats(v, idx, win, u, 0.5, r0, 0.6, stats0, y, 7, t)
states, stats = fit(v, idx, win, u, r0, y)
ref = _np_run(v, idx, np.einsum("cnw,tcw->tcn", win, u) + 0.5, r0, 0.6)
np.testing.assert_allclose(states, ref, rtol=1e-12, atol=1e-12)
x = ref[7:]
gram, cross = np.asarray(stats.gram), np.asarray(stats.cross)
for ci in range(c):
    g = np.triu(gram[ci])
    np.testing.assert_allclose(g, np.triu(x[:, ci].T @ x[:, ci]), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(cross[ci], x[:, ci].T @ y[7:, ci], rtol=1e-11, atol=1e-9)
# the closed-loop forecast in one call, here on one thread
n, k = 600, 30
idx = distinct_columns(rng, n, n, k)[None].astype(np.int32)
v = rng.standard_normal((1, n, k)) * 0.15
win = rng.uniform(-1, 1, (1, n, 3))
wout = rng.standard_normal((1, 3, n)) * 0.01
window = np.asarray([[0, 1, 2]], np.int32)
r0 = rng.uniform(-1, 1, (1, n))
got = jax.jit(lambda *a: esn_forecast(*a, 40))(v, idx, win, window, 0.3, wout, r0, 0.6)
ref = _numpy_forecast(v, idx, win, window, 0.3, wout, r0, 0.6, 40)
np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)
for dtype, tol in ((np.float64, 1e-13), (np.float32, 2e-6)):
    for n, k in ((1000, 21), (64, 3)):
        idx = distinct_columns(rng, n, n, k)[None].astype(np.int32)
        v = (rng.standard_normal((1, n, k)) * 0.8 / np.sqrt(k)).astype(dtype)
        drive = rng.standard_normal((50, 1, n)).astype(dtype)
        r0 = rng.uniform(-1, 1, (1, n)).astype(dtype)
        got, mv = jax.jit(lambda v, idx, drive, r0: (
            esn_run(v, idx, drive, r0, 0.6), ell_matvec(v[0], idx[0], r0[0])
        ))(v, idx, drive, r0)
        assert got.dtype == mv.dtype == dtype
        ref = _np_run(v, idx, drive, r0, 0.6)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
        mv_ref = _np_matvec(v[0], idx[0], r0[0])
        np.testing.assert_allclose(mv, mv_ref, rtol=tol, atol=tol)
print("ok")
"""


@pytest.mark.parametrize(
    "env",
    [{"ORC_NATIVE_SIMD": "0"}, {"ORC_NATIVE_THREADS": "1"}],
    ids=["scalar", "one-thread"],
)
def test_native_kernel_variants_equal_references(env):
    """The kernels picked on other machines (no vector gathers: the scalar
    loop; one thread) compute what the references (numpy's, as in the tests
    above) compute. The variant is chosen once per process, so each runs in a
    fresh interpreter."""
    import inspect
    import os
    import subprocess
    import sys

    references = "".join(
        inspect.getsource(f) for f in (_np_matvec, _np_run, _numpy_forecast)
    )
    proc = subprocess.run(
        [sys.executable, "-c", "import numpy as np\n" + references + _SCALAR_CHECK],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def _fit_case(n, chunks, steps, width, dtype, seed):
    """A bank, input weights, windows, targets and initial states (numpy)."""
    rng = np.random.default_rng(seed)
    k = max(1, n // 50)
    cols = np.stack([distinct_columns(rng, n, n, k) for _ in range(chunks)])
    values = (rng.standard_normal(cols.shape) * 0.8 / np.sqrt(k)).astype(dtype)
    win = rng.uniform(-0.5, 0.5, (chunks, n, width)).astype(dtype)
    windows = rng.standard_normal((steps, chunks, width)).astype(dtype)
    targets = rng.standard_normal((steps, chunks, 3)).astype(dtype)
    r0 = rng.uniform(-1, 1, (chunks, n)).astype(dtype)
    return values, cols.astype(np.int32), win, windows, r0, targets


def _numpy_fit(values, indices, win, windows, r0, targets, bias, leak, start, stop):
    """The drive, the leaky-tanh run and the statistics in plain numpy."""
    drive = np.einsum("cnw,tcw->tcn", np.asarray(win, np.float64), np.asarray(windows))
    states = _np_run(values, indices, drive + bias, r0, leak)
    x, y = states[start:stop], np.asarray(targets, np.float64)[start:stop]
    grams = np.stack([x[:, c].T @ x[:, c] for c in range(x.shape[1])])
    cross = np.stack([x[:, c].T @ y[:, c] for c in range(x.shape[1])])
    return states, grams, cross


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize(
    "n,chunks,steps,start",
    [(600, 1, 700, 0), (300, 3, 500, 37), (60, 2, 90, 5)],
    ids=["overlap-1-chunk", "overlap-3-chunks", "small-sequential"],
)
def test_esn_run_stats_equals_numpy(dtype, n, chunks, steps, start):
    """The overlapped run + statistics (the first two cases have enough Gram
    work for the two-thread overlap, with blocks handed over while the run
    goes on and the rest split by Gram columns; the last runs one after the
    other) equals the drive, the run and the products in numpy: states,
    upper Gram triangle, cross products and count, with a spin-up."""
    values, indices, win, windows, r0, targets = _fit_case(
        n, chunks, steps, 3, dtype, 1
    )
    stop = steps - 1

    def fit(*a):
        stats0 = RidgeStats.zeros(n, 3, chunks, dtype)
        return esn_run_stats(*a[:4], 0.3, a[4], 0.6, stats0, a[5], start, stop)

    states, stats = jax.jit(fit)(values, indices, win, windows, r0, targets)
    ref_states, ref_g, ref_c = _numpy_fit(
        values, indices, win, windows, r0, targets, 0.3, 0.6, start, stop
    )
    tol = 1e-11 if dtype == jnp.float64 else 2e-4
    assert states.dtype == dtype and states.shape == (steps, chunks, n)
    np.testing.assert_allclose(states, ref_states, rtol=tol, atol=tol)
    scale = np.abs(ref_g).max()
    np.testing.assert_allclose(
        np.triu(np.asarray(stats.gram, np.float64)) / scale,
        np.triu(ref_g) / scale,
        atol=tol,
    )
    np.testing.assert_allclose(
        np.asarray(stats.cross, np.float64) / scale, ref_c / scale, atol=tol
    )
    assert float(stats.count) == stop - start


def test_esn_run_stats_adds_to_given_stats_under_vmap_and_grad():
    """Statistics are added to what the sums held (two halves of a sequence
    give the whole); vmap over initial states runs each problem; derivatives
    (through the plain path) match central differences."""
    n, chunks, steps = 400, 1, 800
    values, indices, win, windows, r0, targets = _fit_case(
        n, chunks, steps, 3, jnp.float64, 2
    )

    def fit(r, stats, lo, hi):
        return esn_run_stats(
            values, indices, win, windows, 0.1, r, 0.6, stats, targets, lo, hi
        )

    @jax.jit  # the whole, the two halves, and vmap over +-r0: one program
    def fits(r):
        stats0 = RidgeStats.zeros(n, 3, chunks, jnp.float64)
        whole = fit(r, stats0, 0, steps)[1]
        both = fit(r, fit(r, stats0, 0, 400)[1], 400, steps)[1]
        second = fit(-r, stats0, 0, steps)[1]
        pair = jnp.stack([r, -r])
        batched = jax.vmap(lambda r: fit(r, stats0, 0, steps))(pair)[1]
        return whole, both, second, batched

    whole, both, second, batched = jax.tree.map(np.asarray, fits(r0))
    tol = 1e-12 * np.abs(whole.gram).max()  # rounding of cancelling sums
    np.testing.assert_allclose(np.triu(both.gram), np.triu(whole.gram), atol=tol)
    np.testing.assert_allclose(both.cross, whole.cross, atol=tol)
    np.testing.assert_allclose(np.triu(batched.gram[1]), np.triu(second.gram), atol=tol)

    small = _fit_case(30, 1, 40, 2, jnp.float64, 3)

    def loss(scale):
        v, i, w, u, r, y = small
        s0 = RidgeStats.zeros(30, 3, 1, jnp.float64)
        st = esn_run_stats(v * scale, i, w, u, 0.1, r, 0.6, s0, y, 3, 40)[1]
        return jnp.sum(jnp.triu(st.gram)) + jnp.sum(st.cross)

    grad = jax.jit(jax.grad(loss))(1.0)
    h = 1e-5
    loss = jax.jit(loss)  # the two evaluations: one program
    fd = (loss(1.0 + h) - loss(1.0 - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def _openblas_threads():
    """(get, set) of the OpenBLAS that SciPy loaded, or None."""
    import ctypes
    import glob
    import os

    import scipy

    libs = glob.glob(
        os.path.join(os.path.dirname(scipy.__file__) + ".libs", "*openblas*")
    )
    for path in libs:
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas", "openblas"):
            get = getattr(lib, f"{prefix}_get_num_threads", None)
            put = getattr(lib, f"{prefix}_set_num_threads", None)
            if get is not None and put is not None:
                return get, put
    return None


def test_training_restores_blas_threads_and_matches_plain_path():
    """Training an ESN forecaster that keeps its states takes the overlapped
    path (one esn_fit call in the compiled program), leaves the process's
    BLAS thread count as it found it, and trains what the plain path trains:
    the states of the per-step run without the native kernels, and numpy's
    ridge regression on them (the plain path's own fit is a program that
    takes long to compile at this size, and its solve is checked elsewhere).
    The model and data of the first model of
    test_models_forecast_with_fused_loop_equals_per_step, whose training is
    then this one's program (beta is an argument of it, not a constant)."""
    U = _lorenz(30)[500:2000]
    esn = orc.forecaster.ESNForecaster(3, 1000, seed=2)
    jaxpr = jax.make_jaxpr(
        lambda m, u: orc.forecaster.train_RCForecaster(m, u, beta=1e-6)
    )(esn, U)
    assert "orc_esn_fit" in str(jaxpr)
    control = _openblas_threads()
    if control is not None:
        control[1](2)
    fast_model, fast_R = orc.forecaster.train_RCForecaster(esn, U, beta=1e-6)
    if control is not None:
        assert control[0]() == 2
    slow_R = esn.force(U, esn.driver.default_state(), backend="xla")
    fast_R, slow_R = np.asarray(fast_R), np.asarray(slow_R)
    assert fast_R.shape == slow_R.shape == (len(U), 1, 1000)
    np.testing.assert_allclose(fast_R, slow_R, rtol=1e-11, atol=1e-12)
    # the weights of this ill-conditioned fit differ at 1e-4 between Gram and
    # solve implementations; the fitted one-step predictions agree closely
    x = slow_R[:, 0]
    w = np.linalg.solve(x[:-1].T @ x[:-1] + 1e-6 * np.eye(1000), x[:-1].T @ U[1:])
    fast_pred = np.einsum("tcn,con->tco", fast_R, np.asarray(fast_model.readout.wout))
    np.testing.assert_allclose(fast_pred[:, 0], x @ w, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(fast_pred[:-1, 0], U[1:], atol=0.05)


def test_native_esn_run_derivatives():
    """Derivatives of the fused run (through the scan) match central
    differences, for the leak, the drive and the matrix values."""
    values, indices = _ell(40, 4, (1,))
    values = values * 0.3
    drive = RNG.standard_normal((25, 1, 40))
    r0 = np.zeros((1, 40))

    def loss(leak, drive, values):
        return jnp.sum(jnp.sin(esn_run(values, indices, drive, r0, leak)))

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(0.7, drive, values)
    grads = jax.tree.map(np.asarray, grads)
    loss = jax.jit(loss)  # the six evaluations: one program
    h = 1e-6
    fd = (loss(0.7 + h, drive, values) - loss(0.7 - h, drive, values)) / (2 * h)
    np.testing.assert_allclose(grads[0], fd, rtol=1e-6)
    e = np.zeros_like(drive)
    e[3, 0, 5] = h
    fd = (loss(0.7, drive + e, values) - loss(0.7, drive - e, values)) / (2 * h)
    np.testing.assert_allclose(grads[1][3, 0, 5], fd, rtol=1e-6)
    e = np.zeros_like(values)
    e[0, 7, 2] = h
    fd = (loss(0.7, drive, values + e) - loss(0.7, drive, values - e)) / (2 * h)
    np.testing.assert_allclose(grads[2][0, 7, 2], fd, rtol=1e-6)


def test_models_force_with_fused_run_equals_per_step():
    """Forecaster, parallel forecaster and regressor states from the fused run (blocks of SEQ_BLOCK plus a tail) equal one advance() per
    step without the native kernels."""
    from orc.drivers import SEQ_BLOCK

    u = RNG.standard_normal((SEQ_BLOCK * 2 + 77, 3))
    models = [
        orc.forecaster.ESNForecaster(data_dim=3, res_dim=200, seed=1),
        orc.forecaster.ESNForecaster(data_dim=3, res_dim=60, chunks=3, seed=1),
        orc.regression.ESNRegressor(in_dim=3, out_dim=2, res_dim=100, seed=1),
    ]
    for model in models:
        r0 = model.driver.default_state()
        fast = model.force(u, r0, backend="native")

        def per_step(model, u, r0):
            def step(r, x):
                r = model.driver.advance(model.embedding.embed(x), r)
                return r, r

            return jax.lax.scan(step, r0, u)[1]

        with orc.use_backend("xla"):
            slow = eqx.filter_jit(per_step)(model, u, r0)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-13)


def _numpy_forecast(values, indices, win, window, bias, wout, r0, leak, length):
    """The closed loop (readout, feedback, leaky-tanh step) in plain numpy."""
    v, idx = np.asarray(values, np.float64), np.asarray(indices)
    win, wout = np.asarray(win, np.float64), np.asarray(wout, np.float64)
    r = np.asarray(r0, np.float64)
    out = []
    for _ in range(length):
        y = np.einsum("con,cn->co", wout, r).reshape(-1)
        out.append(y)
        wr = np.einsum("cnk,cnk->cn", v, np.take_along_axis(r[:, None, :], idx, 2))
        drive = np.einsum("cnw,cw->cn", win, y[np.asarray(window)]) + bias
        r = leak * np.tanh(wr + drive) + (1 - leak) * r
    return np.stack(out)


def _forecast_case(n, chunks, k, per_chunk, locality, dtype, seed):
    """A bank, input and output weights, feedback windows and initial states
    (numpy)."""
    from orc.embeddings import _window_indices

    rng = np.random.default_rng(seed)
    cols = np.stack([distinct_columns(rng, n, n, k) for _ in range(chunks)])
    values = (rng.standard_normal(cols.shape) * 0.9 / np.sqrt(k)).astype(dtype)
    out_dim = chunks * per_chunk
    window = np.asarray(_window_indices(out_dim, chunks, locality, True, False))
    win = rng.uniform(-0.5, 0.5, (chunks, n, window.shape[1])).astype(dtype)
    wout = rng.standard_normal((chunks, per_chunk, n)) * 0.3 / np.sqrt(n)
    wout = wout.astype(dtype)
    r0 = rng.uniform(-1, 1, (chunks, n)).astype(dtype)
    return values, cols.astype(np.int32), win, window, wout, r0


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize(
    "n,chunks,k,per_chunk,locality",
    [(500, 1, 40, 3, 0), (120, 3, 50, 2, 1), (50, 2, 3, 1, 1)],
    ids=["two-threads", "two-threads-chunks", "small-scan"],
)
def test_esn_forecast_equals_numpy(dtype, n, chunks, k, per_chunk, locality):
    """The one-call closed loop (two threads per step in the first two
    cases, 20000 and 18000 non-zeros; below 16384 the scan runs) equals
    readout, feedback through the chunk windows and the leaky-tanh step in
    numpy; for 80 steps and for one."""
    values, indices, win, window, wout, r0 = _forecast_case(
        n, chunks, k, per_chunk, locality, dtype, 4
    )
    fn = jax.jit(  # both lengths in one program
        lambda *a: tuple(
            esn_forecast(*a[:4], 0.2, *a[4:], 0.6, length) for length in (80, 1)
        )
    )
    got, one = fn(values, indices, win, window, wout, r0)
    ref = _numpy_forecast(values, indices, win, window, 0.2, wout, r0, 0.6, 80)
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    assert got.shape == (80, chunks * per_chunk) and got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    assert one.shape == (1, chunks * per_chunk)
    np.testing.assert_allclose(one, ref[:1], atol=tol)
    with pytest.raises(ValueError, match="length"):
        esn_forecast(values, indices, win, window, 0.2, wout, r0, 0.6, 0)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize(
    "n,chunks,k,per_chunk,locality,readouts,starts",
    [(300, 1, 20, 3, 0, 4, 5), (60, 3, 5, 2, 1, 2, 3), (40, 1, 3, 1, 0, 1, 1)],
    ids=["two-threads", "chunks", "one-column"],
)
def test_esn_forecasts_equal_numpy(
    dtype, n, chunks, k, per_chunk, locality, readouts, starts
):
    """The closed loops of every readout from every start of one reservoir
    in one call (``esn_forecast_batch``, the tuning's validation forecasts;
    the first case shares its steps between two threads) equal each pair's
    closed loop in numpy; under vmap and grad (through the reference)."""
    values, indices, win, window, wout, r0 = _forecast_case(
        n, chunks, k, per_chunk, locality, dtype, 6
    )
    rng = np.random.default_rng(7)
    # (a numpy scalar: jnp.float64(...) * wout was an eager program per shape)
    wouts = np.stack(
        [wout * np.dtype(dtype).type(1 + 0.2 * b) for b in range(readouts)]
    )
    r0s = rng.uniform(-1, 1, (starts, chunks, n)).astype(dtype)

    def forecasts(values, indices, win, window, wouts, r0s):
        return esn_forecasts(values, indices, win, window, 0.2, wouts, r0s, 0.6, 60)

    fn = jax.jit(forecasts)
    got = np.asarray(fn(values, indices, win, window, wouts, r0s))
    if orc._strategy.resolve(None) == "native" and _native.native_available():
        text = fn.lower(values, indices, win, window, wouts, r0s).as_text()
        assert "orc_esn_forecast_batch" in text  # the native call, not the scan
    assert got.shape == (readouts, starts, 60, chunks * per_chunk)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    refs = np.empty(got.shape)
    for b in range(readouts):
        for s in range(starts):
            refs[b, s] = _numpy_forecast(
                values, indices, win, window, 0.2, wouts[b], r0s[s], 0.6, 60
            )
            np.testing.assert_allclose(got[b, s], refs[b, s], rtol=tol, atol=tol)
    if dtype == jnp.float32:
        return
    # under vmap over the starts (+-r0s): the second is the forecasts from -r0s
    pair = np.stack([r0s, -r0s])
    batched = jax.jit(
        jax.vmap(lambda r: forecasts(values, indices, win, window, wouts, r))
    )
    negated = np.asarray(batched(pair))[1]
    np.testing.assert_allclose(negated, np.asarray(fn(values, indices, win, window, wouts, -r0s)), rtol=1e-13, atol=1e-14)  # fmt: skip

    def loss(scale):
        out = esn_forecasts(
            values, indices, win, window, 0.2, wouts * scale, r0s, 0.6, 20
        )
        return jnp.sum(jnp.sin(out))

    grad = jax.jit(jax.grad(loss))(1.0)
    loss = jax.jit(loss)
    fd = (loss(1.0 + 1e-5) - loss(1.0 - 1e-5)) / 2e-5
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_esn_forecast_under_vmap_and_grad():
    """vmap over initial states gives each forecast; derivatives (through
    the scan) match central differences."""
    values, indices, win, window, wout, r0 = _forecast_case(
        400, 1, 41, 3, 0, jnp.float64, 5
    )

    def fc(r, scale=1.0):
        return esn_forecast(values, indices, win, window, 0.2, wout * scale, r, 0.6, 40)

    pair = np.stack([r0, -r0])
    batched = np.asarray(jax.jit(jax.vmap(fc))(pair))
    np.testing.assert_allclose(batched[1], jax.jit(fc)(-r0), rtol=1e-13, atol=1e-14)

    def loss(scale):
        return jnp.sum(jnp.sin(fc(r0, scale)))

    grad = jax.jit(jax.grad(loss))(1.0)
    h = 1e-5
    loss = jax.jit(loss)  # the two evaluations: one program
    fd = (loss(1.0 + h) - loss(1.0 - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_models_forecast_with_fused_loop_equals_per_step():
    """ESN forecasters (one reservoir of 1000 nodes; three local chunks; both
    with enough non-zeros for the two-thread call) forecast in one native call what their per-step loop of
    driver, readout and embedding gives, from a state and from a warm-up;
    models the call does not cover (quadratic features, ensemble readout)
    keep the per-step loop."""
    U = _lorenz(30)[500:2500]
    U6 = np.concatenate([U, U[:, ::-1]], axis=1)
    cases = [
        (orc.forecaster.ESNForecaster(data_dim=3, res_dim=1000, seed=2), U),
        (
            orc.forecaster.ESNForecaster(  # 3 x 200 x 30 non-zeros: fused
                data_dim=6,
                res_dim=200,
                chunks=3,
                locality=1,
                Wr_density=0.15,
                seed=2,
            ),
            U6,
        ),
    ]
    for model, data in cases:
        model, states = orc.forecaster.train_RCForecaster(model, data[:1500])
        r = np.asarray(states)[-1]
        jaxpr = str(jax.make_jaxpr(lambda r, m=model: m.forecast(50, r))(r))
        assert "orc_esn_forecast" in jaxpr
        # The two loops round differently (the native call sums the readout
        # in its own order), and a trained ESN run closed-loop amplifies a
        # rounding difference like any chaotic orbit: 1e-14 at the first step
        # grows to 1e-9 of the attractor's size by step 150 here, and how fast
        # depends on the trained weights and the CPU's kernel variants.  So the
        # first 10 steps must agree to rounding and all 150 to 1e-7 of the
        # attractor's size; a real fault (wrong leak, input or readout, an
        # off-by-one step) is off by orders of magnitude more.
        fast = np.asarray(model.forecast(150, r))
        warm = data[1500:1700]
        # the per-step loops from the state and from the warm-up: one program
        slow, slow_ic = eqx.filter_jit(
            lambda m, r, w: (
                m._closed_loop_scan(150, r),
                m._closed_loop_scan(100, m.force(w, m.driver.default_state())[-1]),
            )
        )(model, r, warm)
        slow, slow_ic = np.asarray(slow), np.asarray(slow_ic)
        scale = float(np.max(np.abs(slow)))
        np.testing.assert_allclose(fast[:10], slow[:10], rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-7 * scale)
        fast_ic = np.asarray(model.forecast_from_IC(100, warm))
        np.testing.assert_allclose(
            fast_ic[:10], slow_ic[:10], rtol=0, atol=1e-11 * scale
        )
        np.testing.assert_allclose(fast_ic, slow_ic, rtol=0, atol=1e-7 * scale)
    quad = orc.forecaster.ESNForecaster(data_dim=3, res_dim=100, quadratic=True, seed=2)
    ens = orc.forecaster.EnsembleESNForecaster(data_dim=3, res_dim=50, chunks=2, seed=2)

    class SineFeatures(orc.readouts.ParallelLinearReadout):
        def nonlinear_transform(self, res_state):
            return jnp.sin(res_state)

    plain = orc.forecaster.ESNForecaster(data_dim=3, res_dim=100, seed=2)
    custom = plain.set_readout(SineFeatures(3, 100, chunks=1))
    custom = eqx.tree_at(lambda m: m.readout.wout, custom, np.ones((1, 3, 100)) / 100)
    r0 = np.asarray(custom.driver.default_state()) + 0.3
    np.testing.assert_allclose(
        custom.forecast(20, r0),
        eqx.filter_jit(lambda m, r: m._closed_loop_scan(20, r))(custom, r0),
        rtol=1e-13,
    )
    same_weights = eqx.tree_at(lambda r: r.wout, plain.readout, custom.readout.wout)
    assert not np.allclose(  # the features matter: the fused loop would be wrong
        custom.forecast(20, r0), custom.set_readout(same_weights).forecast(20, r0)
    )
    for model in (quad, ens, custom):
        r = model.driver.default_state()
        jaxpr = str(jax.make_jaxpr(lambda r, m=model: m.forecast(5, r))(r))
        assert "orc_esn_forecast" not in jaxpr


def _streaming_esn(chunks=1, dtype=jnp.float64):
    """The model of the streaming tests (and of the fits of
    test_nan_reaches_every_kernel_on_both_paths, which in float64 are then
    the programs of the streaming "single" case)."""
    return orc.forecaster.ESNForecaster(
        3, 60, chunks=chunks, locality=1, seed=2, dtype=dtype
    )


_STREAMING_FIT = dict(spinup=100, beta=1e-6)


def _linear_readout(readout, states):
    """A linear readout's outputs ``(T, chunks * out)`` on states ``(T,
    chunks, res_dim)``, in numpy (batch_readout compiled an eager program per
    operation and shape): chunk c's weights on chunk c's states."""
    assert not readout.nonlin_list and not readout.ensemble
    wout = np.asarray(readout.wout)
    return np.einsum("tcn,con->tco", states, wout).reshape(len(states), -1)


@pytest.mark.parametrize("kind", ["single", "parallel", "multi", "target"])
def test_streaming_training_equals_stored_states(kind):
    U = _lorenz(45)[500:]
    esn = _streaming_esn(chunks=3 if kind == "parallel" else 1)
    kw = dict(_STREAMING_FIT)
    if kind == "multi":
        data = np.stack([U[:1500], U[1500:3000]])
        kw["multi_sequence"] = True
    else:
        data = U[:3900]
    if kind == "target":
        kw["target_seq"] = 0.5 * data[1:]
        data = data[:-1]
    stored, R = orc.forecaster.train_RCForecaster(esn, data, **kw)
    streamed, last = orc.forecaster.train_RCForecaster(
        esn, data, return_states=False, **kw
    )
    R = np.asarray(R)
    np.testing.assert_allclose(last, R[..., -1, :, :], rtol=1e-12, atol=1e-12)
    states = R.reshape((-1,) + R.shape[-2:])
    np.testing.assert_allclose(
        _linear_readout(streamed.readout, states),
        _linear_readout(stored.readout, states),
        rtol=1e-5,
        atol=1e-5,
    )


def test_streaming_controller_equals_stored():
    rng = np.random.default_rng(3)
    u = 0.3 * rng.standard_normal((2100, 1))
    y = np.cumsum(0.01 * u, axis=0) @ np.ones((1, 2))
    ctrl = orc.control.ESNController(2, 1, 40)
    a, R = orc.control.train_RCController(ctrl, y[:-1], u[1:], spinup=20, beta=1e-6)
    b, last = orc.control.train_RCController(
        ctrl, y[:-1], u[1:], spinup=20, beta=1e-6, return_states=False
    )
    R = np.asarray(R)
    np.testing.assert_allclose(last, R[-1], rtol=1e-12)
    np.testing.assert_allclose(
        _linear_readout(a.readout, R[:, None]),
        _linear_readout(b.readout, R[:, None]),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_nan_and_inf_propagate_as_in_xla(dtype):
    """A NaN fed to the reservoir stays NaN on the native path exactly where it
    does on XLA's (the native tanh once capped it to +-1, a plausible state),
    and +-inf saturates the tanh to +-1 on both; through the teacher-forced
    run, the fused fit's states and the closed-loop forecast from them."""
    U = _lorenz(6).astype(dtype)
    bad = U.copy()
    bad[100, 1], bad[200, 0], bad[300, 2] = np.nan, np.inf, -np.inf
    # 1000 nodes x 20 per row: the forecast is the native one-call kernel
    esn = orc.forecaster.ESNForecaster(3, 1000, dtype=dtype, seed=4)
    r0 = esn.driver.default_state()
    # force refuses the data (issue 47 item 5); capture_errors returns its
    # error instead of raising, so the kernels' states can be looked at
    force = orc.capture_errors(lambda u, b: esn.force(u, r0, backend=b))
    got = {}
    for b in ("native", "xla"):
        got[b], errors = force(bad, b)
        got[b] = np.asarray(got[b])
        assert [msg for _, msg, _ in errors.found()] == [
            "ESNForecaster: in_seq contains NaN or inf values (first at row 100)."
        ]
    nan = {b: np.isnan(x) for b, x in got.items()}
    assert nan["native"][100:].all() and not nan["native"][:100].any()
    np.testing.assert_array_equal(nan["native"], nan["xla"])
    # inf alone (no NaN before it): saturated, finite states on both paths
    inf = U.copy()
    inf[50, 0] = np.inf
    for b in ("native", "xla"):
        states, _ = force(inf, b)
        assert np.isfinite(np.asarray(states)).all()
    # the forecast from a NaN state is NaN on both paths; forecast reports the
    # NaN res_state as an error, which capture_errors returns instead of
    # raising, so the kernel's output can be looked at
    forecast = orc.capture_errors(lambda r, b: esn.forecast(20, r, backend=b))
    for b in ("native", "xla"):
        with warnings.catch_warnings():  # untrained and diverged: not the point
            warnings.simplefilter("ignore")
            fc, errors = forecast(got[b][-1], b)
        assert np.isnan(np.asarray(fc)).all()
        assert any("res_state" in msg for _, msg, _ in errors.found())


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_nan_reaches_every_kernel_on_both_paths(dtype):
    """The kernels the test above does not reach: one reservoir step (the
    sparse product), and the fused fit and the blocked statistics update fed
    a NaN initial state (the data passes its own check, so the NaN goes
    through the run, the Gram and the solve): an error, never NaN weights,
    on both paths alike. The fits are those of
    test_streaming_training_equals_stored_states[single] (model, data and
    arguments): in float64 their programs are compiled once."""
    U = _lorenz(4).astype(dtype)
    esn = orc.forecaster.ESNForecaster(3, 300, dtype=dtype, seed=2)
    r = np.array(esn.driver.default_state())
    r[..., 7] = np.nan
    steps = {}
    for b in ("native", "xla"):
        with orc.use_backend(b):  # a fresh function: traced under this backend
            step = jax.jit(lambda u, r: esn.driver.advance(esn.embedding.embed(u), r))
            steps[b] = np.asarray(step(U[0], r))
    # a row is NaN exactly when it reads column 7 (or is row 7 itself, leak)
    np.testing.assert_array_equal(np.isnan(steps["native"]), np.isnan(steps["xla"]))
    assert np.isnan(steps["native"]).any() and not np.isnan(steps["native"]).all()
    esn = _streaming_esn(dtype=dtype)
    data = _lorenz(45)[500:4400].astype(dtype)
    r = np.array(esn.driver.default_state())
    r[..., 7] = np.nan
    # the native fused fit, the native blocked statistics update (streaming
    # training: the fused pass needs the states kept) and XLA's blocked
    # statistics. (batch_size is no case of its own: it only sets how many
    # chunks one solve takes, and with one chunk the program is the same.)
    for b, kw in (("native", {}), ("native", {"return_states": False}), ("xla", {})):
        with pytest.raises(Exception, match="NaN"):
            orc.forecaster.train_RCForecaster(
                esn, data, initial_res_state=r, backend=b, **kw, **_STREAMING_FIT
            )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("rows, cols", [(1, 3), (2, 17), (999, 40)])
def test_native_column_quantiles_equal_jnp_quantile(dtype, rows, cols):
    # the "ppv" thresholds: std::nth_element per column against XLA's sort;
    # the same order statistics and weights, the interpolation fused into an
    # FMA as XLA fuses it on this CPU (at most one ulp where it would not)
    from orc.classifier.train import _column_quantiles_native, column_quantiles

    x = np.tanh(RNG.standard_normal((rows, cols))).astype(dtype)
    x[:, 0] = np.round(x[:, 0], 1)  # ties
    if cols > 5:
        x[rows // 2, 5] = np.nan  # a column with a NaN is NaN throughout
    q = np.asarray((0.0, 0.1, 0.25, 0.5, 0.75, 1.0), dtype)
    batch = np.stack([x, 2 * x])
    clean = np.nan_to_num(x)

    @jax.jit  # ours: the native kernel, the dispatching function under vmap
    def ours(x, batch, clean):  # and its derivative (XLA's)
        return (
            _column_quantiles_native(x, q),
            jax.vmap(lambda a: column_quantiles(a, q))(batch)[1],
            jax.grad(lambda a: column_quantiles(a, q).sum())(clean),
        )

    @jax.jit  # XLA's: jnp.quantile (a program of its own)
    def xla(x, twice, clean):
        return (
            jnp.quantile(x, q, axis=0),
            jnp.quantile(twice, q, axis=0),
            jax.grad(lambda a: jnp.quantile(a, q, axis=0).sum())(clean),
        )

    got, got_batch, got_grad = jax.tree.map(np.asarray, ours(x, batch, clean))
    ref, ref_batch, ref_grad = jax.tree.map(np.asarray, xla(x, batch[1], clean))
    np.testing.assert_array_max_ulp(got, ref, maxulp=1)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    if cols > 5:
        assert np.isnan(got[:, 5]).all()
    np.testing.assert_array_max_ulp(got_batch, ref_batch, maxulp=1)
    np.testing.assert_allclose(got_grad, ref_grad)
