"""Clear answers for traced training options and edited weights (issue 47 item 11).

- ``input_noise``/``state_noise`` are traceable as ``beta`` is: ``jax.jit``
  with the scale an argument and ``jax.vmap`` over it train (they gave
  ``TracerBoolConversionError``), and a bad traced scale (negative, NaN) is
  one of the program's errors, raised when it returns (no Python ``if`` on a
  tracer).
- A model edited with ``eqx.tree_at`` to a ``wout`` of the wrong shape gets
  orc's message naming ``wout``, the shape it must have and the one it has,
  at trace time (it was einsum's "Size of label 'n' for operand 1 ...").
- ``beta="1e-8"`` and ``return_states="no"`` are refused by every trainer,
  NVAR's too (which trained).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import BATCHED, RUNTIME_ERRORS
from orc.forecaster import (
    ESNForecaster,
    NVARForecaster,
    train_NVARForecaster,
    train_RCForecaster,
)
from orc.regression import ESNRegressor, train_RCRegressor

T = np.arange(400) * 0.05
U_NP = np.stack([np.sin(T), np.cos(1.3 * T), np.sin(0.7 * T + 1)], axis=1)
U = jax.device_put(U_NP)
Y = jax.device_put(U_NP[:, :1])  # the regressor's target (sliced in numpy)


#: A well-conditioned solve: the comparisons are of the noise's path, not of
#: rounding amplified by ORC's beta of 1e-8 (a GPU's batched and single
#: programs round otherwise: 3e-4 apart relative at 1e-8 on an H200).
BETA = 1e-4


def _wout(noise_name, scale, model=None, seed=0):
    model = ESNForecaster(3, 30, seed=0) if model is None else model
    trained, _ = train_RCForecaster(
        model, U, beta=BETA, noise_seed=seed, **{noise_name: scale}
    )
    return trained.readout.wout


@functools.cache
def _traced(noise_name):
    """Training as a function of the ``noise_name`` scale, made once with its
    ``jax.jit``, ``eqx.filter_jit`` and ``jax.jit(orc.capture_errors(...))``
    forms: the tests (and the bad values, all traced alike) share their
    compiled programs, where a new lambda per test compiled them again."""

    def wout(scale):
        return _wout(noise_name, scale)

    return SimpleNamespace(
        fn=wout,
        jit=jax.jit(wout),
        filter_jit=eqx.filter_jit(wout),
        captured=jax.jit(orc.capture_errors(wout)),
    )


@pytest.mark.parametrize("noise_name", ["input_noise", "state_noise"])
def test_noise_is_traceable_under_jit_and_vmap(noise_name):
    eager = _wout(noise_name, 1e-3)
    jitted = _traced(noise_name).jit(1e-3)
    np.testing.assert_allclose(jitted, eager, rtol=1e-10, atol=1e-12)
    scales = jax.device_put(np.array([1e-3, 1e-2]))
    stacked = jax.vmap(_traced(noise_name).fn)(scales)
    assert stacked.shape == (2, *eager.shape)
    stacked = np.asarray(stacked)
    np.testing.assert_allclose(stacked[0], eager, **BATCHED)
    np.testing.assert_allclose(stacked[1], _wout(noise_name, 1e-2), **BATCHED)
    # more noise, other weights: the scale reached the fit
    assert not np.allclose(stacked[0], stacked[1])


def test_a_traced_zero_scale_adds_nothing():
    clean = _wout("input_noise", 0.0)
    np.testing.assert_allclose(
        _traced("input_noise").jit(0.0), clean, rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("noise_name", ["input_noise", "state_noise"])
@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_a_bad_traced_scale_is_an_error_of_the_program(noise_name, bad):
    expected = (
        f"train_RCForecaster: {noise_name} must be finite and >= 0; it is negative "
        "or NaN/inf."
    )
    with pytest.raises(eqx.EquinoxRuntimeError) as err:
        # an array: eqx.filter_jit keeps a Python float static (checked eagerly)
        traced = jnp.asarray(bad)
        jax.block_until_ready(_traced(noise_name).filter_jit(traced))
    assert expected in str(err.value)
    # under vmap: the bad member is named, whichever it is
    with pytest.raises(RUNTIME_ERRORS) as err:
        jax.block_until_ready(
            jax.vmap(_traced(noise_name).fn)(jax.device_put(np.array([1e-3, bad])))
        )
    assert expected in str(err.value)
    # as data: orc.capture_errors gives the program's codes, no host callback
    captured = _traced(noise_name).captured
    assert "callback" not in captured.lower(1e-3).as_text()
    _, errors = captured(bad)
    assert [msg for kind, msg, _ in errors.found() if kind == "error"] == [expected]


def test_a_concrete_bad_scale_is_refused_before_any_work():
    model = ESNForecaster(3, 30, seed=0)
    with pytest.raises(ValueError, match=r"input_noise must lie in \[0.0, inf\)"):
        train_RCForecaster(model, U, input_noise=-1.0)
    with pytest.raises(ValueError, match="state_noise must be finite"):
        train_RCForecaster(model, U, state_noise=float("nan"))
    with pytest.raises(ValueError, match=r"input_noise must be a number \(a scalar\)"):
        _traced("input_noise").jit(np.ones(2))


def test_the_regressor_and_nvar_take_traced_noise():
    reg = ESNRegressor(3, 1, 20, seed=0)

    def reg_w(scale):
        trained, _ = train_RCRegressor(reg, U, Y, input_noise=scale)
        return trained.readout.wout

    np.testing.assert_allclose(jax.jit(reg_w)(1e-3), reg_w(1e-3), rtol=1e-9, atol=1e-12)
    nvar = NVARForecaster(3, k=2, s=1, order=2)

    def nvar_w(scale):
        return train_NVARForecaster(nvar, U, beta=BETA, input_noise=scale)[0].wout

    # NVAR's solve is ill-conditioned: jit and eager differ in the last digits
    # (2.7e-6 relative at its default beta on an H200)
    jitted = jax.jit(nvar_w)
    np.testing.assert_allclose(jitted(1e-3), nvar_w(1e-3), rtol=1e-6, atol=1e-9)
    assert not np.allclose(jitted(1e-3), jitted(1e-1), rtol=1e-3)


# --------------------------------------------------------------- edited wout
# (the edits and the arguments below are made in numpy: no eager JAX programs)
EDITS = {
    "one output more": lambda w: np.concatenate([w, w[:, :1]], axis=1),
    "one node more": lambda w: np.concatenate([w, w[..., :1]], axis=2),
    "no bank axis": lambda w: w[0],
}


@functools.cache
def _trained(chunks):
    """The trained forecaster of ``chunks`` and its states (numpy), shared by
    the edits."""
    trained, states = train_RCForecaster(ESNForecaster(3, 30, chunks=chunks, seed=0), U)
    return trained, np.asarray(states)


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("chunks", [1, 3])
def test_a_wrong_wout_shape_is_named_at_trace_time(edit, chunks):
    trained, states = _trained(chunks)
    good = tuple(trained.readout.wout.shape)
    wout = jax.device_put(EDITS[edit](np.asarray(trained.readout.wout)))
    bad = eqx.tree_at(lambda m: m.readout.wout, trained, wout)
    expected = f"must have shape {good}, got {tuple(wout.shape)}"
    warm = U_NP[:50]
    calls = {
        "forecast": lambda m: m.forecast(5, states[-1]),
        "forecast_from_IC": lambda m: m.forecast_from_IC(5, warm),
        "predict": lambda m: m.predict(warm, states[0]),
        "readout": lambda m: m.readout(states[-1]),
    }
    for name, call in calls.items():
        for mode in (call, eqx.filter_jit(call), jax.jit(call)):
            with pytest.raises(ValueError) as err:
                mode(bad)  # raised while tracing: no program runs
            msg = str(err.value)
            assert msg.startswith(f"{type(trained.readout).__name__}: wout "), name
            assert expected in msg, (name, msg)


def test_the_right_wout_shape_runs_as_before():
    model, states = _trained(1)
    wout = jax.device_put(np.asarray(model.readout.wout) * 1.0)  # a new array
    same = eqx.tree_at(lambda m: m.readout.wout, model, wout)
    np.testing.assert_array_equal(
        np.asarray(same.forecast(5, states[-1])),
        np.asarray(model.forecast(5, states[-1])),
    )


# ---------------------------------------------- flags and beta of every trainer
TRAINERS = {
    "train_RCForecaster": lambda **kw: train_RCForecaster(
        ESNForecaster(3, 20, seed=0), U, **kw
    ),
    "train_NVARForecaster": lambda **kw: train_NVARForecaster(
        NVARForecaster(3, k=2, s=1, order=2), U, **kw
    ),
    "train_RCRegressor": lambda **kw: train_RCRegressor(
        ESNRegressor(3, 1, 20, seed=0), U, Y, **kw
    ),
}


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"beta": "1e-8"}, TypeError, "beta must be a real number"),
        ({"return_states": "no"}, TypeError, "return_states must be True or False"),
        ({"return_states": None}, TypeError, "return_states must be True or False"),
    ],
)
def test_strings_are_not_numbers_or_flags(trainer, kwargs, error, words):
    with pytest.raises(error) as err:
        TRAINERS[trainer](**kwargs)
    assert str(err.value).startswith(f"{trainer}: "), str(err.value)
    assert words in str(err.value)
