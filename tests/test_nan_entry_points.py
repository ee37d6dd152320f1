"""NaN/inf inputs are refused by every public entry point (issue 47 item 5).

``force``, ``predict``, ``forecast`` (its state) and ``forecast_from_IC``
(its warm-up data) of every forecaster family, and a regressor's ``force``
and ``predict``, refuse data holding NaN or inf with one message, the same
eagerly and under ``eqx.filter_jit``: it names the model, the argument and
the first bad row (the position is found by the compiled program, so it is
known under the user's ``jit`` too). Before, ``forecast_from_IC`` returned
all NaN and blamed the model with a ``DivergenceWarning`` (nothing under
``jit``), ``force``/``predict`` returned NaN rows silently, and a CESN's
``force`` absorbed a NaN row into finite states.
"""

from __future__ import annotations

import functools
import json
import warnings

import equinox as eqx
import jax
import numpy as np
import pytest

import orc
from orc import _errors
from orc._divergence import DivergenceWarning
from orc._validation import check_finite, check_finite_rows
from orc.forecaster import (
    CESNForecaster,
    DeepESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    NVARForecaster,
    train_RCForecaster,
)
from orc.regression import ESNRegressor

SEQ_LEN = 30
BAD_ROWS = (13, 21)  # the first of two bad rows is the one named
# the times, made in numpy: no program (an eager jnp.arange or slice compiles one)
TS = jax.device_put(np.arange(SEQ_LEN, dtype=np.float64) * 0.01)
TS10 = jax.device_put(np.arange(10, dtype=np.float64) * 0.01)  # TS[:10]

FAMILIES = {
    "esn": lambda: ESNForecaster(3, 20, seed=0),
    "parallel": lambda: ESNForecaster(3, 20, chunks=3, locality=1, seed=0),
    "ensemble": lambda: EnsembleESNForecaster(3, 20, chunks=2, seed=0),
    "deep": lambda: DeepESNForecaster(3, 20, n_layers=2, seed=0),
    "cesn": lambda: CESNForecaster(3, 20, seed=0),
    "regressor": lambda: ESNRegressor(3, 2, 20, seed=0),
    "nvar": lambda: NVARForecaster(3, k=2, s=1, order=2),
}


def _data(bad_value=np.nan):
    t = np.arange(SEQ_LEN) * 0.1
    u = np.stack([np.sin(t), np.cos(2 * t), np.sin(3 * t + 1)], axis=1)
    for row, col in zip(BAD_ROWS, (2, 0), strict=True):
        u[row, col] = bad_value
    return jax.device_put(u)  # no program (jnp.asarray compiles one)


def _bad_state(model):
    """The default state with one NaN in its last row (chunk), or at node 7
    of a state without a chunk axis: ``(state, where)``."""
    r0 = np.array(model.driver.default_state())  # edited in numpy: no program
    if r0.ndim == 1:
        r0[7] = np.nan
        return jax.device_put(r0), "(first at index 7)"
    last = r0.shape[0] - 1
    r0[last, 5] = np.inf
    return jax.device_put(r0), f"(first at row {last})"


# The entry points as functions of the model and the arguments, each made
# once: a bad argument and a bad state of one entry point are two calls of
# one function with arguments of the same shapes, so eagerly and under
# eqx.filter_jit both cases share one compiled program (a new lambda per
# case and test compiled it again, ~6 s for a CESN).
def _force(m, x, r):
    return m.force(x, r)


def _force_default_state(m, x):
    return m.force(x)


def _predict(m, x, r):
    return m.predict(x, r)


def _predict_default_state(m, x):
    return m.predict(x)


def _forecast(m, r):
    return m.forecast(10, r)


def _forecast_from_IC(m, x):
    return m.forecast_from_IC(10, x)


def _cesn_force(m, x, r):
    return m.force(x, r, TS)


def _cesn_predict(m, x, r):
    return m.predict(x, r, TS)


def _cesn_forecast(m, r):
    return m.forecast(TS10, r)


def _cesn_forecast_from_IC(m, x):
    return m.forecast_from_IC(TS10, x)


@functools.cache
def _filter_jit(fn):
    return eqx.filter_jit(fn)


@functools.cache
def _model(family):
    return FAMILIES[family]()


@functools.cache
def _calls(family):
    """``{entry point: (function of (model, *args), args, argument name,
    where)}``: the function calls the entry point with ``args``, one of which
    is bad (the first, ``in_seq``, for the ``force``/``predict`` entries)."""
    model = _model(family)
    owner = type(model).__name__
    u = _data()
    row = f"(first at row {BAD_ROWS[0]})"
    clean = jax.device_put(np.nan_to_num(np.asarray(u)))
    if family == "nvar":  # no reservoir state; its forecasts read a window
        return owner, {
            "predict": (_predict_default_state, (u,), "in_seq", row),
        }
    if family == "regressor":
        bad_r0 = np.array(model.driver.default_state())
        bad_r0[4] = np.nan
        return owner, {
            "force": (_force_default_state, (u,), "in_seq", row),
            "predict": (_predict_default_state, (u,), "in_seq", row),
            "force state": (
                _force,
                (clean, jax.device_put(bad_r0)),
                "res_state",
                "(first at index 4)",
            ),
        }
    r0 = model.driver.default_state()
    state, state_where = _bad_state(model)
    if family == "cesn":
        return owner, {
            "force": (_cesn_force, (u, r0), "in_seq", row),
            "force state": (_cesn_force, (clean, state), "res_state", state_where),
            "predict": (_cesn_predict, (u, r0), "in_seq", row),
            "forecast": (_cesn_forecast, (state,), "res_state", state_where),
            "forecast_from_IC": (_cesn_forecast_from_IC, (u,), "spinup_data", row),
        }
    return owner, {
        "force": (_force, (u, r0), "in_seq", row),
        "force state": (_force, (clean, state), "res_state", state_where),
        "predict": (_predict, (u, r0), "in_seq", row),
        "predict state": (_predict, (clean, state), "res_state", state_where),
        "forecast": (_forecast, (state,), "res_state", state_where),
        "forecast_from_IC": (_forecast_from_IC, (u,), "spinup_data", row),
    }


CASES = [(family, entry) for family in FAMILIES for entry in _calls(family)[1]]


@pytest.mark.parametrize("mode", ["eager", "filter_jit"])
@pytest.mark.parametrize(("family", "entry"), CASES)
def test_nonfinite_input_is_refused_naming_the_argument_and_first_bad_row(
    family, entry, mode
):
    owner, calls = _calls(family)
    fn, args, name, where = calls[entry]
    model = _model(family)
    expected = f"{owner}: {name} contains NaN or inf values {where}."
    call = fn if mode == "eager" else _filter_jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(eqx.EquinoxRuntimeError) as err:
            jax.block_until_ready(call(model, *args))
    if mode == "eager":
        assert str(err.value) == expected
    else:  # equinox adds the stack around the same message
        assert f"EquinoxRuntimeError: {expected}\n" in str(err.value)
    # the model is not blamed for the data
    assert not [
        w for w in caught if issubclass(w.category, orc.forecaster.DivergenceWarning)
    ]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_finite_input_still_runs(family):
    _, calls = _calls(family)
    model = _model(family)
    u = jax.device_put(np.nan_to_num(np.asarray(_data())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untrained: zero outputs, warned
        for entry in {"force", "predict"} & set(calls):
            fn, (_, *rest), _, _ = calls[entry]  # the bad in_seq replaced by u
            out = fn(model, u, *rest)
            assert np.isfinite(np.asarray(out)).all(), entry


def test_a_trained_forecast_from_nan_warm_up_is_refused_not_blamed_on_the_model():
    # the case: a trained model, one NaN in the warm-up data (made
    # in numpy: an eager slice or .at[].set compiles a program)
    t = np.arange(600) * 0.05
    u = np.stack([np.sin(t), np.cos(t), np.sin(2 * t)], axis=1)
    model, _ = train_RCForecaster(ESNForecaster(3, 50, seed=0), jax.device_put(u[:500]))
    warm = u[500:540].copy()
    warm[17, 1] = np.nan
    warm = jax.device_put(warm)
    expected = (
        "ESNForecaster: spinup_data contains NaN or inf values (first at row 17)."
    )
    for call in (model.forecast_from_IC, eqx.filter_jit(model.forecast_from_IC)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no DivergenceWarning first
            with pytest.raises(eqx.EquinoxRuntimeError, match=r"\(first at row 17\)"):
                call(10, warm)
    with pytest.raises(eqx.EquinoxRuntimeError) as err:
        model.forecast_from_IC(10, warm)
    assert str(err.value) == expected


def test_cesn_force_refuses_a_nan_row_instead_of_absorbing_it():
    # the adaptive solve used to step over the bad sample and return finite
    # states (off by up to 3.7e-3)
    model = CESNForecaster(3, 20, seed=0)
    u = _data()
    r0 = model.driver.default_state()
    with pytest.raises(eqx.EquinoxRuntimeError) as err:
        model.force(u, r0, TS)
    assert str(err.value) == (
        f"CESNForecaster: in_seq contains NaN or inf values (first at row {BAD_ROWS[0]})."
    )


def test_inf_is_refused_as_nan_is():
    model = ESNForecaster(3, 20, seed=0)
    r0 = model.driver.default_state()
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"in_seq .* \(first at row 13\)"):
        model.force(_data(-np.inf), r0)


def test_training_keeps_its_checks_out_of_the_reservoir_loop():
    # force's own check is left out where training runs it block by block
    # (the front checked the data): the program holds no host callback, and
    # the error is the trainer's, naming the training data
    model = ESNForecaster(3, 20, seed=0)
    u = _data()
    with orc.use_backend("xla"):
        text = jax.jit(orc.capture_errors(train_RCForecaster)).lower(model, u).as_text()
        assert "callback" not in text
        with pytest.raises(eqx.EquinoxRuntimeError) as err:
            eqx.filter_jit(train_RCForecaster)(model, u)
    assert (
        "train_RCForecaster: train_seq contains NaN or inf values (first at row 13)"
        in (str(err.value))
    )


def test_the_row_is_named_under_jit_for_long_data():
    # one message per row, made only when raised: no cap on the length
    n = 200_000
    x = np.zeros((n, 2))
    x[n - 3, 1] = np.nan
    x = jax.device_put(x)
    f = jax.jit(lambda x: check_finite(x, "x", "f", "Hint {braces} kept."))
    with pytest.raises(Exception) as err:  # noqa: PT011 (jax.jit: JaxRuntimeError)
        jax.block_until_ready(f(x))
    assert (
        f"f: x contains NaN or inf values (first at row {n - 3}). Hint {{braces}} kept."
        in (str(err.value))
    )


@pytest.mark.parametrize(
    ("shape", "bad", "where"),
    [
        ((5,), (3,), "(first at index 3)"),
        ((6, 2), (4, 1), "(first at row 4)"),
        ((3, 4, 2), (2, 1, 0), "(first at trajectory 2, row 1)"),
        ((), (), ""),
    ],
)
def test_eager_and_compiled_checks_have_the_same_words(shape, bad, where):
    x = np.ones(shape)
    x[bad] = np.nan
    expected = "f: x contains NaN or inf values" + (f" {where}" if where else "") + "."
    with pytest.raises(eqx.EquinoxRuntimeError) as eager:
        check_finite_rows(x, "x", "f")
    assert str(eager.value) == expected
    fn = orc.capture_errors(lambda x: check_finite(x, "x", "f"))
    _, errors = jax.jit(fn)(jax.device_put(x))
    assert [msg for _, msg, _ in errors.found()] == [expected]


def test_indexed_messages_survive_serialisation():
    msgs = _errors.IndexedMessages("row {0}, col {1}", (3, 4))
    assert len(msgs) == 12 and msgs[5] == "row 1, col 1" and msgs[-1] == "row 2, col 3"
    with pytest.raises(IndexError):
        msgs[12]
    entries = (("error", msgs, None), ("warning", ("w",), "builtins.UserWarning"))
    back = _errors._deserialize_entries(_errors._serialize_entries(entries))
    assert back == entries
    assert json.loads(_errors._serialize_entries(entries))[0][1] == {
        "fmt": "row {0}, col {1}",
        "shape": [3, 4],
    }


def test_text_arrays_are_refused_naming_the_argument():
    # JAX refuses a NumPy array of text before the method's own checks run:
    # the compiled wrapper says which argument, as those checks would
    model = orc.forecaster.ESNForecaster(3, 20, seed=0)
    with pytest.raises(TypeError, match=r"ESNForecaster\.force: in_seq must be an"):
        model.force(np.array([["a", "b", "c"]]), model.driver.default_state())
    with pytest.raises(TypeError, match=r"res_state must be an array of real"):
        model.forecast(5, np.array([["x"] * 20]))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"labels": None}, "labels must be an integer array"),
        ({"labels": "0101"}, "labels must be an integer array"),
        ({"labels": np.array([0, 1, 0, 1]), "beta": "1e-8"}, "beta must be a real"),
        (
            {"labels": np.array([0, 1, 0, 1]), "beta": [1e-8, "x"]},
            "beta must be a real",
        ),
    ],
)
def test_classifier_refuses_labels_and_beta_that_are_not_numbers(kwargs, words):
    model = orc.classifier.ESNClassifier(2, 2, 20, seed=0)
    seqs = np.random.default_rng(0).normal(size=(4, 30, 2))
    with pytest.raises(TypeError, match=words):
        orc.classifier.train_RCClassifier(model, seqs, **kwargs)


def test_classify_takes_numpy_int_spinup_and_names_an_empty_sequence():
    model = orc.classifier.ESNClassifier(2, 2, 20, seed=0)
    seqs = np.random.default_rng(0).normal(size=(4, 30, 2))
    model = orc.classifier.train_RCClassifier(model, seqs, np.array([0, 1, 0, 1]))
    np.testing.assert_array_equal(
        model.classify(seqs[0], spinup=np.int64(5)), model.classify(seqs[0], spinup=5)
    )
    with pytest.raises(ValueError, match="in_seq must hold at least one step"):
        model.classify(seqs[0][:0], spinup=5)


def test_data_too_large_for_the_statistics_is_named():
    model = orc.forecaster.ESNForecaster(3, 20, seed=0)
    data = np.ones((50, 3))
    data[10, 1] = 1.7e308  # finite, but 50 rows of it overflow the sums
    with pytest.raises(ValueError, match="train_seq holds values up to 1.7e"):
        orc.forecaster.train_ESNForecaster(model, data)


def test_nvar_warm_up_rows_before_the_last_window_are_checked_too():
    # only the last window is read, but NaN in an earlier row is bad data
    model = NVARForecaster(3, k=2, s=1, order=2)
    # bad rows 13 (first) and none after: window rows 18, 19
    warm = jax.device_put(np.asarray(_data())[:20])
    for call in (model.forecast_from_IC, eqx.filter_jit(model.forecast_from_IC)):
        with pytest.raises(eqx.EquinoxRuntimeError, match=r"spinup_data .*row 13\)"):
            call(5, warm)


@pytest.mark.parametrize("family", ["esn", "nvar", "regressor"])
def test_predict_outputs_that_overflow_are_reported(family):
    # finite inputs far beyond the float range the arithmetic holds: the
    # NaN/inf outputs come with a warning (eagerly and under jit), never silently
    model = FAMILIES[family]()
    if family == "regressor":  # a leak below 1 carries the huge state forward
        model = ESNRegressor(3, 2, 20, leak_rate=0.6, seed=0)
    huge = jax.device_put(np.full((SEQ_LEN, 3), 1e300))
    # under eqx.filter_jit through the entry-point functions of the refusal
    # cases above: the ESN's and NVAR's programs are theirs (the same shapes)
    if family == "nvar":
        ones = jax.device_put(np.ones(model.wout.shape))
        model = eqx.tree_at(lambda m: m.wout, model, ones)
        args = (huge,)
        jitted = _filter_jit(_predict_default_state)
    else:  # saturating tanh: overflow needs a readout of a huge state
        wout = jax.device_put(np.ones(model.readout.wout.shape))
        model = model.set_readout(model.readout.set_wout(wout))
        args = (
            huge,
            jax.device_put(np.full(model.driver.default_state().shape, 1e308)),
        )
        jitted = _filter_jit(_predict)
    for call in (model.predict, functools.partial(jitted, model)):
        with pytest.warns(DivergenceWarning, match="predict: the outputs hold NaN/inf"):
            out = call(*args)
        assert not np.isfinite(np.asarray(out)).all()
    if family != "nvar":  # the default state, passed as the huge one was
        args = (None, model.driver.default_state())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # finite outputs: no word (the eager program of the call above)
        model.predict(jax.device_put(np.ones((SEQ_LEN, 3))), *args[1:])


def test_cesn_times_are_checked_as_data_naming_their_argument():
    model = CESNForecaster(3, 20, seed=0)
    u = jax.device_put(np.asarray(_data())[:10])  # sliced in numpy: no program
    t = np.arange(10) * 0.1
    train = orc.forecaster.train_CESNForecaster
    cases = [
        (lambda: train(model, u, "0123456789"), TypeError, "train_CESNForecaster: t_train must be an array of real"),
        (lambda: train(model, u, None), TypeError, "train_CESNForecaster: t_train must be an array of real"),
        (lambda: train(model, u, t[::-1].copy()), ValueError, r"t_train must be finite and strictly increasing; t_train\[1\] = 0.8 "),
        (lambda: train(model, u, np.where(t > 0.45, np.nan, t)), ValueError, r"t_train\[5\] = nan"),
        (lambda: train(model, u[:0], t), ValueError, "train_seq has 0 samples"),
        (lambda: train(model, "abc", t), TypeError, "train_seq must be an array of real"),
        (lambda: model.forecast("abc", model.driver.default_state()), TypeError, "CESNForecaster: ts must be an array of numbers, got str"),
        (lambda: model.forecast(None, model.driver.default_state()), TypeError, "ts must be an array of numbers, got NoneType"),
        (lambda: model.forecast_from_IC(t, u, "abc"), TypeError, "spinup_ts must be an array of real"),
        (lambda: model.force(u, model.driver.default_state(), None), TypeError, "ts must be an array of real"),
    ]  # fmt: skip
    for call, kind, words in cases:
        with pytest.raises(kind, match=words):
            call()
