"""ORC 0.4 fidelity of the components (issue 44, items 1-3), each case as ORC
0.4.0 behaves, checked against an independent expectation (numpy).

1. ``driver.wr`` is a ``jax.experimental.sparse.BCOO`` as in ORC: BCOO's own
   functions take it (``BCOO.todense(wr)``, ``sparse.bcoo_*``, ``@``), and it
   stays our ELL matrix and a pytree of its two leaves.
2. A single component is a bank of one: ``ESNDriver``/``TaylorDriver``
   ``advance`` and the single readouts take a state as ``(res_dim,)`` or
   ``(1, res_dim)`` and answer as ORC does (``(res_dim,)``, ``(out_dim,)``),
   also under ``jax.jit``/``vmap``/``grad``. Components without a bank (GRU)
   and the embeddings' inputs (a data sample, no bank axis) take only their
   one shape, as in ORC.
3. ``out_dim`` of a parallel readout is its whole output, split evenly over
   the chunks, as in ORC 0.4 (``ParallelLinearReadout(out_dim=15, res_dim=10,
   chunks=5)``: ``wout`` ``(5, 3, 10)``, 15 outputs). ORC silently truncates
   ``out_dim / chunks`` (``out_dim=3, chunks=5`` gives a readout with no
   outputs); ours refuses it.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import orc
from orc.drivers import (
    ESNDriver,
    GRUDriver,
    ParallelESNDriver,
    ParallelTaylorDriver,
    TaylorDriver,
)
from orc.embeddings import LinearEmbedding
from orc.readouts import (
    LinearReadout,
    NonlinearReadout,
    ParallelLinearReadout,
    ParallelNonlinearReadout,
    ParallelQuadraticReadout,
    QuadraticReadout,
)


def _dense_np(wr) -> np.ndarray:
    """The dense matrices of ``wr``'s ELL layout, built by numpy (entries of
    a row at the same column add up, as BCOO's duplicates)."""
    values, columns = np.asarray(wr.values), np.asarray(wr.columns)
    lead = values.shape[:-2]
    n = values.shape[-2]
    out = np.zeros(lead + (n, n))
    for idx in np.ndindex(*lead):
        rows = np.repeat(np.arange(n), values.shape[-1])
        np.add.at(out[idx], (rows, columns[idx].ravel()), values[idx].ravel())
    return out


# --------------------------------------------------------------------------- #
# 1. wr is a BCOO
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def bank():
    return ParallelESNDriver(res_dim=212, chunks=4, seed=0)


def test_bcoo_todense_of_a_parallel_drivers_wr_is_the_dense_stack(bank):
    wr = bank.wr
    assert isinstance(wr, sparse.BCOO)
    assert isinstance(wr, orc.drivers.ReservoirMatrix)
    expected = _dense_np(wr)
    for dense in (
        sparse.BCOO.todense(wr),
        sparse.bcoo_todense(wr),
        sparse.todense(wr),
        jax.jit(sparse.BCOO.todense)(wr),
        jax.jit(sparse.todense)(wr),
        wr.todense(),
    ):
        assert dense.shape == (4, 212, 212)
        np.testing.assert_array_equal(np.asarray(dense), expected)


def test_wr_shows_bcoos_layout_and_flags_as_orc(bank):
    wr = bank.wr
    k = wr.values.shape[-1]
    assert wr.shape == (4, 212, 212)
    assert (wr.n_batch, wr.n_sparse, wr.n_dense) == (1, 2, 0)
    assert wr.nse == 212 * k
    assert wr.data.shape == (4, 212 * k) and wr.indices.shape == (4, 212 * k, 2)
    assert wr.dtype == jnp.float64
    # ORC 0.4's wr: BCOO(float64[4, 212, 212], n_batch=1), neither flag set
    assert (wr.indices_sorted, wr.unique_indices) == (False, False)
    # data/indices name the entries of values/columns, row by row
    idx = np.asarray(wr.indices)
    np.testing.assert_array_equal(
        idx[..., 0], np.tile(np.repeat(np.arange(212), k), (4, 1))
    )
    np.testing.assert_array_equal(idx[..., 1], np.asarray(wr.columns).reshape(4, -1))


def test_bcoo_functions_and_products_on_wr(bank):
    wr = bank.wr
    dense = _dense_np(wr)
    x = np.random.default_rng(0).standard_normal((4, 212, 3))
    # the operands are put on the device from numpy (jnp.asarray compiles a
    # program per shape); BCOO's functions run eagerly, as a user calls them
    dot = sparse.bcoo_dot_general(
        wr, jax.device_put(x), dimension_numbers=(([2], [1]), ([0], [0]))
    )
    np.testing.assert_allclose(dot, np.einsum("cij,cjm->cim", dense, x), atol=1e-12)
    v = x[0, :, 0]
    np.testing.assert_allclose(wr @ jax.device_put(v), dense @ v, atol=1e-12)
    np.testing.assert_allclose(jax.device_put(v) @ wr, v @ dense, atol=1e-12)
    part = sparse.bcoo_slice(wr, start_indices=(2, 0, 0), limit_indices=(3, 212, 212))
    np.testing.assert_array_equal(part.todense(), dense[2:3])
    rows = sparse.bcoo_reduce_sum(wr, axes=(2,))
    np.testing.assert_allclose(rows.todense(), dense.sum(axis=2), atol=1e-12)
    twice = wr * 2.0
    assert type(twice) is sparse.BCOO
    np.testing.assert_array_equal(twice.todense(), 2 * dense)
    summed = wr.sum_duplicates(nse=wr.nse)
    np.testing.assert_array_equal(summed.todense(), dense)
    np.testing.assert_array_equal(wr.to_bcoo().todense(), dense)


def test_single_drivers_wr_is_a_bank_of_one_bcoo():
    wr = ESNDriver(40, seed=1).wr
    assert isinstance(wr, sparse.BCOO) and wr.shape == (1, 40, 40)
    dense = _dense_np(wr)
    np.testing.assert_array_equal(sparse.BCOO.todense(wr), dense)
    one = wr[0]  # one matrix: a BCOO without batch axis, as ORC's wr[0]
    assert isinstance(one, sparse.BCOO) and one.shape == (40, 40) and one.n_batch == 0
    np.testing.assert_array_equal(sparse.BCOO.todense(one), dense[0])


def test_wr_stays_a_pytree_of_its_two_leaves(bank, tmp_path):
    wr = bank.wr
    leaves = jax.tree.leaves(wr)
    assert len(leaves) == 2
    assert leaves[0] is wr.values and leaves[1] is wr.columns
    # grad through BCOO's todense reaches the ELL values: d/dv[c,i,j] of
    # sum(M * W) is M[c, i, columns[c, i, j]]
    m = np.random.default_rng(1).standard_normal((4, 212, 212))
    # grad and vmap under filter_jit (one program each; eagerly, one per
    # operation)
    grads = eqx.filter_jit(
        eqx.filter_grad(lambda d: jnp.sum(sparse.BCOO.todense(d.wr) * m))
    )(bank)
    cols = np.asarray(wr.columns)
    expected = np.take_along_axis(m, cols, axis=2)
    np.testing.assert_allclose(grads.wr.values, expected, atol=1e-12)
    # vmap over a stack of drivers
    two = jax.tree.map(lambda a, b: jax.device_put(np.stack([a, b])), bank, bank)
    stacked = eqx.filter_jit(eqx.filter_vmap(lambda d: sparse.BCOO.todense(d.wr)))(two)
    np.testing.assert_array_equal(np.asarray(stacked)[1], _dense_np(wr))
    # saved and loaded bit for bit, and still ours
    path = orc.save(tmp_path / "driver.orc", bank)
    back = orc.load(path)
    assert type(back.wr) is type(wr)
    np.testing.assert_array_equal(back.wr.values, wr.values)
    np.testing.assert_array_equal(back.wr.columns, wr.columns)
    np.testing.assert_array_equal(sparse.BCOO.todense(back.wr), _dense_np(wr))


# --------------------------------------------------------------------------- #
# 2. a single component takes a bank of one
# --------------------------------------------------------------------------- #

N = 24


def _vectors(n=N, seed=2):
    """Two JAX vectors, put on the device from numpy (jnp.asarray compiles a
    program per shape)."""
    rng = np.random.default_rng(seed)
    return jax.device_put((rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)))


def _np(f, *xs):
    """``f`` of the arrays ``xs`` taken in numpy, put on the device (an eager
    ``x[None]`` or ``jnp.stack`` compiles a program per shape)."""
    return jax.device_put(f(*(np.asarray(x) for x in xs)))


def _one(x):
    """``x[None]``: a bank of one."""
    return _np(lambda a: a[None], x)


def test_esn_driver_advance_takes_a_bank_of_one():
    d = ESNDriver(N, leak=0.6, bias=1.6, seed=3)
    p, r = _vectors()
    # numpy's update: leak * tanh(W r + p + bias) + (1 - leak) r
    w = _dense_np(d.wr)[0]
    expected = 0.6 * np.tanh(
        w @ np.asarray(r) + np.asarray(p) + 1.6
    ) + 0.4 * np.asarray(r)
    for pp in (p, _one(p)):
        for rr in (r, _one(r)):
            out = d.advance(pp, rr)
            assert out.shape == (N,)  # ORC's answer: (res_dim,)
            np.testing.assert_allclose(out, expected, atol=1e-12)
    np.testing.assert_allclose(d(_one(p), _one(r)), expected, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ESNDriver(N, seed=4),
        lambda: TaylorDriver(3, N, seed=4),
        lambda: ESNDriver(N, mode="continuous", seed=4),
    ],
    ids=["esn", "taylor", "esn-continuous"],
)
def test_single_drivers_bank_of_one_under_transforms(make):
    d = make()
    p, r = _vectors()
    ref = d.advance(p, r)
    p1, r1 = _one(p), _one(r)
    np.testing.assert_array_equal(d.advance(p1, r1), ref)
    jitted = jax.jit(lambda d, p, r: d.advance(p, r))(d, p1, r1)
    assert jitted.shape == (N,)
    np.testing.assert_allclose(jitted, ref, atol=1e-14)
    pn, rn = np.asarray(p), np.asarray(r)
    ps, rs = jax.device_put((np.stack([pn, rn, pn * rn]), np.stack([rn, pn, rn - pn])))
    ps1, rs1 = jax.device_put((np.asarray(ps)[:, None], np.asarray(rs)[:, None]))
    # vmap and grad under jax.jit (one program each; eagerly, one per
    # operation)
    vadvance = jax.jit(jax.vmap(d.advance))
    batched = vadvance(ps1, rs1)
    assert batched.shape == (3, N)
    np.testing.assert_allclose(batched, vadvance(ps, rs), atol=1e-14)
    # __call__: (1, N) is one state, (T, 1, N) a batch of them
    np.testing.assert_allclose(d(ps1, rs1), d(ps, rs), atol=1e-14)
    grad = jax.jit(jax.grad(lambda r: jnp.sum(d.advance(p, r) ** 2)))
    g1 = grad(r1)
    g0 = grad(r)
    assert g1.shape == (1, N)
    np.testing.assert_allclose(np.asarray(g1)[0], g0, atol=1e-14)


def test_esn_advance_seq_takes_a_bank_of_one():
    d = ESNDriver(N, seed=5)
    ps = jax.device_put(np.random.default_rng(6).uniform(-1, 1, (7, N)))
    r = d.default_state()
    ref = d.advance_seq(ps, r)
    np.testing.assert_array_equal(
        d.advance_seq(_np(lambda a: a[:, None], ps), _one(r)), ref
    )
    manual, state = [], np.zeros(N)
    w = _dense_np(d.wr)[0]
    for p in np.asarray(ps):
        state = 0.6 * np.tanh(w @ state + p + 1.6) + 0.4 * state
        manual.append(state)
    np.testing.assert_allclose(ref, np.stack(manual), atol=1e-12)


def test_only_a_bank_of_one_is_taken():
    p, r = _vectors()
    d = ESNDriver(N, seed=7)
    with pytest.raises(
        ValueError, match=r"proj_vars must have shape \(24,\) or \(1, 24\)"
    ):
        d.advance(_np(lambda a: np.stack([a, a]), p), r)
    with pytest.raises(
        ValueError, match=r"res_state must have shape \(24,\) or \(1, 24\)"
    ):
        d.advance(p, _np(lambda a: a[:, None], r))
    # a parallel driver's state keeps its chunk axis, as ORC's
    par = ParallelTaylorDriver(2, N, chunks=1, seed=7)
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(1, 24\), got"):
        par.advance(p, _one(r))
    # a GRU has no bank (ORC's fails on (1, N) too); its error names the shape
    gru = GRUDriver(N, seed=7)
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(24,\), got"):
        gru.advance(_one(p), _one(r))
    # an embedding's input is a data sample, without bank axis (ORC refuses it too)
    emb = LinearEmbedding(3, N, 0.1, seed=7)
    u = jax.device_put(np.array([0.1, -0.2, 0.3]))
    assert emb.embed(u).shape == (N,)
    with pytest.raises(ValueError, match=r"in_state must have shape \(3,\)"):
        emb.embed(_one(u))


# each readout and numpy's feature map (ORC's periodic list: node j kept when
# j % (m + 1) == 0, else mapped by function j % (m + 1) - 1)
READOUTS = {
    "linear": (lambda o, n: LinearReadout(o, n), lambda r: r),
    "quadratic": (
        lambda o, n: QuadraticReadout(o, n),
        lambda r: np.where(np.arange(r.shape[-1]) % 2 == 1, r**2, r),
    ),
    "nonlinear": (
        lambda o, n: NonlinearReadout(o, n, nonlin_list=[jnp.sin, jnp.cos]),
        lambda r: np.select(
            [np.arange(r.shape[-1]) % 3 == 1, np.arange(r.shape[-1]) % 3 == 2],
            [np.sin(r), np.cos(r)],
            r,
        ),
    ),
}


@pytest.mark.parametrize("kind", list(READOUTS))
def test_single_readouts_take_a_bank_of_one(kind):
    make, phi = READOUTS[kind]
    out_dim = 3
    w = np.random.default_rng(8).standard_normal((1, out_dim, N))
    ro = make(out_dim, N).set_wout(jax.device_put(w))
    r, q = _vectors(seed=9)
    expected = w[0] @ phi(np.asarray(r))
    r1 = _one(r)
    for x in (r, r1):
        np.testing.assert_allclose(ro.readout(x), expected, atol=1e-12)
        out = ro(x)  # (1, N) is one state, as ORC 0.4 reads it
        assert out.shape == (out_dim,)
        np.testing.assert_allclose(out, expected, atol=1e-12)
    seq_np = np.stack([np.asarray(r), np.asarray(q)])
    seq = jax.device_put(seq_np)
    by_row = np.stack([w[0] @ phi(s) for s in seq_np])
    # vmap and grad under jax.jit (one program each; eagerly, one per
    # operation)
    vreadout = jax.jit(jax.vmap(ro.readout))
    for xs in (seq, jax.device_put(seq_np[:, None])):
        np.testing.assert_allclose(ro(xs), by_row, atol=1e-12)
        np.testing.assert_allclose(ro.batch_readout(xs), by_row, atol=1e-12)
        np.testing.assert_allclose(vreadout(xs), by_row, atol=1e-12)
    jitted = jax.jit(lambda ro, x: ro.readout(x))(ro, r1)
    np.testing.assert_allclose(jitted, expected, atol=1e-12)
    grad = jax.jit(jax.grad(lambda x: jnp.sum(ro.readout(x))))
    g = grad(r1)
    assert g.shape == (1, N)
    np.testing.assert_allclose(np.asarray(g)[0], grad(r))
    with pytest.raises(
        ValueError, match=r"res_state must have shape \(24,\) or \(1, 24\)"
    ):
        ro.readout(seq)


# --------------------------------------------------------------------------- #
# 3. out_dim of a parallel readout is its whole output
# --------------------------------------------------------------------------- #


def test_parallel_linear_readout_out_dim_is_the_whole_output():
    ro = ParallelLinearReadout(out_dim=15, res_dim=10, chunks=5)
    assert ro.wout.shape == (5, 3, 10) and ro.out_dim == 15  # as ORC 0.4
    rng = np.random.default_rng(10)
    w = rng.standard_normal((5, 3, 10))
    r = rng.standard_normal((5, 10))
    out = ro.set_wout(jax.device_put(w)).readout(jax.device_put(r))
    expected = np.concatenate([w[c] @ r[c] for c in range(5)])  # chunk by chunk
    assert out.shape == (15,)
    np.testing.assert_allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize("kind", ["quadratic", "nonlinear"])
def test_parallel_nonlinear_readouts_split_out_dim(kind):
    if kind == "quadratic":
        ro = ParallelQuadraticReadout(out_dim=12, res_dim=6, chunks=4)
        phi = READOUTS["quadratic"][1]
    else:
        ro = ParallelNonlinearReadout(
            out_dim=12, res_dim=6, chunks=4, nonlin_list=[jnp.sin, jnp.cos]
        )
        phi = READOUTS["nonlinear"][1]
    assert ro.wout.shape == (4, 3, 6)
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4, 3, 6))
    r = rng.standard_normal((4, 6))
    out = ro.set_wout(jax.device_put(w)).readout(jax.device_put(r))
    expected = np.concatenate([w[c] @ phi(r[c]) for c in range(4)])
    np.testing.assert_allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ParallelLinearReadout(out_dim=3, res_dim=10, chunks=5),
        lambda: ParallelQuadraticReadout(out_dim=6, res_dim=6, chunks=12),
        lambda: ParallelNonlinearReadout(
            out_dim=6, res_dim=6, chunks=12, nonlin_list=[jnp.sin]
        ),
    ],
    ids=["linear", "quadratic", "nonlinear"],
)
def test_out_dim_not_split_evenly_is_refused(make):
    # ORC 0.4 builds wout (chunks, int(out_dim / chunks), res_dim): here no
    # outputs at all; ours says what out_dim means
    with pytest.raises(ValueError, match=r"must evenly divide out_dim .*whole output"):
        make()


def test_forecaster_passes_the_whole_data_dim():
    m = orc.forecaster.ESNForecaster(data_dim=6, res_dim=30, chunks=3, seed=0)
    assert m.readout.out_dim == 6 and m.readout.wout.shape == (3, 2, 30)
