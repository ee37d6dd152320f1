"""Divergence is judged against the training data's scale (issue 47 item 7).

Training records, in the readout, the largest magnitude of each output's
training targets (``readout.data_scale``); a forecast diverged where an
output exceeds ten times it. Before, ``forecast()`` took its scale from its
own first ten steps: a readout scaled by 1e6 (output millions of times the
data) never warned, nor did any forecast of ten steps or fewer, and
forecasts of data that decays (far below the data's scale) warned falsely.
An untrained model, weights set by hand and files written before the scale
was kept have no scale (``None``) and keep the earlier rule.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import forecaster as F
from orc.io import MAGIC
from orc.readouts import LinearReadout

DT = 0.01
T = np.arange(1200) * DT
# numpy data (the library converts it): slicing it compiles nothing
SINES = np.stack([np.sin(T), 2 * np.cos(1.3 * T), 0.5 * np.sin(0.7 * T + 1)], axis=1)
# x' = -diag(5, 10, 20) x from (1, -2, 3): decays to ~1e-5 of its start by
# row 250 and to ~1e-43 by the end of the training window
DECAY = np.array([1.0, -2.0, 3.0]) * np.exp(-np.array([5.0, 10.0, 20.0]) * T[:, None])

DISCRETE = {
    "esn": lambda: F.ESNForecaster(3, 40, seed=0),
    "parallel": lambda: F.ESNForecaster(3, 40, chunks=3, locality=1, seed=0),
    "ensemble": lambda: F.EnsembleESNForecaster(3, 40, chunks=2, seed=0),
    "deep": lambda: F.DeepESNForecaster(3, 40, n_layers=2, seed=0),
}
FAMILIES = [*DISCRETE, "cesn"]
# Forecast lengths: every short forecast (at most ten steps, which the old
# rule could not judge) is SHORT steps and every long one LONG, so that each
# family compiles one program per entry point and length (its CESN programs
# are the most expensive to compile).
SHORT, LONG = 3, 200


@functools.cache
def _train(family, data_name, n=1000):
    """The trained model and states, one training per family and data set
    (the models are immutable: the tests share them)."""
    data = {"sines": SINES, "decay": DECAY}[data_name]
    if family == "cesn":
        ts = jnp.asarray(T[:n])
        model, states = F.train_CESNForecaster(
            F.CESNForecaster(3, 40, seed=0), data[:n], ts
        )
    else:
        model, states = F.train_RCForecaster(DISCRETE[family](), data[:n])
    # numpy states (the library converts them): states[-1] compiles nothing
    return model, np.asarray(states)


def _forecast(family, model, steps, state):
    if family == "cesn":
        return model.forecast(jnp.asarray(T[:steps]), state)
    return model.forecast(steps, state)


def _forecast_from_IC(family, model, steps, warm):
    if family == "cesn":
        return model.forecast_from_IC(jnp.asarray(T[:steps]), warm)
    return model.forecast_from_IC(steps, warm)


def _scaled_wout(model, factor, output=slice(None)):
    """``model``'s readout weights with those of ``output`` times ``factor``,
    computed in numpy (an eager jnp product compiles a program per shape)."""
    wout = np.array(model.readout.wout)
    wout[:, output] *= factor
    return eqx.tree_at(lambda m: m.readout.wout, model, jnp.asarray(wout))


def _divergence_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [
        str(w.message) for w in caught if issubclass(w.category, F.DivergenceWarning)
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_training_keeps_each_outputs_largest_target_magnitude(family):
    assert (
        DISCRETE.get(family, lambda: F.CESNForecaster(3, 40))().readout.data_scale
        is None
    )
    model, _ = _train(family, "sines")
    expected = np.abs(np.asarray(SINES[1:1000])).max(axis=0)  # the targets
    np.testing.assert_allclose(np.asarray(model.readout.data_scale), expected, rtol=0)


def test_explicit_and_multi_sequence_targets_give_the_scale():
    esn = F.ESNForecaster(3, 30, seed=0)
    target = 3.0 * SINES[1:500]
    model, _ = F.train_RCForecaster(esn, SINES[:499], target_seq=target)
    np.testing.assert_allclose(
        np.asarray(model.readout.data_scale), np.abs(np.asarray(target)).max(axis=0)
    )
    multi = np.stack([SINES[:400], 4.0 * SINES[400:800]])
    model, _ = F.train_RCForecaster(esn, multi, multi_sequence=True)
    expected = np.abs(np.asarray(multi[:, 1:])).reshape(-1, 3).max(axis=0)
    np.testing.assert_allclose(np.asarray(model.readout.data_scale), expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_readout_scaled_by_1e6_warns_from_the_first_step_of_a_short_forecast(family):
    model, states = _train(family, "sines")
    wild = _scaled_wout(model, 1e6)
    # three steps: the old rule (the forecast's own first ten steps) could not
    # see it; the training data's scale (at most 2) is 1e5 times below
    found = _divergence_warnings(lambda: _forecast(family, wild, SHORT, states[-1]))
    assert len(found) == 1
    assert f"the forecast diverged at step 0 of {SHORT}" in found[0]
    assert "times the scale of the training data" in found[0]
    found = _divergence_warnings(
        lambda: _forecast_from_IC(family, wild, SHORT, SINES[1000:1100])
    )
    assert len(found) == 1 and f"at step 0 of {SHORT}" in found[0]
    # the trained model itself is silent
    assert not _divergence_warnings(lambda: _forecast(family, model, SHORT, states[-1]))


@pytest.mark.parametrize("family", FAMILIES)
def test_forecasts_of_decaying_data_never_warn(family):
    model, states = _train(family, "decay")
    scale = np.abs(np.asarray(DECAY[1:1000])).max(axis=0)
    warm = DECAY[900:1000]  # the data's end: ~1e-20 of its start
    for call in (
        lambda: _forecast(family, model, LONG, states[-1]),
        lambda: _forecast_from_IC(family, model, LONG, warm),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = np.asarray(call())
        assert not [w for w in caught if issubclass(w.category, F.DivergenceWarning)]
        # far below the data's scale: no divergence to report
        assert np.abs(out).max() < 1e-2 * scale.min()


def test_the_old_rule_flagged_the_decaying_forecast():
    # what the scale fixes: judged against its decayed warm-up data, the
    # same forecast is "diverged" (the model without its scale)
    model, _ = _train("esn", "decay")
    blind = model.set_readout(model.readout.with_data_scale(None))
    warm = DECAY[900:1000]
    found = _divergence_warnings(lambda: blind.forecast_from_IC(LONG, warm))
    assert found and "the scale it started from" in found[0]
    assert not _divergence_warnings(lambda: model.forecast_from_IC(LONG, warm))


def test_each_output_is_judged_against_its_own_scale():
    model, states = _train("esn", "sines")  # output scales ~1, 2, 0.5
    wild = _scaled_wout(model, 40.0, output=2)  # output 2 only, ~20
    found = _divergence_warnings(lambda: wild.forecast(SHORT, states[-1]))
    assert len(found) == 1 and "in output 2" in found[0]


def test_unknown_scale_keeps_the_earlier_rule():
    # an untrained-then-hand-set readout: judged by the forecast's start
    model = F.ESNForecaster(3, 40, seed=0)
    assert model.readout.data_scale is None
    trained, states = _train("esn", "sines")
    hand_set = model.set_readout(LinearReadout(3, 40).set_wout(trained.readout.wout))
    assert hand_set.readout.data_scale is None
    wild = _scaled_wout(hand_set, 1e6)
    assert not _divergence_warnings(lambda: wild.forecast(SHORT, states[-1]))


def test_data_scale_values_are_checked():
    readout = LinearReadout(3, 10)
    # numpy values (the readout converts them): no eager jnp programs
    with pytest.raises(ValueError, match=r"data_scale must have shape \(3,\)"):
        readout.with_data_scale(np.ones(2))
    with pytest.raises(ValueError, match="data_scale must be finite and >= 0"):
        readout.with_data_scale(np.array([1.0, -1.0, 0.0]))
    with pytest.raises(ValueError, match="data_scale must be finite and >= 0"):
        readout.with_data_scale(np.array([1.0, np.inf, 0.0]))


def _rewrite_header(path, edit):
    """Edit a model file's JSON header, its checksum fixed up."""
    data = path.read_bytes()
    start = len(MAGIC)
    (n,) = struct.unpack("<Q", data[start : start + 8])
    header = json.loads(data[start + 8 : start + 8 + n])
    edit(header)
    blob = json.dumps(header).encode()
    head = MAGIC + struct.pack("<Q", len(blob)) + blob
    path.write_bytes(head + hashlib.sha256(head).digest() + data[start + 8 + n + 32 :])


def test_the_scale_is_saved_and_files_without_it_still_load(tmp_path):
    model, states = _train("esn", "sines")
    back = orc.load(orc.save(tmp_path / "m.orc", model))
    np.testing.assert_array_equal(
        np.asarray(back.readout.data_scale), np.asarray(model.readout.data_scale)
    )
    # a file written before the field existed: the same model's layout
    # without data_scale in the readout's fields loads with None
    old = orc.save(
        tmp_path / "old.orc", model.set_readout(model.readout.with_data_scale(None))
    )

    def drop(header):
        fields = header["tree"]["fields"]["readout"]["fields"]
        assert fields.pop("data_scale") is None

    _rewrite_header(old, drop)
    loaded = orc.load(old)
    assert loaded.readout.data_scale is None
    np.testing.assert_array_equal(
        np.asarray(loaded.readout.wout), np.asarray(model.readout.wout)
    )
    np.testing.assert_array_equal(
        np.asarray(loaded.forecast(SHORT, states[-1])),
        np.asarray(model.forecast(SHORT, states[-1])),
    )
    # an edited scale is refused like any value no training gives
    bad = orc.save(tmp_path / "bad.orc", model)

    def negate(header):
        header["tree"]["fields"]["readout"]["fields"]["data_scale"] = {"float": "-inf"}

    _rewrite_header(bad, negate)
    with pytest.raises(orc.io.ModelFileError, match="data_scale"):
        orc.load(bad)
