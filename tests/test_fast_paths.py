"""Every fast path computes what the plain path computes.

- the native ELL product (C++ FFI kernel) vs the JAX gather, including nested
  vmap, derivatives and whole models;
- the BLAS update of the ridge statistics (rows read in place, native or by
  a host callback) vs numpy's products;
- the in-place LAPACK ridge solve vs numpy, its fallback and derivatives;
- the fused native ESN run (two threads per step) vs the per-step scan, and
  the scalar, single-thread kernels (``ORC_NATIVE_SIMD=0``,
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
    _gather_matvec,
    _run_scan,
    esn_forecast,
    esn_forecasts,
    esn_run,
    esn_run_stats,
    kernels,
)
from orc._matrix import distinct_columns
from orc._ridge import (
    RidgeStats,
    _gram_xla,
    _solve_xla,
    solve,
    stats_update,
    symmetric,
)

# the reference's run with the plain gather (orc._kernels.XLA)
_esn_run_scan = functools.partial(_run_scan, _gather_matvec)


def ell_matvec(values, indices, x, native):
    """The sparse product of one backend's kernels (programs for the CPU)."""
    return kernels("native" if native else "xla", "cpu").matvec(values, indices, x)


@functools.cache
def _lorenz_record():
    """Lorenz63 at dt 0.01 for tN = 45, integrated once. The tests take its
    first rows: every distinct tN was a diffrax program of its own (six
    programs, ~30 s of a loaded run); a prefix equals the shorter
    integration's record to rounding (bit for bit at tN = 6, 12, 20)."""
    U, _ = orc.data.lorenz63(tN=45, dt=0.01)
    return U


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


def _ell(n, k, lead=()):
    cols = np.stack([distinct_columns(RNG, n, n, k) for _ in range(int(np.prod(lead)))])
    vals = RNG.standard_normal(cols.shape)
    return (
        jnp.asarray(vals.reshape(lead + (n, k))),
        jnp.asarray(cols.reshape(lead + (n, k))),
    )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("n,k", [(300, 7), (301, 16), (203, 40), (64, 33)])
def test_native_matvec_equals_gather(dtype, n, k):
    """Row lengths below, at and past the vector widths (8 doubles, 16
    floats), with and without a masked tail, and row counts that are not a
    multiple of the four rows the vector kernel does at a time."""
    V, C = _ell(n, k, (1,))
    V, C = V[0].astype(dtype), C[0]
    x = jnp.asarray(RNG.standard_normal(n), dtype)
    tol = 1e-5 if dtype == jnp.float32 else 1e-13
    # both in one compiled program (eager, each op of the gather compiles)
    fast, slow = jax.jit(
        lambda V, C, x: (ell_matvec(V, C, x, native=True), _gather_matvec(V, C, x))
    )(V, C, x)
    np.testing.assert_allclose(fast, slow, rtol=tol, atol=tol)


def test_native_matvec_nested_vmap_and_broadcast():
    V, C = _ell(50, 3, (4,))  # 4 chunks
    xs = jnp.asarray(RNG.standard_normal((5, 4, 50)))  # 5 trajectories x 4 chunks

    def per_chunk(native):
        return jax.vmap(lambda v, c, x: ell_matvec(v, c, x, native=native))

    fast = jax.vmap(per_chunk(True), in_axes=(None, None, 0))(V, C, xs)
    slow = jax.vmap(per_chunk(False), in_axes=(None, None, 0))(V, C, xs)
    np.testing.assert_allclose(fast, slow, rtol=1e-13, atol=1e-13)
    # a mapped vector against one unmapped matrix
    fast = jax.vmap(lambda x: ell_matvec(V[0], C[0], x, native=True))(xs[:, 0])
    slow = jax.vmap(lambda x: _gather_matvec(V[0], C[0], x))(xs[:, 0])
    np.testing.assert_allclose(fast, slow, rtol=1e-13)


def test_native_matvec_derivatives():
    V, C = _ell(40, 4, (1,))
    V, C = V[0], C[0]
    x = jnp.asarray(RNG.standard_normal(40))

    def loss(v, x, native):
        return jnp.sum(jnp.sin(ell_matvec(v, C, x, native=native)))

    for argnums in (0, 1):
        g_fast = jax.grad(loss, argnums)(V, x, True)
        g_slow = jax.grad(loss, argnums)(V, x, False)
        np.testing.assert_allclose(g_fast, g_slow, rtol=1e-12, atol=1e-13)
    t_fast = jax.jvp(lambda x: ell_matvec(V, C, x, native=True), (x,), (x,))[1]
    np.testing.assert_allclose(t_fast, _gather_matvec(V, C, x), rtol=1e-12)


def test_models_agree_with_and_without_native_kernel():
    U = _lorenz(12)
    esn = orc.forecaster.ESNForecaster(3, 120, chunks=3, locality=1)
    # the backend is resolved when an entry point is called (here while the
    # user's jax.jit traces) and is a static argument of the compiled program
    with orc.use_backend("xla"):
        slow_model, slow_R = jax.jit(
            lambda m, u: orc.forecaster.train_RCForecaster(m, u)
        )(esn, U)
        slow_fc = jax.jit(lambda m, r: m.forecast(50, r))(slow_model, slow_R[-1])
    fast_model, fast_R = orc.forecaster.train_RCForecaster(esn, U, backend="native")
    fast_fc = fast_model.forecast(50, fast_R[-1])
    # the two really are different programs (no cache hit across backends)
    assert not np.array_equal(fast_R, slow_R) or not np.array_equal(fast_fc, slow_fc)
    np.testing.assert_allclose(fast_R, slow_R, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(fast_fc, slow_fc, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", ["native", "callback", "xla"])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_cpu_stats_update_equals_numpy(path, dtype, monkeypatch):
    """The update of the ridge statistics (native FFI call in place, the host
    callback the native backend falls back to without the kernels, or XLA's
    products) adds exactly rows start:stop:
    the Gram's upper triangle and the cross term equal numpy's products of
    those rows, with and without chunks (whose rows are strided in memory),
    batched under vmap and jit, and it differentiates like the plain
    products. The two large cases have enough work for the native float64
    Gram kernel (CPUs with AVX2 and FMA) to split the rows of the Gram between
    two threads, over several blocks of steps, with sizes that are multiples
    of neither tile side (6 x 8); those two on the native path only (the
    callback's and XLA's products have no size threshold, and every case is
    a program of its own to compile)."""
    tol = 1e-12 if dtype == jnp.float64 else 1e-4
    if path == "callback":  # the native backend without its kernels
        monkeypatch.setattr(_native, "stats_update_target", lambda dtype: None)
    cases = [((257, 30), 3, (0, 257)), ((257, 30), 2, (17, 200))]
    cases += [((100, 3, 20), 4, (5, 99))]
    if path == "native":  # the Gram kernel's two-thread split (work >= 1e8)
        cases += [((700, 397), 3, (3, 690)), ((260, 3, 397), 2, (1, 258))]
    cases += [((60, 2, 7), 1, (60, 60))]  # last: the error case below uses it
    with orc.use_backend("xla" if path == "xla" else "native"):
        for shape, out, (start, stop) in cases:
            x = RNG.standard_normal(shape)
            y = RNG.standard_normal(shape[:-1] + (out,))
            xt = np.moveaxis(x[start:stop], 1, 0) if x.ndim == 3 else x[start:stop]
            yt = np.moveaxis(y[start:stop], 1, 0) if y.ndim == 3 else y[start:stop]
            g0 = RNG.standard_normal(xt.shape[:-2] + (shape[-1],) * 2)
            g0 = g0 + np.swapaxes(g0, -1, -2)
            c0 = RNG.standard_normal(xt.shape[:-2] + (shape[-1], out))
            ref_g = g0 + np.swapaxes(xt, -1, -2) @ xt
            ref_c = c0 + np.swapaxes(xt, -1, -2) @ yt
            stats = RidgeStats(
                jnp.asarray(g0, dtype), jnp.asarray(c0, dtype), jnp.asarray(2.0, dtype)
            )
            # a fresh function per call: traced under this test's backend
            got = jax.jit(lambda s, x, y: stats_update(s, x, y, start, stop))(  # noqa: B023
                stats, jnp.asarray(x, dtype), jnp.asarray(y, dtype)
            )
            assert got.gram.dtype == dtype and got.cross.dtype == dtype
            assert float(got.count) == 2 + stop - start
            np.testing.assert_allclose(
                symmetric(got.gram), ref_g, rtol=tol, atol=tol * 30
            )
            np.testing.assert_allclose(
                jnp.triu(got.gram), np.triu(ref_g), rtol=tol, atol=tol * 30
            )
            np.testing.assert_allclose(got.cross, ref_c, rtol=tol, atol=tol * 30)
        with pytest.raises(ValueError, match="rows"):
            stats_update(stats, jnp.asarray(x, dtype), jnp.asarray(y, dtype), 3, 61)
        if dtype == jnp.float64:
            x = jnp.asarray(RNG.standard_normal((30, 6)))
            y = jnp.asarray(RNG.standard_normal((30, 2)))
            z = RidgeStats(jnp.zeros((6, 6)), jnp.zeros((6, 2)), jnp.zeros(()))

            def loss(x, y):
                s = stats_update(z, x, y, 4, 25)
                return jnp.sum(jnp.cos(symmetric(s.gram))) + jnp.sum(jnp.sin(s.cross))

            def plain(x, y):
                xs, ys = x[4:25], y[4:25]
                return jnp.sum(jnp.cos(xs.T @ xs)) + jnp.sum(jnp.sin(xs.T @ ys))

            for a, b in zip(
                jax.grad(loss, (0, 1))(x, y), jax.grad(plain, (0, 1))(x, y), strict=True
            ):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        xs = jnp.asarray(RNG.standard_normal((3, 40, 5)), dtype)
        ys = jnp.asarray(RNG.standard_normal((3, 40, 2)), dtype)
        zero = RidgeStats(
            jnp.zeros((5, 5), dtype), jnp.zeros((5, 2), dtype), jnp.zeros((), dtype)
        )
        batched = jax.vmap(lambda x, y: stats_update(zero, x, y, 1, 39))(xs, ys)
        np.testing.assert_allclose(
            symmetric(batched.gram[2]), _gram_xla(xs[2, 1:39]), rtol=tol, atol=tol * 30
        )
        np.testing.assert_allclose(
            batched.cross[2], xs[2, 1:39].T @ ys[2, 1:39], rtol=tol, atol=tol * 30
        )


def _stats(x, y, stale=True):
    """Statistics whose lower triangle is junk, as the Gram update leaves it."""
    g = x.T @ x
    if stale:
        g = np.triu(g) + np.tril(RNG.standard_normal(g.shape), -1)
    return RidgeStats(
        jnp.asarray(g), jnp.asarray(x.T @ y), jnp.asarray(len(x), g.dtype)
    )


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
    twice = jax.tree.map(lambda a: jnp.stack([a, 2 * a]), stats)
    ref2 = np.linalg.solve(2 * x.T @ x + beta * np.eye(60), 2 * x.T @ y).T
    for got in (jax.vmap(lambda s: solve(s, beta))(twice), solve(twice, beta)):
        np.testing.assert_allclose(got[0], ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(got[1], ref2, rtol=tol, atol=tol)


def test_native_ridge_solve_fallback_and_errors():
    """A Gram that is not positive definite gets the minimum-norm solution from
    the Gram the kernel left intact (alone and under vmap, next to a problem
    that factors); NaN statistics raise; derivatives match XLA's solve."""
    x, y = RNG.standard_normal((20, 50)), RNG.standard_normal((20, 2))  # rank 20
    pinv = (np.linalg.pinv(x.T @ x) @ x.T @ y).T
    stats = _stats(x, y)
    np.testing.assert_allclose(jax.jit(solve)(stats, 0.0), pinv, atol=1e-8)
    full = _stats(RNG.standard_normal((200, 50)), RNG.standard_normal((200, 2)))
    both = jax.tree.map(lambda a, b: jnp.stack([a, b]), stats, full)
    got = jax.jit(jax.vmap(lambda s: solve(s, 0.0)))(both)
    np.testing.assert_allclose(got[0], pinv, atol=1e-8)
    np.testing.assert_allclose(got[1], solve(full, 0.0), rtol=1e-12)
    bad = RidgeStats(stats.gram.at[3, 7].set(jnp.nan), stats.cross, stats.count)
    with pytest.raises(Exception, match="contain NaN/inf"):
        jax.block_until_ready(solve(bad, 1e-3))

    def loss(solver, g):
        return jnp.sum(jnp.sin(solver(g)))

    g = jnp.triu(full.gram)
    # jitted: eager, every operation of the derivative compiles
    fast = jax.jit(
        jax.grad(
            lambda g: loss(
                lambda g: solve(RidgeStats(g, full.cross, full.count), 1e-2), g
            )
        )
    )(g)
    slow = jax.jit(
        jax.grad(lambda g: loss(lambda g: _solve_xla(g, full.cross, 1e-2).T, g))
    )(g)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)


def test_native_esn_activation_is_tanh():
    """With W = 0 and leak 1 the fused run returns tanh(drive): the kernel's
    own tanh agrees with numpy's to a few ulp (relative) from 1e-300 to
    beyond saturation, with the sign of its argument."""
    grid = np.concatenate([[0.0, 1e-300, -1e-12, 1e-6], np.linspace(-40, 40, 4001)])
    drive = jnp.asarray(grid.reshape(-1, 1) * np.ones((1, 3)))
    zeros, idx = jnp.zeros((3, 2)), jnp.zeros((3, 2), jnp.int32)
    got = esn_run(zeros, idx, drive, jnp.zeros(3), 1.0)[:, 0]
    np.testing.assert_allclose(got, np.tanh(grid), rtol=1e-15, atol=0)
    assert np.all(np.sign(got) == np.sign(grid))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("n,lead", [(1000, (1,)), (60, (1,)), (701, (3,))])
def test_native_esn_run_equals_scan(dtype, n, lead):
    """The fused run (two threads at 1000 nodes x 20 non-zeros and at 3 chunks
    of 701 x 14, where the two halves meet inside the middle chunk; one thread
    at 60 nodes) equals the per-step scan, for one and several reservoirs in
    the bank, under jit and vmap. (A case of 3 chunks of 300 x 6 was dropped:
    5400 non-zeros x 333 steps is two threads too, as the 701 case.)"""
    k = max(1, n // 50)
    values, indices = _ell(n, k, lead)
    values = (values * 0.8 / np.sqrt(k)).astype(dtype)
    drive = jnp.asarray(RNG.standard_normal((333,) + lead + (n,)), dtype)
    r0 = jnp.asarray(RNG.uniform(-1, 1, lead + (n,)), dtype)
    tol = 1e-13 if dtype == jnp.float64 else 2e-6
    scan = jax.jit(_esn_run_scan)
    ref = scan(values, indices, drive, r0, 0.6)
    got = jax.jit(esn_run)(values, indices, drive, r0, 0.6)
    assert got.dtype == dtype and got.shape == drive.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    two = jnp.stack([r0, -r0])
    batched = jax.vmap(lambda r: esn_run(values, indices, drive, r, 0.6))(two)
    np.testing.assert_allclose(
        batched[1], scan(values, indices, drive, -r0, 0.6), rtol=tol, atol=tol
    )


_SCALAR_CHECK = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import functools
from orc._kernels import _gather_matvec, _run_scan, ell_matvec, esn_run, esn_run_stats
from orc._matrix import distinct_columns
_esn_run_scan = functools.partial(_run_scan, _gather_matvec)
from orc._ridge import RidgeStats
rng = np.random.default_rng(5)
# the fused run + statistics: here run and update follow each other
n, c, t = 300, 3, 400
idx = jnp.asarray(np.stack([distinct_columns(rng, n, n, 6) for _ in range(c)]))
v = jnp.asarray(rng.standard_normal((c, n, 6)) * 0.3)
win = jnp.asarray(rng.uniform(-1, 1, (c, n, 2)))
u = jnp.asarray(rng.standard_normal((t, c, 2)))
y = jnp.asarray(rng.standard_normal((t, c, 2)))
r0 = jnp.zeros((c, n))
# (each check is one compiled program: eager, every operation compiles)
@jax.jit
def fit(v, idx, win, u, r0, y):
    states, stats = esn_run_stats(v, idx, win, u, 0.5, r0, 0.6, RidgeStats.zeros(n, 2, c, jnp.float64), y, 7, t)
    ref = _esn_run_scan(v, idx, jnp.einsum("cnw,tcw->tcn", win, u) + 0.5, r0, 0.6)
    return states, stats, ref
states, stats, ref = fit(v, idx, win, u, r0, y)
np.testing.assert_allclose(states, ref, rtol=1e-12, atol=1e-12)
x = np.asarray(ref)[7:]
for ci in range(c):
    g = np.triu(np.asarray(stats.gram[ci]))
    np.testing.assert_allclose(g, np.triu(x[:, ci].T @ x[:, ci]), rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(stats.cross[ci], x[:, ci].T @ np.asarray(y)[7:, ci], rtol=1e-11, atol=1e-9)
# the closed-loop forecast in one call, here on one thread
from orc._kernels import _forecast_scan, esn_forecast
_esn_forecast_scan = functools.partial(_forecast_scan, _gather_matvec)
n, k = 600, 30
idx = jnp.asarray(distinct_columns(rng, n, n, k))[None]
v = jnp.asarray(rng.standard_normal((1, n, k)) * 0.15)
win = jnp.asarray(rng.uniform(-1, 1, (1, n, 3)))
wout = jnp.asarray(rng.standard_normal((1, 3, n)) * 0.01)
window = jnp.asarray([[0, 1, 2]], jnp.int32)
r0 = jnp.asarray(rng.uniform(-1, 1, (1, n)))
got, ref = jax.jit(lambda *a: (esn_forecast(*a, 40), _esn_forecast_scan(*a, 40)))(
    v, idx, win, window, 0.3, wout, r0, 0.6)
np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)
for dtype, tol in ((jnp.float64, 1e-13), (jnp.float32, 2e-6)):
    for n, k in ((1000, 21), (64, 3)):
        idx = jnp.asarray(distinct_columns(rng, n, n, k))[None]
        v = jnp.asarray(rng.standard_normal((1, n, k)) * 0.8 / np.sqrt(k), dtype)
        drive = jnp.asarray(rng.standard_normal((50, 1, n)), dtype)
        r0 = jnp.asarray(rng.uniform(-1, 1, (1, n)), dtype)
        got, ref, mv, mv_ref = jax.jit(lambda v, idx, drive, r0: (
            esn_run(v, idx, drive, r0, 0.6), _esn_run_scan(v, idx, drive, r0, 0.6),
            ell_matvec(v[0], idx[0], r0[0]), _gather_matvec(v[0], idx[0], r0[0]),
        ))(v, idx, drive, r0)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
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
    loop; one thread) compute what the references compute. The variant is
    chosen once per process, so each runs in a fresh interpreter."""
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _SCALAR_CHECK],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def _fit_case(n, chunks, steps, width, dtype, seed):
    rng = np.random.default_rng(seed)
    k = max(1, n // 50)
    cols = np.stack([distinct_columns(rng, n, n, k) for _ in range(chunks)])
    values = jnp.asarray(rng.standard_normal(cols.shape) * 0.8 / np.sqrt(k), dtype)
    win = jnp.asarray(rng.uniform(-0.5, 0.5, (chunks, n, width)), dtype)
    windows = jnp.asarray(rng.standard_normal((steps, chunks, width)), dtype)
    targets = jnp.asarray(rng.standard_normal((steps, chunks, 3)), dtype)
    r0 = jnp.asarray(rng.uniform(-1, 1, (chunks, n)), dtype)
    return values, jnp.asarray(cols), win, windows, r0, targets


def _numpy_fit(values, indices, win, windows, r0, targets, bias, leak, start, stop):
    """The drive, the leaky-tanh run and the statistics in plain numpy."""
    v, idx = np.asarray(values, np.float64), np.asarray(indices)
    drive = np.einsum("cnw,tcw->tcn", np.asarray(win, np.float64), np.asarray(windows))
    drive = drive + bias
    r = np.asarray(r0, np.float64)
    states = np.empty(drive.shape)
    for t in range(drive.shape[0]):
        wr = np.einsum("cnk,cnk->cn", v, np.take_along_axis(r[:, None, :], idx, 2))
        r = leak * np.tanh(wr + drive[t]) + (1 - leak) * r
        states[t] = r
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
    stats0 = RidgeStats.zeros(n, 3, chunks, dtype)
    fn = jax.jit(
        lambda *a: esn_run_stats(*a[:4], 0.3, a[4], 0.6, stats0, a[5], start, stop)
    )
    states, stats = fn(values, indices, win, windows, r0, targets)
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
    stats0 = RidgeStats.zeros(n, 3, chunks, jnp.float64)

    def fit(r, stats, lo, hi):
        return esn_run_stats(
            values, indices, win, windows, 0.1, r, 0.6, stats, targets, lo, hi
        )

    fit_whole = jax.jit(lambda r: fit(r, stats0, 0, steps))
    _, whole = fit_whole(r0)
    _, half = jax.jit(lambda r: fit(r, stats0, 0, 400))(r0)
    _, both = jax.jit(lambda r: fit(r, half, 400, steps))(r0)
    tol = 1e-12 * float(jnp.abs(whole.gram).max())  # rounding of cancelling sums
    np.testing.assert_allclose(np.triu(both.gram), np.triu(whole.gram), atol=tol)
    np.testing.assert_allclose(both.cross, whole.cross, atol=tol)

    pair = jnp.stack([r0, -r0])
    batched = jax.jit(jax.vmap(lambda r: fit(r, stats0, 0, steps)))(pair)
    _, second = fit_whole(-r0)
    np.testing.assert_allclose(
        np.triu(batched[1].gram[1]), np.triu(second.gram), atol=tol
    )

    small = _fit_case(30, 1, 40, 2, jnp.float64, 3)
    s0 = RidgeStats.zeros(30, 3, 1, jnp.float64)

    def loss(scale):
        v, i, w, u, r, y = small
        st = esn_run_stats(v * scale, i, w, u, 0.1, r, 0.6, s0, y, 3, 40)[1]
        return jnp.sum(jnp.triu(st.gram)) + jnp.sum(st.cross)

    grad = jax.grad(loss)(1.0)
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
    BLAS thread count as it found it, and trains what the plain path trains."""
    U = _lorenz(20)
    esn = orc.forecaster.ESNForecaster(3, 700, seed=1)
    train = jax.jit(lambda m, u: orc.forecaster.train_RCForecaster(m, u, beta=1e-6))
    assert "orc_esn_fit" in train.lower(esn, U).as_text()
    control = _openblas_threads()
    if control is not None:
        control[1](2)
    fast_model, fast_R = train(esn, U)
    if control is not None:
        assert control[0]() == 2
    slow_model, slow_R = orc.forecaster.train_RCForecaster(
        esn, U, beta=1e-6, backend="xla"
    )
    np.testing.assert_allclose(fast_R, slow_R, rtol=1e-11, atol=1e-12)
    # the weights of this ill-conditioned fit differ at 1e-5 between Gram and
    # solve implementations; the fitted one-step predictions agree closely
    fast_pred = jnp.einsum("tcn,con->tco", fast_R, fast_model.readout.wout)
    slow_pred = jnp.einsum("tcn,con->tco", slow_R, slow_model.readout.wout)
    np.testing.assert_allclose(fast_pred, slow_pred, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(fast_pred[:-1, 0], U[1:], atol=0.05)


def test_native_esn_run_derivatives():
    """Derivatives of the fused run (through the scan) match central
    differences, for the leak, the drive and the matrix values."""
    values, indices = _ell(40, 4, (1,))
    values = values * 0.3
    drive = jnp.asarray(RNG.standard_normal((25, 1, 40)))
    r0 = jnp.zeros((1, 40))

    def loss(leak, drive, values):
        return jnp.sum(jnp.sin(esn_run(values, indices, drive, r0, leak)))

    grads = jax.grad(loss, argnums=(0, 1, 2))(0.7, drive, values)
    loss = jax.jit(loss)  # the six evaluations: one program
    h = 1e-6
    fd = (loss(0.7 + h, drive, values) - loss(0.7 - h, drive, values)) / (2 * h)
    np.testing.assert_allclose(grads[0], fd, rtol=1e-6)
    e = jnp.zeros_like(drive).at[3, 0, 5].set(h)
    fd = (loss(0.7, drive + e, values) - loss(0.7, drive - e, values)) / (2 * h)
    np.testing.assert_allclose(grads[1][3, 0, 5], fd, rtol=1e-6)
    e = jnp.zeros_like(values).at[0, 7, 2].set(h)
    fd = (loss(0.7, drive, values + e) - loss(0.7, drive, values - e)) / (2 * h)
    np.testing.assert_allclose(grads[2][0, 7, 2], fd, rtol=1e-6)


def test_models_force_with_fused_run_equals_per_step():
    """Forecaster, parallel forecaster and regressor states from the fused run (blocks of SEQ_BLOCK plus a tail) equal one advance() per
    step without the native kernels."""
    from orc.drivers import SEQ_BLOCK

    u = jnp.asarray(RNG.standard_normal((SEQ_BLOCK * 2 + 77, 3)))
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
    from orc.embeddings import _window_indices

    rng = np.random.default_rng(seed)
    cols = np.stack([distinct_columns(rng, n, n, k) for _ in range(chunks)])
    values = jnp.asarray(rng.standard_normal(cols.shape) * 0.9 / np.sqrt(k), dtype)
    out_dim = chunks * per_chunk
    window = _window_indices(out_dim, chunks, locality, True, False)
    win = jnp.asarray(rng.uniform(-0.5, 0.5, (chunks, n, window.shape[1])), dtype)
    wout = rng.standard_normal((chunks, per_chunk, n)) * 0.3 / np.sqrt(n)
    wout = jnp.asarray(wout, dtype)
    r0 = jnp.asarray(rng.uniform(-1, 1, (chunks, n)), dtype)
    return values, jnp.asarray(cols), win, window, wout, r0


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
    numpy."""
    values, indices, win, window, wout, r0 = _forecast_case(
        n, chunks, k, per_chunk, locality, dtype, 4
    )
    fn = jax.jit(lambda *a: esn_forecast(*a[:4], 0.2, *a[4:], 0.6, 80))
    got = fn(values, indices, win, jnp.asarray(window), wout, r0)
    ref = _numpy_forecast(values, indices, win, window, 0.2, wout, r0, 0.6, 80)
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    assert got.shape == (80, chunks * per_chunk) and got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    one = jax.jit(lambda *a: esn_forecast(*a[:4], 0.2, *a[4:], 0.6, 1))
    np.testing.assert_allclose(
        one(values, indices, win, jnp.asarray(window), wout, r0), ref[:1], atol=tol
    )
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
    wouts = jnp.stack([wout * (1 + 0.2 * b) for b in range(readouts)])
    r0s = jnp.asarray(rng.uniform(-1, 1, (starts, chunks, n)), dtype)
    fn = jax.jit(lambda *a: esn_forecasts(*a[:4], 0.2, *a[4:], 0.6, 60))
    got = fn(values, indices, win, jnp.asarray(window), wouts, r0s)
    if orc._strategy.resolve(None) == "native" and _native.native_available():
        text = fn.lower(values, indices, win, jnp.asarray(window), wouts, r0s).as_text()
        assert "orc_esn_forecast_batch" in text  # the native call, not the scan
    assert got.shape == (readouts, starts, 60, chunks * per_chunk)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    for b in range(readouts):
        for s in range(starts):
            ref = _numpy_forecast(
                values, indices, win, window, 0.2, wouts[b], r0s[s], 0.6, 60
            )
            np.testing.assert_allclose(got[b, s], ref, rtol=tol, atol=tol)
    if dtype == jnp.float32:
        return
    pair = jnp.stack([r0s, -r0s])
    batched = jax.jit(jax.vmap(lambda r: fn(values, indices, win, window, wouts, r)))
    np.testing.assert_allclose(batched(pair)[1], fn(values, indices, win, window, wouts, -r0s), rtol=1e-13, atol=1e-14)  # fmt: skip

    def loss(scale):
        out = esn_forecasts(
            values, indices, win, window, 0.2, wouts * scale, r0s, 0.6, 20
        )
        return jnp.sum(jnp.sin(out))

    grad = jax.grad(loss)(1.0)
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

    pair = jnp.stack([r0, -r0])
    batched = jax.jit(jax.vmap(fc))(pair)
    np.testing.assert_allclose(batched[1], jax.jit(fc)(-r0), rtol=1e-13, atol=1e-14)

    def loss(scale):
        return jnp.sum(jnp.sin(fc(r0, scale)))

    grad = jax.grad(loss)(1.0)
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
    U = _lorenz(30)
    U = jnp.asarray(U[500:2500])
    U6 = jnp.concatenate([U, U[:, ::-1]], axis=1)
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
        r = states[-1]
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
        fast = model.forecast(150, r)
        slow = eqx.filter_jit(lambda m, r: m._closed_loop_scan(150, r))(model, r)
        scale = float(jnp.max(jnp.abs(slow)))
        np.testing.assert_allclose(fast[:10], slow[:10], rtol=0, atol=1e-11 * scale)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-7 * scale)
        warm = data[1500:1700]
        slow_ic = eqx.filter_jit(
            lambda m, w: m._closed_loop_scan(
                100, m.force(w, m.driver.default_state())[-1]
            )
        )(model, warm)
        fast_ic = model.forecast_from_IC(100, warm)
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
    custom = eqx.tree_at(lambda m: m.readout.wout, custom, jnp.ones((1, 3, 100)) / 100)
    r0 = custom.driver.default_state() + 0.3
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


@pytest.mark.parametrize("kind", ["single", "parallel", "multi", "target"])
def test_streaming_training_equals_stored_states(kind):
    U = _lorenz(45)
    U = U[500:]
    chunks = 3 if kind == "parallel" else 1
    esn = orc.forecaster.ESNForecaster(3, 60, chunks=chunks, locality=1, seed=2)
    kw = dict(spinup=100, beta=1e-6)
    if kind == "multi":
        data = jnp.stack([U[:1500], U[1500:3000]])
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
    np.testing.assert_allclose(last, R[..., -1, :, :], rtol=1e-12, atol=1e-12)
    states = R.reshape((-1,) + R.shape[-2:])
    np.testing.assert_allclose(
        streamed.readout.batch_readout(states),
        stored.readout.batch_readout(states),
        rtol=1e-5,
        atol=1e-5,
    )


def test_streaming_controller_equals_stored():
    rng = np.random.default_rng(3)
    u = jnp.asarray(0.3 * rng.standard_normal((2100, 1)))
    y = jnp.cumsum(0.01 * u, axis=0) @ jnp.ones((1, 2))
    ctrl = orc.control.ESNController(2, 1, 40)
    a, R = orc.control.train_RCController(ctrl, y[:-1], u[1:], spinup=20, beta=1e-6)
    b, last = orc.control.train_RCController(
        ctrl, y[:-1], u[1:], spinup=20, beta=1e-6, return_states=False
    )
    np.testing.assert_allclose(last, R[-1], rtol=1e-12)
    np.testing.assert_allclose(
        a.readout.batch_readout(R), b.readout.batch_readout(R), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_nan_and_inf_propagate_as_in_xla(dtype):
    """A NaN fed to the reservoir stays NaN on the native path exactly where it
    does on XLA's (the native tanh once capped it to +-1, a plausible state),
    and +-inf saturates the tanh to +-1 on both; through the teacher-forced
    run, the fused fit's states and the closed-loop forecast from them."""
    U = _lorenz(6)
    U = jnp.asarray(U, dtype)
    bad = U.at[100, 1].set(jnp.nan).at[200, 0].set(jnp.inf).at[300, 2].set(-jnp.inf)
    # 1000 nodes x 20 per row: the forecast is the native one-call kernel
    esn = orc.forecaster.ESNForecaster(3, 1000, dtype=dtype, seed=4)
    r0 = esn.driver.default_state()
    # force refuses the data (issue 47 item 5); capture_errors returns its
    # error instead of raising, so the kernels' states can be looked at
    force = orc.capture_errors(lambda u, b: esn.force(u, r0, backend=b))
    got = {}
    for b in ("native", "xla"):
        got[b], errors = force(bad, b)
        assert [msg for _, msg, _ in errors.found()] == [
            "ESNForecaster: in_seq contains NaN or inf values (first at row 100)."
        ]
    nan = {b: np.isnan(np.asarray(x)) for b, x in got.items()}
    assert nan["native"][100:].all() and not nan["native"][:100].any()
    np.testing.assert_array_equal(nan["native"], nan["xla"])
    # inf alone (no NaN before it): saturated, finite states on both paths
    inf = U.at[50, 0].set(jnp.inf)
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
    on both paths alike."""
    U = _lorenz(4)
    U = jnp.asarray(U, dtype)
    esn = orc.forecaster.ESNForecaster(3, 300, dtype=dtype, seed=2)
    r = esn.driver.default_state().at[..., 7].set(jnp.nan)
    p = esn.embedding.embed(U[0])
    steps = {}
    for b in ("native", "xla"):
        with orc.use_backend(b):
            steps[b] = np.asarray(esn.driver.advance(p, r))
    # a row is NaN exactly when it reads column 7 (or is row 7 itself, leak)
    np.testing.assert_array_equal(np.isnan(steps["native"]), np.isnan(steps["xla"]))
    assert np.isnan(steps["native"]).any() and not np.isnan(steps["native"]).all()
    for b in ("native", "xla"):
        for batch_size in (None, 64):  # fused fit / blocked statistics
            with pytest.raises(Exception, match="NaN"):
                orc.forecaster.train_RCForecaster(
                    esn, U, initial_res_state=r, batch_size=batch_size, backend=b
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
    q = jnp.asarray((0.0, 0.1, 0.25, 0.5, 0.75, 1.0), dtype)
    ours = np.asarray(jax.jit(_column_quantiles_native)(jnp.asarray(x), q))
    ref = np.asarray(jax.jit(lambda a: jnp.quantile(a, q, axis=0))(jnp.asarray(x)))
    np.testing.assert_array_max_ulp(ours, ref, maxulp=1)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    if cols > 5:
        assert np.isnan(ours[:, 5]).all()
    # the dispatching function, under vmap and for derivatives (XLA's)
    batch = jnp.stack([jnp.asarray(x), 2 * jnp.asarray(x)])
    np.testing.assert_array_max_ulp(
        np.asarray(jax.jit(jax.vmap(lambda a: column_quantiles(a, q)))(batch))[1],
        np.asarray(jnp.quantile(batch[1], q, axis=0)),
        maxulp=1,
    )
    clean = jnp.asarray(np.nan_to_num(x))
    np.testing.assert_allclose(  # (jitted: eager, each op of the VJP compiles)
        jax.jit(jax.grad(lambda a: column_quantiles(a, q).sum()))(clean),
        jax.jit(jax.grad(lambda a: jnp.quantile(a, q, axis=0).sum()))(clean),
    )
