"""What a search optimises: a task holds the data, trains one built candidate
for every ridge strength of the search and scores the trained strengths (a
population of candidates, under ``vmap``). :mod:`._population` runs any task
the same way; a task decides the training problem and the score.

:class:`Forecast`: train on ``train``, then forecast ``windows`` windows of
``horizon`` samples of the held-out ``validation`` sequence in closed loop,
each from the state of the reservoir teacher-forced with the validation data
up to the window's start (at least ``warmup`` samples), and score them by
valid prediction time or NRMSE against the training data's scale.

:class:`Classify`: train a classifier on labelled sequences, score it by its
accuracy on held-out labelled sequences.

:class:`Regress`: train a regressor on an input and an output sequence,
score it by the NRMSE of its predictions of the held-out output.

Each trains its candidates with the problem object its public trainer
builds, solved by :class:`orc._fit.RidgePath` (every strength from one set
of statistics, each with the bits of a training with that strength alone),
so a candidate is what the public trainer gives for its hyperparameters and
strength.
"""

from __future__ import annotations

import abc
import inspect
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .. import metrics
from .._defaults import SCORING, TUNE
from .._fit import Options, RidgePath, fit
from .._kernels import current
from .._validation import (
    check_data,
    check_finite_rows,
    check_int,
    check_rank,
    check_spinup,
)
from ..classifier.base import RCClassifierBase
from ..classifier.train import (
    Classification,
    check_labels,
    check_sequences,
    train_RCClassifier,
)
from ..forecaster.base import RCForecasterBase
from ..forecaster.train import Forecasting, train_RCForecaster
from ..regression import RCRegressorBase, Regression, train_RCRegressor

__all__ = ["AbstractTask", "Forecast", "Classify", "Regress", "METRICS", "member"]

#: The name a search's errors carry.
OWNER = "orc.tune.search"

#: Every task's score, and whether a larger one is better.
HIGHER_IS_BETTER = {"vpt": True, "nrmse": False, "accuracy": True}

#: Forecast scores: ``"vpt"`` (valid prediction time, higher is better) and
#: ``"nrmse"`` (over the horizon, lower is better).
METRICS = ("vpt", "nrmse")

#: A window whose forecast leaves this many times the training data's scale
#: (or is not finite) counts as diverged: its candidate fails.
DIVERGED_SCALE = 100.0

_HINT = "Remove or interpolate missing samples."


def _default_beta(trainer) -> float:
    """A trainer's default ridge strength, read from its signature (written
    once there): a search that does not vary ``beta`` uses it."""
    return inspect.signature(trainer).parameters["beta"].default


def member(models, i: int):
    """The ``i``-th model of a stack of models (every array leaf with a
    leading axis of candidates, :func:`orc._fit.solved`)."""
    return jax.tree.map(lambda a: a[i] if eqx.is_array(a) else a, models)


def _series(owner: str, **named) -> list:
    """Each of ``named`` as finite data ``(T, D)`` of the default float
    dtype, its name in every refusal."""
    out = []
    for name, x in named.items():
        x = check_data(name, x, owner, jnp.result_type(float))
        x = check_rank(name, x, 2, owner, "(T, D)")
        check_finite_rows(x, name, owner, _HINT)
        out.append(x)
    return out


def _same_columns(owner: str, name: str, x, like: str, y) -> None:
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(
            f"{owner}: {name} must have {like}'s {y.shape[-1]} columns, "
            f"got {x.shape[-1]}"
        )


def _same_rows(owner: str, name: str, x, like: str, y) -> None:
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"{owner}: {name} must have {like}'s {y.shape[0]} rows (one output "
            f"per input), got {x.shape[0]}"
        )


def _check_width(owner, model, what: str, size: int, name: str, columns: int):
    if size != columns:
        raise ValueError(
            f"{owner}: {type(model).__name__} has {what} {size}, but the task's "
            f"{name} has {columns} columns"
        )


def _teacher_forced(model, problem, solver, opts, throw: bool):
    """``(models, result)`` of :func:`orc._fit.fit` (``result`` ``None``
    with ``throw``)."""
    out = fit(model, problem, solver, opts, throw=throw)
    return out[0], (None if throw else out[2])


class AbstractTask(eqx.Module):
    """What a search optimises (final subclasses: :class:`Forecast`,
    :class:`Classify`, :class:`Regress`).

    ``fit(model, betas, throw=, backend=)`` trains one built candidate for
    every ridge strength (a stack of models and, with ``throw=False``, how
    each solve went, nothing raised); ``evaluate(model, models)`` scores
    them: ``(scores, failed)``, one of each per strength, ``failed`` where
    the candidate's outputs fail (:attr:`output_failure` says how).
    """

    metric: eqx.AbstractVar[str]

    #: The model family the task trains, in words and an example class.
    family: ClassVar[type]
    kind: ClassVar[str]
    example: ClassVar[str]
    #: The ridge strength of a search that does not vary it: the public
    #: trainer's default.
    default_beta: ClassVar[float]
    #: Why a candidate whose outputs fail (``evaluate``'s ``failed``) failed.
    output_failure: ClassVar[str]

    @property
    def higher_is_better(self) -> bool:
        return HIGHER_IS_BETTER[self.metric]

    @abc.abstractmethod
    def check_model(self, owner: str, model) -> None:
        """Refuse a model that does not fit the task's data, naming what."""

    @abc.abstractmethod
    def fit(self, model, betas, *, throw: bool = True, backend=None):
        """``(models, result)``: ``model`` trained for each strength in
        ``betas`` by its public trainer's problem, stacked; ``result`` one
        :class:`orc._ridge.RESULTS` per strength with ``throw=False`` (else
        ``None``: a failed solve raised, a fallback warned)."""

    @abc.abstractmethod
    def evaluate(self, model, models):
        """``(scores, failed)`` ``(B,)`` of the trained strengths ``models``
        (a stack, from ``fit(model, ...)``)."""

    @abc.abstractmethod
    def trajectory_bytes(self, model, n_betas: int) -> int:
        """Memory one candidate's training and scoring for ``n_betas``
        strengths hold at once."""


class Forecast(AbstractTask):
    """A forecasting task.

    Candidates are trained as :func:`orc.forecaster.train_RCForecaster`
    trains them; a window whose forecast leaves 100 times the training
    data's scale (or is not finite) fails its candidate.

    Parameters
    ----------
    train : array ``(T, D)``
        The training sequence (teacher forcing, next-sample targets).
    validation : array ``(V, D)``
        Held out for scoring; never used to fit. Windows start at
        ``warmup``, ``warmup + stride``, ... and the last one ends at ``V``.
    spinup : int, optional
        Training pairs discarded (the reservoir's transient).
    warmup : int, optional
        Validation samples forced before the first window.
    horizon : int, default 500
        Samples forecast per window.
    windows : int, default 10
    metric : {"vpt", "nrmse"}, default "vpt"
    threshold : float, optional
        The VPT's error threshold (:func:`orc.metrics.valid_prediction_time`).
    dt : float, default 1.0
    lyapunov_exponent : float, optional
        With it the VPT is in Lyapunov times, else in time units (``dt``).
    """

    train: Array
    validation: Array
    spinup: int = eqx.field(static=True)
    warmup: int = eqx.field(static=True)
    horizon: int = eqx.field(static=True)
    windows: int = eqx.field(static=True)
    metric: str = eqx.field(static=True)
    threshold: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    lyapunov_exponent: float | None = eqx.field(static=True)

    family: ClassVar[type] = RCForecasterBase
    kind: ClassVar[str] = "forecaster"
    example: ClassVar[str] = "orc.forecaster.ESNForecaster"
    default_beta: ClassVar[float] = _default_beta(train_RCForecaster)
    output_failure: ClassVar[str] = (
        "forecast diverged (left 100x the training data's scale)"
    )

    def __init__(
        self,
        train,
        validation,
        *,
        spinup: int = TUNE.spinup,
        warmup: int = TUNE.warmup,
        horizon: int = 500,
        windows: int = 10,
        metric: str = "vpt",
        threshold: float = SCORING.threshold,
        dt: float = 1.0,
        lyapunov_exponent: float | None = None,
    ):
        owner = "orc.tune.Forecast"
        train, validation = _series(owner, train=train, validation=validation)
        _same_columns(owner, "validation", validation, "train", train)
        self.spinup = check_int("spinup", spinup, owner, minimum=0)
        self.warmup = check_int("warmup", warmup, owner, minimum=1)
        self.horizon = check_int("horizon", horizon, owner, minimum=2)
        self.windows = check_int("windows", windows, owner, minimum=1)
        if train.shape[0] < self.spinup + 2:
            raise ValueError(
                f"{owner}: train has {train.shape[0]} samples, fewer than spinup "
                f"({self.spinup}) + 2"
            )
        if validation.shape[0] < self.warmup + self.horizon:
            raise ValueError(
                f"{owner}: validation has {validation.shape[0]} samples, fewer than "
                f"warmup + horizon ({self.warmup} + {self.horizon})"
            )
        if metric not in METRICS:
            raise ValueError(
                f"{owner}: metric must be one of {METRICS}, got {metric!r}"
            )
        self.metric = metric
        self.threshold = float(threshold)
        self.dt = float(dt)
        self.lyapunov_exponent = (
            None if lyapunov_exponent is None else float(lyapunov_exponent)
        )
        self.train, self.validation = train, validation

    @property
    def starts(self) -> np.ndarray:
        """The first validation index of each window."""
        last = self.validation.shape[0] - self.horizon
        return np.unique(
            np.linspace(self.warmup, last, self.windows).round().astype(int)
        )

    def scale(self, dtype) -> Array:
        """The training data's scale: ``sqrt(mean_t ||u_t||^2)`` for the VPT
        (its normalised error), the standard deviation of all entries for
        the NRMSE."""
        u = self.train.astype(dtype)
        if self.metric == "vpt":
            return jnp.sqrt(jnp.mean(jnp.sum(u**2, axis=1)))
        return jnp.std(u)

    def truths(self, dtype) -> Array:
        """``(W, horizon, D)``: what each window should forecast."""
        idx = self.starts[:, None] + np.arange(self.horizon)[None]
        return self.validation.astype(dtype)[idx]

    def score(self, preds: Array, truths: Array, scale: Array):
        """``(score, diverged)`` of one candidate's window forecasts
        ``(W, horizon, D)``: the mean over windows, and whether a window
        left ``DIVERGED_SCALE`` times the data's scale (or is not finite)."""
        # The score is computed apart from what produced its inputs: in a
        # population the data's scale and truths are computed once, before
        # the loop over a seed's draws (loop-invariant), and fused into the
        # score they rounded differently (1 ulp of the NRMSE) from a call of
        # one draw, where nothing is hoisted; apart, the bits do not depend
        # on how many draws a call holds.
        preds, truths, scale = jax.lax.optimization_barrier((preds, truths, scale))
        big = jnp.max(jnp.abs(preds), axis=(1, 2))
        diverged = jnp.any(~(big <= DIVERGED_SCALE * scale))
        if self.metric == "vpt":
            per = jax.vmap(
                lambda p, t: metrics.valid_prediction_time(
                    p,
                    t,
                    self.threshold,
                    self.dt,
                    self.lyapunov_exponent,
                    scale=scale,
                )
            )(preds, truths)
        else:
            per = jax.vmap(lambda p, t: metrics.nrmse(p, t, scale=scale))(preds, truths)
        return jnp.mean(per), diverged

    def check_model(self, owner, model) -> None:
        _check_width(owner, model, "in_dim", model.in_dim, "train", self.train.shape[1])

    def fit(self, model, betas, *, throw=True, backend=None):
        # checked=False (the search): the model's unchecked step, so that a
        # candidate whose states overflow is scored as failed
        problem = Forecasting(owner=OWNER, train_seq=self.train.astype(model.dtype),
                              target_seq=None, force_kwargs={},
                              init=model.driver.default_state(), spinup=self.spinup,
                              multi=False, checked=throw)  # fmt: skip
        opts = Options(keep_states=True, progress=False, backend=backend)
        solver = RidgePath(jnp.asarray(betas, model.dtype))
        return _teacher_forced(model, problem, solver, opts, throw)

    def evaluate(self, model, models):
        dtype = model.dtype
        # every window starts from the state forced with the validation data
        # before it: one teacher-forced pass, shared by every strength
        states = model._advance_seq(
            self.validation.astype(dtype), model.driver.default_state()
        )
        starts = states[np.asarray(self.starts) - 1]
        truths, scale = self.truths(dtype), self.scale(dtype)
        kernels = current()
        if kernels.fuses(model.driver, model.embedding, model.readout):
            # every strength's windows in one closed loop whose steps advance
            # all their states together (natively: one call, each non-zero
            # of the reservoir read once per step for all of them)
            wouts = eqx.filter_vmap(lambda r: r.linear_weights())(models.readout)
            win, window = model.embedding.linear_window()
            preds = model.driver._closed_loops_linear(
                kernels, win, window, wouts, starts, self.horizon
            )
            return jax.vmap(lambda p: self.score(p, truths, scale))(preds)

        def per_strength(readout):
            m = model.set_readout(readout)
            preds = jax.vmap(lambda r: m._closed_loop_scan(self.horizon, r))(starts)
            return self.score(preds, truths, scale)

        return eqx.filter_vmap(per_strength)(models.readout)

    def trajectory_bytes(self, model, n_betas: int) -> int:
        """The stored training and validation states, the statistics and
        their factorisation, the weights and the batched forecasts (with
        their states)."""
        item = np.dtype(model.dtype).itemsize
        state = int(np.prod(model.driver.default_state().shape))
        feats = state  # features of a linear readout; a quadratic one as many
        chunks = max(int(getattr(model, "chunks", 1) or 1), 1)
        per_chunk = feats // chunks
        t, v = self.train.shape[0], self.validation.shape[0]
        d = self.train.shape[1]
        w = len(self.starts)
        total = (
            (t + v) * state
            + 4 * chunks * per_chunk**2
            + n_betas * chunks * d * per_chunk
            + n_betas * w * (self.horizon * d + 2 * state)
        )
        return int(total * item)


class Classify(AbstractTask):
    """A classification task: labelled training sequences, scored by the
    accuracy on held-out labelled sequences (higher is better).

    Candidates (any :class:`orc.classifier.RCClassifierBase` built with
    ``construction="jax"``, e.g. :class:`orc.classifier.ESNClassifier`)
    are trained by :func:`orc.classifier.train_RCClassifier`'s problem
    (:class:`orc.classifier.train.Classification`) for one ridge strength
    each; a candidate's score is the fraction of validation sequences
    whose most probable class (``classify``) is their label. Class scores
    that are not finite fail the candidate.

    Parameters
    ----------
    train : array ``(n_train, seq_len, data_dim)``
    labels : int array ``(n_train,)``
        Class indices (``>= 0``; below the model's ``n_classes``).
    validation : array ``(n_validation, validation_len, data_dim)``
        Held out for scoring; never used to fit (its sequences may have
        another length than the training ones).
    validation_labels : int array ``(n_validation,)``
    spinup : int, default 0
        Leading states skipped by the representation
        (:func:`orc.classifier.train_RCClassifier`'s and
        :meth:`~orc.classifier.RCClassifierBase.classify`'s ``spinup``).
    """

    train: Array
    labels: Array
    validation: Array
    validation_labels: Array
    spinup: int = eqx.field(static=True)
    metric: str = eqx.field(static=True)

    family: ClassVar[type] = RCClassifierBase
    kind: ClassVar[str] = "classifier"
    example: ClassVar[str] = "orc.classifier.ESNClassifier"
    default_beta: ClassVar[float] = _default_beta(train_RCClassifier)
    output_failure: ClassVar[str] = "class scores not finite"

    def __init__(self, train, labels, validation, validation_labels, *, spinup=0):
        owner = "orc.tune.Classify"
        dtype = jnp.result_type(float)
        train = check_sequences(owner, "train", train, dtype)
        validation = check_sequences(owner, "validation", validation, dtype)
        check_finite_rows(train, "train", owner, _HINT)
        check_finite_rows(validation, "validation", owner, _HINT)
        _same_columns(owner, "validation", validation, "train", train)
        labels = check_labels(owner, "labels", labels, train.shape[0])
        validation_labels = check_labels(
            owner, "validation_labels", validation_labels, validation.shape[0]
        )
        for name, lab in (("labels", labels), ("validation_labels", validation_labels)):
            if int(jnp.min(lab)) < 0:
                raise ValueError(
                    f"{owner}: {name} must be class indices >= 0, got "
                    f"{int(jnp.min(lab))}"
                )
        shortest = min(train.shape[1], validation.shape[1])
        self.spinup = check_spinup(
            spinup, shortest, owner, f"the shortest sequence's length ({shortest})"
        )
        self.metric = "accuracy"
        self.train, self.labels = train, labels
        self.validation, self.validation_labels = validation, validation_labels

    def check_model(self, owner, model) -> None:
        _check_width(owner, model, "data_dim", model.in_dim, "train",
                     self.train.shape[2])  # fmt: skip
        for name in ("labels", "validation_labels"):
            top = int(jnp.max(getattr(self, name)))
            if top >= model.n_classes:
                raise ValueError(
                    f"{owner}: {type(model).__name__} has n_classes "
                    f"{model.n_classes}, but the task's {name} hold class {top}"
                )

    def fit(self, model, betas, *, throw=True, backend=None):
        problem = Classification(OWNER, self.train, self.labels, self.spinup)
        solver = RidgePath(jnp.asarray(betas, model.dtype))
        return problem.fit(model, solver, throw, backend=backend)

    def evaluate(self, model, models):
        # every strength's model has the same fitted inputs: the validation
        # features are computed once
        fitted = member(models, 0)
        feats = jax.vmap(lambda s: fitted.features(s, None, self.spinup))(
            self.validation.astype(model.dtype)
        )

        def per_strength(readout):
            scores = jax.vmap(readout.readout)(feats)
            probs = jax.nn.softmax(scores, axis=-1)  # classify's
            right = jnp.argmax(probs, axis=-1) == self.validation_labels
            return jnp.mean(right.astype(model.dtype)), ~jnp.all(jnp.isfinite(scores))

        return eqx.filter_vmap(per_strength)(models.readout)

    def trajectory_bytes(self, model, n_betas: int) -> int:
        """The features of every sequence, the statistics and their
        factorisation, one sequence's states, the weights and the class
        scores."""
        item = np.dtype(model.dtype).itemsize
        feats = int(model.feature_dim)
        n, seq_len = self.train.shape[:2]
        m, val_len = self.validation.shape[:2]
        c = model.n_classes
        total = (
            (n + m) * feats
            + 4 * feats**2
            + max(seq_len, val_len) * model.res_dim
            + n_betas * (c * feats + m * c)
        )
        return int(total * item)


class Regress(AbstractTask):
    """A regression task: an input sequence and the output sequence to infer
    from it, scored by the NRMSE of the predicted held-out output (lower is
    better).

    Candidates (any :class:`orc.regression.RCRegressorBase` built with
    ``construction="jax"``, e.g. :class:`orc.regression.ESNRegressor`) are
    trained by :func:`orc.regression.train_RCRegressor`'s problem (its
    readout bias unpenalised); a candidate's score is
    :func:`orc.metrics.nrmse` of ``predict(validation_in)[warmup:]``
    against ``validation_out[warmup:]`` (normalised by the standard
    deviation of those outputs). Predictions that are not finite fail the
    candidate.

    Parameters
    ----------
    train_in : array ``(T, in_dim)``
    train_out : array ``(T, out_dim)``
        The output at each training step (``train_out[t]`` is read from the
        state reached after ``train_in[t]``).
    validation_in : array ``(V, in_dim)``
    validation_out : array ``(V, out_dim)``
        Held out for scoring; never used to fit.
    spinup : int, optional
        Training pairs left out of the fit (the reservoir's transient).
    warmup : int, optional
        Validation steps predicted but left out of the score.
    """

    train_in: Array
    train_out: Array
    validation_in: Array
    validation_out: Array
    spinup: int = eqx.field(static=True)
    warmup: int = eqx.field(static=True)
    metric: str = eqx.field(static=True)

    family: ClassVar[type] = RCRegressorBase
    kind: ClassVar[str] = "regressor"
    example: ClassVar[str] = "orc.regression.ESNRegressor"
    default_beta: ClassVar[float] = _default_beta(train_RCRegressor)
    output_failure: ClassVar[str] = "predictions not finite"

    def __init__(
        self,
        train_in,
        train_out,
        validation_in,
        validation_out,
        *,
        spinup: int = TUNE.spinup,
        warmup: int = TUNE.warmup,
    ):
        owner = "orc.tune.Regress"
        train_in, train_out, validation_in, validation_out = _series(
            owner,
            train_in=train_in,
            train_out=train_out,
            validation_in=validation_in,
            validation_out=validation_out,
        )
        _same_rows(owner, "train_out", train_out, "train_in", train_in)
        _same_rows(owner, "validation_out", validation_out, "validation_in",
                   validation_in)  # fmt: skip
        _same_columns(owner, "validation_in", validation_in, "train_in", train_in)
        _same_columns(owner, "validation_out", validation_out, "train_out",
                      train_out)  # fmt: skip
        t, v = train_in.shape[0], validation_in.shape[0]
        self.spinup = check_spinup(
            spinup, t, owner, f"the training length ({t} samples)"
        )
        self.warmup = check_int("warmup", warmup, owner, minimum=0)
        if self.warmup > v - 2:
            raise ValueError(
                f"{owner}: warmup ({self.warmup}) must leave at least two validation "
                f"samples to score (validation_in has {v})"
            )
        self.metric = "nrmse"
        self.train_in, self.train_out = train_in, train_out
        self.validation_in, self.validation_out = validation_in, validation_out

    def check_model(self, owner, model) -> None:
        _check_width(owner, model, "in_dim", model.in_dim, "train_in",
                     self.train_in.shape[1])  # fmt: skip
        _check_width(owner, model, "out_dim", model.out_dim, "train_out",
                     self.train_out.shape[1])  # fmt: skip

    def fit(self, model, betas, *, throw=True, backend=None):
        dtype = model.dtype
        problem = Regression(owner=OWNER, in_seq=self.train_in.astype(dtype),
                             target_seq=self.train_out.astype(dtype),
                             init=model.driver.default_state(), spinup=self.spinup,
                             multi=False)  # fmt: skip
        opts = Options(keep_states=False, progress=False, backend=backend)
        # the readout bias unpenalised, as train_RCRegressor solves it
        solver = RidgePath(jnp.asarray(betas, dtype), intercept=model.readout_bias)
        return _teacher_forced(model, problem, solver, opts, throw)

    def evaluate(self, model, models):
        dtype = model.dtype
        inputs = self.validation_in.astype(dtype)
        # one reservoir run, shared by every strength (predict's)
        states = model._run(inputs, model.driver.default_state())
        truth = self.validation_out.astype(dtype)[self.warmup :]

        def per_strength(m):
            pred = m.output(states, inputs)[self.warmup :]
            return metrics.nrmse(pred, truth), ~jnp.all(jnp.isfinite(pred))

        return eqx.filter_vmap(per_strength)(models)

    def trajectory_bytes(self, model, n_betas: int) -> int:
        """The validation states, the statistics and their factorisation,
        the weights and the predictions of every strength."""
        item = np.dtype(model.dtype).itemsize
        state = int(np.prod(model.driver.default_state().shape))
        feats = state + model.in_dim + 1
        v, o = self.validation_in.shape[0], self.validation_out.shape[1]
        total = v * state + 4 * feats**2 + n_betas * (o * feats + v * o)
        return int(total * item)
