"""Bad inputs that used to pass silently or be blamed on the wrong argument.

Each gap gets a clear error naming the argument (shapes and dtypes at trace
time; values through orc's run-time checks, so also under ``jax.jit``), or,
where ORC 0.4 accepts the input, a documented conversion and a warning.
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
from _helpers import RUNTIME_ERRORS, on_device
from orc.classifier import ESNClassifier, train_RCClassifier
from orc.control import ESNController, train_RCController
from orc.forecaster import (
    ESNForecaster,
    NVARForecaster,
    train_ESNForecaster,
    train_NVARForecaster,
    train_RCForecaster,
)
from orc.regression import ESNRegressor, train_RCRegressor
from orc.utils.regressions import _solve_all_ridge_reg, ridge_regression

RES = 20


# The inputs stay JAX arrays (the path under test), but are built in numpy
# and transferred: an eager jnp operation (``jnp.asarray`` of numpy, a slice,
# ``.at[].set``) compiles a program of its own per shape and dtype, and
# ``jax.device_put`` compiles nothing.
_jx = on_device


def _last(states):
    """``states[-1]`` as a JAX array, sliced in numpy."""
    return _jx(np.asarray(states)[-1])


def _with(x, index, value):
    """``x.at[index].set(value)`` as a JAX array, set in numpy."""
    x = np.array(x)
    x[index] = value
    return _jx(x)


_rng = np.random.default_rng(0)
_U = _rng.standard_normal((50, 3))
U = _jx(_U)
U1 = _jx(_U[:, :1])
Y2 = _jx(_U[:, :2])
C1 = _jx(_U[:, 2:])
_SEQS = _rng.standard_normal((4, 12, 3))
SEQS = _jx(_SEQS)
SEQ0 = _jx(_SEQS[0])
LABELS = _jx(np.array([0, 1, 0, 1]))
REF = _jx(np.zeros((8, 2)))
GUESS = _jx(np.zeros((8, 1)))


def _esn(dtype=jnp.float64):
    return ESNForecaster(3, RES, seed=0, dtype=dtype)


def _clf():
    return ESNClassifier(3, 2, RES, seed=0)


def _ctrl():
    return ESNController(2, 1, RES, seed=0)


def _reg():
    return ESNRegressor(3, 1, RES, seed=0)


@pytest.fixture(scope="module")
def trained_esn():
    return train_RCForecaster(_esn(), U)


@pytest.fixture(scope="module")
def trained_clf():
    return train_RCClassifier(_clf(), SEQS, LABELS)


@pytest.fixture(scope="module")
def trained_ctrl():
    return train_RCController(_ctrl(), Y2, C1)


def _caught(fn, category):
    """Run ``fn`` recording every warning; the ones of ``category`` and the result."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = jax.block_until_ready(fn())
    return [w for w in record if issubclass(w.category, category)], out


# Every trainer (and ORC's public ridge helpers) with beta as its argument.
TRAINERS = {
    "train_RCForecaster": lambda beta: train_RCForecaster(_esn(), U, beta=beta),
    "train_ESNForecaster": lambda beta: train_ESNForecaster(_esn(), U, beta=beta),
    "train_RCClassifier": lambda beta: train_RCClassifier(
        _clf(), SEQS, LABELS, beta=beta
    ),
    "train_RCController": lambda beta: train_RCController(_ctrl(), Y2, C1, beta=beta),
    "train_RCRegressor": lambda beta: train_RCRegressor(_reg(), U, U1, beta=beta),
    "train_NVARForecaster": lambda beta: train_NVARForecaster(
        NVARForecaster(3), U, beta=beta
    ),
    "ridge_regression": lambda beta: ridge_regression(U, Y2, beta),
    "_solve_all_ridge_reg": lambda beta: _solve_all_ridge_reg(
        _jx(_U[:, None]), _jx(_U[:, None, :2]), beta
    ),
}


# 1 ------------------------------------------------------------------ beta
@pytest.mark.parametrize("bad", [-1.0, float("nan")], ids=["negative", "nan"])
@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_bad_beta_is_named_under_jit_and_outside(trainer, bad):
    train = TRAINERS[trainer]
    # traced: beta is an argument of the user's jax.jit
    with pytest.raises(RUNTIME_ERRORS, match="beta") as err:
        jax.block_until_ready(jax.jit(train)(jnp.asarray(bad)))
    assert "features or targets" not in str(err.value)
    # concrete: a Python float, refused before anything runs
    with pytest.raises(ValueError, match="beta"):
        train(bad)


# 2 ------------------------------------------------------- initial_res_state
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("trainer", ["forecaster", "controller", "regressor"])
def test_nan_initial_res_state_is_named(trainer, jit):
    if trainer == "forecaster":
        model, state = _esn(), _jx(np.full((1, RES), np.nan))

        def train(m, r0):
            return train_RCForecaster(m, U, initial_res_state=r0)
    elif trainer == "controller":
        model, state = _ctrl(), _jx(np.full((RES,), np.nan))

        def train(m, r0):
            return train_RCController(m, Y2, C1, initial_res_state=r0)
    else:
        model, state = _reg(), _jx(np.full((RES,), np.nan))

        def train(m, r0):
            return train_RCRegressor(m, U, U1, initial_res_state=r0)

    call = jax.jit(train) if jit else train
    errors = RUNTIME_ERRORS if jit else eqx.EquinoxRuntimeError
    with pytest.raises(errors, match="initial_res_state") as err:
        jax.block_until_ready(call(model, state))
    assert "features or targets" not in str(err.value)


# 3 ------------------------------------------------------ compute_control
@pytest.mark.parametrize("bad", ["ref_traj", "res_state", "control_seq"])
def test_compute_control_names_the_nonfinite_argument(trained_ctrl, bad):
    model, R = trained_ctrl
    args = {"control_seq": GUESS, "res_state": _last(R), "ref_traj": REF}
    args[bad] = _with(args[bad], 0, np.nan)
    with pytest.raises(eqx.EquinoxRuntimeError, match=bad) as err:
        model.compute_control(**args)
    assert "did not converge" not in str(err.value)
    # also with throw=False: non-finite inputs are errors, not a failed solve
    with pytest.raises(eqx.EquinoxRuntimeError, match=bad):
        model.compute_control(**args, throw=False)


# 4 ---------------------------------------------------------- no samples
def test_trainers_name_the_argument_that_holds_no_samples():
    with pytest.raises(ValueError, match="train_seqs") as err:
        train_RCClassifier(
            _clf(), _jx(np.zeros((0, 12, 3))), _jx(np.zeros(0, np.int32))
        )
    assert "no rows left" not in str(err.value)
    with pytest.raises(ValueError, match="train_seqs"):
        train_RCClassifier(_clf(), _jx(np.zeros((4, 0, 3))), LABELS)
    empty, empty1 = _jx(np.zeros((0, 12, 3))), _jx(np.zeros((0, 12, 1)))
    with pytest.raises(ValueError, match="train_seq"):
        train_RCForecaster(_esn(), empty, multi_sequence=True)
    with pytest.raises(ValueError, match="train_seq"):
        train_RCController(ESNController(3, 1, RES), empty, empty1, multi_sequence=True)
    with pytest.raises(ValueError, match="in_seq"):
        train_RCRegressor(_reg(), empty, empty1, multi_sequence=True)


# 5 ------------------------------------------------------------- complex
def _entry_points(trained_esn, trained_clf, trained_ctrl):
    """(argument name, call taking that argument) for every way data enters.
    A call takes a numpy array ``x`` and passes the entry point a JAX array
    made from it (sliced in numpy: an eager slice compiles a program)."""
    esn, R = trained_esn
    ctrl, Rc = trained_ctrl
    r, rc = _last(R), _last(Rc)
    nvar = NVARForecaster(3)
    labels1 = _jx(np.array([0]))
    return [
        ("train_seq", lambda x: train_RCForecaster(_esn(), _jx(x))),
        ("target_seq", lambda x: train_RCForecaster(_esn(), U, target_seq=_jx(x))),
        (
            "initial_res_state",
            lambda x: train_RCForecaster(_esn(), U, initial_res_state=_jx(x[:1, :1])),
        ),
        ("in_seq", lambda x: esn.force(_jx(x), r)),
        ("res_state", lambda x: esn.forecast(5, _jx(np.zeros((1, RES), x.dtype)))),
        ("spinup_data", lambda x: esn.forecast_from_IC(5, _jx(x))),
        ("train_seqs", lambda x: train_RCClassifier(_clf(), _jx(x[None]), labels1)),
        ("in_seq", lambda x: trained_clf.classify(_jx(x))),
        ("control_seq", lambda x: train_RCController(_ctrl(), Y2, _jx(x[:, :1]))),
        ("ref_traj", lambda x: ctrl.compute_control(GUESS, rc, _jx(x[:8, :2]))),
        ("in_seq", lambda x: train_RCRegressor(_reg(), _jx(x), U1)),
        ("train_seq", lambda x: train_NVARForecaster(nvar, _jx(x))),
        ("train_seq", lambda x: orc.online.train_online(_esn(), _jx(x))),
        ("res_seq", lambda x: ridge_regression(_jx(x), Y2)),
    ]


def test_complex_data_is_refused_naming_the_argument(
    trained_esn, trained_clf, trained_ctrl
):
    z = _U.astype(np.complex128) * (1 + 1j)
    for name, call in _entry_points(trained_esn, trained_clf, trained_ctrl):
        with pytest.raises(TypeError, match=rf"{name} must be real-valued.*complex"):
            call(z)


# 6 ---------------------------------------------- bool, integer, lists
def test_bool_refused_integers_and_lists_converted(
    trained_esn, trained_clf, trained_ctrl
):
    for name, call in _entry_points(trained_esn, trained_clf, trained_ctrl):
        with pytest.raises(TypeError, match=rf"{name} must hold real numbers.*bool"):
            call(_U > 0)
    # ORC 0.4 takes lists and integer arrays (jnp.asarray): converted to the
    # model's dtype, same result as the float array, no warning
    ints_np = np.round(_U * 10).astype(np.int64)
    ints, floats = _jx(ints_np), _jx(ints_np.astype(np.float64))
    ref, R = train_RCForecaster(_esn(), floats)
    for data in (ints, ints_np.tolist()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model, R2 = train_RCForecaster(_esn(), data)
        assert R2.dtype == jnp.float64
        np.testing.assert_array_equal(model.readout.wout, ref.readout.wout)
    esn, R = trained_esn
    out = esn.forecast_from_IC(5, _U[:10].tolist())
    np.testing.assert_array_equal(out, esn.forecast_from_IC(5, _jx(_U[:10])))
    probs = trained_clf.classify(_SEQS[0].tolist())
    np.testing.assert_array_equal(probs, trained_clf.classify(SEQ0))


# 7 ------------------------------------------------------------- beta = 0
@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_zero_beta_warns_once_outside_jit(trainer):
    train = TRAINERS[trainer]
    ours, _ = _caught(lambda: train(0.0), orc.UnregularizedRidgeWarning)
    assert len(ours) == 1
    assert "beta=0" in str(ours[0].message)
    assert ours[0].filename == __file__
    # traced beta: no warning (nothing to look at until the program runs)
    ours, _ = _caught(lambda: jax.jit(train)(jnp.asarray(0.0)), Warning)
    assert not [w for w in ours if w.category is orc.UnregularizedRidgeWarning]


# 8 ------------------------------------------------------ precision loss
def test_downcast_warns_once_per_call_upcast_is_silent(trained_esn):
    model32 = _esn(jnp.float32)
    trained32, R32 = train_RCForecaster(model32, _jx(_U.astype(np.float32)), beta=1e-4)
    r32 = np.asarray(R32)[-1]
    r32_jx, r32_as64 = _jx(r32), _jx(r32.astype(np.float64))

    def check(record, name):
        assert len(record) == 1, [str(w.message) for w in record]
        msg = str(record[0].message)
        assert name in msg and "float64" in msg and "float32" in msg
        assert record[0].filename == __file__

    # each call warns, also when the compiled program is reused
    for _ in range(2):
        record, (_, R) = _caught(
            lambda: train_RCForecaster(model32, U), orc.PrecisionLossWarning
        )
        check(record, "train_seq")
        assert R.dtype == jnp.float32
        record, states = _caught(
            lambda: trained32.force(U, r32_jx), orc.PrecisionLossWarning
        )
        check(record, "in_seq")
        assert states.dtype == jnp.float32
        record, _ = _caught(
            lambda: trained32.forecast(5, r32_as64),
            orc.PrecisionLossWarning,
        )
        check(record, "res_state")
    # float32 data into a float64 model: an exact upcast, no warning
    esn, R = trained_esn
    record, out = _caught(
        lambda: esn.forecast_from_IC(5, _jx(_U.astype(np.float32))), Warning
    )
    assert not record and out.dtype == jnp.float64


# 9 ---------------------------------------------------------- untrained
def test_untrained_model_warns_outside_jit(trained_esn, trained_clf, trained_ctrl):
    esn, R = trained_esn
    ctrl, Rc = trained_ctrl
    nvar, W = train_NVARForecaster(NVARForecaster(3), U)
    r, rc, w, u10 = _last(R), _last(Rc), _last(W), _jx(_U[:10])
    calls = {
        "forecast": (_esn(), esn, lambda m: m.forecast(5, r)),
        "forecast_from_IC": (_esn(), esn, lambda m: m.forecast_from_IC(5, u10)),
        "classify": (_clf(), trained_clf, lambda m: m.classify(SEQ0)),
        "compute_control": (
            _ctrl(),
            ctrl,
            lambda m: m.compute_control(GUESS, rc, REF, throw=False),
        ),
        "NVARForecaster.forecast": (
            NVARForecaster(3, s=nvar.s),
            nvar,
            lambda m: m.forecast(5, w),
        ),
    }
    for name, (untrained, trained, call) in calls.items():
        record, _ = _caught(
            functools.partial(call, untrained), orc.UntrainedModelWarning
        )
        assert len(record) == 1, name
        message = str(record[0].message)
        assert name in message and "not been trained" in message
        assert record[0].filename == __file__
        record, _ = _caught(functools.partial(call, trained), orc.UntrainedModelWarning)
        assert not record, name
        # under the user's jax.jit the weights are traced: nothing is looked at
        record, _ = _caught(
            functools.partial(jax.jit(call), untrained), orc.UntrainedModelWarning
        )
        assert not record, name


# 10 ------------------------------------------------------ NaN states
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_nonfinite_state_or_data_is_named(trained_esn, trained_clf, trained_ctrl, jit):
    esn, R = trained_esn
    ctrl, Rc = trained_ctrl
    nvar, W = train_NVARForecaster(NVARForecaster(3), U)
    cases = [
        (
            "res_state",
            esn,
            _with(np.asarray(R)[-1], (0, 3), np.nan),
            lambda m, x: m.forecast(5, x),
        ),
        (
            "res_state",
            nvar,
            _with(np.asarray(W)[-1], (0, 0), np.inf),
            lambda m, x: m.forecast(5, x),
        ),
        (
            "in_seq",
            trained_clf,
            _with(_SEQS[0], (4, 1), np.nan),
            lambda m, x: m.classify(x),
        ),
        (
            "res_state",
            trained_clf,
            _jx(np.full((RES,), np.nan)),
            lambda m, x: m.classify(SEQ0, x),
        ),
        (
            "res_state",
            ctrl,
            _with(np.asarray(Rc)[-1], 2, np.nan),
            lambda m, x: m.compute_control(GUESS, x, REF),
        ),
    ]
    errors = RUNTIME_ERRORS if jit else eqx.EquinoxRuntimeError
    for name, model, bad, call in cases:
        fn = jax.jit(call) if jit else call
        with pytest.raises(errors, match=name):
            jax.block_until_ready(fn(model, bad))
