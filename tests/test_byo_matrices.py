"""Drivers and embeddings built from the user's own matrices (``from_matrices``).

Checked against NumPy's formulas, across the matrix types a user may give
(dense, ``scipy.sparse``, ``BCOO``, lists, ``ReservoirMatrix``), against a
model's own matrices (the same bits back), through save/load, jit and vmap,
and for each malformed argument (the error names it).
"""

from __future__ import annotations

import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse

import orc
from orc._validation import from_fields
from orc.drivers import (
    ESNDriver,
    ParallelESNDriver,
    ParallelTaylorDriver,
    ReservoirMatrix,
    TaylorDriver,
)
from orc.embeddings import (
    EnsembleLinearEmbedding,
    LinearEmbedding,
    ParallelLinearEmbedding,
)
from orc.forecaster import ESNForecaster, train_RCForecaster

ROOT = Path(__file__).resolve().parents[1]
N = 12


def _matrix(rng, n=N, density=0.4, radius=0.9):
    """A sparse-ish random ``(n, n)`` with the given spectral radius."""
    w = rng.normal(size=(n, n)) * (rng.random((n, n)) < density)
    return w * (radius / np.max(np.abs(np.linalg.eigvals(w))))


def _same(a, b):
    """The same pytree, static fields and every array's dtype and bits."""
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def _bcoo(Ws, n_batch=1, pad=2):
    """``Ws`` as a ``BCOO``: a bank ``(chunks, n, n)`` with one batch axis
    (as ORC 0.4 stores its ``wr``) or, ``n_batch=0``, any matrix without
    one; entries row by row, padded with ``pad`` entries whose indices lie
    outside the matrix, as ``BCOO.fromdense(Ws, n_batch=n_batch, nse=...)``
    pads (built here without its compilation)."""
    n = Ws.shape[-1]
    per = [np.argwhere(w) for w in Ws] if n_batch else [np.argwhere(Ws)]
    nse = max(map(len, per)) + pad
    idx = np.full((len(per), nse, per[0].shape[1]), n, np.int32)
    data = np.zeros((len(per), nse))
    for c, ij in enumerate(per):
        idx[c, : len(ij)] = ij
        data[c, : len(ij)] = (Ws[c] if n_batch else Ws)[tuple(ij.T)]
    if not n_batch:
        idx, data = idx[0], data[0]
    return sparse.BCOO(jax.device_put((data, idx)), shape=Ws.shape)


def _esn_step(W, r, p, b, leak):
    return (1 - leak) * r + leak * np.tanh(W @ r + p + b)


# --------------------------------------------------------------------------- #
# The update, against NumPy
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("per_node", [False, True])
@pytest.mark.parametrize("mode", ["discrete", "continuous"])
def test_esn_driver_advances_as_the_formula(per_node, mode):
    rng = np.random.default_rng(0)
    W = _matrix(rng)
    b = rng.normal(size=N) if per_node else 0.3
    d = ESNDriver.from_matrices(W, leak=0.4, bias=b, mode=mode, time_const=7.0)
    r, p = rng.normal(size=N), rng.normal(size=N)
    act = np.tanh(W @ r + p + b)
    expected = 7.0 * (act - r) if mode == "continuous" else 0.6 * r + 0.4 * act
    got = d.advance(*jax.device_put((p, r)))
    assert got.shape == (N,) and got.dtype == jnp.float64
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)
    assert d.construction == "given" and d.spectral_radius is None


@pytest.mark.parametrize("bias_shape", [(), (N,), (3, N)])
def test_parallel_driver_advances_each_reservoir(bias_shape):
    """A bank: reservoir ``c`` by its own ``W[c]`` and bias, in one step and
    over a sequence (the fused run, :func:`orc._matrix.esn_run`)."""
    rng = np.random.default_rng(1)
    W = np.stack([_matrix(rng) for _ in range(3)])
    b = rng.normal(size=bias_shape)
    d = ParallelESNDriver.from_matrices(W, leak=0.3, bias=b)
    bc = np.broadcast_to(b, (3, N))
    P = rng.normal(size=(5, 3, N))
    r = rng.normal(size=(3, N))
    got = d.advance_seq(*jax.device_put((P, r)))
    assert got.shape == (5, 3, N)
    got = np.asarray(got)  # its rows in numpy (no slicing programs)
    previous = r
    for t in range(5):
        r = np.stack([_esn_step(W[c], r[c], P[t, c], bc[c], 0.3) for c in range(3)])
        np.testing.assert_allclose(got[t], r, rtol=1e-12, atol=1e-13)
        step = d.advance(*jax.device_put((P[t], previous)))
        np.testing.assert_allclose(step, r, rtol=1e-12, atol=1e-13)
        previous = got[t]


def _tanh_derivative_polys(n_terms):
    """``P_n`` with ``tanh^(n)(x) = P_n(tanh x)``: ``P_0 = t``,
    ``P_{n+1} = P_n'(t) (1 - t^2)``."""
    polys = [np.polynomial.Polynomial([0.0, 1.0])]
    for _ in range(n_terms):
        polys.append(polys[-1].deriv() * np.polynomial.Polynomial([1.0, 0.0, -1.0]))
    return polys


@pytest.mark.parametrize("n_terms", [0, 1, 3])
def test_taylor_driver_advances_as_the_expansion(n_terms):
    rng = np.random.default_rng(2)
    W = np.stack([_matrix(rng, radius=0.5) for _ in range(2)])
    b = rng.normal(size=(2, N))
    r, p = 0.3 * rng.normal(size=(2, N)), 0.3 * rng.normal(size=(2, N))
    dz = np.einsum("cij,cj->ci", W, r) + p
    t = np.tanh(b)
    expected = sum(
        P(t) / np.prod(np.arange(1.0, n + 1)) * dz**n
        for n, P in enumerate(_tanh_derivative_polys(n_terms))
    )
    bank = ParallelTaylorDriver.from_matrices(W, n_terms=n_terms, bias=b)
    np.testing.assert_allclose(
        bank.advance(*jax.device_put((p, r))), expected, rtol=1e-12, atol=1e-14
    )
    one = TaylorDriver.from_matrices(W[1], n_terms=n_terms, bias=b[1])
    np.testing.assert_allclose(
        one.advance(*jax.device_put((p[1], r[1]))),
        expected[1],
        rtol=1e-12,
        atol=1e-14,
    )


def test_embeddings_embed_as_the_product():
    rng = np.random.default_rng(3)
    u = rng.normal(size=8)
    # local windows of locality 1: chunk c sees u[2c-1 : 2c+3], wrapped or clipped
    W_in = rng.normal(size=(4, N, 4))
    for periodic in (True, False):
        emb = ParallelLinearEmbedding.from_matrices(W_in, locality=1, periodic=periodic)
        idx = np.arange(4)[:, None] * 2 - 1 + np.arange(4)
        idx = idx % 8 if periodic else np.clip(idx, 0, 7)
        expected = np.einsum("cnw,cw->cn", W_in, u[idx])
        np.testing.assert_allclose(emb.embed(jax.device_put(u)), expected, rtol=1e-13)
        assert (emb.in_dim, emb.res_dim, emb.chunks) == (8, N, 4)
    ens = EnsembleLinearEmbedding.from_matrices(W_in[:, :, :3].copy())
    np.testing.assert_allclose(
        ens.embed(jax.device_put(u[:3])), W_in[:, :, :3] @ u[:3], rtol=1e-13
    )
    single = LinearEmbedding.from_matrices(W_in[0])
    assert single.out_shape == (N,) and single.scaling is None
    np.testing.assert_allclose(
        single(jax.device_put(u[:4])), W_in[0] @ u[:4], rtol=1e-13
    )


# --------------------------------------------------------------------------- #
# Every kind of matrix, the same driver
# --------------------------------------------------------------------------- #


def test_every_matrix_type_gives_the_same_driver():
    rng = np.random.default_rng(4)
    W = _matrix(rng)
    W[3] = 0.0  # an empty row
    reference = ESNDriver.from_matrices(W, leak=0.5, bias=0.1)
    kinds = {
        "jax": jax.device_put(W),
        "nested list": W.tolist(),
        "bank of one": W[None],
        "csr_array": sp.csr_array(W),
        "csr_matrix": sp.csr_matrix(W),
        "coo_array": sp.coo_array(W),
        "csc_array": sp.csc_array(W),
        # BCOO.fromdense(W) and BCOO.fromdense(W, nse=nnz + 5), entry for entry
        "BCOO": _bcoo(W, n_batch=0, pad=0),
        "BCOO, padded": _bcoo(W, n_batch=0, pad=5),
        "list of one csr": [sp.csr_array(W)],
        "ReservoirMatrix": reference.wr,
    }
    for kind, given in kinds.items():
        d = ESNDriver.from_matrices(given, leak=0.5, bias=0.1)
        assert d.wr.values.shape == reference.wr.values.shape, kind
        _same(d, reference)
    assert reference.density == np.count_nonzero(W) / N**2


def test_every_bank_type_gives_the_same_bank():
    rng = np.random.default_rng(5)
    Ws = np.stack([_matrix(rng, density=d) for d in (0.2, 0.4, 0.6)])
    reference = ParallelESNDriver.from_matrices(Ws, bias=np.zeros((3, N)))
    kinds = {
        "list of csr": [sp.csr_array(w) for w in Ws],
        "list of mixed": [sp.coo_array(Ws[0]), _bcoo(Ws[1], n_batch=0), Ws[2]],
        "batched BCOO": _bcoo(Ws),
        "unbatched BCOO": _bcoo(Ws, n_batch=0),
        "ReservoirMatrix": reference.wr,
        "BCOO of the ReservoirMatrix": reference.wr.to_bcoo(),
    }
    for kind, given in kinds.items():
        d = ParallelESNDriver.from_matrices(given, bias=np.zeros((3, N)))
        assert d.chunks == 3, kind
        _same(d, reference)


def test_embedding_from_sparse_is_its_dense_matrix():
    rng = np.random.default_rng(6)
    W_in = rng.normal(size=(N, 3)) * (rng.random((N, 3)) < 0.5)
    ref = LinearEmbedding.from_matrices(W_in)
    for given in (sp.csr_array(W_in), _bcoo(W_in, n_batch=0, pad=0), W_in[None]):
        _same(LinearEmbedding.from_matrices(given), ref)
    bank = np.stack([W_in, 2 * W_in])
    ref = EnsembleLinearEmbedding.from_matrices(bank)
    _same(EnsembleLinearEmbedding.from_matrices([sp.csr_array(w) for w in bank]), ref)


# --------------------------------------------------------------------------- #
# A model's own matrices give back the same model
# --------------------------------------------------------------------------- #


def _rebuilt(model):
    d, e = model.driver, model.embedding
    driver = ParallelESNDriver.from_matrices(d.wr, leak=d.leak, bias=d.bias)
    embedding = ParallelLinearEmbedding.from_matrices(
        e.win, locality=e.locality, periodic=e.periodic
    )
    return eqx.tree_at(lambda m: (m.driver, m.embedding), model, (driver, embedding))


# The data, sizes, spin-up and forecast length of the docs page
# (docs/examples/own-matrices.md, run by test_the_docs_page_runs), so that
# its integration, fits and forecasts are programs compiled once.
@pytest.fixture(scope="module")
def lorenz():
    U, _ = orc.data.lorenz63(tN=25.0, dt=0.01)
    return U


@pytest.mark.parametrize("layout", [{}, {"chunks": 3, "locality": 1}])
def test_a_models_own_matrices_train_and_forecast_to_the_same_bits(layout, lorenz):
    original = ESNForecaster(data_dim=3, res_dim=100, seed=7, **layout)
    rebuilt = _rebuilt(original)
    assert rebuilt.driver.construction == "given"
    assert rebuilt.driver.spectral_radius is None and rebuilt.embedding.scaling is None
    for leaf in ("wr", "bias", "leak"):
        _same(getattr(rebuilt.driver, leaf), getattr(original.driver, leaf))
    _same(rebuilt.embedding.win, original.embedding.win)
    a, Ra = train_RCForecaster(original, lorenz[:2000], spinup=200)
    b, Rb = train_RCForecaster(rebuilt, lorenz[:2000], spinup=200)
    _same(Ra, Rb)
    _same(a.readout.wout, b.readout.wout)
    # the last states taken in numpy (eager indexing compiles programs)
    _same(a.forecast(200, np.asarray(Ra)[-1]), b.forecast(200, np.asarray(Rb)[-1]))


def test_a_sparse_input_matrix_set_into_a_forecaster_trains_as_its_bank(lorenz):
    """The concept map's recipe for reservoirpy's ``input_connectivity``: a
    single embedding of the user's sparse ``W_in`` set into an ESNForecaster
    (whose driver is a bank of one) trains to the bits of the same matrix
    as a bank of one."""
    rng = np.random.default_rng(0)
    W_in = rng.choice([-0.1, 0.1], (100, 3)) * (rng.random((100, 3)) < 0.1)
    model = ESNForecaster(data_dim=3, res_dim=100, seed=7)
    single = model.set_embedding(LinearEmbedding.from_matrices(W_in))
    bank = model.set_embedding(ParallelLinearEmbedding.from_matrices(W_in[None]))
    a, Ra = train_RCForecaster(single, lorenz[:2000], spinup=200)
    b, Rb = train_RCForecaster(bank, lorenz[:2000], spinup=200)
    _same(Ra, Rb)
    _same(a.readout.wout, b.readout.wout)
    assert not np.array_equal(a.readout.wout, 0 * a.readout.wout)


def test_forecast_with_a_per_node_bias_is_the_closed_loop():
    """A per-node bias through a model's closed loop (the one-call forecast
    takes only a scalar bias, so this runs the scan) against NumPy's loop."""
    rng = np.random.default_rng(8)
    W, b = _matrix(rng), rng.uniform(-0.5, 0.5, N)
    W_in, wout = rng.uniform(-0.3, 0.3, (N, 3)), rng.normal(size=(3, N)) / N
    model = ESNForecaster(data_dim=3, res_dim=N)
    model = eqx.tree_at(
        lambda m: (m.driver, m.embedding, m.readout.wout),
        model,
        (
            ParallelESNDriver.from_matrices(W, leak=0.4, bias=b),
            ParallelLinearEmbedding.from_matrices(W_in),
            jax.device_put(wout[None]),
        ),
    )
    r = rng.normal(size=N)
    got = model.forecast(20, jax.device_put(r[None]))
    expected = []
    for _ in range(20):
        expected.append(wout @ r)
        r = _esn_step(W, r, W_in @ expected[-1], b, 0.4)
    np.testing.assert_allclose(got, np.stack(expected), rtol=1e-11, atol=1e-13)


# --------------------------------------------------------------------------- #
# Scaling on request
# --------------------------------------------------------------------------- #


def test_spectral_radius_scales_each_matrix_to_it():
    rng = np.random.default_rng(9)
    Ws = [3.0 * _matrix(rng, n=40), 0.2 * _matrix(rng, n=40)]
    d = ParallelESNDriver.from_matrices(
        [sp.csr_array(w) for w in Ws], spectral_radius=1.3
    )
    assert float(d.spectral_radius) == pytest.approx(1.3)
    for dense, w in zip(np.asarray(d.wr.todense()), Ws, strict=True):
        assert np.max(np.abs(np.linalg.eigvals(dense))) == pytest.approx(1.3, rel=1e-6)
        # scaled, not redrawn: the same matrix up to one factor
        np.testing.assert_allclose(
            dense / dense.flat[np.flatnonzero(w)[0]],
            w / w.flat[np.flatnonzero(w)[0]],
            rtol=1e-12,
        )
    # without it, the matrix as given
    plain = ParallelESNDriver.from_matrices(Ws)
    np.testing.assert_array_equal(plain.wr.todense(), np.stack(Ws))


# --------------------------------------------------------------------------- #
# dtype, save/load, jit and vmap
# --------------------------------------------------------------------------- #


def test_dtype_follows_the_given_arrays():
    rng = np.random.default_rng(10)
    W = _matrix(rng).astype(np.float32)
    assert ESNDriver.from_matrices(W).dtype == jnp.float32
    assert ESNDriver.from_matrices(W, bias=np.zeros(N)).dtype == jnp.float64
    assert ESNDriver.from_matrices(W, bias=0.5).dtype == jnp.float32  # a number
    assert ESNDriver.from_matrices((W != 0).astype(int)).dtype == jnp.float64
    d = ESNDriver.from_matrices(W.astype(np.float64), dtype=jnp.float32)
    assert d.wr.values.dtype == d.bias.dtype == d.leak.dtype == jnp.float32
    assert LinearEmbedding.from_matrices(W[:, :3]).win.dtype == jnp.float32
    assert LinearEmbedding.from_matrices(np.ones((N, 3), int)).dtype == jnp.float64


def test_a_model_with_given_components_saves_and_loads(tmp_path, lorenz):
    rng = np.random.default_rng(11)
    model = ESNForecaster(data_dim=3, res_dim=N)
    model = eqx.tree_at(
        lambda m: (m.driver, m.embedding),
        model,
        (
            ParallelESNDriver.from_matrices(_matrix(rng), bias=rng.normal(size=N)),
            ParallelLinearEmbedding.from_matrices(rng.uniform(-0.1, 0.1, (N, 3))),
        ),
    )
    model, R = train_RCForecaster(model, lorenz[:500], spinup=50)
    orc.save(tmp_path / "given.orc", model)
    loaded = orc.load(tmp_path / "given.orc")
    _same(loaded, model)
    assert loaded.driver.construction == "given"
    assert loaded.driver.spectral_radius is None and loaded.embedding.scaling is None
    assert loaded.driver.bias.shape == (1, N)
    r_last = np.asarray(R)[-1]  # in numpy (eager indexing compiles programs)
    _same(loaded.forecast(50, r_last), model.forecast(50, r_last))


def test_given_drivers_run_under_jit_and_vmap():
    rng = np.random.default_rng(12)
    d = ParallelESNDriver.from_matrices(
        np.stack([_matrix(rng), _matrix(rng)]), bias=rng.normal(size=(2, N))
    )
    Pn, Rn = rng.normal(size=(4, 2, N)), rng.normal(size=(4, 2, N))
    P, R = jax.device_put((Pn, Rn))
    # the rows P[i], R[i] are put on the device from numpy (eager indexing
    # would compile slicing programs)
    P0, R0 = jax.device_put((Pn[0], Rn[0]))
    eager = np.stack(
        [d.advance(*jax.device_put((p, r))) for p, r in zip(Pn, Rn, strict=True)]
    )
    np.testing.assert_allclose(jax.vmap(d.advance)(P, R), eager, rtol=1e-14)
    jitted = eqx.filter_jit(lambda drv, p, r: drv.advance(p, r))
    np.testing.assert_allclose(jitted(d, P0, R0), eager[0], rtol=1e-14)
    # a bank of drivers, one per leak rate, mapped over
    leaks = jax.device_put(np.array([0.2, 0.5, 0.9]))
    drivers = jax.vmap(lambda a: eqx.tree_at(lambda x: x.leak, d, a))(leaks)
    out = eqx.filter_vmap(lambda drv: drv.advance(P0, R0))(drivers)
    for a, o in zip([0.2, 0.5, 0.9], np.asarray(out), strict=True):
        np.testing.assert_allclose(
            o,
            eqx.tree_at(lambda x: x.leak, d, jax.device_put(np.asarray(a))).advance(
                P0, R0
            ),
        )


# --------------------------------------------------------------------------- #
# from_fields
# --------------------------------------------------------------------------- #


def test_from_fields_needs_every_field_and_runs_every_check():
    d = ESNDriver.from_matrices(np.eye(N) * 0.5)
    fields = {k: getattr(d, k) for k in d.__dataclass_fields__}
    _same(from_fields(ESNDriver, fields), d)
    with pytest.raises(TypeError, match="fields"):
        from_fields(ESNDriver, {k: v for k, v in fields.items() if k != "leak"})
    # an invariant of the ESN class and one of its sparse-reservoir base
    with pytest.raises(ValueError, match="leak"):
        from_fields(ESNDriver, {**fields, "leak": jax.device_put(np.zeros(2))})
    with pytest.raises(ValueError, match="bias"):
        from_fields(ESNDriver, {**fields, "bias": jax.device_put(np.zeros((2, N)))})


# --------------------------------------------------------------------------- #
# Errors name the argument
# --------------------------------------------------------------------------- #

_W = 0.1 * np.ones((4, 4))
_W_IN = np.ones((2, 4, 3))


def _nan(x):
    x = np.array(x, dtype=float)
    x.flat[1] = np.nan
    return x


def _strictly_triangular(n, seed=0):
    """A nilpotent matrix whose pattern is a strictly upper triangle, its
    nodes shuffled (so it is not triangular as it stands)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    return np.triu(rng.normal(size=(n, n)), 1)[np.ix_(perm, perm)]


# (class, from_matrices arguments, error, what the message says)
_BAD = [
    (ESNDriver, dict(W=np.ones((4, 5))), ValueError, r"W must be a square"),
    (ESNDriver, dict(W=np.ones(4)), ValueError, r"W must be a square"),
    (ESNDriver, dict(W=sp.csr_array((4, 5))), ValueError, r"W must be a square"),
    (ESNDriver, dict(W=np.stack([_W, _W])), ValueError, r"W must be one matrix"),
    (TaylorDriver, dict(W=[_W, _W], n_terms=2), ValueError, r"W must be one matrix"),
    (
        ParallelESNDriver,
        dict(W=[sp.csr_array(_W), sp.csr_array(np.ones((3, 3)))]),
        ValueError,
        r"W\[1\] differs from W\[0\]",
    ),
    (ESNDriver, dict(W=_W, bias=np.zeros(5)), ValueError, r"bias must be .*\(5,\)"),
    (
        ParallelESNDriver,
        dict(W=np.stack([_W, _W]), bias=np.zeros((3, 4))),
        ValueError,
        r"bias must be .*\(chunks, N\) = \(2, 4\)",
    ),
    (ESNDriver, dict(W=_nan(_W)), ValueError, r"W contains 1 NaN or inf"),
    (ESNDriver, dict(W=sp.csr_array(_nan(_W))), ValueError, r"W contains 1 NaN"),
    (ESNDriver, dict(W=_W, bias=_nan(np.ones(4))), ValueError, r"bias contains 1 NaN"),
    (ESNDriver, dict(W=_W + 1j * _W), TypeError, r"W must be real"),
    (ESNDriver, dict(W=np.full((4, 4), "a")), TypeError, r"W must hold real numbers"),
    (
        ESNDriver,
        dict(W=np.triu(_W, 1), spectral_radius=0.9),
        ValueError,
        r"W has spectral radius 0",
    ),
    (
        ParallelESNDriver,
        dict(W=[_W, _strictly_triangular(4)], spectral_radius=0.9),
        ValueError,
        r"W\[1\] has spectral radius 0",
    ),
    (
        ESNDriver,
        dict(W=np.zeros((4, 4)), spectral_radius=0.9),
        ValueError,
        r"W has spectral radius 0",
    ),
    (ESNDriver, dict(W=_W, spectral_radius=-1.0), ValueError, r"spectral_radius"),
    (ESNDriver, dict(W=_W, leak=1.5), ValueError, r"leak"),
    (ESNDriver, dict(W=_W, mode="euler"), ValueError, r"mode"),
    (ESNDriver, dict(W=_W, time_const=0.0), ValueError, r"time_const"),
    (TaylorDriver, dict(W=_W, n_terms=-1), ValueError, r"n_terms"),
    (
        LinearEmbedding,
        dict(W_in=np.ones(4)),
        ValueError,
        r"W_in must have shape \(N, in_dim\)",
    ),
    (LinearEmbedding, dict(W_in=_W_IN), ValueError, r"W_in must be one matrix"),
    (LinearEmbedding, dict(W_in=_nan(_W)), ValueError, r"W_in contains 1 NaN"),
    (LinearEmbedding, dict(W_in=_W * 1j), TypeError, r"W_in must be real"),
    (
        LinearEmbedding,
        dict(W_in=ReservoirMatrix.from_bcoo(_bcoo(_W[None], pad=0))),
        TypeError,
        r"W_in must be a dense array",
    ),
    (
        ParallelLinearEmbedding,
        dict(W_in=_W_IN, locality=2),
        ValueError,
        r"W_in of shape \(2, 4, 3\) has 3 columns, fewer than .* locality 2",
    ),
    (
        ParallelLinearEmbedding,
        dict(W_in=_W_IN, in_dim=8),
        ValueError,
        r"W_in must have shape .* = \(2, 4, 4\) for in_dim 8",
    ),
    (
        ParallelLinearEmbedding,
        dict(W_in=np.ones((2, 4, 4)), locality=1, in_dim=5),
        ValueError,
        r"in_dim \(5\) must be a multiple of the 2 chunks",
    ),
    (ParallelLinearEmbedding, dict(W_in=_W_IN, locality=-1), ValueError, r"locality"),
    (
        ParallelLinearEmbedding,
        dict(W_in=_W_IN, periodic="yes"),
        TypeError,
        r"periodic must be a bool",
    ),
    (
        EnsembleLinearEmbedding,
        dict(W_in=np.ones((2, 3, 4, 3))),
        ValueError,
        r"W_in must have shape \(chunks, N, in_dim\)",
    ),
]


@pytest.mark.parametrize(
    "cls, kwargs, error, match",
    _BAD,
    ids=[f"{c.__name__}-{m}" for c, _, _, m in _BAD],
)
def test_errors_name_the_argument(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls.from_matrices(**kwargs)


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda w: ESNDriver.from_matrices(w), "W"),
        (lambda w: ESNDriver.from_matrices(_W, bias=w[0]), "bias"),
        (lambda w: LinearEmbedding.from_matrices(w), "W_in"),
    ],
)
def test_traced_matrices_are_refused(build, name):
    """Given matrices are read on the host: under ``jax.jit`` the error
    names the traced argument."""
    with pytest.raises(TypeError, match=rf"{name} must be a concrete array"):
        jax.jit(lambda w: build(w).dtype and 0)(_W)


def test_a_traced_bcoo_is_refused():
    B = _bcoo(_W[None], n_batch=0)
    with pytest.raises(TypeError, match=r"W must be a concrete array"):
        jax.jit(lambda b: ESNDriver.from_matrices(b).leak)(B)


def test_nilpotency_is_read_from_the_pattern():
    """A strictly triangular pattern, shuffled, is refused for scaling
    though its computed eigenvalues are not zero; one entry that closes a
    cycle makes it scalable."""
    W = _strictly_triangular(30, seed=1)
    with pytest.raises(ValueError, match="nilpotent"):
        ESNDriver.from_matrices(W, spectral_radius=0.9)
    # the node with no successor feeds the node with every other as one
    rows = np.count_nonzero(W, axis=1)
    W[np.argmin(rows), np.argmax(rows)] = 1.0
    d = ESNDriver.from_matrices(W, spectral_radius=0.9)
    dense = np.asarray(d.wr.todense())[0]  # (the row in numpy: no slicing program)
    assert np.max(np.abs(np.linalg.eigvals(dense))) == pytest.approx(0.9)


# --------------------------------------------------------------------------- #
# The documentation page runs
# --------------------------------------------------------------------------- #


def test_the_docs_page_runs(tmp_path, monkeypatch, capsys):
    """The Python blocks of docs/examples/own-matrices.md, in order, in one
    namespace (a fence with attributes shows another library's code and is
    skipped, as in tests/test_docs.py), print what the page shows."""
    text = (ROOT / "docs" / "examples" / "own-matrices.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    exec(compile("\n".join(blocks), "own-matrices.md", "exec"), {})  # noqa: S102
    shown = re.findall(r"```text\n(.*?)```", text, flags=re.S)
    assert capsys.readouterr().out.split() == "".join(shown).split()
