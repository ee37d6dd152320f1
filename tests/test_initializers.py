"""orc.initializers: random reservoirs and input layers of the literature.

Each construction is checked against what its paper says it is, computed
here independently with NumPy: the singular values a pseudo-SVD keeps, the
ring a chaotic or connected low-connectivity matrix holds, the semicircle
radius of a Wigner matrix, a triangular matrix's eigenvalues on its
diagonal, Dale's signs by column, a hyperbolic distance that is a metric,
and the spectral radius each scaled matrix was asked for (dense
eigenvalues). The map input layers of orc.topologies are checked against
their recurrences and ReservoirComputing.jl's documented examples.
"""

from __future__ import annotations

import numpy as np
import pytest

import orc
from orc import initializers as I
from orc import topologies as T
from orc.drivers import ESNDriver


def _dense(W) -> np.ndarray:
    values, columns = np.asarray(W.values), np.asarray(W.columns)
    dense = np.zeros((values.shape[0],) * 2)
    np.add.at(dense, (np.arange(len(values))[:, None], columns), values)
    return dense


def _radius(W) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(W))))


#: how close a scaled matrix's spectral radius is to the one asked for: the
#: radius it is divided by is rounded to float32 (orc._matrix.scaling_radius,
#: for the same bits in every process)
SCALED = 1e-6


# --------------------------------------------------------------------------- #
# Reservoirs
# --------------------------------------------------------------------------- #


def test_pseudo_svd_keeps_its_singular_values():
    n = 40
    start = _dense(I.pseudo_svd(n, density=1 / n**2, seed=3))  # no rotation yet
    assert np.count_nonzero(start - np.diag(np.diag(start))) == 0
    singular = np.diag(start)
    assert np.all(np.diff(singular) >= 0) and singular[-1] == 1.0
    W = _dense(I.pseudo_svd(n, density=0.3, seed=3))
    assert np.count_nonzero(W) >= 0.3 * n * n
    np.testing.assert_allclose(
        np.linalg.svd(W, compute_uv=False)[::-1], singular, rtol=0, atol=1e-12
    )
    assert _radius(W) <= 1.0 + 1e-12
    down = np.diag(_dense(I.pseudo_svd(n, density=1e-9, reverse_sort=True, seed=3)))
    assert down[0] == 1.0 and np.all(np.diff(down) <= 0)
    np.testing.assert_array_equal(np.sort(down[1:]), singular[:-1])
    raw = np.diag(
        _dense(I.pseudo_svd(n, density=1e-9, sorted=False, max_value=2.0, seed=3))
    )
    assert raw.max() < 2.0 and not np.all(np.diff(raw) >= 0)
    np.testing.assert_allclose(np.sort(raw)[:-1] / 2.0, singular[:-1], rtol=1e-15)


def test_chaotic_is_a_ring_with_extra_edges():
    n, p = 64, 0.1
    W = _dense(I.chaotic(n, extra_edge_probability=p, seed=0))
    ring = (np.arange(n), (np.arange(n) + 1) % n)
    assert np.all(W[ring] != 0) and np.all(np.diag(W) == 0)
    extra = np.count_nonzero(W) - n
    trials = n * n - 2 * n  # neither on the diagonal nor on the ring
    assert abs(extra - p * trials) < 5 * np.sqrt(trials * p * (1 - p))
    assert _radius(W) == pytest.approx(1.0, rel=SCALED)
    assert (
        np.count_nonzero(_dense(I.chaotic(16, extra_edge_probability=0.0, seed=0)))
        == 16
    )
    with pytest.raises(ValueError, match="power of 4.*256 and 1024"):
        I.chaotic(300, seed=0)


def test_low_connectivity_in_degree_and_ring():
    n = 50
    W = _dense(I.low_connectivity(n, in_degree=3, spectral_radius=0.7, seed=1))
    np.testing.assert_array_equal(np.count_nonzero(W, axis=1), 3)
    assert _radius(W) == pytest.approx(0.7, rel=SCALED)
    ring = _dense(I.low_connectivity(n, connected=True, spectral_radius=0.9, seed=1))
    assert np.count_nonzero(ring) == n
    np.testing.assert_array_equal(np.count_nonzero(ring, axis=0), 1)
    succ = np.argmax(ring != 0, axis=1)  # the unit each one receives from
    seen, unit = set(), 0
    for _ in range(n):
        seen.add(unit)
        unit = succ[unit]
    assert len(seen) == n and unit == 0  # one cycle through every unit
    np.testing.assert_allclose(np.abs(np.linalg.eigvals(ring)), 0.9, rtol=1e-9)
    cut = _dense(I.low_connectivity(n, connected=True, cut_cycle=True, seed=1))
    assert np.count_nonzero(cut) == n - 1
    assert not np.linalg.matrix_power(cut != 0, n).any()  # a path: nilpotent
    with pytest.raises(ValueError, match="in_degree=1"):
        I.low_connectivity(n, in_degree=2, connected=True, seed=0)
    with pytest.raises(ValueError, match="cut_cycle"):
        I.low_connectivity(n, cut_cycle=True, seed=0)
    with pytest.raises(ValueError, match="in_degree must be <= 50"):
        I.low_connectivity(n, in_degree=51, seed=0)


def test_permutation_is_a_weighted_permutation():
    n = 30
    W = _dense(I.permutation(n, 0.4, seed=2))
    P = (W != 0).astype(float)
    np.testing.assert_array_equal(P @ P.T, np.eye(n))
    np.testing.assert_allclose(np.abs(np.linalg.eigvals(W)), 0.4, rtol=1e-9)
    w = np.linspace(0.1, 3.0, n)
    np.testing.assert_array_equal(_dense(I.permutation(n, w, seed=2)).sum(axis=1), w)
    with pytest.raises(ValueError, match="weight"):
        I.permutation(n, np.ones(3), seed=0)


def test_wigner_is_symmetric_with_the_semicircle_radius():
    n = 400
    W = _dense(I.wigner(n, std=0.5, std_diag=0.2, seed=4))
    np.testing.assert_array_equal(W, W.T)
    off = W[np.triu_indices(n, 1)]
    assert np.std(off) * np.sqrt(n) == pytest.approx(0.5, rel=0.02)
    assert np.std(np.diag(W)) * np.sqrt(n) == pytest.approx(0.2, rel=0.15)
    assert np.max(np.abs(np.linalg.eigvalsh(W))) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("kind", ["lower_triangular", "band", "toeplitz"])
def test_banded_reservoirs(kind):
    n, density = 40, 0.2
    W = _dense(getattr(I, kind)(n, density=density, spectral_radius=0.8, seed=5))
    assert np.count_nonzero(W) == round(density * n * n)
    assert _radius(W) == pytest.approx(0.8, rel=SCALED)
    rows, cols = np.nonzero(W)
    offsets = rows - cols  # > 0 below the diagonal
    assert np.all(np.diag(W) != 0)
    if kind == "lower_triangular":
        assert offsets.min() >= 0
        np.testing.assert_allclose(
            np.sort(np.abs(np.linalg.eigvals(W))),
            np.sort(np.abs(np.diag(W))),
            atol=1e-9,
        )
        full = [k for k in range(n) if np.count_nonzero(np.diag(W, -k)) == n - k]
        assert full == list(range(len(full)))  # whole diagonals first, in order
        assert offsets.max() <= len(full)
    else:
        width = np.abs(offsets).max()
        for k in range(1, width):
            assert np.count_nonzero(np.diag(W, -k)) == n - k
            assert np.count_nonzero(np.diag(W, k)) == n - k
    if kind == "toeplitz":
        for k in range(-n + 1, n):
            values = np.diag(W, k)[np.diag(W, k) != 0]
            assert len(set(values.tolist())) <= 1


def test_dale_sparse_signs_by_column():
    n = 60
    W = _dense(I.dale_sparse(n, excitatory_fraction=0.75, density=0.1,
                             ei_weight_ratio=2.0, seed=6))  # fmt: skip
    np.testing.assert_array_equal(np.count_nonzero(W, axis=0), 6)
    assert np.all(W[:, :45] >= 0) and np.all(W[:, 45:] <= 0)
    assert _radius(W) == pytest.approx(1.0, rel=SCALED)
    raw = _dense(I.dale_sparse(n, std=1.0, spectral_radius=None, seed=7))
    excit, inhib = raw[:, :48][raw[:, :48] != 0], -raw[:, 48:][raw[:, 48:] != 0]
    both = np.concatenate([excit, inhib])
    assert np.mean(both**2) == pytest.approx(1.0, rel=0.25)  # |N(0, 1)|


def test_hyperbolic_weights_come_from_a_metric():
    n, sigma = 30, 0.7
    W = _dense(I.hyperbolic(n, sigma=sigma, spectral_radius=None, seed=8))
    np.testing.assert_allclose(W, W.T, rtol=1e-12)
    assert np.all(np.diag(W) == 0)
    off = ~np.eye(n, dtype=bool)
    assert np.all((W[off] > 0) & (W[off] <= 1))
    D = np.where(off, -sigma * np.log(np.where(off, W, 1.0)), 0.0)
    assert np.all(D[:, :, None] <= D[:, None, :] + D.T[None, :, :] + 1e-9)  # triangle
    top = _dense(I.hyperbolic(n, top_k=4, seed=8))
    assert np.all(np.count_nonzero(top, axis=1) == 4)
    for i in range(n):  # each row keeps its four strongest connections
        np.testing.assert_array_equal(
            np.nonzero(top[i])[0], np.sort(np.argsort(W[i])[-4:])
        )


# --------------------------------------------------------------------------- #
# Input layers
# --------------------------------------------------------------------------- #


def test_weighted_input_blocks():
    W = np.asarray(I.weighted_input(12, 3, scaling=[0.1, 0.2, 0.3], seed=9))
    for j, s in enumerate([0.1, 0.2, 0.3]):
        block = W[4 * j : 4 * j + 4, j]
        assert np.all((block != 0) & (np.abs(block) <= s))
    assert np.count_nonzero(W) == 12
    np.testing.assert_array_equal(
        W != 0, np.asarray(T.weighted_minimal_input(12, 3, 1.0)) != 0
    )
    with pytest.raises(ValueError, match="multiple of in_dim.*9 or 12"):
        I.weighted_input(10, 3, seed=0)


def test_informed_input_splits_units():
    n, m, k = 100, 5, 2
    W = np.asarray(I.informed_input(n, m, k, gamma=0.3, scaling=0.5, seed=10))
    assert np.all(np.count_nonzero(W, axis=1) <= 1)
    assert np.count_nonzero(W[:, : m - k]) == 30
    assert np.count_nonzero(W[:, m - k :]) == 70
    assert np.abs(W).max() <= 0.5
    with pytest.raises(ValueError, match="model_in_dim"):
        I.informed_input(n, m, m, seed=0)


def test_same_seed_same_matrix():
    for make in (
        lambda s: I.pseudo_svd(20, density=0.2, seed=s),
        lambda s: I.low_connectivity(20, in_degree=2, seed=s),
        lambda s: I.band(20, seed=s),
        lambda s: I.hyperbolic(20, top_k=3, seed=s),
    ):
        a, b, c = _dense(make(0)), _dense(make(0)), _dense(make(1))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)


def test_a_drawn_reservoir_drives_a_model():
    W = I.low_connectivity(20, in_degree=2, spectral_radius=0.9, seed=0)
    driver = ESNDriver.from_matrices(W, leak=1.0, bias=0.0)
    r = np.linspace(-1, 1, 20)
    p = np.linspace(0.5, -0.5, 20)
    np.testing.assert_allclose(
        np.asarray(driver.advance(p, r)), np.tanh(_dense(W) @ r + p), rtol=1e-12
    )
    assert isinstance(W, orc.drivers.ReservoirMatrix)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="density"):
        I.band(10, density=0.0, seed=0)
    with pytest.raises(ValueError, match="spectral_radius"):
        I.dale_sparse(10, spectral_radius=0.0, seed=0)
    with pytest.raises(TypeError, match="seed"):
        I.toeplitz(10, seed="a")
    with pytest.raises(ValueError, match="excitatory_fraction"):
        I.dale_sparse(10, excitatory_fraction=1.0, seed=0)


@pytest.mark.parametrize("distribution", ["normal", "uniform", "bernoulli"])
def test_random_sparse_as_reservoirpy_draws(distribution):
    n, density = 200, 0.1
    W = _dense(I.random_sparse(n, density=density, distribution=distribution, seed=11))
    values = W[W != 0]
    assert values.size == round(density * n * n)
    assert np.count_nonzero(W, axis=1).std() > 0  # placed over the matrix, not per row
    if distribution == "normal":
        assert abs(values.mean()) < 0.05 and values.var() == pytest.approx(
            1.0, rel=0.06
        )
    elif distribution == "uniform":
        assert np.abs(values).max() < 1 and values.var() == pytest.approx(
            1 / 3, rel=0.06
        )
    else:
        assert set(np.unique(values).tolist()) == {-1.0, 1.0}
    scaled = _dense(I.random_sparse(n, spectral_radius=0.9, seed=11))
    assert _radius(scaled) == pytest.approx(0.9, rel=SCALED)
    W_in = np.asarray(I.random_sparse_input(100, 4, scaling=0.5, seed=12))
    assert np.count_nonzero(W_in) == 40
    assert set(np.unique(W_in[W_in != 0]).tolist()) == {-0.5, 0.5}
    with pytest.raises(ValueError, match="distribution must be one of"):
        I.random_sparse(10, distribution="cauchy", seed=0)
