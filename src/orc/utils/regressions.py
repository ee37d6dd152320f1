"""Ridge regression (ORC's ``ridge_regression``), on the shared ridge engine."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._ridge import RidgeStats, solve, stats_update

__all__ = ["ridge_regression"]


def ridge_regression(
    res_seq: Float[Array, "seq_len res_dim"],
    target_seq: Float[Array, "seq_len out_dim"],
    beta: float = 1e-7,
) -> Float[Array, "out_dim res_dim"]:
    """Solve ``min_C ||res_seq C^T - target_seq||^2 + beta ||C||^2``.

    Parameters
    ----------
    res_seq : Array, shape ``(seq_len, res_dim)``
        Regression features (reservoir states), one row per sample.
    target_seq : Array, shape ``(seq_len, out_dim)``
        Targets, one row per sample.
    beta : float, default 1e-7
        Tikhonov (ridge) regularisation.

    Returns
    -------
    cmat : Array, shape ``(out_dim, res_dim)`` with ``cmat @ res_seq[t] ≈ target_seq[t]``.

    Solved by Cholesky on ``res_seq^T res_seq + beta I``, with a symmetric
    eigen-decomposition (minimum-norm solution) if that matrix is not
    numerically positive definite.

    Example
    -------
    >>> C = ridge_regression(jnp.eye(3), 2 * jnp.eye(3), beta=0.0)  # ≈ 2 I
    """
    res_seq = jnp.asarray(res_seq)
    target_seq = jnp.asarray(target_seq)
    if res_seq.ndim != 2 or target_seq.ndim != 2:
        raise ValueError(
            "ridge_regression: res_seq and target_seq must be 2-D (seq_len, dim), got "
            f"{tuple(res_seq.shape)} and {tuple(target_seq.shape)}"
        )
    if res_seq.shape[0] != target_seq.shape[0]:
        raise ValueError(
            "ridge_regression: res_seq and target_seq must have the same number of "
            f"rows, got {res_seq.shape[0]} and {target_seq.shape[0]}"
        )
    dtype = jnp.result_type(res_seq.dtype, target_seq.dtype)
    stats = RidgeStats.zeros(res_seq.shape[1], target_seq.shape[1], None, dtype)
    stats = stats_update(stats, res_seq.astype(dtype), target_seq.astype(dtype))
    return solve(stats, beta)
