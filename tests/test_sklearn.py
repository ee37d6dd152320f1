"""orc.sklearn: scikit-learn's estimator checks, agreement with orc's own
models, layouts, labels, pipelines and cross-validation, errors, and the
optional import."""

from __future__ import annotations

import functools
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.metrics import r2_score  # noqa: E402
from sklearn.model_selection import (  # noqa: E402
    GridSearchCV,
    StratifiedKFold,
    TimeSeriesSplit,
    cross_val_score,
)
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer, StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from orc import classifier as orc_classifier  # noqa: E402
from orc import regression as orc_regression  # noqa: E402
from orc.sklearn import ESNClassifier, ESNRegressor, ESNTransformer  # noqa: E402

# hyperparameters that suit inputs of order one (the defaults are tuned for
# chaotic forecasting: their small input scaling would need a long fit)
# the machinery's tests: a small, plain configuration (the estimator's own
# defaults, the recipe, are tested on their own and by scikit-learn's checks)
CLF = dict(res_dim=40, embedding_scaling=0.5, state_repr="mean", spinup=5,
           input_differences=False, input_lags=(), beta=1e-6)  # fmt: skip
REG = dict(res_dim=40, leak_rate=1.0, bias=0.2, embedding_scaling=0.5, spinup=20)
# most tests use data of these shapes, so that they share compiled programs
N_SERIES, N_TIMEPOINTS = 40, 30  # classifier: 40 series of 30 time points
N_FIT, N_SAMPLES = 300, 400  # regressor: fitted on 300 of 400 time steps


# --- scikit-learn's estimator checks -----------------------------------------


def _expected_failed_checks(estimator):
    if isinstance(estimator, (ESNRegressor, ESNTransformer)):
        why = (
            "the rows of X are consecutive time steps driving one reservoir "
            "from the zero state: an output depends on every earlier row, so "
            "predictions of reordered rows or of a subset of the rows are not "
            "the reordered or subset predictions (by design, as for any "
            "stateful sequence model)"
        )
        return {
            "check_methods_sample_order_invariance": why,
            "check_methods_subset_invariance": why,
        }
    return {}


@parametrize_with_checks(
    [ESNClassifier(res_dim=20), ESNRegressor(res_dim=20), ESNTransformer(res_dim=20)],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_regressor_order_invariance_fails_for_its_stated_reason():
    """The two expected failures above are the reservoir's memory, nothing
    else: a regressor whose reservoir forgets at once (leak_rate=1, next to
    no recurrent weights) passes them."""
    from sklearn.utils.estimator_checks import (
        check_methods_sample_order_invariance,
        check_methods_subset_invariance,
    )

    # (the spectral radius must be positive: 1e-12 leaves no memory to see)
    memoryless = ESNRegressor(res_dim=20, leak_rate=1.0, Wr_spectral_radius=1e-12)
    check_methods_sample_order_invariance("ESNRegressor", memoryless)
    check_methods_subset_invariance("ESNRegressor", memoryless)
    with pytest.raises(AssertionError, match="not invariant"):
        check_methods_subset_invariance("ESNRegressor", ESNRegressor(res_dim=20))


# --- data ----------------------------------------------------------------------


def _waves(seed, n_channels=None, n=N_SERIES):
    """``n`` sine and square waves of ``N_TIMEPOINTS``, random frequency and
    phase, with noise; labels "sine" / "square". 3-D in aeon's layout when
    ``n_channels``."""
    rng = np.random.default_rng(seed)
    t = np.arange(N_TIMEPOINTS)
    shape = (n, 1) if n_channels is None else (n, n_channels, 1)
    freq = rng.uniform(0.05, 0.15, shape)
    phase = rng.uniform(0, 2 * np.pi, shape)
    square = rng.integers(0, 2, n).astype(bool)
    sine = np.sin(2 * np.pi * freq * t + phase)
    which = square.reshape((n,) + (1,) * (sine.ndim - 1))
    X = np.where(which, np.sign(sine), sine)
    X = X + 0.1 * rng.normal(size=X.shape)
    return X, np.where(square, "square", "sine")


def _memory_task(seed):
    """Inputs ``u_t`` (``N_SAMPLES`` time steps, 2 channels, offset and
    scaled, for a scaler to undo) and targets ``(u_{t-1}[0], u_{t-2}[1])``:
    the reservoir's memory."""
    rng = np.random.default_rng(seed)
    u = 5.0 + 3.0 * rng.uniform(-1, 1, (N_SAMPLES + 2, 2))
    return u[2:], np.column_stack([u[1:-1, 0], u[:-2, 1]])


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- agreement with orc's own models -------------------------------------------


@pytest.mark.parametrize(
    "repr_args",
    [
        {},
        {"state_repr": "bi_mean"},
        {"state_repr": "model_space", "model_space_dim": 7},
    ],
    ids=["default", "bi_mean", "model_space"],
)
def test_classifier_is_orc_classifier_trained_directly(repr_args):
    X, y = _waves(1, n_channels=2)
    X_test, _ = _waves(2, n_channels=2)
    hyper = dict(CLF, seed=3, beta=1e-6, **repr_args)
    clf = ESNClassifier(**hyper).fit(X, y)

    # the same model built (with every hyperparameter the estimator holds,
    # its own defaults included) and trained with orc itself, labels numbered
    # in sorted order and series in orc's (n_series, n_timepoints, n_channels)
    names = sorted(set(y))
    labels = jax.device_put(np.array([names.index(label) for label in y], np.int32))
    spinup, beta = hyper["spinup"], hyper["beta"]
    params = clf.get_params()
    takes = inspect.signature(orc_classifier.ESNClassifier).parameters
    hyper = {name: params[name] for name in takes if name in params and name != "dtype"}
    model = orc_classifier.ESNClassifier(data_dim=2, n_classes=2, **hyper)
    model = orc_classifier.train_RCClassifier(
        model, jax.device_put(X.transpose(0, 2, 1)), labels, spinup=spinup, beta=beta
    )
    seqs = jax.device_put(X_test.transpose(0, 2, 1))
    direct = np.asarray(jax.vmap(lambda s: model.classify(s, None, spinup))(seqs))

    proba = clf.predict_proba(X_test)
    assert list(clf.classes_) == names
    np.testing.assert_allclose(proba, direct, rtol=1e-10, atol=1e-12)

    # and the probabilities are the softmax of the fitted readout's scores
    # (computed as one program: run eagerly, vmap compiled each operation of
    # the representation on its own)
    @eqx.filter_jit
    def readout_scores(m, seqs):
        feats = jax.vmap(lambda s: m.features(s, None, spinup))(seqs)
        return jax.vmap(m.readout.readout)(feats)

    scores = np.asarray(readout_scores(clf.model_, seqs))
    np.testing.assert_allclose(proba, _softmax(scores), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(
        clf.predict(X_test), np.asarray(names)[scores.argmax(axis=1)]
    )


@pytest.mark.parametrize("multi_output", [False, True])
def test_regressor_is_orc_regressor_trained_directly(multi_output):
    X, Y = _memory_task(4)
    y = Y if multi_output else Y[:, 0]
    hyper = dict(REG, seed=5, beta=1e-5, input_passthrough=True)
    reg = ESNRegressor(**hyper).fit(X[:N_FIT], y[:N_FIT])

    spinup, beta = hyper.pop("spinup"), hyper.pop("beta")
    targets = Y if multi_output else Y[:, :1]
    model = orc_regression.ESNRegressor(in_dim=2, out_dim=targets.shape[1], **hyper)
    model, _ = orc_regression.train_RCRegressor(
        model,
        jax.device_put(X[:N_FIT]),
        jax.device_put(targets[:N_FIT]),
        spinup=spinup,
        beta=beta,
        progress=False,
    )
    direct = np.asarray(model.predict(jax.device_put(X[N_FIT:])))

    pred = reg.predict(X[N_FIT:])
    assert pred.shape == y[N_FIT:].shape  # 1-D y gives 1-D predictions
    np.testing.assert_allclose(pred.reshape(direct.shape), direct, rtol=1e-9)
    assert reg.n_features_in_ == 2 and reg.n_outputs_ == targets.shape[1]


def test_regressor_learns_the_memory_task():
    X, Y = _memory_task(6)
    reg = make_pipeline(StandardScaler(), ESNRegressor(**REG))
    reg.fit(X[:N_FIT], Y[:N_FIT])
    # the test rows continue the series: predict all rows, score the last ones
    pred = reg.predict(X)[N_FIT:]
    assert r2_score(Y[N_FIT:], pred) > 0.9
    # a constant (the training mean) scores about 0
    mean = np.broadcast_to(Y[:N_FIT].mean(0), pred.shape)
    assert r2_score(Y[N_FIT:], mean) < 0.05


def test_regressor_score_leaves_out_the_warm_up_rows():
    """score is R² after the first spinup rows, which fit leaves out too:
    with orc's default hyperparameters the transient from the zero state
    dominates the R² of all rows."""
    X, Y = _memory_task(22)
    reg = ESNRegressor(res_dim=40, spinup=20).fit(X[:N_FIT], Y[:N_FIT])
    pred = reg.predict(X[N_FIT:])
    expected = r2_score(Y[N_FIT + 20 :], pred[20:])
    assert reg.score(X[N_FIT:], Y[N_FIT:]) == pytest.approx(expected, rel=1e-12)
    assert expected > 0.5 > r2_score(Y[N_FIT:], pred)

    weights = np.random.default_rng(22).uniform(size=N_SAMPLES - N_FIT)
    weighted = r2_score(Y[N_FIT + 20 :], pred[20:], sample_weight=weights[20:])
    assert reg.score(X[N_FIT:], Y[N_FIT:], weights) == pytest.approx(weighted)
    with pytest.raises(ValueError, match=r"more rows than spinup \(20\)"):
        reg.score(X[:20], Y[:20])
    with pytest.raises(ValueError, match="y must have one row per row of X"):
        reg.score(X[N_FIT:], Y[N_FIT + 1 :])


def test_transformer_states_and_ridge_are_the_regressor():
    """``ESNTransformer`` returns the orc regressor's states (its ``force``
    from the zero state); scikit-learn's own ``Ridge`` (unpenalised
    intercept, ``alpha = beta``) on them predicts what :class:`ESNRegressor`
    does: its ridge with an unpenalised bias, solved by orc."""
    from sklearn.linear_model import Ridge

    X, Y = _memory_task(7)
    hyper = {k: v for k, v in REG.items() if k != "spinup"}
    esn = ESNTransformer(**hyper, seed=3).fit(X[:N_FIT])
    states = esn.transform(X[:N_FIT])
    model = orc_regression.ESNRegressor(in_dim=2, out_dim=1, **hyper, seed=3)
    direct = np.asarray(
        model.force(jax.device_put(X[:N_FIT]), model.driver.default_state())
    )
    np.testing.assert_array_equal(states, direct)
    assert states.shape == (N_FIT, 40)
    assert list(esn.get_feature_names_out()[:2]) == [
        "esntransformer0",
        "esntransformer1",
    ]

    pipe = make_pipeline(ESNTransformer(**hyper, seed=3), Ridge(alpha=1e-5))
    pipe.fit(X[:N_FIT], Y[:N_FIT])
    reg = ESNRegressor(**hyper, seed=3, beta=1e-5).fit(X[:N_FIT], Y[:N_FIT])
    np.testing.assert_allclose(pipe.predict(X), reg.predict(X), rtol=1e-6, atol=1e-6)


def test_transformer_gives_any_classifier_a_memory():
    """reservoirpy's ScikitLearnNode: a scikit-learn classifier on the
    states. The label of step ``t`` is the sign of the input three steps
    earlier: logistic regression on the input alone guesses (about 50%), on
    the states it recalls."""
    from sklearn.linear_model import LogisticRegression

    u = np.random.default_rng(8).choice([-1.0, 1.0], (N_SAMPLES + 3, 1))
    X, labels = u[3:], (u[:-3, 0] > 0).astype(int)
    plain = LogisticRegression().fit(X[:N_FIT], labels[:N_FIT])
    assert plain.score(X[N_FIT:], labels[N_FIT:]) < 0.6
    esn = make_pipeline(ESNTransformer(**{k: v for k, v in REG.items() if k != "spinup"}),
                        LogisticRegression(max_iter=1000))  # fmt: skip
    esn.fit(X[:N_FIT], labels[:N_FIT])
    accuracy = np.mean(esn.predict(X)[N_FIT:] == labels[N_FIT:])
    assert accuracy > 0.95


# --- layouts, labels, dtype ------------------------------------------------------


def test_channels_last_is_the_transposed_layout():
    X, y = _waves(7, n_channels=2)
    X_test, _ = _waves(8, n_channels=2)
    aeon = ESNClassifier(**CLF).fit(X, y)
    orc_layout = ESNClassifier(**CLF, channels_last=True)
    orc_layout.fit(X.transpose(0, 2, 1), y)
    np.testing.assert_array_equal(
        aeon.predict_proba(X_test),
        orc_layout.predict_proba(X_test.transpose(0, 2, 1)),
    )
    sizes = (2, N_TIMEPOINTS)
    assert (aeon.n_channels_, aeon.n_timepoints_) == sizes
    assert (orc_layout.n_channels_, orc_layout.n_timepoints_) == sizes
    assert (aeon.n_features_in_, orc_layout.n_features_in_) == sizes


def test_two_dimensional_X_is_one_channel():
    X, y = _waves(9)
    flat = ESNClassifier(**CLF).fit(X, y)
    one_channel = ESNClassifier(**CLF).fit(X[:, None, :], y)
    assert flat.n_channels_ == 1 and flat.n_features_in_ == N_TIMEPOINTS
    np.testing.assert_array_equal(flat.predict_proba(X), one_channel.predict_proba(X))
    # a fitted classifier takes either form of one-channel series
    np.testing.assert_array_equal(
        flat.predict_proba(X[:, None, :]), flat.predict_proba(X)
    )


@pytest.mark.parametrize(
    "names",
    [
        np.array(["square", "sine"]),
        np.array([10, -3]),
        np.array([True, False]),
    ],
    ids=["str", "int", "bool"],
)
def test_labels_of_any_type_round_trip(names):
    X, waves = _waves(10)
    y = np.where(waves == "square", names[0], names[1])
    clf = ESNClassifier(**CLF).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, np.unique(names))
    pred = clf.predict(X)
    assert pred.dtype == y.dtype
    np.testing.assert_array_equal(pred, y)  # a separable task, fitted exactly
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], pred)


def test_three_classes_and_list_input():
    X, y = _waves(11)
    rng = np.random.default_rng(11)
    y[rng.permutation(N_SERIES)[: N_SERIES // 3]] = "noise"  # a third class
    X = np.where((y == "noise")[:, None], rng.normal(size=X.shape), X)
    clf = ESNClassifier(**CLF).fit(X.tolist(), list(y))
    assert list(clf.classes_) == ["noise", "sine", "square"]
    proba = clf.predict_proba(X)
    assert proba.shape == (N_SERIES, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert clf.score(X, y) > 0.9


def test_classifier_learns_sine_versus_square():
    X, y = _waves(12)
    X_test, y_test = _waves(13)
    clf = ESNClassifier(**CLF).fit(X, y)
    assert np.mean(y_test == "sine") > 0.3  # both classes are in the test set
    assert clf.score(X_test, y_test) > 0.9  # chance is about 0.5


def _early_frequency(seed, n=80, length=100):
    """Classes told apart by the first half of each series only: a sine of
    frequency 0.05 or 0.15 (random phase, noise), then white noise; each
    series standardised on its own."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    half = np.arange(length // 2)
    freq = np.where(y == 1, 0.15, 0.05)[:, None]
    X = rng.normal(size=(n, length))
    wave = np.sin(2 * np.pi * freq * half + rng.uniform(0, 2 * np.pi, (n, 1)))
    X[:, : length // 2] = 1.4 * wave + 0.3 * rng.normal(size=(n, length // 2))
    return (X - X.mean(1, keepdims=True)) / X.std(1, keepdims=True), y


def test_default_classifier_reads_the_whole_series():
    """The estimator's own defaults (its declared recipe) against ORC 0.4's,
    which the orc classifier keeps: ORC's final state of a fading-memory
    reservoir has forgotten the first half, where the classes differ, and
    stays near chance; the recipe's state statistics over the series and
    over its reverse see it."""
    from orc._defaults import ESN

    X, y = _early_frequency(0)
    X_test, y_test = _early_frequency(100)
    assert 0.3 < y_test.mean() < 0.7
    orc04 = dict(leak_rate=ESN.leak_rate, embedding_scaling=ESN.embedding_scaling,
                 Wr_density=ESN.Wr_density, Wr_spectral_radius=ESN.Wr_spectral_radius,
                 state_repr="final", input_differences=False, input_lags=(),
                 spinup=0, beta=ESN.beta)  # fmt: skip
    assert ESNClassifier(res_dim=50).fit(X, y).score(X_test, y_test) >= 0.95
    assert ESNClassifier(res_dim=50, **orc04).fit(X, y).score(X_test, y_test) <= 0.7


def test_dtype_follows_jax_and_the_dtype_parameter():
    X, y = _waves(14)
    default = ESNClassifier(**CLF).fit(X, y)
    assert default.model_.dtype == jnp.asarray(0.0).dtype  # x64 is on in tests
    single = ESNClassifier(**CLF, dtype="float32").fit(X, y)
    assert single.model_.dtype == jnp.float32
    assert single.predict_proba(X).dtype == np.float32
    U, Z = _memory_task(14)
    reg = ESNRegressor(**REG, dtype=np.float32).fit(U[:N_FIT], Z[:N_FIT])
    assert reg.model_.dtype == jnp.float32
    assert reg.predict(U[N_FIT:]).dtype == np.float32


def test_predictions_are_writeable_copies():
    X, y = _waves(15)
    proba = ESNClassifier(**CLF).fit(X, y).predict_proba(X)
    proba[:, 0] = 0.0  # numpy code may modify what predict returns
    U, Z = _memory_task(15)
    pred = ESNRegressor(**REG).fit(U[:N_FIT], Z[:N_FIT]).predict(U[N_FIT:])
    pred += 1.0


# --- scikit-learn's machinery ------------------------------------------------------


def _per_series_standardise(X):
    """Each series scaled to mean 0 and standard deviation 1 over time."""
    X = np.asarray(X, dtype=float)
    mean = X.mean(axis=-1, keepdims=True)
    return (X - mean) / X.std(axis=-1, keepdims=True)


def test_classifier_in_a_pipeline_with_cross_validation():
    # 3 folds of 60 series: fits on N_SERIES series
    X, y = _waves(16, n=N_SERIES * 3 // 2)
    X = 4.0 * X + np.random.default_rng(16).normal(0, 3, (len(X), 1))  # offsets
    pipe = make_pipeline(
        FunctionTransformer(_per_series_standardise), ESNClassifier(**CLF)
    )
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(pipe, X, y, cv=cv)

    # the same folds, by hand
    by_hand = []
    for train, test in cv.split(X, y):
        clf = ESNClassifier(**CLF).fit(_per_series_standardise(X[train]), y[train])
        by_hand.append(clf.score(_per_series_standardise(X[test]), y[test]))
    np.testing.assert_allclose(scores, by_hand)
    assert scores.min() > 0.8


def test_regressor_in_a_pipeline_with_time_series_cross_validation():
    X, Y = _memory_task(17)
    pipe = make_pipeline(StandardScaler(), ESNRegressor(**REG))
    cv = TimeSeriesSplit(3)
    scores = cross_val_score(pipe, X, Y, cv=cv)

    by_hand = []
    for train, test in cv.split(X):
        scaler = StandardScaler().fit(X[train])
        reg = ESNRegressor(**REG).fit(scaler.transform(X[train]), Y[train])
        pred = reg.predict(scaler.transform(X[test]))
        skip = REG["spinup"]  # score leaves out the warm-up rows
        by_hand.append(r2_score(Y[test][skip:], pred[skip:]))
    np.testing.assert_allclose(scores, by_hand)
    assert scores.min() > 0.8


def test_grid_search_with_numpy_hyperparameters():
    """A grid of numpy integers (np.arange) reaches the compiled programs
    as static Python ints."""
    X, y = _waves(18)
    # spinup 2 (the best, the first of equal scores) and CLF's 5, whose
    # programs on folds of 20 series the cross-validation test compiles too
    grid = {"spinup": np.arange(2, 8, 3)}
    search = GridSearchCV(ESNClassifier(**CLF), grid, cv=2, error_score="raise")
    search.fit(X, y)
    assert isinstance(search.best_params_["spinup"], np.integer)
    best = ESNClassifier(**CLF).set_params(spinup=int(search.best_params_["spinup"]))
    np.testing.assert_array_equal(
        search.predict_proba(X), best.fit(X, y).predict_proba(X)
    )


@pytest.mark.parametrize("Estimator", [ESNClassifier, ESNRegressor])
def test_clone_get_params_set_params(Estimator):
    hyper = CLF if Estimator is ESNClassifier else REG
    hyper = {name: value for name, value in hyper.items() if name != "beta"}
    est = Estimator(**hyper, seed=4, beta=1e-4)
    params = est.get_params()
    assert set(params) == set(inspect.signature(Estimator).parameters)
    assert {k: params[k] for k in hyper} == hyper
    assert (params["seed"], params["beta"]) == (4, 1e-4)

    X, y = _waves(19)
    X_fit, y_fit = X, y
    if Estimator is ESNRegressor:  # fitted on the first N_FIT rows, as elsewhere
        X, y = _memory_task(19)
        X_fit, y_fit = X[:N_FIT], y[:N_FIT]
    est.fit(X_fit, y_fit)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    assert not hasattr(twin, "model_")  # clone copies parameters, not the fit
    with pytest.raises(NotFittedError):
        twin.predict(X)
    # a clone refits to the same model
    np.testing.assert_array_equal(twin.fit(X_fit, y_fit).predict(X), est.predict(X))

    assert twin.set_params(res_dim=30, seed=5) is twin
    assert est.get_params()["res_dim"] == hyper["res_dim"]  # original untouched
    assert twin.fit(X_fit, y_fit).model_.res_dim == 30
    with pytest.raises(ValueError, match="Invalid parameter 'not_a_parameter'"):
        twin.set_params(not_a_parameter=1)


# --- errors -------------------------------------------------------------------------


def test_classifier_errors_name_the_argument():
    X, y = _waves(20)
    clf = ESNClassifier(**CLF)
    with pytest.raises(ValueError, match=r"X must be 2-D \(n_series, n_timepoints\)"):
        clf.fit(X[:, 0], y)  # one value per series
    with pytest.raises(ValueError, match=r"got 4-D X of shape \(40, 1, 30, 1\)"):
        clf.fit(X[:, None, :, None], y)
    with pytest.raises(ValueError, match="y must hold at least 2 classes"):
        clf.fit(X, np.full(N_SERIES, "sine"))
    with pytest.raises(NotFittedError):
        clf.predict(X)

    clf.fit(X, y)
    with pytest.raises(ValueError, match="got 1-D X of shape"):
        clf.predict(X[0])
    with pytest.raises(
        ValueError, match="series of 20 time points.*fitted on 30 time points"
    ):
        clf.predict(X[:, :20])
    with pytest.raises(ValueError, match="2 channels.*fitted on 30 time points and 1"):
        clf.predict(np.stack([X, X], axis=1))
    # channels_last: the same mismatch is reported in the same terms
    last = ESNClassifier(**CLF, channels_last=True).fit(X[:, :, None], y)
    with pytest.raises(
        ValueError, match=r"n_timepoints, n_channels\) with channels_last"
    ):
        last.predict(X[:, :20, None])
    with pytest.raises(ValueError, match=r"spinup \(30\) must be less than"):
        ESNClassifier(**dict(CLF, spinup=30)).fit(X, y)


def test_regressor_errors_name_the_argument():
    X, Y = _memory_task(21)
    X, Y = X[:N_FIT], Y[:N_FIT]
    reg = ESNRegressor(**REG)
    with pytest.raises(ValueError, match=r"X must be 2-D \(n_samples, n_features\)"):
        reg.fit(X[:, 0], Y[:, 0])
    with pytest.raises(ValueError, match="X.reshape\\(-1, 1\\) is one feature"):
        reg.fit(X[:, 0], Y[:, 0])
    with pytest.raises(ValueError, match="got 3-D X"):
        reg.fit(X[:, :, None], Y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        reg.fit(X, Y[:-1])
    reg.fit(X, Y)
    with pytest.raises(
        ValueError, match="X has 1 features, but ESNRegressor is expecting 2"
    ):
        reg.predict(X[:, :1])
    with pytest.raises(ValueError, match="got a scalar"):
        reg.predict(1.0)
    with pytest.raises(ValueError, match=r"spinup \(300\) must be less than"):
        ESNRegressor(**dict(REG, spinup=N_FIT)).fit(X, Y)


# --- optional import ------------------------------------------------------------

# The three checks run in one fresh Python process, one after the other: the
# first (what a plain ``import orc`` leaves in sys.modules) before anything
# else is imported; then ``import orc.sklearn`` with scikit-learn made
# missing, then made too old (a failed import leaves no ``orc.sklearn`` in
# sys.modules, so each attempt runs the module afresh). One process instead
# of three saves two start-ups and imports of orc (~2 s each).
_OPTIONAL_IMPORT = """
import json
import sys
import types

import orc

orc.classifier, orc.regression  # the modules orc.sklearn wraps
found = {"sklearn imported by orc": "sklearn" in sys.modules}
fakes = {
    "missing": None,  # as if scikit-learn were not installed
    "1.5.2": types.SimpleNamespace(__version__="1.5.2"),
}
for case, fake in fakes.items():
    sys.modules["sklearn"] = fake
    try:
        import orc.sklearn
    except ImportError as err:
        found[case] = str(err)
    else:  # imported: reported, and removed for the next case
        found[case] = None
        del sys.modules["orc.sklearn"]
print(json.dumps(found))
"""


@functools.cache
def _optional_import():
    """What the child process above found, and its exit status and stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", _OPTIONAL_IMPORT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = json.loads(proc.stdout) if proc.returncode == 0 else None
    return proc.returncode, proc.stderr, found


def test_import_orc_does_not_import_sklearn():
    returncode, stderr, found = _optional_import()
    assert returncode == 0, stderr
    assert not found["sklearn imported by orc"], "import orc imported sklearn"


def test_orc_sklearn_without_scikit_learn_says_how_to_install_it():
    returncode, stderr, found = _optional_import()
    assert returncode == 0, stderr
    assert found["missing"] is not None, "orc.sklearn imported without scikit-learn"
    assert "pip install 'orc[sklearn]'" in found["missing"]


def test_orc_sklearn_refuses_an_old_scikit_learn():
    returncode, stderr, found = _optional_import()
    assert returncode == 0, stderr
    assert found["1.5.2"] is not None, "orc.sklearn imported with scikit-learn 1.5.2"
    assert "scikit-learn >= 1.6" in found["1.5.2"] and "1.5.2" in found["1.5.2"]
