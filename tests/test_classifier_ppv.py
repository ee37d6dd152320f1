"""The fitted classifier representations (``"ppv"``, ``"bi_ppv"``), the
difference input channels and the leave-one-out choice of the ridge.

References are numpy: the reservoir's states are recomputed from the
model's own matrices (``W``, ``W_in``, leak, bias), the thresholds are
``np.quantile`` of them, the difference scale ``np.std`` of ``np.diff``, and
the leave-one-out error is refitted ``n`` times by brute force.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest

import orc
from _helpers import ON_CPU, noisy_sinusoids
from orc._validation import run_check_inits
from orc.classifier import (
    ESNClassifier,
    RCClassifierBase,
    fit_features,
    loo_ridge,
    train_RCClassifier,
)
from orc.classifier.base import FITTED_REPRS, PPV_QUANTILES
from orc.classifier.train import _ppv_stride

RES_DIM = 30
SPINUP = 4
BETAS = np.logspace(-3, 3, 10)  # as orc.sklearn.DEFAULT_BETAS: one compiled fit

# loo_ridge under jax.jit, as training runs it: eagerly, each of its
# operations is a program of its own per shape
_loo_ridge = jax.jit(loo_ridge)
# an embedding's rows for a batch of inputs: one program per shape
_embed_all = eqx.filter_jit(lambda emb, xs: jax.vmap(emb.embed)(xs))
# a model's features of one series, one program per model layout (eagerly,
# each of the features' operations compiles a program of its own)
_features = eqx.filter_jit(lambda model, seq: model.features(seq, spinup=SPINUP))


@pytest.fixture(scope="module")
def data():
    """The series and labels as numpy (the entry points convert them; the
    tests' indexing of JAX arrays would compile programs)."""
    train = noisy_sinusoids(jax.random.key(0), 8, seq_len=40)
    test = noisy_sinusoids(jax.random.key(1), 6, seq_len=40)
    return jax.tree.map(np.asarray, (train, test))


def _matrices(model):
    """``(W, W_in, bias, leak)`` of the model's single reservoir, as numpy."""
    drv, emb = model.driver, model.embedding
    values, columns = np.asarray(drv.wr.values)[0], np.asarray(drv.wr.columns)[0]
    w = np.zeros((model.res_dim, model.res_dim))
    np.add.at(w, (np.arange(model.res_dim)[:, None], columns), values)  # ELL rows
    eye = np.eye(emb.in_dim, dtype=model.dtype)
    w_in = np.asarray(_embed_all(emb, eye)).T
    return w, w_in.reshape(model.res_dim, emb.in_dim), float(drv.bias), float(drv.leak)


def _np_inputs(model, seq, scale=None):
    seq = np.asarray(seq)
    if not model.input_differences:
        return seq
    scale = np.asarray(model.difference_scale) if scale is None else scale
    diff = np.diff(seq, axis=0, prepend=seq[:1])
    return np.hstack([seq, diff / scale])


def _np_states(model, seq, scale=None):
    """States ``(T, res_dim)`` by the ESN update from ``r_0 = 0``."""
    w, w_in, bias, leak = _matrices(model)
    r = np.zeros(model.res_dim)
    out = []
    for u in _np_inputs(model, seq, scale):
        r = (1 - leak) * r + leak * np.tanh(w @ r + w_in @ u + bias)
        out.append(r)
    return np.array(out)


def _np_ppv(states, thresholds, spinup):
    kept = states[spinup:]
    above = (kept[:, None, :] > thresholds[None]).mean(0)  # (3, N)
    return np.concatenate([kept.mean(0), above.reshape(-1)])


def _np_features(model, seq, spinup):
    th = np.asarray(model.ppv_thresholds)
    passes = [np.asarray(seq), np.asarray(seq)[::-1]][: th.shape[0]]
    return np.concatenate(
        [_np_ppv(_np_states(model, s), th[i], spinup) for i, s in enumerate(passes)]
    )


def _model(state_repr, differences=False, **kw):
    return ESNClassifier(
        3,
        3,
        RES_DIM,
        state_repr=state_repr,
        input_differences=differences,
        embedding_scaling=0.5,
        **kw,
    )


@pytest.fixture(scope="module")
def trained(data):
    (seqs, labels), _ = data
    cache = {}

    def get(state_repr, differences):
        key = (state_repr, differences)
        if key not in cache:
            cache[key] = train_RCClassifier(
                _model(state_repr, differences), seqs, labels, SPINUP, beta=BETAS
            )
        return cache[key]

    return get


def test_matrices_reproduce_force(data):
    """The numpy reservoir used as reference is the model's own."""
    (seqs, _), _ = data
    model = _model("ppv", True)
    np.testing.assert_allclose(
        _np_states(model, seqs[0]), model.force(seqs[0], None), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    ("state_repr", "differences"), list(zip(FITTED_REPRS, (False, True), strict=True))
)
def test_fitted_parameters_and_features_match_numpy(
    data, trained, state_repr, differences
):
    (seqs, labels), (test, _) = data
    model = trained(state_repr, differences)
    fitted = fit_features(_model(state_repr, differences), seqs, SPINUP)
    for field in ("ppv_thresholds", "difference_scale"):
        np.testing.assert_array_equal(getattr(fitted, field), getattr(model, field))
    raw = np.asarray(seqs)
    # the difference scale: std of the training differences, per channel
    if differences:
        want = np.diff(raw, axis=1).std(axis=(0, 1))
        np.testing.assert_allclose(model.difference_scale, want, rtol=1e-12)
        assert model.embedding.in_dim == 6 and model.in_dim == model.data_dim == 3
    else:
        assert model.difference_scale is None and not model.input_differences
    # thresholds: quantiles of every kept training state (few: stride 1)
    assert _ppv_stride(len(raw), raw.shape[1] - SPINUP) == 1
    bi = state_repr == "bi_ppv"
    th = np.asarray(model.ppv_thresholds)
    assert th.shape == (2 if bi else 1, 3, RES_DIM)
    for p in range(th.shape[0]):
        states = np.concatenate(
            [_np_states(model, s[::-1] if p else s)[SPINUP:] for s in raw]
        )
        np.testing.assert_allclose(
            th[p], np.quantile(states, PPV_QUANTILES, axis=0), rtol=1e-10, atol=1e-12
        )
    # features of an unseen series
    feats = np.asarray(_features(model, test[1]))
    assert feats.shape == (model.feature_dim,) == ((8 if bi else 4) * RES_DIM,)
    np.testing.assert_allclose(
        feats, _np_features(model, test[1], SPINUP), rtol=1e-10, atol=1e-12
    )


def test_threshold_stride_is_deterministic():
    assert _ppv_stride(8, 36) == 1
    assert _ppv_stride(100, 1000) == 10  # 100 per series: every 10th of 1000
    assert _ppv_stride(50_000, 10) == 10  # one state per series
    assert _ppv_stride(1, 100_000) == 10


def test_untrained_thresholds_are_the_sign(data):
    """Before training the thresholds are 0: the fraction of positive states."""
    (seqs, _), _ = data
    model = _model("ppv")
    assert not np.any(np.asarray(model.ppv_thresholds))
    states = _np_states(model, seqs[0])[SPINUP:]
    feats = np.asarray(_features(model, seqs[0]))
    np.testing.assert_allclose(feats[RES_DIM : 2 * RES_DIM], (states > 0).mean(0))
    with pytest.warns(orc.UntrainedModelWarning):
        model.classify(seqs[0], spinup=SPINUP)


def _brute_loo(x, y, beta):
    scale = x.std(0)
    scale[scale == 0] = 1
    z = x / scale
    errs = []
    for i in range(len(z)):
        keep = np.arange(len(z)) != i
        zi = z[keep]
        w = np.linalg.solve(zi.T @ zi + beta * np.eye(z.shape[1]), zi.T @ y[keep])
        errs.append(y[i] - z[i] @ w)
    return np.mean(np.square(errs))


@pytest.mark.parametrize("p", [5, 40])  # more samples than features, and fewer
def test_loo_matches_brute_force(p):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((25, p)) * rng.uniform(0.1, 10, p) + 1.0
    y = np.eye(3)[rng.integers(0, 3, 25)]
    betas = np.logspace(-2, 2, 5)
    w, beta, errors = _loo_ridge(*jax.device_put((x, y, betas)))
    want = np.array([_brute_loo(x, y, b) for b in betas])
    np.testing.assert_allclose(errors, want, rtol=1e-8)
    assert float(beta) == betas[np.argmin(want)]
    # the weights: ridge on the scaled features, folded back onto raw ones
    scale = x.std(0)
    z = x / scale
    wz = np.linalg.solve(z.T @ z + float(beta) * np.eye(p), z.T @ y)
    np.testing.assert_allclose(np.asarray(w), (wz / scale[:, None]).T, rtol=1e-7)


def test_training_with_candidates_uses_loo(data, trained):
    (seqs, labels), (test, test_labels) = data
    model = trained("bi_ppv", True)
    features = jax.jit(jax.vmap(lambda s: model.features(s, spinup=SPINUP)))
    feats = np.asarray(features(seqs))
    w, beta, _ = _loo_ridge(feats, np.eye(3)[np.asarray(labels)], BETAS)
    assert float(model.selected_beta) == float(beta)
    # a GPU's features round apart from the CPU's (measured on an H100: 4e-9)
    tol = 1e-9 if ON_CPU else 1e-7
    wout = np.asarray(model.readout.wout)[0]
    np.testing.assert_allclose(wout, w, rtol=tol, atol=1e-12)
    probs = jax.vmap(lambda s: model.classify(s, spinup=SPINUP))(test)
    assert np.mean(np.argmax(np.asarray(probs), 1) == np.asarray(test_labels)) >= 0.8
    # one beta: ORC's plain ridge, and no selection recorded
    single = train_RCClassifier(model, seqs, labels, SPINUP, beta=1e-6)
    assert single.selected_beta is None


def test_jit_vmap_and_round_trip(data, trained, tmp_path):
    (seqs, labels), (test, _) = data
    model = trained("bi_ppv", True)
    probs = jax.vmap(lambda s: model.classify(s, spinup=SPINUP))(test)
    jitted = jax.jit(jax.vmap(lambda m, s: m.classify(s, spinup=SPINUP), (None, 0)))
    np.testing.assert_allclose(jitted(model, test), probs, rtol=1e-10, atol=1e-12)
    # training under jit (thresholds and scale are arrays of the model)
    retrained = jax.jit(
        lambda m, x, y: train_RCClassifier(m, x, y, SPINUP, beta=BETAS)
    )(_model("bi_ppv", True), seqs, labels)
    np.testing.assert_allclose(
        retrained.ppv_thresholds, model.ppv_thresholds, rtol=1e-12
    )
    np.testing.assert_allclose(retrained.selected_beta, model.selected_beta)
    path = tmp_path / "clf.orc"
    orc.save(path, model)
    loaded = orc.load(path, cls=ESNClassifier)
    assert loaded.state_repr == "bi_ppv" and loaded.input_differences
    for field in ("ppv_thresholds", "difference_scale", "selected_beta"):
        np.testing.assert_array_equal(getattr(loaded, field), getattr(model, field))
    np.testing.assert_array_equal(
        jax.vmap(lambda s: loaded.classify(s, spinup=SPINUP))(test), probs
    )


def test_bad_options_name_the_argument(data):
    (seqs, labels), _ = data
    with pytest.raises(TypeError, match="input_differences must be a bool"):
        ESNClassifier(3, 3, RES_DIM, input_differences=1)
    model = _model("ppv")
    with pytest.raises(ValueError, match="beta candidates must all be > 0"):
        train_RCClassifier(model, seqs, labels, beta=[0.0, 1.0])
    with pytest.raises(ValueError, match="beta must be a number or a 1-D"):
        train_RCClassifier(model, seqs, labels, beta=np.ones((2, 2)))
    with pytest.raises(ValueError, match="beta must be a number or a 1-D"):
        train_RCClassifier(model, seqs, labels, beta=[])
    with pytest.raises(ValueError, match=r"needs an embedding of 2 \* data_dim"):
        RCClassifierBase(
            model.driver,
            model.readout,
            model.embedding,
            3,
            "ppv",
            input_differences=True,
        )
    # the invariants orc.load checks on a rebuilt model
    zeros = jax.device_put(np.zeros((2, 3, RES_DIM)))
    bad = eqx.tree_at(lambda m: m.ppv_thresholds, model, zeros)
    with pytest.raises(
        ValueError, match=r"ppv_thresholds must have shape \(1, 3, 30\)"
    ):
        run_check_inits(bad)


def test_sklearn_estimator_runs_the_recipe(data):
    """orc.sklearn.ESNClassifier with the recipe's options (its defaults) is
    the orc model of the same hyperparameters trained directly: spinup None
    is seq_len // 10, beta None the LOO grid."""
    sk = pytest.importorskip("orc.sklearn")
    (seqs, labels), (test, _) = data
    X, X_test = np.asarray(seqs), np.asarray(test)
    hyper = dict(res_dim=RES_DIM, embedding_scaling=0.5, state_repr="bi_ppv",
                 input_differences=True, input_lags=(4, 16), leak_rate=0.1,
                 Wr_density=0.1, Wr_spectral_radius=0.9)  # fmt: skip
    clf = sk.ESNClassifier(res_dim=RES_DIM, embedding_scaling=0.5, channels_last=True)
    assert {k: v for k, v in clf.get_params().items() if k in hyper} == hyper
    assert clf.get_params()["spinup"] is None and clf.get_params()["beta"] is None
    clf.fit(X, np.asarray(labels))
    model = train_RCClassifier(
        ESNClassifier(3, 3, **hyper),
        seqs,
        labels,
        spinup=X.shape[1] // 10,
        beta=sk.DEFAULT_BETAS,
    )
    assert float(clf.model_.selected_beta) == float(model.selected_beta)
    direct = jax.vmap(lambda s: model.classify(s, spinup=X.shape[1] // 10))(test)
    np.testing.assert_allclose(
        clf.predict_proba(X_test), direct, rtol=1e-10, atol=1e-12
    )
