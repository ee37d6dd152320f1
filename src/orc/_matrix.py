"""Random sparse reservoir matrices.

A reservoir matrix ``W`` (``n x n``) has exactly ``k = max(1, round(density * n))``
non-zeros in every row, at distinct uniformly random columns, with standard
normal values, scaled afterwards to the requested spectral radius. Storing a
fixed number of entries per row (ELL layout: ``values`` and ``indices`` of shape
``(n, k)``) makes the product ``W @ x`` a gather and a row sum with no index
bookkeeping, and it maps with ``vmap`` over parallel reservoirs unchanged.

ORC draws ``density * n**2`` positions over the whole matrix instead, so its row
counts vary (binomially); both give the same expected density and, after
normalisation, the same spectral radius. The fixed count removes the rare empty
row, whose node would then only see its input.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .utils.numerics import spectral_radius

__all__ = ["ReservoirMatrix", "random_reservoir_matrix", "distinct_columns"]


class ReservoirMatrix(eqx.Module):
    """Square sparse matrix with a fixed number of entries per row.

    Attributes
    ----------
    values : Array, shape ``(n, k)``
        Non-zero values of each row.
    indices : Array, shape ``(n, k)``
        Column of each value (distinct within a row).
    """

    values: Float[Array, "n k"]
    indices: Int[Array, "n k"]

    @property
    def shape(self) -> tuple[int, int]:
        n = self.values.shape[-2]
        return (n, n)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def nnz(self) -> int:
        return self.values.shape[-2] * self.values.shape[-1]

    def matvec(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        """``W @ x``."""
        return jnp.sum(self.values * x[self.indices], axis=-1)

    def __matmul__(self, x):
        if x.ndim == 1:
            return self.matvec(x)
        return jax.vmap(self.matvec, in_axes=-1, out_axes=-1)(x)

    def todense(self) -> Float[Array, "n n"]:
        n = self.values.shape[-2]
        rows = jnp.broadcast_to(jnp.arange(n)[:, None], self.indices.shape)
        return (
            jnp.zeros((n, n), self.values.dtype).at[rows, self.indices].add(self.values)
        )

    def scale(self, factor) -> ReservoirMatrix:
        return eqx.tree_at(lambda m: m.values, self, self.values * factor)


def distinct_columns(key, n_rows: int, n_cols: int, k: int) -> Int[Array, "r k"]:
    """``k`` distinct uniformly random columns in ``[0, n_cols)`` for each row.

    Floyd's sampling algorithm, vectorised over rows: ``O(n_rows * k**2)`` work
    and memory ``O(n_rows * k)``, instead of sorting ``n_rows * n_cols`` keys.
    Each row's set is a uniform ``k``-subset; the order within a row is not
    meaningful.
    """
    if not 0 < k <= n_cols:
        raise ValueError(f"distinct_columns: need 0 < k <= n_cols, got k={k}")
    slots = jnp.arange(k)

    def body(i, cols):
        j = n_cols - k + i
        t = jax.random.randint(
            jax.random.fold_in(key, i), (n_rows,), 0, j + 1, dtype=jnp.int32
        )
        taken = jnp.any((cols == t[:, None]) & (slots < i), axis=1)
        return cols.at[:, i].set(jnp.where(taken, j, t))

    cols = jnp.zeros((n_rows, k), jnp.int32)
    return jax.lax.fori_loop(0, k, body, cols)


def nonzeros_per_row(n: int, density: float) -> int:
    return int(min(n, max(1, round(density * n))))


def _random_matrix(key, n: int, k: int, dtype) -> ReservoirMatrix:
    kc, kv = jax.random.split(key)
    cols = distinct_columns(kc, n, n, k)
    vals = jax.random.normal(kv, (n, k), dtype=dtype)
    return ReservoirMatrix(vals, cols)


_random_matrix_jit = jax.jit(_random_matrix, static_argnums=(1, 2, 3))


def random_reservoir_matrix(
    key, n: int, density: float, spectral_radius_target, dtype, eig_method: str = "auto"
) -> ReservoirMatrix:
    """A random sparse ``n x n`` matrix scaled to the given spectral radius."""
    k = nonzeros_per_row(n, density)
    W = _random_matrix_jit(key, n, k, jnp.dtype(dtype))
    rho = spectral_radius(W, method=eig_method)
    rho = eqx.error_if(
        rho,
        rho <= 0,
        "reservoir matrix has spectral radius 0 (nilpotent draw); use another seed "
        "or a higher density",
    )
    return W.scale(jnp.asarray(spectral_radius_target, dtype) / rho)
