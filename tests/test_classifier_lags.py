"""``input_lags``: the classifier's reservoir also reads the series'
differences over several numbers of steps, each scaled by its training
standard deviation, before the first differences of ``input_differences``."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.classifier import ESNClassifier, fit_features, train_RCClassifier
from orc.classifier.base import lagged_differences


def _series(n=12, t=40, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, t, d)), axis=1)


def _lag(seq, lag):
    """``seq[t] - seq[t - lag]`` along axis -2, 0 where ``t < lag``."""
    out = np.zeros_like(seq)
    out[..., lag:, :] = seq[..., lag:, :] - seq[..., :-lag, :]
    return out


@eqx.filter_jit
def _jit_inputs(model, seq):
    return model._inputs(seq)


def _inputs(model, seq):
    """``model._inputs(seq)`` compiled, as in training and classification:
    one program (eagerly, one per operation)."""
    return np.asarray(_jit_inputs(model, jnp.asarray(seq)))


def test_lagged_differences_match_numpy():
    seq = _series(1, 30, 3)[0]
    lags = (1, 3, 7, 35)  # a lag longer than the series gives zeros
    # compiled, as in training: one program (eagerly, one per operation)
    got = np.asarray(jax.jit(lagged_differences, static_argnums=1)(seq, lags))
    want = np.concatenate([_lag(seq, lag) if lag < 30 else 0 * seq for lag in lags], 1)
    np.testing.assert_array_equal(got, want)


def test_lags_then_first_differences_are_fitted_and_read():
    x = jnp.asarray(_series(t=50))
    xs = np.asarray(x)
    model = ESNClassifier(
        2, 3, 40, state_repr="bi_ppv", input_lags=(4, 16), input_differences=True
    )
    assert model.input_lags == (4, 16) and model.data_dim == 2
    assert model.embedding.in_dim == 2 * 3 * 2  # [u, d4, d16] and their differences
    fitted = fit_features(model, x, spinup=5)
    # lag scales: std over series and t >= L; difference scales: std of the
    # first differences of the scaled channels [u, d4/s4, d16/s16]
    lag_scale = np.concatenate(
        [np.std(xs[:, lag:] - xs[:, :-lag], axis=(0, 1)) for lag in (4, 16)]
    )
    np.testing.assert_allclose(fitted.lag_scale, lag_scale, rtol=1e-12)
    channels = np.concatenate(
        [xs, _lag(xs, 4) / lag_scale[:2], _lag(xs, 16) / lag_scale[2:]], axis=2
    )
    diff_scale = np.std(np.diff(channels, axis=1), axis=(0, 1))
    np.testing.assert_allclose(fitted.difference_scale, diff_scale, rtol=1e-12)
    seq = channels[3]
    first = np.concatenate([np.zeros((1, 6)), np.diff(seq, axis=0)]) / diff_scale
    want = np.concatenate([seq, first], axis=1)
    got = _inputs(fitted, xs[3])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_lags_alone_and_a_trained_model_under_jit():
    x = jnp.asarray(_series(t=50))
    y = jnp.asarray(np.arange(12) % 3)
    model = ESNClassifier(2, 3, 30, state_repr="stats", input_lags=(2,))
    assert model.embedding.in_dim == 4 and model.difference_scale is None
    trained = train_RCClassifier(model, x, y, spinup=5, beta=[1e-3, 1e-1, 10.0])
    xs = np.asarray(x)
    scale = np.std(xs[:, 2:] - xs[:, :-2], axis=(0, 1))
    want = np.concatenate([xs[0], _lag(xs[0], 2) / scale], axis=1)
    np.testing.assert_allclose(_inputs(trained, xs[0]), want, rtol=1e-12)
    probs = jax.jit(jax.vmap(lambda s: trained.classify(s, None, 5)))(x)
    assert probs.shape == (12, 3) and np.all(np.isfinite(probs))


def test_lags_survive_save_and_load(tmp_path):
    x = jnp.asarray(_series(t=30))
    y = jnp.asarray(np.arange(12) % 2)
    model = ESNClassifier(
        2, 2, 20, state_repr="stats", input_lags=(2, 5), input_differences=True
    )
    trained = train_RCClassifier(model, x, y, spinup=3, beta=1e-2)
    back = orc.load(orc.save(tmp_path / "lags.orc", trained))
    assert back.input_lags == (2, 5)
    np.testing.assert_array_equal(back.lag_scale, trained.lag_scale)
    x0 = jnp.asarray(np.asarray(x)[0])  # sliced in numpy: no eager program
    np.testing.assert_array_equal(
        np.asarray(back.classify(x0, None, 3)),
        np.asarray(trained.classify(x0, None, 3)),
    )
    # a model without lags keeps the fields of files written before them
    plain = ESNClassifier(2, 2, 20, input_differences=True)
    assert plain.lag_set is None and plain.lag_scale is None
    assert plain.input_lags == ()


@pytest.mark.parametrize("bad", [(0,), (1, 1), (1.5,), (True,), "14", 4])
def test_bad_lags_are_named(bad):
    with pytest.raises(TypeError, match="input_lags must be a sequence of distinct"):
        ESNClassifier(1, 2, 10, input_lags=bad)


def test_sklearn_estimator_takes_lags():
    from orc.sklearn import ESNClassifier as SkESN

    x = _series(t=40, d=1)[:, :, 0]
    y = np.arange(12) % 2
    clf = SkESN(res_dim=20, input_lags=(3,), input_differences=True).fit(x, y)
    assert clf.get_params()["input_lags"] == (3,)
    assert clf.model_.input_lags == (3,)
    assert clf.predict(x).shape == (12,)
