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
- :class:`NLATReadout` — ``y = W_out T(r)`` with ``T`` the transformation T2 or
  T3 of Chattopadhyay et al. (2020), node for node as ReservoirComputing.jl's
  ``NLAT2`` and ``NLAT3`` (:func:`nlat2`, :func:`nlat3`): products of
  neighbouring nodes.

All of them are one implementation (features per chunk, a matrix per chunk,
then concatenate or average) over a bank of readout matrices, ``wout``
``(chunks, n_out, res_dim)``; ``out_dim`` is always the whole output (of
the parallel forms: ``chunks * n_out``, as in ORC 0.4). The single forms are
a bank of one (``wout`` ``(1, out_dim, res_dim)`` as in ORC 0.4) that reads
states ``(res_dim,)``, or the bank's ``(1, res_dim)``, as ORC's do.

Training never calls ``readout``; it uses the hooks
:meth:`ReadoutBase.prepare_train` (states -> regression features, applied
row by row), :meth:`ReadoutBase.prepare_target` and
:meth:`ReadoutBase.set_wout`, so a custom readout only has to get those
right.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._bank import Bank, as_view, lead_axes
from ._defaults import ESN
from ._validation import (
    check_component,
    check_int,
    check_leaf,
    device_array,
    first_index,
    init_component,
)

__all__ = [
    "ReadoutBase",
    "LinearReadout",
    "ParallelLinearReadout",
    "NonlinearReadout",
    "ParallelNonlinearReadout",
    "QuadraticReadout",
    "ParallelQuadraticReadout",
    "EnsembleLinearReadout",
    "NLATReadout",
    "nlat2",
    "nlat3",
]


class ReadoutBase(eqx.Module):
    """Base class of readouts; subclasses implement :meth:`readout`.

    Trained weights live in ``wout``. As in ORC 0.4, the training features
    are ``(seq_len, chunks, n_features)``, targets ``(seq_len, chunks, n_out)``
    and ``wout`` receives ``(chunks, n_out, n_features)``; states a readout
    reads are :attr:`state_shape`: ``(chunks, res_dim)``, or ``(res_dim,)``
    for a readout without a chunk axis (``chunks`` 0, a custom readout's
    default, whose features and targets then have no chunk axis either).
    A single reservoir's readout (a bank of one shown as ``(res_dim,)``)
    also reads a state as its bank, ``(1, res_dim)`` (:attr:`bank_shape`),
    as ORC 0.4's do.
    """

    out_dim: int = eqx.field(static=True)
    res_dim: int = eqx.field(static=True)
    chunks: int = eqx.field(default=0, static=True)
    dtype: object = eqx.field(default=jnp.float64, static=True)
    # Not ORC 0.4's: the scale of the data the weights were trained on, per
    # output (the largest |target|), ``(out_dim,)``, against which a
    # forecast's divergence is judged (orc._divergence). Training sets it
    # (orc.forecaster.train_RCForecaster and the fronts over it); ``None``
    # means unknown: an untrained readout, one whose weights were set by
    # hand, or one read from a file written before it existed (orc.io reads
    # a missing "added_field" as None). It lives here, not on the models,
    # so that the models' fields stay ORC 0.4's, and it travels with the
    # weights it describes (set_readout moves both).
    data_scale: Array | None = eqx.field(default=None, metadata={"added_field": True})

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64):
        init_component(self, dtype, out_dim=out_dim, res_dim=res_dim)

    def __check_init__(self):
        check_component(self, "out_dim", "res_dim")
        check_data_scale(type(self).__name__, self.data_scale, self.out_dim)

    @abc.abstractmethod
    def readout(self, res_state: Array) -> Array:
        """Output ``(out_dim,)`` of one reservoir state."""

    def batch_readout(self, res_state: Array) -> Array:
        """:meth:`readout` mapped over a leading axis."""
        return jax.vmap(self.readout)(res_state)

    @property
    def state_shape(self) -> tuple[int, ...]:
        """Shape of one state it reads (ORC 0.4's rule; see the class doc)."""
        return (self.chunks, self.res_dim)[not self.chunks :]

    @property
    def bank_shape(self) -> tuple[int, ...]:
        """Shape of one state with the bank axis, which the readout also
        reads: :attr:`state_shape` unless the readout shows a bank of one
        without its axis (then ``(1, res_dim)``)."""
        return self.state_shape

    def __call__(self, res_state: Array) -> Array:
        """Read out one state or a sequence of states (one more leading
        axis). A single reservoir's ``(1, res_dim)`` is one state (its bank
        of one), as in ORC 0.4."""
        lead = lead_axes(res_state, self.state_shape, self.bank_shape)
        if lead == 0:
            return self.readout(res_state)
        if lead == 1:
            return self.batch_readout(res_state)
        rank = len(self.state_shape)
        raise ValueError(
            f"{type(self).__name__}: res_state must be one state ({rank}-D, or "
            f"{self.bank_shape}) or a sequence of them, got shape "
            f"{tuple(res_state.shape)}"
        )

    def _one_state(self, res_state: Array) -> Array:
        """``res_state``, one state in :attr:`state_shape` or
        :attr:`bank_shape`, in :attr:`state_shape` (else a ``ValueError``)."""
        owner = f"{type(self).__name__}.readout"
        return as_view(res_state, self.state_shape, self.bank_shape, owner, "res_state")

    def prepare_train(self, res_seq: Array) -> Array:
        """Regression features of a state sequence (identity by default)."""
        return res_seq

    def prepare_target(self, target_seq: Array) -> Array:
        """Regression targets of a ``(seq_len, out_dim)`` sequence (identity by default)."""
        return target_seq

    def set_wout(self, cmat: Array) -> ReadoutBase:
        """A copy with ``wout`` replaced by the trained weights ``cmat``.

        ``cmat`` must hold what a readout may hold (:func:`check_wout_values`,
        the rule a constructor and :func:`orc.load` apply): finite, each
        output's sum of ``|weights|`` at most :func:`wout_bound`; else a
        ``ValueError`` naming ``wout``. Traced weights (training) pass."""
        cmat = cmat.astype(self.dtype)
        check_wout_values(type(self).__name__, cmat, self.dtype)
        return eqx.tree_at(lambda r: r.wout, self, cmat)

    def with_data_scale(self, scale: Array | None) -> ReadoutBase:
        """A copy that records ``scale`` ``(out_dim,)`` as the scale of the
        data its weights were trained on (:attr:`data_scale`; ``None``:
        unknown). Not ORC 0.4's."""
        if scale is not None:
            scale = jnp.asarray(scale, self.dtype)
        check_data_scale(type(self).__name__, scale, self.out_dim)
        return eqx.tree_at(
            lambda r: r.data_scale, self, scale, is_leaf=lambda x: x is None
        )


def _outputs_per_chunk(owner: str, out_dim: int, chunks: int, ensemble: bool) -> int:
    """Outputs of each chunk's matrix: ``out_dim`` for an ensemble (every
    member predicts the whole output), else ``out_dim // chunks``.

    ``out_dim`` is the readout's whole output, as in ORC 0.4 (whose
    ``ESNForecaster`` passes ``out_dim=data_dim``, its parallel readouts a
    ``wout`` of ``(chunks, int(out_dim / chunks), res_dim)``); where
    ``chunks`` does not divide it, ORC's readout gives fewer outputs than
    ``out_dim`` (none when ``out_dim < chunks``), ours refuses it.
    """
    if ensemble:
        return out_dim
    if out_dim % chunks:
        raise ValueError(
            f"{owner}: chunks ({chunks}) must evenly divide out_dim ({out_dim}): "
            f"out_dim is the readout's whole output, split evenly over the "
            f"chunks (as in ORC 0.4; for {out_dim} outputs per chunk pass "
            f"out_dim={chunks * out_dim})"
        )
    return out_dim // chunks


def wout_bound(dtype) -> float:
    """The largest sum of ``|wout|`` over one output's weights that a readout
    may hold: ``sqrt`` of the dtype's largest finite value (1.3e154 in
    float64, 1.8e19 in float32). A reservoir's features lie in [-1, 1]
    (``tanh`` states and their squares), so an output is at most that sum
    in magnitude, and below the bound the output and its square (every
    error metric, the divergence check) are finite numbers of the dtype.
    Ridge training on data of that dtype stays far below it; weights above
    it come from an edited file or model, not from training."""
    return math.sqrt(float(np.finfo(dtype).max))


def check_data_scale(owner: str, scale, out_dim: int) -> None:
    """A readout's :attr:`~ReadoutBase.data_scale`: ``None`` or an array
    ``(out_dim,)`` of finite values >= 0 (traced values: the shape only)."""
    if scale is None:
        return
    if not isinstance(scale, (jax.Array, np.ndarray)):
        raise TypeError(
            f"{owner}: data_scale must be None or an array, got {type(scale).__name__}"
        )
    if tuple(scale.shape) != (out_dim,):
        raise ValueError(
            f"{owner}: data_scale must have shape ({out_dim},) (out_dim), got "
            f"{tuple(scale.shape)}"
        )
    if isinstance(scale, jax.core.Tracer):
        return
    s = np.asarray(scale)
    bad = ~(np.isfinite(s) & (s >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{owner}: data_scale must be finite and >= 0, got {s[i]} at index {i}"
        )


def check_wout_values(owner: str, wout, dtype) -> None:
    """The readouts' value invariant, one check for a built readout and for
    one :func:`orc.load` rebuilds (its ``__check_init__``): ``wout``
    ``(chunks, n_out, n_features)`` is finite and every output's sum of
    ``|wout|`` is at most :func:`wout_bound`. Traced values (a readout built
    under ``jax.jit``/``vmap``) pass."""
    if isinstance(wout, jax.core.Tracer):
        return
    w = np.asarray(wout)
    if w.size == 0:
        return
    bound = wout_bound(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        sums = np.abs(w).sum(axis=-1)
    bad = ~(sums <= bound)  # NaN and inf sums are bad too
    if bad.any():
        idx = first_index(bad)
        raise ValueError(
            f"{owner}: wout must be finite with each output's sum of |weights| at "
            f"most {bound:.3g} (sqrt of the largest {np.dtype(dtype)}), got "
            f"{sums[idx]:.3g} at index {idx} (chunk, output)"
        )


class _LinearReadoutCore(Bank, ReadoutBase):
    """Shared implementation: per-chunk features, per-chunk matrix, combine."""

    wout: Array
    nonlin_list: tuple[Callable, ...] = eqx.field(static=True)
    ensemble: bool = eqx.field(static=True)
    single: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        name = type(self).__name__
        if not isinstance(self.nonlin_list, tuple) or not all(
            callable(f) for f in self.nonlin_list
        ):
            raise TypeError(f"{name}: nonlin_list must be a tuple of callables")
        for flag in ("ensemble", "single"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{name}: {flag} must be a bool")
        check_int(
            "chunks", self.chunks, name, minimum=1, maximum=1 if self.single else None
        )
        check_leaf(name, "wout", self.wout, self.wout_shape, self.dtype)
        check_wout_values(name, self.wout, self.dtype)

    @property
    def wout_shape(self) -> tuple[int, int, int]:
        """The shape ``wout`` has: ``(chunks, outputs per chunk, res_dim)``."""
        name = type(self).__name__
        per_chunk = _outputs_per_chunk(name, self.out_dim, self.chunks, self.ensemble)
        return (self.chunks, per_chunk, self.res_dim)

    def _wout(self):
        """``wout``, its shape checked at trace time (naming it, the shape it
        must have and the one it has): a readout edited with ``eqx.tree_at``
        is not checked by its constructor, and a wrong shape would otherwise
        surface as an einsum error."""
        check_leaf(type(self).__name__, "wout", self.wout, self.wout_shape)
        return self.wout

    def _init(self, out_dim, res_dim, chunks, dtype, nonlin_list, ensemble):
        name = type(self).__name__
        ReadoutBase.__init__(self, out_dim, res_dim, dtype)
        self.single = chunks is None
        self.chunks = 1 if chunks is None else chunks
        per_chunk = _outputs_per_chunk(name, self.out_dim, self.chunks, ensemble)
        nonlin_list = tuple(nonlin_list)
        for f in nonlin_list:
            if not callable(f):
                raise TypeError(
                    f"{name}: nonlin_list entries must be callables, got {f!r}"
                )
        self.nonlin_list = nonlin_list
        self.ensemble = ensemble
        self.wout = device_array(
            np.zeros((self.chunks, per_chunk, self.res_dim)), self.dtype
        )

    def nonlinear_transform(self, res_state: Array) -> Array:
        """Apply the periodic list of element-wise functions along the last axis."""
        period = len(self.nonlin_list) + 1
        out = res_state
        for i, f in enumerate(self.nonlin_list):
            out = out.at[..., i + 1 :: period].set(f(res_state[..., i + 1 :: period]))
        return out

    def readout(self, res_state: Array) -> Array:
        """``W_out,c φ(r_c)`` per chunk, concatenated (or averaged for
        ensembles): ``(out_dim,)`` from one state, :attr:`state_shape` or
        :attr:`bank_shape`."""
        feats = self.nonlinear_transform(self._bank(self._one_state(res_state)))
        per_chunk = jnp.einsum("cof,cf->co", self._wout(), feats, precision="highest")
        return jnp.mean(per_chunk, axis=0) if self.ensemble else per_chunk.reshape(-1)

    def linear_weights(self):
        """``wout`` ``(C, out_dim // C, res_dim)`` when the readout is the
        plain product ``concat_c(W_out,c r_c)`` (no feature functions, no
        ensemble average), else ``None``; for the fused closed loop, which
        uses it only in classes that declare the ``"linear"`` capability."""
        if self.nonlin_list or self.ensemble:
            return None
        return self._wout()

    def states_are_features(self) -> bool:
        """Whether :meth:`prepare_train` is the states themselves in the bank's
        shape (no feature functions; classes declaring ``"linear"``)."""
        return not self.nonlin_list

    def prepare_train(self, res_seq: Array) -> Array:
        """Features ``φ(r)`` of states ``(seq_len, *state_shape)``, in the
        bank's shape ``(seq_len, chunks, res_dim)``. A single readout also
        takes the states of a bank of one, ``(seq_len, 1, res_dim)``, which
        a parallel driver of one reservoir produces (as it reads one such
        state)."""
        bank = self.bank_shape
        if not (res_seq.ndim == 1 + len(bank) and res_seq.shape[1:] == bank):
            res_seq = self._bank(res_seq)
        return self.nonlinear_transform(res_seq)

    def prepare_target(self, target_seq: Array) -> Array:
        """``(seq_len, out_dim)`` -> per-chunk targets ``(seq_len, chunks, n_out)``."""
        if self.ensemble:
            return jnp.repeat(target_seq[:, None, :], self.chunks, axis=1)
        return target_seq.reshape(target_seq.shape[0], self.chunks, -1)


_SQUARE = (jnp.square,)


class ParallelLinearReadout(_LinearReadoutCore):
    """Linear readout of ``chunks`` reservoirs: ``y = concat_c(W_out,c r_c)``.

    ``wout`` has shape ``(chunks, out_dim // chunks, res_dim)``, zeros until trained.
    """

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        chunks: int = ESN.chunks,
        dtype=jnp.float64,
        *,
        seed=ESN.seed,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, (), False)


class LinearReadout(_LinearReadoutCore):
    """Linear readout ``y = W_out r`` of one reservoir (states ``(res_dim,)``);
    ``wout`` is a bank of one, ``(1, out_dim, res_dim)``, as in ORC 0.4."""

    capabilities = frozenset({"linear"})

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64, *, seed=ESN.seed):
        self._init(out_dim, res_dim, None, dtype, (), False)


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

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        nonlin_list: Sequence[Callable],
        chunks: int = ESN.chunks,
        dtype=jnp.float64,
        *,
        seed=ESN.seed,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, nonlin_list, False)


class NonlinearReadout(_LinearReadoutCore):
    """``y = W_out φ(r)`` for one reservoir, ``φ`` from ``nonlin_list``."""

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        nonlin_list: Sequence[Callable],
        dtype=jnp.float64,
        *,
        seed=ESN.seed,
    ):
        self._init(out_dim, res_dim, None, dtype, nonlin_list, False)


class ParallelQuadraticReadout(_LinearReadoutCore):
    """Parallel readout with odd-indexed nodes squared: ``φ(r)_j = r_j^2`` for odd ``j``."""

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        chunks: int = ESN.chunks,
        dtype=jnp.float64,
        *,
        seed=ESN.seed,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, _SQUARE, False)


class QuadraticReadout(_LinearReadoutCore):
    """Single-reservoir readout with odd-indexed nodes squared."""

    capabilities = frozenset({"linear"})

    def __init__(self, out_dim: int, res_dim: int, dtype=jnp.float64, *, seed=ESN.seed):
        self._init(out_dim, res_dim, None, dtype, _SQUARE, False)


class EnsembleLinearReadout(_LinearReadoutCore):
    """Each chunk predicts the full output; ``y = mean_c W_out,c r_c``.

    ``wout`` has shape ``(chunks, out_dim, res_dim)``. Each member is fitted to
    the full target independently.
    """

    capabilities = frozenset({"linear"})

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        chunks: int = ESN.ensemble_chunks,
        dtype=jnp.float64,
        *,
        seed=ESN.seed,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self._init(out_dim, res_dim, chunks, dtype, (), True)


# --------------------------------------------------------------------------- #
# Products of neighbouring nodes (ReservoirComputing.jl's NLAT2 and NLAT3)
# --------------------------------------------------------------------------- #


def _neighbour_products(states, shift: int) -> Array:
    """Each even node ``i`` (counting from 0) with ``2 <= i <= N - 2``
    replaced by ``r_{i-1} r_{i+shift}`` along the last axis."""
    states = jnp.asarray(states)
    i = np.arange(2, states.shape[-1] - 1, 2)
    return states.at[..., i].set(states[..., i - 1] * states[..., i + shift])


def nlat2(states: Array) -> Array:
    """Chattopadhyay et al.'s T2 along the last axis (the nodes): each even
    node ``i`` (counting from 0) with ``2 <= i <= N - 2`` becomes the
    product of the two nodes before it, ``r_{i-1} r_{i-2}``; the other nodes
    are kept. Node for node ReservoirComputing.jl's ``NLAT2`` (its odd nodes
    counting from 1, the last one excepted): ``nlat2(jnp.arange(10.0))`` is
    ``[0, 1, 0, 3, 6, 5, 20, 7, 42, 9]``."""
    return _neighbour_products(states, -2)


def nlat3(states: Array) -> Array:
    """Chattopadhyay et al.'s T3: as :func:`nlat2`, with each of those nodes
    the product of its two neighbours, ``r_{i-1} r_{i+1}``; node for node
    ReservoirComputing.jl's ``NLAT3``: ``nlat3(jnp.arange(10.0))`` is ``[0,
    1, 3, 3, 15, 5, 35, 7, 63, 9]``."""
    return _neighbour_products(states, 1)


_NLAT = {"nlat2": nlat2, "nlat3": nlat3}


class NLATReadout(_LinearReadoutCore):
    """``y = W_out T(r)`` with ``T`` :func:`nlat2` or :func:`nlat3` on each
    reservoir's states (Chattopadhyay et al. 2020; ReservoirComputing.jl's
    ``NLAT2()`` and ``NLAT3()``), one ``W_out,c`` per reservoir as
    :class:`ParallelLinearReadout`'s.

    Put it into a model with ``set_readout``: ``ESNForecaster(3, 300)
    .set_readout(NLATReadout(3, 300, "nlat2"))``, then train as usual. Its
    features are not the states, so closed loops run the generic
    (XLA) path rather than the fused kernels.

    Parameters
    ----------
    out_dim : int
        Outputs (of all reservoirs together).
    res_dim : int
        Nodes per reservoir.
    transform : str
        ``"nlat2"`` (each even node but the first and the last becomes the
        product of the two nodes before it) or ``"nlat3"`` (of its two
        neighbours).
    chunks : int
        Reservoirs; ``1`` reads states ``(res_dim,)`` as the single readouts
        do, more read ``(chunks, res_dim)``.
    dtype : dtype
        ``jnp.float64`` or ``jnp.float32``.

    References
    ----------
    Chattopadhyay, A., Hassanzadeh, P. & Subramanian, D. (2020). Data-driven
    predictions of a multiscale Lorenz 96 chaotic system using
    machine-learning methods: reservoir computing, artificial neural network,
    and long short-term memory network. *Nonlin. Processes Geophys.* 27,
    373-389.
    """

    transform: str = eqx.field(static=True)

    def __init__(
        self,
        out_dim: int,
        res_dim: int,
        transform: str,
        chunks: int = ESN.chunks,
        dtype=jnp.float64,
    ):
        chunks = check_int("chunks", chunks, type(self).__name__, minimum=1)
        self.transform = transform
        self._init(out_dim, res_dim, None if chunks == 1 else chunks, dtype, (), False)

    def __check_init__(self):
        if self.transform not in _NLAT:
            raise ValueError(
                f"{type(self).__name__}: transform must be one of {list(_NLAT)}, "
                f"got {self.transform!r}"
            )

    def nonlinear_transform(self, res_state: Array) -> Array:
        """:func:`nlat2` or :func:`nlat3` of each reservoir's states."""
        return _NLAT[self.transform](res_state)

    def linear_weights(self):
        """``None``: the features are products of states (see the base class)."""
        return None

    def states_are_features(self) -> bool:
        return False
