"""Ridge regressions (ORC's ``orc.utils.regressions``), on the shared ridge engine.

Every function here builds :class:`orc._ridge.RidgeStats` from its arrays and
calls :func:`orc._ridge.solve`; none is a solver of its own.
"""

from __future__ import annotations

import operator

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._defaults import NUMERICS
from .._ridge import RidgeStats, solve, stats_update
from .._strategy import compiled
from .._validation import check_beta, check_data, default_float_dtype, warn_zero_beta

__all__ = ["ridge_regression"]


def _checked(
    name: str, res_seq, target_seq, chunked: bool, res_name: str = "res_seq"
) -> tuple[Array, Array]:
    """The two arrays, once their shapes ``(T, [C,] F)`` and ``(T, [C,] O)`` agree."""
    res_seq = jnp.asarray(_real(name, res_name, res_seq))
    target_seq = jnp.asarray(_real(name, "target_seq", target_seq))
    ndim, layout = (3, "(seq_len, chunks, dim)") if chunked else (2, "(seq_len, dim)")
    if res_seq.ndim != ndim or target_seq.ndim != ndim:
        raise ValueError(
            f"{name}: {res_name} and target_seq must be {ndim}-D {layout}, got "
            f"{tuple(res_seq.shape)} and {tuple(target_seq.shape)}"
        )
    if res_seq.shape[:-1] != target_seq.shape[:-1]:
        what = "rows and chunks" if chunked else "rows"
        raise ValueError(
            f"{name}: {res_name} and target_seq must have the same number of {what}, "
            f"got {tuple(res_seq.shape)} and {tuple(target_seq.shape)}"
        )
    return res_seq, target_seq


def _real(name: str, arg: str, x):
    """``x`` as real data (:func:`orc._validation.check_data`): a float
    array keeps its dtype, integers and Python numbers become the default
    float dtype, bool and complex arrays raise ``TypeError``."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        dtype = default_float_dtype()
    return check_data(arg, x, name, dtype)


def _checked_beta(name: str, beta, *data):
    """``beta`` checked (finite, >= 0; as a run-time check when traced) and
    warned about when it is 0 (an unregularised fit)."""
    warn_zero_beta(beta, name, *data)
    return check_beta(beta, name)


def _fit(
    name: str, res_seq, target_seq, beta, chunked: bool, beta_checked: bool = False
) -> Array:
    """Ridge weights of ``res_seq`` ``(T, [C,] F)`` onto ``target_seq``
    ``(T, [C,] O)``: ``(O, F)``, or ``(C, O, F)`` when ``chunked``."""
    res_seq, target_seq = _checked(name, res_seq, target_seq, chunked)
    if not beta_checked:
        beta = _checked_beta(name, beta, res_seq, target_seq)
    # beta an array: a traced argument of the program, not a constant of it
    # (a Python float would compile the program again for each value)
    if not eqx.is_array(beta):
        beta = np.asarray(beta, jnp.result_type(res_seq.dtype, target_seq.dtype))
    return _weights(res_seq, target_seq, beta, chunked)


@compiled
def _weights(res_seq, target_seq, beta, chunked: bool) -> Array:
    """The ridge fit of :func:`_fit` as one program per shape (run eagerly,
    its statistics, solve and checks were dozens of small programs)."""
    dtype = jnp.result_type(res_seq.dtype, target_seq.dtype)
    chunks = res_seq.shape[1] if chunked else None
    stats = RidgeStats.zeros(res_seq.shape[-1], target_seq.shape[-1], chunks, dtype)
    stats = stats_update(stats, res_seq.astype(dtype), target_seq.astype(dtype))
    return solve(stats, beta)


def ridge_regression(
    res_seq: Float[Array, "seq_len res_dim"],
    target_seq: Float[Array, "seq_len out_dim"],
    beta: float = NUMERICS.ridge_beta,
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
    return _fit("ridge_regression", res_seq, target_seq, beta, chunked=False)


def _solve_all_ridge_reg(
    res_seq: Float[Array, "seq_len chunks res_dim"],
    target_seq: Float[Array, "seq_len chunks out_dim"],
    beta: float = NUMERICS.ridge_beta,
) -> Float[Array, "chunks out_dim res_dim"]:
    """One ridge regression per chunk (parallel reservoirs), ORC's helper.

    Parameters
    ----------
    res_seq : Array, shape ``(seq_len, chunks, res_dim)``
    target_seq : Array, shape ``(seq_len, chunks, out_dim)``
    beta : float, default 1e-7
        Tikhonov regularisation, shared by all chunks (may be traced).

    Returns
    -------
    Array, shape ``(chunks, out_dim, res_dim)``: entry ``c`` is
    :func:`ridge_regression` of ``res_seq[:, c]`` onto ``target_seq[:, c]``.

    Example
    -------
    >>> W = _solve_all_ridge_reg(jnp.ones((10, 3, 4)), jnp.ones((10, 3, 2)), 1e-3)
    >>> W.shape
    (3, 2, 4)
    """
    return _fit("_solve_all_ridge_reg", res_seq, target_seq, beta, chunked=True)


def _solve_all_ridge_reg_batched(
    res_seq_train: Float[Array, "seq_len chunks res_dim"],
    target_seq: Float[Array, "seq_len chunks out_dim"],
    beta: float,
    batch_size: int,
) -> Float[Array, "chunks out_dim res_dim"]:
    """:func:`_solve_all_ridge_reg`, ``batch_size`` chunks at a time (ORC's helper).

    Only one batch of Gram matrices (``batch_size x res_dim x res_dim``) is
    formed at a time; the result is the same as solving all chunks at once.

    Parameters
    ----------
    res_seq_train : Array, shape ``(seq_len, chunks, res_dim)``
    target_seq : Array, shape ``(seq_len, chunks, out_dim)``
    beta : float
        Tikhonov regularisation (may be traced).
    batch_size : int
        Chunks per batch, ``>= 1`` (a Python int; static under ``jax.jit``).

    Returns
    -------
    Array, shape ``(chunks, out_dim, res_dim)``.
    """
    res_seq_train, target_seq = _checked(
        "_solve_all_ridge_reg_batched",
        res_seq_train,
        target_seq,
        chunked=True,
        res_name="res_seq_train",
    )
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(
            f"_solve_all_ridge_reg_batched: batch_size must be >= 1, got {batch_size}"
        )
    beta = _checked_beta("_solve_all_ridge_reg_batched", beta, res_seq_train)
    chunks = res_seq_train.shape[1]
    name = "_solve_all_ridge_reg_batched"
    if batch_size >= chunks:
        return _fit(name, res_seq_train, target_seq, beta, True, beta_checked=True)
    parts = [
        _fit(
            name,
            res_seq_train[:, i : i + batch_size],
            target_seq[:, i : i + batch_size],
            beta,
            True,
            beta_checked=True,
        )
        for i in range(0, chunks, batch_size)
    ]
    return jnp.concatenate(parts, axis=0)
