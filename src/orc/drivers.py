"""Reservoir drivers: the state update ``r -> r'`` of the embedding → driver → readout pipeline.

A driver advances the reservoir state given the embedded input ``p``:

- :class:`ESNDriver` / :class:`ParallelESNDriver` — echo state network. Discrete
  mode ``r' = (1 - a) r + a tanh(W r + p + b)``; continuous mode returns the
  vector field ``dr/dt = γ (-r + tanh(W r + p + b))``.
- :class:`TaylorDriver` / :class:`ParallelTaylorDriver` — the tanh of the ESN
  replaced by its Taylor polynomial around the bias (no leak).
- :class:`GRUDriver` — an untrained gated recurrent unit as the reservoir.
- :class:`StackedDriver` / :class:`DeepESNDriver` — deep (stacked) reservoirs:
  layer ``l`` is driven by the new state of layer ``l - 1``; the state is the
  concatenation of all layers, so every readout reads all of them.

Every ESN and Taylor driver is a bank of reservoirs (``wr`` holds one matrix
per reservoir, ``(chunks, res_dim, res_dim)``; a single reservoir is a bank of
one) and its update is written for one reservoir and mapped over the bank
with ``vmap`` (see :mod:`orc._bank`). States of a ``Parallel*`` driver are
``(chunks, res_dim)``; the single forms (``ESNDriver``, ``TaylorDriver``,
``chunks == 1``) take ``(res_dim,)`` or their bank of one ``(1, res_dim)``
and return ``(res_dim,)``, as in ORC 0.4.

Subclass :class:`DriverBase` and implement ``advance`` to write your own.
"""

from __future__ import annotations

import abc
import functools
import itertools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from . import _strategy
from ._bank import Bank, as_view, declares, lead_axes
from ._construct import GIVEN, built_bank, check_construction
from ._defaults import ESN, MATRICES, arguments
from ._kernels import Kernels, current
from ._matrix import (
    ReservoirMatrix,
    acyclic_pattern,
    ell_from_entries,
    given_array,
    given_dtype,
    given_entries,
    nonzeros_per_row,
    random_reservoir_matrices,
    scaling_radius,
)
from ._random import jax_key, numpy_rng, prng_key, spawn
from ._validation import (
    check_component,
    check_data,
    check_dtype,
    check_float,
    check_index_bounds,
    check_int,
    check_leaf,
    check_leak_rates,
    device_array,
    from_fields,
    init_component,
)
from .embeddings import EmbedBase, LinearEmbedding
from .initializers import dale_sparse

__all__ = [
    "DriverBase",
    "ESNDriver",
    "ParallelESNDriver",
    "TaylorDriver",
    "ParallelTaylorDriver",
    "GRUDriver",
    "ES2NDriver",
    "MRNNDriver",
    "EuSNDriver",
    "ResESNDriver",
    "RMNDriver",
    "LIFDriver",
    "EIESNDriver",
    "StackedDriver",
    "StateDelayDriver",
    "InputDelayDriver",
    "RECADriver",
    "DeepESNDriver",
    "ReservoirMatrix",
    "drive_sequence",
]


class DriverBase(eqx.Module):
    """Base class of reservoir drivers.

    Subclasses implement :meth:`advance`. As in ORC 0.4, a driver's states
    are ``(chunks, res_dim)``, or ``(res_dim,)`` for one without a chunk axis
    (``chunks`` 0, the default of a custom driver); a driver that has another
    layout says so with :attr:`state_shape`. A single reservoir's driver
    (``ESNDriver``, ``TaylorDriver``: a bank of one shown as ``(res_dim,)``)
    also takes states as its bank, ``(1, res_dim)`` (:attr:`bank_shape`), and
    answers ``(res_dim,)``, as ORC 0.4's do.

    Attributes
    ----------
    res_dim : int
        Reservoir dimension (per chunk).
    dtype : dtype
        float32 or float64.
    chunks : int
        Number of reservoirs in the bank (1 for ``ESNDriver``), 0 for a driver
        without a bank axis (GRU, stacked layers, a custom driver's default).

    Example
    -------
    >>> class Linear(DriverBase):
    ...     def advance(self, proj_vars, res_state):
    ...         return 0.9 * res_state + proj_vars
    >>> d = Linear(res_dim=10)
    """

    res_dim: int = eqx.field(static=True)
    dtype: object = eqx.field(static=True)
    chunks: int = eqx.field(default=0, static=True)

    def __init__(self, res_dim: int, dtype=jnp.float64):
        init_component(self, dtype, res_dim=res_dim)

    def __check_init__(self):
        check_component(self, "res_dim")

    @abc.abstractmethod
    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """Advance one step: new state (or its time derivative in continuous mode)."""

    def advance_seq(self, proj_seq: Array, res_state: Array) -> Array:
        """States after each of ``proj_seq`` ``(T, *state_shape)`` (discrete
        drivers): ``T`` applications of :meth:`advance`, ``(T, *state_shape)``.

        Drivers with a faster way to run a known sequence override this; see
        :func:`drive_sequence`, which the models call.
        """

        def step(r, p):
            r = self.advance(p, r)
            return r, r

        return jax.lax.scan(step, res_state, proj_seq)[1]

    def batch_advance(self, proj_vars: Array, res_state: Array) -> Array:
        """:meth:`advance` mapped over a leading batch axis."""
        return jax.vmap(self.advance)(proj_vars, res_state)

    def __call__(self, proj_vars: Array, res_state: Array) -> Array:
        """Advance a single state, or a batch of states (one more leading
        axis). A single reservoir's ``(1, res_dim)`` is one state (its bank
        of one), as in ORC 0.4."""
        lead = lead_axes(proj_vars, self.state_shape, self.bank_shape)
        if lead == 0:
            return self.advance(proj_vars, res_state)
        if lead == 1:
            return self.batch_advance(proj_vars, res_state)
        rank = len(self.state_shape)
        raise ValueError(
            f"{type(self).__name__}: proj_vars must be one state ({rank}-D, or "
            f"{self.bank_shape}) or a batch of them, got shape "
            f"{tuple(proj_vars.shape)}"
        )

    @property
    def state_shape(self) -> tuple[int, ...]:
        """Shape of one state: ORC 0.4's rule for a driver, ``(chunks,
        res_dim)``, without the chunk axis when ``chunks`` is 0."""
        return (self.chunks, self.res_dim)[not self.chunks :]

    @property
    def bank_shape(self) -> tuple[int, ...]:
        """Shape of one state with the bank axis, which a driver also takes:
        :attr:`state_shape` unless the driver shows a bank of one without
        its axis (then ``(1, res_dim)``)."""
        return self.state_shape

    def default_state(self) -> Array:
        """Zero state of shape :attr:`state_shape`."""
        return device_array(np.zeros(self.state_shape), self.dtype)

    def _check_shapes(self, proj_vars, res_state):
        """``(proj_vars, res_state)``, one state each, in :attr:`state_shape`
        (given in it or in :attr:`bank_shape`; otherwise a ``ValueError``)."""
        owner = f"{type(self).__name__}.advance"
        view, bank = self.state_shape, self.bank_shape
        return (
            as_view(proj_vars, view, bank, owner, "proj_vars"),
            as_view(res_state, view, bank, owner, "res_state"),
        )

    def _check_seq(self, proj_seq, res_state):
        """:meth:`_check_shapes` for a sequence of inputs ``(T, *state)``."""
        owner = f"{type(self).__name__}.advance_seq"
        view, bank = self.state_shape, self.bank_shape
        return (
            as_view(proj_seq, view, bank, owner, "proj_seq", lead=1),
            as_view(res_state, view, bank, owner, "res_state"),
        )


# --------------------------------------------------------------------------- #
# Building reservoir matrices
# --------------------------------------------------------------------------- #


def driver_state_shape(driver) -> tuple[int, ...]:
    """Shape of one reservoir state of ``driver``, without building one.

    A driver that keeps :class:`~orc.drivers.DriverBase`'s ``default_state``
    declares it through ``state_shape``; one that overrides ``default_state``
    (a user's subclass) is asked for its abstract shape.
    """
    if type(driver).default_state is DriverBase.default_state:
        return tuple(driver.state_shape)
    return tuple(jax.eval_shape(driver.default_state).shape)


def check_state(name: str, x, owner: str, driver, dtype, batch: tuple = ()):
    """``x`` as data (:func:`check_data`) of shape ``batch + driver_state_shape(driver)``."""
    x = check_data(name, x, owner, dtype)
    expected = tuple(batch) + driver_state_shape(driver)
    if tuple(jnp.shape(x)) != expected:
        raise ValueError(
            f"{owner}: {name} must have shape {expected}, got {tuple(jnp.shape(x))}"
        )
    return x


def _reservoir_matrix(
    seed,
    owner,
    res_dim,
    chunks,
    density,
    spectral_radius,
    dtype,
    use_sparse_eigs,
    batch,
    construction,
):
    # ``eigenval_batch_size`` is accepted for ORC compatibility: matrices are
    # built one chunk at a time on the host, so memory is bounded anyway.
    if batch is not None:
        check_int("eigenval_batch_size", batch, owner, minimum=1)
    if construction == "jax":
        return ReservoirMatrix(
            *built_bank(
                prng_key(seed, owner),
                res_dim,
                density,
                spectral_radius,
                chunks=chunks,
                dtype=dtype,
                method="arnoldi" if use_sparse_eigs else "dense",
            )
        )
    if construction == "orc04":
        from ._orc04 import orc04_reservoir

        return ReservoirMatrix.from_bcoo(
            orc04_reservoir(
                seed,
                res_dim,
                density,
                float(spectral_radius),
                chunks,
                dtype,
                use_sparse_eigs=use_sparse_eigs,
                eigenval_batch_size=batch,
            )
        )
    return random_reservoir_matrices(
        numpy_rng(seed, owner),
        res_dim,
        density,
        float(spectral_radius),
        dtype,
        chunks=chunks,
        use_sparse_eigs=use_sparse_eigs,
    )


def _scalar(value, dtype):
    return device_array(value, dtype)


# --------------------------------------------------------------------------- #
# Echo state network
# --------------------------------------------------------------------------- #


def _esn_preactivation(W: ReservoirMatrix, proj, state, bias):
    return jnp.tanh(W.matvec(state) + proj + bias)


def _check_esn_update(owner, leak, mode, time_const, bank_shape=None) -> None:
    """The ESN update's invariants, one check for a constructor's arguments
    and for the fields of a built or loaded driver (its ``__check_init__``,
    which :func:`orc.load` runs): ``mode`` ``"discrete"`` or
    ``"continuous"``, every leak rate in (0, 1], ``time_const`` > 0.

    ``leak``: a number, or one rate per node, checked here when
    ``bank_shape`` ``(chunks, res_dim)`` is given (a constructor's per-node
    rates are checked by :func:`_leak_field`). Traced values (a driver built
    under ``jax.jit``/``vmap``) pass.
    """
    if mode not in ("discrete", "continuous"):
        raise ValueError(
            f"{owner}: mode must be 'discrete' or 'continuous', got {mode!r}"
        )
    if np.ndim(leak) == 0:
        check_float("leak", leak, owner, low=0.0, high=1.0, low_open=True)
    elif bank_shape is not None:
        check_leak_rates("leak", leak, owner, bank_shape[1], bank_shape[0])
    check_float("time_const", time_const, owner, low=0.0, low_open=True)


def _check_reservoir_values(owner, spectral_radius, bias) -> None:
    """The sparse reservoirs' value invariants, one check for a constructor's
    arguments and for a built or loaded driver's fields: ``spectral_radius``
    > 0 (``None``: a given matrix not scaled to one) and a scalar ``bias``
    finite (one per node, from given matrices: finite, as every leaf
    :func:`orc.load` reads). Traced values pass."""
    if spectral_radius is not None:
        check_float("spectral_radius", spectral_radius, owner, low=0.0, low_open=True)
    if np.ndim(bias) == 0:
        check_float("bias", bias, owner)


def _leak_field(owner: str, leak, bank_shape: tuple[int, int], dtype) -> Array:
    """The driver's ``leak`` field: a scalar, or one rate per node as
    ``bank_shape`` ``(chunks, res_dim)`` from ``(res_dim,)`` (the same rates
    in every reservoir) or ``(chunks, res_dim)``; every rate in (0, 1]."""
    if np.ndim(leak) == 0:
        return _scalar(leak, dtype)
    leak = check_leak_rates("leak", leak, owner, bank_shape[1], bank_shape[0])
    return jnp.broadcast_to(jnp.asarray(leak, dtype), bank_shape)


class _SparseReservoirDriver(Bank, DriverBase):
    """What the ESN and Taylor drivers share: a bank of random sparse ``W``
    (one per reservoir), a bias, and an update written for one reservoir and
    mapped over the bank; ``single`` drivers show states without the bank
    axis of one.

    Drivers built from given matrices (``from_matrices``, ``construction``
    ``"given"``) may carry one bias per node, ``(chunks, res_dim)`` (else a
    scalar), and have no ``spectral_radius`` (``None``) unless they were
    scaled to one."""

    wr: ReservoirMatrix
    bias: Array
    spectral_radius: Array | None
    density: float = eqx.field(static=True)
    single: bool = eqx.field(default=False, static=True)
    construction: str = eqx.field(default="orc", static=True)

    def __check_init__(self):
        name = type(self).__name__
        if not isinstance(self.wr, ReservoirMatrix):
            raise TypeError(f"{name}: wr must be a ReservoirMatrix")
        if not isinstance(self.single, bool):
            raise TypeError(f"{name}: single must be a bool")
        check_int(
            "chunks", self.chunks, name, minimum=1, maximum=1 if self.single else None
        )
        given = self.construction == GIVEN
        if not given:
            check_construction(self.construction, name)
        # a given matrix may be zero (density 0)
        check_float(
            "density", self.density, name, low=0.0, high=1.0, low_open=not given
        )
        # ours draws a fixed count per row; ORC 0.4's draw varies by row, and
        # its bank is padded to the longest row (ReservoirMatrix.from_bcoo),
        # as is a given matrix's
        k = (
            nonzeros_per_row(self.res_dim, self.density)
            if self.construction in ("orc", "jax")
            else self.wr.values.shape[-1]
        )
        shape = (self.chunks, self.res_dim, k)
        check_leaf(name, "wr.values", self.wr.values, shape, self.dtype)
        check_leaf(name, "wr.columns", self.wr.columns, shape)
        bias_shape = () if np.ndim(self.bias) == 0 else self.bank_shape
        check_leaf(name, "bias", self.bias, bias_shape, self.dtype)
        if self.spectral_radius is not None or not given:
            check_leaf(name, "spectral_radius", self.spectral_radius, (), self.dtype)
        _check_reservoir_values(name, self.spectral_radius, self.bias)

    def _init_reservoir(
        self,
        *,
        res_dim,
        spectral_radius,
        density,
        bias,
        dtype,
        chunks,
        seed,
        use_sparse_eigs,
        eigenval_batch_size,
        construction,
    ):
        """Everything but the update's own parameters; ``chunks=None`` makes
        a single driver (a bank of one, shown without its axis)."""
        name = type(self).__name__
        DriverBase.__init__(self, res_dim, dtype)
        self.construction = check_construction(construction, name)
        self.single = chunks is None
        self.chunks = (
            1 if chunks is None else check_int("chunks", chunks, name, minimum=1)
        )
        _check_reservoir_values(name, spectral_radius, bias)
        self.density = check_float(
            "density", density, name, low=0.0, high=1.0, low_open=True
        )
        self.bias = _scalar(bias, self.dtype)
        self.spectral_radius = _scalar(spectral_radius, self.dtype)
        self.wr = _reservoir_matrix(
            seed,
            name,
            self.res_dim,
            self.chunks,
            self.density,
            spectral_radius,
            self.dtype,
            use_sparse_eigs,
            eigenval_batch_size,
            self.construction,
        )

    @classmethod
    def _given_reservoir(cls, W, *, bias, dtype, spectral_radius, single) -> dict:
        """The reservoir's fields of a driver with the matrices ``W`` (see
        the ``from_matrices`` constructors); ``single``: a single driver."""
        name = cls.__name__
        entries, n, _ = given_entries(name, W)
        chunks = len(entries)
        if single and chunks != 1:
            raise ValueError(
                f"{name}: W must be one matrix (N, N) or a bank of one (1, N, N), "
                f"got {chunks} matrices; Parallel{name}.from_matrices takes a bank"
            )
        b = given_array(name, "bias", bias)
        if b.shape not in ((), (n,), (chunks, n)):
            raise ValueError(
                f"{name}: bias must be a number, one value per node (N,) = ({n},) "
                f"or per reservoir and node (chunks, N) = ({chunks}, {n}), got "
                f"shape {b.shape}"
            )
        arrays = [v for _, _, v in entries] + ([b] if hasattr(bias, "dtype") else [])
        dtype = given_dtype(name, dtype, *(np.asarray(a).dtype for a in arrays))
        values, columns = ell_from_entries(entries, n, np.float64)
        if spectral_radius is not None:
            target = check_float(
                "spectral_radius", spectral_radius, name, low=0.0, low_open=True
            )
            for c in range(chunks):
                # a nilpotent W's computed eigenvalues are rounding noise
                # (1e-6 .. 0.2 for n = 4 .. 30), so its pattern is asked first
                nilpotent = acyclic_pattern(values[c], columns[c])
                rho = 0.0 if nilpotent else scaling_radius(values[c], columns[c])
                if not rho > 0:
                    raise ValueError(
                        f"{name}: W{f'[{c}]' if chunks > 1 else ''} has spectral "
                        f"radius 0 (it is nilpotent), so it cannot be scaled to "
                        f"spectral_radius={target}; pass spectral_radius=None"
                    )
                values[c] *= target / rho
            spectral_radius = _scalar(target, dtype)
        nonzero = sum(int(np.count_nonzero(v)) for _, _, v in entries)
        return dict(
            res_dim=n,
            dtype=dtype,
            chunks=chunks,
            single=single,
            wr=ReservoirMatrix(jnp.asarray(values, dtype), jnp.asarray(columns)),
            bias=jnp.asarray(
                b if b.ndim == 0 else np.broadcast_to(b, (chunks, n)), dtype
            ),
            spectral_radius=spectral_radius,
            density=min(1.0, nonzero / (chunks * n * n)),
            construction=GIVEN,
        )

    def _per_chunk(self, update, proj_vars, res_state, nodes=None):
        """``update(W, *nodes, p, r)``, written for one reservoir, on every
        reservoir of the bank. ``nodes`` (default ``(bias,)``): per-node
        parameters, each a scalar or ``(chunks, res_dim)``, handed to the
        update as the scalar or the reservoir's ``(res_dim,)``. ``proj_vars``
        and ``res_state`` are one state each, in :attr:`state_shape` or
        :attr:`bank_shape`; the result is in :attr:`state_shape`."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        nodes = (self.bias,) if nodes is None else tuple(nodes)
        if self.single:
            # vmap over a bank of one is its one member applied to the states
            # as they are; written so, XLA keeps the state update in place
            # (the reshapes to and from the bank axis cost a 500-node
            # classifier a copy of its states per step, ~10% of its time)
            W = jax.tree.map(lambda a: a[0], self.wr)
            own = (a if a.ndim == 0 else a[0] for a in nodes)
            return update(W, *own, proj_vars, res_state)
        axes = tuple(None if a.ndim == 0 else 0 for a in nodes)
        out = jax.vmap(update, in_axes=(0, *axes, 0, 0))(
            self.wr, *nodes, self._bank(proj_vars), self._bank(res_state)
        )
        return self._view(out)


class _ESNDriverCore(_SparseReservoirDriver):
    """Shared implementation of :class:`ESNDriver` and :class:`ParallelESNDriver`."""

    leak: Array
    time_const: Array
    mode: str = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        leak_shape = () if np.ndim(self.leak) == 0 else self.bank_shape
        check_leaf(name, "leak", self.leak, leak_shape, self.dtype)
        check_leaf(name, "time_const", self.time_const, (), self.dtype)
        _check_esn_update(name, self.leak, self.mode, self.time_const, self.bank_shape)

    def _init(self, *, leak, mode, time_const, **reservoir):
        _check_esn_update(type(self).__name__, leak, mode, time_const)
        self._init_reservoir(**reservoir)
        self.mode = mode
        self.leak = _leak_field(type(self).__name__, leak, self.bank_shape, self.dtype)
        self.time_const = _scalar(time_const, self.dtype)

    @classmethod
    def _from_matrices(cls, W, *, leak, mode, time_const, **given):
        """The driver with the matrices ``W`` (the ``from_matrices`` constructors)."""
        _check_esn_update(cls.__name__, leak, mode, time_const)
        fields = cls._given_reservoir(W, **given)
        bank_shape = (fields["chunks"], fields["res_dim"])
        fields.update(
            mode=mode,
            leak=_leak_field(cls.__name__, leak, bank_shape, fields["dtype"]),
            time_const=_scalar(time_const, fields["dtype"]),
        )
        return from_fields(cls, fields)

    def _update(self, W, bias, leak, proj, state):
        act = _esn_preactivation(W, proj, state, bias)
        if self.mode == "continuous":
            return self.time_const * (act - state)
        return leak * act + (1 - leak) * state

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """One update; in continuous mode the time derivative ``dr/dt``.

        Shapes: ``(chunks, res_dim)`` for the parallel driver, ``(res_dim,)`` for
        the single one.
        """
        return self._per_chunk(
            self._update, proj_vars, res_state, (self.bias, self.leak)
        )

    def advance_seq(self, proj_seq: Array, res_state: Array) -> Array:
        """In discrete mode with one leak rate one fused run
        (:meth:`orc._kernels.Kernels.run`: on CPU a native loop over the
        whole sequence that uses two threads per step)."""
        proj_seq, res_state = self._check_seq(proj_seq, res_state)
        kernels = current()
        if not kernels.fuses(self):
            return super().advance_seq(proj_seq, res_state)
        states = kernels.run(
            self.wr.values,
            self.wr.columns,
            self._bank(proj_seq) + self.bias,
            self._bank(res_state),
            self.leak,
        )
        return self._view(states)

    def _closed_loop_linear(
        self, kernels: Kernels, win, window, wout, res_state, length
    ):
        """Outputs of a closed loop through a linear readout ``wout (C, o, n)``
        fed back by the linear embedding ``win (C, n, w)``, ``window (C, w)``
        (:meth:`orc._kernels.Kernels.forecast`), for a driver ``kernels``
        fuses."""
        return kernels.forecast(
            self.wr.values,
            self.wr.columns,
            win,
            window,
            self.bias,
            wout,
            self._bank(res_state),
            self.leak,
            length,
        )

    def _closed_loops_linear(
        self, kernels: Kernels, win, window, wouts, res_states, length
    ):
        """:meth:`_closed_loop_linear` for every readout ``wouts (B, C, o, n)``
        from every state of ``res_states (S, *state_shape)`` at once
        (:meth:`orc._kernels.Kernels.forecasts`): ``(B, S, length, C o)``."""
        return kernels.forecasts(
            self.wr.values,
            self.wr.columns,
            win,
            window,
            self.bias,
            wouts,
            jax.vmap(self._bank)(res_states),
            self.leak,
            length,
        )

    def _linear_operands(self, win, windows, res_state) -> tuple:
        """The operands of :meth:`orc._kernels.Kernels.run_linear` for this
        driver driven by the linear embedding ``win (C, n, w)``, ``windows
        (T, C, w)`` from ``res_state``."""
        r0 = self._bank(res_state)
        return (self.wr.values, self.wr.columns, win, windows, self.bias, r0, self.leak)

    def _advance_seq_linear(self, kernels: Kernels, operands: tuple):
        """:meth:`advance_seq` driven by a linear embedding with the drive
        computed inside the run (:meth:`orc._kernels.Kernels.run_linear`,
        ``operands`` from :meth:`_linear_operands`), as the fused fit
        computes it; the states in the driver's view, ``(T, *state_shape)``."""
        return self._view(kernels.run_linear(*operands))

    def _advance_seq_stats(
        self,
        kernels: Kernels,
        win,
        windows,
        res_state,
        stats,
        targets,
        start,
        stop,
        keep,
    ):
        """:meth:`advance_seq` driven by the linear embedding ``win (C, n, w)``,
        ``windows (T, C, w)``, and the ridge statistics of the states (rows
        ``start:stop`` against ``targets``), in one overlapped pass
        (:meth:`orc._kernels.Kernels.run_stats`), for a driver ``kernels``
        fuses. The states come back in the driver's view, ``(T,
        *state_shape)``, or with ``keep=False`` the last one, ``(1,
        *state_shape)``."""
        operands = self._linear_operands(win, windows, res_state)
        states, stats = kernels.run_stats(*operands, stats, targets, start, stop, keep)
        return self._view(states), stats


# Inputs embedded at a time when a driver runs whole sequences
# (drive_sequence): bounds the embedded copy of a long sequence.
SEQ_BLOCK = 1024


def drive_sequence(
    driver: DriverBase, embedding: EmbedBase, in_seq: Array, res_state: Array
) -> Array:
    """States after each input of ``in_seq`` ``(T, in_dim)``: ``r <- driver(embed(u), r)``.

    Drivers that declare the ``"sequence"`` capability (their
    :meth:`DriverBase.advance_seq` runs a known sequence faster) get the embedded
    inputs a block at a time (``embedding.batch_embed``: one product per
    block, at most ``SEQ_BLOCK`` rows live); the others run one ``lax.scan``
    step per input with the embedding inside the step, so no embedded copy of
    the sequence exists.
    """
    kernels = current()
    if in_seq.ndim == 2 and kernels.fuses(driver, embedding):
        # the run with the drive inside the native kernel, as training's
        # (same bits as the states a training stores), where a kernel other
        # than the reference takes it (the reference's drive would be
        # embedded otherwise than batch_embed does)
        win, windows = embedding.linear_factors(in_seq)
        operands = driver._linear_operands(win, windows, res_state)
        if kernels.accelerates("run_linear", *operands):
            return driver._advance_seq_linear(kernels, operands)
    if not declares(driver, "sequence"):

        def step(r, u):
            r = driver.advance(embedding.embed(u), r)
            return r, r

        return jax.lax.scan(step, res_state, in_seq)[1]

    def block(u, r):
        return driver.advance_seq(embedding.batch_embed(u), r)

    t = in_seq.shape[0]
    if t <= SEQ_BLOCK:
        return block(in_seq, res_state)
    n_full, tail = divmod(t, SEQ_BLOCK)
    # states of the start state's shape and dtype (the loop carries the last
    # one into the next block): no trace of the block for them
    res_state = jnp.asarray(res_state)
    out = jnp.zeros((t,) + res_state.shape, res_state.dtype)

    def body(i, carry):
        out, r = carry
        u = jax.lax.dynamic_slice_in_dim(in_seq, i * SEQ_BLOCK, SEQ_BLOCK, axis=0)
        states = block(u, r)
        out = jax.lax.dynamic_update_slice_in_dim(out, states, i * SEQ_BLOCK, axis=0)
        return out, states[-1]

    out, r = jax.lax.fori_loop(0, n_full, body, (out, res_state))
    if tail:
        states = block(in_seq[n_full * SEQ_BLOCK :], r)
        out = jax.lax.dynamic_update_slice_in_dim(
            out, states, n_full * SEQ_BLOCK, axis=0
        )
    return out


def drive_sequence_stats(
    kernels: Kernels,
    driver: DriverBase,
    embedding: EmbedBase,
    in_seq: Array,
    res_state: Array,
    stats,
    targets: Array,
    start: int,
    stop: int,
    keep: bool,
):
    """:func:`drive_sequence` of ``in_seq (T, in_dim)`` that also adds rows
    ``start:stop`` of the states and ``targets`` to the ridge statistics
    ``stats``, in one pass, for components ``kernels`` fuses
    (:meth:`orc._kernels.Kernels.fuses`; the caller asks): the drive is
    computed step by step inside the run, so the states are the only ``(T,
    *state)`` buffer made, and with ``keep=False`` none (the last state
    comes back, ``(1, *state)``)."""
    win, windows = embedding.linear_factors(in_seq)
    return driver._advance_seq_stats(
        kernels, win, windows, res_state, stats, targets, start, stop, keep
    )


def closed_loop_linear(
    kernels: Kernels,
    driver: DriverBase,
    embedding: EmbedBase,
    readout,
    length: int,
    res_state: Array,
):
    """The ``length`` outputs of a closed loop from ``res_state`` (``y_0 =
    readout(res_state)``, each output embedded and fed back) in one fused
    pass, for components ``kernels`` fuses (:meth:`orc._kernels.Kernels.fuses`
    with the readout; the caller asks)."""
    return driver._closed_loop_linear(
        kernels, *embedding.linear_window(), readout.linear_weights(), res_state, length
    )


class ParallelESNDriver(_ESNDriverCore):
    """Echo state network driver for ``chunks`` parallel reservoirs.

    Discrete mode (per chunk ``c``):
    ``r_c' = (1 - leak) r_c + leak * tanh(W_c r_c + p_c + bias)``.
    Continuous mode returns ``dr_c/dt = time_const * (tanh(W_c r_c + p_c + bias) - r_c)``.

    Parameters
    ----------
    res_dim : int
        Nodes per reservoir.
    leak : float or array
        Leak rate in (0, 1]: a number, or one rate per node, ``(res_dim,)``
        (the same in every reservoir) or ``(chunks, res_dim)``. Nodes with
        their own rates make a multi-timescale reservoir (e.g.
        ``np.geomspace(0.03, 1, res_dim)``: slow nodes integrate long
        stretches of the input, fast ones follow it); such a driver runs
        XLA's loop, not the native fused kernels, which take one rate.
    spectral_radius : float
        Spectral radius each ``W_c`` is scaled to (> 0).
    density : float
        Fraction of non-zeros per row of ``W_c`` (at least one per row).
    bias : float
        Constant added inside the tanh.
    dtype : dtype, default float64
    chunks : int, default 1
        Number of parallel reservoirs (state shape ``(chunks, res_dim)``).
    mode : {"discrete", "continuous"}
    time_const : float
        Rate ``γ`` of the continuous mode.
    seed : int or PRNG key
    use_sparse_eigs : bool, default True
        Spectral radius from an Arnoldi projection (200 vectors) instead of a
        dense eigen-decomposition. Exact when ``res_dim <= 200``.
    eigenval_batch_size : int, optional
        Build this many chunks at a time (bounds memory for many chunks).
    construction : {"orc", "orc04", "jax"}, default "orc"
        ``"orc"``: this library's draw (a fixed count of non-zeros per row,
        numpy, fast). ``"orc04"``: exactly the matrices ORC 0.4 draws for the
        same ``seed`` (:mod:`orc._orc04`; slower), so an ORC 0.4 notebook
        reproduces number for number; rows then hold varying counts, padded
        with zeros to the longest. ``"jax"``: the same distribution as
        ``"orc"`` drawn by ``jax.random`` from ``seed`` as a key
        (:mod:`orc._construct`; another random stream, and ~2 s to compile
        per shape), so drivers and models build under ``jax.vmap``/``jit``:
        ``eqx.filter_vmap(lambda s: ESNForecaster(3, 300, seed=s,
        construction="jax"))(jnp.arange(8))`` is a population of eight.

    Example
    -------
    >>> d = ParallelESNDriver(res_dim=100, chunks=4, seed=0)
    >>> d.advance(jnp.zeros((4, 100)), d.default_state()).shape
    (4, 100)
    """

    capabilities = frozenset({"sequence", "esn_kernels"})

    def __init__(
        self,
        res_dim: int,
        leak: float = ESN.leak_rate,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        chunks: int = ESN.chunks,
        mode: str = ESN.mode,
        time_const: float = ESN.time_const,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        eigenval_batch_size: int | None = None,
        construction: str = ESN.construction,
    ) -> None:
        self._init(**arguments(locals()))

    @classmethod
    def from_matrices(
        cls,
        W,
        *,
        leak: float = ESN.leak_rate,
        bias=ESN.bias,
        mode: str = ESN.mode,
        time_const: float = ESN.time_const,
        dtype=None,
        spectral_radius: float | None = None,
    ) -> ParallelESNDriver:
        """A driver with the reservoir matrices you give, one per reservoir.

        For matrices from a paper, another library (reservoirpy, ORC 0.4,
        ReservoirComputing.jl) or your own code. The update is the
        constructor's: ``r_c' = (1 - leak) r_c + leak tanh(W_c r_c + p_c + b_c)``
        (continuous mode as well). ``W`` is taken as given: it is scaled to
        a spectral radius only when ``spectral_radius`` is given. It is
        stored in the drivers' sparse layout (:class:`ReservoirMatrix`, each
        row's non-zero entries, rows padded to the longest), so a dense
        ``W`` costs ``N`` stored entries per row. Built on the host (not
        under ``jax.jit``/``vmap``); the driver itself runs everywhere the
        constructor's does, with the same fused kernels (a per-node bias
        runs them through XLA).

        Parameters
        ----------
        W : array or sparse matrices, ``(chunks, N, N)``
            A bank of ``chunks`` square matrices (``(N, N)``: a bank of
            one): a dense NumPy or JAX array (its non-zero entries are
            kept), a ``jax.experimental.sparse.BCOO``, a
            :class:`ReservoirMatrix` (e.g. another driver's ``wr``, kept
            entry for entry), or a list of ``(N, N)`` matrices of these
            kinds or ``scipy.sparse`` ones. Real and finite.
        leak : float or array
            Leak rate in (0, 1]: a number, one rate per node ``(N,)`` or
            ``(chunks, N)``, as for the constructor.
        bias : float or array
            Added inside the tanh: a number, one value per node ``(N,)``
            (the same for every reservoir) or ``(chunks, N)``.
        mode : {"discrete", "continuous"}, default "discrete"
        time_const : float
            Rate of the continuous mode.
        dtype : dtype, optional
            Default: float32 where the given floating arrays are all
            float32, else float64 (with JAX's x64 off, float64 warns and
            gives float32, as for the constructor).
        spectral_radius : float, optional
            Scale each ``W_c`` to this spectral radius (Arnoldi estimate,
            exact for ``N <= 200``), as the constructor does. Default
            ``None``: ``W`` as given, and the driver's ``spectral_radius``
            is ``None``.

        Returns
        -------
        ParallelESNDriver
            ``construction == "given"``, ``density`` the fraction of
            non-zero entries, states ``(chunks, N)``.

        Raises
        ------
        ValueError
            ``W`` not square or of another rank, ``bias`` of another shape,
            a NaN or inf entry; ``spectral_radius`` given for a nilpotent
            ``W`` (spectral radius 0: found from its pattern, a graph
            without cycles, or its eigenvalues).
        TypeError
            Complex or non-numeric entries; a traced ``W`` or ``bias``
            (under ``jax.jit``/``vmap``).

        Example
        -------
        >>> W = 0.1 * np.random.default_rng(0).normal(size=(2, 50, 50))
        >>> d = ParallelESNDriver.from_matrices(W, leak=0.3, bias=0.0)
        >>> d.advance(jnp.zeros((2, 50)), d.default_state()).shape
        (2, 50)
        """
        return cls._from_matrices(W, single=False, **arguments(locals(), "W"))


class ESNDriver(_ESNDriverCore):
    """Echo state network driver for a single reservoir (state ``(res_dim,)``).

    Same update and parameters as :class:`ParallelESNDriver` without ``chunks``:
    a bank of one (``chunks == 1``, ``wr.shape == (1, res_dim, res_dim)`` as in
    ORC 0.4) whose states are shown without the bank axis.

    Example
    -------
    >>> d = ESNDriver(res_dim=100, seed=0)
    >>> d.advance(jnp.zeros(100), d.default_state()).shape
    (100,)
    """

    capabilities = frozenset({"sequence", "esn_kernels"})

    def __init__(
        self,
        res_dim: int,
        leak: float = ESN.leak_rate,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        mode: str = ESN.mode,
        time_const: float = ESN.time_const,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        eigenval_batch_size: int | None = None,
        construction: str = ESN.construction,
    ) -> None:
        self._init(chunks=None, **arguments(locals()))

    @classmethod
    def from_matrices(
        cls,
        W,
        *,
        leak: float = ESN.leak_rate,
        bias=ESN.bias,
        mode: str = ESN.mode,
        time_const: float = ESN.time_const,
        dtype=None,
        spectral_radius: float | None = None,
    ) -> ESNDriver:
        """A single-reservoir driver with the matrix ``W`` you give.

        ``r' = (1 - leak) r + leak tanh(W r + p + b)``, with ``W`` taken as
        given (not scaled unless ``spectral_radius`` is given). Arguments
        as for :meth:`ParallelESNDriver.from_matrices`, with one matrix:
        ``W`` ``(N, N)`` (or ``(1, N, N)``, e.g. another driver's ``wr``)
        dense, ``scipy.sparse``, ``BCOO`` or a :class:`ReservoirMatrix`;
        ``bias`` and ``leak`` a number or ``(N,)``. States ``(N,)``.

        Example
        -------
        >>> W = 0.1 * np.random.default_rng(0).normal(size=(50, 50))
        >>> d = ESNDriver.from_matrices(W, leak=0.3, bias=np.zeros(50))
        >>> d.advance(jnp.zeros(50), d.default_state()).shape
        (50,)
        """
        return cls._from_matrices(W, single=True, **arguments(locals(), "W"))


# --------------------------------------------------------------------------- #
# Taylor-expanded ESN
# --------------------------------------------------------------------------- #


@functools.cache
def _tanh_taylor_polys(order: int) -> tuple[tuple[float, ...], ...]:
    """Coefficients (in ``t = tanh(b)``) of ``tanh^{(n)}(b) / n!`` for n <= order.

    ``d/db tanh = 1 - t^2``, so if ``tanh^{(n)} = P_n(t)`` then
    ``P_{n+1}(t) = P_n'(t) (1 - t^2)``; starting from ``P_0 = t``.
    """
    polys = []
    p = [0.0, 1.0]  # coefficients of t^0, t^1, ...
    for n in range(order + 1):
        polys.append(tuple(c / math.factorial(n) for c in p))
        dp = [i * p[i] for i in range(1, len(p))] or [0.0]
        nxt = [0.0] * (len(dp) + 2)
        for i, c in enumerate(dp):
            nxt[i] += c
            nxt[i + 2] -= c
        p = nxt
    return tuple(polys)


def _poly(coeffs, t):
    out = jnp.zeros_like(t)
    for c in reversed(coeffs):
        out = out * t + c
    return out


class _TaylorDriverCore(_SparseReservoirDriver):
    """Shared implementation of the Taylor drivers."""

    n_terms: int = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        n_terms = check_int("n_terms", self.n_terms, name, minimum=0)
        if n_terms > 5:
            raise ValueError(f"{name}: n_terms must be at most 5, got {n_terms}")

    def _init(self, *, n_terms, **reservoir):
        self._init_reservoir(**reservoir)
        self.n_terms = check_int("n_terms", n_terms, type(self).__name__, minimum=0)

    @classmethod
    def _from_matrices(cls, W, *, n_terms, **given):
        """The driver with the matrices ``W`` (the ``from_matrices`` constructors)."""
        n_terms = check_int("n_terms", n_terms, cls.__name__, minimum=0)
        fields = cls._given_reservoir(W, **given)
        return from_fields(cls, {**fields, "n_terms": n_terms})

    def _update(self, W, bias, proj, state):
        dz = W.matvec(state) + proj
        t = jnp.tanh(bias)
        out = jnp.zeros_like(dz)
        for n, coeffs in enumerate(_tanh_taylor_polys(self.n_terms)):
            out = out + _poly(coeffs, t) * dz**n
        return out

    def _update_full(self, W, bias, proj, state):
        return _esn_preactivation(W, proj, state, bias)

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """``r' = sum_{n<=n_terms} tanh^{(n)}(bias)/n! * (W r + p)^n``."""
        return self._per_chunk(self._update, proj_vars, res_state)

    def advance_full(self, proj_vars: Array, res_state: Array) -> Array:
        """The exact update ``tanh(W r + p + bias)`` the polynomial approximates."""
        return self._per_chunk(self._update_full, proj_vars, res_state)


class ParallelTaylorDriver(_TaylorDriverCore):
    """ESN update with tanh replaced by its Taylor polynomial, ``chunks`` reservoirs.

    ``r' = sum_{n=0}^{n_terms} tanh^{(n)}(bias) / n! * (W r + p)^n`` (no leak).

    Parameters
    ----------
    n_terms : int
        Highest power kept, 0..5 (``n_terms=1`` is the linearisation).
    res_dim, spectral_radius, density, bias, dtype, chunks, seed, \
use_sparse_eigs, eigenval_batch_size, construction
        As for :class:`ParallelESNDriver`.
    """

    def __init__(
        self,
        n_terms: int,
        res_dim: int,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        chunks: int = ESN.chunks,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        eigenval_batch_size: int | None = None,
        construction: str = ESN.construction,
    ) -> None:
        self._init(**arguments(locals()))

    @classmethod
    def from_matrices(
        cls,
        W,
        *,
        n_terms: int,
        bias=ESN.bias,
        dtype=None,
        spectral_radius: float | None = None,
    ) -> ParallelTaylorDriver:
        """A Taylor driver with the reservoir matrices ``W`` you give,
        ``(chunks, N, N)``, taken as given; ``W``, ``bias``, ``dtype`` and
        ``spectral_radius`` as for :meth:`ParallelESNDriver.from_matrices`
        (a per-node ``bias`` gives each node its own expansion point)."""
        return cls._from_matrices(W, single=False, **arguments(locals(), "W"))


class TaylorDriver(_TaylorDriverCore):
    """Taylor-expanded ESN driver for a single reservoir (state ``(res_dim,)``)."""

    def __init__(
        self,
        n_terms: int,
        res_dim: int,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        eigenval_batch_size: int | None = None,
        construction: str = ESN.construction,
    ) -> None:
        self._init(chunks=None, **arguments(locals()))

    @classmethod
    def from_matrices(
        cls,
        W,
        *,
        n_terms: int,
        bias=ESN.bias,
        dtype=None,
        spectral_radius: float | None = None,
    ) -> TaylorDriver:
        """A single Taylor driver with the matrix ``W`` ``(N, N)`` you give,
        taken as given; arguments as for
        :meth:`ParallelTaylorDriver.from_matrices` with one matrix."""
        return cls._from_matrices(W, single=True, **arguments(locals(), "W"))


# --------------------------------------------------------------------------- #
# GRU
# --------------------------------------------------------------------------- #


def _check_gru_values(owner, *, input_rescaling=None, gru=None) -> None:
    """The GRU driver's value invariant, one rule for a constructor's
    argument and for a built or loaded driver's cell (its
    ``__check_init__``, which :func:`orc.load` runs): ``input_rescaling`` is
    a finite number, so the cell's input weights (the initial weights times
    it) and the rest of its weights are finite. The factor itself is not
    kept (ORC 0.4's fields), so a cell is judged by its weights. Traced
    values (a driver built under ``jax.jit``/``vmap``) pass."""
    if input_rescaling is not None:
        check_float("input_rescaling", input_rescaling, owner)
    if gru is None:
        return
    for field in ("weight_ih", "weight_hh", "bias", "bias_n"):
        value = getattr(gru, field)
        if value is None or isinstance(value, jax.core.Tracer):
            continue
        if not np.isfinite(np.asarray(value)).all():
            hint = " (input_rescaling times the initial weights)" * (
                field == "weight_ih"
            )
            raise ValueError(
                f"{owner}: gru.{field}{hint} must be finite, it holds NaN or inf"
            )


class GRUDriver(DriverBase):
    """A randomly initialised (untrained) GRU cell as the reservoir.

    ``r' = GRUCell(p, r)`` with input weights multiplied by ``input_rescaling``.

    Parameters
    ----------
    res_dim : int
    input_rescaling : float, default 15.0
    seed : int or PRNG key
    dtype : dtype, default float64
    """

    gru: eqx.nn.GRUCell

    def __check_init__(self):
        name = type(self).__name__
        if not isinstance(self.gru, eqx.nn.GRUCell):
            raise TypeError(f"{name}: gru must be an equinox.nn.GRUCell")
        n = self.res_dim
        if self.chunks or (self.gru.input_size, self.gru.hidden_size) != (n, n):
            raise ValueError(
                f"{name}: the GRU cell must map ({n}, {n}) -> {n} without chunks"
            )
        check_leaf(name, "gru.weight_ih", self.gru.weight_ih, (3 * n, n), self.dtype)
        check_leaf(name, "gru.weight_hh", self.gru.weight_hh, (3 * n, n), self.dtype)
        _check_gru_values(name, gru=self.gru)

    def __init__(
        self, res_dim: int, input_rescaling: float = 15.0, *, seed, dtype=jnp.float64
    ):
        name = type(self).__name__
        super().__init__(res_dim=res_dim, dtype=dtype)
        _check_gru_values(name, input_rescaling=input_rescaling)
        gru = eqx.nn.GRUCell(
            self.res_dim, self.res_dim, dtype=self.dtype, key=jax_key(seed, name)
        )
        self.gru = eqx.tree_at(
            lambda c: c.weight_ih,
            gru,
            gru.weight_ih * jnp.asarray(input_rescaling, self.dtype),
        )

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``GRUCell(proj_vars, res_state)``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        with _strategy.full_precision():  # equinox's cell leaves it unset
            return self.gru(proj_vars, res_state)


def _check_inner_esn(owner: str, reservoir, n: int) -> None:
    """A driver built around an ESN's matrix and bias (:class:`ES2NDriver`,
    :class:`MRNNDriver`, :class:`EuSNDriver`, :class:`ResESNDriver`): its ``reservoir`` is an :class:`ESNDriver` of
    ``n`` nodes."""
    if not isinstance(reservoir, ESNDriver) or reservoir.res_dim != n:
        raise TypeError(f"{owner}: reservoir must be an ESNDriver of {n} nodes")


def _check_inner_construction(owner: str, construction: str) -> None:
    """Such a driver's ``construction``: ``"orc"`` or ``"jax"`` (ORC 0.4 has
    no such driver to draw as it does)."""
    if construction not in ("orc", "jax"):
        raise ValueError(
            f"{owner}: construction must be 'orc' or 'jax', got {construction!r}"
        )


def _inner_esn(owner, res_dim, spectral_radius, density, bias, dtype, seed,
               use_sparse_eigs, construction, *, own_key: bool = False):  # fmt: skip
    """The :class:`ESNDriver` (leak 1) a driver is built around, from
    ``seed``; with ``own_key``, split from ``seed`` first, and a JAX key for
    the driver's own draw (an orthogonal map) as the second result."""
    _check_inner_construction(owner, construction)
    dtype = check_dtype(dtype, owner)  # float64 without x64 warns in owner's name
    key = None
    if own_key and construction == "jax":  # keys split in JAX: seed may be traced
        seed, key = jax.random.split(prng_key(seed, owner))
    elif own_key:
        seed, key = spawn(seed, 2, owner)
        key = jax_key(key, owner)
    reservoir = ESNDriver(
        res_dim, 1.0, spectral_radius, density, bias, dtype, seed=seed,
        use_sparse_eigs=use_sparse_eigs, construction=construction,
    )  # fmt: skip
    return reservoir, key


class ES2NDriver(DriverBase):
    """Edge-of-stability echo state network (Ceni & Gallicchio 2024).

    ``r' = (1 - β) O r + β tanh(W r + p + b)``: a convex mix, with the
    *proximity* ``β`` in (0, 1], of an ESN update without leak and a random
    orthogonal map ``O`` of the state. The orthogonal part preserves the
    state's norm, so the reservoir sits near the edge of stability: small
    ``β`` remembers long, large ``β`` computes more nonlinearly, ``β = 1``
    is the plain ESN. With the other defaults, a 20-node reservoir's memory
    capacity was ~18 at ``β = 0.1``, ~7 at 0.5 and ~2.4 for the ESN
    (``tests/test_es2n.py``); 300 nodes forecast Lorenz63 for under one
    Lyapunov time at 0.1 and ~7 at 0.5 (the ESN 7-9). The default does
    both; choose 0.05-0.1 for memory tasks. reservoirpy calls this node ``ES2N``
    (``proximity``, ``sr``), ReservoirComputing.jl ``ES2N``.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=ES2NDriver(300, seed=0), readout=LinearReadout(3,
    300), embedding=LinearEmbedding(3, 300, 0.1, seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
    proximity : float
        ``β`` in (0, 1]; may be traced.
    spectral_radius, density, bias, dtype, seed, use_sparse_eigs, construction
        Of ``W`` and ``b``, as for :class:`ESNDriver` (``W`` scaled to
        ``spectral_radius``; ``construction`` ``"orc"`` or ``"jax"``). ``O`` is drawn from ``seed`` too (Haar
        measure) and is dense: ``res_dim**2`` stored values and
        multiply-adds per step (the ESN's ``W`` is sparse).
    """

    reservoir: ESNDriver
    orthogonal: Float[Array, "res_dim res_dim"]
    proximity: Float[Array, ""]

    def __check_init__(self):
        name = type(self).__name__
        n = self.res_dim
        _check_inner_esn(name, self.reservoir, n)
        check_leaf(name, "orthogonal", self.orthogonal, (n, n), self.dtype)
        check_leaf(name, "proximity", self.proximity, (), self.dtype)
        check_float("proximity", self.proximity, name, low=0.0, low_open=True, high=1.0)

    def __init__(
        self,
        res_dim: int,
        proximity: float = ESN.proximity,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        self.reservoir, key = _inner_esn(
            type(self).__name__, res_dim, spectral_radius, density, bias, dtype, seed,
            use_sparse_eigs, construction, own_key=True,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        self.orthogonal = jax.random.orthogonal(key, res_dim, dtype=self.dtype)
        self.proximity = jnp.asarray(proximity, self.dtype)

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``(1 - β) O r + β tanh(W r + p + b)``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        rotated = jnp.matmul(self.orthogonal, res_state, precision="highest")
        nonlinear = self.reservoir.advance(proj_vars, res_state)
        return (1 - self.proximity) * rotated + self.proximity * nonlinear


#: The functions a :class:`MRNNDriver` combines, by name (a model file holds
#: the names, never a function).
MRNN_ACTIVATIONS = {
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,
    "identity": lambda z: z,
}


class MRNNDriver(DriverBase):
    """Multiple-activation echo state network (Lun et al. 2015's double
    activation function ESN, with any number of functions as
    ReservoirComputing.jl's ``MRNN``).

    ``r' = (1 - a) r + sum_d λ_d f_d(W r + p + b)``: a leaky update whose
    new part is a weighted sum of several activation functions of one
    preactivation. With ``activations=("tanh",)`` and ``scaling=(a,)`` it is
    the :class:`ESNDriver` of the same seed (``tests/test_mrnn.py``). On
    Lorenz63 (300 nodes, a linear readout, orc's other defaults) the default
    tanh and sigmoid forecast as long as that ESN within the seed spread:
    valid times of 11.8, 8.1 and 8.0 Lyapunov times for seeds 0, 1 and 2, the
    ESN 11.8, 8.0 and 11.8.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=MRNNDriver(300, seed=0), readout=LinearReadout(3,
    300), embedding=LinearEmbedding(3, 300, 0.08, seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
    activations : tuple of str
        The functions ``f_d``, by name: ``"tanh"``, ``"sigmoid"``,
        ``"relu"``, ``"identity"``; by default tanh and the logistic sigmoid,
        as in ReservoirComputing.jl.
    scaling : sequence of float, optional
        The weights ``λ_d``, one per function; by default ``leak`` for each
        (ReservoirComputing.jl's rule). May be traced.
    leak : float
        ``a`` in (0, 1]; may be traced.
    spectral_radius, density, bias, dtype, seed, use_sparse_eigs, construction
        Of ``W`` and ``b``, as for :class:`ESNDriver` (its ``reservoir``, built
        with the same seed and leak 1).
    """

    reservoir: ESNDriver
    activations: tuple[str, ...] = eqx.field(static=True)
    scaling: Float[Array, " n_activations"]
    leak: Float[Array, ""]

    def __check_init__(self):
        name = type(self).__name__
        _check_inner_esn(name, self.reservoir, self.res_dim)
        _check_activations(name, self.activations)
        check_leaf(name, "scaling", self.scaling, (len(self.activations),), self.dtype)
        check_leaf(name, "leak", self.leak, (), self.dtype)
        check_float("leak", self.leak, name, low=0.0, low_open=True, high=1.0)

    def __init__(
        self,
        res_dim: int,
        activations: tuple[str, ...] = ESN.activations,
        scaling=None,
        leak: float = ESN.leak_rate,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        name = type(self).__name__
        activations = _check_activations(name, activations)
        self.reservoir, _ = _inner_esn(
            name, res_dim, spectral_radius, density, bias, dtype, seed,
            use_sparse_eigs, construction,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        self.activations = activations
        self.leak = _scalar(leak, self.dtype)
        if scaling is None:  # the leak for each (made on the host from a number)
            d = len(activations)
            host = not isinstance(leak, jax.Array)
            scaling = np.full(d, leak) if host else jnp.full((d,), self.leak)
        elif isinstance(scaling, (list, tuple)):
            scaling = np.asarray(scaling)
        if np.shape(scaling) != (len(activations),):
            raise ValueError(
                f"{name}: scaling must hold one weight per activation, shape "
                f"({len(activations)},), got shape {np.shape(scaling)}"
            )
        self.scaling = device_array(scaling, self.dtype)

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``(1 - a) r + sum_d λ_d f_d(W r + p + b)``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        w = self.reservoir.wr
        z = (
            jnp.reshape(w @ res_state, res_state.shape)
            + proj_vars
            + self.reservoir.bias
        )
        new = sum(
            self.scaling[d] * MRNN_ACTIVATIONS[f](z)
            for d, f in enumerate(self.activations)
        )
        return (1 - self.leak) * res_state + new


def _transpose_matvec(w: ReservoirMatrix, x: Array) -> Array:
    """``W^T x`` for a bank of one ``W`` (an ELL matrix ``(1, n, k)``):
    each stored entry ``W[i, c]`` adds ``W[i, c] x[i]`` to entry ``c``."""
    contributions = w.values[0] * x[:, None]
    return jnp.zeros_like(x).at[w.columns[0]].add(contributions)


class EuSNDriver(DriverBase):
    """Euler state network (Gallicchio 2024, "Euler State Networks:
    Non-dissipative Reservoir Computing", Neurocomputing 579).

    ``r' = r + ε tanh((W - W^T - γ I) r + p + b)``: one forward-Euler step
    of an ODE whose recurrent matrix is antisymmetric (its eigenvalues are
    imaginary) but for the diffusion ``γ``, so the reservoir neither forgets
    quickly nor blows up, and keeps its input for long. ``W`` and ``b`` are
    those of the :class:`ESNDriver` of the same seed (sparse, scaled to
    ``spectral_radius`` before it is made antisymmetric; the default radius
    is small, 0.1, and the step large, 1). At the defaults 50 nodes had a
    memory capacity of 13.0, 13.9 and 5.7 (seeds 0-2; the ESN at orc's
    defaults 2.8, 4.0, 1.3), and 300 nodes forecast Lorenz63 for 0.7-1.4
    Lyapunov times (the ESN 8.8-11.6): a memory reservoir, for
    classification and memory tasks more than for chaotic forecasting.

    ReservoirComputing.jl's ``EuSN`` (0.12.35) documents this update but
    computes ``(1 - ε) r + ε tanh(...)``, a leaky ESN with the same matrix;
    ``ε`` here is the paper's step size.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=EuSNDriver(300, seed=0), readout=LinearReadout(3,
    300), embedding=LinearEmbedding(3, 300, 0.08, seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
    step_size : float
        ``ε`` > 0, the Euler step; may be traced.
    diffusion : float
        ``γ`` >= 0; may be traced.
    spectral_radius : float
        Of ``W`` before it is made antisymmetric (> 0).
    density, bias, dtype, seed, use_sparse_eigs, construction
        Of ``W`` and ``b``, as for :class:`ESNDriver` (its ``reservoir``,
        built with the same seed and leak 1).
    """

    reservoir: ESNDriver
    step_size: Float[Array, ""]
    diffusion: Float[Array, ""]

    def __check_init__(self):
        name = type(self).__name__
        _check_inner_esn(name, self.reservoir, self.res_dim)
        check_leaf(name, "step_size", self.step_size, (), self.dtype)
        check_leaf(name, "diffusion", self.diffusion, (), self.dtype)
        check_float("step_size", self.step_size, name, low=0.0, low_open=True)
        check_float("diffusion", self.diffusion, name, low=0.0)

    def __init__(
        self,
        res_dim: int,
        step_size: float = ESN.step_size,
        diffusion: float = ESN.diffusion,
        spectral_radius: float = ESN.euler_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        self.reservoir, _ = _inner_esn(
            type(self).__name__, res_dim, spectral_radius, density, bias, dtype, seed,
            use_sparse_eigs, construction,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        self.step_size = _scalar(step_size, self.dtype)
        self.diffusion = _scalar(diffusion, self.dtype)

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``r + ε tanh((W - W^T - γ I) r + p + b)``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        w = self.reservoir.wr
        z = (
            jnp.reshape(w @ res_state, res_state.shape)
            - _transpose_matvec(w, res_state)
            - self.diffusion * res_state
            + proj_vars
            + self.reservoir.bias
        )
        return res_state + self.step_size * jnp.tanh(z)


#: The skip maps ``O`` of a :class:`ResESNDriver`, by name.
RESIDUAL_MAPS = ("random", "cycle", "identity")


class ResESNDriver(DriverBase):
    """Residual echo state network (Ceni and Gallicchio 2024, "Residual Echo
    State Networks: Residual recurrent neural networks with stable dynamics
    and fast learning", Neurocomputing 597).

    ``r' = α O r + β tanh(W r + p + b)``: a skip connection through an
    orthogonal map ``O`` beside the ESN's update without leak, the two
    weighted apart (:class:`ES2NDriver` ties them, ``α = 1 - β``). ``O`` is
    ``"random"`` (Haar-distributed, dense: ``res_dim**2`` stored values and
    multiply-adds a step), ``"cycle"`` (unit ``i`` to unit ``i + 1``, the
    last to the first) or ``"identity"``. ``α < 1`` keeps the skip part
    contracting. ``W`` and ``b`` are an :class:`ESNDriver`'s, drawn from
    ``seed`` as :class:`ES2NDriver`'s are. ReservoirComputing.jl's
    ``ResESN``. At the defaults (α 0.7, β 0.5) 50 nodes had a memory
    capacity of 14.9 (a cycle: 16.0; the ESN at orc's defaults 2.8) and 300
    nodes forecast Lorenz63 for 5.0 and 8.8 Lyapunov times (seeds 0, 1; the
    ESN 8.8, 11.6); α 0.9 and β 0.1 remember 29.5 steps and forecast for 1.3.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=ResESNDriver(300, seed=0), readout=LinearReadout(3,
    300), embedding=LinearEmbedding(3, 300, 0.08, seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
    alpha : float
        ``α`` >= 0, the skip weight; may be traced.
    beta : float
        ``β`` > 0, the weight of the nonlinear update; may be traced.
    orthogonal : {"random", "cycle", "identity"}
        ``O``.
    spectral_radius, density, bias, dtype, seed, use_sparse_eigs, construction
        Of ``W`` and ``b``, as for :class:`ESNDriver` (its ``reservoir``, of
        leak 1); a random ``O`` is drawn from ``seed`` too.
    """

    reservoir: ESNDriver
    orthogonal_map: Float[Array, "res_dim res_dim"] | None
    alpha: Float[Array, ""]
    beta: Float[Array, ""]
    orthogonal: str = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        n = self.res_dim
        _check_inner_esn(name, self.reservoir, n)
        _check_residual_map(name, self.orthogonal)
        if (self.orthogonal == "random") != (self.orthogonal_map is not None):
            raise ValueError(
                f"{name}: orthogonal_map holds O exactly when orthogonal is 'random'"
            )
        if self.orthogonal_map is not None:
            check_leaf(name, "orthogonal_map", self.orthogonal_map, (n, n), self.dtype)
        check_leaf(name, "alpha", self.alpha, (), self.dtype)
        check_leaf(name, "beta", self.beta, (), self.dtype)
        check_float("alpha", self.alpha, name, low=0.0)
        check_float("beta", self.beta, name, low=0.0, low_open=True)

    def __init__(
        self,
        res_dim: int,
        alpha: float = ESN.residual_alpha,
        beta: float = ESN.residual_beta,
        orthogonal: str = ESN.residual_map,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        name = type(self).__name__
        _check_residual_map(name, orthogonal)
        # split as ES2N's, whichever the map: W is the same for every map
        self.reservoir, key = _inner_esn(
            name, res_dim, spectral_radius, density, bias, dtype, seed,
            use_sparse_eigs, construction, own_key=True,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        self.orthogonal = orthogonal
        self.orthogonal_map = None
        if orthogonal == "random":
            self.orthogonal_map = jax.random.orthogonal(key, res_dim, dtype=self.dtype)
        self.alpha = _scalar(alpha, self.dtype)
        self.beta = _scalar(beta, self.dtype)

    def skip(self, res_state: Float[Array, " res_dim"]) -> Float[Array, " res_dim"]:
        """``O r``."""
        if self.orthogonal == "random":
            return jnp.matmul(self.orthogonal_map, res_state, precision="highest")
        if self.orthogonal == "cycle":
            return jnp.roll(res_state, 1)
        return res_state

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``α O r + β tanh(W r + p + b)``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        nonlinear = self.reservoir.advance(proj_vars, res_state)
        return self.alpha * self.skip(res_state) + self.beta * nonlinear


class RMNDriver(DriverBase):
    """Reservoir memory network (Gallicchio and Ceni 2024, "Reservoir
    Memory Networks", ESANN): a linear memory beside a nonlinear reservoir.

    The state is ``[x, m]``: ``x``, the ``res_dim - memory_dim`` nodes of a
    leaky ESN, and ``m``, ``memory_dim`` nodes of a linear ring that keeps
    the recent input. The drive ``p`` is split the same way, ``[p_x, p_m]``
    (one embedding of ``res_dim`` outputs feeds both). A step is:

        m' = w P m + p_m                 (P: unit i to unit i + 1, the last to the first)
        x' = (1 - a) x + a tanh(W x + V m' + p_x + b)

    The ring shifts without mixing, so ``m`` holds the last inputs, scaled
    by ``w`` per step (the *memory weight*), and the coupling ``V``
    (``res_dim - memory_dim`` by ``memory_dim``, dense, drawn uniformly in
    ``[-coupling, coupling]`` from ``seed``) hands them to the nonlinear
    part. ``W`` and ``b`` are an :class:`ESNDriver`'s, drawn from ``seed``
    as :class:`ES2NDriver`'s and :class:`ResESNDriver`'s are (the same
    ``W`` for the same seed and size).

    The readout reads the whole state, ``x`` and ``m``: the paper and
    ReservoirComputing.jl's ``RMNESN`` read ``x`` alone; orc's readouts read
    a driver's state, and a ridge readout given the memory too can only fit
    better on the training data. The paper and RC.jl keep the ring
    at ``w = 1``, which never forgets: an input with a non-zero mean (as
    Lorenz63's ``z``) then grows the memory without bound, and the
    nonlinear part saturates. orc's default ``w``, 0.9, forgets slowly
    instead; ``w = 1`` is allowed. At the defaults 50 nodes (25 memory) had
    a memory capacity of 26.1, 25.5 (seeds 0, 1; the ESN at orc's defaults
    2.8, 4.0) and 300 nodes (100 memory) forecast Lorenz63 for 7.2 and 10.1
    Lyapunov times (the ESN 8.6, 8.6); ``benchmarks/DRIVERS.md`` compares
    it with the other drivers on NARMA10 too, where it is the best.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=RMNDriver(300, 100, seed=0),
    readout=LinearReadout(3, 300), embedding=LinearEmbedding(3, 300, 0.08,
    seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
        The whole state's size (nonlinear and memory nodes).
    memory_dim : int
        Memory nodes, ``1 <= memory_dim < res_dim``.
    leak : float
        ``a`` in (0, 1] of the nonlinear part; may be traced.
    memory_weight : float
        ``w`` in [0, 1]; may be traced.
    coupling : float
        Bound of ``V``'s draw (>= 0).
    spectral_radius, density, bias, dtype, seed, use_sparse_eigs, construction
        Of ``W`` and ``b``, as for :class:`ESNDriver` (its ``reservoir``, of
        ``res_dim - memory_dim`` nodes and leak 1); ``V`` is drawn from
        ``seed`` too.
    """

    reservoir: ESNDriver
    coupling_map: Float[Array, "nonlinear memory"]
    leak: Float[Array, ""]
    memory_weight: Float[Array, ""]
    memory_dim: int = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        check_int("memory_dim", self.memory_dim, name, minimum=1,
                  maximum=self.res_dim - 1)  # fmt: skip
        n_x = self.res_dim - self.memory_dim
        _check_inner_esn(name, self.reservoir, n_x)
        check_leaf(name, "coupling_map", self.coupling_map, (n_x, self.memory_dim),
                   self.dtype)  # fmt: skip
        check_leaf(name, "leak", self.leak, (), self.dtype)
        check_leaf(name, "memory_weight", self.memory_weight, (), self.dtype)
        check_float("leak", self.leak, name, low=0.0, low_open=True, high=1.0)
        check_float("memory_weight", self.memory_weight, name, low=0.0, high=1.0)

    def __init__(
        self,
        res_dim: int,
        memory_dim: int,
        leak: float = ESN.leak_rate,
        memory_weight: float = ESN.memory_weight,
        coupling: float = ESN.memory_coupling,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        name = type(self).__name__
        res_dim = check_int("res_dim", res_dim, name, minimum=2)
        memory_dim = check_int("memory_dim", memory_dim, name, minimum=1,
                               maximum=res_dim - 1)  # fmt: skip
        check_float("coupling", coupling, name, low=0.0)
        self.reservoir, key = _inner_esn(
            name, res_dim - memory_dim, spectral_radius, density, bias, dtype, seed,
            use_sparse_eigs, construction, own_key=True,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        self.memory_dim = memory_dim
        shape = (res_dim - memory_dim, memory_dim)
        self.coupling_map = coupling * jax.random.uniform(
            key, shape, self.dtype, minval=-1.0, maxval=1.0
        )
        self.leak = _scalar(leak, self.dtype)
        self.memory_weight = _scalar(memory_weight, self.dtype)

    def split(self, res_state: Array) -> tuple[Array, Array]:
        """``(x, m)``: the nonlinear part and the memory of a state."""
        return jnp.split(res_state, [self.res_dim - self.memory_dim], axis=-1)

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """``[x', m']`` from ``[x, m]`` and the drive ``[p_x, p_m]``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        (x, m), (p_x, p_m) = self.split(res_state), self.split(proj_vars)
        memory = self.memory_weight * jnp.roll(m, 1) + p_m
        recalled = jnp.matmul(self.coupling_map, memory, precision="highest")
        nonlinear = self.reservoir.advance(p_x + recalled, x)
        x = (1 - self.leak) * x + self.leak * nonlinear
        return jnp.concatenate([x, memory])


class EIESNDriver(DriverBase):
    """Excitatory-inhibitory echo state network (Panahi et al. 2025;
    ReservoirComputing.jl's ``EIESN`` and ``AdditiveEIESN``).

    Each node is the difference of an excitatory and an inhibitory
    population that see the same recurrent input ``W r`` at different
    strengths:

        r' = b_e tanh(p + a_e W r + β_e) - b_i tanh(p + a_i W r + β_i)

    or, ``additive=True``, with the drive added outside the populations:

        r' = b_e tanh(a_e W r + β_e) - b_i tanh(a_i W r + β_i) + p

    ``W`` is the :class:`ESNDriver`'s of the same seed (its bias unused).
    With equal biases and output scales (RC.jl's defaults: biases 0), the
    first form maps the zero state to zero whatever the input: a model
    started at rest never moves. orc's default biases differ (``β_e`` the
    ESN's bias, ``β_i`` 0), so it does: 50 nodes had a memory capacity of
    4.8, 6.6 and 3.1 (seeds 0-2; the ESN at orc's defaults 2.8, 4.0, 1.3),
    and 300 nodes forecast Lorenz63 for 7.2, 8.6 and 9.9 Lyapunov times
    (the ESN 8.6, 8.6, 10.0); the additive form, 9.9-10.2.

    Build a model around it as around any driver, e.g.
    ``RCForecasterBase(driver=EIESNDriver(300, seed=0), readout=LinearReadout(3,
    300), embedding=LinearEmbedding(3, 300, 0.08, seed=1))``. States ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
    exc_recurrence, inh_recurrence : float
        ``a_e``, ``a_i``; may be traced.
    exc_output, inh_output : float
        ``b_e``, ``b_i``; may be traced.
    exc_bias, inh_bias : float
        ``β_e``, ``β_i``; may be traced.
    additive : bool
        The second form.
    spectral_radius, density, dtype, seed, use_sparse_eigs, construction
        Of ``W``, as for :class:`ESNDriver`.
    """

    reservoir: ESNDriver
    exc_recurrence: Float[Array, ""]
    inh_recurrence: Float[Array, ""]
    exc_output: Float[Array, ""]
    inh_output: Float[Array, ""]
    exc_bias: Float[Array, ""]
    inh_bias: Float[Array, ""]
    additive: bool = eqx.field(static=True)

    def __check_init__(self):
        name = type(self).__name__
        _check_inner_esn(name, self.reservoir, self.res_dim)
        for field in _EIESN_SCALARS:
            check_leaf(name, field, getattr(self, field), (), self.dtype)
            check_float(field, getattr(self, field), name)
        if not isinstance(self.additive, bool):
            raise TypeError(f"{name}: additive must be a bool, got {self.additive!r}")

    def __init__(
        self,
        res_dim: int,
        exc_recurrence: float = ESN.exc_recurrence,
        inh_recurrence: float = ESN.inh_recurrence,
        exc_output: float = 1.0,
        inh_output: float = 1.0,
        exc_bias: float = ESN.bias,
        inh_bias: float = 0.0,
        additive: bool = False,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        dtype: type = jnp.float64,
        *,
        seed: int,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        values = arguments(locals())
        self.reservoir, _ = _inner_esn(
            type(self).__name__, res_dim, spectral_radius, density, 0.0, dtype, seed,
            use_sparse_eigs, construction,
        )  # fmt: skip
        super().__init__(res_dim, self.reservoir.dtype)
        for field in _EIESN_SCALARS:
            setattr(self, field, _scalar(values[field], self.dtype))
        self.additive = additive

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """The excitatory minus the inhibitory population (see the class)."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        recurrent = jnp.reshape(self.reservoir.wr @ res_state, res_state.shape)
        inside = 0.0 if self.additive else proj_vars
        excited = jnp.tanh(inside + self.exc_recurrence * recurrent + self.exc_bias)
        inhibited = jnp.tanh(inside + self.inh_recurrence * recurrent + self.inh_bias)
        new = self.exc_output * excited - self.inh_output * inhibited
        return new + proj_vars if self.additive else new


#: :class:`EIESNDriver`'s scalar parameters.
_EIESN_SCALARS = (
    "exc_recurrence", "inh_recurrence", "exc_output", "inh_output", "exc_bias",
    "inh_bias",
)  # fmt: skip


class LIFDriver(DriverBase):
    """A spiking reservoir of leaky integrate-and-fire neurons, in discrete
    time (reservoirpy's ``LIF`` node; the discrete form of
    ReservoirComputing.jl's ``LSM`` with ``LIFNeuron`` and
    ``MembraneVoltageFeature``).

    The state is the membrane potential ``v`` of each neuron. A step, in
    reservoirpy's order:

        v <- (1 - a) v                      (leak)
        z  = [v > threshold]                (fire: 1 or 0)
        v <- where(z, reset, v) + W z + p + b

    so a neuron that fires is reset and sends ``W[:, j]`` to the others.
    The readout reads ``v``; the spikes, reservoirpy's output, are
    :meth:`spikes` of the states. A spike is a step function of ``v``: its
    derivative is zero, so gradients pass through the leak and the input
    only.

    ``W`` is :func:`orc.initializers.dale_sparse` (RC.jl's ``LSM`` default):
    ``excitatory_fraction`` of the neurons send positive weights, the others
    negative, ``density`` of the entries non-zero, scaled to
    ``spectral_radius``. Any other ``W`` (reservoirpy's, say) goes in
    through :meth:`from_matrices`.

    Spikes carry little of an input: with one step per sample, 100 neurons
    at the defaults have a memory capacity of 1.4 (seeds 0-2; orc's ESN of
    100, 3.3), yet predict Mackey-Glass 10 steps ahead with an NRMSE of
    0.23-0.25 (that ESN 0.24-0.35, a linear map of the sample 0.97;
    ``tests/test_lif.py``). The input scaling decides whether
    neurons fire at all: embed with a scaling near 1, not the ESN's 0.08
    (e.g. ``LinearEmbedding(in_dim, res_dim, 1.0, seed=1)``). States
    ``(res_dim,)``.

    Parameters
    ----------
    res_dim : int
        Neurons.
    leak : float
        ``a`` in [0, 1]; may be traced (reservoirpy's ``lr``, whose default
        0 never leaks).
    threshold : float
        Firing threshold; may be traced.
    reset : float
        Potential after a spike (< threshold); may be traced.
    spectral_radius, density, excitatory_fraction
        Of ``W`` (:func:`orc.initializers.dale_sparse`).
    bias : float
        Constant drive ``b`` of every neuron.
    dtype, seed
    """

    reservoir: ESNDriver
    leak: Float[Array, ""]
    threshold: Float[Array, ""]
    reset: Float[Array, ""]

    def __check_init__(self):
        name = type(self).__name__
        _check_inner_esn(name, self.reservoir, self.res_dim)
        for field in ("leak", "threshold", "reset"):
            check_leaf(name, field, getattr(self, field), (), self.dtype)
        check_float("leak", self.leak, name, low=0.0, high=1.0)
        check_float("threshold", self.threshold, name)
        check_float("reset", self.reset, name, high=self.threshold, high_open=True)

    def __init__(
        self,
        res_dim: int,
        leak: float = ESN.spiking_leak,
        threshold: float = ESN.spike_threshold,
        reset: float = 0.0,
        spectral_radius: float = ESN.spiking_spectral_radius,
        density: float = MATRICES.density,
        excitatory_fraction: float = MATRICES.excitatory_fraction,
        bias: float = 0.0,
        dtype: type = jnp.float64,
        *,
        seed: int,
    ) -> None:
        name = type(self).__name__
        check_float("excitatory_fraction", excitatory_fraction, name, low=0.0,
                    high=1.0, low_open=True, high_open=True)  # fmt: skip
        check_float("density", density, name, low=0.0, high=1.0, low_open=True)
        check_float("spectral_radius", spectral_radius, name, low=0.0, low_open=True)
        W = dale_sparse(
            check_int("res_dim", res_dim, name, minimum=2), seed=seed,
            excitatory_fraction=excitatory_fraction, density=density,
            spectral_radius=spectral_radius, dtype=dtype,
        )  # fmt: skip
        self.reservoir = ESNDriver.from_matrices(
            W, leak=1.0, bias=bias, dtype=W.values.dtype
        )
        super().__init__(res_dim, self.reservoir.dtype)
        self.leak = _scalar(leak, self.dtype)
        self.threshold = _scalar(threshold, self.dtype)
        self.reset = _scalar(reset, self.dtype)

    @classmethod
    def from_matrices(
        cls,
        W,
        *,
        leak: float = ESN.spiking_leak,
        threshold: float = ESN.spike_threshold,
        reset: float = 0.0,
        bias=0.0,
        dtype=None,
    ) -> LIFDriver:
        """A spiking reservoir with the weights ``W`` you give, taken as
        given (any form :meth:`ESNDriver.from_matrices` takes). reservoirpy's
        ``LIF(W=W, lr=leak, threshold=threshold)`` fires the same spikes
        when its ``Win`` is the embedding's matrix."""
        reservoir = ESNDriver.from_matrices(W, leak=1.0, bias=bias, dtype=dtype)
        dtype = reservoir.dtype
        return from_fields(cls, dict(
            res_dim=reservoir.res_dim, dtype=dtype, chunks=0, reservoir=reservoir,
            leak=_scalar(leak, dtype), threshold=_scalar(threshold, dtype),
            reset=_scalar(reset, dtype),
        ))  # fmt: skip

    def advance(
        self, proj_vars: Float[Array, " res_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """Leak, fire, reset and integrate (see the class)."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        v = (1 - self.leak) * res_state
        fired = v > self.threshold
        kicks = jnp.reshape(self.reservoir.wr @ fired.astype(v.dtype), v.shape)
        return jnp.where(fired, self.reset, v) + kicks + proj_vars + self.reservoir.bias

    def spikes(
        self, states: Float[Array, "T res_dim"], initial_state: Array | None = None
    ) -> Float[Array, "T res_dim"]:
        """The spikes fired in each step of ``states`` (from
        ``initial_state``, default the zero state), 1 or 0: step ``t``
        fires where ``(1 - a) v[t - 1] > threshold``. reservoirpy's ``LIF``
        returns these."""
        states = jnp.asarray(states, self.dtype)
        if initial_state is None:
            initial_state = self.default_state()
        before = jnp.concatenate([jnp.asarray(initial_state, self.dtype)[None],
                                  states[:-1]])  # fmt: skip
        return ((1 - self.leak) * before > self.threshold).astype(self.dtype)


def _check_residual_map(owner: str, orthogonal) -> None:
    if orthogonal not in RESIDUAL_MAPS:
        raise ValueError(
            f"{owner}: orthogonal must be one of {RESIDUAL_MAPS}, got {orthogonal!r}"
        )


def _check_activations(owner: str, activations) -> tuple[str, ...]:
    """``activations`` as a tuple of names of :data:`MRNN_ACTIVATIONS` (at
    least one), else a ``ValueError``/``TypeError`` naming the argument."""
    if isinstance(activations, str) or not isinstance(activations, (tuple, list)):
        raise TypeError(
            f"{owner}: activations must be a tuple of names, got "
            f"{type(activations).__name__}"
        )
    unknown = [f for f in activations if f not in MRNN_ACTIVATIONS]
    if not activations or unknown:
        raise ValueError(
            f"{owner}: activations must be one or more of "
            f"{sorted(MRNN_ACTIVATIONS)}, got {tuple(activations)!r}"
        )
    return tuple(activations)


# --------------------------------------------------------------------------- #
# Deep (stacked) reservoirs
# --------------------------------------------------------------------------- #


def _check_drive(driver, proj_vars, res_state, size: int, what: str) -> None:
    """The shapes of one step of a ``driver`` whose drive has a ``size`` of
    its own (``what`` it is): ``proj_vars`` ``(size,)``, ``res_state``
    ``(res_dim,)``; otherwise a ``ValueError`` naming the argument."""
    name = type(driver).__name__
    if tuple(proj_vars.shape) != (size,):
        raise ValueError(
            f"{name}.advance: proj_vars must have shape ({size},) ({what}), got "
            f"{tuple(proj_vars.shape)}"
        )
    if tuple(res_state.shape) != (driver.res_dim,):
        raise ValueError(
            f"{name}.advance: res_state must have shape ({driver.res_dim},), got "
            f"{tuple(res_state.shape)}"
        )


class StackedDriver(DriverBase):
    """Deep reservoir: discrete-time layers in series (Gallicchio et al. 2017).

    Layer 0 is driven by the embedded input; layer ``l > 0`` by
    ``couplings[l - 1].embed(r_{l-1}')``, the *new* state of the layer below, so
    an input reaches every layer in the same step. The state is the
    concatenation ``[r_0, r_1, ...]`` of shape ``(sum of res_dim,)``; a readout
    on it reads every layer (the usual DeepESN readout).

    Parameters
    ----------
    layers : sequence of DriverBase
        Discrete-time drivers with states ``(res_dim,)`` (e.g. ``ESNDriver``),
        same dtype.
    couplings : sequence of EmbedBase
        ``len(layers) - 1`` maps from layer ``l - 1``'s state (``in_dim`` its
        ``res_dim``) to layer ``l``'s drive (``res_dim`` layer ``l``'s).

    Example
    -------
    >>> a, b = ESNDriver(50, seed=0), ESNDriver(30, seed=1)
    >>> d = StackedDriver([a, b], [LinearEmbedding(50, 30, 0.5, seed=2)])
    >>> d.advance(jnp.zeros(50), d.default_state()).shape
    (80,)
    """

    layers: tuple[DriverBase, ...]
    couplings: tuple[EmbedBase, ...]
    sizes: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, layers, couplings) -> None:
        name = type(self).__name__
        layers, couplings = tuple(layers), tuple(couplings)
        if not layers or not all(isinstance(d, DriverBase) for d in layers):
            raise TypeError(f"{name}: layers must be a non-empty sequence of drivers")
        self.sizes = tuple(d.res_dim for d in layers)
        super().__init__(sum(self.sizes), layers[0].dtype)
        self.layers, self.couplings = layers, couplings

    def __check_init__(self):
        name = type(self).__name__
        layers, couplings = self.layers, self.couplings
        if not layers or not all(isinstance(d, DriverBase) for d in layers):
            raise TypeError(f"{name}: layers must be a non-empty sequence of drivers")
        if not all(isinstance(c, EmbedBase) for c in couplings):
            raise TypeError(f"{name}: couplings must be embeddings (EmbedBase)")
        if len(couplings) != len(layers) - 1:
            raise ValueError(
                f"{name}: couplings must have len(layers) - 1 = {len(layers) - 1} "
                f"entries, got {len(couplings)}"
            )
        for i, d in enumerate(layers):
            if tuple(d.state_shape) != (d.res_dim,):
                raise ValueError(
                    f"{name}: layers[{i}] must be a single reservoir with states "
                    f"(res_dim,), got states {tuple(d.state_shape)}"
                )
            if getattr(d, "mode", "discrete") != "discrete":
                raise ValueError(f"{name}: layers[{i}] must be in discrete mode")
            if d.dtype != layers[0].dtype:
                raise ValueError(f"{name}: all layers must share one dtype")
        for i, c in enumerate(couplings):
            below, above = layers[i].res_dim, layers[i + 1].res_dim
            if (c.in_dim, c.res_dim) != (below, above) or c.out_shape != (above,):
                raise ValueError(
                    f"{name}: couplings[{i}] must map {below} -> {above} features "
                    f"(outputs ({above},)), got {c.in_dim} -> {c.res_dim}"
                )
        sizes = tuple(d.res_dim for d in layers)
        if self.sizes != sizes or self.res_dim != sum(sizes) or self.chunks:
            raise ValueError(
                f"{name}: sizes {self.sizes} and res_dim {self.res_dim} must be the "
                f"layers' sizes {sizes} and their sum"
            )

    def split(self, res_state: Array) -> list[Array]:
        """The per-layer states of a concatenated state."""
        bounds = list(itertools.accumulate(self.sizes[:-1]))
        return jnp.split(res_state, bounds, axis=-1)

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """One step of every layer; ``proj_vars`` drives layer 0 (``(res_dim_0,)``)."""
        _check_drive(self, proj_vars, res_state, self.sizes[0], "layer 0's res_dim")
        drive, new = proj_vars, []
        for i, (layer, r) in enumerate(
            zip(self.layers, self.split(res_state), strict=True)
        ):
            if i:
                drive = self.couplings[i - 1].embed(new[-1])
            new.append(layer.advance(drive, r))
        return jnp.concatenate(new)


class RECADriver(DriverBase):
    """Reservoir computing with an elementary cellular automaton (Yilmaz
    2014; Nichele and Molund 2017; ReservoirComputing.jl's ``RECA``).

    The reservoir is a ring of ``permutations * expansion_size`` binary
    cells. A step writes the input's bits into the cells at fixed random
    places (in each of ``permutations`` blocks of ``expansion_size`` cells,
    ``in_dim`` distinct places drawn from ``seed``, overwriting them), then
    runs the automaton ``rule`` (Wolfram's numbering, the ring closed) for
    ``generations`` steps. The state, which the readout reads, is those
    generations one after the other (``res_dim = generations *
    permutations * expansion_size`` values 0 or 1); the last is carried to
    the next step.

    The drive is the input itself: embed with the identity,
    ``LinearEmbedding.from_matrices(np.eye(in_dim))``. Inputs are bits: a
    value above 0.5 writes 1, any other 0. Nothing here has a derivative.
    At the defaults (RC.jl's: rule 90, 8 generations, 8 blocks of 40 cells)
    a ridge readout solves the 5-bit memory task with a 200-step distractor
    (all 32 sequences, ``tests/test_reca.py``); rule 0, which carries
    nothing, solves none.

    Parameters
    ----------
    in_dim : int
        Input bits, at most ``expansion_size``.
    rule : int
        The elementary automaton, 0-255.
    generations, permutations, expansion_size : int
    dtype, seed
    """

    positions: Int[Array, " n_places"]
    in_dim: int = eqx.field(static=True)
    rule: int = eqx.field(static=True)
    generations: int = eqx.field(static=True)
    permutations: int = eqx.field(static=True)
    expansion_size: int = eqx.field(static=True)

    def __init__(
        self,
        in_dim: int,
        rule: int = ESN.ca_rule,
        generations: int = ESN.ca_generations,
        permutations: int = ESN.ca_permutations,
        expansion_size: int = ESN.ca_expansion_size,
        dtype: type = jnp.float64,
        *,
        seed: int,
    ) -> None:
        name = type(self).__name__
        self.rule = check_int("rule", rule, name, minimum=0, maximum=255)
        self.generations = check_int("generations", generations, name, minimum=1)
        self.permutations = check_int("permutations", permutations, name, minimum=1)
        self.expansion_size = check_int("expansion_size", expansion_size, name,
                                        minimum=1)  # fmt: skip
        self.in_dim = check_int("in_dim", in_dim, name, minimum=1,
                                maximum=self.expansion_size)  # fmt: skip
        rng = numpy_rng(seed, name)
        places = [b * self.expansion_size + rng.permutation(self.expansion_size)[:in_dim]
                  for b in range(self.permutations)]  # fmt: skip
        self.positions = jnp.asarray(np.concatenate(places), jnp.int32)
        cells = self.permutations * self.expansion_size
        super().__init__(self.generations * cells, dtype)

    def __check_init__(self):
        name = type(self).__name__
        cells = self.permutations * self.expansion_size
        if self.res_dim != self.generations * cells or self.chunks:
            raise ValueError(
                f"{name}: res_dim {self.res_dim} must be generations * permutations "
                f"* expansion_size = {self.generations * cells}"
            )
        check_int("rule", self.rule, name, minimum=0, maximum=255)
        places = (self.permutations * self.in_dim,)
        if tuple(self.positions.shape) != places or not jnp.issubdtype(
            self.positions.dtype, jnp.integer
        ):
            raise ValueError(
                f"{name}: positions must be {places} integers, got "
                f"{tuple(self.positions.shape)} {self.positions.dtype}"
            )
        if not isinstance(self.positions, jax.core.Tracer):  # a loaded file's
            size = self.expansion_size
            offsets = np.arange(self.permutations)[:, None] * size
            within = np.asarray(self.positions).reshape(self.permutations, -1) - offsets
            check_index_bounds(name, "positions (within each block)", within, size)
            if any(len(set(block)) != len(block) for block in within.tolist()):
                raise ValueError(f"{name}: positions must be distinct within a block")

    def advance(
        self, proj_vars: Float[Array, " in_dim"], res_state: Float[Array, " res_dim"]
    ) -> Float[Array, " res_dim"]:
        """Write the bits, run the automaton, keep every generation."""
        _check_drive(self, proj_vars, res_state, self.in_dim, "the input's bits")
        cells = self.permutations * self.expansion_size
        bits = jnp.tile((proj_vars > 0.5).astype(jnp.int32), self.permutations)
        x = jnp.round(res_state[-cells:]).astype(jnp.int32).at[self.positions].set(bits)
        table = jnp.asarray([(self.rule >> k) & 1 for k in range(8)], jnp.int32)
        generations = []
        for _ in range(self.generations):
            x = table[4 * jnp.roll(x, 1) + 2 * x + jnp.roll(x, -1)]
            generations.append(x)
        return jnp.concatenate(generations).astype(self.dtype)


class _Delayed(DriverBase):
    """A driver around another, ``driver``, with ``num_delays`` delays and
    ``(num_delays + 1)`` times its state (:class:`StateDelayDriver`,
    :class:`InputDelayDriver`)."""

    driver: DriverBase
    num_delays: int = eqx.field(static=True)

    def __init__(self, driver: DriverBase, num_delays: int = ESN.num_delays) -> None:
        _check_delayed(type(self).__name__, driver, num_delays)
        super().__init__((num_delays + 1) * driver.res_dim, driver.dtype)
        self.driver, self.num_delays = driver, num_delays

    def __check_init__(self):
        _check_delayed(type(self).__name__, self.driver, self.num_delays, self)


class StateDelayDriver(_Delayed):
    """A driver whose state also holds its last states (Fleddermann et al.
    2025's state delays; ReservoirComputing.jl's ``StateDelayESN`` with
    ``stride=1``).

    The state is ``[r_t, r_{t-1}, ..., r_{t-D}]``, ``D = num_delays``: the
    wrapped ``driver``'s state and its ``D`` predecessors (zero before the
    start), so a readout on it reads the delayed states too and ``res_dim``
    is ``(D + 1)`` times the driver's. A step advances the driver with the
    drive ``p`` (the driver's size: embed to ``driver.res_dim``) and shifts
    the others back.

    On Lorenz63 (orc's defaults otherwise), an ESN of 100 nodes with two
    delays forecast for 9.9, 9.9 and 7.3 Lyapunov times (seeds 0-2), the
    ESN of 100 alone 5.2, 5.1, 8.5 and of 300 nodes 8.6, 8.6, 10.0: a
    smaller reservoir's run for a larger one's readout. At 50 nodes the
    delays did not help (0.8, 0.4, 7.2 against 2.3, 2.3, 5.0).

    Example
    -------
    >>> d = StateDelayDriver(ESNDriver(100, seed=0), num_delays=2)
    >>> model = RCForecasterBase(driver=d, readout=LinearReadout(3, 300),
    ...                          embedding=LinearEmbedding(3, 100, 0.08, seed=1))

    Parameters
    ----------
    driver : DriverBase
        A discrete-time driver with states ``(res_dim,)``.
    num_delays : int
        ``D`` >= 1.
    """

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """``[driver.advance(p, r_t), r_t, ..., r_{t-D+1}]``."""
        n = self.driver.res_dim
        _check_drive(self, proj_vars, res_state, n, "the driver's res_dim")
        new = self.driver.advance(proj_vars, res_state[:n])
        return jnp.concatenate([new, res_state[: self.num_delays * n]])


class InputDelayDriver(_Delayed):
    """A driver fed its last inputs too (Fleddermann et al. 2025's input
    delays; ReservoirComputing.jl's ``InputDelayESN`` with ``stride=1``).

    The wrapped ``driver`` is driven by ``p^0_t + p^1_{t-1} + ... +
    p^D_{t-D}``, ``D = num_delays``: the embedding gives ``(D + 1)`` drives
    a step, ``[p^0, ..., p^D]`` (embed to ``(D + 1) * driver.res_dim``; with
    a linear embedding ``W_in = [W^0; ...; W^D]`` that is RC.jl's
    ``W_in [u_t; u_{t-1}; ...; u_{t-D}]``). The drives still to come wait in
    the state, as partial sums ``s^k = p^k_t + p^{k+1}_{t-1} + ...``
    (``k = 1..D``), so the state is ``[r, s^1, ..., s^D]`` and ``res_dim`` is
    ``(D + 1)`` times the driver's. The readout reads it all: the sums are
    linear in the last ``D`` inputs, which RC.jl's readout does not see.

    The driver sees the sum of ``D + 1`` drives: divide the embedding's
    scaling by ``D + 1`` to keep its size. So embedded (0.04), an ESN of 300
    nodes with one delay forecast Lorenz63 for 11.4, 11.3 and 11.2 Lyapunov
    times (seeds 0-2, the median of five windows), the ESN alone 10.4, 9.9
    and 11.0; at the full scaling (0.08), 8.6, 8.6 and 9.7.

    Example
    -------
    >>> d = InputDelayDriver(ESNDriver(100, seed=0), num_delays=2)
    >>> model = RCForecasterBase(driver=d, readout=LinearReadout(3, 300),
    ...                          embedding=LinearEmbedding(3, 300, 0.08 / 3, seed=1))

    Its parameters are :class:`StateDelayDriver`'s: the ``driver`` (discrete,
    states ``(res_dim,)``) and ``num_delays``, ``D`` >= 1.
    """

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """``r' = driver.advance(p^0 + s^1, r)``, ``s'^k = p^k + s^{k+1}``."""
        n = self.driver.res_dim
        what = "(num_delays + 1) * the driver's res_dim"
        _check_drive(self, proj_vars, res_state, self.res_dim, what)
        r, waiting = res_state[:n], res_state[n:]
        new = self.driver.advance(proj_vars[:n] + waiting[:n], r)
        later = jnp.concatenate([waiting[n:], jnp.zeros(n, waiting.dtype)])
        return jnp.concatenate([new, proj_vars[n:] + later])


def _check_delayed(owner, driver, num_delays, built=None) -> None:
    """A delay driver's wrapped ``driver`` (discrete, states ``(res_dim,)``)
    and ``num_delays`` (>= 1); of a ``built`` one, its ``res_dim`` too."""
    if not isinstance(driver, DriverBase):
        raise TypeError(f"{owner}: driver must be a driver (DriverBase)")
    if tuple(driver.state_shape) != (driver.res_dim,):
        raise ValueError(
            f"{owner}: driver must be a single reservoir with states (res_dim,), "
            f"got states {tuple(driver.state_shape)}"
        )
    if getattr(driver, "mode", "discrete") != "discrete":
        raise ValueError(f"{owner}: driver must be in discrete mode")
    num_delays = check_int("num_delays", num_delays, owner, minimum=1)
    if built is not None and (
        built.res_dim != (num_delays + 1) * driver.res_dim or built.chunks
    ):
        raise ValueError(
            f"{owner}: res_dim {built.res_dim} must be (num_delays + 1) times the "
            f"driver's {driver.res_dim}"
        )


def _check_coupling_scaling(owner, coupling_scaling) -> None:
    """The deep ESN's value invariant, one rule for a constructor's argument
    and for a built or loaded driver's couplings (its ``__check_init__``,
    which :func:`orc.load` runs): ``coupling_scaling``, the bound of the
    uniform draw of the inter-layer weights, is finite and >= 0 (the
    couplings' ``scaling``). Traced values pass."""
    check_float("coupling_scaling", coupling_scaling, owner, low=0.0)


class DeepESNDriver(StackedDriver):
    """``n_layers`` echo state reservoirs of ``res_dim`` nodes in series.

    Every layer is an :class:`ESNDriver` with the same hyperparameters (its own
    random ``W``); layer ``l`` receives ``W_l r_{l-1}'`` with a dense
    ``W_l ~ U(-coupling_scaling, coupling_scaling)``. State ``(n_layers * res_dim,)``.

    Parameters
    ----------
    res_dim : int
        Nodes per layer.
    n_layers : int
    coupling_scaling : float
        Scale of the inter-layer weights.
    leak, spectral_radius, density, bias, dtype, seed, use_sparse_eigs
        As for :class:`ESNDriver`.

    Example
    -------
    >>> d = DeepESNDriver(100, n_layers=3, seed=0)
    >>> d.default_state().shape
    (300,)
    """

    def __check_init__(self):
        name = type(self).__name__
        for i, c in enumerate(self.couplings):
            scaling = getattr(c, "scaling", None)
            if scaling is None:  # a given matrix: no draw to bound
                continue
            try:
                _check_coupling_scaling(name, scaling)
            except (TypeError, ValueError) as err:
                raise type(err)(f"{err} (couplings[{i}].scaling)") from err

    def __init__(
        self,
        res_dim: int,
        n_layers: int = ESN.n_layers,
        coupling_scaling: float = ESN.coupling_scaling,
        leak: float = ESN.leak_rate,
        spectral_radius: float = ESN.Wr_spectral_radius,
        density: float = ESN.Wr_density,
        bias: float = ESN.bias,
        dtype=jnp.float64,
        *,
        seed,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
    ) -> None:
        name = type(self).__name__
        n_layers = check_int("n_layers", n_layers, name, minimum=1)
        _check_coupling_scaling(name, coupling_scaling)
        keys = spawn(seed, 2 * n_layers, name)
        layers = [
            ESNDriver(
                res_dim,
                leak,
                spectral_radius,
                density,
                bias,
                dtype,
                seed=keys[2 * i],
                use_sparse_eigs=use_sparse_eigs,
            )
            for i in range(n_layers)
        ]
        couplings = [
            LinearEmbedding(
                res_dim, res_dim, coupling_scaling, dtype, seed=keys[2 * i + 1]
            )
            for i in range(1, n_layers)
        ]
        super().__init__(layers, couplings)
