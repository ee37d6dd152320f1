"""Embeddings: map an input sample into the reservoir, ``u -> p``.

- :class:`LinearEmbedding` — ``p = W_in u`` for one reservoir, ``W_in`` dense
  uniform in ``[-scaling, scaling]``.
- :class:`ParallelLinearEmbedding` — the input is split into ``chunks``
  contiguous pieces (plus ``locality`` neighbours on each side) and each piece is
  embedded into its own reservoir: ``p_c = W_in,c u[local window c]``.
- :class:`EnsembleLinearEmbedding` — every one of ``chunks`` reservoirs sees the
  whole input through its own ``W_in,c``.

The three share one implementation: a gather that forms each reservoir's
input window followed by a matrix-vector product mapped over the bank. Every
one holds a bank of input matrices, ``win`` ``(chunks, res_dim, width)``
(``chunks == 1`` for :class:`LinearEmbedding`, as in ORC 0.4, whose outputs
are shown without the bank axis: ``(res_dim,)``).

Each also has a ``from_matrices`` constructor that takes ``W_in`` as you
give it (from a paper, reservoirpy, ORC 0.4 or your own code) instead of
drawing it; such an embedding records no ``scaling`` (``None``).

Edges of the local windows: with ``periodic=True`` the input wraps around; with
``periodic=False`` the first value is repeated to the left and the last value to
the right (ORC 0.4 pads the right edge with the first value of the input by
mistake; ours extends each edge with its own boundary value).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._bank import to_view
from ._construct import check_construction, uniform_input_matrix
from ._defaults import ESN, arguments
from ._kernels import linear_drive
from ._matrix import given_dense, given_dtype
from ._random import numpy_rng, prng_key
from ._validation import (
    check_component,
    check_float,
    check_int,
    check_leaf,
    device_array,
    from_fields,
    init_component,
)

__all__ = [
    "EmbedBase",
    "LinearEmbedding",
    "ParallelLinearEmbedding",
    "EnsembleLinearEmbedding",
]


class EmbedBase(eqx.Module):
    """Base class of embeddings; subclasses implement :meth:`embed`.

    As in ORC 0.4, outputs are ``(chunks, res_dim)``, or ``(res_dim,)`` for an
    embedding without a chunk axis (``chunks`` 0, a custom embedding's
    default); :attr:`out_shape` says which.
    """

    in_dim: int = eqx.field(static=True)
    res_dim: int = eqx.field(static=True)
    dtype: object = eqx.field(static=True)
    chunks: int = eqx.field(default=0, static=True)

    def __init__(self, in_dim: int, res_dim: int, dtype=jnp.float64):
        init_component(self, dtype, in_dim=in_dim, res_dim=res_dim)

    def __check_init__(self):
        check_component(self, "in_dim", "res_dim")

    @abc.abstractmethod
    def embed(self, in_state: Array) -> Array:
        """Embed one input sample ``(in_dim,)``."""

    def batch_embed(self, in_state: Array) -> Array:
        """:meth:`embed` mapped over a leading axis."""
        return jax.vmap(self.embed)(in_state)

    def __call__(self, in_state: Array) -> Array:
        """Embed one sample ``(in_dim,)`` or a sequence ``(seq_len, in_dim)``."""
        if in_state.ndim == 1:
            return self.embed(in_state)
        if in_state.ndim == 2:
            return self.batch_embed(in_state)
        raise ValueError(
            f"{type(self).__name__}: in_state must be 1-D or 2-D, "
            f"got shape {tuple(in_state.shape)}"
        )

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of one embedded input (ORC 0.4's rule; see the class doc)."""
        return (self.chunks, self.res_dim)[not self.chunks :]

    def _check_input(self, in_state):
        if tuple(in_state.shape) != (self.in_dim,):
            raise ValueError(
                f"{type(self).__name__}.embed: in_state must have shape "
                f"({self.in_dim},), got {tuple(in_state.shape)}"
            )


def _window_indices(in_dim, chunks, locality, periodic, ensemble) -> np.ndarray:
    """Input index feeding each (chunk, slot) of the local windows."""
    if ensemble:
        return np.broadcast_to(np.arange(in_dim), (chunks, in_dim))
    size = in_dim // chunks
    idx = (np.arange(chunks)[:, None] * size - locality) + np.arange(
        size + 2 * locality
    )
    return np.mod(idx, in_dim) if periodic else np.clip(idx, 0, in_dim - 1)


def _take_windows(in_state: Array, window: np.ndarray) -> Array:
    """``in_state[..., window]``: the input window of each reservoir. Where
    every reservoir sees the whole input in order (one reservoir, an
    ensemble), a broadcast instead of a gather: XLA's CPU gather inside the
    step loop cost a 500-node classifier ~7% of its time."""
    if window.shape[-1] == in_state.shape[-1] and np.array_equal(
        window, np.broadcast_to(np.arange(window.shape[-1]), window.shape)
    ):
        return jnp.broadcast_to(
            in_state[..., None, :], in_state.shape[:-1] + window.shape
        )
    return in_state[..., window]


def _check_scaling(owner: str, scaling) -> None:
    """The linear embeddings' value invariant, one check for a constructor's
    argument and for a built or loaded embedding's field: ``scaling``, the
    bound of the uniform draw ``W_in ~ U(-scaling, scaling)``, is finite and
    >= 0. Traced values pass."""
    check_float("scaling", scaling, owner, low=0.0)


class _LinearEmbeddingCore(EmbedBase):
    """Shared implementation of the linear embeddings. ``scaling`` is the
    recorded bound of the uniform draw; ``None`` for a given ``W_in``
    (``from_matrices``)."""

    win: Array
    scaling: Array | None
    locality: int = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    ensemble: bool = eqx.field(static=True)
    chunk_size: int = eqx.field(static=True)
    single: bool = eqx.field(default=False, static=True)

    capabilities = frozenset({"linear"})

    def __check_init__(self):
        name = type(self).__name__
        check_int("locality", self.locality, name, minimum=0)
        for flag in ("periodic", "ensemble", "single"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{name}: {flag} must be a bool")
        check_int(
            "chunks", self.chunks, name, minimum=1, maximum=1 if self.single else None
        )
        if not self.ensemble and self.in_dim % self.chunks:
            raise ValueError(
                f"{name}: chunks ({self.chunks}) must evenly divide in_dim ({self.in_dim})"
            )
        size = self.in_dim if self.ensemble else self.in_dim // self.chunks
        if self.chunk_size != size:
            raise ValueError(
                f"{name}: chunk_size must be {size} for in_dim {self.in_dim} and "
                f"{self.chunks} chunks, got {self.chunk_size}"
            )
        width = size + (0 if self.ensemble else 2 * self.locality)
        shape = (self.chunks, self.res_dim, width)
        check_leaf(name, "win", self.win, shape, self.dtype)
        if self.scaling is not None:
            check_leaf(name, "scaling", self.scaling, (), self.dtype)
            _check_scaling(name, self.scaling)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """``(res_dim,)`` for a single reservoir, else ``(chunks, res_dim)``."""
        return (self.chunks, self.res_dim)[self.single :]

    def _view(self, x):
        return to_view(x, (self.chunks, self.res_dim), self.out_shape)

    def _init(
        self,
        *,
        in_dim,
        res_dim,
        scaling,
        dtype,
        chunks,
        seed,
        construction,
        locality=ESN.locality,
        periodic=ESN.periodic,
        ensemble=False,
    ):
        """``chunks=None`` makes a single embedding (a bank of one, shown
        without its axis)."""
        name = type(self).__name__
        EmbedBase.__init__(self, in_dim, res_dim, dtype)
        self.single = chunks is None
        self.chunks = (
            1 if chunks is None else check_int("chunks", chunks, name, minimum=1)
        )
        self.locality = check_int("locality", locality, name, minimum=0)
        self.periodic = bool(periodic)
        self.ensemble = ensemble
        if not ensemble and self.in_dim % self.chunks:
            raise ValueError(
                f"{name}: chunks ({self.chunks}) must evenly divide in_dim ({self.in_dim})"
            )
        _check_scaling(name, scaling)
        self.chunk_size = self.in_dim if ensemble else self.in_dim // self.chunks
        width = self.chunk_size + (0 if ensemble else 2 * self.locality)
        self.scaling = device_array(scaling, self.dtype)
        shape = (self.chunks, self.res_dim, width)
        if construction == "jax":  # traceable (orc._construct), scaling too
            key = prng_key(seed, name)
            win = uniform_input_matrix(key, shape, self.scaling, self.dtype)
        elif construction == "orc04":
            scale = float(scaling)  # ORC 0.4's exact draw (orc._orc04)
            from ._orc04 import orc04_uniform

            win = orc04_uniform(seed, shape, scale, self.dtype)
        else:
            check_construction(construction, name)
            scale = float(scaling)
            win = numpy_rng(seed, name).uniform(-scale, scale, size=shape)
        self.win = jnp.asarray(win, dtype=self.dtype)

    @classmethod
    def _from_matrices(
        cls,
        W_in,
        *,
        single,
        ensemble,
        in_dim=None,
        locality=ESN.locality,
        periodic=ESN.periodic,
        dtype,
    ):
        """The embedding with the input matrices ``W_in`` (the
        ``from_matrices`` constructors); ``single``: a single embedding."""
        name = cls.__name__
        win = given_dense(name, "W_in", W_in)
        if win.ndim == 2:
            win = win[None]
        expected = (
            "(N, in_dim) or (1, N, in_dim)"
            if single
            else "(chunks, N, in_dim)"
            if ensemble
            else "(chunks, N, in_dim // chunks + 2 * locality)"
        )
        if win.ndim != 3 or 0 in win.shape:
            raise ValueError(
                f"{name}: W_in must have shape {expected}, got {tuple(win.shape)}"
            )
        chunks, res_dim, width = win.shape
        if single and chunks != 1:
            raise ValueError(
                f"{name}: W_in must be one matrix {expected}, got a bank of {chunks}; "
                "ParallelLinearEmbedding.from_matrices or "
                "EnsembleLinearEmbedding.from_matrices takes a bank"
            )
        locality = check_int("locality", locality, name, minimum=0)
        if not isinstance(periodic, (bool, np.bool_)):
            raise TypeError(f"{name}: periodic must be a bool, got {periodic!r}")
        size = width - 2 * locality
        if size < 1:
            raise ValueError(
                f"{name}: W_in of shape {tuple(win.shape)} has {width} columns, "
                f"fewer than the 2 * locality + 1 = {2 * locality + 1} a window of "
                f"locality {locality} needs"
            )
        inferred = size if ensemble else chunks * size
        if in_dim is not None:
            in_dim = check_int("in_dim", in_dim, name, minimum=1)
            if in_dim % chunks:
                raise ValueError(
                    f"{name}: in_dim ({in_dim}) must be a multiple of the {chunks} "
                    f"chunks of W_in {tuple(win.shape)}"
                )
            if in_dim != inferred:
                raise ValueError(
                    f"{name}: W_in must have shape {expected} = "
                    f"({chunks}, {res_dim}, {in_dim // chunks + 2 * locality}) for "
                    f"in_dim {in_dim}, {chunks} chunks and locality {locality}, "
                    f"got {tuple(win.shape)}"
                )
        dtype = given_dtype(name, dtype, win.dtype)
        return from_fields(
            cls,
            dict(
                in_dim=inferred,
                res_dim=res_dim,
                dtype=dtype,
                chunks=chunks,
                win=jnp.asarray(win, dtype),
                scaling=None,
                locality=locality,
                periodic=bool(periodic),
                ensemble=ensemble,
                chunk_size=size,
                single=single,
            ),
        )

    def _window(self) -> np.ndarray:
        return _window_indices(
            self.in_dim, self.chunks, self.locality, self.periodic, self.ensemble
        )

    def localize(self, in_state: Float[Array, " in_dim"]) -> Array:
        """Each reservoir's input window, ``(chunks, chunk_size + 2 * locality)``."""
        return _take_windows(in_state, self._window())

    def embed(self, in_state: Float[Array, " in_dim"]) -> Array:
        """``W_in,c @ window_c(u)`` for every reservoir of the bank:
        ``(chunks, res_dim)``, or ``(res_dim,)`` for a single reservoir."""
        self._check_input(in_state)
        # the multiply-adds of batch_embed (linear_drive): the same numbers as
        # the training drive, unchanged by vmap, and no transposed copy of the
        # product per step (a contraction under vmap puts the batch last)
        return self._view(linear_drive(self.win, self.localize(in_state)[None])[0])

    def batch_embed(self, in_state: Float[Array, "batch in_dim"]) -> Array:
        """:meth:`embed` of every row, as one product for the whole batch
        (:func:`orc._kernels.linear_drive` of :meth:`linear_factors`: with a
        narrow input window, multiply-adds over the output, ~20x faster on CPU
        than the contraction ``vmap`` of :meth:`embed` gives)."""
        if in_state.ndim != 2 or in_state.shape[-1] != self.in_dim:
            return super().batch_embed(in_state)
        return self._view(linear_drive(*self.linear_factors(in_state)))

    def linear_window(self):
        """``(win (C, res_dim, w), window (C, w))`` with ``embed(u)`` in the
        bank's shape ``[c] = win[c] @ u[window[c]]``: what the fused kernels
        use (for classes that declare the ``"linear"`` capability)."""
        return self.win, np.asarray(self._window(), np.int32)

    def linear_factors(self, in_state: Float[Array, "batch in_dim"]):
        """``(win (C, res_dim, w), windows (batch, C, w))`` with
        ``batch_embed(in_state)`` in the bank's shape ``[b, c] = win[c] @
        windows[b, c]``: the input weights and the few input values each
        reservoir sees."""
        return self.win, _take_windows(in_state, self._window())


class ParallelLinearEmbedding(_LinearEmbeddingCore):
    """Local linear embedding for ``chunks`` parallel reservoirs.

    Chunk ``c`` receives inputs ``u[c*s - locality : (c+1)*s + locality]`` with
    ``s = in_dim // chunks`` (wrapped if ``periodic`` else edge-extended) and
    ``p_c = W_in,c @ window_c``, ``W_in,c ~ U(-scaling, scaling)`` of shape
    ``(res_dim, s + 2*locality)``.

    Parameters
    ----------
    in_dim : int
    res_dim : int
    scaling : float
    dtype : dtype, default float64
    chunks : int, default 1 (must divide ``in_dim``)
    locality : int, default 0
    periodic : bool, default True
    seed : int or PRNG key
    construction : {"orc", "orc04", "jax"}, default "orc"
        ``"orc04"``: exactly ORC 0.4's ``win`` for the same ``seed``;
        ``"jax"``: drawn by ``jax.random`` (traceable), see
        :class:`orc.drivers.ParallelESNDriver`.

    Example
    -------
    >>> emb = ParallelLinearEmbedding(8, 50, 0.1, chunks=4, locality=1, seed=0)
    >>> emb.embed(jnp.ones(8)).shape
    (4, 50)
    """

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        in_dim: int,
        res_dim: int,
        scaling: float,
        dtype: type = jnp.float64,
        chunks: int = ESN.chunks,
        locality: int = ESN.locality,
        periodic: bool = ESN.periodic,
        *,
        seed: int,
        construction: str = ESN.construction,
    ) -> None:
        self._init(**arguments(locals()))

    @classmethod
    def from_matrices(
        cls,
        W_in,
        *,
        locality: int = ESN.locality,
        periodic: bool = ESN.periodic,
        in_dim: int | None = None,
        dtype=None,
    ) -> ParallelLinearEmbedding:
        """A local embedding with the input matrices you give, one per reservoir.

        ``p_c = W_in[c] @ window_c(u)`` as for the constructor, with ``W_in``
        taken as given (not drawn, not rescaled: multiply it yourself to
        scale it). Built on the host, not under ``jax.jit``/``vmap``.

        Parameters
        ----------
        W_in : array, ``(chunks, N, in_dim // chunks + 2 * locality)``
            Reservoir ``c``'s input matrix is ``W_in[c]``; its columns are
            the window's inputs, from ``locality`` left neighbours through
            the chunk's own ``in_dim // chunks`` inputs to ``locality`` right
            neighbours. A NumPy or JAX array or nested lists (``(N, w)``: a
            bank of one); ``scipy.sparse`` and ``BCOO`` matrices (or a list
            of ``(N, w)`` matrices) are made dense, as ``win`` is dense in
            the kernels. Real and finite.
        locality : int, default 0
            Neighbours on each side of a chunk.
        periodic : bool, default True
            Windows wrap around the input (else the edge values repeat).
        in_dim : int, optional
            Inferred from ``W_in``: ``chunks * (w - 2 * locality)``. Given,
            it is checked against that (a guard against a wrong
            ``locality``).
        dtype : dtype, optional
            Default: float32 for a float32 (or narrower) ``W_in``, else
            float64 (with JAX's x64 off, float64 warns and gives float32).

        Returns
        -------
        ParallelLinearEmbedding
            ``scaling`` is ``None``; outputs ``(chunks, N)``.

        Raises
        ------
        ValueError
            ``W_in`` of another rank, fewer than ``2 * locality + 1``
            columns, not matching ``in_dim``; a NaN or inf entry.
        TypeError
            Complex or non-numeric entries; a traced ``W_in``.

        Example
        -------
        >>> W_in = np.random.default_rng(0).uniform(-0.1, 0.1, (4, 50, 4))
        >>> emb = ParallelLinearEmbedding.from_matrices(W_in, locality=1)
        >>> emb.in_dim, emb.embed(jnp.ones(8)).shape
        (8, (4, 50))
        """
        return cls._from_matrices(
            W_in,
            single=False,
            ensemble=False,
            in_dim=in_dim,
            locality=locality,
            periodic=periodic,
            dtype=dtype,
        )


class LinearEmbedding(_LinearEmbeddingCore):
    """Dense linear embedding ``p = W_in u`` for a single reservoir.

    ``W_in ~ U(-scaling, scaling)``; ``win`` is a bank of one, ``(1, res_dim,
    in_dim)`` as in ORC 0.4, and the output is ``(res_dim,)``.

    Example
    -------
    >>> LinearEmbedding(3, 100, 0.08, seed=0).embed(jnp.ones(3)).shape
    (100,)
    """

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        in_dim: int,
        res_dim: int,
        scaling: float,
        dtype: type = jnp.float64,
        *,
        seed: int,
        construction: str = ESN.construction,
    ) -> None:
        self._init(chunks=None, **arguments(locals()))

    @classmethod
    def from_matrices(cls, W_in, *, dtype=None) -> LinearEmbedding:
        """A single embedding ``p = W_in u`` with the matrix ``W_in`` you give.

        ``W_in`` ``(N, in_dim)`` (or a bank of one ``(1, N, in_dim)``, e.g.
        another embedding's ``win``) is taken as given; ``in_dim`` and
        ``N`` are its shape. Dense, or ``scipy.sparse``/``BCOO`` made
        dense; ``dtype`` as for
        :meth:`ParallelLinearEmbedding.from_matrices`. ``scaling`` is
        ``None``; outputs ``(N,)``.

        Example
        -------
        >>> W_in = np.random.default_rng(0).uniform(-0.1, 0.1, (100, 3))
        >>> LinearEmbedding.from_matrices(W_in).embed(jnp.ones(3)).shape
        (100,)
        """
        return cls._from_matrices(W_in, single=True, ensemble=False, dtype=dtype)


class EnsembleLinearEmbedding(_LinearEmbeddingCore):
    """Each of ``chunks`` reservoirs sees the whole input: ``p_c = W_in,c u``.

    Output shape ``(chunks, res_dim)``.
    """

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        in_dim: int,
        res_dim: int,
        scaling: float,
        chunks: int = ESN.ensemble_chunks,
        dtype: type = jnp.float64,
        *,
        seed: int,
        construction: str = ESN.construction,
    ) -> None:
        self._init(ensemble=True, **arguments(locals()))

    @classmethod
    def from_matrices(cls, W_in, *, dtype=None) -> EnsembleLinearEmbedding:
        """An ensemble embedding ``p_c = W_in[c] u`` with the matrices
        ``W_in`` ``(chunks, N, in_dim)`` you give, taken as given
        (``(N, in_dim)``: a bank of one); ``in_dim`` is its last axis.
        Dense, or ``scipy.sparse``/``BCOO`` made dense; ``dtype`` as for
        :meth:`ParallelLinearEmbedding.from_matrices`. ``scaling`` is
        ``None``; outputs ``(chunks, N)``."""
        return cls._from_matrices(W_in, single=False, ensemble=True, dtype=dtype)
