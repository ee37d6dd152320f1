"""Numerical utilities: Arnoldi iteration and spectral radius.

``max_eig_arnoldi`` keeps ORC's name and signature and accepts a dense matrix,
a ``jax.experimental.sparse.BCOO`` matrix or an :class:`orc.drivers.ReservoirMatrix`.
The iteration runs on the host in numpy (it is a one-off, matrix-vector bound
computation with nothing to gain from compilation); under ``jax.jit`` it is
reached through ``jax.pure_callback``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex

__all__ = ["arnoldi", "max_eig_arnoldi", "spectral_radius_np"]


def arnoldi(matvec, n: int, k: int, v0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``k`` steps of Arnoldi with classical Gram–Schmidt applied twice (CGS2).

    Parameters
    ----------
    matvec : callable ``v -> A @ v`` on numpy vectors, for an ``(n, n)`` operator.
    n : operator size.  k : Krylov dimension (``<= n``).  v0 : start vector ``(n,)``.

    Returns
    -------
    Q ``(n, k)`` orthonormal Krylov basis and H ``(k, k)`` upper Hessenberg
    ``Q^T A Q``. On breakdown (an invariant subspace) the iteration stops and
    H is truncated to the subspace found, whose Ritz values are then exact.
    """
    Q = np.zeros((n, k + 1))
    H = np.zeros((k + 1, k))
    Q[:, 0] = v0 / np.linalg.norm(v0)
    scale = 0.0
    for j in range(k):
        w = matvec(Q[:, j])
        scale = max(scale, np.linalg.norm(w))
        h = Q[:, : j + 1].T @ w
        w = w - Q[:, : j + 1] @ h
        h2 = Q[:, : j + 1].T @ w
        w = w - Q[:, : j + 1] @ h2
        H[: j + 1, j] = h + h2
        beta = np.linalg.norm(w)
        if beta <= 1e-12 * max(scale, 1e-300):
            return Q[:, : j + 1], H[: j + 1, : j + 1]
        H[j + 1, j] = beta
        Q[:, j + 1] = w / beta
    return Q[:, :k], H[:k, :k]


def _ell_matvec(values, indices):
    return lambda v: np.sum(values * v[indices], axis=1)


def _max_eig_np(matvec, n: int, max_iters: int, seed: int) -> complex:
    v0 = np.random.default_rng(seed).standard_normal(n)
    _, H = arnoldi(matvec, n, min(int(max_iters), n), v0)
    eigs = np.linalg.eigvals(H)
    return complex(eigs[np.argmax(np.abs(eigs))])


def spectral_radius_np(
    values: np.ndarray, indices: np.ndarray, method: str = "arnoldi"
) -> float:
    """Spectral radius of the ELL matrix ``(values, indices)``, on the host.

    ``"arnoldi"``: the largest Ritz value modulus of a 200-dimensional Krylov
    space (exact for ``n <= 200``; relative error ~1e-5 measured at n = 2000);
    ``"dense"``: full eigenvalues.
    """
    n = values.shape[0]
    if method == "dense":
        dense = np.zeros((n, n))
        np.add.at(dense, (np.arange(n)[:, None], indices), values)
        return float(np.max(np.abs(np.linalg.eigvals(dense))))
    if method == "arnoldi":
        return abs(_max_eig_np(_ell_matvec(values, indices), n, 200, 0))
    raise ValueError(
        f"spectral_radius_np: method must be 'arnoldi' or 'dense', got {method!r}"
    )


def _host_operator(A):
    """numpy matvec and size for a dense array, BCOO or ReservoirMatrix."""
    if hasattr(A, "indices") and hasattr(A, "values"):  # ReservoirMatrix
        return _ell_matvec(np.asarray(A.values), np.asarray(A.indices)), A.shape[-1]
    if hasattr(A, "data") and hasattr(A, "indices"):  # BCOO
        data = np.asarray(A.data)
        rows, cols = np.asarray(A.indices).T
        n = A.shape[-1]

        def matvec(v):
            out = np.zeros(n, dtype=np.result_type(data, v))
            np.add.at(out, rows, data * v[cols])
            return out

        return matvec, n
    dense = np.asarray(A)
    return (lambda v: dense @ v), dense.shape[-1]


def max_eig_arnoldi(A, max_iters: int = 200, seed: int = 0) -> Complex[Array, ""]:
    """Eigenvalue of largest modulus, from an Arnoldi projection.

    Parameters
    ----------
    A : Array | BCOO | ReservoirMatrix, shape ``(n, n)``
    max_iters : int, default 200
        Krylov dimension (capped at ``n``; ``>= n`` gives the exact eigenvalue).
    seed : int, default 0
        Seed of the random start vector.

    Returns
    -------
    Complex scalar: the Ritz value of largest modulus.

    Example
    -------
    >>> max_eig_arnoldi(jnp.diag(jnp.arange(1.0, 5.0)))  # 4+0j
    """
    if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(
            f"max_eig_arnoldi: A must be a square matrix, got shape {A.shape}"
        )
    ctype = jnp.complex128 if jax.config.jax_enable_x64 else jnp.complex64

    def host(A):
        matvec, n = _host_operator(A)
        return np.asarray(_max_eig_np(matvec, n, max_iters, seed), dtype=ctype)

    leaves = jax.tree.leaves(A)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return jax.pure_callback(host, jax.ShapeDtypeStruct((), ctype), A)
    return jnp.asarray(host(A))
