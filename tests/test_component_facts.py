"""ORC 0.4's component view, fact by fact (issue 17).

``tests/data/orc04_construction/components.json`` was written by ORC 0.4
itself (``make_fixtures.py`` in that folder): for every public component and
model, each attribute (type, value, array shape and dtype, the layout of the
``BCOO`` reservoir matrices) and the shapes of what its methods return. This
module builds ours with the same arguments and checks every recorded fact,
then checks that the view is the truth: ``wr.todense()`` of every chunk is
the matrix the compute path multiplies by, each chunk has the requested
spectral radius, and ORC's ridge helpers return ORC's shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import orc
from orc import drivers, embeddings, readouts
from orc.classifier.models import ESNClassifier
from orc.control.models import ESNController
from orc.forecaster.models import CESNForecaster, EnsembleESNForecaster, ESNForecaster
from orc.utils.regressions import _solve_all_ridge_reg, _solve_all_ridge_reg_batched

DATA = Path(__file__).parent / "data" / "orc04_construction" / "components.json"
FACTS = json.loads(DATA.read_text())["components"]
T = json.loads(DATA.read_text())["generated_with"]["T"]
SIN = [jnp.sin]

COMPONENTS = {
    "ESNDriver(res_dim=50)": lambda: drivers.ESNDriver(50, seed=0),
    "ParallelESNDriver(res_dim=50, chunks=3)": lambda: drivers.ParallelESNDriver(
        50, chunks=3, seed=0
    ),
    "TaylorDriver(n_terms=3, res_dim=50)": lambda: drivers.TaylorDriver(3, 50, seed=0),
    "ParallelTaylorDriver(n_terms=3, res_dim=50, chunks=3)": lambda: (
        drivers.ParallelTaylorDriver(3, 50, chunks=3, seed=0)
    ),
    "GRUDriver(res_dim=50)": lambda: drivers.GRUDriver(50, seed=0),
    "LinearEmbedding(in_dim=3, res_dim=50, scaling=0.1)": lambda: (
        embeddings.LinearEmbedding(3, 50, 0.1, seed=0)
    ),
    "ParallelLinearEmbedding(in_dim=6, res_dim=50, scaling=0.1, chunks=3, locality=1)": (
        lambda: embeddings.ParallelLinearEmbedding(
            6, 50, 0.1, chunks=3, locality=1, seed=0
        )
    ),
    "EnsembleLinearEmbedding(in_dim=3, res_dim=50, scaling=0.1, chunks=3)": lambda: (
        embeddings.EnsembleLinearEmbedding(3, 50, 0.1, chunks=3, seed=0)
    ),
    "LinearReadout(out_dim=3, res_dim=50)": lambda: readouts.LinearReadout(3, 50),
    "ParallelLinearReadout(out_dim=6, res_dim=50, chunks=3)": lambda: (
        readouts.ParallelLinearReadout(6, 50, chunks=3)
    ),
    "NonlinearReadout(out_dim=3, res_dim=50, nonlin_list=[sin])": lambda: (
        readouts.NonlinearReadout(3, 50, SIN)
    ),
    "ParallelNonlinearReadout(out_dim=6, res_dim=50, nonlin_list=[sin], chunks=3)": (
        lambda: readouts.ParallelNonlinearReadout(6, 50, SIN, chunks=3)
    ),
    "QuadraticReadout(out_dim=3, res_dim=50)": lambda: readouts.QuadraticReadout(3, 50),
    "ParallelQuadraticReadout(out_dim=6, res_dim=50, chunks=3)": lambda: (
        readouts.ParallelQuadraticReadout(6, 50, chunks=3)
    ),
    "EnsembleLinearReadout(out_dim=3, res_dim=50, chunks=3)": lambda: (
        readouts.EnsembleLinearReadout(3, 50, chunks=3)
    ),
}

MODELS = {
    "ESNForecaster(data_dim=3, res_dim=50)": lambda: ESNForecaster(3, 50),
    "ESNForecaster(data_dim=6, res_dim=50, chunks=3, locality=1)": lambda: (
        ESNForecaster(6, 50, chunks=3, locality=1)
    ),
    "CESNForecaster(data_dim=3, res_dim=50)": lambda: CESNForecaster(3, 50),
    "EnsembleESNForecaster(data_dim=3, res_dim=50, chunks=3)": lambda: (
        EnsembleESNForecaster(3, 50, chunks=3)
    ),
    "ESNClassifier(data_dim=3, n_classes=4, res_dim=50)": lambda: ESNClassifier(
        3, 4, 50
    ),
    "ESNController(data_dim=3, control_dim=2, res_dim=50)": lambda: ESNController(
        3, 2, 50
    ),
}


def test_every_recorded_component_is_covered():
    assert set(FACTS) == set(COMPONENTS) | set(MODELS)


def _check_attribute(owner, name, fact, value):
    where = f"{owner}.{name}"
    kind = fact["type"]
    if kind == "BCOO":
        # ORC's reservoir matrices: ours are a view with BCOO's attributes
        assert tuple(value.shape) == tuple(fact["shape"]), where
        assert jnp.dtype(value.dtype) == jnp.dtype(fact["dtype"]), where
        assert tuple(value.data.shape) == tuple(fact["data_shape"]), where
        assert tuple(value.indices.shape) == tuple(fact["indices_shape"]), where
        assert jnp.dtype(value.indices.dtype) == jnp.dtype(fact["indices_dtype"]), where
        assert value.nse == fact["nse"], where
        bcoo = value.to_bcoo()
        assert isinstance(bcoo, sparse.BCOO)
        assert (bcoo.n_batch, bcoo.n_sparse, bcoo.n_dense) == (
            fact["n_batch"],
            fact["n_sparse"],
            fact["n_dense"],
        ), where
    elif kind in ("ArrayImpl", "ndarray"):
        assert tuple(value.shape) == tuple(fact["shape"]), where
        assert jnp.dtype(value.dtype) == jnp.dtype(fact["dtype"]), where
    elif kind in ("int", "bool", "str"):
        assert value == fact["value"] and type(value).__name__ == kind, where
    elif kind == "float":
        # ORC keeps hyperparameters as Python floats; ours are 0-d arrays
        # (data, so models of different values stack) of the same value
        assert float(value) == pytest.approx(fact["value"], rel=1e-15), where
    elif kind == "_ScalarMeta":  # a dtype
        assert jnp.dtype(value) == jnp.dtype(fact["value"]), where
    elif "attributes" in fact:  # a nested component of a model
        _check_component(where, fact, value)
    elif kind in ("list", "tuple"):
        assert len(value) == fact["len"], where
    elif "name" in fact:  # a function (nonlin_list entries)
        assert value.__name__ == fact["name"], where
    else:  # another object (a solver of a continuous model): same type
        assert type(value).__name__ == kind, where


def _check_component(owner, fact, ours):
    assert type(ours).__name__ == fact["type"], owner
    for name, attr in fact["attributes"].items():
        assert hasattr(ours, name), f"{owner} has no attribute {name!r}"
        _check_attribute(owner, name, attr, getattr(ours, name))


# The facts are shapes: jax.eval_shape traces the methods (all of their
# Python code runs, on abstract arrays) and gives the shapes of their results
# without compiling them (a program each, or run eagerly one per operation).


def _shape(fn, *args):
    out = jax.eval_shape(lambda: fn(*args))
    return list(out.shape)


def _io(comp):
    """The shapes of what ``comp``'s methods return (traced together)."""

    def run():
        key = jax.random.key(1)
        if isinstance(comp, drivers.DriverBase):
            state = comp.default_state()
            proj = jax.random.normal(key, state.shape, state.dtype)
            return {
                "default_state": comp.default_state(),
                "advance": comp.advance(proj, state),
                "call_single": comp(proj, state),
                "call_sequence": comp(jnp.stack([proj] * T), jnp.stack([state] * T)),
            }
        if isinstance(comp, embeddings.EmbedBase):
            x = jax.random.normal(key, (comp.in_dim,))
            return {
                "embed": comp.embed(x),
                "call_single": comp(x),
                "call_sequence": comp(jnp.stack([x] * T)),
            }
        state = jnp.zeros(comp.state_shape)
        return {
            "readout": comp.readout(state),
            "call_single": comp(state),
            "call_sequence": comp(jnp.stack([state] * T)),
            "prepare_train": comp.prepare_train(jnp.stack([state] * T)),
        }

    return {method: list(out.shape) for method, out in jax.eval_shape(run).items()}


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_matches_orc(name):
    fact = FACTS[name]
    ours = COMPONENTS[name]()
    _check_component(name, fact, ours)
    got = _io(ours)
    for method, out in fact["io"].items():
        assert got[method] == out["shape"], f"{name}.{method}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_orc(name):
    fact = FACTS[name]
    model = MODELS[name]()
    for part in ("driver", "embedding", "readout"):
        _check_component(
            f"{name}.{part}", fact["attributes"][part], getattr(model, part)
        )
    state = model.driver.default_state()
    io = fact["io"]
    assert list(state.shape) == io["driver.default_state"]["shape"]
    # numpy inputs: the models' entry points convert them (jnp.zeros and
    # jnp.linspace would be programs of their own)
    x = np.zeros((T, model.in_dim))
    if isinstance(model, CESNForecaster):
        ts = np.linspace(0.0, 0.4, T)
        got = {
            "force(in_seq[T,in_dim], state, ts)": _shape(model.force, x, state, ts),
            "forecast(ts, state)": _shape(model.forecast, ts, state),
        }
    elif isinstance(model, ESNClassifier):
        got = {
            "force(in_seq[T,in_dim], state)": _shape(model.force, x, state),
            "classify(in_seq[T,in_dim])": _shape(model.classify, x),
        }
    elif isinstance(model, ESNController):
        u = np.zeros((T, model.control_dim))
        got = {
            "force(in_seq[T,in_dim], control_seq[T,control_dim], state)": _shape(
                model.force, x, u, state
            ),
            "apply_control(control_seq[T,control_dim], state)": _shape(
                model.apply_control, u, state
            ),
        }
    else:
        got = {
            "force(in_seq[T,in_dim], state)": _shape(model.force, x, state),
            "forecast(T, state)": _shape(model.forecast, T, state),
        }
    for method, out in io.items():
        if method != "driver.default_state":
            assert got[method] == out["shape"], f"{name}.{method}"


# --------------------------------------------------------------------------- #
# The view is the truth
# --------------------------------------------------------------------------- #
# The dense matrices of a view, under jax.jit: one program per layout (run
# eagerly, every operation of the scatter is a program of its own per shape)
@jax.jit
def _dense_views(wr):
    """``wr.todense()`` and the dense matrix of its ``to_bcoo()``."""
    return wr.todense(), wr.to_bcoo().todense()


@pytest.mark.parametrize(
    "make",
    [
        lambda: drivers.ESNDriver(60, spectral_radius=0.7, seed=2),
        lambda: drivers.ParallelESNDriver(60, chunks=3, spectral_radius=0.7, seed=2),
        lambda: drivers.TaylorDriver(2, 60, spectral_radius=0.7, seed=2),
        lambda: drivers.ParallelTaylorDriver(
            2, 60, chunks=3, spectral_radius=0.7, seed=2
        ),
    ],
    ids=["ESN", "ParallelESN", "Taylor", "ParallelTaylor"],
)
def test_todense_is_the_matrix_the_update_uses(make):
    d = make()
    chunks, n = d.chunks, d.res_dim
    dense, from_bcoo = map(np.asarray, _dense_views(d.wr))
    assert dense.shape == (chunks, n, n) == d.wr.shape
    np.testing.assert_array_equal(from_bcoo, dense)
    rng = np.random.default_rng(0)
    r = 0.5 * rng.standard_normal(d.state_shape)
    p = 0.5 * rng.standard_normal(d.state_shape)
    # the update and BCOO's product under jax.jit (one program each; eagerly,
    # one per operation)
    got = np.asarray(jax.jit(lambda p, r: d.advance(p, r))(p, r))
    rb, pb = r.reshape(chunks, n), p.reshape(chunks, n)
    z = np.einsum("cij,cj->ci", dense, rb) + pb
    if isinstance(d, drivers.ESNDriver | drivers.ParallelESNDriver):
        want = 0.4 * rb + 0.6 * np.tanh(z + 1.6)
    else:  # second-order Taylor polynomial of tanh around the bias
        t = np.tanh(1.6)
        want = t + (1 - t**2) * z - t * (1 - t**2) * z**2
    np.testing.assert_allclose(got, want.reshape(d.state_shape), rtol=1e-12, atol=1e-12)
    # BCOO's own product agrees, and every chunk has the requested radius
    np.testing.assert_allclose(
        np.asarray(jax.jit(lambda v: d.wr @ v)(rb[0])),
        dense @ rb[0],
        rtol=1e-12,
        atol=1e-12,
    )
    for c in range(chunks):
        rho = np.max(np.abs(np.linalg.eigvals(dense[c])))
        np.testing.assert_allclose(rho, 0.7, rtol=1e-6)
    if chunks > 1:  # different chunks are different reservoirs
        assert not np.array_equal(dense[0], dense[1])


def test_bcoo_view_entries_match_dense():
    d = drivers.ParallelESNDriver(40, chunks=2, density=0.1, seed=5)
    data, idx = np.asarray(d.wr.data), np.asarray(d.wr.indices)
    dense = np.zeros((2, 40, 40))
    for c in range(2):
        np.add.at(dense[c], (idx[c, :, 0], idx[c, :, 1]), data[c])
    # one matrix of the bank, as BCOO's indexing gives it (with the dense
    # views, in one program)
    views, one, one_dense = jax.jit(lambda w: (w.todense(), w[1], w[1].todense()))(d.wr)
    np.testing.assert_array_equal(dense, np.asarray(views))
    np.testing.assert_array_equal(np.asarray(one_dense), dense[1])
    assert abs(orc.utils.numerics.max_eig_arnoldi(one)) == pytest.approx(
        np.max(np.abs(np.linalg.eigvals(dense[1]))), rel=1e-6
    )


def test_single_components_are_banks_of_one_seen_without_the_axis():
    emb = embeddings.LinearEmbedding(3, 20, 0.5, seed=1)
    ro = readouts.LinearReadout(2, 20)
    # JAX inputs put on the device from numpy, the references in numpy (eager
    # jnp constructors and indexing compile programs of their own)
    ro = ro.set_wout(jax.device_put(np.arange(40.0).reshape(1, 2, 20) / 40))
    un, rn = np.array([0.3, -0.2, 0.7]), np.linspace(-1, 1, 20)
    u, r = jax.device_put((un, rn))
    np.testing.assert_allclose(emb.embed(u), np.asarray(emb.win)[0] @ un)
    np.testing.assert_allclose(ro.readout(r), np.asarray(ro.wout)[0] @ rn)
    # training features and targets carry the bank axis of one (ORC 0.4)
    rs, targets = jax.device_put((np.stack([rn] * 4), np.zeros((4, 2))))
    assert ro.prepare_train(rs).shape == (4, 1, 20)
    assert ro.prepare_target(targets).shape == (4, 1, 2)


def test_solve_all_ridge_reg_shapes():
    """ORC's helpers: states ``(T, chunks, F)`` and targets ``(T, chunks, O)``
    give ``(chunks, O, F)``, what a readout's ``set_wout`` takes."""
    rng = np.random.default_rng(3)
    # JAX inputs put on the device from numpy; slices and references in numpy
    Rn, Un = rng.standard_normal((40, 4, 8)), rng.standard_normal((40, 4, 3))
    R, U = jax.device_put((Rn, Un))
    # the helpers under jax.jit (one program per shape; eagerly, one per
    # operation); test_orc_utils_parity runs them eagerly
    solve = jax.jit(_solve_all_ridge_reg)
    solve_batched = jax.jit(_solve_all_ridge_reg_batched, static_argnums=3)
    W = solve(R, U, 1e-3)
    assert W.shape == (4, 3, 8)
    assert solve_batched(R, U, 1e-3, 3).shape == (4, 3, 8)
    ref = np.linalg.solve(
        Rn[:, 1].T @ Rn[:, 1] + 1e-3 * np.eye(8),
        Rn[:, 1].T @ Un[:, 1],
    ).T
    np.testing.assert_allclose(np.asarray(W)[1], ref, rtol=1e-10)
    # a single readout takes the bank of one they give for one reservoir
    ro = readouts.LinearReadout(3, 8)
    R0, U0 = jax.device_put((Rn[:, 0], Un[:, 0]))
    W1 = solve(ro.prepare_train(R0), ro.prepare_target(U0), 1e-3)
    assert ro.set_wout(W1).wout.shape == ro.wout.shape == (1, 3, 8)
