"""Classifier representations beyond the final and mean state.

Each representation is checked against a numpy reference computed from the
states the model's own ``force`` produces (the driver's states), so the tests
pin the definition of the feature, not the implementation: statistics by
numpy's mean/std, the model space by an augmented ridge solve with an
unpenalised bias column, the bidirectional forms by forcing the reversed
series.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import count_compiles, noisy_sinusoids
from orc.classifier import (
    ESNClassifier,
    RCClassifierBase,
    feature_dim,
    train_RCClassifier,
)
from orc.classifier.base import MODEL_SPACE_RIDGE, STATE_REPRS
from orc.readouts import LinearReadout

RES_DIM = 40
SPINUP = 4
MODEL_SPACE_DIM = 12


def _model(state_repr):
    """The float64 classifier of every test below: one size and one set of
    static options, so that the tests share its compiled programs (the
    numpy references check the untrained one, the trained one is the same
    model with its readout fitted)."""
    return ESNClassifier(
        3,
        3,
        RES_DIM,
        state_repr=state_repr,
        embedding_scaling=0.5,
        model_space_dim=MODEL_SPACE_DIM,
    )


@functools.cache
def _forcer(dtype):
    """A model of fixed structure (its representation is static, part of a
    compiled program's identity) that forces a series through another
    model's driver and embedding: one force program per dtype and length,
    not one per representation."""
    return ESNClassifier(3, 3, RES_DIM, dtype=dtype)


@pytest.fixture(scope="module")
def data():
    """In numpy: the tests' own indexing and slicing compile no programs."""
    train = noisy_sinusoids(jax.random.key(0), 8, seq_len=50)
    test = noisy_sinusoids(jax.random.key(1), 8, seq_len=50)
    return tuple(tuple(np.asarray(a) for a in pair) for pair in (train, test))


_jit_features = jax.jit(lambda m, s: m.features(s, spinup=SPINUP))


def _features(model, seq):
    """``model.features(seq, spinup=SPINUP)`` as numpy, computed in one
    ``jax.jit`` with the model as its argument (one program per
    representation and dtype: run eagerly, each scan and solve of the
    representation compiled a program of its own)."""
    return np.asarray(_jit_features(model, seq))


def _states(model, seq):
    """The driver's states ``(T, res_dim)`` for ``seq`` from the default state:
    ``model``'s own driver and embedding, forced by ``force``."""
    forcer = eqx.tree_at(
        lambda m: (m.driver, m.embedding),
        _forcer(model.dtype),
        (model.driver, model.embedding),
    )
    return np.asarray(forcer.force(seq, model.driver.default_state()))


def _stats_ref(states, spinup):
    kept = states[spinup:]
    return np.concatenate([states[-1], kept.mean(0), kept.std(0)])


def _model_space_ref(states, seq, spinup, width):
    """Ridge ``u_{t+1} ≈ W r_t[:width] + b``: the augmented normal equations,
    ridge ``m * lam`` on ``W`` only, ``lam`` relative to the nodes' variance."""
    x = states[spinup:-1, :width]
    y = np.asarray(seq)[spinup + 1 :]
    m = x.shape[0]
    lam = MODEL_SPACE_RIDGE * x.var(axis=0).mean()
    xa = np.hstack([x, np.ones((m, 1))])
    penalty = np.diag(np.r_[np.full(width, m * lam), 0.0])
    coef = np.linalg.solve(xa.T @ xa + penalty, xa.T @ y)  # (width + 1, out)
    return coef.T.reshape(-1)  # [W[0], b[0], W[1], b[1], ...]


def _reference(model, seq, spinup):
    base, bi = model.state_repr.removeprefix("bi_"), model.state_repr.startswith("bi_")
    passes = [seq, seq[::-1]] if bi else [seq]
    out = []
    for s in passes:
        states = _states(model, s)
        if base == "final":
            out.append(states[-1])
        elif base == "mean":
            out.append(states[spinup:].mean(0))
        elif base == "stats":
            out.append(_stats_ref(states, spinup))
        else:
            out.append(_model_space_ref(states, s, spinup, model.model_space_dim))
    return np.concatenate(out)


@pytest.mark.parametrize("state_repr", STATE_REPRS)
def test_features_match_numpy_reference(data, state_repr):
    (seqs, _), _ = data
    model = _model(state_repr)
    feats = _features(model, seqs[5])
    ref = _reference(model, seqs[5], SPINUP)
    assert feats.shape == (model.feature_dim,) == ref.shape
    assert model.readout.res_dim == model.feature_dim
    # the model-space weights of nearly collinear states are ill-conditioned
    # (condition ~1e6 at this ridge): agreement to ~1e-9 relative
    rtol = 1e-7 if "model_space" in state_repr else 1e-10
    np.testing.assert_allclose(feats, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def test_feature_sizes():
    assert feature_dim("final", 40, 3) == 40
    assert feature_dim("stats", 40, 3) == 120
    assert feature_dim("bi_stats", 40, 3) == 240
    assert feature_dim("model_space", 40, 3) == 3 * 41  # min(res_dim, 75) nodes
    assert feature_dim("model_space", 200, 3) == 3 * 76
    assert feature_dim("bi_model_space", 200, 2, 10) == 2 * 2 * 11
    clf = ESNClassifier(3, 3, 100, state_repr="model_space")
    assert clf.model_space_dim == 75 and clf.feature_dim == 3 * 76


def test_final_and_mean_unchanged():
    """ORC's two representations keep their meaning, default and readout size."""
    clf = ESNClassifier(3, 3, RES_DIM)
    assert clf.state_repr == "final"
    assert clf.readout.wout.shape == (1, 3, RES_DIM)
    assert clf.model_space_dim is None


@pytest.mark.parametrize("state_repr", ["stats", "bi_model_space"])
def test_float32_features(data, state_repr):
    (seqs, _), _ = data
    model = ESNClassifier(
        3, 3, RES_DIM, state_repr=state_repr, dtype=jnp.float32, model_space_dim=8
    )
    seq = seqs[2].astype(np.float32)
    feats = _features(model, seq)
    assert feats.dtype == np.float32
    ref = _reference(model, seq, SPINUP).astype(np.float64)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(feats, ref, rtol=2e-3, atol=2e-3 * scale)


@pytest.mark.parametrize("state_repr", ["bi_stats", "model_space"])
def test_jit_vmap_grad_and_no_retrace(data, trained, state_repr):
    (seqs, _), _ = data
    model = trained(state_repr)
    # vmap and grad are traced inside one jax.jit each, the model an argument:
    # run eagerly, vmap compiles every operation of the representation apart,
    # and grad its forward and its transpose; the transformations are the same
    batched = jax.jit(
        jax.vmap(lambda m, s: m.features(s, spinup=SPINUP), in_axes=(None, 0))
    )(model, seqs)
    single = model.features(seqs[3], spinup=SPINUP)  # eager
    np.testing.assert_allclose(np.asarray(batched)[3], single, rtol=1e-9, atol=1e-9)
    p = model.classify(seqs[0], spinup=SPINUP)
    jc = jax.jit(lambda m, s: m.classify(s, spinup=SPINUP))
    np.testing.assert_allclose(jc(model, seqs[0]), p, rtol=1e-10, atol=1e-12)
    with count_compiles() as c:
        jax.block_until_ready(model.classify(seqs[1], spinup=SPINUP))
        jax.block_until_ready(jc(model, seqs[1]))
    assert c["compiles"] == 0
    g = jax.jit(jax.grad(lambda s, m: m.classify(s, spinup=SPINUP)[0]))(seqs[0], model)
    assert g.shape == seqs[0].shape and np.all(np.isfinite(np.asarray(g)))


@pytest.fixture(scope="module")
def trained(data):
    """One trained classifier per representation, shared by the tests below."""
    (seqs, labels), _ = data
    cache = {}

    def get(state_repr):
        if state_repr not in cache:
            cache[state_repr] = train_RCClassifier(
                _model(state_repr), seqs, labels, spinup=SPINUP, beta=1e-6
            )
        return cache[state_repr]

    return get


@pytest.mark.parametrize("state_repr", STATE_REPRS)
def test_each_representation_classifies_and_round_trips(
    data, trained, state_repr, tmp_path
):
    _, (test, test_labels) = data
    model = trained(state_repr)
    probs = jax.vmap(lambda s: model.classify(s, spinup=SPINUP))(test)
    accuracy = np.mean(np.argmax(np.asarray(probs), 1) == test_labels)
    assert accuracy >= 0.75, (state_repr, accuracy)  # chance is 1/3
    path = tmp_path / "clf.orc"
    orc.save(path, model)
    loaded = orc.load(path, cls=ESNClassifier)
    assert loaded.state_repr == state_repr
    assert loaded.feature_dim == model.feature_dim
    assert loaded.model_space_dim == model.model_space_dim
    np.testing.assert_array_equal(
        jax.vmap(lambda s: loaded.classify(s, spinup=SPINUP))(test), probs
    )


def test_bad_values_name_the_argument(data):
    (seqs, _), _ = data
    with pytest.raises(ValueError, match="state_repr must be one of"):
        ESNClassifier(3, 3, RES_DIM, state_repr="median")
    with pytest.raises(ValueError, match="state_repr must be one of"):
        feature_dim("bi_", 10, 2)
    with pytest.raises(ValueError, match="model_space_dim must be <= 40"):
        ESNClassifier(3, 3, RES_DIM, state_repr="model_space", model_space_dim=41)
    with pytest.raises(ValueError, match="model_space_dim must be >= 1"):
        ESNClassifier(3, 3, RES_DIM, state_repr="model_space", model_space_dim=0)
    with pytest.raises(TypeError, match="model_space_dim must be an int"):
        ESNClassifier(3, 3, RES_DIM, state_repr="model_space", model_space_dim=2.5)
    clf = ESNClassifier(3, 3, RES_DIM, state_repr="model_space")
    with pytest.raises(ValueError, match=r"spinup \(49\) must be at most"):
        clf.features(seqs[0], spinup=49)
    # a hand-built model whose readout does not fit the representation
    parts = (clf.driver, LinearReadout(3, RES_DIM), clf.embedding)
    with pytest.raises(ValueError, match=r"state_repr='stats'.*readout.res_dim"):
        RCClassifierBase(*parts, n_classes=3, state_repr="stats")
    with pytest.raises(ValueError, match=r"state_repr='model_space'.*readout.res_dim"):
        RCClassifierBase(
            clf.driver, LinearReadout(3, 7), clf.embedding, 3, "model_space"
        )
    # and one sized by feature_dim works, including replacing the readout later
    # (MODEL_SPACE_DIM nodes, not clf's 40, and SPINUP: the shapes of the
    # features computed above, whose eager programs it reuses)
    width = feature_dim("model_space", RES_DIM, 3, MODEL_SPACE_DIM)
    custom = RCClassifierBase(
        clf.driver, LinearReadout(3, width), clf.embedding, 3, "model_space"
    )
    assert custom.model_space_dim == MODEL_SPACE_DIM
    assert custom.features(seqs[0], spinup=SPINUP).shape == (width,)
    resized = eqx.tree_at(lambda m: m.readout, clf, LinearReadout(3, width))
    assert resized.model_space_dim == MODEL_SPACE_DIM
