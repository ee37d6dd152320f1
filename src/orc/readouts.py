"""Readouts: the trained map from reservoir state to output, ``r -> y``.

- :class:`LinearReadout` / :class:`ParallelLinearReadout` — ``y = W_out r``; the
  parallel form has one ``W_out,c`` per chunk, each producing ``out_dim/chunks``
  outputs, concatenated.
- :class:`NonlinearReadout` / :class:`ParallelNonlinearReadout` — ``y = W_out φ(r)``
  with ``φ`` applying a periodic list of element-wise functions: with ``m``
  functions, node ``j`` is kept when ``j % (m+1) == 0`` and mapped by the
  ``i``-th function when ``j % (m+1) == i + 1``.
- :class:`QuadraticReadout` / :class:`ParallelQuadraticReadout` — the nonlinear
  readout with ``φ`` squaring the odd-indexed nodes.
- :class:`EnsembleLinearReadout` — every chunk predicts the whole output and the
  predictions are averaged.

All of them are one implementation (features per chunk, a matrix per chunk,
then concatenate or average). Training never calls ``readout``; it uses the
hooks :meth:`ReadoutBase.prepare_train` (states -> regression features, applied
row by row), :meth:`ReadoutBase.prepare_target` and :meth:`ReadoutBase.set_wout`,
so a custom readout only has to get those right.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._validation import check_dtype, check_dtype_field, check_int, check_leaf

__all__ = [
    "ReadoutBase",
    "LinearReadout",
    "ParallelLinearReadout",
    "NonlinearReadout",
    "ParallelNonlinearReadout",
    "QuadraticReadout",
    "ParallelQuadraticReadout",
    "EnsembleLinearReadout",
]


class ReadoutBase(eqx.Module):
    """Base class of readouts; subclasses implement :meth:`readout`.

    Trained weights live in ``wout``. For ``chunks > 0`` the training features
    are ``(seq_len, chunks, n_features)``, targets ``(seq_len, chunks, n_out)``
    and ``wout`` receives ``(chunks, n_out, n_features)``; for ``chunks == 0``
    the chunk axis is absent everywhere.
    """

    out_dim: int = eqx.field(static=True)
    res_dim: int = eqx.field(static=True)
    chunks: int = eqx.field(default=0, static=True)
    dtype: object = eqx.field(default=jnp.float64, static=True)

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64):
        name = type(self).__name__
        self.out_dim = check_int("out_dim", out_dim, name, minimum=1)
        self.res_dim = check_int("res_dim", res_dim, name, minimum=1)
        self.dtype = check_dtype(dtype, name)

    def __check_init__(self):
        name = type(self).__name__
        check_int("out_dim", self.out_dim, name, minimum=1)
        check_int("res_dim", self.res_dim, name, minimum=1)
        check_int("chunks", self.chunks, name, minimum=0)
        check_dtype_field(name, self.dtype)

    @abc.abstractmethod
    def readout(self, res_state: Array) -> Array:
        """Output ``(out_dim,)`` of one reservoir state."""

    def batch_readout(self, res_state: Array) -> Array:
        """:meth:`readout` mapped over a leading axis."""
        return jax.vmap(self.readout)(res_state)

    def __call__(self, res_state: Array) -> Array:
        """Read out one state or a sequence of states (one more leading axis)."""
        single_rank = 2 if self.chunks > 0 else 1
        if res_state.ndim == single_rank:
            return self.readout(res_state)
        if res_state.ndim == single_rank + 1:
            return self.batch_readout(res_state)
        raise ValueError(
            f"{type(self).__name__}: res_state must be {single_rank}-D or "
            f"{single_rank + 1}-D, got shape {tuple(res_state.shape)}"
        )

    def prepare_train(self, res_seq: Array) -> Array:
        """Regression features of a state sequence (identity by default)."""
        return res_seq

    def prepare_target(self, target_seq: Array) -> Array:
        """Regression targets of a ``(seq_len, out_dim)`` sequence (identity by default)."""
        return target_seq

    def set_wout(self, cmat: Array) -> ReadoutBase:
        """A copy with ``wout`` replaced by the trained weights ``cmat``."""
        return eqx.tree_at(lambda r: r.wout, self, cmat.astype(self.dtype))


class _LinearReadoutCore(ReadoutBase):
    """Shared implementation: per-chunk features, per-chunk matrix, combine."""

    wout: Array
    nonlin_list: tuple[Callable, ...] = eqx.field(static=True)
    ensemble: bool = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        if not isinstance(self.nonlin_list, tuple) or not all(
            callable(f) for f in self.nonlin_list
        ):
            raise TypeError(f"{name}: nonlin_list must be a tuple of callables")
        if not isinstance(self.ensemble, bool):
            raise TypeError(f"{name}: ensemble must be a bool")
        n_chunks = max(self.chunks, 1)
        if not self.ensemble and self.out_dim % n_chunks:
            raise ValueError(
                f"{name}: chunks ({n_chunks}) must evenly divide out_dim ({self.out_dim})"
            )
        per_chunk = self.out_dim if self.ensemble else self.out_dim // n_chunks
        lead = (self.chunks,) if self.chunks > 0 else ()
        check_leaf(
            name, "wout", self.wout, lead + (per_chunk, self.res_dim), self.dtype
        )

    def _init(self, out_dim, res_dim, chunks, dtype, nonlin_list, ensemble):
        name = type(self).__name__
        ReadoutBase.__init__(self, out_dim, res_dim, dtype)
        self.chunks = chunks
        n_chunks = max(chunks, 1)
        if not ensemble and self.out_dim % n_chunks:
            raise ValueError(
                f"{name}: chunks ({n_chunks}) must evenly divide out_dim ({self.out_dim})"
            )
        nonlin_list = tuple(nonlin_list)
        for f in nonlin_list:
            if not callable(f):
                raise TypeError(
                    f"{name}: nonlin_list entries must be callables, got {f!r}"
                )
        self.nonlin_list = nonlin_list
        self.ensemble = ensemble
        per_chunk = self.out_dim if ensemble else self.out_dim // n_chunks
        shape = (
            (per_chunk, self.res_dim)
            if chunks == 0
            else (chunks, per_chunk, self.res_dim)
        )
        self.wout = jnp.zeros(shape, dtype=self.dtype)

    def nonlinear_transform(self, res_state: Array) -> Array:
        """Apply the periodic list of element-wise functions along the last axis."""
        period = len(self.nonlin_list) + 1
        out = res_state
        for i, f in enumerate(self.nonlin_list):
            out = out.at[..., i + 1 :: period].set(f(res_state[..., i + 1 :: period]))
        return out

    def _check_state(self, res_state):
        shape = (self.chunks, self.res_dim) if self.chunks > 0 else (self.res_dim,)
        if tuple(res_state.shape) != shape:
            raise ValueError(
                f"{type(self).__name__}.readout: res_state must have shape {shape}, "
                f"got {tuple(res_state.shape)}"
            )

    def readout(self, res_state: Array) -> Array:
        """``W_out,c φ(r_c)`` per chunk, concatenated (or averaged for ensembles)."""
        self._check_state(res_state)
        feats = self.nonlinear_transform(res_state)
        if self.chunks == 0:
            return self.wout @ feats
        per_chunk = jnp.einsum("cof,cf->co", self.wout, feats)
        return jnp.mean(per_chunk, axis=0) if self.ensemble else per_chunk.reshape(-1)

    def linear_weights(self):
        """``wout`` as ``(C, out_dim // C, res_dim)`` when the readout is the
        plain product ``concat_c(W_out,c r_c)`` (no feature functions, no
        ensemble average, not overridden), else ``None``."""
        cls = type(self)
        if (
            self.nonlin_list
            or self.ensemble
            or cls.readout is not _LinearReadoutCore.readout
            or cls.nonlinear_transform is not _LinearReadoutCore.nonlinear_transform
        ):
            return None
        return self.wout[None] if self.chunks == 0 else self.wout

    def prepare_train(self, res_seq: Array) -> Array:
        """Features ``φ(r)`` of states ``(seq_len, [chunks,] res_dim)``."""
        return self.nonlinear_transform(res_seq)

    def prepare_target(self, target_seq: Array) -> Array:
        """``(seq_len, out_dim)`` -> per-chunk targets ``(seq_len, chunks, n_out)``."""
        if self.chunks == 0:
            return target_seq
        if self.ensemble:
            return jnp.repeat(target_seq[:, None, :], self.chunks, axis=1)
        return target_seq.reshape(target_seq.shape[0], self.chunks, -1)


_SQUARE = (jnp.square,)


class ParallelLinearReadout(_LinearReadoutCore):
    """Linear readout of ``chunks`` reservoirs: ``y = concat_c(W_out,c r_c)``.

    ``wout`` has shape ``(chunks, out_dim // chunks, res_dim)``, zeros until trained.
    """

    def __init__(
        self, out_dim: int, res_dim: int, chunks: int = 1, dtype=jnp.float64, *, seed=0
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, (), False)


class LinearReadout(_LinearReadoutCore):
    """Linear readout ``y = W_out r`` of one reservoir; ``wout`` is ``(out_dim, res_dim)``."""

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64, *, seed=0):
        self._init(out_dim, res_dim, 0, dtype, (), False)


class ParallelNonlinearReadout(_LinearReadoutCore):
    """``y = concat_c(W_out,c φ(r_c))`` with ``φ`` from ``nonlin_list`` (see module doc).

    Parameters
    ----------
    out_dim, res_dim : int
    nonlin_list : sequence of callables
        Element-wise functions, e.g. ``[jnp.square]`` or ``[jnp.sin, jnp.cos]``.
        Stored as a static tuple, so models stay valid ``jax.jit`` arguments.
    chunks : int, default 1
    dtype : dtype, default float64
    """

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        nonlin_list: Sequence[Callable],
        chunks: int = 1,
        dtype=jnp.float64,
        *,
        seed=0,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, nonlin_list, False)


class NonlinearReadout(_LinearReadoutCore):
    """``y = W_out φ(r)`` for one reservoir, ``φ`` from ``nonlin_list``."""

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        nonlin_list: Sequence[Callable],
        dtype=jnp.float64,
        *,
        seed=0,
    ):
        self._init(out_dim, res_dim, 0, dtype, nonlin_list, False)


class ParallelQuadraticReadout(_LinearReadoutCore):
    """Parallel readout with odd-indexed nodes squared: ``φ(r)_j = r_j^2`` for odd ``j``."""

    def __init__(
        self, out_dim: int, res_dim: int, chunks: int = 1, dtype=jnp.float64, *, seed=0
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, _SQUARE, False)


class QuadraticReadout(_LinearReadoutCore):
    """Single-reservoir readout with odd-indexed nodes squared."""

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64, *, seed=0):
        self._init(out_dim, res_dim, 0, dtype, _SQUARE, False)


class EnsembleLinearReadout(_LinearReadoutCore):
    """Each chunk predicts the full output; ``y = mean_c W_out,c r_c``.

    ``wout`` has shape ``(chunks, out_dim, res_dim)``. Each member is fitted to
    the full target independently.
    """

    def __init__(
        self, out_dim: int, res_dim: int, chunks: int = 5, dtype=jnp.float64, *, seed=0
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, (), True)
