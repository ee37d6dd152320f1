"""Hyperparameter search as one compiled program.

A search builds, trains and scores a whole population of candidates:

>>> U, t = orc.data.lorenz63(tN=250, dt=0.01)
>>> task = orc.tune.Forecast(U[:20000], U[20000:], horizon=1000, windows=10,
...                          dt=0.01, lyapunov_exponent=0.906)
>>> result = orc.tune.search(
...     orc.forecaster.ESNForecaster,
...     {"Wr_spectral_radius": orc.tune.Uniform(0.2, 1.4),
...      "leak_rate": orc.tune.Uniform(0.1, 1.0),
...      "embedding_scaling": orc.tune.LogUniform(0.01, 1.0),
...      "bias": orc.tune.Uniform(0.0, 2.0)},
...     task, fixed={"data_dim": 3, "res_dim": 500},
...     draws=8, seeds=4, beta=orc.tune.LogUniform(1e-10, 1e-3))
>>> result.best, result.best_model       # a row, an ordinary trained model
>>> result.to_csv("search.csv"); result.plot("search.png")

A task says what is trained and how it is scored: :class:`Forecast`
(valid prediction time or NRMSE over held-out validation windows, for a
forecaster), :class:`Classify` (accuracy on held-out labelled sequences,
for a classifier such as :class:`orc.classifier.ESNClassifier`),
:class:`Regress` (NRMSE of the predicted held-out output, for a regressor
such as :class:`orc.regression.ESNRegressor`). Each trains its candidates
with its public trainer's problem, so ``best_model`` is what that trainer
gives for the best hyperparameters and strength:

>>> task = orc.tune.Classify(train_seqs, train_labels, val_seqs, val_labels)
>>> result = orc.tune.search(
...     orc.classifier.ESNClassifier,
...     {"Wr_spectral_radius": orc.tune.Uniform(0.2, 1.4),
...      "leak_rate": orc.tune.Uniform(0.1, 1.0)},
...     task, fixed={"data_dim": 3, "n_classes": 4, "res_dim": 200},
...     draws=16, beta=orc.tune.LogUniform(1e-8, 1e-1))

What candidates share is computed once: the candidates of one seed and one
draw differ only in the ridge strength, so the reservoir runs once and its
statistics solve every strength (:class:`orc._fit.RidgePath`: one Cholesky
solve per strength, the same bits as training with that strength); the validation forecasts of all strengths and
windows run as one batched closed loop. Candidates that differ in the
continuous hyperparameters (:class:`Uniform`, :class:`LogUniform`) and the
seed are one compiled program; each value of a static one (:class:`IntUniform`,
:class:`Choice`: a reservoir size, a density) compiles its own. A candidate
that fails (statistics that overflow, a forecast that diverges) is a row
with ``status="failed"`` and its reason; it never stops the search nor
changes another candidate's score.

:func:`refine` then refines the continuous hyperparameters of the best
candidates by gradient descent (optax, the ``orc[tune]`` extra) through the
build, the training and its ridge solve, on a short closed-loop plus
one-step validation loss.

Which sampler: ``"sobol"`` (the default) spreads a small budget evenly over
the space, best with ``draws`` a power of 2; ``"random"`` when draws are
added one batch at a time.

An Optuna study (``pip install "orc[tune]"``; ``import orc.tune`` never
needs Optuna): :func:`study` asks Optuna's TPE, CMA-ES or random sampler for
``batch`` draws at a time, evaluates them with one :func:`search` call and
tells each its best score over seeds and ridge strengths. It lives in
memory unless ``storage`` names an SQLite file (``"results/study.db"``) or
a database URL (PostgreSQL, for many workers); a stored study resumes where
it stopped, and a trial whose worker was killed is retried:

>>> res = orc.tune.study(orc.forecaster.ESNForecaster, space, task,
...                      fixed={"data_dim": 3, "res_dim": 500}, seeds=2,
...                      beta=orc.tune.LogUniform(1e-10, 1e-3), n_trials=64,
...                      storage="results/study.db", study_name="lorenz")
>>> res.study.best_value == res.best["score"]
True
"""

from ._refine import RefineResult, refine
from ._search import SearchResult, search
from ._space import Choice, IntUniform, LogUniform, Uniform
from ._study import StudyResult, study
from ._task import Classify, Forecast, Regress

__all__ = [
    "search",
    "SearchResult",
    "study",
    "StudyResult",
    "refine",
    "RefineResult",
    "Forecast",
    "Classify",
    "Regress",
    "Uniform",
    "LogUniform",
    "IntUniform",
    "Choice",
]
