"""Forecast metrics: RMSE, NRMSE and valid prediction time.

All functions take arrays shaped ``(time, features)`` (JAX or numpy) and are
jit-compatible except where a Python option selects the branch.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = ["rmse", "nrmse", "normalised_error", "valid_prediction_time"]

_NORMS = ("std", "var", "range", "mean_norm")


def _pair(pred, truth, owner):
    pred, truth = jnp.asarray(pred), jnp.asarray(truth)
    if pred.shape != truth.shape:
        raise ValueError(
            f"{owner}: pred and truth must have the same shape, got "
            f"{tuple(pred.shape)} and {tuple(truth.shape)}"
        )
    if pred.ndim == 1:
        pred, truth = pred[:, None], truth[:, None]
    if pred.ndim != 2:
        raise ValueError(f"{owner}: expected (time, features) arrays, got {pred.shape}")
    return pred, truth


def rmse(pred: ArrayLike, truth: ArrayLike) -> Float[Array, ""]:
    """Root mean squared error over all entries."""
    pred, truth = _pair(pred, truth, "rmse")
    return jnp.sqrt(jnp.mean((pred - truth) ** 2))


def nrmse(
    pred: ArrayLike, truth: ArrayLike, normalization: str = "std"
) -> Float[Array, ""]:
    """RMSE divided by a scale of ``truth``.

    ``normalization``: ``"std"`` (standard deviation of all entries of truth),
    ``"var"`` (its variance), ``"range"`` (max - min) or ``"mean_norm"``
    (``sqrt(mean_t ||truth_t||^2)``, the scale of the valid prediction time).
    """
    pred, truth = _pair(pred, truth, "nrmse")
    if normalization not in _NORMS:
        raise ValueError(
            f"nrmse: normalization must be one of {_NORMS}, got {normalization!r}"
        )
    scale = {
        "std": lambda: jnp.std(truth),
        "var": lambda: jnp.var(truth),
        "range": lambda: jnp.max(truth) - jnp.min(truth),
        "mean_norm": lambda: jnp.sqrt(jnp.mean(jnp.sum(truth**2, axis=1))),
    }[normalization]()
    return rmse(pred, truth) / scale


def normalised_error(
    pred: ArrayLike, truth: ArrayLike, scale=None
) -> Float[Array, " time"]:
    """``e(t) = ||pred_t - truth_t|| / scale`` with ``scale = sqrt(mean_t ||truth_t||^2)``."""
    pred, truth = _pair(pred, truth, "normalised_error")
    if scale is None:
        scale = jnp.sqrt(jnp.mean(jnp.sum(truth**2, axis=1)))
    return jnp.linalg.norm(pred - truth, axis=1) / scale


def valid_prediction_time(
    pred: ArrayLike,
    truth: ArrayLike,
    threshold: float = 0.4,
    dt: float = 1.0,
    lyapunov_exponent: float | None = None,
    scale=None,
) -> Float[Array, ""]:
    """Time until the normalised error first exceeds ``threshold``.

    ``e(t) = ||pred_t - truth_t|| / scale`` (``scale`` defaults to
    ``sqrt(mean_t ||truth_t||^2)`` of this window; pass the attractor's scale to
    compare windows on one footing). Returns ``steps * dt``, times the Lyapunov
    exponent when given (the result is then in Lyapunov times). A forecast that
    never crosses the threshold gets the whole window.

    Example
    -------
    >>> vpt = valid_prediction_time(U_pred, U_test, dt=0.01, lyapunov_exponent=0.906)
    """
    err = normalised_error(pred, truth, scale)
    crossed = err > threshold
    steps = jnp.where(jnp.any(crossed), jnp.argmax(crossed), err.shape[0])
    t = steps.astype(err.dtype) * jnp.asarray(dt, err.dtype)
    return t * lyapunov_exponent if lyapunov_exponent is not None else t
