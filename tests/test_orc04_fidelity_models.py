"""ORC 0.4 fidelity of models, training and notebooks (issue 44, items 4-6).

Each test states what ORC 0.4.0 does and checks that ``orc`` does the same
(or, where ORC's behaviour is an error, that ours says what to do instead).
"""

from __future__ import annotations

import functools
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

from _helpers import assert_batched, lorenz_rk4, on_cpu
from orc import drivers, embeddings, readouts
from orc._native import native_config
from orc.classifier import ESNClassifier
from orc.control import ESNController
from orc.forecaster import (
    CESNForecaster,
    DeepESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    NVARForecaster,
    train_RCForecaster,
)
from orc.regression import ESNRegressor
from orc.utils.regressions import _solve_all_ridge_reg

matplotlib.use("Agg")

LORENZ = lorenz_rk4(1500) / 10.0


def _random_like(x, seed):
    """Small random numbers of ``x``'s shape and dtype (NumPy's draw, put on
    the device: no program compiled per shape)."""
    draw = np.random.default_rng(seed).normal(0.0, 0.1, np.shape(x))
    return jax.device_put(draw.astype(x.dtype))


def _with_readout(model):
    """``model`` with non-zero readout weights (an untrained model's output
    does not depend on its reservoir, and warns)."""
    return model.set_readout(
        model.readout.set_wout(_random_like(model.readout.wout, 7))
    )


def _np_sequence(n, dim):
    x = np.asarray(LORENZ[:n])
    return np.tile(x, (1, -(-dim // 3)))[:, :dim]


def _sequence(n, dim):
    # a JAX array put on the device (jnp.asarray compiles a program per shape)
    return jax.device_put(_np_sequence(n, dim))


# --------------------------------------------------------------------------- #
# 4. Gradients of a model have the model's structure
# --------------------------------------------------------------------------- #


def _step_loss(model):
    """A scalar of one step of a reservoir model's pipeline from a random
    state: embed an input, advance the reservoir, read out (cheap to
    compile; the closed loop's gradient is test_contract's)."""
    u = jax.device_put(_np_sequence(1, model.in_dim)[0])
    r0 = _random_like(model.driver.default_state(), 1)
    return lambda m: jnp.sum(
        m.readout.readout(m.driver.advance(m.embedding.embed(u), r0)) ** 2
    )


def _forecaster_case(model):
    model = _with_readout(model)
    return model, _step_loss(model)


def _classifier_case(**kwargs):
    model = _with_readout(ESNClassifier(data_dim=4, n_classes=3, res_dim=40, **kwargs))
    x = _sequence(20, 4)
    return model, lambda m: jnp.sum(m.classify(x, None, 2) ** 2)


def _cesn_case():
    # the step's vector field: a gradient through diffrax's solve would cost
    # seconds to compile
    return _forecaster_case(CESNForecaster(3, 20))


def _nvar_case():
    model = NVARForecaster(3, k=2, s=1, order=2)
    model = eqx.tree_at(lambda m: m.wout, model, _random_like(model.wout, 7))
    window = _sequence(model.window, 3)
    return model, lambda m: jnp.sum(m.forecast(5, window) ** 2)


def _controller_case():
    model = _with_readout(ESNController(2, 1, 30))
    r0 = _random_like(model.driver.default_state(), 1)
    controls = jax.device_put(np.full((6, 1), 0.1))
    return model, lambda m: jnp.sum(m.apply_control(controls, r0) ** 2)


def _regressor_case(**kwargs):
    model = ESNRegressor(2, 1, 30, **kwargs)
    model = model.set_readout(
        model.readout.set_wout(_random_like(model.readout.wout, 7))
    )
    x = _sequence(15, 2)
    return model, lambda m: jnp.sum(m.predict(x) ** 2)


def _driver_case(driver):
    shape = driver.default_state().shape
    drive_shape = (
        (driver.sizes[0],) if isinstance(driver, drivers.StackedDriver) else shape
    )
    p = _random_like(np.zeros(drive_shape), 2)
    r = _random_like(np.zeros(shape), 3)
    return driver, lambda d: jnp.sum(d.advance(p, r) ** 2)


def _embedding_case(embedding):
    u = jax.device_put(np.linspace(-1.0, 1.0, embedding.in_dim))
    return embedding, lambda e: jnp.sum(e.embed(u) ** 2)


def _readout_case(readout, state_shape):
    readout = readout.set_wout(_random_like(readout.wout, 7))
    r = _random_like(np.zeros(state_shape), 3)
    return readout, lambda ro: jnp.sum(ro.readout(r) ** 2)


GRAD_CASES = {
    "esn": lambda: _forecaster_case(ESNForecaster(3, 30)),
    "esn_parallel": lambda: _forecaster_case(
        ESNForecaster(6, 20, chunks=3, locality=1)
    ),
    "ensemble": lambda: _forecaster_case(EnsembleESNForecaster(3, 20, chunks=3)),
    "deep": lambda: _forecaster_case(DeepESNForecaster(3, 20, n_layers=2)),
    "cesn": _cesn_case,
    "nvar": _nvar_case,
    "classifier_final": lambda: _classifier_case(),
    "classifier_ppv": lambda: _classifier_case(state_repr="bi_ppv"),
    "classifier_lags": lambda: _classifier_case(
        input_lags=(2,), input_differences=True
    ),
    "controller": _controller_case,
    "regressor_deep": lambda: _regressor_case(n_layers=2, input_passthrough=True),
    "driver_esn": lambda: _driver_case(drivers.ESNDriver(20, seed=0)),
    "driver_esn_parallel": lambda: _driver_case(
        drivers.ParallelESNDriver(20, chunks=2, seed=0)
    ),
    "driver_taylor": lambda: _driver_case(drivers.TaylorDriver(3, 20, seed=0)),
    "driver_taylor_parallel": lambda: _driver_case(
        drivers.ParallelTaylorDriver(2, 20, chunks=2, seed=0)
    ),
    "driver_gru": lambda: _driver_case(drivers.GRUDriver(20, seed=0)),
    "driver_deep": lambda: _driver_case(drivers.DeepESNDriver(10, n_layers=2, seed=0)),
    "driver_stacked": lambda: _driver_case(
        drivers.StackedDriver(
            [drivers.ESNDriver(10, seed=0), drivers.ESNDriver(8, seed=1)],
            [embeddings.LinearEmbedding(10, 8, 0.5, seed=2)],
        )
    ),
    "embedding_linear": lambda: _embedding_case(
        embeddings.LinearEmbedding(4, 20, 0.1, seed=0)
    ),
    "embedding_parallel": lambda: _embedding_case(
        embeddings.ParallelLinearEmbedding(4, 20, 0.1, chunks=2, locality=1, seed=0)
    ),
    "embedding_ensemble": lambda: _embedding_case(
        embeddings.EnsembleLinearEmbedding(4, 20, 0.1, chunks=3, seed=0)
    ),
    "readout_linear": lambda: _readout_case(readouts.LinearReadout(4, 20), (20,)),
    "readout_quadratic": lambda: _readout_case(readouts.QuadraticReadout(4, 20), (20,)),
    "readout_nonlinear": lambda: _readout_case(
        readouts.NonlinearReadout(4, 20, [jnp.tanh]), (20,)
    ),
    "readout_parallel": lambda: _readout_case(
        readouts.ParallelLinearReadout(4, 20, chunks=2), (2, 20)
    ),
    "readout_parallel_quadratic": lambda: _readout_case(
        readouts.ParallelQuadraticReadout(4, 20, chunks=2), (2, 20)
    ),
    "readout_parallel_nonlinear": lambda: _readout_case(
        readouts.ParallelNonlinearReadout(4, 20, [jnp.tanh], chunks=2), (2, 20)
    ),
    "readout_ensemble": lambda: _readout_case(
        readouts.EnsembleLinearReadout(4, 20, chunks=3), (3, 20)
    ),
}


def _is_none(x):
    return x is None


def _is_pair(x):
    return isinstance(x, tuple) and len(x) == 2 and eqx.is_array(x[0])


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradient_has_the_model_structure(name):
    """ORC 0.4: ``eqx.filter_grad`` of a scalar function of a model's output
    is a pytree of the model's structure (same static metadata, ``None`` where
    the model has no float arrays), so ``jax.tree_util.tree_map(f, g, m)``
    combines them (e.g. a gradient step). A module that left fields at their
    class defaults flattened with other metadata than the copies
    unflattening makes of it (Equinox counts the instance's attributes): a
    classifier, with five such fields, failed with "different pytree
    metadata"."""
    model, loss = GRAD_CASES[name]()
    leaves, treedef = jax.tree_util.tree_flatten(model)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert jax.tree_util.tree_structure(rebuilt) == treedef

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a CESN's time-constant hint
        value, grad = eqx.filter_jit(eqx.filter_value_and_grad(loss))(model)
    assert np.isfinite(np.asarray(value))
    params = eqx.filter(model, eqx.is_inexact_array)
    assert jax.tree_util.tree_structure(grad) == jax.tree_util.tree_structure(params)
    # e.g. a gradient step m - lr * g; pairing the leaves is what is checked
    paired = jax.tree_util.tree_map(
        lambda g, m: m if g is None else (m, g), grad, model, is_leaf=_is_none
    )
    assert jax.tree_util.tree_structure(paired, is_leaf=_is_pair) == treedef
    flat = [np.asarray(g) for g in jax.tree.leaves(grad)]
    assert flat and all(np.all(np.isfinite(g)) for g in flat)
    assert any(np.any(g != 0) for g in flat)


def test_issue_classifier_gradient_tree_map():
    """The issue's own case, as ORC 0.4 runs it: a 200-node classifier's
    gradient maps together with the model."""
    m = ESNClassifier(data_dim=4, n_classes=3, res_dim=200, seed=0)
    x, s = _sequence(20, 4), jax.device_put(np.zeros(200))
    _, g = eqx.filter_jit(
        eqx.filter_value_and_grad(lambda m, x, s: jnp.sum(m.classify(x, s) ** 2))
    )(m, x, s)
    out = jax.tree_util.tree_map(lambda a, b: b, g, m, is_leaf=_is_none)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(m)


# --------------------------------------------------------------------------- #
# 5. Multi-sequence training equals the concatenated solve
# --------------------------------------------------------------------------- #


def _relative(a, b):
    """Largest entry of ``|a - b|`` per chunk over the largest of ``|b|``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max(axis=(1, 2)) / np.abs(b).max(axis=(1, 2))


def test_multi_sequence_equals_concatenated_solve():
    """ORC 0.4 trains ``multi_sequence=True`` by concatenating the segments'
    states and targets (spinup removed per segment) and solving once, so its
    weights equal ``_solve_all_ridge_reg`` of that concatenation. Ours sums
    the segments' Gram statistics instead: the same normal equations, summed
    in another order. With ``beta=1e-6`` these are ill-conditioned
    (``cond(G + beta I)`` ~5e10 here), so float64 rounding of the Gram
    (~eps relative) moves the solution by up to ``eps * cond``: both paths
    must agree with each other and with an accurate reference (least
    squares on ``[X; sqrt(beta) I]``, whose error grows with ``sqrt(cond)``)
    to that bound, and a wrong row set (one row dropped at a boundary, or
    spinup removed once instead of per segment) must exceed it (in a chunk)."""
    n_seg, seg_len, spinup, beta = 3, 400, 20, 1e-6
    data = np.asarray(LORENZ)
    segments = jax.device_put(
        np.stack([data[100 + i * 450 : 100 + i * 450 + seg_len] for i in range(n_seg)])
    )
    model = ESNForecaster(data_dim=3, res_dim=60, seed=0, chunks=3)
    trained, states = train_RCForecaster(
        model, segments, spinup=spinup, beta=beta, multi_sequence=True
    )
    readout = model.readout
    # the readout's features and targets of every row of each whole segment
    # (row by row, so the rows below are slices of them), taken in numpy: each
    # eager call on its own slice would compile its programs per shape
    feats = [np.asarray(readout.prepare_train(s)) for s in np.asarray(states)]
    targets = [np.asarray(readout.prepare_target(s)) for s in np.asarray(segments)]

    def rows(drop=None, spinup_each=True):
        skip = [spinup if (spinup_each or i == 0) else 0 for i in range(n_seg)]
        x = [feats[i][skip[i] : seg_len - 1] for i in range(n_seg)]
        y = [targets[i][skip[i] + 1 :] for i in range(n_seg)]
        x, y = np.concatenate(x), np.concatenate(y)
        if drop is not None:
            x, y = np.delete(x, drop, 0), np.delete(y, drop, 0)
        return x, y

    x, y = rows()
    w_multi = np.asarray(trained.readout.wout)
    # ORC's solve under jax.jit, of the rows padded with zero rows to one row
    # count (one program for the three row sets below): a zero row adds
    # exactly nothing to the normal equations (X^T X, X^T Y)
    n_rows = len(rows(spinup_each=False)[0])  # the most rows of the three
    solve_all = jax.jit(_solve_all_ridge_reg)

    def solve(x, y):
        pad = ((0, n_rows - len(x)), (0, 0), (0, 0))
        return np.asarray(solve_all(np.pad(x, pad), np.pad(y, pad), beta))

    w_concat = solve(x, y)
    ref, kappa = [], []
    n = x.shape[-1]
    for c in range(x.shape[1]):
        a = np.vstack([x[:, c], np.sqrt(beta) * np.eye(n)])
        b = np.vstack([y[:, c], np.zeros((n, y.shape[-1]))])
        ref.append(np.linalg.lstsq(a, b, rcond=None)[0].T)
        sv = np.linalg.svd(a, compute_uv=False)
        kappa.append((sv[0] / sv[-1]) ** 2)  # cond(X^T X + beta I)
    ref = np.stack(ref)
    bound = np.finfo(np.float64).eps * np.asarray(kappa)
    assert np.all(bound > 1e-7), "the case is meant to be ill-conditioned"
    assert np.all(_relative(w_multi, ref) < bound)
    assert np.all(_relative(w_concat, ref) < bound)
    assert np.all(_relative(w_multi, w_concat) < bound)
    for wrong in (rows(drop=seg_len - 1 - spinup), rows(spinup_each=False)):
        # would fail the checks above: off by twice the bound in some chunk
        # (not in every one: dropping a boundary row moves chunk 0's exact
        # solution by 1.256e-5 against its bound of 1.249e-5, which rounding
        # decides, and a GPU's did: 1.243e-5 on an H200)
        w_wrong = solve(*wrong)
        assert np.any(_relative(w_wrong, ref) > 2 * bound)


# --------------------------------------------------------------------------- #
# 6a. ORC's plots return None; the space-time image at 200 dpi
# --------------------------------------------------------------------------- #


def test_orc_plots_return_none_like_orc():
    """ORC 0.4's ``plot_time_series`` and ``imshow_1D_spatiotemp`` draw on a
    new pyplot figure and return ``None`` (a notebook cell that ends with the
    call shows the figure once); ``imshow_1D_spatiotemp`` draws at 200 dpi."""
    import matplotlib.pyplot as plt

    from orc.utils import visualization as viz

    try:
        u = np.asarray(LORENZ[:50])
        assert viz.plot_time_series(u) is None
        fig = plt.gcf()
        assert len(fig.axes) == 3 and len(fig.axes[0].get_lines()) == 1
        before = plt.get_fignums()
        assert viz.imshow_1D_spatiotemp(u, 5.0, domain=(0, 3)) is None
        assert len(plt.get_fignums()) == len(before) + 1  # a new figure
        assert plt.gcf().get_dpi() == 200
        assert plt.gcf().axes[0].images[0].get_array().shape == (3, 50)
    finally:
        plt.close("all")


# --------------------------------------------------------------------------- #
# 6b. Training's states are force()'s bits
# --------------------------------------------------------------------------- #

_NATIVE = native_config()["available"]

BACKENDS = [
    "xla",
    pytest.param(
        "native",
        marks=pytest.mark.skipif(not _NATIVE, reason="native kernels not built"),
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("chunks", [1, 3])
def test_training_states_are_force_bits(chunks, backend):
    """ORC 0.4 computes training's states with ``force`` itself, so the
    Lorenz notebook's gap between ``forecast(n, R[-1])`` and
    ``forecast_from_IC(n, U_train)`` is exactly 0. Ours must give the same
    bits whatever path computes them."""
    u = jax.device_put(np.asarray(LORENZ[:400]))
    with on_cpu():
        model = ESNForecaster(data_dim=3, res_dim=60, seed=0, chunks=chunks)
        trained, states = train_RCForecaster(model, u, spinup=50, backend=backend)
        forced = trained.force(u, trained.driver.default_state(), backend=backend)
        assert np.array_equal(np.asarray(states), np.asarray(forced))
        # the last state and the gap taken in numpy (no programs of their own)
        a = trained.forecast(100, np.asarray(states)[-1], backend=backend)
        b = trained.forecast_from_IC(100, u, backend=backend)
        assert float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) == 0.0


# --------------------------------------------------------------------------- #
# 6c. The JIT notebook's wrong patterns: an error that says what to do
# --------------------------------------------------------------------------- #


def _message(excinfo) -> str:
    """An error's message with the messages it was raised from."""
    parts, err = [], excinfo.value
    while err is not None:
        parts.append(str(err))
        err = err.__cause__ or err.__context__
    return " ".join(parts)


def test_jit_of_a_bound_method_says_what_to_do():
    """ORC 0.4: ``jax.jit(model.forecast)(...)`` raises ``TypeError:
    unhashable type`` (the model is unhashable). Ours raises a TypeError that
    names the method, says why, and gives the two ways to do it; the bound
    method stays usable with ``eqx.filter_jit`` and ``jax.vmap``."""
    model = _with_readout(ESNForecaster(3, 30))
    r0 = _random_like(model.driver.default_state(), 1)
    for call in (
        lambda: jax.jit(model.forecast)(10, r0),
        lambda: jax.jit(model.forecast, static_argnums=0)(10, r0),
        lambda: jax.jit(model.force)(_sequence(5, 3), r0),
    ):
        with pytest.raises(TypeError) as excinfo:
            call()
        text = _message(excinfo)
        assert "ESNForecaster." in text and "not hashable" in text
        assert "jax.jit" in text and "equinox.filter_jit" in text
        assert "argument" in text
    expected = model.forecast(10, r0)
    np.testing.assert_array_equal(eqx.filter_jit(model.forecast)(10, r0), expected)
    two = jax.device_put(np.stack([np.asarray(r0)] * 2))
    batched = jax.vmap(model.forecast, in_axes=(None, 0))(10, two)
    assert_batched(np.asarray(batched)[1], expected)
    right = jax.jit(lambda m, r: m.forecast(10, r))(model, r0)
    np.testing.assert_allclose(right, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ESNForecaster(3, 20),
        lambda: ESNClassifier(3, 2, 20),
        lambda: ESNController(2, 1, 20),
        lambda: ESNRegressor(2, 1, 20),
        lambda: NVARForecaster(3),
    ],
    ids=["forecaster", "classifier", "controller", "regressor", "nvar"],
)
def test_model_as_static_argument_says_what_to_do(make):
    """ORC 0.4: a model as a static argument of ``jax.jit`` raises JAX's
    ``ValueError: Non-hashable static arguments are not supported``. Ours
    raises the same error, ending with a message that says why the model is
    not hashable and what to do instead."""
    model = make()

    @functools.partial(jax.jit, static_argnums=0)
    def f(m, x):
        return x

    with pytest.raises(ValueError, match="Non-hashable static arguments") as excinfo:
        f(model, jax.device_put(np.ones(2)))
    text = _message(excinfo)
    assert f"model ({type(model).__name__}) is not hashable" in text
    assert "regular argument" in text and "equinox.filter_jit" in text
