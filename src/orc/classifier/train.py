"""Training classifiers: reservoir features, then ridge regression onto one-hot labels."""

from __future__ import annotations

from typing import TypeVar

import jax
import jax.numpy as jnp
from jaxtyping import Array, Int

from .. import _errors
from .._strategy import compiled
from .._training import fit_readout
from .._validation import (
    check_beta,
    check_data,
    check_finite,
    check_int,
    check_rank,
    warn_zero_beta,
)
from .base import RCClassifierBase
from .models import ESNClassifier

__all__ = ["train_RCClassifier", "train_ESNClassifier"]

Model = TypeVar("Model", bound=RCClassifierBase)


@compiled
def _train(model, train_seqs, labels, beta, spinup, batch_size):
    owner = "train_RCClassifier"
    train_seqs = check_finite(
        train_seqs.astype(model.dtype),
        "train_seqs",
        owner,
        "Remove or fill missing samples.",
    )
    beta = check_beta(beta, owner)
    labels = _errors.check(
        labels,
        jnp.any((labels < 0) | (labels >= model.n_classes)),
        f"{owner}: labels must lie in [0, n_classes) = [0, {model.n_classes}).",
    )
    feats = jax.vmap(lambda s: model.features(s, None, spinup))(train_seqs)
    one_hot = jax.nn.one_hot(labels, model.n_classes, dtype=model.dtype)
    readout = fit_readout(model.readout, feats, one_hot, beta, batch_size=batch_size)
    return model.set_readout(readout)


def train_RCClassifier(
    model: Model,
    train_seqs: Array,
    labels: Int[Array, " n_samples"],
    spinup: int = 0,
    beta: float = 8e-8,
    batch_size: int | None = None,
    **force_kwargs,
) -> Model:
    """Fit a classifier's readout on labelled sequences.

    Each sequence gives one feature vector (``model.state_repr``); the readout is
    the ridge regression of the one-hot labels on these features.

    Parameters
    ----------
    model : RCClassifierBase
    train_seqs : Array, shape ``(n_samples, seq_len, data_dim)``
    labels : int Array, shape ``(n_samples,)``, values in ``[0, n_classes)``
    spinup : int, default 0
        Leading states skipped by every representation but ``"final"`` (see
        :class:`RCClassifierBase`).
    beta : float, default 8e-8
    batch_size : int, optional
        Chunks solved at a time (parallel readouts only).
    **force_kwargs
        Accepted for ORC compatibility; must be empty.

    Returns
    -------
    The trained model.
    """
    owner = "train_RCClassifier"
    if not isinstance(model, RCClassifierBase):
        raise TypeError(
            f"{owner}: model must be an RCClassifierBase, got {type(model).__name__}"
        )
    train_seqs = check_data("train_seqs", train_seqs, owner, model.dtype)
    train_seqs = check_rank(
        "train_seqs", train_seqs, 3, owner, "(n_samples, seq_len, data_dim)"
    )
    if train_seqs.shape[0] == 0 or train_seqs.shape[1] == 0:
        raise ValueError(
            f"{owner}: train_seqs must hold at least one sequence of at least one "
            f"sample (n_samples, seq_len, data_dim), got shape "
            f"{tuple(train_seqs.shape)}: there is nothing to fit the readout on"
        )
    if train_seqs.shape[-1] != model.in_dim:
        raise ValueError(
            f"{owner}: train_seqs must have {model.in_dim} features in its last axis, "
            f"got shape {tuple(train_seqs.shape)}"
        )
    labels = check_rank("labels", labels, 1, owner, "(n_samples,)")
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise TypeError(f"{owner}: labels must be integers, got dtype {labels.dtype}")
    if labels.shape[0] != train_seqs.shape[0]:
        raise ValueError(
            f"{owner}: labels must have one entry per sequence ({train_seqs.shape[0]}), "
            f"got {labels.shape[0]}"
        )
    spinup = check_int("spinup", spinup, owner, minimum=0)
    if spinup >= train_seqs.shape[1]:
        raise ValueError(
            f"{owner}: spinup ({spinup}) must be less than seq_len ({train_seqs.shape[1]})"
        )
    check_beta(beta, owner)
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
    beta: float = 8e-8,
) -> ESNClassifier:
    """:func:`train_RCClassifier` for an :class:`ESNClassifier` (type-checked)."""
    if not isinstance(model, ESNClassifier):
        raise TypeError(
            f"train_ESNClassifier: model must be an ESNClassifier, got {type(model).__name__}"
        )
    return train_RCClassifier(model, train_seqs, labels, spinup, beta)
