"""The pure-JAX reservoir builder (:mod:`orc._construct`) against independent
references: numpy's dense eigenvalues, counting, and the host estimate."""

from __future__ import annotations

import contextlib
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # (a test dependency) without it, numpy's own threads

    def threadpool_limits(**_):
        return contextlib.nullcontext()


from _helpers import CPU_ONLY
from orc import _construct
from orc._construct import (
    _scale_to_radius,
    distinct_columns,
    reservoir_bank,
    spectral_radius,
    uniform_input_matrix,
    unscaled_bank,
)
from orc._matrix import nonzeros_per_row
from orc.utils.numerics import spectral_radius_np

# reservoir_bank and spectral_radius are jitted themselves; the tests call
# them directly, so that tests of one size share its compiled program, and
# bank_jit (a user's jax.jit with the static arguments the docstring names)
# where a test builds a program of its own anyway (dense method, float32)
STATIC = ("n", "density", "chunks", "dtype", "method")
bank_jit = jax.jit(reservoir_bank, static_argnames=STATIC)
# one batched program (over keys and radii) for the two vmap tests, of the
# size of test_bank_spectral_radius_matches_numpy[50-0.1]
bank_vmap = jax.jit(jax.vmap(lambda key, r: reservoir_bank(key, 50, 0.1, r, chunks=3)))


def _dense_np(values, columns):
    values, columns = np.asarray(values), np.asarray(columns)
    n = values.shape[0]
    dense = np.zeros((n, n))
    np.add.at(dense, (np.arange(n)[:, None], columns), values)
    return dense


def _radius_np(values, columns):
    # numpy's dense eigenvalues on one BLAS thread: OpenBLAS's threads spin
    # against the other test worker's on a machine as loaded as the test run
    # (eigvals of 400 x 400 measured at 3.6 s on two threads, 0.07 s on one)
    with threadpool_limits(limits=1, user_api="blas"):
        return float(np.max(np.abs(np.linalg.eigvals(_dense_np(values, columns)))))


def _random_ell(seed, n, k):
    """An ELL matrix drawn with numpy (independent of the code under test)."""
    rng = np.random.default_rng(seed)
    columns = np.stack([rng.choice(n, k, replace=False) for _ in range(n)])
    return rng.standard_normal((n, k)), columns.astype(np.int32)


def test_distinct_columns_rows_are_distinct_and_in_range():
    # k < n_cols < n_rows (the size of the marginals test: its program),
    # k == n_cols, one column, n_cols > n_rows (the size of the jit/vmap test)
    for n_rows, n_cols, k in [
        (20000, 50, 7),
        (100, 10, 10),
        (64, 1, 1),
        (200, 1000, 40),
    ]:
        cols = np.asarray(distinct_columns(jax.random.key(1), n_rows, n_cols, k))
        assert cols.shape == (n_rows, k) and cols.dtype == np.int32
        assert cols.min() >= 0 and cols.max() < n_cols
        assert all(len(set(row)) == k for row in cols.tolist())
    with pytest.raises(ValueError, match="0 < k <= n_cols"):
        distinct_columns(jax.random.key(0), 3, 4, 5)


def test_distinct_columns_marginals_uniform():
    # 20000 rows, 7 of 50 columns: each column is taken with probability
    # 7/50 per row. Pearson's statistic (49 degrees of freedom, sd ~ 9.9)
    # stays far below the bound for any fair sampler
    n_rows, n_cols, k = 20000, 50, 7
    cols = np.asarray(distinct_columns(jax.random.key(2), n_rows, n_cols, k))
    counts = np.bincount(cols.ravel(), minlength=n_cols)
    expected = n_rows * k / n_cols
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < 49 + 8 * math.sqrt(2 * 49)


def test_distinct_columns_subsets_uniform():
    # a uniform k-subset, not only uniform marginals: 2 of 5 columns gives 10
    # subsets, each with probability 1/10 (sd of a count ~ 67 for 50000 rows)
    n_rows = 50000
    cols = np.sort(np.asarray(distinct_columns(jax.random.key(3), n_rows, 5, 2)), 1)
    pairs = list(itertools.combinations(range(5), 2))
    counts = np.array([np.sum((cols[:, 0] == a) & (cols[:, 1] == b)) for a, b in pairs])
    assert counts.sum() == n_rows
    assert np.all(np.abs(counts - n_rows / 10) < 6 * math.sqrt(n_rows * 0.1 * 0.9))


def test_distinct_columns_jit_vmap():
    # distinct_columns is jitted (sizes static): the loop runs the program of
    # test_distinct_columns_rows_are_distinct_and_in_range's last size, the
    # vmap the batched one
    keys = jax.random.split(jax.random.key(4), 3)
    batch = np.asarray(jax.vmap(lambda k: distinct_columns(k, 200, 1000, 40))(keys))
    for i in range(3):
        np.testing.assert_array_equal(
            batch[i], distinct_columns(keys[i], 200, 1000, 40)
        )
    assert not np.array_equal(batch[0], batch[1])


@pytest.mark.parametrize("n, density", [(50, 0.1), (400, 0.02)])
def test_bank_spectral_radius_matches_numpy(n, density):
    values, columns = reservoir_bank(jax.random.key(n), n, density, 0.85, chunks=3)
    values, columns = np.asarray(values), np.asarray(columns)
    k = nonzeros_per_row(n, density)
    assert values.shape == columns.shape == (3, n, k)
    assert values.dtype == jnp.float64 and columns.dtype == jnp.int32
    for c in range(3):
        assert _radius_np(values[c], columns[c]) == pytest.approx(0.85, rel=1e-6)
    assert not np.array_equal(columns[0], columns[1])


def test_bank_dense_method_matches_numpy():
    values, columns = bank_jit(
        jax.random.key(5), 120, 0.05, 1.3, chunks=2, method="dense"
    )
    values, columns = np.asarray(values), np.asarray(columns)
    for c in range(2):
        assert _radius_np(values[c], columns[c]) == pytest.approx(1.3, rel=1e-10)


def test_bank_vmapped_spectral_radii():
    radii = np.array([0.3, 0.9, 1.7, 4.0])
    keys = jnp.stack([jax.random.key(6)] * 4)  # one key: the same draw
    values, columns = map(np.asarray, bank_vmap(keys, radii))
    assert values.shape == (4, 3, 50, nonzeros_per_row(50, 0.1))
    for b, r in enumerate(radii):
        np.testing.assert_array_equal(columns[b], columns[0])  # same draw
        for c in range(3):
            assert _radius_np(values[b, c], columns[b, c]) == pytest.approx(r, rel=1e-6)


def test_bank_is_the_unscaled_draw_scaled():
    n, density = 400, 0.02  # the program of test_bank_spectral_radius_matches_numpy
    raw, raw_cols = map(
        np.asarray, unscaled_bank(jax.random.key(7), n, density, chunks=3)
    )
    values, columns = reservoir_bank(jax.random.key(7), n, density, 0.7, chunks=3)
    values, columns = np.asarray(values), np.asarray(columns)
    np.testing.assert_array_equal(columns, raw_cols)
    for c in range(3):
        factor = 0.7 / _radius_np(raw[c], raw_cols[c])
        np.testing.assert_allclose(values[c], raw[c] * factor, rtol=1e-9)


def test_unscaled_values_standard_normal():
    # 643200 draws: 67 keys through the program of
    # test_bank_is_the_unscaled_draw_scaled (3 * 400 * 8 draws each)
    x = np.concatenate(
        [
            np.asarray(unscaled_bank(jax.random.key(8 + i), 400, 0.02, chunks=3)[0])
            for i in range(67)
        ],
        axis=None,
    )
    assert x.size == 643200
    se = 1 / math.sqrt(x.size)
    assert abs(x.mean()) < 6 * se
    assert abs(x.std() - 1) < 6 * se
    assert abs(np.mean(x**4) - 3) < 6 * math.sqrt(96) * se  # Var(x**4) = 96
    assert abs(np.mean(np.abs(x) < 1) - 0.6826894921) < 6 * 0.47 * se


# n below the Krylov dimension (200) and at it (each size compiles its own
# Arnoldi and dense programs; a third size in between showed nothing new)
@pytest.mark.parametrize("n, k", [(30, 3), (200, 10)])
def test_arnoldi_exact_for_small_n(n, k):
    values, columns = _random_ell(n, n, k)
    reference = _radius_np(values, columns)
    est = spectral_radius(values, columns)
    assert float(est) == pytest.approx(reference, rel=1e-8)
    assert float(est) == pytest.approx(spectral_radius_np(values, columns), rel=1e-8)
    dense = spectral_radius(values, columns, method="dense")
    assert float(dense) == pytest.approx(reference, rel=1e-10)


def test_arnoldi_large_n():
    # n = 1000 at density 0.02: measured errors 1e-11 .. 1e-8 with 200 steps
    values, columns = _random_ell(11, 1000, 20)
    reference = _radius_np(values, columns)
    est = float(spectral_radius(values, columns))
    assert est == pytest.approx(reference, rel=1e-6)
    assert est == pytest.approx(spectral_radius_np(values, columns), rel=1e-6)


def test_arnoldi_blocked_orthogonalisation_is_exact_on_the_whole_space():
    # a Krylov space as large as the matrix is exact; m * n = 409600 >=
    # 400000 is the smallest square case of the blocked orthogonalisation
    # (n = 1000 took 4x the time for the same path)
    values, columns = _random_ell(12, 640, 13)
    reference = _radius_np(values, columns)
    full = float(spectral_radius(values, columns, krylov_dim=640))
    assert full == pytest.approx(reference, rel=1e-11)


def test_arnoldi_breakdown_gives_no_nan():
    # a diagonal matrix with 3 distinct values: the Krylov space is invariant
    # after 3 steps, long before the 8 asked for (n = 8, k = 1: the program
    # of test_nilpotent_is_reported's all-zero matrix)
    n = 8
    diag = np.where(
        np.arange(n) % 3 == 0, 2.0, np.where(np.arange(n) % 3 == 1, -5.0, 1.0)
    )
    est = spectral_radius(diag[:, None], np.arange(n, dtype=np.int32)[:, None])
    assert float(est) == pytest.approx(5.0, rel=1e-12)


@CPU_ONLY
def test_vmap_equals_loop_bit_for_bit():
    keys = jax.random.split(jax.random.key(9), 4)

    def build(k):  # the size of test_bank_spectral_radius_matches_numpy[50-0.1]
        return reservoir_bank(k, 50, 0.1, 0.9, chunks=3)

    # reservoir_bank is itself jitted: the loop runs its compiled program, the
    # vmap the batched one (bank_vmap, the radius batched too)
    values, columns = map(np.asarray, bank_vmap(keys, np.full(4, 0.9)))
    for i in range(4):
        v, c = build(keys[i])
        np.testing.assert_array_equal(values[i], v)
        np.testing.assert_array_equal(columns[i], c)
    a, b = build(keys[0]), build(keys[0])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    other = build(keys[1])
    assert not np.array_equal(a[1], other[1])
    assert not np.any(np.asarray(a[0]) == np.asarray(other[0]))


def test_float32_bank():
    values, columns = bank_jit(
        jax.random.key(10), 100, 0.05, 0.9, chunks=2, dtype=jnp.float32
    )
    values, columns = np.asarray(values), np.asarray(columns)
    assert values.dtype == jnp.float32
    for c in range(2):
        assert _radius_np(values[c], columns[c]) == pytest.approx(0.9, rel=1e-5)


def test_nilpotent_is_reported():
    # shift pattern with the wrap-around entry set to zero: strictly upper
    # triangular, nilpotent (dense eigenvalues are exactly zero after LAPACK's
    # balancing isolates the triangular structure)
    n = 8
    columns = ((np.arange(n) + 1) % n)[:, None].astype(np.int32)
    values = np.r_[np.ones(n - 1), 0.0][:, None]
    rho = spectral_radius(values, columns, method="dense")
    assert float(rho) == 0.0
    scale = jax.jit(_scale_to_radius)  # one program for the three calls
    _, bad = scale(values, rho, 0.9)
    assert bool(bad)
    # an all-zero matrix breaks the Arnoldi iteration down at once: radius 0
    zero = spectral_radius(np.zeros((n, 1)), columns)
    assert float(zero) == 0.0
    assert bool(scale(np.zeros((n, 1)), zero, 0.9)[1])
    ok, bad = scale(values, np.asarray(2.0), 0.9)
    assert not bool(bad)
    np.testing.assert_allclose(ok, np.asarray(values) * 0.45)


def test_nilpotent_draw_raises_in_both_builders(monkeypatch):
    """A draw that cannot be scaled is an error of reservoir_bank (through
    equinox.error_if, for a user's jit) and of the constructors' built_bank
    (a result code of its program, raised when it returns). A radius of 0
    is planted: random draws are nilpotent with probability zero. (Sizes of
    their own: programs compiled with the real radius are not reused.)"""
    monkeypatch.setattr(
        _construct, "_radius", lambda v, c, method, key: jnp.zeros((), v.dtype)
    )
    with pytest.raises(Exception, match="nilpotent"):
        reservoir_bank(jax.random.key(0), 9, 0.3, 0.9)[0].block_until_ready()
    with pytest.raises(Exception, match="nilpotent"):
        _construct.built_bank(
            jax.random.key(0), 11, 0.3, 0.9, chunks=1, dtype=jnp.float64,
            method="arnoldi",
        )  # fmt: skip


def test_single_node_and_argument_checks():
    values, columns = map(np.asarray, reservoir_bank(jax.random.key(11), 1, 0.5, 0.6))
    assert values.shape == (1, 1, 1) and int(columns[0, 0, 0]) == 0
    assert abs(float(values[0, 0, 0])) == pytest.approx(0.6, rel=1e-12)
    with pytest.raises(ValueError, match="method"):
        reservoir_bank(jax.random.key(0), 10, 0.2, 0.9, method="power")
    with pytest.raises(ValueError, match="scalar"):
        reservoir_bank(jax.random.key(0), 10, 0.2, np.ones(2))


def test_uniform_input_matrix():
    w = uniform_input_matrix(jax.random.key(12), (200, 300), 0.4)
    x = np.asarray(w)
    assert x.shape == (200, 300) and x.dtype == np.float64
    assert x.min() >= -0.4 and x.max() <= 0.4
    se = 0.4 / math.sqrt(3 * x.size)
    assert abs(x.mean()) < 6 * se
    assert abs(x.std() - 0.4 / math.sqrt(3)) < 0.01


@pytest.mark.parametrize("partitionable", [True, False])
def test_flat_draw_equals_the_shaped_draw(partitionable):
    # flat_draw only exists to compile faster: it must give jax.random's own
    # numbers for the shape, in both of jax's threefry bit layouts
    from orc._random import flat_draw

    def draws(key, top):  # one compiled program for the six draws
        return [
            (
                jax.random.normal(key, (30, 7)),
                flat_draw(jax.random.normal, key, (30, 7)),
            ),
            (
                jax.random.uniform(key, (2, 5, 3), jnp.float32, -0.5, 0.5),
                flat_draw(jax.random.uniform, key, (2, 5, 3), jnp.float32, -0.5, 0.5),
            ),
            (
                jax.random.randint(key, (30, 7), 0, top, dtype=jnp.int32),
                flat_draw(
                    jax.random.randint,
                    key,
                    (30, 7),
                    minval=0,
                    maxval=top,
                    dtype=jnp.int32,
                ),
            ),
        ]

    with jax.threefry_partitionable(partitionable):
        cases = jax.jit(draws)(jax.random.key(7), jnp.arange(40, 47) + 1)
    for shaped, flat in cases:
        assert flat.shape == shaped.shape and flat.dtype == shaped.dtype
        np.testing.assert_array_equal(np.asarray(flat), np.asarray(shaped))
