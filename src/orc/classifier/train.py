"""Training classifiers: reservoir features, then ridge regression onto one-hot labels."""

from __future__ import annotations

from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from .. import _errors, _native
from .._defaults import ESN
from .._fit import AbstractRidgeSolver, Ridge, _real_number, solved
from .._kernels import current
from .._ridge import sequence_stats
from .._strategy import compiled
from .._validation import (
    check_beta,
    check_data,
    check_finite,
    check_int,
    check_last_dim,
    check_rank,
    check_spinup,
    replace_fields,
    warn_zero_beta,
)
from .base import PPV_MAX_STATES, PPV_QUANTILES, RCClassifierBase, _split_repr
from .models import ESNClassifier

__all__ = [
    "train_RCClassifier",
    "train_ESNClassifier",
    "loo_ridge",
    "fit_features",
    "Classification",
    "check_sequences",
    "check_labels",
]

Model = TypeVar("Model", bound=RCClassifierBase)


def _ppv_stride(n_series: int, n_kept: int) -> int:
    """Every ``stride``-th kept state of each series fits the ``"ppv"``
    thresholds: all of them while ``n_series * n_kept <= PPV_MAX_STATES``."""
    per_series = max(1, -(-PPV_MAX_STATES // n_series))
    return max(1, -(-n_kept // per_series))


def _fit_lag_scale(train_seqs, lags):
    """Per lag and channel (the lags' blocks side by side), the standard
    deviation of the training series' differences ``u_t - u_{t-L}`` (pooled
    over series and the times ``t >= L`` where they are defined); 1 where it is
    0 or undefined (series of at most ``L`` samples). Lag 1 gives the scale of
    the first-difference channels (``input_differences``)."""
    blocks = []
    for lag in lags:
        if train_seqs.shape[1] <= lag:
            blocks.append(jnp.ones(train_seqs.shape[2], train_seqs.dtype))
            continue
        scale = jnp.std(train_seqs[:, lag:] - train_seqs[:, :-lag], axis=(0, 1))
        blocks.append(jnp.where(scale > 0, scale, 1.0))
    return jnp.concatenate(blocks)


@jax.custom_jvp
def _column_quantiles_native(x, q):
    call = jax.ffi.ffi_call(
        _native.column_quantiles_target(x.dtype),
        jax.ShapeDtypeStruct((q.shape[0], x.shape[1]), x.dtype),
        vmap_method="sequential",
    )
    return call(x, q)


@_column_quantiles_native.defjvp
def _column_quantiles_native_jvp(primals, tangents):
    return _column_quantiles_native(*primals), jax.jvp(
        _column_quantiles_xla, primals, tangents
    )[1]


def _column_quantiles_xla(x, q):
    return jnp.quantile(x, q, axis=0)


def column_quantiles(x, q):
    """``jnp.quantile(x, q, axis=0)`` for ``x (rows, cols)`` and ``q (m,)``,
    same bits: on CPU with the native kernels ``std::nth_element`` per
    column (10000 x 500 float64: ~0.85 s of XLA's CPU sort otherwise, most of
    a "ppv" classifier's fit); elsewhere, and for derivatives, XLA's."""
    kernels = current()
    if kernels.native and _native.column_quantiles_target(x.dtype) is not None:
        return kernels.on_platform(
            x, q, cpu=_column_quantiles_native, default=_column_quantiles_xla
        )
    return _column_quantiles_xla(x, q)


def _fit_ppv_thresholds(model, train_seqs, spinup):
    """``(passes, 3, res_dim)``: per pass, the :data:`PPV_QUANTILES` of each
    node's kept training states (a fixed stride past :data:`PPV_MAX_STATES`)."""
    _, bi = _split_repr(model.state_repr)
    n, seq_len = train_seqs.shape[:2]
    stride = _ppv_stride(n, seq_len - spinup)
    r0 = model.driver.default_state()
    quantiles = jnp.asarray(PPV_QUANTILES, model.dtype)
    out = []
    for seqs in (train_seqs, train_seqs[:, ::-1])[: 2 if bi else 1]:
        states = jax.lax.map(  # a few series at a time: bounded memory
            lambda s: model._kept_states(s, r0, spinup, stride), seqs, batch_size=16
        )
        out.append(column_quantiles(states.reshape(-1, model.res_dim), quantiles))
    return jnp.stack(out)


def loo_ridge(features, targets, betas):
    """Ridge regression with its strength chosen by exact leave-one-out error.

    The features are scaled to unit standard deviation over the samples
    (not centred: like the classifier's readout, the fit has no intercept),
    which is a ridge penalty ``beta * var_j`` on each raw feature's weight.
    For each candidate the leave-one-out residuals come in closed form from
    one eigendecomposition of the ``(n, n)`` Gram matrix ``Z Z^T``
    (``Z = X / scale``): with hat matrix ``H = Z (Z^T Z + beta I)^{-1} Z^T``,
    ``e_i = (y_i - (H y)_i) / (1 - H_ii)``; the criterion is the mean of
    ``e^2`` over samples and targets (``RidgeClassifierCV``'s). Ties go to the
    first candidate; a NaN error counts as infinite.

    Parameters
    ----------
    features : Array ``(n_samples, n_features)``
    targets : Array ``(n_samples, n_targets)``
    betas : Array ``(n_candidates,)``, each > 0

    Returns
    -------
    ``(weights, beta, errors)``: weights ``(n_targets, n_features)`` on the
    raw features (``targets ≈ features @ weights.T``), the chosen ``beta``,
    and the leave-one-out error of every candidate ``(n_candidates,)``.
    """
    x = jnp.asarray(features)
    y = jnp.asarray(targets, x.dtype)
    betas = jnp.asarray(betas, x.dtype)
    scale = jnp.std(x, axis=0)
    scale = jnp.where(scale > 0, scale, 1.0)
    z = x / scale
    gram = jnp.matmul(z, z.T, precision="highest")
    lam, u = jnp.linalg.eigh(gram)
    lam = jnp.maximum(lam, 0.0)  # round-off below zero on a PSD matrix
    uy = jnp.matmul(u.T, y, precision="highest")
    u2 = u * u

    def loo_error(beta):
        shrink = lam / (lam + beta)
        fitted = jnp.matmul(u, shrink[:, None] * uy, precision="highest")
        leverage = jnp.matmul(u2, shrink, precision="highest")
        resid = (y - fitted) / (1.0 - leverage)[:, None]
        err = jnp.mean(resid * resid)
        return jnp.where(jnp.isnan(err), jnp.inf, err)

    errors = jax.vmap(loo_error)(betas)
    beta = betas[jnp.argmin(errors)]
    dual = jnp.matmul(u, uy / (lam + beta)[:, None], precision="highest")  # (n, o)
    weights = jnp.matmul(dual.T, z, precision="highest") / scale
    return weights, beta, errors


def _fit_inputs(model, train_seqs, spinup):
    """``model`` with the lag scale, the difference scale (of the series with
    its scaled lag channels), then the PPV thresholds (from the states these
    drive) fitted to ``train_seqs``; each only if it has one."""
    if model.input_lags:
        scale = _fit_lag_scale(train_seqs, model.input_lags)
        model = eqx.tree_at(lambda m: m.lag_scale, model, scale)
    if model.input_differences:
        channels = jax.vmap(model._lagged)(train_seqs)
        model = eqx.tree_at(
            lambda m: m.difference_scale, model, _fit_lag_scale(channels, (1,))
        )
    if model.ppv_thresholds is not None:
        thresholds = _fit_ppv_thresholds(model, train_seqs, spinup)
        model = eqx.tree_at(lambda m: m.ppv_thresholds, model, thresholds)
    return model


@compiled
def _fit_features(model, train_seqs, spinup):
    train_seqs = check_finite(
        train_seqs.astype(model.dtype),
        "train_seqs",
        "fit_features",
        "Remove or fill missing samples.",
    )
    return _fit_inputs(model, train_seqs, spinup)


def check_sequences(owner, name, seqs, dtype):
    """``seqs`` as a batch of labelled sequences ``(n_samples, seq_len,
    data_dim)`` of ``dtype`` holding at least one sample
    (:func:`orc._validation.check_data`'s conversions and refusals)."""
    seqs = check_data(name, seqs, owner, dtype)
    seqs = check_rank(name, seqs, 3, owner, "(n_samples, seq_len, data_dim)")
    if seqs.shape[0] == 0 or seqs.shape[1] == 0:
        raise ValueError(
            f"{owner}: {name} must hold at least one sequence of at least one "
            f"sample (n_samples, seq_len, data_dim), got shape "
            f"{tuple(seqs.shape)}: there is nothing to fit the readout on"
        )
    return seqs


def check_labels(owner, name, labels, n_samples: int):
    """``labels`` as an integer array ``(n_samples,)``, one per sequence
    (their range is checked against the model's ``n_classes`` where it
    is known)."""
    if labels is None or isinstance(labels, (str, bytes)):
        raise TypeError(
            f"{owner}: {name} must be an integer array of shape (n_samples,), "
            f"got {labels!r}"
        )
    labels = check_rank(name, labels, 1, owner, "(n_samples,)")
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise TypeError(f"{owner}: {name} must be integers, got dtype {labels.dtype}")
    if labels.shape[0] != n_samples:
        raise ValueError(
            f"{owner}: {name} must have one entry per sequence ({n_samples}), "
            f"got {labels.shape[0]}"
        )
    return labels


def _check_train_seqs(owner, model, train_seqs, spinup):
    if not isinstance(model, RCClassifierBase):
        raise TypeError(
            f"{owner}: model must be an RCClassifierBase, got {type(model).__name__}"
        )
    train_seqs = check_sequences(owner, "train_seqs", train_seqs, model.dtype)
    check_last_dim("train_seqs", train_seqs, model.in_dim, owner)
    spinup = check_spinup(
        spinup, train_seqs.shape[1], owner, f"seq_len ({train_seqs.shape[1]})"
    )
    return train_seqs, spinup


def fit_features(model: Model, train_seqs: Array, spinup: int = 0) -> Model:
    """``model`` with what its representation fits from training data fitted
    to ``train_seqs`` (no labels; the readout is untouched): the difference
    channels' scale (``input_differences``) and the ``"ppv"`` thresholds;
    ``model`` itself when it has neither.

    :func:`train_RCClassifier` does this first; call it yourself to compute
    features for your own model selection (``jax.vmap(fitted.features)``)
    without fitting a readout.
    """
    train_seqs, spinup = _check_train_seqs("fit_features", model, train_seqs, spinup)
    if (
        not model.input_differences
        and not model.input_lags
        and model.ppv_thresholds is None
    ):
        return model
    return _fit_features(model, train_seqs, spinup)


class Classification(eqx.Module):
    """A classifier's ridge problem: the feature vector of each training
    sequence (``model.state_repr``, after ``spinup``) regressed onto its
    one-hot label, once what the representation needs from the training set
    is fitted (:func:`fit_features`'s). Built by :func:`train_RCClassifier`
    (one ridge strength, :class:`orc._fit.Ridge`); :class:`orc.tune.Classify`
    trains its candidates with it and :class:`orc._fit.RidgePath` (every
    strength solved from one set of statistics)."""

    owner: str = eqx.field(static=True)
    train_seqs: Array
    labels: Array
    spinup: int = eqx.field(static=True)

    def features(self, model):
        """``(model, features, one_hot)``: ``model`` with its inputs fitted,
        the features ``(n_samples, feature_dim)`` and the one-hot labels."""
        train_seqs = check_finite(
            self.train_seqs.astype(model.dtype),
            "train_seqs",
            self.owner,
            "Remove or fill missing samples.",
        )
        labels = _errors.check(
            self.labels,
            jnp.any((self.labels < 0) | (self.labels >= model.n_classes)),
            f"{self.owner}: labels must lie in [0, n_classes) = "
            f"[0, {model.n_classes}).",
        )
        model = _fit_inputs(model, train_seqs, self.spinup)
        feats = jax.vmap(lambda s: model.features(s, None, self.spinup))(train_seqs)
        return model, feats, jax.nn.one_hot(labels, model.n_classes, dtype=model.dtype)

    @compiled
    def fit(self, model, solver: AbstractRidgeSolver, throw: bool = True):
        """``(model, result)``: ``model`` trained with ``solver`` (with a
        population solver a stack of models, one per strength,
        :func:`orc._fit.solved`); ``result`` how the solve went
        (:class:`orc._ridge.RESULTS`, one per strength) with ``throw=False``,
        nothing raised or warned for it; else ``None``, a failed solve
        raised and a fallback warned."""
        model, feats, one_hot = self.features(model)
        stats = sequence_stats(
            feats, one_hot, model.readout.prepare_train, model.readout.prepare_target
        )
        if throw:
            w, result = solver.weights(stats), None
        else:
            w, result = solver.compute(stats)
        return solved(self, model, solver, w), result

    def solution(self, model, weights):
        """``model`` with the readout weights ``weights``."""
        return model.set_readout(model.readout.set_wout(weights))


@compiled
def _train(model, train_seqs, labels, beta, spinup, batch_size):
    owner = "train_RCClassifier"
    beta = check_beta(beta, owner)
    problem = Classification(owner, train_seqs, labels, spinup)
    selected = None
    if jnp.ndim(beta) == 0:
        model, _ = problem.fit(model, Ridge(beta, batch_size))
    else:
        model, feats, one_hot = problem.features(model)
        x = model.readout.prepare_train(feats).reshape(feats.shape[0], -1)
        weights, selected, _ = loo_ridge(
            x, model.readout.prepare_target(one_hot).reshape(x.shape[0], -1), beta
        )
        model = problem.solution(model, weights.reshape(model.readout.wout.shape))
    return replace_fields(model, selected_beta=selected)


_BETA = "a real number or a 1-D sequence of candidate strengths"


def train_RCClassifier(
    model: Model,
    train_seqs: Array,
    labels: Int[Array, " n_samples"],
    spinup: int = 0,
    beta: float | Array = ESN.beta,
    batch_size: int | None = None,
    **force_kwargs,
) -> Model:
    """Fit a classifier's readout on labelled sequences.

    Each sequence gives one feature vector (``model.state_repr``); the readout is
    the ridge regression of the one-hot labels on these features. Before
    that, training fits what the representation needs from the training
    set: the difference channels' scale (``input_differences``), then the
    ``"ppv"`` thresholds (from the states those channels drive).

    Parameters
    ----------
    model : RCClassifierBase
    train_seqs : Array, shape ``(n_samples, seq_len, data_dim)``
    labels : int Array, shape ``(n_samples,)``, values in ``[0, n_classes)``
    spinup : int, default 0
        Leading states skipped by every representation but ``"final"`` (see
        :class:`RCClassifierBase`).
    beta : float or 1-D sequence of floats, optional
        The ridge strength (default ORC 0.4's). Several candidates (each > 0; e.g.
        ``np.logspace(-3, 3, 10)``) are chosen among by exact leave-one-out
        error (:func:`loo_ridge`): the features are then scaled to unit
        standard deviation over the training set before the ridge (the
        weights are folded back, so the model reads raw features), and the
        chosen value is kept in ``model.selected_beta`` (``None`` after a fit
        with one ``beta``). The leave-one-out works on the
        ``(n_samples, n_samples)`` Gram matrix: meant for up to a few
        thousand sequences.
    batch_size : int, optional
        Chunks solved at a time (parallel readouts only).
    **force_kwargs
        Accepted for ORC compatibility; must be empty.

    Returns
    -------
    The trained model.
    """
    owner = "train_RCClassifier"
    train_seqs, spinup = _check_train_seqs(owner, model, train_seqs, spinup)
    labels = check_labels(owner, "labels", labels, train_seqs.shape[0])
    if isinstance(beta, (list, tuple)):
        beta = np.asarray([_real_number("beta", b, owner, _BETA) for b in beta], float)
    else:
        _real_number("beta", beta, owner, _BETA)
    check_beta(beta, owner)
    if jnp.ndim(beta) > 1 or (jnp.ndim(beta) == 1 and jnp.size(beta) == 0):
        raise ValueError(
            f"{owner}: beta must be a number or a 1-D sequence of candidates, got "
            f"shape {tuple(jnp.shape(beta))}"
        )
    if jnp.ndim(beta) == 1:
        wout = getattr(model.readout, "wout", None)
        if wout is None or wout.ndim != 3 or wout.shape[0] != 1:
            raise ValueError(
                f"{owner}: beta candidates (leave-one-out selection) need a single "
                "linear readout (wout of shape (1, n_classes, features))"
            )
        if not isinstance(beta, jax.core.Tracer) and not np.all(np.asarray(beta) > 0):
            raise ValueError(
                f"{owner}: beta candidates must all be > 0 (leave-one-out with "
                f"beta=0 is undefined), got {beta!r}"
            )
    else:
        warn_zero_beta(beta, owner, train_seqs)
    if batch_size is not None:
        check_int("batch_size", batch_size, owner, minimum=1)
    if force_kwargs:
        raise TypeError(
            f"{owner}: unexpected keyword arguments {sorted(force_kwargs)}; classifier "
            "features are computed directly from the embedding and driver."
        )
    return _train(
        model, train_seqs, labels, jnp.asarray(beta, model.dtype), spinup, batch_size
    )


def train_ESNClassifier(
    model: ESNClassifier,
    train_seqs: Array,
    labels: Array,
    spinup: int = 0,
    beta: float = ESN.beta,
) -> ESNClassifier:
    """:func:`train_RCClassifier` for an :class:`ESNClassifier` (type-checked)."""
    if not isinstance(model, ESNClassifier):
        raise TypeError(
            f"train_ESNClassifier: model must be an ESNClassifier, got {type(model).__name__}"
        )
    return train_RCClassifier(model, train_seqs, labels, spinup, beta)
