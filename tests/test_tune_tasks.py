"""orc.tune.Classify and orc.tune.Regress: each candidate's score against an
independent computation (the public trainer, then the accuracy or the NRMSE
in NumPy), the best model against the public trainer's, failures as data,
bad task arguments refused by name.

Small on purpose (20-node reservoirs, a few short sequences). A search's
compiled program is fixed by its task, model and shape (a call's row holds
a seed's draws, up to 8; 2 ridge strengths here), so the searches of one
task use two: three draws a row (the module's searches, the planted
overflow's batch, the study's batch) and one (a candidate searched
alone)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import assert_batched, lorenz_rk4
from orc.classifier import ESNClassifier, train_RCClassifier
from orc.forecaster import ESNForecaster
from orc.regression import ESNRegressor, train_RCRegressor
from orc.tune import Classify, LogUniform, Regress, Uniform

SPACE = {
    "Wr_spectral_radius": Uniform(0.3, 1.2),
    "leak_rate": Uniform(0.3, 1.0),
    "embedding_scaling": LogUniform(0.05, 1.0),
}
BETA = LogUniform(1e-6, 1e-1)
SPINUP = 4


def _sequences(rng, n, length):
    """``n`` noisy two-channel oscillations whose frequency is the class."""
    labels = rng.integers(0, 3, n)
    t = 0.3 * np.arange(length)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    w = (1.0 + labels)[:, None]
    x = np.stack([np.sin(w * t + phase), np.cos(w * t)], axis=-1)
    return x + 0.3 * rng.standard_normal(x.shape), labels


_RNG = np.random.default_rng(7)
X_TRAIN, Y_TRAIN = _sequences(_RNG, 18, 24)
X_VAL, Y_VAL = _sequences(_RNG, 9, 20)  # another length than training's
CLF = {"data_dim": 2, "n_classes": 3, "res_dim": 20, "state_repr": "mean"}

U = np.asarray(lorenz_rk4(1600))
REG_DATA = (U[:1000, :2], U[:1000, 2:], U[1000:, :2], U[1000:, 2:])
REG = {"in_dim": 2, "out_dim": 1, "res_dim": 20}


def _classify_task():
    return Classify(X_TRAIN, Y_TRAIN, X_VAL, Y_VAL, spinup=SPINUP)


def _regress_task():
    return Regress(*REG_DATA, spinup=50, warmup=30)


def _model(cls, fixed, row):
    kw = dict(fixed, **{n: row[n] for n in SPACE})
    return cls(**kw, seed=row["seed"], construction="jax")


def _public_classifier(row):
    return train_RCClassifier(
        _model(ESNClassifier, CLF, row), X_TRAIN, Y_TRAIN, SPINUP, row["beta"]
    )


def _accuracy(model):
    """The public API's accuracy: classify each validation sequence, NumPy
    argmax against the labels."""
    probs = jax.vmap(lambda s: model.classify(s, None, SPINUP))(jnp.asarray(X_VAL))
    return float(np.mean(np.argmax(np.asarray(probs), axis=1) == Y_VAL))


def _public_regressor(row):
    model, _ = train_RCRegressor(
        _model(ESNRegressor, REG, row), REG_DATA[0], REG_DATA[1], spinup=50,
        beta=row["beta"],
    )  # fmt: skip
    return model


def _nrmse(model):
    """The public API's NRMSE: predict, then NumPy over the scored rows."""
    pred = np.asarray(model.predict(REG_DATA[2]))[30:]
    truth = REG_DATA[3][30:]
    return float(np.sqrt(np.mean((pred - truth) ** 2)) / np.std(truth))


def _same_bits(a, b):
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def clf_search():
    return orc.tune.search(
        ESNClassifier, SPACE, _classify_task(), fixed=CLF, draws=3, seeds=2,
        beta=BETA, ridge_points=2,
    )  # fmt: skip


@pytest.fixture(scope="module")
def reg_search():
    return orc.tune.search(
        ESNRegressor, SPACE, _regress_task(), fixed=REG, draws=3, seeds=1,
        beta=BETA, ridge_points=2,
    )  # fmt: skip


def test_classify_scores_are_the_public_accuracy(clf_search):
    res = clf_search
    assert len(res.rows) == 2 * 3 * 2
    assert res.metric == "accuracy" and res.higher_is_better
    assert "accuracy" in res.columns
    for row in res.rows[:2] + res.rows[-2:]:
        assert row["status"] == "ok", row
        # a count of right answers: the same classes, the same fraction
        assert row["score"] == _accuracy(_public_classifier(row))
    assert res.best["score"] == max(r["score"] for r in res.rows)
    assert res.best["score"] > 1 / 3  # above chance
    curve = res.best_so_far()
    assert np.all(np.diff(curve) >= 0)  # accuracy: the best so far only rises


def test_classify_best_model_is_the_public_trainers(clf_search):
    model = clf_search.best_model
    assert isinstance(model, ESNClassifier)
    # the same solve (one Cholesky solve of the same statistics): every
    # leaf bit for bit
    _same_bits(model, _public_classifier(clf_search.best))


def test_regress_scores_are_the_public_nrmse(reg_search):
    res = reg_search
    assert len(res.rows) == 3 * 2
    assert res.metric == "nrmse" and not res.higher_is_better
    for row in res.rows:
        assert row["status"] == "ok", row
        # jnp's reductions and NumPy's sum in another order: a few ulps
        assert_batched(
            row["score"], _nrmse(_public_regressor(row)), cpu={"rtol": 1e-12}
        )
    assert res.best["score"] == min(r["score"] for r in res.rows)


def test_regress_best_model_is_the_public_trainers(reg_search):
    model = reg_search.best_model
    assert isinstance(model, ESNRegressor)
    # its readout bias unpenalised, as train_RCRegressor solves it
    _same_bits(model, _public_regressor(reg_search.best))


@pytest.mark.parametrize("which", ["classify", "regress"])
def test_a_planted_overflow_fails_alone(which):
    # a leak rate of 1e308 overflows the states ((1 - a) r = -inf after two
    # steps; a saturating input scaling would not: tanh(inf) = 1)
    if which == "classify":
        cls, task, fixed = ESNClassifier, _classify_task(), CLF
    else:
        cls, task, fixed = ESNRegressor, _regress_task(), REG
    good = {"Wr_spectral_radius": 0.9, "embedding_scaling": 0.3}
    points = [dict(good, leak_rate=a) for a in (0.5, 1e308, 0.8)]
    # three draws in one row: the program of the task's search above
    # (clf_search, reg_search)
    res = orc.tune.search(
        cls, SPACE, task, fixed=fixed, points=points, beta=BETA, ridge_points=2
    )
    failed = [r for r in res.rows if r["status"] == "failed"]
    assert [r["leak_rate"] for r in failed] == [1e308, 1e308]
    for row in failed:
        assert "not finite" in row["reason"] and np.isnan(row["score"])
    # its neighbours: the same bits as each searched alone
    for p in (points[0], points[2]):
        alone = orc.tune.search(
            cls, SPACE, task, fixed=fixed, points=[p], beta=BETA, ridge_points=2
        )
        mine = [r for r in res.rows if r["leak_rate"] == p["leak_rate"]]
        assert [r["status"] for r in mine] == ["ok", "ok"]
        assert_batched([r["score"] for r in mine], [r["score"] for r in alone.rows])
    assert res.best["leak_rate"] != 1e308


def test_tasks_take_their_trainers_default_beta():
    assert Classify.default_beta == 8e-8  # train_RCClassifier's
    assert Regress.default_beta == 1e-6  # train_RCRegressor's


def test_a_study_runs_a_classify_task(clf_search):
    pytest.importorskip("optuna", reason='needs pip install "orc[tune]"')
    # a batch of three trials is one search of three draws: clf_search's program
    res = orc.tune.study(
        ESNClassifier, SPACE, _classify_task(), fixed=CLF, seeds=1, beta=BETA,
        ridge_points=2, sampler="random", n_trials=3, batch=3, progress=False,
    )  # fmt: skip
    assert res.study.direction.name == "MAXIMIZE"
    assert res.study.best_value == res.best["score"]
    assert res.best["score"] == _accuracy(_public_classifier(res.best))


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: Classify(X_TRAIN[0], Y_TRAIN, X_VAL, Y_VAL), ValueError,
         r"train must be 3-D"),
        (lambda: Classify(X_TRAIN, Y_TRAIN.astype(float), X_VAL, Y_VAL), TypeError,
         "labels must be integers"),
        (lambda: Classify(X_TRAIN, Y_TRAIN[:-1], X_VAL, Y_VAL), ValueError,
         r"labels must have one entry per sequence \(18\), got 17"),
        (lambda: Classify(X_TRAIN, None, X_VAL, Y_VAL), TypeError,
         "labels must be an integer array"),
        (lambda: Classify(X_TRAIN, Y_TRAIN, X_VAL, Y_VAL[:, None]), ValueError,
         "validation_labels must be 1-D"),
        (lambda: Classify(X_TRAIN, Y_TRAIN, X_VAL, -Y_VAL - 1), ValueError,
         "validation_labels must be class indices >= 0"),
        (lambda: Classify(X_TRAIN, Y_TRAIN, X_VAL[..., :1], Y_VAL), ValueError,
         "validation must have train's 2 columns"),
        (lambda: Classify(X_TRAIN, Y_TRAIN, X_VAL, Y_VAL, spinup=20), ValueError,
         r"spinup \(20\) must be less than the shortest sequence's length \(20\)"),
        (lambda: Classify(X_TRAIN, Y_TRAIN, X_VAL * np.nan, Y_VAL), Exception,
         "validation contains NaN"),
        (lambda: Regress(U[:100, :2], U[:99, 2:], U[100:, :2], U[100:, 2:],
                         spinup=10, warmup=10), ValueError,
         "train_out must have train_in's 100 rows"),
        (lambda: Regress(U[:100, :2], U[:100, 2:], U[100:, :1], U[100:, 2:],
                         spinup=10, warmup=10), ValueError,
         "validation_in must have train_in's 2 columns"),
        (lambda: Regress(U[:100, :2], U[:100, 2:], U[100:, :2], U[100:, 1:],
                         spinup=10, warmup=10), ValueError,
         "validation_out must have train_out's 1 columns"),
        (lambda: Regress(U[None, :100, :2], U[:100, 2:], U[100:, :2], U[100:, 2:]),
         ValueError, "train_in must be 2-D"),
        (lambda: Regress(U[:100, :2], U[:100, 2:], U[100:, :2], U[100:, 2:],
                         spinup=100), ValueError, r"spinup \(100\) must be less"),
        (lambda: Regress(U[:100, :2], U[:100, 2:], U[100:110, :2], U[100:110, 2:],
                         spinup=10, warmup=9), ValueError,
         "warmup .9. must leave at least two validation samples"),
        (lambda: Regress(U[:100, :2], U[:100, 2:] > 0, U[100:, :2], U[100:, 2:]),
         TypeError, "train_out must hold real numbers"),
    ],
)  # fmt: skip
def test_bad_task_arguments_are_refused_by_name(make, error, words):
    with pytest.raises(error, match=words):
        make()


@pytest.mark.parametrize(
    "cls, task, fixed, error, words",
    [
        (ESNForecaster, _classify_task, {"data_dim": 2, "res_dim": 20}, TypeError,
         "model_class must be a classifier class for an orc.tune.Classify task"),
        (ESNClassifier, _regress_task, REG, TypeError,
         "model_class must be a regressor class"),
        (ESNClassifier, _classify_task, dict(CLF, n_classes=2), ValueError,
         r"n_classes 2, but the task's labels hold class 2"),
        (ESNClassifier, _classify_task, dict(CLF, data_dim=3), ValueError,
         "data_dim 3, but the task's train has 2 columns"),
        (ESNRegressor, _regress_task, dict(REG, out_dim=2), ValueError,
         "out_dim 2, but the task's train_out has 1 columns"),
    ],
)  # fmt: skip
def test_a_model_that_does_not_fit_the_task_is_refused(cls, task, fixed, error, words):
    with pytest.raises(error, match=words):
        orc.tune.search(cls, SPACE, task(), fixed=fixed, draws=1)
