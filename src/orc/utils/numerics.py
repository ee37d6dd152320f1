"""Numerical utilities: Arnoldi iteration and spectral radius.

``max_eig_arnoldi`` keeps ORC's name and signature. It accepts a dense matrix,
a ``jax.experimental.sparse.BCOO`` matrix or any object with a ``matvec``
method (such as :class:`orc.drivers.ReservoirMatrix`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex

__all__ = ["arnoldi", "max_eig_arnoldi", "spectral_radius"]


def _as_matvec(A):
    if hasattr(A, "matvec"):
        return A.matvec, A.shape[-1]
    return (lambda v: A @ v), A.shape[-1]


def arnoldi(matvec, n: int, k: int, v0: Array) -> tuple[Array, Array]:
    """``k`` steps of Arnoldi with classical Gram–Schmidt applied twice (CGS2).

    Parameters
    ----------
    matvec : callable
        ``v -> A @ v`` for an ``(n, n)`` operator.
    n : int
        Operator size.
    k : int
        Krylov dimension (``k <= n``).
    v0 : Array
        Start vector, shape ``(n,)``.

    Returns
    -------
    Q : Array
        Orthonormal Krylov basis, shape ``(n, k)``.
    H : Array
        Upper Hessenberg projection ``Q^T A Q``, shape ``(k, k)``.

    Unfilled columns of the basis are zero, so the projections need no masks.
    An invariant subspace found early (breakdown) leaves zero columns behind it,
    which add only zero eigenvalues to ``H``.
    """
    dtype = v0.dtype
    Q = jnp.zeros((n, k + 1), dtype).at[:, 0].set(v0 / jnp.linalg.norm(v0))
    H = jnp.zeros((k + 1, k), dtype)
    tiny = jnp.finfo(dtype).tiny

    def step(j, carry):
        Q, H = carry
        w = matvec(Q[:, j])
        h = Q.T @ w
        w = w - Q @ h
        h2 = Q.T @ w
        w = w - Q @ h2
        h = h + h2
        beta = jnp.linalg.norm(w)
        ok = beta > 1e3 * tiny
        H = H.at[:, j].set(h).at[j + 1, j].set(jnp.where(ok, beta, 0.0))
        Q = Q.at[:, j + 1].set(jnp.where(ok, w / jnp.where(ok, beta, 1.0), 0.0))
        return Q, H

    Q, H = jax.lax.fori_loop(0, k, step, (Q, H))
    return Q[:, :k], H[:k, :k]


@functools.partial(jax.jit, static_argnames=("max_iters",))
def _max_eig(A, max_iters: int, seed) -> Complex[Array, ""]:
    matvec, n = _as_matvec(A)
    k = min(int(max_iters), int(n))
    dtype = A.dtype
    v0 = jax.random.normal(jax.random.key(seed), (n,), dtype=dtype)
    _, H = arnoldi(matvec, n, k, v0)
    eigs = jnp.linalg.eigvals(H)
    return eigs[jnp.argmax(jnp.abs(eigs))]


def max_eig_arnoldi(A, max_iters: int = 200, seed: int = 0) -> Complex[Array, ""]:
    """Eigenvalue of largest modulus, from an Arnoldi projection.

    Parameters
    ----------
    A : Array | BCOO | ReservoirMatrix
        Square matrix ``(n, n)``, dense, BCOO sparse, or with a ``matvec``.
    max_iters : int, default 200
        Krylov dimension (capped at ``n``).
    seed : int, default 0
        Seed of the random start vector.

    Returns
    -------
    Complex scalar: the Ritz value of largest modulus. With ``max_iters >= n``
    this is exact up to rounding.

    Example
    -------
    >>> lam = max_eig_arnoldi(jnp.diag(jnp.arange(1.0, 5.0)))  # ≈ 4
    """
    if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"max_eig_arnoldi: A must be a square matrix, got {A.shape}")
    return _max_eig(A, int(max_iters), seed)


def spectral_radius(A, method: str = "auto", max_iters: int = 200) -> Array:
    """Spectral radius ``max |eig(A)|`` of a square matrix.

    ``method="dense"`` uses a full eigen-decomposition, ``"arnoldi"`` the Krylov
    estimate of :func:`max_eig_arnoldi`; ``"auto"`` takes dense below 1000 rows.
    """
    n = A.shape[-1]
    if method == "auto":
        method = "dense" if n < 1000 else "arnoldi"
    if method == "dense":
        dense = A.todense() if hasattr(A, "todense") else A
        return jnp.max(jnp.abs(jnp.linalg.eigvals(dense)))
    if method == "arnoldi":
        return jnp.abs(max_eig_arnoldi(A, max_iters))
    raise ValueError(
        f"spectral_radius: method must be auto, dense or arnoldi, got {method!r}"
    )
