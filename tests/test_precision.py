"""Every contraction orc traces runs at full precision for the model's dtype.

On GPU, JAX's default float32 matrix product is TF32 (10 mantissa bits, ~1e-3
relative error): a float32 model that used the default would give different
numbers on a GPU than on a CPU, with no warning. orc therefore passes
``precision="highest"`` to every ``dot_general`` it builds, whatever the
user's ``jax_default_matmul_precision``. On CPU the setting changes nothing,
so this is asserted on the programs themselves: each ``dot_general`` in the
jaxpr of training, forecasting, teacher-forced prediction, regression,
classification, control and online learning (the XLA path, the one a GPU
runs), including the sub-programs of scans, loops, conditionals and custom
derivatives, carries ``Precision.HIGHEST`` for both operands.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import ClosedJaxpr, Jaxpr

import orc
from _helpers import on_device
from orc import classifier as C
from orc import control as K
from orc import forecaster as F
from orc import online as O
from orc import regression as R

F32 = jnp.float32


def _subjaxprs(params):
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


def _where(eqn) -> str:
    tb = eqn.source_info.traceback
    frames = [f for f in (tb.frames if tb else []) if "/orc/" in f.file_name]
    if not frames:
        return "outside orc"
    return f"{frames[0].file_name.split('/orc/')[-1]}:{frames[0].line_num}"


def _dots(jaxpr):
    """Every ``dot_general`` of ``jaxpr`` and its sub-programs."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            yield eqn
        for sub in _subjaxprs(eqn.params):
            yield from _dots(sub)


def _traced(fn, *args) -> tuple[list[str], object]:
    """Where ``fn(*args)`` traces a contraction below full precision, and the
    shapes of what it returns (a trained model's structure: the traces below
    need only that, its values never matter, so nothing is compiled or run
    and each training program is traced once)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with orc.use_backend("xla"):
            closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    found, bad = 0, []
    for eqn in _dots(closed.jaxpr):
        found += 1
        p = eqn.params.get("precision")
        p = p if isinstance(p, tuple) else (p, p)
        if not all(x == lax.Precision.HIGHEST for x in p):
            bad.append(f"{_where(eqn)} precision={eqn.params.get('precision')}")
    assert found, "the program has no contraction: the check would be empty"
    return sorted(set(bad)), shapes


def _imprecise(fn, *args) -> list[str]:
    """Where ``fn(*args)`` traces a contraction below full precision."""
    return _traced(fn, *args)[0]


def _trained(fn, *args):
    """``_traced`` of a training call that returns ``(model, states)``: its
    imprecise contractions, the trained model (shapes only) and the shape of
    one state, the last one, to forecast from."""
    bad, (model, states) = _traced(fn, *args)
    return bad, model, jax.ShapeDtypeStruct(states.shape[1:], states.dtype)


def _abstract(build):
    """The model ``build()`` makes, as shapes only (``eqx.filter_eval_shape``):
    its structure is all a trace needs, and drawing its random matrices
    eagerly would compile a program per operation."""
    return eqx.filter_eval_shape(build)


def _series(n=240, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(0.1 * rng.standard_normal((n, dim)), 0).astype(np.float32)


_U = _series()
# on the device from numpy, slices and casts made there: an eager slice or
# cast of a device array would compile a program of its own
U, U_IN, U_OUT = on_device(_U), on_device(_U[:, :2]), on_device(_U[:, 2:])
U30 = on_device(_U[:30])
_T = np.arange(len(_U), dtype=np.float32) * np.float32(0.01)
T, T8 = on_device(_T), on_device(_T[:8])
FORECASTERS = {
    "esn": lambda: F.ESNForecaster(3, 20, dtype=F32, seed=0),
    "parallel": lambda: F.ESNForecaster(3, 20, chunks=3, locality=1, dtype=F32, seed=0),
    "ensemble": lambda: F.EnsembleESNForecaster(3, 20, chunks=2, dtype=F32, seed=0),
    "deep": lambda: F.DeepESNForecaster(3, 20, dtype=F32, seed=0),
    "quadratic": lambda: F.ESNForecaster(3, 20, quadratic=True, dtype=F32, seed=0),
}


@pytest.mark.parametrize("name", sorted(FORECASTERS))
def test_forecasters_train_and_forecast_at_full_precision(name):
    model = _abstract(FORECASTERS[name])
    train = lambda m, u: F.train_RCForecaster(m, u, spinup=10)  # noqa: E731
    bad, trained, last = _trained(train, model, U)
    assert bad == []
    assert _imprecise(lambda m, r: m.forecast(8, r), trained, last) == []
    assert _imprecise(lambda m, w: m.forecast_from_IC(8, w), trained, U30) == []
    assert _imprecise(lambda m, u: m.predict(u), trained, U30) == []


def test_cesn_and_nvar_at_full_precision():
    cesn = _abstract(lambda: F.CESNForecaster(3, 20, dtype=F32, seed=0))
    bad, cesn, last = _trained(
        lambda m: F.train_CESNForecaster(m, U, T, spinup=10), cesn
    )
    assert bad == []
    assert _imprecise(lambda m, r: m.forecast(T8, r), cesn, last) == []
    # traced data: the stride is given
    nvar = _abstract(lambda: F.NVARForecaster(3, s=1, dtype=F32))
    bad, nvar, last = _trained(lambda m, u: F.train_NVARForecaster(m, u), nvar, U)
    assert bad == []
    assert _imprecise(lambda m, w: m.forecast(8, w), nvar, last) == []


def test_regression_classification_control_at_full_precision():
    reg = _abstract(lambda: R.ESNRegressor(2, 1, 20, input_passthrough=True, dtype=F32))
    fit = lambda m, x, y: R.train_RCRegressor(m, x, y)  # noqa: E731
    bad, reg, _ = _trained(fit, reg, U_IN, U_OUT)
    assert bad == []
    assert _imprecise(lambda m, x: m.predict(x), reg, U_IN) == []

    seqs = np.stack([_U[:50], _U[50:100], _U[100:150], _U[150:200]])  # traced args
    labels = on_device([0, 1, 0, 1], np.int32)
    clf = _abstract(lambda: C.ESNClassifier(3, 2, 20, dtype=F32, state_repr="mean"))
    bad, clf = _traced(lambda m, s, y: C.train_RCClassifier(m, s, y), clf, seqs, labels)
    assert bad == []
    assert _imprecise(lambda m, s: m.classify(s), clf, seqs[0]) == []

    ctrl = _abstract(lambda: K.ESNController(2, 1, 20, dtype=F32))
    fit = lambda m, y, u: K.train_RCController(m, y, u)  # noqa: E731
    y_in, u_out = on_device(_U[:-1, :2]), on_device(_U[1:, 2:])
    bad, ctrl, last = _trained(fit, ctrl, y_in, u_out)
    assert bad == []
    cs, ref = jnp.zeros((6, 1), F32), jnp.ones((6, 2), F32)
    assert _imprecise(lambda m, c, r: m.apply_control(c, r), ctrl, cs, last) == []
    penalty = lambda m, c, r: jax.grad(m.compute_penalty)(c, r, ref)  # noqa: E731
    assert _imprecise(penalty, ctrl, cs, last) == []


@pytest.mark.parametrize("method", ["rls", "lms"])
def test_online_learning_at_full_precision(method):
    model = _abstract(lambda: F.ESNForecaster(3, 20, dtype=F32, seed=0))
    fit = lambda m, u: O.train_online(m, u, method=method, spinup=10)  # noqa: E731
    assert _imprecise(fit, model, U) == []
    assert _imprecise(lambda m, u: O.train_force(m, u, spinup=10), model, U) == []


def test_user_default_precision_does_not_reach_orc():
    """A program traced under the user's ``default_matmul_precision`` keeps
    orc's explicit precision (the setting only fills in unset ones)."""
    model = _abstract(lambda: F.ESNForecaster(3, 20, dtype=F32, seed=0))
    with jax.default_matmul_precision("bfloat16"):
        assert _imprecise(lambda m, u: F.train_RCForecaster(m, u), model, U) == []


def test_gru_driver_and_model_at_full_precision():
    # equinox's GRUCell leaves its products' precision unset: the driver's
    # step and a model built on it still trace at full precision
    model = _abstract(
        lambda: F.RCForecasterBase(
            driver=orc.drivers.GRUDriver(20, seed=0, dtype=F32),
            readout=orc.readouts.LinearReadout(3, 20, dtype=F32),
            embedding=orc.embeddings.LinearEmbedding(3, 20, 0.1, seed=1, dtype=F32),
            dtype=F32,
        )
    )
    driver = model.driver
    r = driver.default_state()
    with jax.default_matmul_precision("bfloat16"):
        assert _imprecise(lambda d, p, r: d.advance(p, r), driver, r, r) == []
        assert _imprecise(lambda m, u: F.train_RCForecaster(m, u), model, U) == []


def test_ridge_derivatives_at_full_precision():
    # the derivative rules of qr (QR form), cholesky and the triangular solves
    # (normal equations) are JAX's: their products are traced at full
    # precision too, also when the ridge functions are called directly
    from orc import _ridge

    X, Y = U_IN, U_OUT
    gram = _ridge.RidgeStats.zeros(2, 1, None, F32)
    qr = _ridge.RidgeStats(gram.gram, gram.cross, gram.count, form="qr")
    for stats in (gram, qr):

        def fit(X, stats=stats):
            return _ridge.solve(_ridge.stats_update(stats, X, Y), 1e-3).sum()

        with jax.default_matmul_precision("bfloat16"):
            assert _imprecise(jax.grad(fit), X) == [], stats.form
            assert _imprecise(lambda X: jax.jvp(fit, (X,), (X,))[1], X) == []
